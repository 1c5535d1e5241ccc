/* window.cu — IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD (backend.h's window ops), grid-stride
 * over their outputs, the kernels of kernels/opencl/window.cl in CUDA.
 *
 * IM2COL gives each cols element one thread; a copy between equal dtypes moves the bits,
 * otherwise each element is widened exactly and rounded once to nearest even with dtype.h's
 * functions, and padding taps store 0. POOL2D_FWD gives each y element one thread walking its
 * window's in-plane taps in row-major order. COL2IM and POOL2D_BWD are gathers: one thread
 * per dx element visits, in row-major window order, the windows that hold it, sums their
 * contributions in f32, adds the old dx when accumulating and rounds once; no atomics, so
 * the bits are the same on every run, and the elements between images (x_batch larger than
 * an image) are never written.
 */
#include "common.cuh"

#define WIN_BLOCKS_CAP (1u << 20)

__device__ __forceinline__ uint64_t win_stride() {
    return (uint64_t)gridDim.x * blockDim.x;
}

__device__ __forceinline__ uint64_t win_first() {
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

/* Element (b, c, h, w) of x or dx. */
__device__ __forceinline__ uint64_t win_x_at(const cuk_window &a, uint64_t b, uint64_t c,
                                             uint64_t h, uint64_t w) {
    return b * a.x_batch + (c * a.height + h) * a.width + w;
}

/* The in-plane rows [*lo, *hi) of the window starting at row `start` (padding < kernel, so
 * the range is never empty for a window of the op). */
__device__ __forceinline__ void win_span(int64_t start, uint32_t k, uint64_t size, int64_t *lo,
                                         int64_t *hi) {
    *lo = start < 0 ? 0 : start;
    *hi = start + (int64_t)k < (int64_t)size ? start + (int64_t)k : (int64_t)size;
}

/* IM2COL: the x element of cols element e, or -1 for a padding tap. */
__device__ __forceinline__ int64_t im2col_src(const cuk_window &a, uint64_t e) {
    uint64_t r = e / a.kw, q = e % a.kw;
    uint64_t p = r % a.kh;
    r /= a.kh;
    uint64_t c = r % a.channels;
    r /= a.channels;
    uint64_t j = r % a.out_w;
    r /= a.out_w;
    uint64_t i = r % a.out_h, b = r / a.out_h;
    int64_t h = (int64_t)(i * a.sh) - (int64_t)a.ph + (int64_t)(p * a.dh);
    int64_t w = (int64_t)(j * a.sw) - (int64_t)a.pw + (int64_t)(q * a.dw);
    if (h < 0 || h >= (int64_t)a.height || w < 0 || w >= (int64_t)a.width) return -1;
    return (int64_t)win_x_at(a, b, c, (uint64_t)h, (uint64_t)w);
}

template <typename T> __global__ void im2col_copy_kernel(cuk_window a, uint64_t total) {
    for (uint64_t e = win_first(); e < total; e += win_stride()) {
        int64_t xi    = im2col_src(a, e);
        ((T *)a.y)[e] = xi < 0 ? (T)0 : ((const T *)a.x)[xi];
    }
}

__global__ void im2col_convert_kernel(cuk_window a, uint64_t total) {
    for (uint64_t e = win_first(); e < total; e += win_stride()) {
        int64_t xi = im2col_src(a, e);
        cuk_st(a.y, a.ydt, e, xi < 0 ? 0.0f : cuk_ld(a.x, a.xdt, (uint64_t)xi));
    }
}

/* COL2IM: dx(b, c, h, w) gathers cols element (window (i, j), tap (p, q)) for every tap with
 * h = i sh - ph + p dh and w = j sw - pw + q dw; p runs down so that i runs up. */
__global__ void col2im_kernel(cuk_window a, uint64_t total) {
    uint64_t taps = (uint64_t)a.kh * a.kw;
    for (uint64_t e = win_first(); e < total; e += win_stride()) {
        uint64_t r = e / a.width, w = e % a.width;
        uint64_t h = r % a.height;
        r /= a.height;
        uint64_t c = r % a.channels, b = r / a.channels;
        float s = 0.0f;
        for (uint32_t p = a.kh; p-- > 0;) {
            int64_t th = (int64_t)h + (int64_t)a.ph - (int64_t)p * (int64_t)a.dh;
            if (th < 0 || th % (int64_t)a.sh != 0) continue;
            uint64_t i = (uint64_t)th / a.sh;
            if (i >= a.out_h) break;
            for (uint32_t q = a.kw; q-- > 0;) {
                int64_t tw = (int64_t)w + (int64_t)a.pw - (int64_t)q * (int64_t)a.dw;
                if (tw < 0 || tw % (int64_t)a.sw != 0) continue;
                uint64_t j = (uint64_t)tw / a.sw;
                if (j >= a.out_w) break;
                uint64_t ci = (((b * a.out_h + i) * a.out_w + j) * a.channels + c) * taps;
                s += cuk_ld(a.y, a.ydt, ci + (uint64_t)p * a.kw + q);
            }
        }
        uint64_t xi = win_x_at(a, b, c, h, w);
        if (a.accumulate) s = cuk_ld(a.x, a.xdt, xi) + s;
        cuk_st(a.x, a.xdt, xi, s);
    }
}

/* POOL2D_FWD MAX: the first NaN tap, else the first strictly largest; its bits when the
 * dtypes match, and its index h W + w when idx is given. */
__device__ __forceinline__ void pool_max_one(const cuk_window &a, uint64_t e, uint64_t plane,
                                             int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    float best = 0.0f;
    int64_t at = -1;
    for (int64_t h = h0; h < h1 && !isnan(best); h++)
        for (int64_t w = w0; w < w1; w++) {
            float v = cuk_ld(a.x, a.xdt, plane + (uint64_t)(h * (int64_t)a.width + w));
            if (at < 0 || v > best || isnan(v)) best = v, at = h * (int64_t)a.width + w;
            if (isnan(v)) break;
        }
    if (a.xdt == a.ydt && a.xdt == AMPX_F32)
        ((uint32_t *)a.y)[e] = ((const uint32_t *)a.x)[plane + (uint64_t)at];
    else if (a.xdt == a.ydt)
        ((uint16_t *)a.y)[e] = ((const uint16_t *)a.x)[plane + (uint64_t)at];
    else
        cuk_st(a.y, a.ydt, e, best);
    if (a.idx) a.idx[e] = (int32_t)at;
}

/* POOL2D_FWD: MAX as above; AVG divides the f32 sum of the in-plane taps by kh kw
 * (count_pad) or by their number. */
__global__ void pool2d_fwd_kernel(cuk_window a, uint64_t total) {
    for (uint64_t e = win_first(); e < total; e += win_stride()) {
        uint64_t r = e / a.out_w, j = e % a.out_w;
        uint64_t i = r % a.out_h;
        r /= a.out_h;
        uint64_t c = r % a.channels, b = r / a.channels;
        uint64_t plane = win_x_at(a, b, c, 0, 0);
        int64_t h0, h1, w0, w1;
        win_span((int64_t)(i * a.sh) - (int64_t)a.ph, a.kh, a.height, &h0, &h1);
        win_span((int64_t)(j * a.sw) - (int64_t)a.pw, a.kw, a.width, &w0, &w1);
        if (a.mode == AMPX_POOL_MAX) {
            pool_max_one(a, e, plane, h0, h1, w0, w1);
            continue;
        }
        float s = 0.0f;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++)
                s += cuk_ld(a.x, a.xdt, plane + (uint64_t)(h * (int64_t)a.width + w));
        uint64_t cnt = a.count_pad ? (uint64_t)a.kh * a.kw : (uint64_t)((h1 - h0) * (w1 - w0));
        cuk_st(a.y, a.ydt, e, s / (float)cnt);
    }
}

