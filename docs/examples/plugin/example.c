/* example.c — a complete ampx backend in plain C on host memory: libampx-example.so.
 *
 * It implements the ops models/mlp.json trains with (GEMM, CAST, ADD, BIAS_GRAD, ACT_FWD,
 * ACT_BWD, SOFTMAX_XENT, SUM_SQUARES, UNSCALE_CHECK, SCALER_UPDATE, ADAMW) for every float
 * dtype, one straightforward loop each, and leaves the other slots NULL (unsupported). Every
 * argument check is plugin_kit.h's: an op takes its args with ampx_kit_take_<op> and, once
 * that returned AMPX_OK, computes. Slow on purpose: it is the shape of a plugin, not a fast
 * one. docs/PLUGINS.md walks through it.
 *
 * Build: cmake (CMakeLists.txt, find_package(ampx)) or make (Makefile, pkg-config
 * ampx-plugin). It needs only the installed headers and never links libampx.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "ampx/kernel_math.h"
#include "ampx/plugin_kit.h"

#define EXAMPLE_VERSION "1.0"

// ---------------------------------------------------------------------------------------
// Buffers and the context: host memory, so a buffer is a pointer and its size.

struct ampx_buffer {
    unsigned char *data;
    uint64_t bytes;
};

struct ampx_context {
    ampx_kit kit; /* the host's log and how to read a buffer's size: what the checks need */
    int verbose;  /* option verbose=0|1: log one DEBUG line per op */
};

static uint64_t buffer_bytes(const ampx_buffer *buf) {
    return buf->bytes;
}

