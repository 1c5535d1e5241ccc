/* avx2_math.h — the f32 math of the AVX2 paths of the transcendental and row ops (gelu,
 * sigmoid, silu, softmax, cross-entropy, layernorm), eight lanes at a time: Cephes' expf
 * (any argument, and a cheaper one for arguments <= 0), the partial-vector loads and stores
 * of a row's end, and horizontal reductions in a fixed lane order so a row's result
 * depends only on its data. Errors against a double reference are measured in
 * tests/test_cpu_args.c (math/activations_f32, math/rows_f32) and listed in docs/CPU.md.
 */
#ifndef AMPX_PLUGIN_CPU_AVX2_MATH_H
#define AMPX_PLUGIN_CPU_AVX2_MATH_H

#include "cpu.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#define CPU_AVX2_FN __attribute__((target("avx2,fma,f16c")))

/* exp of eight floats: Cephes' expf. k = round(x log2 e), r = x - k ln 2 with ln 2 in two
 * parts (|r| <= ln(2)/2), exp(r) = 1 + r + r^2 P(r) with a degree-5 minimax P, then 2^k in the
 * exponent bits: about 1 f32 ulp (Cephes' figure; the activations built on it are measured
 * in tests/test_cpu_args.c, math/activations_f32). Below -87.33 it gives 0 (no subnormals),
 * above 88.72 inf, NaN stays NaN. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_exp_ps(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 k  = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r  = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
    r         = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p  = _mm256_set1_ps(1.9875691500e-4f);
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p         = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^k for k in [-126, 128]: 2^(k-1) * 2 keeps k = 128 (x just below the clamp) finite */
    __m256i ki = _mm256_cvtps_epi32(_mm256_sub_ps(k, _mm256_set1_ps(1.0f)));
    __m256 pow2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ki, _mm256_set1_epi32(127)), 23));
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, pow2), _mm256_set1_ps(2.0f));
    res        = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays NaN */
}

/* exp of eight floats known to be <= 0 or NaN (softmax's z - max): cpu_avx2_exp_ps's polynomial
 * without the overflow handling. k = round(x log2 e) is taken from the low
 * bits of x log2 e + 1.5 * 2^23 (round to nearest even, as _mm256_round_ps does), so 2^k is
 * one shift; k >= -126 after the clamp, so 2^k is normal. Below -87.33654 it gives 0 (and
 * -inf gives 0); max(lo, x) returns x when x is NaN, and the NaN carries through. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_exp_neg_ps(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f), magic = _mm256_set1_ps(12582912.0f);
    __m256 xc = _mm256_max_ps(lo, x);
    __m256 kb = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    __m256 k  = _mm256_sub_ps(kb, magic);
    __m256 r  = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
    r         = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p  = _mm256_set1_ps(1.9875691500e-4f);
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p         = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p         = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* the integer k sits in the low mantissa bits of kb: (k + 127) << 23 is 2^k */
    __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_castps_si256(kb), _mm256_set1_epi32(127 - 0x4B400000)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
}

/* The first m lanes (0 <= m <= 8) set: the mask of a row's last, partial vector, for
 * _mm256_maskload_ps / _mm256_maskstore_ps (masked lanes are neither read nor written). */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256i cpu_avx2_first_lanes(uint64_t m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The next min(m, 8) floats at p (m >= 1 remain): a plain load or store for a whole vector,
 * masked for the last, partial one (masked lanes read as 0 and are not written). */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_load_n(const float *p,
                                                                                uint64_t m) {
    return m >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, cpu_avx2_first_lanes(m));
}
CPU_AVX2_FN static inline __attribute__((always_inline)) void cpu_avx2_store_n(float *p, uint64_t m,
                                                                               __m256 v) {
    if (m >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, cpu_avx2_first_lanes(m), v);
}

/* Horizontal reductions in a fixed order (lanes 0..7 pairwise), so a row's result never
 * depends on anything but its data. */
CPU_AVX2_FN static inline __attribute__((always_inline)) float cpu_avx2_hmax_ps(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a        = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a        = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}
CPU_AVX2_FN static inline __attribute__((always_inline)) float cpu_avx2_hsum_ps(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a        = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a        = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}
CPU_AVX2_FN static inline __attribute__((always_inline)) double cpu_avx2_hsum_pd(__m256d v) {
    __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(a, _mm_unpackhi_pd(a, a)));
}

/* acc_lo/acc_hi += the eight floats of v widened to double (exact), lanes 0-3 and 4-7. */
CPU_AVX2_FN static inline __attribute__((always_inline)) void
cpu_avx2_acc_pd(__m256d *acc_lo, __m256d *acc_hi, __m256 v) {
    *acc_lo = _mm256_add_pd(*acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *acc_hi = _mm256_add_pd(*acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
#endif
#endif
