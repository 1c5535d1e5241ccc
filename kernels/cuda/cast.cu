/* cast.cu — CAST between float dtypes.
 *
 * Widening is exact; narrowing rounds to nearest even, or stochastically with
 * rnd = ampx_hash32(seed, i) for element i (dtype.h's own functions, compiled for the
 * device), so the result is bit-identical to the CPU backend's whatever the grid. A cast to
 * the same dtype is a plain device copy (enqueued by the host code), bit-exact with NaN
 * payloads. bf16 <-> f16 goes through f32, exact on the way in, so it rounds once.
 */
#include "common.cuh"

__global__ void cast_kernel(cuk_cast c) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < c.n; i += stride) {
        float v = cuk_ld(c.src, c.sdt, i);
        if (c.stochastic)
            cuk_st_sr(c.dst, c.ddt, i, v, ampx_hash32(c.seed, i));
        else
            cuk_st(c.dst, c.ddt, i, v);
    }
}

extern "C" cudaError_t cuk_cast_run(cudaStream_t s, const cuk_cast *c) {
    if (c->n == 0) return cudaSuccess;
    cast_kernel<<<cuk_blocks(c->n, CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*c);
    return cudaGetLastError();
}
