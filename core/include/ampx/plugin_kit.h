/* ampx/plugin_kit.h — what every backend plugin needs besides its kernels, header-only.
 *
 * A plugin includes backend.h, dtype.h and this header, and links nothing of the core. The
 * kit gives it:
 *   - ampx_kit: the host's log callback, the plugin's name and how to read a buffer's size,
 *     kept in the plugin's context (a member named `kit` makes AMPX_KIT(ctx) work);
 *   - ampx_kit_take_<op>(kit, args, &local): the op's args copied by their size (ABI rule 2:
 *     a field beyond the caller's size reads as 0) and every argument checked against the
 *     op's contract in backend.h: null tensors, dtypes (the table supports() answers from),
 *     shapes that overflow 64 bits, tensors that overrun their buffer, offsets that are not
 *     a multiple of the dtype size, unknown enums, the scalars block, tensor lists. On
 *     failure it logs one ERROR line ("gemm: lda 3 < k 4") and returns the status; a kernel
 *     that runs after an AMPX_OK may trust its arguments;
 *   - the buffer entry points' checks (ranges within the buffer, NULL host pointers, fill
 *     patterns), create()'s (host struct by size, ABI major, "key=value" options) and
 *     device_info()'s (the host's struct written only within its size);
 *   - through kernel_math.h (included here), the scalar numerics every backend computes the
 *     same way: the activations and their derivatives, one step of the loss scaler.
 * The in-tree backends (cpu, opencl, cuda) and docs/examples/plugin use it, so the same
 * mistake gets the same message on every backend, and tests/test_cpu_args.c pins the words.
 *
 * Everything is static inline: include it from as many files of the plugin as needed.
 */
#ifndef AMPX_PLUGIN_KIT_H
#define AMPX_PLUGIN_KIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dtype.h"
#include "kernel_math.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AMPX_KIT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMPX_KIT_PRINTF(f, a)
#endif

// ---------------------------------------------------------------------------------------
// The kit and its log

/* The size in bytes the host asked for when it allocated buf (the plugin's own record). */
typedef uint64_t (*ampx_kit_buffer_bytes_fn)(const ampx_buffer *buf);

typedef struct ampx_kit {
    ampx_log_fn log;                       /* the host's callback; NULL drops messages */
    void *log_user;                        /* passed back to log */
    const char *name;                      /* the plugin's short name: "cpu", "example" */
    ampx_kit_buffer_bytes_fn buffer_bytes; /* reads a buffer's size */
} ampx_kit;

/* The kit of a context whose struct has a member `kit`, or NULL for a NULL context (then
 * every check fails with AMPX_ERR_INVALID and logs nothing: there is nowhere to log). */
#define AMPX_KIT(ctx) ((ctx) ? &(ctx)->kit : (const ampx_kit *)0)

/* Returns the status of expr when it is not AMPX_OK. */
#define AMPX_KIT_TRY(expr)                                                                         \
    do {                                                                                           \
        ampx_status ampx_kit_st_ = (expr);                                                         \
        if (ampx_kit_st_ != AMPX_OK) return ampx_kit_st_;                                          \
    } while (0)

static inline void ampx_kit_vlog(const ampx_kit *kit, ampx_log_level level, const char *fmt,
                                 va_list ap) {
    if (!kit || !kit->log) return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    kit->log(kit->log_user, level, msg);
}

static inline void ampx_kit_log(const ampx_kit *kit, ampx_log_level level, const char *fmt, ...)
    AMPX_KIT_PRINTF(3, 4);
static inline void ampx_kit_log(const ampx_kit *kit, ampx_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampx_kit_vlog(kit, level, fmt, ap);
    va_end(ap);
}

/* Logs one ERROR line and returns st. */
static inline ampx_status ampx_kit_fail(const ampx_kit *kit, ampx_status st, const char *fmt, ...)
    AMPX_KIT_PRINTF(3, 4);
static inline ampx_status ampx_kit_fail(const ampx_kit *kit, ampx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampx_kit_vlog(kit, AMPX_LOG_ERROR, fmt, ap);
    va_end(ap);
    return st;
}

/* a * b with overflow detection: 0 and *out, or -1 on overflow. */
static inline int ampx_kit_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

// ---------------------------------------------------------------------------------------
// Args by size, dtypes, tensors

/* Copies an args struct into a zeroed local of the size this plugin was built with, reading
 * only the first size bytes the caller states (its first field). */
static inline ampx_status ampx_kit_take(const ampx_kit *kit, const char *opname, const void *args,
                                        void *local, size_t local_size) {
    if (!kit) return AMPX_ERR_INVALID; /* nowhere to log */
    if (!args) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args is NULL", opname);
    uint32_t size;
    memcpy(&size, args, sizeof size);
    if (size < sizeof(uint32_t))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args size %u too small", opname, size);
    memset(local, 0, local_size);
    memcpy(local, args, size < local_size ? size : local_size);
    return AMPX_OK;
}

static inline int ampx_kit_all_float(const ampx_dtype *dt, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!ampx_dtype_is_float(dt[i])) return 0;
    return 1;
}

/* The dtypes every op of backend.h accepts, in the order of its heading: n_dtypes of them
 * (AMPX_OPS), each a float dtype, f32 where the op's f32 bit says so. A backend that takes
 * all of them answers supports() with this; one that takes fewer narrows it and refuses the
 * rest in its op (ampx_kit_check_dtypes with its own table). */
static inline int ampx_kit_dtypes_ok(uint32_t op, const ampx_dtype *dt, uint32_t n) {
#define AMPX_KIT_HEADING_(index, slot, OP, args, n_dtypes, f32) {n_dtypes, f32},
    static const struct { uint8_t n, f32; } heading[AMPX_OP_COUNT] = {AMPX_OPS(AMPX_KIT_HEADING_)};
#undef AMPX_KIT_HEADING_
    if ((n > 0 && !dt) || op >= AMPX_OP_COUNT || n != heading[op].n) return 0;
    if (op == AMPX_OP_FP8_QUANTIZE) /* one side fp8, the other a float dtype */
        return (ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_float(dt[1])) ||
               (ampx_dtype_is_float(dt[0]) && ampx_dtype_is_fp8(dt[1]));
    if (op == AMPX_OP_GEMM_FP8) /* fp8 operands, a float C */
        return ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_fp8(dt[1]) && ampx_dtype_is_float(dt[2]);
    for (uint32_t i = 0; i < n; i++)
        if ((heading[op].f32 >> i & 1) ? dt[i] != AMPX_F32 : !ampx_dtype_is_float(dt[i])) return 0;
    return 1;
}

/* supports() for a backend that implements every op with every dtype of ampx_kit_dtypes_ok. */
static inline int ampx_kit_supports(uint32_t op, const ampx_dtype *dt, uint32_t n,
                                    uint32_t shape_class) {
    if (op >= AMPX_OP_COUNT || shape_class != AMPX_SHAPE_ANY) return 0;
    return ampx_kit_dtypes_ok(op, dt, n);
}

/* The dtypes of a call against ampx_kit_dtypes_ok: UNSUPPORTED with "<op>: unsupported
 * dtypes {bf16, f32}" if not. */
static inline ampx_status ampx_kit_check_dtypes(const ampx_kit *kit, const char *opname,
                                                uint32_t op, const ampx_dtype *dt, uint32_t n) {
    if (ampx_kit_dtypes_ok(op, dt, n)) return AMPX_OK;
    char list[128] = "";
    for (uint32_t i = 0; i < n && strlen(list) + 12 < sizeof list; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, ampx_dtype_name(dt[i]));
    }
    return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED, "%s: unsupported dtypes {%s}", opname, list);
}

static inline ampx_status ampx_kit_check_dtypes2(const ampx_kit *kit, const char *opname,
                                                 uint32_t op, ampx_dtype a, ampx_dtype b) {
    ampx_dtype dt[2] = {a, b};
    return ampx_kit_check_dtypes(kit, opname, op, dt, 2);
}

static inline ampx_status ampx_kit_check_dtypes3(const ampx_kit *kit, const char *opname,
                                                 uint32_t op, ampx_dtype a, ampx_dtype b,
                                                 ampx_dtype c) {
    ampx_dtype dt[3] = {a, b, c};
    return ampx_kit_check_dtypes(kit, opname, op, dt, 3);
}

/* t names n_elems elements of its dtype inside its buffer: buf not NULL, a known dtype, the
 * offset a multiple of the dtype size, offset + n_elems * size <= the buffer's size. With
 * `optional`, a NULL buf is fine. */
