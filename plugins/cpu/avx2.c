/* avx2.c — the AVX2 + FMA + F16C kernel table: the 6 x 16 GEMM micro-kernel and the
 * vectorised bf16/f16 <-> f32 converters every op uses.
 *
 * Each function carries its own target attribute instead of a global -mavx2, so the plugin
 * still loads and runs on any x86-64; isa.c hands this table out only when cpuid and XCR0
 * say AVX2, FMA and F16C are usable.
 *
 * Numerics: the micro-kernel sums each C element's k products in order with one fused
 * multiply-add per product (so it rounds differently from the portable path, which
 * multiplies then adds; both are within the GEMM tolerance). The converters are
 * bit-identical to dtype.h, NaN payloads included: tests/cpu_isa checks every f16 and bf16
 * value and every rounding case of f32.
 */
#include "cpu.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2,fma,f16c")))

// ---------------------------------------------------------------------------------------
// GEMM micro-kernel: 6 rows x 16 columns of C in 12 ymm accumulators; per k step two loads
// of B, six broadcasts of A, twelve FMAs.

#define MR 6
#define NR 16

AVX2_FN static void micro_6x16(uint64_t kc, const float *a, const float *b, float *acc,
                               uint64_t ldacc, int first, const cpu_gemm_out *out) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_ps();
        c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    } else {
        c00 = _mm256_loadu_ps(acc + 0 * ldacc), c01 = _mm256_loadu_ps(acc + 0 * ldacc + 8);
        c10 = _mm256_loadu_ps(acc + 1 * ldacc), c11 = _mm256_loadu_ps(acc + 1 * ldacc + 8);
        c20 = _mm256_loadu_ps(acc + 2 * ldacc), c21 = _mm256_loadu_ps(acc + 2 * ldacc + 8);
        c30 = _mm256_loadu_ps(acc + 3 * ldacc), c31 = _mm256_loadu_ps(acc + 3 * ldacc + 8);
        c40 = _mm256_loadu_ps(acc + 4 * ldacc), c41 = _mm256_loadu_ps(acc + 4 * ldacc + 8);
        c50 = _mm256_loadu_ps(acc + 5 * ldacc), c51 = _mm256_loadu_ps(acc + 5 * ldacc + 8);
    }
#pragma GCC unroll 4
    for (uint64_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 x;
        x   = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
        x   = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
        x   = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
        x   = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
        x   = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
        x   = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
        a += MR;
        b += NR;
    }
    if (!out) {
        _mm256_storeu_ps(acc + 0 * ldacc, c00), _mm256_storeu_ps(acc + 0 * ldacc + 8, c01);
        _mm256_storeu_ps(acc + 1 * ldacc, c10), _mm256_storeu_ps(acc + 1 * ldacc + 8, c11);
        _mm256_storeu_ps(acc + 2 * ldacc, c20), _mm256_storeu_ps(acc + 2 * ldacc + 8, c21);
        _mm256_storeu_ps(acc + 3 * ldacc, c30), _mm256_storeu_ps(acc + 3 * ldacc + 8, c31);
        _mm256_storeu_ps(acc + 4 * ldacc, c40), _mm256_storeu_ps(acc + 4 * ldacc + 8, c41);
        _mm256_storeu_ps(acc + 5 * ldacc, c50), _mm256_storeu_ps(acc + 5 * ldacc + 8, c51);
        return;
    }
    /* the epilogue of cpu_gemm_out: alpha * sum (+ beta * c), each operation rounded */
    const __m256 alpha = _mm256_set1_ps(out->alpha), beta = _mm256_set1_ps(out->beta);
    float *y     = out->c; /* f32 only: this table has no micro_out_16 */
    uint64_t ldc = out->ldc;
    int rd       = out->beta != 0.0f;
