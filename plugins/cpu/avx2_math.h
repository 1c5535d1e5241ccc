/* avx2_math.h — the f32 math of the AVX2 and AVX-512 paths of the memory-bound ops (gelu,
 * sigmoid, silu, softmax, cross-entropy, layernorm, the AMP pass, the elementwise ops):
 * Cephes' expf (any argument, and a cheaper one for arguments <= 0) in eight and sixteen
 * lanes with the same bits, the partial-vector loads and stores of a row's end, horizontal
 * reductions in a fixed lane order and the four-set row sums (CPU_SETS4) so a row's result
 * depends only on its data, and the in-register bf16/f16 <-> f32 converters (dtype.h's
 * bits) with which the kernels read and write 16-bit tensors where they lie. Errors
 * against a double reference are measured in tests/test_cpu_args.c (math/activations_f32,
 * math/rows_f32) and listed in docs/CPU.md.
 */
#ifndef AMPX_PLUGIN_CPU_AVX2_MATH_H
#define AMPX_PLUGIN_CPU_AVX2_MATH_H

#include <string.h>

#include "ampx/kernel_math.h"
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

/* The activations' sigmoid of -v (no division, no library call): e = exp(v) for v <= 80
 * (Cephes' polynomial of cpu_avx2_exp_neg_ps in Horner form, 2^k by one shift since -126 <=
 * k <= 116 after the clamps), s = 1 / (1 + e) by three Newton steps y += y (1 - d y) from
 * the integer first guess 0x7ef311c3 - bits(d) (relative error under 1/8, so 2^-24 after
 * three squarings: within 0.51 f32 ulp of 1 / d over d in [1, e^80], measured over every
 * 97th float), and om = 1 - s taken as the product e s (nothing cancels). Where v > 80 the
 * sigmoid is below 2^-115: s = 0 and om = 1 there, as exp(v) = inf would give. Below -87.33
 * e is 2^-126 (s = 1 exactly). NaN stays NaN in s and om. Every operation is IEEE (no
 * approximation instruction), so the AVX-512 copy below gives the same bits. */
CPU_AVX2_FN static inline __attribute__((always_inline)) void
cpu_avx2_sigmoid_neg_ps(__m256 v, __m256 *s, __m256 *om) {
    const __m256 hi = _mm256_set1_ps(80.0f), lo = _mm256_set1_ps(-87.33654f);
    const __m256 magic = _mm256_set1_ps(12582912.0f), one = _mm256_set1_ps(1.0f);
    __m256 vc  = _mm256_max_ps(lo, _mm256_min_ps(hi, v)); /* NaN passes (second operand) */
    __m256 kb  = _mm256_fmadd_ps(vc, _mm256_set1_ps(1.44269504088896341f), magic);
    __m256 k   = _mm256_sub_ps(kb, magic);
    __m256 r   = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), vc);
    r          = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p   = _mm256_set1_ps(1.9875691500e-4f);
    p          = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p          = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p          = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p          = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p          = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p          = _mm256_fmadd_ps(p, r, one);
    p          = _mm256_fmadd_ps(p, r, one);
    __m256i eb = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_castps_si256(kb), _mm256_set1_epi32(127 - 0x4B400000)), 23);
    __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(eb));
    __m256 d = _mm256_add_ps(one, e);
    __m256 y = _mm256_castsi256_ps(
        _mm256_sub_epi32(_mm256_set1_epi32(0x7ef311c3), _mm256_castps_si256(d)));
    y          = _mm256_fmadd_ps(y, _mm256_fnmadd_ps(d, y, one), y);
    y          = _mm256_fmadd_ps(y, _mm256_fnmadd_ps(d, y, one), y);
    y          = _mm256_fmadd_ps(y, _mm256_fnmadd_ps(d, y, one), y);
    __m256 big = _mm256_cmp_ps(v, hi, _CMP_GT_OQ);
    *s         = _mm256_andnot_ps(big, y);
    *om        = _mm256_blendv_ps(_mm256_mul_ps(e, *s), one, big);
}