/* Element i of a tensor as f32 (exact) and back (rounded to nearest even): dtype.h. */
static float ld(const ampx_tensor *t, uint64_t i) {
    const unsigned char *p = t->buf->data + t->offset;
    switch (t->dtype) {
    case AMPX_BF16: return ampx_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMPX_F16: return ampx_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static void st(const ampx_tensor *t, uint64_t i, float v) {
    unsigned char *p = t->buf->data + t->offset;
    switch (t->dtype) {
    case AMPX_BF16: ((uint16_t *)p)[i] = ampx_f32_to_bf16(v); break;
    case AMPX_F16: ((uint16_t *)p)[i] = ampx_f32_to_f16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

static float *f32_at(const ampx_tensor *t) {
    return (float *)(void *)(t->buf->data + t->offset);
}

static ampx_scalars *scalars_at(const ampx_tensor *t) {
    return (ampx_scalars *)(void *)(t->buf->data + t->offset);
}

// ---------------------------------------------------------------------------------------
// The ops. Each: take and check (the kit), then compute in f32 or wider, store once.

static ampx_status ex_gemm(ampx_context *ctx, const ampx_gemm_args *args) {
    ampx_gemm_args g;
    AMPX_KIT_TRY(ampx_kit_take_gemm(AMPX_KIT(ctx), args, &g, NULL));
    /* supports() does not claim AMPX_SHAPE_GEMM_EPILOGUE: the host runs ADD, ACT_FWD and
     * BIAS_GRAD instead, and a GEMM that asks for the epilogue anyway is refused */
    if (ampx_kit_gemm_epilogue(&g))
        return ampx_kit_fail(AMPX_KIT(ctx), AMPX_ERR_UNSUPPORTED, "gemm: no epilogue here");
    if (ctx->verbose)
        ampx_kit_log(&ctx->kit, AMPX_LOG_DEBUG, "gemm m=%llu n=%llu k=%llu batch=%llu",
                     (unsigned long long)g.m, (unsigned long long)g.n, (unsigned long long)g.k,
                     (unsigned long long)g.batch);
    /* batches one after the other: overlapping C matrices then come out as the ABI orders */
    for (uint64_t b = 0; b < g.batch; b++)
        for (uint64_t i = 0; i < g.m; i++)
            for (uint64_t j = 0; j < g.n; j++) {
                float acc = 0.0f;
                for (uint64_t p = 0; p < g.k; p++) {
                    uint64_t ia = b * g.stride_a + (g.trans_a ? p * g.lda + i : i * g.lda + p);
                    uint64_t ib = b * g.stride_b + (g.trans_b ? j * g.ldb + p : p * g.ldb + j);
                    acc += ld(&g.a, ia) * ld(&g.b, ib);
                }
                uint64_t ic = b * g.stride_c + i * g.ldc + j;
                float c     = g.alpha * acc;
                if (g.beta != 0.0f) c += g.beta * ld(&g.c, ic); /* beta 0: C is not read */
                st(&g.c, ic, c);
            }
    return AMPX_OK;
}

static ampx_status ex_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    AMPX_KIT_TRY(ampx_kit_take_cast(AMPX_KIT(ctx), args, &a));
    for (uint64_t i = 0; i < a.n; i++) {
        float v = ld(&a.src, i);
        if (a.src.dtype == a.dst.dtype) { /* a copy, bit for bit (NaN payloads too) */
            size_t es = ampx_dtype_size(a.src.dtype);
            memmove(a.dst.buf->data + a.dst.offset + i * es,
                    a.src.buf->data + a.src.offset + i * es, es);
        } else if (a.rounding == AMPX_ROUND_STOCHASTIC && a.dst.dtype != AMPX_F32) {
            uint32_t rnd = ampx_hash32(a.seed, i);
            ((uint16_t *)(void *)(a.dst.buf->data + a.dst.offset))[i] =
                a.dst.dtype == AMPX_BF16 ? ampx_f32_to_bf16_sr(v, rnd) : ampx_f32_to_f16_sr(v, rnd);
        } else {
            st(&a.dst, i, v);
        }
    }
    return AMPX_OK;
}

static ampx_status ex_add(ampx_context *ctx, const ampx_add_args *args) {
    ampx_add_args a;
    AMPX_KIT_TRY(ampx_kit_take_add(AMPX_KIT(ctx), args, &a));
    /* with broadcast_b, b's one row is copied first: y may be b in place, and writing y's
     * first row would change the row the others still read */
    float *row = NULL;
    if (a.broadcast_b && a.rows > 0) {
        row = malloc((size_t)(a.cols ? a.cols : 1) * sizeof *row);
        if (!row) return ampx_kit_fail(&ctx->kit, AMPX_ERR_NO_MEMORY, "add: out of memory");
        for (uint64_t c = 0; c < a.cols; c++)
            row[c] = ld(&a.b, c);
    }
    for (uint64_t r = 0; r < a.rows; r++)
        for (uint64_t c = 0; c < a.cols; c++) {
            uint64_t i = r * a.cols + c;
            float bv   = row ? row[c] : ld(&a.b, i);
            st(&a.y, i, a.alpha * ld(&a.a, i) + a.beta * bv);
        }
    free(row);
    return AMPX_OK;
}

static ampx_status ex_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *args) {
    ampx_bias_grad_args a;
    AMPX_KIT_TRY(ampx_kit_take_bias_grad(AMPX_KIT(ctx), args, &a));
    for (uint64_t c = 0; c < a.cols; c++) {
        float sum = a.accumulate ? ld(&a.db, c) : 0.0f;
        for (uint64_t r = 0; r < a.rows; r++)
            sum += ld(&a.dy, r * a.cols + c);
        st(&a.db, c, sum);
    }
    return AMPX_OK;
}

/* f(x) and f'(x) are kernel_math.h's, in double from the f32 input and rounded once to f32,
 * as the cpu and cuda backends compute them. */
static ampx_status ex_act_fwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    AMPX_KIT_TRY(ampx_kit_take_act_fwd(AMPX_KIT(ctx), args, &a));
    for (uint64_t i = 0; i < a.n; i++)
        st(&a.y_or_dx, i, (float)ampx_km_act_f(a.act, ld(&a.x, i)));
    return AMPX_OK;
}

static ampx_status ex_act_bwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    AMPX_KIT_TRY(ampx_kit_take_act_bwd(AMPX_KIT(ctx), args, &a));
    for (uint64_t i = 0; i < a.n; i++)
        st(&a.y_or_dx, i, (float)((double)ld(&a.dy, i) * ampx_km_act_df(a.act, ld(&a.x, i))));
    return AMPX_OK;
}