#define EP(v, i, h)                                                                                \
    _mm256_storeu_ps(                                                                              \
        y + (i)*ldc + 8 * (h),                                                                     \
        rd ? _mm256_add_ps(_mm256_mul_ps(alpha, v),                                                \
                           _mm256_mul_ps(beta, _mm256_loadu_ps(y + (i)*ldc + 8 * (h))))            \
           : _mm256_mul_ps(alpha, v))
    EP(c00, 0, 0), EP(c01, 0, 1), EP(c10, 1, 0), EP(c11, 1, 1), EP(c20, 2, 0), EP(c21, 2, 1);
    EP(c30, 3, 0), EP(c31, 3, 1), EP(c40, 4, 0), EP(c41, 4, 1), EP(c50, 5, 0), EP(c51, 5, 1);
#undef EP
}

// ---------------------------------------------------------------------------------------
// Converters, eight elements at a time; the tail goes through dtype.h.

/* bf16 -> f32: the 16 bits become the top of the f32, exactly as dtype.h does. f16 -> f32:
 * vcvtph2ps is exact for every number, but it quiets a signalling NaN; dtype.h keeps the
 * payload as it is, so NaN lanes are rebuilt with integer operations. */
AVX2_FN void cpu_load_f32_avx2(float *dst, const void *src, ampx_dtype dt, uint64_t n) {
    const uint16_t *s = src;
    uint64_t j        = 0;
    if (dt == AMPX_BF16) {
        for (; j + 8 <= n; j += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + j)));
            _mm256_storeu_ps(dst + j, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; j < n; j++)
            dst[j] = ampx_bf16_to_f32(s[j]);
    } else if (dt == AMPX_F16) {
        const __m256i abs_mask = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7c00);
        for (; j + 8 <= n; j += 8) {
            __m128i h   = _mm_loadu_si128((const __m128i *)(s + j));
            __m256 f    = _mm256_cvtph_ps(h);
            __m256i w   = _mm256_cvtepu16_epi32(h);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, abs_mask), inf);
            if (!_mm256_testz_si256(nan, nan)) {
                __m256i sign =
                    _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
                __m256i mant = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13);
                __m256i bits =
                    _mm256_or_si256(_mm256_or_si256(sign, mant), _mm256_set1_epi32(0x7f800000));
                f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
            }
            _mm256_storeu_ps(dst + j, f);
        }
        for (; j < n; j++)
            dst[j] = ampx_f16_to_f32(s[j]);
    } else {
        cpu_load_f32_portable(dst, src, dt, n);
    }
}

/* f32 -> bf16: dtype.h's integer round to nearest even (x + 0x7fff + lsb) >> 16, NaN lanes
 * quieted with their sign and top payload. f32 -> f16: vcvtps2ph with round to nearest
 * even (immediate 0), which matches dtype.h for every input including subnormal results,
 * overflow to inf and NaN. */
AVX2_FN void cpu_store_f32_avx2(void *dst, ampx_dtype dt, const float *src, uint64_t n) {
    uint16_t *d = dst;
    uint64_t j  = 0;
    if (dt == AMPX_BF16) {
        const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
        const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
        const __m256i inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
        for (; j + 8 <= n; j += 8) {
            __m256i x   = _mm256_castps_si256(_mm256_loadu_ps(src + j));
            __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
            __m256i r   = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), lsb), 16);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
            __m256i q   = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
            r           = _mm256_blendv_epi8(r, q, nan);
            __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
            _mm_storeu_si128((__m128i *)(d + j), p);
        }
        for (; j < n; j++)
            d[j] = ampx_f32_to_bf16(src[j]);
    } else if (dt == AMPX_F16) {
        for (; j + 8 <= n; j += 8)
            _mm_storeu_si128((__m128i *)(d + j),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
        for (; j < n; j++)
            d[j] = ampx_f32_to_f16(src[j]);
    } else {
        cpu_store_f32_portable(dst, dt, src, n);
    }
}

const cpu_kernels cpu_kernels_avx2 = {
    .name       = "avx2",
    .isa        = CPU_ISA_AVX2,
    .gemm_tile  = NULL,
    .mr         = MR,
    .nr         = NR,
    .mc         = 16 * MR,
    .nc         = 16 * NR,
    .gemm_micro = micro_6x16,
    .load_f32   = cpu_load_f32_avx2,
    .store_f32  = cpu_store_f32_avx2,
};
#endif