/* The argument cpu_avx2_sigmoid_neg_ps takes for activation act at x, v = -u: -2 k (x + c
 * x^3) = x (-2k + (-2kc) x^2) for gelu (whose 0.5 (1 + tanh) is sigmoid(2 k (x + c x^3))),
 * -x for sigmoid and silu. ACT_FWD, ACT_BWD and the GEMM epilogue share it, so the three
 * give the same bits. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256
cpu_avx2_act_neg_arg_ps(uint32_t act, __m256 x) {
    if (act == AMPX_ACT_GELU)
        return _mm256_mul_ps(
            x, _mm256_fmadd_ps(_mm256_mul_ps(x, x),
                               _mm256_set1_ps((float)(-2 * AMPX_KM_GELU_K * AMPX_KM_GELU_C)),
                               _mm256_set1_ps((float)(-2 * AMPX_KM_GELU_K))));
    return _mm256_sub_ps(_mm256_setzero_ps(), x);
}

/* Eight fp8 codes (the low 8 bytes of c8) widened exactly to f32. e5m2 is the top byte of an
 * f16. e4m3's seven magnitude bits shifted left by 7 form the f16 of the same mantissa with
 * an exponent 8 lower (its subnormals land on f16 subnormals), so times 256 it is exact;
 * its NaN code S.1111.111 is set apart. A signalling e5m2 NaN comes back quiet (vcvtph2ps). */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_fp8_to_ps(__m128i c8,
                                                                                   ampx_dtype dt) {
    __m128i c = _mm_cvtepu8_epi16(c8);
    if (dt == AMPX_E5M2) return _mm256_cvtph_ps(_mm_slli_epi16(c, 8));
    __m128i mag  = _mm_and_si128(c, _mm_set1_epi16(0x7f));
    __m128i sign = _mm_slli_epi16(_mm_xor_si128(c, mag), 8);
    __m256 v     = _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(sign, _mm_slli_epi16(mag, 7))),
                                 _mm256_set1_ps(256.0f));
    __m256 nan =
        _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f))));
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), nan);
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

// ---------------------------------------------------------------------------------------
// Row sums in two sets

/* The row sums of the row kernels (layernorm's statistics and backward sums, softmax's
 * backward dot) take a row's eight-element groups in two interleaved sets (group g into set
 * g % 2, each set eight lanes), combined as S0 + S1 and then across lanes in a fixed order:
 * two independent chains of additions instead of one, in the same order on the AVX2 and
 * AVX-512 paths (two sets keep the AVX2 path's accumulators in its sixteen registers).
 * CPU_SETS2(n, BODY) runs BODY for every group of a row of n elements with c its first
 * element, m = min(8, n - c) its lanes and k its set (a constant, so the sets stay in
 * registers). */
#define CPU_SETS2(n, ...)                                                                          \
    do {                                                                                           \
        uint64_t c = 0, m = 8;                                                                     \
        for (; c + 16 <= (n); c += 16) {                                                           \
            CPU_SET2_(0, __VA_ARGS__);                                                             \
            c += 8;                                                                                \
            CPU_SET2_(1, __VA_ARGS__);                                                             \
            c -= 8;                                                                                \
        }                                                                                          \
        if (c < (n)) {                                                                             \
            m = (n)-c < 8 ? (n)-c : 8;                                                             \
            CPU_SET2_(0, __VA_ARGS__);                                                             \
            c += 8;                                                                                \
        }                                                                                          \
        if (c < (n)) {                                                                             \
            m = (n)-c;                                                                             \
            CPU_SET2_(1, __VA_ARGS__);                                                             \
        }                                                                                          \
        (void)m;                                                                                   \
    } while (0)
#define CPU_SET2_(K, ...)                                                                          \
    do {                                                                                           \
        const int k = K;                                                                           \
        __VA_ARGS__                                                                                \
    } while (0)

/* S0 + S1 of four-lane halves a[] and b[], then across the eight lanes. */
CPU_AVX2_FN static inline __attribute__((always_inline)) double
cpu_avx2_sets2_pd(const __m256d *a, const __m256d *b) {
    __m256d sa = _mm256_add_pd(a[0], a[1]);
    __m256d sb = _mm256_add_pd(b[0], b[1]);
    return cpu_avx2_hsum_pd(_mm256_add_pd(sa, sb));
}

