/* ampx/kit/take_layout.h — part of plugin_kit.h (a plugin includes that): the takes of the
 * ops whose checks are about memory layout: DROPOUT and PERMUTE (ABI 1.1), fused attention
 * (ABI 1.5) and the windows IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD (ABI 1.6).
 */
#ifndef AMPX_KIT_TAKE_LAYOUT_H
#define AMPX_KIT_TAKE_LAYOUT_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* The scalar fields of window args a: sizes, strides and dilations >= 1, the pooling limits
 * (a known mode, count_pad 0 or 1, dilation 1, padding below the kernel), accumulate 0 or 1. */
static inline ampx_status ampx_kit_window_params(const ampx_kit *kit, const char *on,
                                                 const ampx_window_args *a, int pool) {
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
    return AMPX_OK;
}

/* The element counts of window args a with oh x ow windows, without overflow: x's span
 * ((n - 1) x_batch + channels height width), y's (or the columns') elements; x_batch at least
 * one image and, for max pooling, a plane an i32 index reaches. */
static inline ampx_status ampx_kit_window_counts(const ampx_kit *kit, const char *on,
                                                 const ampx_window_args *a, int pool, uint64_t oh,
                                                 uint64_t ow, uint64_t *x_span_out,
                                                 uint64_t *y_n_out) {
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
    *x_span_out = x_span, *y_n_out = y_n;
    return AMPX_OK;
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
    AMPX_KIT_TRY(ampx_kit_window_params(kit, on, a, pool));
    uint64_t oh = ampx_kit_window_out(a->height, a->kh, a->stride_h, a->pad_h, a->dil_h);
    uint64_t ow = ampx_kit_window_out(a->width, a->kw, a->stride_w, a->pad_w, a->dil_w);
    if (!oh || !ow)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: a %llux%llu plane padded by %ux%u holds no %ux%u window of "
                             "dilation %ux%u",
                             on, (unsigned long long)a->height, (unsigned long long)a->width,
                             a->pad_h, a->pad_w, a->kh, a->kw, a->dil_h, a->dil_w);
    uint64_t x_span = 0, y_n = 0;
    AMPX_KIT_TRY(ampx_kit_window_counts(kit, on, a, pool, oh, ow, &x_span, &y_n));
    const char *xn = fwd ? "x" : "dx", *yn = pool ? (fwd ? "y" : "dy") : "cols";
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, xn, &a->x, x_span, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, yn, &a->y, y_n, 0));
    if (pool && a->mode == AMPX_POOL_MAX)
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "indices", &a->indices, AMPX_I32, y_n,
                                              op == AMPX_OP_POOL2D_FWD));
    *out_h = oh, *out_w = ow;
    return AMPX_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_TAKE_LAYOUT_H */