static inline ampx_status ampx_kit_check_tensor(const ampx_kit *kit, const char *opname,
                                                const char *name, const ampx_tensor *t,
                                                uint64_t n_elems, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is a null buffer", opname, name);
    }
    size_t es = ampx_dtype_size(t->dtype);
    if (es == 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s has unknown dtype %d", opname, name,
                             (int)t->dtype);
    if (t->offset % es != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s offset %llu is not a multiple of the %s size %zu", opname,
                             name, (unsigned long long)t->offset, ampx_dtype_name(t->dtype), es);
    uint64_t bytes, end, have = kit->buffer_bytes(t->buf);
    if (ampx_kit_mul_u64(n_elems, es, &bytes) || __builtin_add_overflow(t->offset, bytes, &end) ||
        end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s of %llu %s elements at offset %llu overruns its buffer of "
                             "%llu bytes",
                             opname, name, (unsigned long long)n_elems, ampx_dtype_name(t->dtype),
                             (unsigned long long)t->offset, (unsigned long long)have);
    return AMPX_OK;
}

/* As ampx_kit_check_tensor, and the dtype must be `want` (f32 statistics, i32 labels). */
static inline ampx_status ampx_kit_check_tensor_dt(const ampx_kit *kit, const char *opname,
                                                   const char *name, const ampx_tensor *t,
                                                   ampx_dtype want, uint64_t n_elems,
                                                   int optional) {
    if (t->buf && t->dtype != want)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s must be %s, not %s", opname, name,
                             ampx_dtype_name(want), ampx_dtype_name(t->dtype));
    return ampx_kit_check_tensor(kit, opname, name, t, n_elems, optional);
}

/* The scalars block: 4-byte aligned, a whole ampx_scalars inside the buffer. */
static inline ampx_status ampx_kit_check_scalars(const ampx_kit *kit, const char *opname,
                                                 const ampx_tensor *t, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: scalars is a null buffer", opname);
    }
    uint64_t end, have = kit->buffer_bytes(t->buf);
    if (t->offset % 4 != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: scalars offset %llu is not 4-byte aligned",
                             opname, (unsigned long long)t->offset);
    if (__builtin_add_overflow(t->offset, (uint64_t)sizeof(ampx_scalars), &end) || end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: scalars block (%zu bytes) at offset %llu overruns its buffer "
                             "of %llu bytes",
                             opname, sizeof(ampx_scalars), (unsigned long long)t->offset,
                             (unsigned long long)have);
    return AMPX_OK;
}

/* A tensor list: tensors and n_elems non-NULL when count > 0, each tensor in bounds with a
 * float dtype (UNSUPPORTED for another). */
static inline ampx_status ampx_kit_check_list(const ampx_kit *kit, const char *opname,
                                              const char *name, const ampx_tensor_list *l) {
    if (l->count == 0) return AMPX_OK;
    if (!l->tensors || !l->n_elems)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s has %u tensors but a NULL %s", opname,
                             name, l->count, l->tensors ? "n_elems" : "tensors array");
    for (uint32_t t = 0; t < l->count; t++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%u]", name, t);
        if (l->tensors[t].buf && !ampx_dtype_is_float(l->tensors[t].dtype))
            return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED, "%s: %s has unsupported dtype %s",
                                 opname, what, ampx_dtype_name(l->tensors[t].dtype));
        AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, what, &l->tensors[t], l->n_elems[t], 0));
    }
    return AMPX_OK;
}

/* rows x cols without overflow: "<op>: rows x cols overflows". */
static inline ampx_status ampx_kit_rows_cols(const ampx_kit *kit, const char *opname, uint64_t rows,
                                             uint64_t cols, uint64_t *n) {
    if (ampx_kit_mul_u64(rows, cols, n))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: rows x cols overflows", opname);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// GEMM

/* Elements spanned by `batch` matrices of rows x cols with leading dimension ld and batch
 * stride: the index of the last element + 1, 0 when nothing is touched, -1 on overflow. */
static inline int ampx_kit_gemm_extent(uint64_t batch, uint64_t stride, uint64_t rows,
                                       uint64_t cols, uint64_t ld, uint64_t *out) {
    *out = 0;
    if (batch == 0 || rows == 0 || cols == 0) return 0;
    uint64_t x, y, z;
    if (ampx_kit_mul_u64(batch - 1, stride, &x) || ampx_kit_mul_u64(rows - 1, ld, &y) ||
        __builtin_add_overflow(x, y, &z) || __builtin_add_overflow(z, cols, out))
        return -1;
    return 0;
}

static inline ampx_status ampx_kit_check_ld(const ampx_kit *kit, const char *on, const char *name,
                                            uint64_t ld, const char *dim, uint64_t need) {
    if (ld >= need) return AMPX_OK;
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s %llu < %s %llu", on, name,
                         (unsigned long long)ld, dim, (unsigned long long)need);
}

/* GEMM: dtypes, leading dimensions, and A, B, C within their buffers. extent (may be NULL)
 * receives the elements A, B and C span (A and B count 0 when m, n, k or batch is 0: they
 * are not read then). */
/* 1 when a GEMM asks for any part of the ABI 1.5 epilogue (bias, act, pre_act, bias_grad).
 * A plugin that does not answer AMPX_SHAPE_GEMM_EPILOGUE refuses such a GEMM. */
static inline int ampx_kit_gemm_epilogue(const ampx_gemm_args *g) {
    return g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf || g->bias_grad.buf;
}

/* The epilogue's fields: act a known activation, bias [n] and pre_act (C's extent) of a float
 * dtype, bias_grad f32 [n]. */
static inline ampx_status ampx_kit_check_gemm_epilogue(const ampx_kit *kit, const char *on,
                                                       const ampx_gemm_args *g, uint64_t ext_c) {
    if (g->act > AMPX_GEMM_ACT(AMPX_ACT_COUNT - 1))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown epilogue act %u", on, g->act);
    if ((g->bias.buf && !ampx_dtype_is_float(g->bias.dtype)) ||
        (g->pre_act.buf && !ampx_dtype_is_float(g->pre_act.dtype)))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias and pre_act must be float", on);
    if (g->bias_grad.buf && g->bias_grad.dtype != AMPX_F32)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias_grad must be f32, not %s", on,
                             ampx_dtype_name(g->bias_grad.dtype));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "bias", &g->bias, g->n, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "pre_act", &g->pre_act, ext_c, 1));
    return ampx_kit_check_tensor(kit, on, "bias_grad", &g->bias_grad, g->n, 1);
}

/* The checks of a GEMM's fields once taken, for GEMM and GEMM_FP8 (op, named on). */
static inline ampx_status ampx_kit_check_gemm_(const ampx_kit *kit, const char *on, uint32_t op,
                                               const ampx_gemm_args *g, uint64_t extent[3]) {
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, on, op, g->a.dtype, g->b.dtype, g->c.dtype));
    uint64_t need_lda = g->trans_a ? g->m : g->k, need_ldb = g->trans_b ? g->k : g->n;
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "lda", g->lda, g->trans_a ? "m" : "k", need_lda));
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "ldb", g->ldb, g->trans_b ? "k" : "n", need_ldb));
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "ldc", g->ldc, "n", g->n));
    int reads_ab   = g->m && g->n && g->k && g->batch;
    uint64_t ext_a = 0, ext_b = 0, ext_c = 0;
    if ((reads_ab && (ampx_kit_gemm_extent(g->batch, g->stride_a, g->trans_a ? g->k : g->m,
                                           g->trans_a ? g->m : g->k, g->lda, &ext_a) ||
                      ampx_kit_gemm_extent(g->batch, g->stride_b, g->trans_b ? g->n : g->k,
                                           g->trans_b ? g->k : g->n, g->ldb, &ext_b))) ||
        ampx_kit_gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, &ext_c))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: shape and strides overflow 64 bits", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "A", &g->a, ext_a, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "B", &g->b, ext_b, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "C", &g->c, ext_c, 0));
    AMPX_KIT_TRY(ampx_kit_check_gemm_epilogue(kit, on, g, ext_c));
    if (extent) extent[0] = ext_a, extent[1] = ext_b, extent[2] = ext_c;
    return AMPX_OK;
}

static inline ampx_status ampx_kit_take_gemm(const ampx_kit *kit, const ampx_gemm_args *args,
                                             ampx_gemm_args *g, uint64_t extent[3]) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "gemm", args, g, sizeof *g));
    return ampx_kit_check_gemm_(kit, "gemm", AMPX_OP_GEMM, g, extent);
}