// ---------------------------------------------------------------------------------------
// In-register converters, eight lanes (AVX2 + F16C): the bits of dtype.h's conversions.
//
// bf16 -> f32 puts the 16 bits on top of a zero low half (exact). f32 -> bf16 is dtype.h's
// integer round to nearest even, (x + 0x7fff + lsb) >> 16, which needs no MXCSR state and
// keeps f32 subnormals (vcvtneps2bf16 would flush them), with NaN lanes quieted keeping
// their sign and top payload. f16 -> f32 is vcvtph2ps (exact for every number) with NaN
// lanes rebuilt by integer operations, since the instruction quiets a signalling NaN where
// dtype.h keeps the payload as it is. f32 -> f16 is vcvtps2ph with round to nearest even,
// which gives dtype.h's bits for every input (subnormal results, overflow to inf, NaN).
// tests/cpu_isa checks all 65536 16-bit patterns and 1.4M f32 patterns through CAST, which
// runs these.

CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_bf16_to_ps(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 cpu_avx2_f16_to_ps(__m128i h) {
    __m256 f   = _mm256_cvtph_ps(h);
    __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q); /* exactly the f16 NaN lanes */
    if (__builtin_expect(!_mm256_testz_ps(nan, nan), 0)) {
        __m256i w    = _mm256_cvtepu16_epi32(h);
        __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
        __m256i mant = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13);
        __m256i bits = _mm256_or_si256(_mm256_or_si256(sign, mant), _mm256_set1_epi32(0x7f800000));
        f            = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), nan);
    }
    return f;
}

/* The rounded bf16 patterns of v in the low 16 bits of each int32 lane. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256i
cpu_avx2_ps_to_bf16_epi32(__m256 v) {
    __m256i x   = _mm256_castps_si256(v);
    __m256i hi  = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r   = _mm256_srli_epi32(
          _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

CPU_AVX2_FN static inline __attribute__((always_inline)) __m128i cpu_avx2_ps_to_bf16(__m256 v) {
    __m256i r = cpu_avx2_ps_to_bf16_epi32(v);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

CPU_AVX2_FN static inline __attribute__((always_inline)) __m128i cpu_avx2_ps_to_f16(__m256 v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

/* Eight elements i .. i + 7 of a tensor of dtype dt (f32, bf16 or f16) as f32, and back
 * rounded to nearest even. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256
cpu_avx2_ld8(const void *base, ampx_dtype dt, uint64_t i) {
    if (dt == AMPX_F32) return _mm256_loadu_ps((const float *)base + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
    return dt == AMPX_BF16 ? cpu_avx2_bf16_to_ps(h) : cpu_avx2_f16_to_ps(h);
}
CPU_AVX2_FN static inline __attribute__((always_inline)) void
cpu_avx2_st8(void *base, ampx_dtype dt, uint64_t i, __m256 v) {
    if (dt == AMPX_F32)
        _mm256_storeu_ps((float *)base + i, v);
    else
        _mm_storeu_si128((__m128i *)((uint16_t *)base + i),
                         dt == AMPX_BF16 ? cpu_avx2_ps_to_bf16(v) : cpu_avx2_ps_to_f16(v));
}

/* The next min(m, 8) elements from element i (m >= 1 remain), for a row's last partial
 * vector too: f32 through a masked load or store, bf16/f16 through a zeroed eight-element
 * copy (masked lanes read as 0 and are not written). */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256
cpu_avx2_ld_n(const void *base, ampx_dtype dt, uint64_t i, uint64_t m) {
    if (m >= 8) return cpu_avx2_ld8(base, dt, i);
    if (dt == AMPX_F32) return cpu_avx2_load_n((const float *)base + i, m);
    uint16_t t[8] = {0};
    memcpy(t, (const uint16_t *)base + i, (size_t)m * 2);
    return cpu_avx2_ld8(t, dt, 0);
}
CPU_AVX2_FN static inline __attribute__((always_inline)) void
cpu_avx2_st_n(void *base, ampx_dtype dt, uint64_t i, uint64_t m, __m256 v) {
    if (m >= 8) {
        cpu_avx2_st8(base, dt, i, v);
    } else if (dt == AMPX_F32) {
        cpu_avx2_store_n((float *)base + i, m, v);
    } else {
        uint16_t t[8];
        cpu_avx2_st8(t, dt, 0, v);
        memcpy((uint16_t *)base + i, t, (size_t)m * 2);
    }
}

// ---------------------------------------------------------------------------------------
// The AVX-512 paths (AVX-512 F/BW/VL/DQ): the same converters sixteen lanes at a time, and
// eight with AVX-512VL masks for a row's last, partial vectors (masked lanes read as 0 and
// are not written); the exps of the AVX2 path lane for lane.

