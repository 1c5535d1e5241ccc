/* permute.cu — PERMUTE: a strided 4-D copy with dtype conversion, in the loop form the host
 * code gives (kernels.h: unit dims in front, dim 3 walking y with the smallest stride).
 *
 * Thread i takes the index that is i in row-major order over the dims, so neighbouring
 * threads write neighbouring elements of y when its smallest stride is 1 (coalesced stores;
 * the reads of a transpose are strided). Same dtypes copy the elements' bits, NaN payloads
 * included; otherwise each element is widened exactly to f32 and rounded once to nearest
 * even with dtype.h's functions.
 */
#include "common.cuh"

/* Element offsets in x and y of index i. */
__device__ __forceinline__ void permute_at(const cuk_permute &p, uint64_t i, uint64_t *xi,
                                           uint64_t *yi) {
    uint64_t i3 = i % p.dims[3];
    i /= p.dims[3];
    uint64_t i2 = i % p.dims[2];
    i /= p.dims[2];
    uint64_t i1 = i % p.dims[1], i0 = i / p.dims[1];
    *xi = i0 * p.xs[0] + i1 * p.xs[1] + i2 * p.xs[2] + i3 * p.xs[3];
    *yi = i0 * p.ys[0] + i1 * p.ys[1] + i2 * p.ys[2] + i3 * p.ys[3];
}

template <typename T> __global__ void permute_copy_kernel(cuk_permute p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        uint64_t xi, yi;
        permute_at(p, i, &xi, &yi);
        ((T *)p.y)[yi] = ((const T *)p.x)[xi];
    }
}

__global__ void permute_convert_kernel(cuk_permute p) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        uint64_t xi, yi;
        permute_at(p, i, &xi, &yi);
        cuk_st(p.y, p.ydt, yi, cuk_ld(p.x, p.xdt, xi));
    }
}

extern "C" cudaError_t cuk_permute_run(cudaStream_t s, const cuk_permute *p) {
    if (p->n == 0) return cudaSuccess;
    unsigned blocks = cuk_blocks(p->n, CUK_THREADS, 1u << 20);
    if (p->xdt != p->ydt)
        permute_convert_kernel<<<blocks, CUK_THREADS, 0, s>>>(*p);
    else if (cuk_dt_size(p->xdt) == 4)
        permute_copy_kernel<uint32_t><<<blocks, CUK_THREADS, 0, s>>>(*p);
    else
        permute_copy_kernel<uint16_t><<<blocks, CUK_THREADS, 0, s>>>(*p);
    return cudaGetLastError();
}
