/* avx512.c — the AVX-512F and AVX512-BF16 kernel tables: a 12 x 32 f32 GEMM micro-kernel
 * (24 zmm accumulators) and a 12 x 32 bf16-pair micro-kernel on vdpbf16ps. Both tables use
 * the AVX2 converters (avx2.c): the memory-bound ops gain nothing from the wider registers
 * that the converters' loads and stores would not lose to the frequency they cost.
 *
 * Each function carries its own target attribute instead of a global -mavx512f, so the
 * plugin still loads and runs on any x86-64; isa.c hands these tables out only when cpuid
 * and XCR0 say AVX-512 F/BW/VL/DQ (and AVX512_BF16 for the second) are usable.
 *
 * Numerics.
 * - f32 kernel: each C element sums its k products in order 0 .. k-1 with one fused
 *   multiply-add per product, exactly like the AVX2 kernel; the two give the same bits.
 * - bf16 kernel (both GEMM operands bf16): vdpbf16ps multiplies bf16 pairs exactly into f32
 *   (8-bit significands: the product fits in 24 bits) and adds them to the f32 accumulator
 *   one at a time, as fused multiply-adds: element 2i+1 of the pair first, then element 2i
 *   (Intel SDM pseudocode; measured on Zen 5: 2M random cases, every one equal to that
 *   order and none to a single rounding of the pair sum). The packing therefore puts
 *   k = 2q in the high half and k = 2q+1 in the low half, so the products are summed in k
 *   order 0 .. k-1 with one rounding each: for normal inputs and results the bf16 kernel
 *   gives the same bits as the f32 kernels on the widened operands (tests/cpu_isa checks).
 *   It differs where the instruction's fixed DAZ/FTZ semantics apply: bf16 inputs below
 *   2^-126 (subnormal) count as zero, and a subnormal f32 result of any step is flushed to
 *   zero; rounding is always to nearest even, whatever MXCSR says. Each such term or step
 *   changes the sum by less than 2^-126 times the other factor (at most 2^-126 per step for
 *   flushed sums), which the conformance floor (K 2^-126) covers for terms up to 1 in size.
 *   An odd k pads the last pair's low half with +0: adding +0 * +0 leaves every accumulator
 *   value unchanged (an accumulator that starts at +0 is never -0).
 */
#include "cpu.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define AVX512BF16_FN                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

// ---------------------------------------------------------------------------------------
// f32 micro-kernel: 12 rows x 32 columns of C in 24 zmm accumulators; per k step two loads
// of B, twelve broadcasts of A, twenty-four FMAs. The loops over rows are unrolled fully,
// so the accumulators live in registers (checked in the generated code: no spills in the
// k loop).

#define MR 12
#define NR 32

/* 16 elements of a bf16 or f16 C widened exactly (vcvtph2ps quiets a signalling NaN, which
 * the multiply by beta that follows does anyway). */
AVX512_FN static inline __attribute__((always_inline)) __m512 load16_f32(const uint16_t *p,
                                                                         ampx_dtype dt) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == AMPX_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 f32 rounded to nearest even into bf16 or f16 as dtype.h does: f16 by vcvtps2ph (which
 * matches it for every input), bf16 by dtype.h's integer rounding, (x + 0x7fff + lsb) >> 16,
 * with NaN quieted, its sign and top payload kept (as cpu_store_f32_avx2). */
AVX512_FN static inline __attribute__((always_inline)) void store16_f32(uint16_t *p, __m512 v,
                                                                        ampx_dtype dt) {
    if (dt == AMPX_F16) {
        _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
    __m512i x     = _mm512_castps_si512(v);
    __m512i top   = _mm512_srli_epi32(x, 16);
    __m512i r     = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)),
                                     _mm512_and_si512(top, _mm512_set1_epi32(1)));
    r             = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r             = _mm512_mask_or_epi32(r, nan, top, _mm512_set1_epi32(0x40));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