// ---------------------------------------------------------------------------------------
// CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD, ACT_BWD

static inline ampx_status ampx_kit_take_cast(const ampx_kit *kit, const ampx_cast_args *args,
                                             ampx_cast_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "cast", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "cast", "src", &a->src, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "cast", "dst", &a->dst, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "cast", AMPX_OP_CAST, a->src.dtype, a->dst.dtype));
    if (a->rounding != AMPX_ROUND_NEAREST_EVEN && a->rounding != AMPX_ROUND_STOCHASTIC)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "cast: unknown rounding %u", a->rounding);
    return AMPX_OK;
}

/* ADD and MUL: y, a of rows x cols; b of cols (broadcast_b) or rows x cols. */
static inline ampx_status ampx_kit_check_binary(const ampx_kit *kit, const char *opname,
                                                uint32_t op, uint32_t broadcast_b, uint64_t rows,
                                                uint64_t cols, const ampx_tensor *a,
                                                const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, opname, op, a->dtype, b->dtype, y->dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, opname, rows, cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, "a", a, n, 0));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor(kit, opname, "b", b, broadcast_b ? (rows ? cols : 0) : n, 0));
    return ampx_kit_check_tensor(kit, opname, "y", y, n, 0);
}

static inline ampx_status ampx_kit_take_add(const ampx_kit *kit, const ampx_add_args *args,
                                            ampx_add_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "add", args, a, sizeof *a));
    return ampx_kit_check_binary(kit, "add", AMPX_OP_ADD, a->broadcast_b, a->rows, a->cols, &a->a,
                                 &a->b, &a->y);
}

static inline ampx_status ampx_kit_take_mul(const ampx_kit *kit, const ampx_mul_args *args,
                                            ampx_mul_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "mul", args, a, sizeof *a));
    return ampx_kit_check_binary(kit, "mul", AMPX_OP_MUL, a->broadcast_b, a->rows, a->cols, &a->a,
                                 &a->b, &a->y);
}

static inline ampx_status ampx_kit_take_scale(const ampx_kit *kit, const ampx_scale_args *args,
                                              ampx_scale_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "scale", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "scale", AMPX_OP_SCALE, a->x.dtype, a->y.dtype));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "scale", "x", &a->x, a->n, 0));
    return ampx_kit_check_tensor(kit, "scale", "y", &a->y, a->n, 0);
}

static inline ampx_status ampx_kit_take_bias_grad(const ampx_kit *kit,
                                                  const ampx_bias_grad_args *args,
                                                  ampx_bias_grad_args *a) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, "bias_grad", args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, "bias_grad", AMPX_OP_BIAS_GRAD, a->dy.dtype, a->db.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, "bias_grad", a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "bias_grad", "dy", &a->dy, n, 0));
    return ampx_kit_check_tensor(kit, "bias_grad", "db", &a->db, a->cols, 0);
}

static inline ampx_status ampx_kit_take_act_fwd(const ampx_kit *kit, const ampx_act_args *args,
                                                ampx_act_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "act_fwd", args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, "act_fwd", AMPX_OP_ACT_FWD, a->x.dtype, a->y_or_dx.dtype));
    if (a->act >= AMPX_ACT_COUNT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "act_fwd: unknown activation %u", a->act);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_fwd", "x", &a->x, a->n, 0));
    return ampx_kit_check_tensor(kit, "act_fwd", "y", &a->y_or_dx, a->n, 0);
}

static inline ampx_status ampx_kit_take_act_bwd(const ampx_kit *kit, const ampx_act_args *args,
                                                ampx_act_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "act_bwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, "act_bwd", AMPX_OP_ACT_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    if (a->act >= AMPX_ACT_COUNT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "act_bwd: unknown activation %u", a->act);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_bwd", "x", &a->x, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_bwd", "dy", &a->dy, a->n, 0));
    return ampx_kit_check_tensor(kit, "act_bwd", "dx", &a->y_or_dx, a->n, 0);
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD, SOFTMAX_BWD, SOFTMAX_XENT

static inline ampx_status ampx_kit_check_softmax(const ampx_kit *kit, const char *opname,
                                                 const ampx_softmax_args *a, int bwd) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, opname, a->rows, a->cols, &n));
    if (a->causal && (a->seq_q == 0 || a->seq_q > a->cols))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: causal seq_q %llu not in [1, cols %llu]",
                             opname, (unsigned long long)a->seq_q, (unsigned long long)a->cols);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, bwd ? "y" : "x", &a->x_or_y, n, 0));
    if (bwd) AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, "dy", &a->dy, n, 0));
    return ampx_kit_check_tensor(kit, opname, bwd ? "dx" : "y", &a->y_or_dx, n, 0);
}

static inline ampx_status ampx_kit_take_softmax_fwd(const ampx_kit *kit,
                                                    const ampx_softmax_args *args,
                                                    ampx_softmax_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "softmax_fwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "softmax_fwd", AMPX_OP_SOFTMAX_FWD, a->x_or_y.dtype,
                                        a->y_or_dx.dtype));
    return ampx_kit_check_softmax(kit, "softmax_fwd", a, 0);
}

static inline ampx_status ampx_kit_take_softmax_bwd(const ampx_kit *kit,
                                                    const ampx_softmax_args *args,
                                                    ampx_softmax_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "softmax_bwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, "softmax_bwd", AMPX_OP_SOFTMAX_BWD, a->x_or_y.dtype,
                                        a->dy.dtype, a->y_or_dx.dtype));
    return ampx_kit_check_softmax(kit, "softmax_bwd", a, 1);
}

/* The dtype of dlogits as supports() sees it: f32 when dlogits is absent (loss only). */
static inline ampx_dtype ampx_kit_xent_ddt(const ampx_softmax_xent_args *a) {
    return a->dlogits.buf ? a->dlogits.dtype : AMPX_F32;
}

static inline ampx_status ampx_kit_take_softmax_xent(const ampx_kit *kit,
                                                     const ampx_softmax_xent_args *args,
                                                     ampx_softmax_xent_args *a) {
    static const char *op = "softmax_xent";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_SOFTMAX_XENT, a->logits.dtype,
                                        ampx_kit_xent_ddt(a)));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "logits", &a->logits, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "labels", &a->labels, AMPX_I32, a->rows, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "loss", &a->loss, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dlogits", &a->dlogits, n, 1));
    return ampx_kit_check_scalars(kit, op, &a->scalars, 1);
}

// ---------------------------------------------------------------------------------------
// LAYERNORM_FWD, LAYERNORM_BWD, BATCHNORM_FWD, BATCHNORM_BWD

static inline ampx_status ampx_kit_take_layernorm_fwd(const ampx_kit *kit,
                                                      const ampx_layernorm_args *args,
                                                      ampx_layernorm_args *a) {
    static const char *op = "layernorm_fwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, op, AMPX_OP_LAYERNORM_FWD, a->x.dtype, a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "y", &a->y_or_dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", &a->gamma, AMPX_F32, a->cols, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "beta", &a->beta, AMPX_F32, a->cols, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", &a->mean, AMPX_F32, a->rows, 0));
    return ampx_kit_check_tensor_dt(kit, op, "rstd", &a->rstd, AMPX_F32, a->rows, 0);
}

/* The backward's tensors, shared by layer and batch norm: x, dy, dx of n elements, the
 * statistics of `stats` and the parameter gradients of `params` elements. */
static inline ampx_status ampx_kit_check_norm_bwd(const ampx_kit *kit, const char *op, uint64_t n,
                                                  uint64_t params, uint64_t stats,
                                                  const ampx_tensor *x, const ampx_tensor *dy,
                                                  const ampx_tensor *dx, const ampx_tensor *gamma,
                                                  const ampx_tensor *mean, const ampx_tensor *rstd,
                                                  const ampx_tensor *dgamma,
                                                  const ampx_tensor *dbeta) {
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dy", dy, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dx", dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", gamma, AMPX_F32, params, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", mean, AMPX_F32, stats, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "rstd", rstd, AMPX_F32, stats, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "dgamma", dgamma, AMPX_F32, params, 1));
    return ampx_kit_check_tensor_dt(kit, op, "dbeta", dbeta, AMPX_F32, params, 1);
}

