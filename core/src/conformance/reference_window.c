/* reference_window.c — the double-precision reference of ABI 1.6's window ops: IM2COL,
 * COL2IM, POOL2D_FWD, POOL2D_BWD, from backend.h's formulas in their plainest form. Where a
 * plugin gathers (one output element at a time, summing the windows that reach it), this
 * file scatters (one window at a time), so the two agree only when both follow the
 * contract. */
#include <math.h>

#include "conformance/reference.h"

static uint64_t window_out(uint64_t size, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    int64_t span = dil * (k - 1) + 1, padded = (int64_t)size + 2 * pad;
    return padded < span ? 0 : (uint64_t)((padded - span) / stride + 1);
}

void ref_window_init(ref_window *w, const ampx_window_args *a) {
    *w       = (ref_window){.n         = a->n,
                            .channels  = a->channels,
                            .height    = a->height,
                            .width     = a->width,
                            .x_batch   = a->x_batch,
                            .kh        = a->kh,
                            .kw        = a->kw,
                            .stride_h  = a->stride_h,
                            .stride_w  = a->stride_w,
                            .pad_h     = a->pad_h,
                            .pad_w     = a->pad_w,
                            .dil_h     = a->dil_h,
                            .dil_w     = a->dil_w,
                            .max       = a->mode == AMPX_POOL_MAX,
                            .count_pad = (int)a->count_pad};
    w->out_h = window_out(w->height, w->kh, w->stride_h, w->pad_h, w->dil_h);
    w->out_w = window_out(w->width, w->kw, w->stride_w, w->pad_w, w->dil_w);
}

/* The x index of tap (p, q) of window (i, j) in plane (b, c), or -1 when it is padding. */
static int64_t tap(const ref_window *w, uint64_t b, uint64_t c, uint64_t i, uint64_t j, int64_t p,
                   int64_t q) {
    int64_t h = (int64_t)i * w->stride_h - w->pad_h + p * w->dil_h;
    int64_t x = (int64_t)j * w->stride_w - w->pad_w + q * w->dil_w;
    if (h < 0 || x < 0 || h >= (int64_t)w->height || x >= (int64_t)w->width) return -1;
    return (int64_t)(b * w->x_batch + (c * w->height + (uint64_t)h) * w->width + (uint64_t)x);
}

/* The taps of every window of every image, in cols order: e = ((b out_h + i) out_w + j)
 * channels kh kw + (c kh + p) kw + q, and the x index of tap e (-1: padding). */
static uint64_t n_taps(const ref_window *w) {
    return w->n * w->out_h * w->out_w * w->channels * (uint64_t)(w->kh * w->kw);
}

static int64_t tap_at(const ref_window *w, uint64_t e) {
    int64_t q  = (int64_t)(e % (uint64_t)w->kw),
            p  = (int64_t)(e / (uint64_t)w->kw % (uint64_t)w->kh);
    uint64_t r = e / (uint64_t)(w->kh * w->kw), c = r % w->channels;
    r /= w->channels;
    uint64_t j = r % w->out_w, i = r / w->out_w % w->out_h, b = r / w->out_w / w->out_h;
    return tap(w, b, c, i, j, p, q);
}

void ref_im2col(const ref_window *w, const double *x, double *cols, int64_t *src) {
    for (uint64_t e = 0; e < n_taps(w); e++) {
        int64_t s = tap_at(w, e);
        if (cols) cols[e] = s < 0 ? 0.0 : x[s];
        if (src) src[e] = s;
    }
}

void ref_col2im(const ref_window *w, const double *cols, double *dx, double *mag) {
    for (uint64_t e = 0; e < n_taps(w); e++) {
        int64_t s = tap_at(w, e);
        if (s < 0) continue;
        dx[s] += cols[e];
        if (mag) mag[s] += fabs(cols[e]);
    }
}

/* The divisor of window (i, j) of an average: kh kw, or its taps inside the plane. */
static double divisor(const ref_window *w, uint64_t i, uint64_t j) {
    if (w->count_pad) return (double)(w->kh * w->kw);
    double n = 0;
    for (int64_t p = 0; p < w->kh; p++)
        for (int64_t q = 0; q < w->kw; q++)
            n += tap(w, 0, 0, i, j, p, q) >= 0;
    return n;
}

void ref_pool_fwd(const ref_window *w, const double *x, double *y, int32_t *idx, double *mag) {
    uint64_t e = 0;
    for (uint64_t b = 0; b < w->n; b++)
        for (uint64_t c = 0; c < w->channels; c++)
            for (uint64_t i = 0; i < w->out_h; i++)
                for (uint64_t j = 0; j < w->out_w; j++, e++) {
                    double best = 0, sum = 0, abs_sum = 0;
                    int64_t arg = -1;
                    for (int64_t p = 0; p < w->kh; p++)
                        for (int64_t q = 0; q < w->kw; q++) {
                            int64_t s = tap(w, b, c, i, j, p, q);
                            if (s < 0) continue;
                            double v = x[s];
                            sum += v, abs_sum += fabs(v);
                            int first_nan = isnan(v) && !(arg >= 0 && isnan(best));
                            if (arg < 0 || first_nan || (!isnan(best) && v > best))
                                best = v, arg = s;
                        }
                    uint64_t plane0 = b * w->x_batch + c * w->height * w->width;
                    double d        = w->max ? 1.0 : divisor(w, i, j);
                    y[e]            = w->max ? best : sum / d;
                    if (idx) idx[e] = (int32_t)((uint64_t)arg - plane0);
                    if (mag) mag[e] = w->max ? fabs(best) : abs_sum / d;
                }
}

void ref_pool_bwd(const ref_window *w, const double *dy, const int32_t *idx, double *dx,
                  double *mag) {
    uint64_t e = 0;
    for (uint64_t b = 0; b < w->n; b++)
        for (uint64_t c = 0; c < w->channels; c++)
            for (uint64_t i = 0; i < w->out_h; i++)
                for (uint64_t j = 0; j < w->out_w; j++, e++) {
                    uint64_t plane0 = b * w->x_batch + c * w->height * w->width;
                    if (w->max) {
                        dx[plane0 + (uint64_t)idx[e]] += dy[e];
                        if (mag) mag[plane0 + (uint64_t)idx[e]] += fabs(dy[e]);
                        continue;
                    }
                    double d = divisor(w, i, j);
                    for (int64_t p = 0; p < w->kh; p++)
                        for (int64_t q = 0; q < w->kw; q++) {
                            int64_t s = tap(w, b, c, i, j, p, q);
                            if (s < 0) continue;
                            dx[s] += dy[e] / d;
                            if (mag) mag[s] += fabs(dy[e]) / d;
                        }
                }
}
