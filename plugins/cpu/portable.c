/* portable.c — the portable kernel table: the C GEMM tile kernel gemm.c's tile driver calls
 * (the seam the AVX2 and AVX-512 tables of avx2.c and avx512.c replace with their sliver
 * micro-kernels) and dtype.h's one-element-at-a-time converters, which avx2.c's tails call
 * too. Any machine runs it; isa.c picks it when cpuid offers nothing wider, or when asked
 * (isa=portable). It calls no other file of the plugin. */
#include <string.h>

#include "cpu.h"

// ---------------------------------------------------------------------------------------
// GEMM tile kernel (the seam: AVX2 / AVX-512 / AMX tables replace gemm_tile)

/* Register blocking: a 4 x GEMM_NR block of acc is held in a local array across the whole
 * k loop, so each B row segment is loaded once for four rows. The fixed-width inner loops
 * let the compiler vectorise without run-time alias checks. Each acc element still sums its
 * k products in order p = 0, 1, ..., so edge blocks and full blocks round identically. */
#define GEMM_NR 16

static void gemm_block_4xnr(uint64_t kc, uint64_t nc, const float *restrict a, uint64_t lda_,
                            const float *restrict b, float *restrict acc, uint64_t ldacc) {
    float r[4][GEMM_NR];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < GEMM_NR; j++)
            r[i][j] = acc[i * ldacc + j];
    for (uint64_t p = 0; p < kc; p++) {
        const float *restrict brow = b + p * nc;
        float x0 = a[p], x1 = a[lda_ + p], x2 = a[2 * lda_ + p], x3 = a[3 * lda_ + p];
        for (int j = 0; j < GEMM_NR; j++) {
            float bv = brow[j];
            r[0][j] += x0 * bv;
            r[1][j] += x1 * bv;
            r[2][j] += x2 * bv;
            r[3][j] += x3 * bv;
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < GEMM_NR; j++)
            acc[i * ldacc + j] = r[i][j];
}

static void gemm_tile_portable(uint64_t mc, uint64_t nc, uint64_t kc, const float *a,
                               const float *b, float *acc, uint64_t ldacc) {
    uint64_t nfull = nc - nc % GEMM_NR, i = 0;
    for (; i + 4 <= mc; i += 4) {
        for (uint64_t j = 0; j < nfull; j += GEMM_NR)
            gemm_block_4xnr(kc, nc, a + i * kc, kc, b + j, acc + i * ldacc + j, ldacc);
        for (uint64_t ii = i; ii < i + 4; ii++) /* column tail */
            for (uint64_t p = 0; p < kc; p++)
                for (uint64_t j = nfull; j < nc; j++)
                    acc[ii * ldacc + j] += a[ii * kc + p] * b[p * nc + j];
    }
    for (; i < mc; i++) { /* row tail */
        float *c0       = acc + i * ldacc;
        const float *a0 = a + i * kc;
        for (uint64_t p = 0; p < kc; p++) {
            const float *brow = b + p * nc;
            float x0          = a0[p];
            for (uint64_t j = 0; j < nc; j++)
                c0[j] += x0 * brow[j];
        }
    }
}

// ---------------------------------------------------------------------------------------
// Row converters (the table's load_f32 and store_f32; avx2.c's tails call them too)

/* One element at a time with dtype.h. */
void cpu_load_f32_portable(float *dst, const void *src, ampx_dtype dt, uint64_t n) {
    switch (dt) {
    case AMPX_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case AMPX_BF16: {
        const uint16_t *s = src;
        for (uint64_t j = 0; j < n; j++)
            dst[j] = ampx_bf16_to_f32(s[j]);
        break;
    }
    case AMPX_F16: {
        const uint16_t *s = src;
        for (uint64_t j = 0; j < n; j++)
            dst[j] = ampx_f16_to_f32(s[j]);
        break;
    }
    default: break;
    }
}

void cpu_store_f32_portable(void *dst, ampx_dtype dt, const float *src, uint64_t n) {
    switch (dt) {
    case AMPX_F32: memmove(dst, src, (size_t)n * sizeof(float)); break;
    case AMPX_BF16: {
        uint16_t *d = dst;
        for (uint64_t j = 0; j < n; j++)
            d[j] = ampx_f32_to_bf16(src[j]);
        break;
    }
    case AMPX_F16: {
        uint16_t *d = dst;
        for (uint64_t j = 0; j < n; j++)
            d[j] = ampx_f32_to_f16(src[j]);
        break;
    }
    default: break;
    }
}

// ---------------------------------------------------------------------------------------
// The table

const cpu_kernels cpu_kernels_portable = {
    .name      = "portable",
    .isa       = CPU_ISA_PORTABLE,
    .gemm_tile = gemm_tile_portable,
    .load_f32  = cpu_load_f32_portable,
    .store_f32 = cpu_store_f32_portable,
};