static inline ampx_status ampx_kit_take_layernorm_bwd(const ampx_kit *kit,
                                                      const ampx_layernorm_args *args,
                                                      ampx_layernorm_args *a) {
    static const char *op = "layernorm_bwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, op, AMPX_OP_LAYERNORM_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    return ampx_kit_check_norm_bwd(kit, op, n, a->cols, a->rows, &a->x, &a->dy, &a->y_or_dx,
                                   &a->gamma, &a->mean, &a->rstd, &a->dgamma, &a->dbeta);
}

static inline ampx_status ampx_kit_bn_shape(const ampx_kit *kit, const char *op,
                                            const ampx_batchnorm_args *a, uint64_t *n) {
    uint64_t oc;
    if (ampx_kit_mul_u64(a->outer, a->channels, &oc) || ampx_kit_mul_u64(oc, a->inner, n))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: outer x channels x inner overflows", op);
    return AMPX_OK;
}

/* training: mean and rstd are saved (required), running statistics updated when given;
 * eval: the running statistics are required and nothing else is written. */
static inline ampx_status ampx_kit_take_batchnorm_fwd(const ampx_kit *kit,
                                                      const ampx_batchnorm_args *args,
                                                      ampx_batchnorm_args *a) {
    static const char *op = "batchnorm_fwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, op, AMPX_OP_BATCHNORM_FWD, a->x.dtype, a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_bn_shape(kit, op, a, &n));
    uint64_t C = a->channels;
    int tr     = a->training != 0;
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "y", &a->y_or_dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", &a->gamma, AMPX_F32, C, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "beta", &a->beta, AMPX_F32, C, 1));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "running_mean", &a->running_mean, AMPX_F32, C, tr));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "running_var", &a->running_var, AMPX_F32, C, tr));
    if (!tr) return AMPX_OK;
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", &a->mean, AMPX_F32, C, 0));
    return ampx_kit_check_tensor_dt(kit, op, "rstd", &a->rstd, AMPX_F32, C, 0);
}

static inline ampx_status ampx_kit_take_batchnorm_bwd(const ampx_kit *kit,
                                                      const ampx_batchnorm_args *args,
                                                      ampx_batchnorm_args *a) {
    static const char *op = "batchnorm_bwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, op, AMPX_OP_BATCHNORM_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_bn_shape(kit, op, a, &n));
    return ampx_kit_check_norm_bwd(kit, op, n, a->channels, a->channels, &a->x, &a->dy, &a->y_or_dx,
                                   &a->gamma, &a->mean, &a->rstd, &a->dgamma, &a->dbeta);
}

// ---------------------------------------------------------------------------------------
// EMBEDDING_FWD, EMBEDDING_BWD, REDUCE, SUM_SQUARES

/* Either direction; the tensors are named for it: table and y forward, dtable (f32) and dy
 * backward. */
static inline ampx_status ampx_kit_take_embedding(const ampx_kit *kit,
                                                  const ampx_embedding_args *args, int bwd,
                                                  ampx_embedding_args *a) {
    const char *op = bwd ? "embedding_bwd" : "embedding_fwd";
    uint64_t nt = 0, ny = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    if (bwd)
        AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_EMBEDDING_BWD, a->y_or_dy.dtype,
                                            a->table_or_dtable.dtype));
    else
        AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_EMBEDDING_FWD,
                                            a->table_or_dtable.dtype, a->y_or_dy.dtype));
    if (ampx_kit_mul_u64(a->vocab, a->dim, &nt) || ampx_kit_mul_u64(a->n, a->dim, &ny))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: shape overflows", op);
    AMPX_KIT_TRY(
        ampx_kit_check_tensor(kit, op, bwd ? "dtable" : "table", &a->table_or_dtable, nt, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "ids", &a->ids, AMPX_I32, a->n, 0));
    return ampx_kit_check_tensor(kit, op, bwd ? "dy" : "y", &a->y_or_dy, ny, 0);
}

static inline ampx_status ampx_kit_take_reduce(const ampx_kit *kit, const ampx_reduce_args *args,
                                               ampx_reduce_args *a) {
    static const char *op = "reduce";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_REDUCE, a->x.dtype, a->y.dtype));
    if (a->mode != AMPX_REDUCE_SUM && a->mode != AMPX_REDUCE_MEAN)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown mode %u", op, a->mode);
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    return ampx_kit_check_tensor(kit, op, "y", &a->y, a->rows, 0);
}

static inline ampx_status ampx_kit_take_sum_squares(const ampx_kit *kit,
                                                    const ampx_sum_squares_args *args,
                                                    ampx_sum_squares_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "sum_squares", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, "sum_squares", "x", &a->x));
    return ampx_kit_check_tensor_dt(kit, "sum_squares", "out", &a->out, AMPX_F32, 1, 0);
}

/* ABS_MAX (ABI 1.8): a list of float tensors and one f32 out per tensor. */
static inline ampx_status ampx_kit_take_abs_max(const ampx_kit *kit, const ampx_abs_max_args *args,
                                                ampx_abs_max_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "abs_max", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, "abs_max", "x", &a->x));
    return ampx_kit_check_tensor_dt(kit, "abs_max", "out", &a->out, AMPX_F32, a->x.count, 0);
}

// ---------------------------------------------------------------------------------------
// UNSCALE_CHECK, GRAD_STATS, SCALER_UPDATE

static inline ampx_status ampx_kit_take_unscale_check(const ampx_kit *kit,
                                                      const ampx_unscale_check_args *args,
                                                      ampx_unscale_check_args *a) {
    static const char *op = "unscale_check";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "flags", &a->flags, AMPX_I32,
                                          (uint64_t)a->flag_base + a->grads.count, 0));
    return ampx_kit_check_scalars(kit, op, &a->scalars, 0);
}

static inline ampx_status ampx_kit_take_grad_stats(const ampx_kit *kit,
                                                   const ampx_grad_stats_args *args,
                                                   ampx_grad_stats_args *a) {
    static const char *op = "grad_stats";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    if (!ampx_dtype_is_float(a->target))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: target dtype %s is not a float dtype", op,
                             ampx_dtype_name(a->target));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "stats", &a->stats, AMPX_F32, 4ull * a->grads.count, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "counts", &a->counts, AMPX_I32,
                                          3ull * a->grads.count, 0));
    /* (optional, ABI 1.2) NaN counts apart from the infinities */
    if (a->nan_counts.buf)
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "nan_counts", &a->nan_counts, AMPX_I32,
                                              a->grads.count, 0));
    return AMPX_OK;
}

/* AMP_PASS (ABI 1.4): the grads, flags and scalars as UNSCALE_CHECK; the optional outputs
 * as SUM_SQUARES and GRAD_STATS (each checked only when its buf is given), and the targets. */
static inline ampx_status
ampx_kit_take_amp_pass(const ampx_kit *kit, const ampx_amp_pass_args *args, ampx_amp_pass_args *a) {
    static const char *op = "amp_pass";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "flags", &a->flags, AMPX_I32,
                                          (uint64_t)a->flag_base + a->grads.count, 0));
    AMPX_KIT_TRY(ampx_kit_check_scalars(kit, op, &a->scalars, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "sq_sum", &a->sq_sum, AMPX_F32, 1, 1));
    int stats = a->stats.buf || a->counts.buf || a->nan_counts.buf;
    if (stats && !a->targets && !ampx_dtype_is_float(a->target))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: target dtype %s is not a float dtype", op,
                             ampx_dtype_name(a->target));
    if (stats && a->targets)
        for (uint32_t t = 0; t < a->grads.count; t++)
            if (!ampx_dtype_is_float(a->targets[t]))
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "%s: targets[%u] dtype %s is not a float dtype", op, t,
                                     ampx_dtype_name(a->targets[t]));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "stats", &a->stats, AMPX_F32, 4ull * a->grads.count, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "counts", &a->counts, AMPX_I32,
                                          3ull * a->grads.count, 1));
    return ampx_kit_check_tensor_dt(kit, op, "nan_counts", &a->nan_counts, AMPX_I32, a->grads.count,
                                    1);
}

/* The smallest normal of a GRAD_STATS target: values below it (and not 0) count as tiny. */
static inline float ampx_kit_tiny_of(ampx_dtype target) {
    return target == AMPX_F16 ? 0x1p-14f : 0x1p-126f;
}

/* The target of tensor t of an AMP_PASS. */
static inline ampx_dtype ampx_kit_amp_target(const ampx_amp_pass_args *a, uint32_t t) {
    return a->targets ? a->targets[t] : a->target;
}

/* SCALER_UPDATE: the scalars block, and the double factors when the caller's struct holds
 * them (a non-finite or non-positive one is refused; 0, or a struct too short to hold them,
 * means "use the block's float factor", see ampx_scaler_update_args). */
