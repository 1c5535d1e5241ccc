/* checks.c — argument checks shared by every op of the OpenCL backend: the dtype table that
 * supports() and the ops both read (so they cannot disagree), tensor bounds against the
 * buffer sizes kept on the host, the scalars block and tensor lists. The rules and messages
 * are the CPU backend's, so a caller sees the same error for the same mistake on both.
 */
#include <stdio.h>
#include <string.h>

#include "ocl.h"

ampx_status ocl_take_args(ampx_context *ctx, const char *opname, const void *args, void *local,
                          size_t local_size) {
    if (!ctx) return AMPX_ERR_INVALID; /* nowhere to log */
    if (!args) return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: args is NULL", opname);
    uint32_t size;
    memcpy(&size, args, sizeof size);
    if (size < sizeof(uint32_t))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: args size %u too small", opname, size);
    memset(local, 0, local_size);
    memcpy(local, args, size < local_size ? size : local_size);
    return AMPX_OK;
}

static int is_float(ampx_dtype dt) {
    return ampx_dtype_is_float(dt);
}

static int all_float(const ampx_dtype *dt, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!is_float(dt[i])) return 0;
    return 1;
}

/* The dtype table, per op heading in backend.h. */
int ocl_dtypes_ok(uint32_t op, const ampx_dtype *dt, uint32_t n) {
    if (n > 0 && !dt) return 0;
    switch (op) {
    case AMPX_OP_GEMM: return n == 3 && all_float(dt, 3); /* {A, B, C} */
    case AMPX_OP_CAST: return n == 2 && all_float(dt, 2); /* {src, dst} */
    case AMPX_OP_ADD:                                     /* {a, b, y} */
    case AMPX_OP_MUL: return n == 3 && all_float(dt, 3);
    case AMPX_OP_SCALE: return n == 2 && all_float(dt, 2);         /* {x, y} */
    case AMPX_OP_BIAS_GRAD: return n == 2 && all_float(dt, 2);     /* {dy, db} */
    case AMPX_OP_ACT_FWD: return n == 2 && all_float(dt, 2);       /* {x, y} */
    case AMPX_OP_ACT_BWD: return n == 3 && all_float(dt, 3);       /* {x, dy, dx} */
    case AMPX_OP_SOFTMAX_FWD: return n == 2 && all_float(dt, 2);   /* {x, y} */
    case AMPX_OP_SOFTMAX_BWD: return n == 3 && all_float(dt, 3);   /* {y, dy, dx} */
    case AMPX_OP_SOFTMAX_XENT: return n == 2 && all_float(dt, 2);  /* {logits, dlogits} */
    case AMPX_OP_LAYERNORM_FWD: return n == 2 && all_float(dt, 2); /* {x, y} */
    case AMPX_OP_LAYERNORM_BWD: return n == 3 && all_float(dt, 3); /* {x, dy, dx} */
    case AMPX_OP_BATCHNORM_FWD: return n == 2 && all_float(dt, 2); /* {x, y} */
    case AMPX_OP_BATCHNORM_BWD: return n == 3 && all_float(dt, 3); /* {x, dy, dx} */
    case AMPX_OP_EMBEDDING_FWD: return n == 2 && all_float(dt, 2); /* {table, y} */
    case AMPX_OP_EMBEDDING_BWD:                                    /* {dy, dtable f32} */
        return n == 2 && is_float(dt[0]) && dt[1] == AMPX_F32;
    case AMPX_OP_REDUCE: return n == 2 && all_float(dt, 2);    /* {x, y} */
    case AMPX_OP_SUM_SQUARES:                                  /* {x} */
    case AMPX_OP_UNSCALE_CHECK:                                /* {g} */
    case AMPX_OP_GRAD_STATS: return n == 1 && is_float(dt[0]); /* {g} */
    case AMPX_OP_SCALER_UPDATE: return n == 0;                 /* no dtypes */
    case AMPX_OP_SGD:                                          /* {grad} */
    case AMPX_OP_ADAMW: return n == 1 && is_float(dt[0]);
    default: return 0;
    }
}

