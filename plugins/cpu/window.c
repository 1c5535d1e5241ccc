/* window.c — ABI 1.6's window ops: IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD.
 *
 * Each works in whole output rows, which are the items threads take, so no two threads write
 * one element. IM2COL widens the input rows a row of windows reads into f32 scratch once,
 * builds each window's row of channels x kh x kw values there and rounds it into cols with
 * the table's converter (a copy of the values when the dtypes match: widening is exact).
 * COL2IM and POOL2D_BWD gather: each dx row sums, in f32 and in tap order (p, then q), the
 * window elements that reach it, then rounds once, so the result does not depend on the
 * thread count. Pooling reads its taps where they lie, with dtype.h's converters.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"

typedef struct window_job {
    ampx_window_args a;
    ampx_context *ctx;
    uint64_t out_h, out_w, ckk; /* ckk: channels kh kw, a cols row */
    const void *src;            /* IM2COL, POOL2D_FWD: x; COL2IM: cols; POOL2D_BWD: dy */
    void *dst;                  /* IM2COL: cols; POOL2D_FWD: y; COL2IM, POOL2D_BWD: dx */
} window_job;

static ampx_status window_take(ampx_context *ctx, uint32_t op, const ampx_window_args *args,
                               window_job *j) {
    memset(j, 0, sizeof *j);
    CPU_TRY(ampx_kit_take_window(AMPX_KIT(ctx), op, args, &j->a, &j->out_h, &j->out_w));
    j->ctx   = ctx;
    j->ckk   = j->a.channels * j->a.kh * j->a.kw;
    int x_in = op == AMPX_OP_IM2COL || op == AMPX_OP_POOL2D_FWD;
    j->src   = cpu_ptr(x_in ? &j->a.x : &j->a.y);
    j->dst   = cpu_ptr(x_in ? &j->a.y : &j->a.x);
    return AMPX_OK;
}

/* Offset of row h of plane (b, c) of x (dx). */
static uint64_t x_row(const window_job *j, uint64_t b, uint64_t c, uint64_t h) {
    return b * j->a.x_batch + (c * j->a.height + h) * j->a.width;
}

/* The plane row a dx item covers: item rows run over (b, c, h). */
static void split_row(const window_job *j, uint64_t r, uint64_t *b, uint64_t *c, uint64_t *h) {
    *h = r % j->a.height;
    *c = r / j->a.height % j->a.channels;
    *b = r / j->a.height / j->a.channels;
}

// ---------------------------------------------------------------------------------------
// IM2COL: an item is a row of windows (b, i); scratch holds the channels x kh input rows it
// reads (zeros for rows in the padding) and one cols row.

static void im2col_rows(void *arg, uint64_t item, unsigned tid) {
    const window_job *j       = arg;
    const ampx_window_args *a = &j->a;
    uint64_t rpi = cpu_rows_per_item(j->out_w * j->ckk), W = a->width;
    float *stage = j->ctx->thread_ws[tid].p, *row = stage + a->channels * a->kh * W;
    for (uint64_t r = item * rpi; r < (item + 1) * rpi && r < a->n * j->out_h; r++) {
        uint64_t b = r / j->out_h, i = r % j->out_h;
        for (uint64_t c = 0; c < a->channels; c++)
            for (uint32_t p = 0; p < a->kh; p++) {
                int64_t h  = (int64_t)(i * a->stride_h) - a->pad_h + (int64_t)p * a->dil_h;
                float *dst = stage + (c * a->kh + p) * W;
                if (h < 0 || h >= (int64_t)a->height)
                    memset(dst, 0, W * sizeof(float));
                else
                    cpu_load_f32(dst, j->src, a->x.dtype, x_row(j, b, c, (uint64_t)h), W);
            }
        for (uint64_t jw = 0; jw < j->out_w; jw++) {
            int64_t w0 = (int64_t)(jw * a->stride_w) - a->pad_w;
            float *o   = row;
            for (uint64_t cp = 0; cp < a->channels * a->kh; cp++)
                for (uint32_t q = 0; q < a->kw; q++) {
                    int64_t w = w0 + (int64_t)q * a->dil_w;
                    *o++      = w < 0 || w >= (int64_t)W ? 0.0f : stage[cp * W + (uint64_t)w];
                }
            cpu_store_f32(j->dst, a->y.dtype, (r * j->out_w + jw) * j->ckk, row, j->ckk);
        }
    }
}