static inline ampx_status ampx_kit_take_scaler_update(const ampx_kit *kit,
                                                      const ampx_scaler_update_args *args,
                                                      ampx_scaler_update_args *a) {
    static const char *op = "scaler_update";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    const char *bad = NULL;
    double f        = 0;
    if (!(a->growth_factor_f64 >= 0 && a->growth_factor_f64 <= 0x1.fffffep127))
        bad = "growth_factor_f64", f = a->growth_factor_f64;
    else if (!(a->backoff_factor_f64 >= 0 && a->backoff_factor_f64 <= 0x1.fffffep127))
        bad = "backoff_factor_f64", f = a->backoff_factor_f64;
    if (bad)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s %g is not a factor in [0, FLT_MAX]", op,
                             bad, f);
    return ampx_kit_check_scalars(kit, op, &a->scalars, 0);
}

// ---------------------------------------------------------------------------------------
// SGD, ADAMW

/* What both optimizers check: everything but their state tensors. */
static inline ampx_status ampx_kit_check_optimizer(const ampx_kit *kit, const char *op,
                                                   uint32_t opnum, const ampx_tensor_list *params,
                                                   const ampx_tensor *grads,
                                                   const ampx_tensor *copies,
                                                   const ampx_tensor *grad_sq_sum,
                                                   const ampx_tensor *scalars) {
    if (params->count > 0 && (!params->tensors || !params->n_elems))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %u params but a NULL %s", op,
                             params->count, params->tensors ? "n_elems" : "tensors array");
    if (params->count > 0 && !grads)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: grads is NULL", op);
    for (uint32_t t = 0; t < params->count; t++) {
        char what[48];
        uint64_t n = params->n_elems[t];
        AMPX_KIT_TRY(ampx_kit_check_dtypes(kit, op, opnum, &grads[t].dtype, 1));
        snprintf(what, sizeof what, "grads[%u]", t);
        AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, what, &grads[t], n, 0));
        snprintf(what, sizeof what, "params[%u]", t);
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, what, &params->tensors[t], AMPX_F32, n, 0));
        if (copies && copies[t].buf) {
            snprintf(what, sizeof what, "copies[%u]", t);
            if (copies[t].dtype != AMPX_BF16 && copies[t].dtype != AMPX_F16)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s must be bf16 or f16, not %s",
                                     op, what, ampx_dtype_name(copies[t].dtype));
            AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, what, &copies[t], n, 0));
        }
    }
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "grad_sq_sum", grad_sq_sum, AMPX_F32, 1, 1));
    return ampx_kit_check_scalars(kit, op, scalars, 0);
}

/* State tensor name[t] (momentum_buf, m, v): f32 with n elements. */
static inline ampx_status ampx_kit_check_state(const ampx_kit *kit, const char *op,
                                               const char *name, const ampx_tensor *state,
                                               uint32_t t, uint64_t n) {
    char what[48];
    snprintf(what, sizeof what, "%s[%u]", name, t);
    return ampx_kit_check_tensor_dt(kit, op, what, &state[t], AMPX_F32, n, 0);
}

static inline ampx_status ampx_kit_take_sgd(const ampx_kit *kit, const ampx_sgd_args *args,
                                            ampx_sgd_args *a) {
    static const char *op = "sgd";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_optimizer(kit, op, AMPX_OP_SGD, &a->params, a->grads, a->copies,
                                          &a->grad_sq_sum, &a->scalars));
    if (a->momentum == 0.0f) return AMPX_OK;
    if (a->params.count > 0 && !a->momentum_buf)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: momentum %g needs momentum_buf", op,
                             (double)a->momentum);
    for (uint32_t t = 0; t < a->params.count; t++)
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "momentum_buf", a->momentum_buf, t,
                                          a->params.n_elems[t]));
    return AMPX_OK;
}

static inline ampx_status ampx_kit_take_adamw(const ampx_kit *kit, const ampx_adamw_args *args,
                                              ampx_adamw_args *a) {
    static const char *op = "adamw";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_optimizer(kit, op, AMPX_OP_ADAMW, &a->params, a->grads, a->copies,
                                          &a->grad_sq_sum, &a->scalars));
    if (a->params.count > 0 && (!a->m || !a->v))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is NULL", op, !a->m ? "m" : "v");
    for (uint32_t t = 0; t < a->params.count; t++) {
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "m", a->m, t, a->params.n_elems[t]));
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "v", a->v, t, a->params.n_elems[t]));
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ABI 1.1: DROPOUT and PERMUTE, checked in full (nothing in their arguments depends on the
// backend).

/* DROPOUT: {x, y} float, both of n elements inside their buffers. threshold, seed and scale
 * take any value; offset + i wraps modulo 2^64, as the hash's own arithmetic does. In place
 * means y is x exactly; a partial overlap is the caller's error and is not detected. */
static inline ampx_status ampx_kit_take_dropout(const ampx_kit *kit, const ampx_dropout_args *args,
                                                ampx_dropout_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "dropout", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "dropout", AMPX_OP_DROPOUT, a->x.dtype, a->y.dtype));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "dropout", "x", &a->x, a->n, 0));
    return ampx_kit_check_tensor(kit, "dropout", "y", &a->y, a->n, 0);
}

/* The elements a strided view reaches: 1 + sum_d (dims[d] - 1) * strides[d], or 0 when the
 * view is empty; -1 when that does not fit in 64 bits. */