static ampx_status ex_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *args) {
    ampx_softmax_xent_args a;
    AMPX_KIT_TRY(ampx_kit_take_softmax_xent(AMPX_KIT(ctx), args, &a));
    const int32_t *labels = (const int32_t *)(void *)(a.labels.buf->data + a.labels.offset);
    uint64_t n_valid = 0, bad = 0;
    for (uint64_t r = 0; r < a.rows; r++)
        if (labels[r] != a.ignore_index) {
            n_valid++;
            bad |= labels[r] < 0 || (uint64_t)labels[r] >= a.cols;
        }
    double scale = a.scalars.buf ? (double)scalars_at(&a.scalars)->scale : 1.0;
    double g     = n_valid ? (double)a.grad_scale / (double)n_valid * scale : 0.0;
    double loss  = 0.0;
    for (uint64_t r = 0; r < a.rows; r++) {
        int valid = labels[r] != a.ignore_index && !bad;
        double mx = -INFINITY, sum = 0.0;
        for (uint64_t c = 0; c < a.cols; c++)
            mx = fmax(mx, (double)ld(&a.logits, r * a.cols + c));
        for (uint64_t c = 0; c < a.cols; c++)
            sum += exp((double)ld(&a.logits, r * a.cols + c) - mx);
        if (valid) loss += mx + log(sum) - (double)ld(&a.logits, r * a.cols + (uint64_t)labels[r]);
        if (!a.dlogits.buf) continue;
        for (uint64_t c = 0; c < a.cols; c++) {
            double p = exp((double)ld(&a.logits, r * a.cols + c) - mx) / sum;
            double d = valid ? g * (p - (c == (uint64_t)labels[r] ? 1.0 : 0.0)) : 0.0;
            st(&a.dlogits, r * a.cols + c, (float)d);
        }
    }
    *f32_at(&a.loss) = bad ? NAN : (n_valid ? (float)(loss / (double)n_valid) : 0.0f);
    return AMPX_OK;
}

static ampx_status ex_sum_squares(ampx_context *ctx, const ampx_sum_squares_args *args) {
    ampx_sum_squares_args a;
    AMPX_KIT_TRY(ampx_kit_take_sum_squares(AMPX_KIT(ctx), args, &a));
    double sum = a.accumulate ? (double)*f32_at(&a.out) : 0.0;
    for (uint32_t t = 0; t < a.x.count; t++)
        for (uint64_t i = 0; i < a.x.n_elems[t]; i++) {
            double v = ld(&a.x.tensors[t], i);
            sum += v * v;
        }
    *f32_at(&a.out) = (float)sum;
    return AMPX_OK;
}

