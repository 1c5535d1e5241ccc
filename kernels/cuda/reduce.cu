/* reduce.cu — REDUCE (row sum / mean) and SUM_SQUARES (global sum of squares for clipping).
 *
 * Both accumulate in double and round once to the output. REDUCE: one block per row.
 * SUM_SQUARES: each tensor of the list is cut among bx blocks (grid-stride), each block
 * leaves one double partial, and a final one-block kernel adds all partials in a fixed
 * order, so the result does not depend on timing and no atomics are needed. Non-finite
 * inputs propagate: inf^2 = inf, NaN stays NaN. ABS_MAX: the same geometry, each warp
 * folding the magnitudes' f32 bits (NaN mapped to the quiet NaN, above +inf) into out with
 * atomicMax on those bits, out cleared first: a maximum, so the order does not matter.
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// REDUCE

__global__ void reduce_kernel(cuk_reduce a) {
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        double s = 0.0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x)
            s += cuk_ld(a.x, a.xdt, r * a.cols + c);
        s = cuk_block_sum(s);
        if (a.mean) s /= (double)a.cols; /* cols == 0: 0/0 = NaN, the mean of nothing */
        if (threadIdx.x == 0) cuk_st(a.y, a.ydt, r, (float)s);
    }
}

extern "C" cudaError_t cuk_reduce_run(cudaStream_t s, const cuk_reduce *a) {
    if (a->rows == 0) return cudaSuccess;
    /* a long row gets a full block; short rows a warp or a few */
    reduce_kernel<<<cuk_blocks(a->rows, 1, 1u << 30), cuk_row_threads(a->cols), 0, s>>>(*a);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// Multi-tensor geometry

extern "C" uint32_t cuk_mt_blocks(uint64_t max_n) {
    uint64_t b = (max_n + 4 * CUK_THREADS - 1) / (4 * CUK_THREADS);
    if (b < 1) b = 1;
    if (b > 256) b = 256;
    return (uint32_t)b;
}

// ---------------------------------------------------------------------------------------
// SUM_SQUARES

__global__ void sumsq_part_kernel(cuk_mt_group g, uint32_t bx, double *partial) {
    const cuk_mt_tensor t = g.t[blockIdx.y];
    double s              = 0.0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n;
         i += (uint64_t)bx * blockDim.x) {
        double v = cuk_ld(t.p, t.dt, i);
        s += v * v;
    }
    s = cuk_block_sum(s);
    if (threadIdx.x == 0) partial[(uint64_t)(g.first + blockIdx.y) * bx + blockIdx.x] = s;
}

__global__ void sumsq_finish_kernel(const double *partial, uint64_t n_partial, float *out,
                                    int accumulate) {
    uint64_t per = (n_partial + blockDim.x - 1) / blockDim.x;
    uint64_t p0 = threadIdx.x * per, p1 = p0 + per < n_partial ? p0 + per : n_partial;
    double s = 0.0;
    for (uint64_t p = p0; p < p1; p++)
        s += partial[p];
    s = cuk_block_sum(s);
    if (threadIdx.x == 0) *out = (float)((accumulate ? (double)*out : 0.0) + s);
}

extern "C" cudaError_t cuk_sum_squares_part(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                            double *partial) {
    if (g->count == 0) return cudaSuccess;
    sumsq_part_kernel<<<dim3(bx, g->count), CUK_THREADS, 0, s>>>(*g, bx, partial);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_sum_squares_finish(cudaStream_t s, const double *partial,
                                              uint64_t n_partial, float *out, int accumulate) {
    sumsq_finish_kernel<<<1, CUK_THREADS, 0, s>>>(partial, n_partial, out, accumulate);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// ABS_MAX

__global__ void abs_max_kernel(cuk_mt_group g, uint32_t bx, unsigned int *out) {
    const cuk_mt_tensor t = g.t[blockIdx.y];
    unsigned int m        = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n;
         i += (uint64_t)bx * blockDim.x) {
        unsigned int v = __float_as_uint(cuk_ld(t.p, t.dt, i)) & 0x7fffffffu;
        m              = max(m, v > 0x7f800000u ? 0x7fc00000u : v);
    }
    for (int o = 16; o > 0; o >>= 1)
        m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0 && m) atomicMax(out + g.first + blockIdx.y, m);
}

extern "C" cudaError_t cuk_abs_max_run(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                       float *out) {
    if (g->count == 0) return cudaSuccess;
    abs_max_kernel<<<dim3(bx, g->count), CUK_THREADS, 0, s>>>(*g, bx, (unsigned int *)out);
    return cudaGetLastError();
}