static inline int ampx_kit_permute_span(const uint64_t *dims, const uint64_t *strides,
                                        uint32_t ndim, int empty, uint64_t *span) {
    uint64_t last = 0, step;
    *span         = 0;
    if (empty) return 0;
    for (uint32_t d = 0; d < ndim; d++)
        if (ampx_kit_mul_u64(dims[d] - 1, strides[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    return __builtin_add_overflow(last, (uint64_t)1, span) ? -1 : 0;
}

/* PERMUTE: {x, y} float; ndim in [1, AMPX_PERMUTE_MAX_DIMS] (dims and strides past ndim are not
 * read); the number of indices (the product of dims, 0 when a dim is 0) and the span of x and
 * of y (1 + the furthest element their strides reach) fit in 64 bits, and each span lies
 * inside its buffer. An empty copy still needs both tensors (null buffers, dtypes and
 * offsets are checked), but reads and writes nothing.
 * Not checked, the caller's contract as backend.h states it: that y's strides map distinct
 * indices to distinct elements, and that x and y do not overlap. The one consequence that is
 * cheap to see is refused: more indices than elements in y's span cannot all be distinct.
 *
 * On success *n_elems is the number of indices and *loop (may be NULL) the same copy in the
 * form a backend iterates: ndim 4, dims of 1 dropped, the rest ordered by decreasing y stride
 * (ties keep their order), so the last dim walks y with the smallest stride, and padded at
 * the front with dims of 1 and strides 0. The ABI leaves the order of the writes free, and
 * with distinct y elements the result does not depend on it. */
static inline ampx_status ampx_kit_take_permute(const ampx_kit *kit, const ampx_permute_args *args,
                                                ampx_permute_args *a, ampx_permute_args *loop,
                                                uint64_t *n_elems) {
    *n_elems = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, "permute", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "permute", AMPX_OP_PERMUTE, a->x.dtype, a->y.dtype));
    if (a->ndim < 1 || a->ndim > AMPX_PERMUTE_MAX_DIMS)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "permute: ndim %u is not in [1, %d]", a->ndim,
                             AMPX_PERMUTE_MAX_DIMS);
    int empty = 0;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->dims[d] == 0) empty = 1;
    uint64_t n = empty ? 0 : 1, x_span, y_span;
    for (uint32_t d = 0; d < a->ndim && !empty; d++)
        if (ampx_kit_mul_u64(n, a->dims[d], &n))
            return ampx_kit_fail(kit, AMPX_ERR_INVALID, "permute: the product of dims overflows");
    if (ampx_kit_permute_span(a->dims, a->x_strides, a->ndim, empty, &x_span))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "permute: x strides reach past 2^64 elements");
    if (ampx_kit_permute_span(a->dims, a->y_strides, a->ndim, empty, &y_span))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "permute: y strides reach past 2^64 elements");
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "permute", "x", &a->x, x_span, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "permute", "y", &a->y, y_span, 0));
    if (n > y_span)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "permute: y strides cannot map %llu indices to distinct elements: "
                             "they span only %llu",
                             (unsigned long long)n, (unsigned long long)y_span);
    *n_elems = n;
    if (!loop) return AMPX_OK;

    uint64_t dims[AMPX_PERMUTE_MAX_DIMS], xs[AMPX_PERMUTE_MAX_DIMS], ys[AMPX_PERMUTE_MAX_DIMS];
    uint32_t k = 0;
    for (uint32_t d = 0; d < a->ndim; d++) {
        if (a->dims[d] == 1) continue;
        dims[k] = a->dims[d], xs[k] = a->x_strides[d], ys[k] = a->y_strides[d];
        for (uint32_t j = k; j > 0 && ys[j - 1] < ys[j]; j--) { /* stable insertion */
            uint64_t t;
            t = dims[j], dims[j] = dims[j - 1], dims[j - 1] = t;
            t = xs[j], xs[j] = xs[j - 1], xs[j - 1] = t;
            t = ys[j], ys[j] = ys[j - 1], ys[j - 1] = t;
        }
        k++;
    }
    memset(loop, 0, sizeof *loop);
    loop->size = sizeof *loop;
    loop->ndim = AMPX_PERMUTE_MAX_DIMS;
    loop->x    = a->x;
    loop->y    = a->y;
    for (uint32_t d = 0; d < AMPX_PERMUTE_MAX_DIMS; d++) {
        uint32_t pad       = AMPX_PERMUTE_MAX_DIMS - k;
        loop->dims[d]      = d < pad ? 1 : dims[d - pad];
        loop->x_strides[d] = d < pad ? 0 : xs[d - pad];
        loop->y_strides[d] = d < pad ? 0 : ys[d - pad];
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Attention (ABI 1.5)

/* The elements a [batch * seq, ld] view with width used columns spans: (rows - 1) ld + width,
 * 0 when empty, -1 on overflow. */
static inline int ampx_kit_attn_span(uint64_t rows, uint64_t ld, uint64_t width, uint64_t *span) {
    *span = 0;
    if (rows == 0) return 0;
    uint64_t x;
    if (ampx_kit_mul_u64(rows - 1, ld, &x) || __builtin_add_overflow(x, width, span)) return -1;
    return 0;
}

/* One [batch, seq, heads * head_dim] operand of ATTN_FWD / ATTN_BWD: its dtype is `dt` (when
 * dt is not -1), ld >= heads * head_dim, and its span lies in its buffer. */
static inline ampx_status ampx_kit_attn_tensor(const ampx_kit *kit, const char *op,
                                               const char *name, const ampx_tensor *t, int dt,
                                               uint64_t ld, uint64_t rows, uint64_t width) {
    uint64_t span;
    if (t->buf && dt >= 0 && t->dtype != (ampx_dtype)dt)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s must be %s like its partner, not %s",
                             op, name, ampx_dtype_name((ampx_dtype)dt), ampx_dtype_name(t->dtype));
    if (ld < width)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: ld of %s %llu < heads x head_dim %llu", op,
                             name, (unsigned long long)ld, (unsigned long long)width);
    if (ampx_kit_attn_span(rows, ld, width, &span))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s spans past 2^64 elements", op, name);
    return ampx_kit_check_tensor(kit, op, name, t, span, 0);
}

/* ATTN_FWD (bwd 0) and ATTN_BWD (bwd 1): dtypes, shapes without overflow, every tensor inside
 * its buffer, k and v of q's dtype (dk and dv of dq's), lse and delta f32. */
static inline ampx_status ampx_kit_take_attn(const ampx_kit *kit, const ampx_attn_args *args,
                                             ampx_attn_args *a, int bwd) {
    const char *op = bwd ? "attn_bwd" : "attn_fwd";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    if (bwd) {
        ampx_dtype dt[4] = {a->q.dtype, a->o.dtype, a->d_o.dtype, a->dq.dtype};
        AMPX_KIT_TRY(ampx_kit_check_dtypes(kit, op, AMPX_OP_ATTN_BWD, dt, 4));
    } else
        AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_ATTN_FWD, a->q.dtype, a->o.dtype));
    if (a->causal > 1)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: causal %u is not 0 or 1", op, a->causal);
    if (a->batch && (!a->seq || !a->heads || !a->head_dim))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: seq, heads and head_dim must be >= 1", op);
    if (!bwd && a->q_first > a->seq)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: q_first %u is past seq %llu", op,
                             a->q_first, (unsigned long long)a->seq);
    uint64_t rows, width, n_lse, n_probs; /* n_probs: the mask's element count */
    if (ampx_kit_mul_u64(a->batch, a->seq, &rows) ||
        ampx_kit_mul_u64(a->heads, a->head_dim, &width) ||
        ampx_kit_mul_u64(rows, a->heads, &n_lse) || ampx_kit_mul_u64(n_lse, a->seq, &n_probs))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: batch x seq x heads x head_dim overflows",
                             op);
    int qd = (int)a->q.dtype;
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "q", &a->q, -1, a->ld_q, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "k", &a->k, qd, a->ld_k, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "v", &a->v, qd, a->ld_v, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "o", &a->o, -1, a->ld_o, rows, width));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "lse", &a->lse, AMPX_F32, n_lse, 0));
    if (!bwd) return AMPX_OK;
    int gd = (int)a->dq.dtype;
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "do", &a->d_o, -1, a->ld_o, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "dq", &a->dq, -1, a->ld_dq, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "dk", &a->dk, gd, a->ld_dk, rows, width));
    AMPX_KIT_TRY(ampx_kit_attn_tensor(kit, op, "dv", &a->dv, gd, a->ld_dv, rows, width));
    return ampx_kit_check_tensor_dt(kit, op, "delta", &a->delta, AMPX_F32, n_lse, 0);
}

// ---------------------------------------------------------------------------------------
// Windows: IM2COL, COL2IM, POOL2D_FWD, POOL2D_BWD (ABI 1.6)

/* The window counts of one axis: (size + 2 pad - dil (k - 1) - 1) / stride + 1, or 0 when
 * the padded axis holds no window (or a term overflows). */
static inline uint64_t ampx_kit_window_out(uint64_t size, uint32_t k, uint32_t stride, uint32_t pad,
                                           uint32_t dil) {
    uint64_t span = (uint64_t)dil * (k - 1) + 1, padded;
    if (__builtin_add_overflow(size, 2 * (uint64_t)pad, &padded) || padded < span) return 0;
    return (padded - span) / stride + 1;
}

/* The geometry of ampx_window_args for op (AMPX_OP_IM2COL ... AMPX_OP_POOL2D_BWD): dtypes,
 * sizes and strides >= 1, at least one window per axis, the pooling limits (dilation 1,
 * padding < kernel, a known mode), x_batch >= channels height width, every count without
 * overflow, and each tensor inside its buffer: x (or dx) over (n - 1) x_batch + channels
 * height width elements, the window side over n out_h out_w (channels kh kw for the
 * columns, channels for pooling), indices i32 of y's size (MAX: optional in the forward,
 * required in the backward). On success *out_h and *out_w are the window counts. */
