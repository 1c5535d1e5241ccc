/* gemm.cu — the native GEMM of the CUDA backend: C_b = alpha op(A_b) op(B_b) + beta C_b for
 * any combination of f32/bf16/f16 A, B and C, and (ABI 1.7 GEMM_FP8) of e4m3/e5m2 A and B
 * with an f32/bf16/f16 C.
 *
 * cuBLAS takes the dtype combinations it supports (plugins/cuda/gemm.c); this kernel takes
 * the rest (mixed A/B dtypes, f32 inputs with a bf16/f16 C, ...), k == 0, shapes beyond
 * cuBLAS's 32-bit arguments, and everything when the `gemm=native` option is given.
 *
 * Classic shared-memory tiling: a 64 x 64 tile of C per block of 256 threads, each thread a
 * 4 x 4 register block, 16-deep k slices of op(A) and op(B) staged in shared memory as f32
 * (bf16/f16 widen exactly; transposes are resolved while staging). Products accumulate in
 * f32 over the whole k range; only then v = alpha acc + beta c (C read only when beta != 0),
 * rounded once to C's dtype; with the ABI 1.5 epilogue v + bias[j] in f32 is stored to pre
 * (when given) and f(v) (kernel_math.h's ampx_km_act_f in double, as ACT_FWD here) is what
 * is rounded into C. Elements outside the matrices (edge tiles) load as 0 and are
 * never written, so padding between rows is never read as data nor overwritten.
 *
 * GEMM_FP8 runs the same kernel: fp8 codes widen exactly to f32 as they are staged (their
 * products are exact in f32, so acc is the f32 sum of the codes' products), and alpha is
 * replaced by alpha * (scale_a[0] * scale_b[0]), the two dequantization factors read from
 * device memory by the kernel, so nothing waits for them on the host.
 */
#include "common.cuh"

#define BM 64
#define BN 64
#define BK 16

/* op(A)[i][p] of batch base a, or 0 outside m x k. */
__device__ __forceinline__ float ld_opa(const cuk_gemm &g, const void *a, uint64_t i, uint64_t p) {
    if (i >= g.m || p >= g.k) return 0.0f;
    return cuk_ld(a, g.adt, g.trans_a ? p * g.lda + i : i * g.lda + p);
}

/* op(B)[p][j], or 0 outside k x n. */
__device__ __forceinline__ float ld_opb(const cuk_gemm &g, const void *b, uint64_t p, uint64_t j) {
    if (p >= g.k || j >= g.n) return 0.0f;
    return cuk_ld(b, g.bdt, g.trans_b ? j * g.ldb + p : p * g.ldb + j);
}