static ampx_status ex_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *args) {
    ampx_unscale_check_args a;
    AMPX_KIT_TRY(ampx_kit_take_unscale_check(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_at(&a.scalars);
    int32_t *flags  = (int32_t *)(void *)(a.flags.buf->data + a.flags.offset) + a.flag_base;
    float inv_scale = ampx_km_inv_scale(s->scale); /* kernel_math.h */
    int multiply    = s->mode != AMPX_SCALER_NONE;
    for (uint32_t t = 0; t < a.grads.count; t++) {
        const ampx_tensor *g = &a.grads.tensors[t];
        int bad              = 0;
        for (uint64_t i = 0; i < a.grads.n_elems[t]; i++) {
            if (multiply) st(g, i, ld(g, i) * inv_scale);
            bad |= !isfinite(ld(g, i)); /* the value as stored */
        }
        flags[t] = bad;
        s->found_inf |= bad;
    }
    return AMPX_OK;
}

static ampx_status ex_scaler_update(ampx_context *ctx, const ampx_scaler_update_args *args) {
    ampx_scaler_update_args a;
    AMPX_KIT_TRY(ampx_kit_take_scaler_update(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_at(&a.scalars);
    /* the kit has backend.h's pseudo-code for a block in host memory, PyTorch's arithmetic */
    ampx_kit_scaler_update(s, ampx_kit_scaler_factor(a.growth_factor_f64, s->growth_factor),
                           ampx_kit_scaler_factor(a.backoff_factor_f64, s->backoff_factor));
    return AMPX_OK;
}

static ampx_status ex_adamw(ampx_context *ctx, const ampx_adamw_args *args) {
    ampx_adamw_args a;
    AMPX_KIT_TRY(ampx_kit_take_adamw(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_at(&a.scalars);
    if (s->found_inf) return AMPX_OK; /* a skipped step writes nothing */
    float lr   = ampx_scheduled_lr(s, s->applied_steps);
    s->lr      = lr;
    double c   = ampx_km_clip_coef(a.max_grad_norm, /* kernel_math.h */
                                 a.grad_sq_sum.buf ? f32_at(&a.grad_sq_sum) : NULL);
    double t   = (double)s->applied_steps + 1.0;
    double bc1 = 1.0 - pow((double)a.beta1, t), bc2 = 1.0 - pow((double)a.beta2, t);
    for (uint32_t k = 0; k < a.params.count; k++) {
        float *p = f32_at(&a.params.tensors[k]), *m = f32_at(&a.m[k]), *v = f32_at(&a.v[k]);
        double wd = a.wd ? (double)a.wd[k] : (double)a.weight_decay;
        for (uint64_t i = 0; i < a.params.n_elems[k]; i++) {
            double g  = c * (double)ld(&a.grads[k], i);
            double pi = (double)p[i] * (1.0 - (double)lr * wd);
            m[i]      = (float)(a.beta1 * (double)m[i] + (1.0 - a.beta1) * g);
            v[i]      = (float)(a.beta2 * (double)v[i] + (1.0 - a.beta2) * g * g);
            p[i] = (float)(pi - lr * ((double)m[i] / bc1) / (sqrt((double)v[i] / bc2) + a.eps));
            if (a.copies && a.copies[k].buf) {
                const ampx_tensor *cp = &a.copies[k];
                if (a.stochastic_copy)
                    ((uint16_t *)(void *)(cp->buf->data + cp->offset))[i] =
                        cp->dtype == AMPX_BF16
                            ? ampx_f32_to_bf16_sr(p[i], ampx_hash32(a.seed + k, i))
                            : ampx_f32_to_f16_sr(p[i], ampx_hash32(a.seed + k, i));
                else
                    st(cp, i, p[i]);
            }
        }
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Buffers: the kit checks ranges and pointers; what is left is memcpy.

static ampx_status ex_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    AMPX_KIT_TRY(ampx_kit_check_alloc(AMPX_KIT(ctx), out));
    ampx_buffer *b = malloc(sizeof *b);
    if (b) b->data = bytes < SIZE_MAX ? calloc(1, bytes ? (size_t)bytes : 1) : NULL;
    if (!b || !b->data) {
        free(b);
        return ampx_kit_fail(&ctx->kit, AMPX_ERR_NO_MEMORY,
                             "buffer_alloc: cannot allocate %llu bytes", (unsigned long long)bytes);
    }
    b->bytes = bytes;
    *out     = b;
    return AMPX_OK;
}

static void ex_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    (void)ctx;
    if (buf) free(buf->data);
    free(buf);
}

static ampx_status ex_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                   const void *src, uint64_t bytes) {
    AMPX_KIT_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 0, dst, offset, src, bytes));
    if (bytes) memcpy(dst->data + offset, src, (size_t)bytes);
    return AMPX_OK;
}

static ampx_status ex_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset,
                                  void *dst, uint64_t bytes) {
    AMPX_KIT_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 1, src, offset, dst, bytes));
    if (bytes) memcpy(dst, src->data + offset, (size_t)bytes);
    return AMPX_OK;
}

static ampx_status ex_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                                  const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    AMPX_KIT_TRY(ampx_kit_check_copy(AMPX_KIT(ctx), dst, dst_offset, src, src_offset, bytes));
    if (bytes) memmove(dst->data + dst_offset, src->data + src_offset, (size_t)bytes);
    return AMPX_OK;
}