#define CPU_AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define CPU_AVX512_INLINE CPU_AVX512_FN static inline __attribute__((always_inline))

CPU_AVX512_INLINE __m512 cpu_avx512_bf16_to_ps(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

CPU_AVX512_INLINE __m512 cpu_avx512_f16_to_ps(__m256i h) {
    __m512 f      = _mm512_cvtph_ps(h);
    __m512i w     = _mm512_cvtepu16_epi32(h);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(w, _mm512_set1_epi32(0x7fff)),
                                            _mm512_set1_epi32(0x7c00));
    if (__builtin_expect(nan != 0, 0)) {
        __m512i sign = _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16);
        __m512i mant = _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3ff)), 13);
        __m512i bits = _mm512_or_si512(_mm512_or_si512(sign, mant), _mm512_set1_epi32(0x7f800000));
        f            = _mm512_mask_blend_ps(nan, f, _mm512_castsi512_ps(bits));
    }
    return f;
}

CPU_AVX512_INLINE __m256i cpu_avx512_ps_to_bf16(__m512 v) {
    __m512i x   = _mm512_castps_si512(v);
    __m512i hi  = _mm512_srli_epi32(x, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r   = _mm512_srli_epi32(
          _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r             = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

CPU_AVX512_INLINE __m256i cpu_avx512_ps_to_f16(__m512 v) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* Sixteen elements i .. i + 15 of a tensor of dtype dt as f32 (the lanes outside mask m read
 * as 0), and the lanes in m stored back rounded to nearest even. */
CPU_AVX512_INLINE __m512 cpu_avx512_ld16(const void *base, ampx_dtype dt, uint64_t i, __mmask16 m) {
    if (dt == AMPX_F32)
        return m == 0xffff ? _mm512_loadu_ps((const float *)base + i)
                           : _mm512_maskz_loadu_ps(m, (const float *)base + i);
    const uint16_t *p = (const uint16_t *)base + i;
    __m256i h =
        m == 0xffff ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
    return dt == AMPX_BF16 ? cpu_avx512_bf16_to_ps(h) : cpu_avx512_f16_to_ps(h);
}
CPU_AVX512_INLINE void cpu_avx512_st16(void *base, ampx_dtype dt, uint64_t i, __m512 v,
                                       __mmask16 m) {
    if (dt == AMPX_F32) {
        if (m == 0xffff)
            _mm512_storeu_ps((float *)base + i, v);
        else
            _mm512_mask_storeu_ps((float *)base + i, m, v);
        return;
    }
    uint16_t *p = (uint16_t *)base + i;
    __m256i h   = dt == AMPX_BF16 ? cpu_avx512_ps_to_bf16(v) : cpu_avx512_ps_to_f16(v);
    if (m == 0xffff)
        _mm256_storeu_si256((__m256i *)p, h);
    else
        _mm256_mask_storeu_epi16(p, m, h);
}

/* cpu_avx512_ps_to_bf16 by one vcvtneps2bf16, for the AVX512-BF16 table only (the caller
 * checks the path; the instruction is written as asm so this helper needs no avx512bf16
 * target and inlines into the AVX-512 kernels). The instruction rounds to nearest even
 * whatever MXCSR says and quiets a NaN keeping its sign and top payload ((x >> 16) | 0x40),
 * which are dtype.h's bits, but it reads f32 subnormals as zero where dtype.h rounds them
 * (to a bf16 subnormal or to the smallest normal): those lanes, found by vfpclassps, take
 * the integer rounding (rare, so behind a branch). tests/cpu_isa checks every bf16 pattern
 * and the rounding-relevant f32 ones through CAST on this path. */
CPU_AVX512_INLINE __m256i cpu_avx512_ps_to_bf16_ne(__m512 v) {
    __m256i h;
    __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(v));
    __mmask16 sub = _mm512_fpclass_ps_mask(v, 0x20); /* denormal */
    if (__builtin_expect(sub != 0, 0))
        h = _mm256_mask_blend_epi16(sub, h, cpu_avx512_ps_to_bf16(v));
    return h;
}

/* cpu_avx512_st16 with bf16 rounded by vcvtneps2bf16 when ne is set (the AVX512-BF16 path):
 * the same bits. */
CPU_AVX512_INLINE void cpu_avx512_st16_ne(void *base, ampx_dtype dt, uint64_t i, __m512 v,
                                          __mmask16 m, int ne) {
    if (dt != AMPX_BF16 || !ne) {
        cpu_avx512_st16(base, dt, i, v, m);
        return;
    }
    uint16_t *p = (uint16_t *)base + i;
    __m256i h   = cpu_avx512_ps_to_bf16_ne(v);
    if (m == 0xffff)
        _mm256_storeu_si256((__m256i *)p, h);
    else
        _mm256_mask_storeu_epi16(p, m, h);
}

/* A hint to bring the line of element i of a tensor of dtype dt into L1: the row kernels
 * fetch the next row during a row's last sweep, so that the next row's first sweep (max,
 * statistics) does not wait on memory. A prefetch never faults, whatever the address. */
CPU_AVX512_INLINE void cpu_prefetch_el(const void *base, ampx_dtype dt, uint64_t i) {
    _mm_prefetch((const char *)base + i * (dt == AMPX_F32 ? 4 : 2), _MM_HINT_T0);
}

/* Whether the kernel table in use runs vcvtneps2bf16 (cpu_avx512_st16_ne's ne). */
static inline int cpu_bf16_ne(void) {
    return cpu_tls_kern->isa >= CPU_ISA_AVX512BF16;
}

/* The same for eight elements (a row's tail, and the AVX2 path's eight-lane order). */
CPU_AVX512_INLINE __m256 cpu_avx512_ld8(const void *base, ampx_dtype dt, uint64_t i, __mmask8 m) {
    if (dt == AMPX_F32)
        return m == 0xff ? _mm256_loadu_ps((const float *)base + i)
                         : _mm256_maskz_loadu_ps(m, (const float *)base + i);
    const uint16_t *p = (const uint16_t *)base + i;
    __m128i h = m == 0xff ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi16(m, p);
    return dt == AMPX_BF16 ? cpu_avx2_bf16_to_ps(h) : cpu_avx2_f16_to_ps(h);
}
CPU_AVX512_INLINE void cpu_avx512_st8(void *base, ampx_dtype dt, uint64_t i, __m256 v, __mmask8 m) {
    if (dt == AMPX_F32) {
        _mm256_mask_storeu_ps((float *)base + i, m, v);
        return;
    }
    __m128i h = dt == AMPX_BF16 ? cpu_avx2_ps_to_bf16(v) : cpu_avx2_ps_to_f16(v);
    _mm_mask_storeu_epi16((uint16_t *)base + i, m, h);
}

/* The first m lanes (m >= 16: all sixteen; m >= 8: all eight). */
CPU_AVX512_INLINE __mmask16 cpu_avx512_mask16(uint64_t m) {
    return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u);
}
CPU_AVX512_INLINE __mmask8 cpu_avx512_mask8(uint64_t m) {
    return m >= 8 ? (__mmask8)0xff : (__mmask8)((1u << m) - 1u);
}

/* cpu_avx2_exp_ps, sixteen lanes: the same IEEE operations in the same order (masks where
 * that blends), so the same bits. */
CPU_AVX512_INLINE __m512 cpu_avx512_exp_ps(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.72283f), lo = _mm512_set1_ps(-87.33654f);
    __m512 xc  = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 k   = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r   = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
    r          = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p   = _mm512_set1_ps(1.9875691500e-4f);
    p          = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p          = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p          = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p          = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p          = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p          = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i ki = _mm512_cvtps_epi32(_mm512_sub_ps(k, _mm512_set1_ps(1.0f)));
    __m512 pow2 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ki, _mm512_set1_epi32(127)), 23));
    __m512 res = _mm512_mul_ps(_mm512_mul_ps(p, pow2), _mm512_set1_ps(2.0f));
    res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), res, _mm512_setzero_ps());
    res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), res,
                               _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, x);
}