/* The 12 x 32 sums to acc, or through the epilogue to C (cpu.h: cpu_gemm_out). */
AVX512_FN static inline __attribute__((always_inline)) void
store_12x32(__m512 c[MR][2], float *restrict acc, uint64_t ldacc, const cpu_gemm_out *out) {
    if (!out) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            _mm512_storeu_ps(acc + i * ldacc, c[i][0]);
            _mm512_storeu_ps(acc + i * ldacc + 16, c[i][1]);
        }
        return;
    }
    const __m512 alpha = _mm512_set1_ps(out->alpha), beta = _mm512_set1_ps(out->beta);
    uint64_t ldc = out->ldc;
    int rd       = out->beta != 0.0f;
    if (out->dtype == AMPX_F32) {
        float *restrict y = out->c;
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++)
            for (int h = 0; h < 2; h++) {
                float *p = y + i * ldc + 16 * h;
                __m512 v = _mm512_mul_ps(alpha, c[i][h]);
                if (rd) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(p)));
                _mm512_storeu_ps(p, v);
            }
        return;
    }
    uint16_t *restrict y = out->c;
    ampx_dtype dt        = out->dtype;
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
        for (int h = 0; h < 2; h++) {
            uint16_t *p = y + i * ldc + 16 * h;
            __m512 v    = _mm512_mul_ps(alpha, c[i][h]);
            if (rd) v = _mm512_add_ps(v, _mm512_mul_ps(beta, load16_f32(p, dt)));
            store16_f32(p, v, dt);
        }
}

AVX512_FN static void micro_12x32(uint64_t kc, const float *restrict a, const float *restrict b,
                                  float *restrict acc, uint64_t ldacc, int first,
                                  const cpu_gemm_out *out) {
    __m512 c[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (first) {
            c[i][0] = c[i][1] = _mm512_setzero_ps();
        } else {
            c[i][0] = _mm512_loadu_ps(acc + i * ldacc);
            c[i][1] = _mm512_loadu_ps(acc + i * ldacc + 16);
        }
    }
    for (uint64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 x = _mm512_set1_ps(a[i]);
            c[i][0]  = _mm512_fmadd_ps(x, b0, c[i][0]);
            c[i][1]  = _mm512_fmadd_ps(x, b1, c[i][1]);
        }
        a += MR;
        b += NR;
    }
    store_12x32(c, acc, ldacc, out);
}

// ---------------------------------------------------------------------------------------
// bf16 micro-kernel: the same 12 x 32 tile; per k pair two loads of B pairs, twelve
// broadcasts of A pairs, twenty-four vdpbf16ps (two products per lane each).

AVX512BF16_FN static void micro_bf16_12x32(uint64_t kc, const uint32_t *restrict a,
                                           const uint32_t *restrict b, float *restrict acc,
                                           uint64_t ldacc, int first, const cpu_gemm_out *out) {
    __m512 c[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (first) {
            c[i][0] = c[i][1] = _mm512_setzero_ps();
        } else {
            c[i][0] = _mm512_loadu_ps(acc + i * ldacc);
            c[i][1] = _mm512_loadu_ps(acc + i * ldacc + 16);
        }
    }
    uint64_t pairs = kc / 2 + kc % 2;
    for (uint64_t q = 0; q < pairs; q++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[i]);
            c[i][0]    = _mm512_dpbf16_ps(c[i][0], x, b0);
            c[i][1]    = _mm512_dpbf16_ps(c[i][1], x, b1);
        }
        a += MR;
        b += NR;
    }
    store_12x32(c, acc, ldacc, out);
}

/* C tiles of 16 x 8 slivers (192 x 256): the A block (192 x 256 f32, 192 KiB) stays in L2
 * while each 32 KiB B sliver sits in L1 across the 16 A slivers. */
const cpu_kernels cpu_kernels_avx512 = {
    .name         = "avx512",
    .isa          = CPU_ISA_AVX512,
    .gemm_tile    = NULL,
    .mr           = MR,
    .nr           = NR,
    .mc           = 16 * MR,
    .nc           = 8 * NR,
    .gemm_micro   = micro_12x32,
    .micro_out_16 = 1,
    .load_f32     = cpu_load_f32_avx2,
    .store_f32    = cpu_store_f32_avx2,
};

const cpu_kernels cpu_kernels_avx512bf16 = {
    .name            = "avx512bf16",
    .isa             = CPU_ISA_AVX512BF16,
    .gemm_tile       = NULL,
    .mr              = MR,
    .nr              = NR,
    .mc              = 16 * MR,
    .nc              = 8 * NR,
    .gemm_micro      = micro_12x32,
    .gemm_micro_bf16 = micro_bf16_12x32,
    .micro_out_16    = 1,
    .load_f32        = cpu_load_f32_avx2,
    .store_f32       = cpu_store_f32_avx2,
};
#endif