static inline ampx_status ampx_kit_take_window(const ampx_kit *kit, uint32_t op,
                                               const ampx_window_args *args, ampx_window_args *a,
                                               uint64_t *out_h, uint64_t *out_w) {
    static const char *const names[4] = {"im2col", "col2im", "pool2d_fwd", "pool2d_bwd"};
    const char *on =
        op >= AMPX_OP_IM2COL && op <= AMPX_OP_POOL2D_BWD ? names[op - AMPX_OP_IM2COL] : "window";
    int pool = op == AMPX_OP_POOL2D_FWD || op == AMPX_OP_POOL2D_BWD,
        fwd  = op == AMPX_OP_IM2COL || op == AMPX_OP_POOL2D_FWD;
    *out_h = *out_w = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, a, sizeof *a));
    AMPX_KIT_TRY(fwd ? ampx_kit_check_dtypes2(kit, on, op, a->x.dtype, a->y.dtype)
                     : ampx_kit_check_dtypes2(kit, on, op, a->y.dtype, a->x.dtype));
    if (!a->channels || !a->height || !a->width || !a->kh || !a->kw || !a->stride_h ||
        !a->stride_w || !a->dil_h || !a->dil_w)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: channels, height, width, kernel, stride and dilation must be "
                             ">= 1",
                             on);
    if (pool && (a->mode > AMPX_POOL_AVG || a->count_pad > 1))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: mode %u or count_pad %u is not 0 or 1", on,
                             a->mode, a->count_pad);
    if (pool && (a->dil_h != 1 || a->dil_w != 1 || a->pad_h >= a->kh || a->pad_w >= a->kw))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: pooling takes dilation 1 and padding below the kernel (pad "
                             "%ux%u, kernel %ux%u)",
                             on, a->pad_h, a->pad_w, a->kh, a->kw);
    if (a->accumulate > 1)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: accumulate %u is not 0 or 1", on,
                             a->accumulate);
    uint64_t oh = ampx_kit_window_out(a->height, a->kh, a->stride_h, a->pad_h, a->dil_h);
    uint64_t ow = ampx_kit_window_out(a->width, a->kw, a->stride_w, a->pad_w, a->dil_w);
    if (!oh || !ow)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: a %llux%llu plane padded by %ux%u holds no %ux%u window of "
                             "dilation %ux%u",
                             on, (unsigned long long)a->height, (unsigned long long)a->width,
                             a->pad_h, a->pad_w, a->kh, a->kw, a->dil_h, a->dil_w);
    uint64_t plane, image, x_span = 0, rows, width, y_n;
    if (ampx_kit_mul_u64(a->height, a->width, &plane) ||
        ampx_kit_mul_u64(plane, a->channels, &image) || ampx_kit_mul_u64(a->n, oh, &rows) ||
        ampx_kit_mul_u64(rows, ow, &rows) ||
        ampx_kit_mul_u64(a->channels, pool ? 1 : (uint64_t)a->kh * a->kw, &width) ||
        ampx_kit_mul_u64(rows, width, &y_n) ||
        (a->n && (ampx_kit_mul_u64(a->n - 1, a->x_batch, &x_span) ||
                  __builtin_add_overflow(x_span, image, &x_span))))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: the element counts overflow", on);
    if (a->x_batch < image)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: x_batch %llu < channels x height x width %llu", on,
                             (unsigned long long)a->x_batch, (unsigned long long)image);
    if (pool && a->mode == AMPX_POOL_MAX && plane > (uint64_t)INT32_MAX)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: a plane of %llu elements is past what an i32 index reaches", on,
                             (unsigned long long)plane);
    const char *xn = fwd ? "x" : "dx", *yn = pool ? (fwd ? "y" : "dy") : "cols";
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, xn, &a->x, x_span, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, yn, &a->y, y_n, 0));
    if (pool && a->mode == AMPX_POOL_MAX)
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "indices", &a->indices, AMPX_I32, y_n,
                                              op == AMPX_OP_POOL2D_FWD));
    *out_h = oh, *out_w = ow;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// FP8_QUANTIZE, GEMM_FP8, FP8_SCALE_UPDATE (ABI 1.7)

/* FP8_QUANTIZE: one side fp8 and the other float, saturate 0, 1 or 2, src and dst of n
 * elements, scale f32 [1]; amax f32 [1] and counts i32 [2] optional, quantizing only. */
static inline ampx_status ampx_kit_take_fp8_quantize(const ampx_kit *kit,
                                                     const ampx_fp8_quantize_args *args,
                                                     ampx_fp8_quantize_args *a) {
    const char *on = "fp8_quantize";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, on, AMPX_OP_FP8_QUANTIZE, a->src.dtype, a->dst.dtype));
    if (a->saturate > 2)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: saturate %u is not 0, 1 or 2", on,
                             a->saturate);
    if (ampx_dtype_is_fp8(a->src.dtype) && (a->amax.buf || a->counts.buf))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: amax and counts are for quantizing to fp8, not from it", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "src", &a->src, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "dst", &a->dst, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "scale", &a->scale, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "amax", &a->amax, AMPX_F32, 1, 1));
    return ampx_kit_check_tensor_dt(kit, on, "counts", &a->counts, AMPX_I32, 2, 1);
}

/* GEMM_FP8: the gemm as GEMM checks it (fp8 A and B, a float C), and the two f32 [1]
 * dequantization factors. */
static inline ampx_status ampx_kit_take_gemm_fp8(const ampx_kit *kit,
                                                 const ampx_gemm_fp8_args *args,
                                                 ampx_gemm_fp8_args *g, uint64_t extent[3]) {
    const char *on = "gemm_fp8";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, g, sizeof *g));
    if (g->size < offsetof(ampx_gemm_fp8_args, gemm) + AMPX_GEMM_ARGS_SIZE_V1_4)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args size %u ends inside the gemm", on,
                             g->size);
    g->gemm.size = (uint32_t)(g->size - offsetof(ampx_gemm_fp8_args, gemm) < sizeof g->gemm
                                  ? g->size - offsetof(ampx_gemm_fp8_args, gemm)
                                  : sizeof g->gemm);
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "a_scale_inv", &g->a_scale_inv, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "b_scale_inv", &g->b_scale_inv, AMPX_F32, 1, 0));
    if (g->gemm.bias_grad.buf)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias_grad must be null", on);
    return ampx_kit_check_gemm_(kit, on, AMPX_OP_GEMM_FP8, &g->gemm, extent);
}

/* FP8_SCALE_UPDATE: a known algo, H >= 1, |margin| <= 64, skip_on_found_inf 0 or 1 (1 needs
 * the scalars block), the state f32 (2 + H) n and fp8_max f32 [n] in their buffers. */
static inline ampx_status ampx_kit_take_fp8_scale_update(const ampx_kit *kit,
                                                         const ampx_fp8_scale_update_args *args,
                                                         ampx_fp8_scale_update_args *a) {
    const char *on = "fp8_scale_update";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, a, sizeof *a));
    if (a->algo > AMPX_FP8_AMAX_MOST_RECENT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown amax algo %u", on, a->algo);
    if (a->history < 1) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: history must be >= 1", on);
    if (a->margin < -64 || a->margin > 64)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: margin %d is outside [-64, 64]", on,
                             (int)a->margin);
    if (a->skip_on_found_inf > 1)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: skip_on_found_inf %u is not 0 or 1", on,
                             a->skip_on_found_inf);
    uint64_t rows = 2 + (uint64_t)a->history, n_state;
    if (ampx_kit_mul_u64(rows, a->n, &n_state))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: (2 + history) x n overflows", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "state", &a->state, AMPX_F32, n_state, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "fp8_max", &a->fp8_max, AMPX_F32, a->n, 0));
    return ampx_kit_check_scalars(kit, on, &a->scalars, !a->skip_on_found_inf);
}

// ---------------------------------------------------------------------------------------
// The scaler's arithmetic, as PyTorch's _amp_update_scale kernels do it

/* The growth or backoff factor SCALER_UPDATE applies: the args' double when given (> 0),
 * else the block's float. */
static inline double ampx_kit_scaler_factor(double from_args, float from_block) {
    return from_args > 0 ? from_args : (double)from_block;
}

/* scale * factor as PyTorch computes it: the f32 scale times the double factor in double,
 * then rounded to f32 (static_cast<float>(scale * factor) in _amp_update_scale_cpu_kernel
 * and _amp_update_scale_cuda_kernel, whose factors are C++ doubles). */
static inline float ampx_kit_scale_times(float scale, double factor) {
    return (float)((double)scale * factor);
}

/* SCALER_UPDATE of backend.h on a block in host memory (a backend that keeps the block on
 * the host): exactly the pseudo-code there, ampx_km_scaler_step of kernel_math.h with
 * PyTorch's products. */
static inline void ampx_kit_scaler_update(ampx_scalars *s, double growth_factor,
                                          double backoff_factor) {
    ampx_km_scaler_step(s, ampx_kit_scale_times(s->scale, growth_factor),
                        ampx_kit_scale_times(s->scale, backoff_factor));
}

// ---------------------------------------------------------------------------------------
// Buffers

static inline ampx_status ampx_kit_check_alloc(const ampx_kit *kit, ampx_buffer **out) {
    if (!kit) return AMPX_ERR_INVALID;
    if (!out) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "buffer_alloc: out is NULL");
    *out = NULL;
    return AMPX_OK;
}

/* [offset, offset + bytes) inside buf, without overflow. */
static inline ampx_status ampx_kit_check_range(const ampx_kit *kit, const char *opname,
                                               const char *what, const ampx_buffer *buf,
                                               uint64_t offset, uint64_t bytes) {
    uint64_t end;
    if (!buf) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s buffer is NULL", opname, what);
    uint64_t have = kit->buffer_bytes(buf);
    if (__builtin_add_overflow(offset, bytes, &end) || end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s range [%llu, +%llu) overruns its buffer of %llu bytes", opname,
                             what, (unsigned long long)offset, (unsigned long long)bytes,
                             (unsigned long long)have);
    return AMPX_OK;
}

