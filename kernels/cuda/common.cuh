/* common.cuh — what every CUDA kernel file of libampx-cuda.so shares: dtype.h and backend.h
 * compiled for the device, element loads and stores in any float dtype (and fp8 loads), and
 * warp and block reductions.
 *
 * dtype.h and backend.h are plain C headers of static inline functions. Rather than
 * re-deriving the bit-exact rounding, they are included here with `inline` widened to
 * `__host__ __device__ inline`, so the kernels call the very functions the CPU backend and
 * the core call (ampx_f32_to_bf16, ampx_f32_to_f16_sr, ampx_hash32, ampx_scheduled_lr, ...).
 * The standard headers they include are included first so that the macro does not reach
 * into them. The fp8 conversions (ampx_f32_to_e4m3, ampx_e5m2_to_f32, ...) are dtype.h's too,
 * so a code written or read on the device has the bits the host's has, NaNs included; the
 * toolkit's cuda_fp8.h is not used.
 */
#ifndef AMPX_KERNELS_CUDA_COMMON_CUH
#define AMPX_KERNELS_CUDA_COMMON_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

#define inline __host__ __device__ inline
#include "ampx/backend.h"
#include "ampx/dtype.h"
#undef inline
/* the numerics the cpu plugin shares (activations, the scaler step): host and device */
#include "ampx/kernel_math.h"

#include "kernels.h"

// ---------------------------------------------------------------------------------------
// Element access: any float dtype as f32 (exact), stores rounded to nearest even. Loads also
// widen the fp8 dtypes exactly (the GEMM's fp8 operands); stores never produce them (the fp8
// kernels encode with dtype.h themselves).

__device__ __forceinline__ float cuk_ld(const void *base, int32_t dt, uint64_t i) {
    switch (dt) {
    case AMPX_F32: return ((const float *)base)[i];
    case AMPX_BF16: return ampx_bf16_to_f32(((const uint16_t *)base)[i]);
    case AMPX_F16: return ampx_f16_to_f32(((const uint16_t *)base)[i]);
    case AMPX_E4M3: return ampx_e4m3_to_f32(((const uint8_t *)base)[i]);
    case AMPX_E5M2: return ampx_e5m2_to_f32(((const uint8_t *)base)[i]);
    default: return 0.0f;
    }
}

__device__ __forceinline__ void cuk_st(void *base, int32_t dt, uint64_t i, float v) {
    switch (dt) {
    case AMPX_F32: ((float *)base)[i] = v; break;
    case AMPX_BF16: ((uint16_t *)base)[i] = ampx_f32_to_bf16(v); break;
    case AMPX_F16: ((uint16_t *)base)[i] = ampx_f32_to_f16(v); break;
    default: break;
    }
}

/* Stochastic rounding with rnd (f32 stores v exactly). */
__device__ __forceinline__ void cuk_st_sr(void *base, int32_t dt, uint64_t i, float v,
                                          uint32_t rnd) {
    switch (dt) {
    case AMPX_F32: ((float *)base)[i] = v; break;
    case AMPX_BF16: ((uint16_t *)base)[i] = ampx_f32_to_bf16_sr(v, rnd); break;
    case AMPX_F16: ((uint16_t *)base)[i] = ampx_f32_to_f16_sr(v, rnd); break;
    default: break;
    }
}

/* The value v becomes when stored in dt and read back (what the next op will see). */
__device__ __forceinline__ float cuk_round_to(int32_t dt, float v) {
    switch (dt) {
    case AMPX_BF16: return ampx_bf16_to_f32(ampx_f32_to_bf16(v));
    case AMPX_F16: return ampx_f16_to_f32(ampx_f32_to_f16(v));
    default: return v;
    }
}

__host__ __device__ __forceinline__ uint32_t cuk_dt_size(int32_t dt) {
    return dt == AMPX_BF16 || dt == AMPX_F16 ? 2u : dt == AMPX_E4M3 || dt == AMPX_E5M2 ? 1u : 4u;
}