static ampx_status ex_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                  uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes) {
    AMPX_KIT_TRY(ampx_kit_check_fill(AMPX_KIT(ctx), dst, offset, bytes, pattern_bytes));
    ampx_kit_fill_host(dst->data + offset, bytes, pattern, pattern_bytes);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Probe, create, destroy, device_info, supports, synchronize

static ampx_status ex_probe(char *reason, size_t cap) {
    if (reason && cap) snprintf(reason, cap, "host memory, always usable");
    return AMPX_OK;
}

static ampx_status ex_create(const ampx_host *host, ampx_context **out) {
    ampx_host h;
    ampx_kit kit;
    AMPX_KIT_TRY(ampx_kit_begin_create(host, out, "example", buffer_bytes, &h, &kit));
    int verbose = 0;
    for (uint32_t i = 0; i < h.n_options; i++) {
        ampx_kit_option o = {NULL, 0, NULL};
        unsigned long v   = 0;
        AMPX_KIT_TRY(ampx_kit_option_at(&kit, &h, i, &o));
        if (!ampx_kit_option_is(&o, "verbose")) return ampx_kit_option_unknown(&kit, &o, "verbose");
        AMPX_KIT_TRY(ampx_kit_option_uint(&kit, &o, 0, 1, &v));
        verbose = (int)v;
    }
    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ampx_kit_fail(&kit, AMPX_ERR_NO_MEMORY, "example: out of memory");
    ctx->kit     = kit;
    ctx->verbose = verbose;
    *out         = ctx;
    return AMPX_OK;
}

static void ex_destroy(ampx_context *ctx) {
    free(ctx);
}

static ampx_status ex_device_info(ampx_context *ctx, ampx_device_info *info) {
    ampx_device_info d;
    AMPX_KIT_TRY(ampx_kit_begin_device_info(AMPX_KIT(ctx), info, &d));
    snprintf(d.name, sizeof d.name, "example (host memory, one thread)");
    snprintf(d.description, sizeof d.description,
             "ampx example backend %s: plain C loops, the ops of models/mlp.json", EXAMPLE_VERSION);
    d.n_threads = 1;
    return ampx_kit_end_device_info(info, &d);
}

/* The ops above, every float dtype the ABI allows for them; nothing else. */
static int ex_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes, uint32_t n,
                       uint32_t shape_class) {
    (void)ctx;
    switch (op) {
    case AMPX_OP_GEMM:
    case AMPX_OP_CAST:
    case AMPX_OP_ADD:
    case AMPX_OP_BIAS_GRAD:
    case AMPX_OP_ACT_FWD:
    case AMPX_OP_ACT_BWD:
    case AMPX_OP_SOFTMAX_XENT:
    case AMPX_OP_SUM_SQUARES:
    case AMPX_OP_UNSCALE_CHECK:
    case AMPX_OP_SCALER_UPDATE:
    case AMPX_OP_ADAMW: return ampx_kit_supports(op, dtypes, n, shape_class);
    default: return 0;
    }
}

static ampx_status ex_synchronize(ampx_context *ctx) {
    return ctx ? AMPX_OK : AMPX_ERR_INVALID; /* every op ran to completion when it returned */
}

// ---------------------------------------------------------------------------------------
// The tables and the one exported symbol

static const ampx_backend_ops ex_ops = {
    .size          = sizeof(ampx_backend_ops),
    .gemm          = ex_gemm,
    .cast          = ex_cast,
    .add           = ex_add,
    .bias_grad     = ex_bias_grad,
    .act_fwd       = ex_act_fwd,
    .act_bwd       = ex_act_bwd,
    .softmax_xent  = ex_softmax_xent,
    .sum_squares   = ex_sum_squares,
    .unscale_check = ex_unscale_check,
    .scaler_update = ex_scaler_update,
    .adamw         = ex_adamw,
};

static const ampx_backend_iface ex_iface = {
    .size         = sizeof(ampx_backend_iface),
    .abi_major    = AMPX_ABI_MAJOR,
    .abi_minor    = AMPX_ABI_MINOR,
    .name         = "example",
    .version      = EXAMPLE_VERSION,
    .probe        = ex_probe,
    .create       = ex_create,
    .destroy      = ex_destroy,
    .device_info  = ex_device_info,
    .supports     = ex_supports,
    .buffer_alloc = ex_buffer_alloc,
    .buffer_free  = ex_buffer_free,
    .buffer_write = ex_buffer_write,
    .buffer_read  = ex_buffer_read,
    .buffer_copy  = ex_buffer_copy,
    .buffer_fill  = ex_buffer_fill,
    .synchronize  = ex_synchronize,
    .ops          = &ex_ops,
};

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor);

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor) {
    (void)host_abi_minor; /* minors are append-only: a newer host reads what we have */
    return host_abi_major == AMPX_ABI_MAJOR ? &ex_iface : NULL;
}