ampx_status cpu_im2col(ampx_context *ctx, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, AMPX_OP_IM2COL, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "im2col",
                                  (j.a.channels * j.a.kh * j.a.width + j.ckk) * sizeof(float)));
    uint64_t rows = j.a.n * j.out_h;
    cpu_run_rows(ctx, rows, j.out_w * j.ckk, im2col_rows, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// COL2IM and POOL2D_BWD: an item is a dx row (b, c, h), summed in f32 scratch.

/* The window index along one axis whose tap t lands on pixel x, or -1. */
static int64_t window_of(uint64_t x, uint32_t t, uint32_t stride, uint32_t pad, uint32_t dil,
                         uint64_t out) {
    int64_t u = (int64_t)x + pad - (int64_t)t * dil;
    if (u < 0 || u % stride) return -1;
    return (uint64_t)(u / stride) < out ? u / stride : -1;
}

/* The taps of window i (along an axis of `size` pixels) inside the plane. */
static uint64_t taps_inside(uint64_t i, uint32_t stride, uint32_t pad, uint32_t k, uint64_t size) {
    int64_t lo = (int64_t)(i * stride) - pad, hi = lo + k;
    if (lo < 0) lo = 0;
    if (hi > (int64_t)size) hi = (int64_t)size;
    return (uint64_t)(hi - lo);
}

static void gather_row(const window_job *j, uint32_t op, uint64_t b, uint64_t c, uint64_t h,
                       float *acc) {
    const ampx_window_args *a = &j->a;
    uint64_t oh = j->out_h, ow = j->out_w, plane = (b * a->channels + c) * oh;
    const int32_t *idx = a->indices.buf ? cpu_ptr(&a->indices) : NULL;
    for (uint32_t p = 0; p < a->kh; p++) {
        int64_t i = window_of(h, p, a->stride_h, a->pad_h, a->dil_h, oh);
        if (i < 0) continue;
        for (uint32_t q = 0; q < a->kw; q++)
            for (uint64_t w = 0; w < a->width; w++) {
                int64_t jw = window_of(w, q, a->stride_w, a->pad_w, a->dil_w, ow);
                if (jw < 0) continue;
                if (op == AMPX_OP_COL2IM) {
                    uint64_t e = ((b * oh + (uint64_t)i) * ow + (uint64_t)jw) * j->ckk +
                                 (c * a->kh + p) * a->kw + q;
                    acc[w] += cpu_ld(j->src, a->y.dtype, e);
                    continue;
                }
                uint64_t e = (plane + (uint64_t)i) * ow + (uint64_t)jw;
                if (a->mode == AMPX_POOL_MAX) {
                    if ((uint64_t)idx[e] == h * a->width + w)
                        acc[w] += cpu_ld(j->src, a->y.dtype, e);
                    continue;
                }
                uint64_t d =
                    a->count_pad
                        ? (uint64_t)a->kh * a->kw
                        : taps_inside((uint64_t)i, a->stride_h, a->pad_h, a->kh, a->height) *
                              taps_inside((uint64_t)jw, a->stride_w, a->pad_w, a->kw, a->width);
                acc[w] += cpu_ld(j->src, a->y.dtype, e) / (float)d;
            }
    }
}

typedef struct gather_job {
    const window_job *w;
    uint32_t op;
} gather_job;

static void gather_rows(void *arg, uint64_t item, unsigned tid) {
    const gather_job *g       = arg;
    const window_job *j       = g->w;
    const ampx_window_args *a = &j->a;
    uint64_t rpi = cpu_rows_per_item(a->width), rows = a->n * a->channels * a->height;
    float *acc = j->ctx->thread_ws[tid].p;
    for (uint64_t r = item * rpi; r < (item + 1) * rpi && r < rows; r++) {
        uint64_t b, c, h;
        split_row(j, r, &b, &c, &h);
        if (a->accumulate)
            cpu_load_f32(acc, j->dst, a->x.dtype, x_row(j, b, c, h), a->width);
        else
            memset(acc, 0, a->width * sizeof(float));
        gather_row(j, g->op, b, c, h, acc);
        cpu_store_f32(j->dst, a->x.dtype, x_row(j, b, c, h), acc, a->width);
    }
}

static ampx_status gather(ampx_context *ctx, uint32_t op, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, op, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, op == AMPX_OP_COL2IM ? "col2im" : "pool2d_bwd",
                                  j.a.width * sizeof(float)));
    gather_job g = {&j, op};
    cpu_run_rows(ctx, j.a.n * j.a.channels * j.a.height, j.a.width * j.a.kh * j.a.kw, gather_rows,
                 &g);
    return AMPX_OK;
}