ampx_status ocl_check_dtypes(ampx_context *ctx, const char *opname, uint32_t op,
                             const ampx_dtype *dt, uint32_t n) {
    if (ocl_dtypes_ok(op, dt, n)) return AMPX_OK;
    char list[128] = "";
    for (uint32_t i = 0; i < n && strlen(list) + 12 < sizeof list; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, ampx_dtype_name(dt[i]));
    }
    return ocl_fail(ctx, AMPX_ERR_UNSUPPORTED, "%s: unsupported dtypes {%s}", opname, list);
}

ampx_status ocl_check_tensor(ampx_context *ctx, const char *opname, const char *name,
                             const ampx_tensor *t, uint64_t n_elems, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: %s is a null buffer", opname, name);
    }
    size_t es = ampx_dtype_size(t->dtype);
    if (es == 0)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: %s has unknown dtype %d", opname, name,
                        (int)t->dtype);
    if (t->offset % es != 0)
        return ocl_fail(ctx, AMPX_ERR_INVALID,
                        "%s: %s offset %llu is not a multiple of the %s size %zu", opname, name,
                        (unsigned long long)t->offset, ampx_dtype_name(t->dtype), es);
    uint64_t bytes, end;
    if (ocl_mul_u64(n_elems, es, &bytes) || __builtin_add_overflow(t->offset, bytes, &end) ||
        end > t->buf->bytes)
        return ocl_fail(ctx, AMPX_ERR_INVALID,
                        "%s: %s of %llu %s elements at offset %llu overruns its buffer of %llu "
                        "bytes",
                        opname, name, (unsigned long long)n_elems, ampx_dtype_name(t->dtype),
                        (unsigned long long)t->offset, (unsigned long long)t->buf->bytes);
    return AMPX_OK;
}

ampx_status ocl_check_tensor_dt(ampx_context *ctx, const char *opname, const char *name,
                                const ampx_tensor *t, ampx_dtype want, uint64_t n_elems,
                                int optional) {
    if (t->buf && t->dtype != want)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: %s must be %s, not %s", opname, name,
                        ampx_dtype_name(want), ampx_dtype_name(t->dtype));
    return ocl_check_tensor(ctx, opname, name, t, n_elems, optional);
}

ampx_status ocl_check_scalars(ampx_context *ctx, const char *opname, const ampx_tensor *t,
                              int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: scalars is a null buffer", opname);
    }
    uint64_t end;
    if (t->offset % 4 != 0)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: scalars offset %llu is not 4-byte aligned",
                        opname, (unsigned long long)t->offset);
    if (__builtin_add_overflow(t->offset, (uint64_t)sizeof(ampx_scalars), &end) ||
        end > t->buf->bytes)
        return ocl_fail(ctx, AMPX_ERR_INVALID,
                        "%s: scalars block (%zu bytes) at offset %llu overruns its buffer of "
                        "%llu bytes",
                        opname, sizeof(ampx_scalars), (unsigned long long)t->offset,
                        (unsigned long long)t->buf->bytes);
    return AMPX_OK;
}

ampx_status ocl_check_list(ampx_context *ctx, const char *opname, const char *name,
                           const ampx_tensor_list *l) {
    if (l->count == 0) return AMPX_OK;
    if (!l->tensors || !l->n_elems)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: %s has %u tensors but a NULL %s", opname, name,
                        l->count, l->tensors ? "n_elems" : "tensors array");
    for (uint32_t t = 0; t < l->count; t++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%u]", name, t);
        if (l->tensors[t].buf && !is_float(l->tensors[t].dtype))
            return ocl_fail(ctx, AMPX_ERR_UNSUPPORTED, "%s: %s has unsupported dtype %s", opname,
                            what, ampx_dtype_name(l->tensors[t].dtype));
        OCL_TRY(ocl_check_tensor(ctx, opname, what, &l->tensors[t], l->n_elems[t], 0));
    }
    return AMPX_OK;
}