/* cpu_avx2_exp_neg_ps, sixteen lanes, the same bits. */
CPU_AVX512_INLINE __m512 cpu_avx512_exp_neg_ps(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f), magic = _mm512_set1_ps(12582912.0f);
    __m512 xc = _mm512_max_ps(lo, x);
    __m512 kb = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), magic);
    __m512 k  = _mm512_sub_ps(kb, magic);
    __m512 r  = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
    r         = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p  = _mm512_set1_ps(1.9875691500e-4f);
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p         = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    /* vscalefps: p 2^k rounded once, the same bits as the product by the power of two */
    __m512 res = _mm512_scalef_ps(p, k);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), res, _mm512_setzero_ps());
}

/* cpu_avx2_sigmoid_neg_ps, sixteen lanes: the same operations (2^k by vscalefps: the same
 * rounding of the same product), the same bits. */
CPU_AVX512_INLINE void cpu_avx512_sigmoid_neg_ps(__m512 v, __m512 *s, __m512 *om) {
    const __m512 hi = _mm512_set1_ps(80.0f), lo = _mm512_set1_ps(-87.33654f);
    const __m512 magic = _mm512_set1_ps(12582912.0f), one = _mm512_set1_ps(1.0f);
    __m512 vc = _mm512_max_ps(lo, _mm512_min_ps(hi, v));
    __m512 kb = _mm512_fmadd_ps(vc, _mm512_set1_ps(1.44269504088896341f), magic);
    __m512 k  = _mm512_sub_ps(kb, magic);
    __m512 r  = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), vc);
    r         = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p  = _mm512_set1_ps(1.9875691500e-4f);
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p         = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p         = _mm512_fmadd_ps(p, r, one);
    p         = _mm512_fmadd_ps(p, r, one);
    __m512 e  = _mm512_scalef_ps(p, k); /* p 2^k, rounded once as the product p * 2^k */
    __m512 d  = _mm512_add_ps(one, e);
    __m512 y  = _mm512_castsi512_ps(
         _mm512_sub_epi32(_mm512_set1_epi32(0x7ef311c3), _mm512_castps_si512(d)));
    y             = _mm512_fmadd_ps(y, _mm512_fnmadd_ps(d, y, one), y);
    y             = _mm512_fmadd_ps(y, _mm512_fnmadd_ps(d, y, one), y);
    y             = _mm512_fmadd_ps(y, _mm512_fnmadd_ps(d, y, one), y);
    __mmask16 big = _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ);
    *s            = _mm512_maskz_mov_ps((__mmask16)~big, y);
    *om           = _mm512_mask_blend_ps(big, _mm512_mul_ps(e, *s), one);
}