ampx_status cpu_col2im(ampx_context *ctx, const ampx_window_args *args) {
    return gather(ctx, AMPX_OP_COL2IM, args);
}

ampx_status cpu_pool2d_bwd(ampx_context *ctx, const ampx_window_args *args) {
    return gather(ctx, AMPX_OP_POOL2D_BWD, args);
}

// ---------------------------------------------------------------------------------------
// POOL2D_FWD: an item is a row of windows (b, c, i).

/* Window (i, jw) of plane (b, c): its value, and for max the winning tap's index. */
static float pool_window(const window_job *j, uint64_t b, uint64_t c, uint64_t i, uint64_t jw,
                         int32_t *arg) {
    const ampx_window_args *a = &j->a;
    int64_t h0 = (int64_t)(i * a->stride_h) - a->pad_h, w0 = (int64_t)(jw * a->stride_w) - a->pad_w;
    float best = 0.0f, sum = 0.0f;
    int64_t win = -1, count = 0;
    for (uint32_t p = 0; p < a->kh; p++) {
        int64_t h = h0 + p;
        if (h < 0 || h >= (int64_t)a->height) continue;
        uint64_t base = x_row(j, b, c, (uint64_t)h);
        for (uint32_t q = 0; q < a->kw; q++) {
            int64_t w = w0 + q;
            if (w < 0 || w >= (int64_t)a->width) continue;
            float v = cpu_ld(j->src, a->x.dtype, base + (uint64_t)w);
            sum += v, count++;
            int first_nan = isnan(v) && !(win >= 0 && isnan(best));
            if (win < 0 || first_nan || (!isnan(best) && v > best))
                best = v, win = h * (int64_t)a->width + w;
        }
    }
    *arg = (int32_t)win;
    if (a->mode == AMPX_POOL_MAX) return best;
    return sum / (float)(a->count_pad ? (int64_t)a->kh * a->kw : count);
}

static void pool_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    const window_job *j       = arg;
    const ampx_window_args *a = &j->a;
    uint64_t rpi              = cpu_rows_per_item(j->out_w * a->kh * a->kw),
             rows             = a->n * a->channels * j->out_h;
    float *row                = j->ctx->thread_ws[tid].p;
    int32_t *idx              = a->indices.buf ? cpu_ptr(&a->indices) : NULL;
    for (uint64_t r = item * rpi; r < (item + 1) * rpi && r < rows; r++) {
        uint64_t i = r % j->out_h, c = r / j->out_h % a->channels, b = r / j->out_h / a->channels;
        for (uint64_t jw = 0; jw < j->out_w; jw++) {
            int32_t win;
            row[jw] = pool_window(j, b, c, i, jw, &win);
            if (idx && a->mode == AMPX_POOL_MAX) idx[r * j->out_w + jw] = win;
        }
        cpu_store_f32(j->dst, a->y.dtype, r * j->out_w, row, j->out_w);
    }
}

ampx_status cpu_pool2d_fwd(ampx_context *ctx, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, AMPX_OP_POOL2D_FWD, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "pool2d_fwd", j.out_w * sizeof(float)));
    cpu_run_rows(ctx, j.a.n * j.a.channels * j.out_h, j.out_w * j.a.kh * j.a.kw, pool_fwd_rows, &j);
    return AMPX_OK;
}