/* Vectorised access to 4 consecutive elements starting at i (i a multiple of 4, base aligned
 * to 4 elements): one 16-byte load for f32, one 8-byte load for bf16/f16. */
__device__ __forceinline__ void cuk_ld4(const void *base, int32_t dt, uint64_t i, float v[4]) {
    if (dt == AMPX_F32) {
        float4 q = ((const float4 *)base)[i / 4];
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
        uint2 q       = ((const uint2 *)base)[i / 4];
        uint16_t h[4] = {(uint16_t)(q.x & 0xffffu), (uint16_t)(q.x >> 16),
                         (uint16_t)(q.y & 0xffffu), (uint16_t)(q.y >> 16)};
        for (int j = 0; j < 4; j++)
            v[j] = dt == AMPX_BF16 ? ampx_bf16_to_f32(h[j]) : ampx_f16_to_f32(h[j]);
    }
}

__device__ __forceinline__ void cuk_st4(void *base, int32_t dt, uint64_t i, const float v[4]) {
    if (dt == AMPX_F32) {
        ((float4 *)base)[i / 4] = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        uint16_t h[4];
        for (int j = 0; j < 4; j++)
            h[j] = dt == AMPX_BF16 ? ampx_f32_to_bf16(v[j]) : ampx_f32_to_f16(v[j]);
        ((uint2 *)base)[i / 4] = make_uint2((uint32_t)h[0] | ((uint32_t)h[1] << 16),
                                            (uint32_t)h[2] | ((uint32_t)h[3] << 16));
    }
}

/* 1 if p is aligned for cuk_ld4/cuk_st4 in dtype dt. */
__host__ __device__ __forceinline__ int cuk_aligned4(const void *p, int32_t dt) {
    return ((uintptr_t)p % (4u * cuk_dt_size(dt))) == 0;
}

// ---------------------------------------------------------------------------------------
// Launch geometry

#define CUK_THREADS 256

/* Blocks for a grid-stride loop over `work` items of `per_block` each, capped so that very
 * large inputs loop instead of overflowing the grid. */
static inline unsigned cuk_blocks(uint64_t work, uint64_t per_block, unsigned cap) {
    uint64_t b = (work + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

/* Threads for a block that walks one row of `cols` with a stride: a multiple of 32, at most
 * CUK_THREADS. */
static inline unsigned cuk_row_threads(uint64_t cols) {
    uint64_t t = (cols + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > CUK_THREADS) t = CUK_THREADS;
    return (unsigned)t;
}

#define CUK_GRID_CAP 65535u

// ---------------------------------------------------------------------------------------
// Warp and block reductions. Block reductions need blockDim.x a multiple of 32 (at most
// 1024), are called by every thread of the block, and return the result to every thread.
// Sums are formed in a fixed tree order, so a result does not depend on timing.

__device__ __forceinline__ double cuk_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ unsigned long long cuk_warp_sum_u64(unsigned long long v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* max ignoring NaN (fmaxf returns the other operand); callers track NaN separately. */
__device__ __forceinline__ float cuk_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ int cuk_warp_or(int v) {
    return __any_sync(0xffffffffu, v) ? 1 : 0;
}

__device__ __forceinline__ double cuk_block_sum(double v) {
    __shared__ double sh[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cuk_warp_sum(v);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0;
    return cuk_warp_sum(v);
}

__device__ __forceinline__ unsigned long long cuk_block_sum_u64(unsigned long long v) {
    __shared__ unsigned long long sh[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cuk_warp_sum_u64(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0ull;
    return cuk_warp_sum_u64(v);
}

__device__ __forceinline__ float cuk_block_max(float v) {
    __shared__ float sh[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cuk_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return cuk_warp_max(v);
}

__device__ __forceinline__ int cuk_block_or(int v) {
    return __syncthreads_or(v) ? 1 : 0;
}

#endif /* AMPX_KERNELS_CUDA_COMMON_CUH */
