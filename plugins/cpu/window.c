/* window.c — ABI 1.6's window ops: IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD.
 *
 * Each works in whole output rows, which are the items threads take, so no two threads write
 * one element. IM2COL widens the input rows a row of windows reads into f32 scratch once,
 * builds each window's row of channels x kh x kw values there and rounds it into cols with
 * the table's converter (a copy of the values when the dtypes match: widening is exact).
 * COL2IM and POOL2D_BWD scatter into f32 scratch that holds one image (COL2IM) or one plane
 * (POOL2D_BWD), the item one thread takes: the windows in row-major order add their elements
 * to the pixels they came from, each row of cols read as it lies, and the scratch is rounded
 * into dx once. One thread sums an element in a fixed order, so the result does not depend
 * on the thread count. POOL2D_FWD widens the input rows of a row of windows into scratch and
 * takes each window's max or mean there.
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
// COL2IM and POOL2D_BWD: an item is an image (COL2IM) or a plane (POOL2D_BWD) of dx, summed
// in f32 scratch and rounded into dx once.

/* Scratch = dx's n_planes planes from plane0 on (accumulate) or zeros. */
static void stage_in(const window_job *j, float *st, uint64_t b, uint64_t c0, uint64_t planes) {
    uint64_t hw = j->a.height * j->a.width;
    if (j->a.accumulate)
        cpu_load_f32(st, j->dst, j->a.x.dtype, b * j->a.x_batch + c0 * hw, planes * hw);
    else
        memset(st, 0, planes * hw * sizeof(float));
}

static void stage_out(const window_job *j, const float *st, uint64_t b, uint64_t c0,
                      uint64_t planes) {
    uint64_t hw = j->a.height * j->a.width;
    cpu_store_f32(j->dst, j->a.x.dtype, b * j->a.x_batch + c0 * hw, st, planes * hw);
}

static void col2im_images(void *arg, uint64_t item, unsigned tid) {
    const window_job *j       = arg;
    const ampx_window_args *a = &j->a;
    int64_t H = (int64_t)a->height, W = (int64_t)a->width;
    float *st = j->ctx->thread_ws[tid].p, *row = st + a->channels * a->height * a->width;
    stage_in(j, st, item, 0, a->channels);
    for (uint64_t i = 0; i < j->out_h; i++)
        for (uint64_t jw = 0; jw < j->out_w; jw++) {
            cpu_load_f32(row, j->src, a->y.dtype, ((item * j->out_h + i) * j->out_w + jw) * j->ckk,
                         j->ckk);
            int64_t h0     = (int64_t)(i * a->stride_h) - a->pad_h;
            int64_t w0     = (int64_t)(jw * a->stride_w) - a->pad_w;
            const float *v = row;
            for (uint64_t c = 0; c < a->channels; c++)
                for (uint32_t p = 0; p < a->kh; p++, v += a->kw) {
                    int64_t h = h0 + (int64_t)p * a->dil_h;
                    if (h < 0 || h >= H) continue;
                    float *dst = st + (c * a->height + (uint64_t)h) * a->width;
                    for (uint32_t q = 0; q < a->kw; q++) {
                        int64_t w = w0 + (int64_t)q * a->dil_w;
                        if (w >= 0 && w < W) dst[w] += v[q];
                    }
                }
        }
    stage_out(j, st, item, 0, a->channels);
}

ampx_status cpu_col2im(ampx_context *ctx, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, AMPX_OP_COL2IM, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "col2im",
                                  (j.a.channels * j.a.height * j.a.width + j.ckk) * sizeof(float)));
    cpu_run(ctx, j.a.n * j.out_h * j.out_w * j.ckk, j.a.n, col2im_images, &j);
    return AMPX_OK;
}

/* The taps of window i (along an axis of `size` pixels) inside the plane: [*lo, *hi). */
static void taps_inside(uint64_t i, uint32_t stride, uint32_t pad, uint32_t k, uint64_t size,
                        int64_t *lo, int64_t *hi) {
    *lo = (int64_t)(i * stride) - pad, *hi = *lo + k;
    if (*lo < 0) *lo = 0;
    if (*hi > (int64_t)size) *hi = (int64_t)size;
}