/* POOL2D_BWD: dx(b, c, h, w) sums, over the windows (i, j) of its plane that hold (h, w), in
 * row-major order, dy where the forward's index is h W + w (MAX) or dy / the forward's
 * divisor (AVG). */
__global__ void pool2d_bwd_kernel(cuk_window a, uint64_t total) {
    int64_t sh = a.sh, sw = a.sw, kh = a.kh, kw = a.kw;
    for (uint64_t e = win_first(); e < total; e += win_stride()) {
        uint64_t r = e / a.width, w = e % a.width;
        uint64_t h = r % a.height;
        r /= a.height;
        uint64_t c = r % a.channels, b = r / a.channels;
        uint64_t ybase = (b * a.channels + c) * a.out_h * a.out_w;
        /* windows i with i sh - ph <= h < i sh - ph + kh, likewise j */
        int64_t th = (int64_t)h + (int64_t)a.ph, tw = (int64_t)w + (int64_t)a.pw;
        int64_t i0     = th - kh + 1 <= 0 ? 0 : (th - kh + sh) / sh;
        int64_t j0     = tw - kw + 1 <= 0 ? 0 : (tw - kw + sw) / sw;
        int64_t i1     = th / sh < (int64_t)a.out_h - 1 ? th / sh : (int64_t)a.out_h - 1;
        int64_t j1     = tw / sw < (int64_t)a.out_w - 1 ? tw / sw : (int64_t)a.out_w - 1;
        int64_t target = (int64_t)(h * a.width + w);
        float s        = 0.0f;
        for (int64_t i = i0; i <= i1; i++)
            for (int64_t j = j0; j <= j1; j++) {
                uint64_t yi = ybase + (uint64_t)i * a.out_w + (uint64_t)j;
                if (a.mode == AMPX_POOL_MAX) {
                    if ((int64_t)a.idx[yi] == target) s += cuk_ld(a.y, a.ydt, yi);
                    continue;
                }
                int64_t a0, a1, b0, b1;
                win_span(i * sh - (int64_t)a.ph, a.kh, a.height, &a0, &a1);
                win_span(j * sw - (int64_t)a.pw, a.kw, a.width, &b0, &b1);
                uint64_t cnt =
                    a.count_pad ? (uint64_t)(kh * kw) : (uint64_t)((a1 - a0) * (b1 - b0));
                s += cuk_ld(a.y, a.ydt, yi) / (float)cnt;
            }
        uint64_t xi = win_x_at(a, b, c, h, w);
        if (a.accumulate) s = cuk_ld(a.x, a.xdt, xi) + s;
        cuk_st(a.x, a.xdt, xi, s);
    }
}