/* cpu_avx2_act_neg_arg_ps, sixteen lanes (the same operations, the same bits). */
CPU_AVX512_INLINE __m512 cpu_avx512_act_neg_arg_ps(uint32_t act, __m512 x) {
    if (act == AMPX_ACT_GELU)
        return _mm512_mul_ps(
            x, _mm512_fmadd_ps(_mm512_mul_ps(x, x),
                               _mm512_set1_ps((float)(-2 * AMPX_KM_GELU_K * AMPX_KM_GELU_C)),
                               _mm512_set1_ps((float)(-2 * AMPX_KM_GELU_K))));
    return _mm512_sub_ps(_mm512_setzero_ps(), x);
}

/* gelu, sigmoid or silu of sixteen floats, forward: s = sigmoid(u) from the argument above,
 * f = s (sigmoid) or x s (gelu, silu); ACT_FWD's and the GEMM epilogue's bits. */
CPU_AVX512_INLINE __m512 cpu_avx512_act_fwd_ps(uint32_t act, __m512 x) {
    __m512 s, om;
    cpu_avx512_sigmoid_neg_ps(cpu_avx512_act_neg_arg_ps(act, x), &s, &om);
    return act == AMPX_ACT_SIGMOID ? s : _mm512_mul_ps(x, s);
}

/* The low and high eight lanes (the AVX2 path's two vectors of sixteen elements). */
CPU_AVX512_INLINE __m256 cpu_avx512_lo8(__m512 v) {
    return _mm512_castps512_ps256(v);
}
CPU_AVX512_INLINE __m256 cpu_avx512_hi8(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}
CPU_AVX512_INLINE __m256d cpu_avx512_lo4d(__m512d v) {
    return _mm512_castpd512_pd256(v);
}
CPU_AVX512_INLINE __m256d cpu_avx512_hi4d(__m512d v) {
    return _mm512_extractf64x4_pd(v, 1);
}
/* S0 + S1 of the two sets, then across the eight lanes as cpu_avx2_sets2_pd. */
CPU_AVX512_INLINE double cpu_avx512_sets2_pd(const __m512d *s) {
    __m512d t = _mm512_add_pd(s[0], s[1]);
    return cpu_avx2_hsum_pd(_mm256_add_pd(cpu_avx512_lo4d(t), cpu_avx512_hi4d(t)));
}

#endif
#endif
