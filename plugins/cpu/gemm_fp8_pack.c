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
/* The pair packs run only with the AVX512-BF16 table's pair micro-kernel (gemm.c's
 * j->pairs), so these packers may use AVX-512 (BW and VL: 16-bit permutes and masks). */
#define FP8_PACK_FN                                                                                \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"), optimize("O3")))

/* The bf16 bits of the 128 magnitudes of each format (NaNs as the quiet bf16 NaN), from
 * dtype.h's widening, made when the plugin loads. */
static uint16_t fp8_bf16_lut[2][128] __attribute__((aligned(64)));
__attribute__((constructor)) static void fp8_lut_init(void) {
    for (int f = 0; f < 2; f++)
        for (uint32_t c = 0; c < 128; c++) {
            float v            = ampx_fp8_to_f32((uint8_t)c, f ? AMPX_E5M2 : AMPX_E4M3);
            fp8_bf16_lut[f][c] = v != v ? 0x7fc0u : (uint16_t)(ampx_f32_bits(v) >> 16);
        }
}

/* Sixteen fp8 codes from p as the bf16 bits of their values, one per 16-bit lane: the
 * magnitude's entry of the table (two 64-entry permutes, picked by bit 6), the sign ORed in. */
FP8_PACK_FN static inline __attribute__((always_inline)) __m256i fp8_bf16x16(const uint8_t *p,
                                                                             ampx_dtype dt) {
    const uint16_t *t = fp8_bf16_lut[dt == AMPX_E5M2];
    __m256i x         = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
    __m256i mag       = _mm256_and_si256(x, _mm256_set1_epi16(0x7f));
    __m512i idx       = _mm512_castsi256_si512(mag);
    __m512i lo = _mm512_permutex2var_epi16(_mm512_load_si512(t), idx, _mm512_load_si512(t + 32));
    __m512i hi =
        _mm512_permutex2var_epi16(_mm512_load_si512(t + 64), idx, _mm512_load_si512(t + 96));
    __m256i v = _mm256_mask_blend_epi16(_mm256_test_epi16_mask(mag, _mm256_set1_epi16(0x40)),
                                        _mm512_castsi512_si256(lo), _mm512_castsi512_si256(hi));
    return _mm256_or_si256(v, _mm256_slli_epi16(_mm256_xor_si256(x, mag), 8));
}

/* Eight pair slots from sixteen consecutive fp8 elements of X from i: the 32-bit words of
 * their bf16 bits with the halves swapped (element 2q high), as pack_kmajor_pairs reads bf16. */
FP8_PACK_FN static inline __attribute__((always_inline)) __m256
fp8_pairs8(const void *X, ampx_dtype dt, uint64_t i) {
    __m256i x = fp8_bf16x16((const uint8_t *)X + i, dt);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(x, 16), _mm256_srli_epi32(x, 16)));
}
#else
#define FP8_PACK_FN
#endif

/* pack_kmajor_pairs for fp8 X. */
FP8_PACK_FN void cpu_pack_kmajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
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
FP8_PACK_FN void cpu_pack_imajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
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
        /* sixteen slots at a time: element hi's bf16 bits high, lo's low (or zero) */
        for (; i + 16 <= len; i += 16) {
            __m256i h = fp8_bf16x16((const uint8_t *)X + hi + i, dt);
            __m256i l =
                has_lo ? fp8_bf16x16((const uint8_t *)X + lo + i, dt) : _mm256_setzero_si256();
            __m256i a = _mm256_unpacklo_epi16(l, h), b = _mm256_unpackhi_epi16(l, h);
            _mm256_storeu_si256((__m256i *)(tmp + i), _mm256_permute2x128_si256(a, b, 0x20));
            _mm256_storeu_si256((__m256i *)(tmp + i + 8), _mm256_permute2x128_si256(a, b, 0x31));
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