/* dx elements of the n images (the work of the gathers). */
static uint64_t win_image_elems(const cuk_window *a) {
    return a->n * a->channels * a->height * a->width;
}

extern "C" cudaError_t cuk_im2col_run(cudaStream_t s, const cuk_window *a) {
    uint64_t total = a->n * a->out_h * a->out_w * a->channels * a->kh * a->kw;
    if (total == 0) return cudaSuccess;
    unsigned blocks = cuk_blocks(total, CUK_THREADS, WIN_BLOCKS_CAP);
    if (a->xdt != a->ydt)
        im2col_convert_kernel<<<blocks, CUK_THREADS, 0, s>>>(*a, total);
    else if (cuk_dt_size(a->xdt) == 4)
        im2col_copy_kernel<uint32_t><<<blocks, CUK_THREADS, 0, s>>>(*a, total);
    else
        im2col_copy_kernel<uint16_t><<<blocks, CUK_THREADS, 0, s>>>(*a, total);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_col2im_run(cudaStream_t s, const cuk_window *a) {
    uint64_t total = win_image_elems(a);
    if (total == 0) return cudaSuccess;
    col2im_kernel<<<cuk_blocks(total, CUK_THREADS, WIN_BLOCKS_CAP), CUK_THREADS, 0, s>>>(*a, total);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_pool2d_fwd_run(cudaStream_t s, const cuk_window *a) {
    uint64_t total = a->n * a->channels * a->out_h * a->out_w;
    if (total == 0) return cudaSuccess;
    pool2d_fwd_kernel<<<cuk_blocks(total, CUK_THREADS, WIN_BLOCKS_CAP), CUK_THREADS, 0, s>>>(*a,
                                                                                             total);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_pool2d_bwd_run(cudaStream_t s, const cuk_window *a) {
    uint64_t total = win_image_elems(a);
    if (total == 0) return cudaSuccess;
    pool2d_bwd_kernel<<<cuk_blocks(total, CUK_THREADS, WIN_BLOCKS_CAP), CUK_THREADS, 0, s>>>(*a,
                                                                                             total);
    return cudaGetLastError();
}
