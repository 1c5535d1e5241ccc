/* dropout.cu — DROPOUT: inverted dropout with a counter-based mask.
 *
 * Element i is kept when ampx_hash32(seed, offset + i) >= threshold: dtype.h's own hash,
 * compiled for the device, so the mask is the CPU backend's bit for bit whatever the grid.
 * A kept element becomes x[i] * scale (one f32 multiply, nothing to contract), rounded once
 * to y's dtype; a dropped one +0 whatever x holds. Threads take 4 consecutive elements, as
 * SCALE does: one vector load and store when every pointer is aligned to 4 elements, else
 * one by one; the arithmetic is the same either way. In place (y the very same tensor as x)
 * is safe: each thread reads its elements before writing them.
 */
#include "common.cuh"

__device__ __forceinline__ float dropout_f(const cuk_dropout &d, uint64_t i, float x) {
    return ampx_hash32(d.seed, d.offset + i) >= d.threshold ? x * d.scale : 0.0f;
}

__global__ void dropout_kernel(cuk_dropout d, int vec) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x * 4;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < d.n; i += stride) {
        if (vec && i + 4 <= d.n) {
            float x[4];
            cuk_ld4(d.x, d.xdt, i, x);
            for (int j = 0; j < 4; j++)
                x[j] = dropout_f(d, i + j, x[j]);
            cuk_st4(d.y, d.ydt, i, x);
        } else {
            uint64_t end = i + 4 < d.n ? i + 4 : d.n;
            for (uint64_t e = i; e < end; e++)
                cuk_st(d.y, d.ydt, e, dropout_f(d, e, cuk_ld(d.x, d.xdt, e)));
        }
    }
}

extern "C" cudaError_t cuk_dropout_run(cudaStream_t s, const cuk_dropout *d) {
    if (d->n == 0) return cudaSuccess;
    int vec = cuk_aligned4(d->x, d->xdt) && cuk_aligned4(d->y, d->ydt);
    dropout_kernel<<<cuk_blocks(d->n, 4 * CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*d, vec);
    return cudaGetLastError();
}