__global__ void __launch_bounds__(256)
    gemm_kernel(cuk_gemm g, uint64_t batch0, uint64_t nbatch, uint64_t tiles_m, uint64_t tiles_n) {
    __shared__ float as[BK][BM + 1];
    __shared__ float bs[BK][BN + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16; /* 16 x 16 threads, 4 x 4 each */
    const size_t ea = cuk_dt_size(g.adt), eb = cuk_dt_size(g.bdt), ec = cuk_dt_size(g.cdt);
    /* GEMM_FP8: (alpha * (a_scale_inv * b_scale_inv)), in that order (backend.h) */
    const float alpha = g.scale_a ? g.alpha * (g.scale_a[0] * g.scale_b[0]) : g.alpha;

    for (uint64_t bz = blockIdx.z; bz < nbatch; bz += gridDim.z) {
        uint64_t b    = batch0 + bz;
        const void *A = (const char *)g.a + b * g.stride_a * ea;
        const void *B = (const char *)g.b + b * g.stride_b * eb;
        void *C       = (char *)g.c + b * g.stride_c * ec;
        for (uint64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
            for (uint64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
                uint64_t i0 = tm * BM, j0 = tn * BN;
                float acc[4][4];
                for (int r = 0; r < 4; r++)
                    for (int c = 0; c < 4; c++)
                        acc[r][c] = 0.0f;
                for (uint64_t p0 = 0; p0 < g.k; p0 += BK) {
                    /* stage a BM x BK slice of op(A) and a BK x BN slice of op(B):
                     * 1024 elements each, 4 per thread */
                    for (int e = threadIdx.x; e < BM * BK; e += 256) {
                        int ii     = g.trans_a ? e % BM : e / BK;
                        int pp     = g.trans_a ? e / BM : e % BK;
                        as[pp][ii] = ld_opa(g, A, i0 + ii, p0 + pp);
                    }
                    for (int e = threadIdx.x; e < BK * BN; e += 256) {
                        int pp     = g.trans_b ? e % BK : e / BN;
                        int jj     = g.trans_b ? e / BK : e % BN;
                        bs[pp][jj] = ld_opb(g, B, p0 + pp, j0 + jj);
                    }
                    __syncthreads();
#pragma unroll
                    for (int pp = 0; pp < BK; pp++) {
                        float av[4], bv[4];
#pragma unroll
                        for (int r = 0; r < 4; r++)
                            av[r] = as[pp][ty + 16 * r];
#pragma unroll
                        for (int c = 0; c < 4; c++)
                            bv[c] = bs[pp][tx + 16 * c];
#pragma unroll
                        for (int r = 0; r < 4; r++)
#pragma unroll
                            for (int c = 0; c < 4; c++)
                                acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
                    }
                    __syncthreads();
                }
                for (int r = 0; r < 4; r++) {
                    uint64_t i = i0 + ty + 16 * r;
                    if (i >= g.m) continue;
                    for (int c = 0; c < 4; c++) {
                        uint64_t j = j0 + tx + 16 * c;
                        if (j >= g.n) continue;
                        uint64_t idx = i * g.ldc + j;
                        float v      = alpha * acc[r][c];
                        if (g.beta != 0.0f) v += g.beta * cuk_ld(C, g.cdt, idx);
                        if (g.bias) v = v + cuk_ld(g.bias, g.biasdt, j);
                        if (g.pre)
                            cuk_st((char *)g.pre + b * g.stride_c * cuk_dt_size(g.predt), g.predt,
                                   idx, v);
                        if (g.act) v = (float)ampx_km_act_f((int)g.act - 1, v);
                        cuk_st(C, g.cdt, idx, v);
                    }
                }
            }
        }
    }
}

extern "C" cudaError_t cuk_gemm_native(cudaStream_t s, const cuk_gemm *g, int sequential) {
    if (g->m == 0 || g->n == 0 || g->batch == 0) return cudaSuccess;
    uint64_t tiles_m = (g->m + BM - 1) / BM, tiles_n = (g->n + BN - 1) / BN;
    dim3 grid(cuk_blocks(tiles_n, 1, 1u << 30), cuk_blocks(tiles_m, 1, CUK_GRID_CAP), 1);
    if (!sequential) {
        grid.z = cuk_blocks(g->batch, 1, CUK_GRID_CAP);
        gemm_kernel<<<grid, 256, 0, s>>>(*g, 0, g->batch, tiles_m, tiles_n);
        return cudaGetLastError();
    }
    for (uint64_t b = 0; b < g->batch; b++) {
        gemm_kernel<<<grid, 256, 0, s>>>(*g, b, 1, tiles_m, tiles_n);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

__global__ void gemm_bias_grad_kernel(cuk_gemm g, float *db, int accumulate) {
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < g.n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (uint64_t b = 0; b < g.batch; b++)
            for (uint64_t p = 0; p < g.k; p++)
                s += cuk_ld(g.b, g.bdt,
                            b * g.stride_b + (g.trans_b ? j * g.ldb + p : p * g.ldb + j));
        db[j] = accumulate ? db[j] + s : s;
    }
}

extern "C" cudaError_t cuk_gemm_bias_grad(cudaStream_t s, const cuk_gemm *g, float *db,
                                          int accumulate) {
    if (g->n == 0) return cudaSuccess;
    gemm_bias_grad_kernel<<<cuk_blocks(g->n, 256, CUK_GRID_CAP), 256, 0, s>>>(*g, db, accumulate);
    return cudaGetLastError();
}