/* buffer_write and buffer_read: the device range, then the host pointer (NULL is fine for
 * 0 bytes). `read` selects the names: src is the buffer for a read, dst for a write. */
static inline ampx_status ampx_kit_check_transfer(const ampx_kit *kit, int read,
                                                  const ampx_buffer *buf, uint64_t offset,
                                                  const void *host, uint64_t bytes) {
    const char *op = read ? "buffer_read" : "buffer_write";
    if (!kit) return AMPX_ERR_INVALID;
    AMPX_KIT_TRY(ampx_kit_check_range(kit, op, read ? "src" : "dst", buf, offset, bytes));
    if (bytes > 0 && !host)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is NULL", op, read ? "dst" : "src");
    return AMPX_OK;
}

static inline ampx_status ampx_kit_check_copy(const ampx_kit *kit, const ampx_buffer *dst,
                                              uint64_t dst_offset, const ampx_buffer *src,
                                              uint64_t src_offset, uint64_t bytes) {
    if (!kit) return AMPX_ERR_INVALID;
    AMPX_KIT_TRY(ampx_kit_check_range(kit, "buffer_copy", "dst", dst, dst_offset, bytes));
    return ampx_kit_check_range(kit, "buffer_copy", "src", src, src_offset, bytes);
}

static inline ampx_status ampx_kit_check_fill(const ampx_kit *kit, const ampx_buffer *dst,
                                              uint64_t offset, uint64_t bytes,
                                              uint32_t pattern_bytes) {
    if (!kit) return AMPX_ERR_INVALID;
    if (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "buffer_fill: pattern_bytes %u is not 1, 2 or 4", pattern_bytes);
    if (bytes % pattern_bytes != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "buffer_fill: %llu bytes is not a multiple of pattern_bytes %u",
                             (unsigned long long)bytes, pattern_bytes);
    return ampx_kit_check_range(kit, "buffer_fill", "dst", dst, offset, bytes);
}

/* Fills bytes of host memory with the low pattern_bytes bytes of pattern, in the machine's
 * (little-endian) byte order, as an element of that width would be stored. */
static inline void ampx_kit_fill_host(unsigned char *p, uint64_t bytes, uint32_t pattern,
                                      uint32_t pattern_bytes) {
    unsigned char pat[4];
    uint16_t v16 = (uint16_t)pattern;
    if (pattern_bytes == 2)
        memcpy(pat, &v16, 2);
    else
        memcpy(pat, &pattern, 4);
    /* one byte repeated (zeros above all: every buffer a trainer allocates): memset */
    int same = 1;
    for (uint32_t i = 1; i < pattern_bytes && same; i++)
        same = pat[i] == pat[0];
    if (pattern_bytes == 1 || same) {
        memset(p, (int)pat[0], (size_t)bytes);
        return;
    }
    /* one element, then the filled prefix copied after itself (doubling): a few large
     * copies, not one call per element */
    uint64_t done = bytes < pattern_bytes ? bytes : pattern_bytes;
    memcpy(p, pat, (size_t)done);
    while (done < bytes) {
        uint64_t n = done < bytes - done ? done : bytes - done;
        memcpy(p + done, p, (size_t)n);
        done += n;
    }
}

// ---------------------------------------------------------------------------------------
// create(): the host struct, the ABI, options

/* The start of every create(): *out cleared, the host struct read by its size into *h, the
 * kit set up from it, out checked and the ABI major compared ("<name>: host speaks ABI 2.0,
 * this plugin ABI 1.1"). A NULL host fails silently (nowhere to log). */
static inline ampx_status ampx_kit_begin_create(const ampx_host *host, void *out, const char *name,
                                                ampx_kit_buffer_bytes_fn buffer_bytes, ampx_host *h,
                                                ampx_kit *kit) {
    if (out) *(void **)out = NULL;
    memset(h, 0, sizeof *h);
    memset(kit, 0, sizeof *kit);
    kit->name         = name;
    kit->buffer_bytes = buffer_bytes;
    if (!host) return AMPX_ERR_INVALID;
    uint32_t size = host->size;
    memcpy(h, host, size < sizeof *h ? size : sizeof *h);
    kit->log      = h->log;
    kit->log_user = h->log_user;
    if (!out) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: create: out is NULL", name);
    if (h->abi_major != AMPX_ABI_MAJOR)
        return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED,
                             "%s: host speaks ABI %u.%u, this plugin ABI %d.%d", name, h->abi_major,
                             h->abi_minor, AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    return AMPX_OK;
}

/* One "key=value" option, split. */
typedef struct ampx_kit_option {
    const char *key; /* not NUL-terminated at the '=': use key_len */
    size_t key_len;
    const char *value;
} ampx_kit_option;

/* Option i of the host, split at its first '='. Errors: "<name>: 2 options but a NULL
 * options array", "<name>: option 0 is NULL", "<name>: option 'x' is not key=value". */
static inline ampx_status ampx_kit_option_at(const ampx_kit *kit, const ampx_host *h, uint32_t i,
                                             ampx_kit_option *o) {
    if (!h->options)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %u options but a NULL options array",
                             kit->name, h->n_options);
    const char *opt = h->options[i];
    if (!opt) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: option %u is NULL", kit->name, i);
    const char *eq = strchr(opt, '=');
    if (!eq)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: option '%s' is not key=value", kit->name,
                             opt);
    o->key     = opt;
    o->key_len = (size_t)(eq - opt);
    o->value   = eq + 1;
    return AMPX_OK;
}

static inline int ampx_kit_option_is(const ampx_kit_option *o, const char *key) {
    return o->key_len == strlen(key) && strncmp(o->key, key, o->key_len) == 0;
}

/* The value as a decimal integer in [lo, hi]: "<name>: threads=x: expected an integer in
 * [1, 1024]". */
static inline ampx_status ampx_kit_option_uint(const ampx_kit *kit, const ampx_kit_option *o,
                                               unsigned long lo, unsigned long hi,
                                               unsigned long *out) {
    char *end       = NULL;
    unsigned long v = 0;
    if (o->value[0] >= '0' && o->value[0] <= '9') v = strtoul(o->value, &end, 10);
    if (!end || *end != '\0' || v < lo || v > hi)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %.*s=%s: expected an integer in [%lu, %lu]", kit->name,
                             (int)o->key_len, o->key, o->value, lo, hi);
    *out = v;
    return AMPX_OK;
}

/* The value as one of a NULL-terminated list of names: *index; "<name>: gemm=x: expected
 * one of auto, cublas, native". */
static inline ampx_status ampx_kit_option_choice(const ampx_kit *kit, const ampx_kit_option *o,
                                                 const char *const *names, int *index) {
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(o->value, names[i]) == 0) {
            *index = i;
            return AMPX_OK;
        }
        if (strlen(list) + strlen(names[i]) + 3 < sizeof list) {
            strcat(list, i ? ", " : "");
            strcat(list, names[i]);
        }
    }
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %.*s=%s: expected one of %s", kit->name,
                         (int)o->key_len, o->key, o->value, list);
}

/* An option no branch took: "<name>: unknown option 'x' (known: threads, isa)". */
static inline ampx_status ampx_kit_option_unknown(const ampx_kit *kit, const ampx_kit_option *o,
                                                  const char *known) {
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown option '%.*s' (known: %s)", kit->name,
                         (int)o->key_len, o->key, known);
}

// ---------------------------------------------------------------------------------------
// device_info()

/* The checks of device_info(): a context, info not NULL, info->size holding its own field.
 * d is zeroed for the plugin to fill. */
static inline ampx_status
ampx_kit_begin_device_info(const ampx_kit *kit, const ampx_device_info *info, ampx_device_info *d) {
    if (!kit) return AMPX_ERR_INVALID;
    if (!info) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "device_info: info is NULL");
    if (info->size < sizeof(uint32_t))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "device_info: info size %u too small",
                             info->size);
    memset(d, 0, sizeof *d);
    return AMPX_OK;
}

/* Writes d into the host's info, only what lies within info->size, keeping that size. */
static inline ampx_status ampx_kit_end_device_info(ampx_device_info *info,
                                                   const ampx_device_info *d) {
    size_t n = info->size < sizeof *d ? info->size : sizeof *d;
    memcpy((char *)info + sizeof(uint32_t), (const char *)d + sizeof(uint32_t),
           n - sizeof(uint32_t));
    return AMPX_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_PLUGIN_KIT_H */
