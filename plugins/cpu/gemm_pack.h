/* gemm_pack.h — what gemm.c's packers and the fp8 packers (gemm_fp8_pack.c) share: the
 * strip and sliver sizes, the packers' target, and the AVX2 loads that widen an operand's
 * elements to f32 (fp8 included) and the register transpose. */
#ifndef AMPX_CPU_GEMM_PACK_H
#define AMPX_CPU_GEMM_PACK_H

#include <string.h>

#include "cpu.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#include "avx2_math.h"
#endif

/* Slivers packed per item when the source runs along the sliver (strided in k): each k step
 * then reads GEMM_STRIP * w contiguous elements instead of w elements a row apart, which is
 * what the hardware prefetcher and the TLB need. */
#define GEMM_STRIP 16
/* Rows of a strip prefetched ahead of the one being packed. */
#define GEMM_PREFETCH_ROWS 8
/* The widest sliver of any table (the strip buffer's width). */
#define GEMM_NR_MAX 32

/* The packers run for the sliver tables only (AVX2 and up), so they may use AVX2 (compiled
 * at -O3, the scalar tails vectorise too). */
#if CPU_HAVE_AVX2_TABLE
#define GEMM_PAIRS_FN __attribute__((target("avx2,fma,f16c"), optimize("O3")))
#else
#define GEMM_PAIRS_FN
#endif

#if CPU_HAVE_AVX2_TABLE

/* Four elements of X from i (the 12-wide slivers' tail), widened as gemm_ld8 does. */
GEMM_PAIRS_FN static inline __attribute__((always_inline)) __m128
gemm_ld4(const void *X, ampx_dtype dt, uint64_t i) {
    if (dt == AMPX_F32) return _mm_loadu_ps((const float *)X + i);
    if (ampx_dtype_is_fp8(dt)) {
        int32_t w;
        memcpy(&w, (const uint8_t *)X + i, 4);
        return _mm256_castps256_ps128(cpu_avx2_fp8_to_ps(_mm_cvtsi32_si128(w), dt));
    }
    __m128i h = _mm_loadl_epi64((const __m128i *)((const uint16_t *)X + i));
    return dt == AMPX_BF16 ? _mm256_castps256_ps128(cpu_avx2_bf16_to_ps(h)) : _mm_cvtph_ps(h);
}

/* Eight elements of X from i widened to f32 for the packs: as avx2_math.h's cpu_avx2_ld8,
 * except that an f16 NaN is left as vcvtph2ps gives it, quiet, where dtype.h keeps a
 * signalling NaN signalling. Packed values are only ever multiplicands of the micro-kernels'
 * fused multiply-adds, whose NaN result is Q(x), else Q(y), else Q(z) (the first NaN
 * operand, quieted): a signalling NaN and its quiet form give the same bits. Skipping the
 * rebuild makes f16 packs as cheap as f32 ones (one thread, 64 x 128x32x128: 161 -> 174
 * GFLOP/s, f32 166). */
GEMM_PAIRS_FN static inline __attribute__((always_inline)) __m256
gemm_ld8(const void *X, ampx_dtype dt, uint64_t i) {
    if (ampx_dtype_is_fp8(dt))
        return cpu_avx2_fp8_to_ps(_mm_loadl_epi64((const __m128i *)((const uint8_t *)X + i)), dt);
    if (dt == AMPX_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)X + i)));
    return cpu_avx2_ld8(X, dt, i);
}

/* Four rows of eight 32-bit values -> eight columns of four, column t stored at d + t*w. */
GEMM_PAIRS_FN static inline __attribute__((always_inline)) void
gemm_t4x8(__m256 r0, __m256 r1, __m256 r2, __m256 r3, float *d, unsigned w) {
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 k04 = _mm256_shuffle_ps(t0, t2, 0x44), k15 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 k26 = _mm256_shuffle_ps(t1, t3, 0x44), k37 = _mm256_shuffle_ps(t1, t3, 0xee);
    _mm_storeu_ps(d + 0 * w, _mm256_castps256_ps128(k04));
    _mm_storeu_ps(d + 1 * w, _mm256_castps256_ps128(k15));
    _mm_storeu_ps(d + 2 * w, _mm256_castps256_ps128(k26));
    _mm_storeu_ps(d + 3 * w, _mm256_castps256_ps128(k37));
    _mm_storeu_ps(d + 4 * w, _mm256_extractf128_ps(k04, 1));
    _mm_storeu_ps(d + 5 * w, _mm256_extractf128_ps(k15, 1));
    _mm_storeu_ps(d + 6 * w, _mm256_extractf128_ps(k26, 1));
    _mm_storeu_ps(d + 7 * w, _mm256_extractf128_ps(k37, 1));
}
#endif

/* The bf16 pair packs of fp8 operands (gemm_fp8_pack.c): every e4m3 and e5m2 value is exact
 * in bf16, so the pair micro-kernel multiplies the fp8 values themselves. The same layouts
 * as gemm.c's pack_kmajor_pairs and pack_imajor_pairs. */
void cpu_pack_kmajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld, uint64_t p0,
                            uint64_t kc, uint64_t r0, uint64_t rows, unsigned w, uint32_t *dst);
void cpu_pack_imajor_pairs8(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld, uint64_t k,
                            uint64_t p0, uint64_t kc, uint64_t i0, uint64_t len, uint64_t ns,
                            unsigned w, uint32_t *dst);

#endif