static void pool_bwd_planes(void *arg, uint64_t item, unsigned tid) {
    const window_job *j       = arg;
    const ampx_window_args *a = &j->a;
    uint64_t b = item / a->channels, c = item % a->channels, hw = a->height * a->width;
    float *st = j->ctx->thread_ws[tid].p, *dy = st + hw;
    const int32_t *idx = a->indices.buf ? (const int32_t *)cpu_ptr(&a->indices) : NULL;
    uint64_t nw        = j->out_h * j->out_w;
    stage_in(j, st, b, c, 1);
    cpu_load_f32(dy, j->src, a->y.dtype, item * nw, nw);
    if (a->mode == AMPX_POOL_MAX)
        for (uint64_t e = 0; e < nw; e++) {
            int32_t at = idx[item * nw + e];
            if (at >= 0 && (uint64_t)at < hw) st[at] += dy[e];
        }
    else
        for (uint64_t i = 0; i < j->out_h; i++)
            for (uint64_t jw = 0; jw < j->out_w; jw++) {
                int64_t h0, h1, w0, w1;
                taps_inside(i, a->stride_h, a->pad_h, a->kh, a->height, &h0, &h1);
                taps_inside(jw, a->stride_w, a->pad_w, a->kw, a->width, &w0, &w1);
                float d = (float)(a->count_pad ? (int64_t)a->kh * a->kw : (h1 - h0) * (w1 - w0));
                float g = dy[i * j->out_w + jw] / d;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        st[(uint64_t)h * a->width + (uint64_t)w] += g;
            }
    stage_out(j, st, b, c, 1);
}

ampx_status cpu_pool2d_bwd(ampx_context *ctx, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, AMPX_OP_POOL2D_BWD, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "pool2d_bwd",
                                  (j.a.height * j.a.width + j.out_h * j.out_w) * sizeof(float)));
    uint64_t planes = j.a.n * j.a.channels;
    cpu_run(ctx, planes * j.a.height * j.a.width, planes, pool_bwd_planes, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// POOL2D_FWD: an item is a row of windows (b, c, i), its kh input rows widened into scratch.

/* Window jw of a row whose in-plane input rows [h0, h1) lie in rows (row r at rows + (r - h0)
 * width): its value, and for max the winning tap's index. */
static inline float pool_window(const ampx_window_args *a, const float *rows, int64_t h0,
                                int64_t h1, uint64_t jw, int32_t *arg) {
    int64_t w0, w1;
    taps_inside(jw, a->stride_w, a->pad_w, a->kw, a->width, &w0, &w1);
    float best = rows[w0], sum = 0.0f;
    int64_t win = h0 * (int64_t)a->width + w0;
    for (int64_t h = h0; h < h1; h++) {
        const float *r = rows + (uint64_t)(h - h0) * a->width;
        for (int64_t w = w0; w < w1; w++) {
            float v = r[w];
            sum += v;
            /* the first NaN, else the first largest: a NaN best is never replaced */
            if (v > best || (isnan(v) && !isnan(best))) best = v, win = h * (int64_t)a->width + w;
        }
    }
    *arg = (int32_t)win;
    if (a->mode == AMPX_POOL_MAX) return best;
    return sum / (float)(a->count_pad ? (int64_t)a->kh * a->kw : (h1 - h0) * (w1 - w0));
}

static void pool_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    const window_job *j       = arg;
    const ampx_window_args *a = &j->a;
    uint64_t rpi              = cpu_rows_per_item(j->out_w * a->kh * a->kw),
             rows             = a->n * a->channels * j->out_h;
    float *stage = j->ctx->thread_ws[tid].p, *out = stage + (uint64_t)a->kh * a->width;
    int32_t *idx = a->indices.buf ? cpu_ptr(&a->indices) : NULL;
    for (uint64_t r = item * rpi; r < (item + 1) * rpi && r < rows; r++) {
        uint64_t i = r % j->out_h, c = r / j->out_h % a->channels, b = r / j->out_h / a->channels;
        int64_t h0, h1;
        taps_inside(i, a->stride_h, a->pad_h, a->kh, a->height, &h0, &h1);
        cpu_load_f32(stage, j->src, a->x.dtype, x_row(j, b, c, (uint64_t)h0),
                     (uint64_t)(h1 - h0) * a->width);
        for (uint64_t jw = 0; jw < j->out_w; jw++) {
            int32_t win;
            out[jw] = pool_window(a, stage, h0, h1, jw, &win);
            if (idx && a->mode == AMPX_POOL_MAX) idx[r * j->out_w + jw] = win;
        }
        cpu_store_f32(j->dst, a->y.dtype, r * j->out_w, out, j->out_w);
    }
}

ampx_status cpu_pool2d_fwd(ampx_context *ctx, const ampx_window_args *args) {
    window_job j;
    CPU_TRY(window_take(ctx, AMPX_OP_POOL2D_FWD, args, &j));
    if (!j.a.n) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "pool2d_fwd",
                                  ((uint64_t)j.a.kh * j.a.width + j.out_w) * sizeof(float)));
    cpu_run_rows(ctx, j.a.n * j.a.channels * j.out_h, j.out_w * j.a.kh * j.a.kw, pool_fwd_rows, &j);
    return AMPX_OK;
}
