/* gemm_fp8_pack.c — GEMM_FP8's operands packed as gemm.c packs bf16 ones: the k-pair slots
 * of the AVX512-BF16 micro-kernel, each fp8 element widened exactly (gemm_pack.h's loads) and
 * its bf16 bits taken; so an fp8 GEMM runs the bf16 kernel, and its packs cost what bf16's
 * do. (Without the pair kernel, gemm.c's f32 packers widen fp8 like bf16 and f16.) */
#include "gemm_pack.h"

/* fp8 operands take the bf16 pair packs (gemm_micro_bf16): every e4m3 and e5m2 value is
 * exact in bf16, so the products are those of the fp8 values, and the pack costs what a
 * bf16 pack does. The slot of a pair: element hi's bf16 bits high, element lo's low. */
static inline uint32_t fp8_slot(const void *X, ampx_dtype dt, uint64_t hi, int has_lo,
                                uint64_t lo) {
    uint32_t h = ampx_f32_bits(cpu_ld(X, dt, hi)) & 0xffff0000u;
    return has_lo ? h | ampx_f32_bits(cpu_ld(X, dt, lo)) >> 16 : h;
}

#if CPU_HAVE_AVX2_TABLE
/* Eight pair slots from sixteen consecutive fp8 elements of X from i. */
GEMM_PAIRS_FN static inline __attribute__((always_inline)) __m256
fp8_pairs8(const void *X, ampx_dtype dt, uint64_t i) {
    const __m256i keep = _mm256_set1_epi64x(0xffff0000),
                  idx  = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    __m256i a          = _mm256_castps_si256(gemm_ld8(X, dt, i)),
            b          = _mm256_castps_si256(gemm_ld8(X, dt, i + 8));
    /* each 64-bit lane holds elements 2q (low half) and 2q + 1: its slot in the low 32 bits */
    a = _mm256_permutevar8x32_epi32(
        _mm256_or_si256(_mm256_and_si256(a, keep), _mm256_srli_epi64(a, 48)), idx);
    b = _mm256_permutevar8x32_epi32(
        _mm256_or_si256(_mm256_and_si256(b, keep), _mm256_srli_epi64(b, 48)), idx);
    return _mm256_castsi256_ps(_mm256_permute2x128_si256(a, b, 0x20));
}
#endif

/* pack_kmajor_pairs for fp8 X. */
GEMM_PAIRS_FN void cpu_pack_kmajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
                                          uint64_t p0, uint64_t kc, uint64_t r0, uint64_t rows,
                                          unsigned w, uint32_t *dst) {
    uint64_t q2 = kc / 2;
    unsigned r  = 0;
#if CPU_HAVE_AVX2_TABLE
    uint64_t q8 = q2 - q2 % 8;
    for (; r + 4 <= w; r += 4) {
        uint64_t src[4];
        int real[4];
        for (unsigned i = 0; i < 4; i++) {
            real[i] = r + i < rows;
            src[i]  = base + (r0 + r + i) * ld + p0;
        }
        for (uint64_t q = 0; q < q8; q += 8) {
            __m256 v[4];
            for (unsigned i = 0; i < 4; i++)
                v[i] = real[i] ? fp8_pairs8(X, dt, src[i] + 2 * q) : _mm256_setzero_ps();
            gemm_t4x8(v[0], v[1], v[2], v[3], (float *)(dst + q * w + r), w);
        }
        for (unsigned i = 0; i < 4; i++) {
            for (uint64_t q = q8; q < q2; q++)
                dst[q * w + r + i] =
                    real[i] ? fp8_slot(X, dt, src[i] + 2 * q, 1, src[i] + 2 * q + 1) : 0u;
            if (kc % 2) dst[q2 * w + r + i] = real[i] ? fp8_slot(X, dt, src[i] + kc - 1, 0, 0) : 0u;
        }
    }
#endif
    for (; r < w; r++) {
        uint64_t src = base + (r0 + r) * ld + p0;
        for (uint64_t q = 0; q < q2; q++)
            dst[q * w + r] = r < rows ? fp8_slot(X, dt, src + 2 * q, 1, src + 2 * q + 1) : 0u;
        if (kc % 2) dst[q2 * w + r] = r < rows ? fp8_slot(X, dt, src + kc - 1, 0, 0) : 0u;
    }
}

/* pack_imajor_pairs for fp8 X. */
GEMM_PAIRS_FN void cpu_pack_imajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
                                          uint64_t k, uint64_t p0, uint64_t kc, uint64_t i0,
                                          uint64_t len, uint64_t ns, unsigned w, uint32_t *dst) {
    uint32_t tmp[GEMM_STRIP * GEMM_NR_MAX];
    for (uint64_t p = 0; p < kc; p += 2) {
        if (p0 + p + GEMM_PREFETCH_ROWS + 1 < k) {
            const uint8_t *ahead =
                (const uint8_t *)X + base + (p0 + p + GEMM_PREFETCH_ROWS) * ld + i0;
            for (uint64_t off = 0; off < len; off += 64) {
                __builtin_prefetch(ahead + off);
                __builtin_prefetch(ahead + ld + off);
            }
        }
        uint64_t hi = base + (p0 + p) * ld + i0, lo = hi + ld, i = 0;
        int has_lo = p + 1 < kc;
#if CPU_HAVE_AVX2_TABLE
        const __m256i keep = _mm256_set1_epi32((int)0xffff0000u);
        for (; i + 8 <= len; i += 8) {
            __m256i h = _mm256_and_si256(_mm256_castps_si256(gemm_ld8(X, dt, hi + i)), keep);
            if (has_lo)
                h = _mm256_or_si256(
                    h, _mm256_srli_epi32(_mm256_castps_si256(gemm_ld8(X, dt, lo + i)), 16));
            _mm256_storeu_si256((__m256i *)(tmp + i), h);
        }
#endif
        for (; i < len; i++)
            tmp[i] = fp8_slot(X, dt, hi + i, has_lo, lo + i);
        for (i = len; i < ns * w; i++)
            tmp[i] = 0;
        for (uint64_t t = 0; t < ns; t++)
            memcpy(dst + t * w * kc + (p / 2) * w, tmp + t * w, w * sizeof(uint32_t));
    }
}
