/* amp.c — the loss-scaling ops: UNSCALE_CHECK (the fused unscale + non-finite check),
 * GRAD_STATS (gradient health per tensor), AMP_PASS (both, and the sum of squares for
 * clipping, over one read of each gradient) and SCALER_UPDATE (the scaler's state machine on
 * the scalars block). SUM_SQUARES (reduce.c) runs on the same pass.
 *
 * The scalars block is an ampx_scalars at the tensor's offset; on the CPU the "device" is
 * host memory, so the ops read and write its fields directly.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"

static ampx_scalars *scalars_of(const ampx_tensor *t) {
    return (ampx_scalars *)cpu_ptr(t);
}

// ---------------------------------------------------------------------------------------
// The pass (cpu_amp_run)
//
// One parallel loop over every CPU_CHUNK-element chunk of every tensor of the list (one pool
// dispatch per op, whatever the number of tensors). A chunk is read once: its statistics
// from the values as read, then the unscale (inv_scale = (float)(1.0 / (double)scale), as
// PyTorch's _amp_foreach_non_finite_check_and_unscale_; one f32 product rounded once to g's
// dtype), then the non-finite check and the square sum of the values as stored (a product
// that only overflows when narrowed to bf16/f16 counts too). f32 gradients are worked on in
// place in memory; bf16/f16 chunks are widened into a chunk on the stack, unscaled, narrowed
// back and re-widened, so the check sees what was stored.
//
// Sums are in double, sixteen lanes per chunk (lane l takes elements k with k % 16 == l up
// to the last multiple of 16; each lane first sums in f32 over blocks, see AMP_SQ_BLOCK),
// lanes folded by fold16, the rest added one by one; chunks are added in order. The AVX2 and the
// portable loop follow that order exactly, so every ISA table, every thread count, and the ops
// alone or fused give the same bits. Max and counts are exact.

typedef struct amp_part { /* one chunk's results */
    float max_abs;        /* stats: over finite values */
    uint32_t bad;         /* check: a value as stored is non-finite */
    double sum, sumsq;    /* stats: of finite values as read */
    double sq;            /* sum of squares of the values as stored */
    uint64_t finite, zeros, tiny, nonfinite, nan;
} amp_part;

typedef struct amp_job {
    const ampx_tensor *tensors;
    const uint64_t *n_elems;
    const uint64_t *first; /* first chunk of each tensor; first[count] = every chunk */
    uint32_t count;
    unsigned what;
    float inv_scale;
    ampx_dtype target;         /* stats: underflow threshold ... */
    const ampx_dtype *targets; /* ... or one per tensor */
    amp_part *part;            /* one per chunk */
} amp_job;

/* The sixteen lanes' sums as one: t_i = (l_i + l_i+4) + (l_i+8 + l_i+12), (t0+t1) + (t2+t3). */
static double fold16(const double *l) {
    double t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (l[i] + l[i + 4]) + (l[i + 8] + l[i + 12]);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* Elements per lane-block of the sums (the statistics' sum and sum of squares, and the
 * square sum for clipping): each of the sixteen lanes sums its AMP_SQ_BLOCK / 16 elements of
 * a block in f32 (one add or FMA each, so each adds one rounding), then adds that to its
 * double sum. Converting once per block instead of once per element keeps the pass at
 * memory speed; the error stays below 8 f32 roundings of the sum of |terms|, and a sum past
 * FLT_MAX is inf either way once the result is stored in f32. The statistics' block sums see
 * finite values only; their squares could still overflow f32 past 1.8e19, so a lane's
 * squares are taken in double when its block sum would not be finite (see span_*). */
#define AMP_SQ_BLOCK 128u

/* The statistics' sums of lane l of the block x[0 .. 16 * per) in double, for a lane whose
 * f32 block sum overflowed: sum (which = 0) or sum of squares (which = 1) of finite values. */
static double lane_block_double(const float *x, unsigned l, uint64_t per, int which) {
    double t = 0.0;
    for (uint64_t i = 0; i < per; i++) {
        float v = x[16 * i + l];
        if (!(fabsf(v) < __builtin_inff())) continue;
        t += which ? (double)v * (double)v : (double)v;
    }
    return t;
}

/* Adds the f32 block sums fs, fq of the statistics (sixteen lanes) to the double lanes s, q;
 * a lane whose block sum is not finite is summed again in double from the block at xb of
 * 16 * per elements. */
static void stats_flush(double *s, double *q, const float *fs, const float *fq, const float *xb,
                        uint64_t per) {
    for (unsigned l = 0; l < 16; l++) {
        s[l] += fabsf(fs[l]) < __builtin_inff() ? (double)fs[l] : lane_block_double(xb, l, per, 0);
        q[l] += fq[l] < __builtin_inff() ? (double)fq[l] : lane_block_double(xb, l, per, 1);
    }
}

/* The portable span: x[0 .. n) read, y (when unscaling; may be x) written. Block by block of
 * AMP_SQ_BLOCK elements (the last one shorter): first the statistics of the values as read,
 * then the unscale, the check and the square sum, so a block is still as read when an
 * overflowing lane of its statistics is summed again in double. */
static uint64_t span_portable(const float *x, float *y, uint64_t n, float inv, float tiny,
                              unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    double s[16] = {0}, q[16] = {0}, e[16] = {0};
    float mx        = 0.0f;
    uint64_t finite = 0, zeros = 0, below = 0, nan = 0, n16 = n & ~(uint64_t)15;
    uint32_t bad = 0;
    for (uint64_t b0 = 0; b0 < n16; b0 += AMP_SQ_BLOCK) {
        uint64_t end = n16 - b0 < AMP_SQ_BLOCK ? n16 : b0 + AMP_SQ_BLOCK;
        if (stats) {
            float fs[16] = {0}, fq[16] = {0}; /* the statistics' f32 block sums */
            for (uint64_t k = b0; k < end; k += 16)
                for (int l = 0; l < 16; l++) {
                    float v  = x[k + l];
                    float av = fabsf(v);
                    int fin  = av < __builtin_inff();
                    float vf = fin ? v : 0.0f;
                    if (fin && av > mx) mx = av;
                    finite += (uint64_t)fin;
                    zeros += v == 0.0f;
                    below += av < tiny; /* zeros included: taken off below */
                    nan += v != v;
                    fs[l] += vf;
                    fq[l] = fmaf(vf, vf, fq[l]);
                }
            stats_flush(s, q, fs, fq, x + b0, (end - b0) / 16);
        }
        if (mul || chk || sq) {
            float f[16] = {0}; /* the squares' f32 block sums */
            for (uint64_t k = b0; k < end; k += 16)
                for (int l = 0; l < 16; l++) {
                    float r = x[k + l];
                    if (mul) y[k + l] = r = r * inv;
                    if (chk) bad |= !(fabsf(r) < __builtin_inff());
                    if (sq) f[l] = fmaf(r, r, f[l]);
                }
            for (int l = 0; l < 16 && sq; l++)
                e[l] += (double)f[l];
        }
    }
    if (stats) {
        p->sum += fold16(s);
        p->sumsq += fold16(q);
        if (mx > p->max_abs) p->max_abs = mx;
        p->finite += finite;
        p->zeros += zeros;
        p->tiny += below - zeros;
        p->nonfinite += n16 - finite;
        p->nan += nan;
    }
    if (sq) p->sq += fold16(e);
    p->bad |= bad;
    return n16;
}

/* One value as read into the statistics of p (the scalar tails of the spans). */
CPU_INLINE void part_add(amp_part *p, float v, float tiny) {
    if (!isfinite(v)) {
        p->nonfinite++;
        p->nan += isnan(v) != 0;
        return;
    }
    float av = fabsf(v);
    p->finite++;
    p->sum += v;
    p->sumsq += (double)v * (double)v;
    if (av > p->max_abs) p->max_abs = av;
    if (v == 0.0f)
        p->zeros++;
    else if (av < tiny)
        p->tiny++;
}

#if CPU_HAVE_AVX2_TABLE
/* Elements k0 .. n - 1 of the span (its last n % 16) one by one, as span() does after the
 * lanes: statistics of the value as read, then the unscale (rounded to dt and re-read), the
 * check and the square of the value as stored. */
static void span_tail(void *g, ampx_dtype dt, uint64_t i0, uint64_t k0, uint64_t n, float inv,
                      float tiny, unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    for (uint64_t k = k0; k < n; k++) {
        float v = cpu_ld(g, dt, i0 + k);
        if (stats) part_add(p, v, tiny);
        float r = v;
        if (mul) {
            cpu_st(g, dt, i0 + k, v * inv);
            r = cpu_ld(g, dt, i0 + k);
        }
        if (chk) p->bad |= !isfinite(r);
        if (sq) p->sq += (double)r * (double)r;
    }
}

#include "avx2_math.h"

/* The sum of the eight int32 lanes of c. */
__attribute__((target("avx2,fma,f16c"))) static uint64_t sum_i32x8(__m256i c) {
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, c);
    uint64_t t = 0;
    for (int i = 0; i < 8; i++)
        t += (uint64_t)l[i];
    return t;
}

/* lanes (a0 a1 b0 b1) of the sixteen: fold16's order */
__attribute__((target("avx2,fma,f16c"))) static double fold4x4(__m256d a0, __m256d a1, __m256d b0,
                                                               __m256d b1) {
    double l[4];
    _mm256_storeu_pd(l, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(b0, b1)));
    return (l[0] + l[1]) + (l[2] + l[3]);
}

/* The statistics of eight values: the f32 block sums into fs and fq, the counts as -1 per
 * true lane into the int32 counters, the max of the finite |v|. */
#define AMP_STATS8(v, fs, fq)                                                                      \
    do {                                                                                           \
        __m256 av_  = _mm256_and_ps(v, abs_mask);                                                  \
        __m256 fin_ = _mm256_cmp_ps(av_, inf, _CMP_LT_OQ); /* false for inf and NaN */             \
        __m256 vf_  = _mm256_and_ps(v, fin_);              /* non-finite lanes become 0 */         \
        vmax        = _mm256_max_ps(vmax, _mm256_and_ps(av_, fin_));                               \
        c_fin       = _mm256_sub_epi32(c_fin, _mm256_castps_si256(fin_));                          \
        c_zero =                                                                                   \
            _mm256_sub_epi32(c_zero, _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ)));     \
        c_below =                                                                                  \
            _mm256_sub_epi32(c_below, _mm256_castps_si256(_mm256_cmp_ps(av_, vtiny, _CMP_LT_OQ))); \
        c_nan = _mm256_sub_epi32(c_nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));   \
        fs    = _mm256_add_ps(fs, vf_);                                                            \
        fq    = _mm256_fmadd_ps(vf_, vf_, fq);                                                     \
    } while (0)

/* The f32 block sums of eight lanes added to their double lanes e0 (0-3) and e1 (4-7). */
#define AMP_FLUSH8(f, e0, e1)                                                                      \
    do {                                                                                           \
        e0 = _mm256_add_pd(e0, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));                        \
        e1 = _mm256_add_pd(e1, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));                      \
    } while (0)

/* span_portable sixteen lanes at a time (two vectors, a and b) over elements i0 .. i0 + n - 1
 * of g (dtype dt) where they lie, bf16/f16 converted in registers (a value unscaled in f32,
 * rounded, stored and re-read, so checked and squared as stored), then span_tail: masks
 * instead of branches,
 * counts in int32 lanes (at most CPU_CHUNK / 16 per lane), the same blocks, lanes and
 * order. With the square sum on, the non-finite check looks at the values only when the sum
 * is not finite (inf and NaN keep it so; a finite value whose f32 square overflows does too,
 * and is not flagged). */
CPU_AVX2_FN static inline __attribute__((always_inline)) void
span_avx2_body(void *g, const ampx_dtype dt, uint64_t i0, uint64_t n, float inv, float tiny,
               unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(__builtin_inff()), vtiny = _mm256_set1_ps(tiny);
    const __m256 vinv = _mm256_set1_ps(inv), zero = _mm256_setzero_ps();
    const int chk_own = chk && !sq; /* the check without a square sum to tell it */
    __m256 vmax = zero, bad = zero;
    __m256i c_fin = _mm256_setzero_si256(), c_zero = c_fin, c_below = c_fin, c_nan = c_fin;
    __m256d ea0 = _mm256_setzero_pd(), ea1 = ea0, eb0 = ea0, eb1 = ea0;
    __m256d sa0 = ea0, sa1 = ea0, sb0 = ea0, sb1 = ea0; /* the statistics' double lanes */
    __m256d qa0 = ea0, qa1 = ea0, qb0 = ea0, qb1 = ea0;
    uint64_t n16 = n & ~(uint64_t)15;
    for (uint64_t b0 = 0; b0 < n16; b0 += AMP_SQ_BLOCK) {
        uint64_t end = n16 - b0 < AMP_SQ_BLOCK ? n16 : b0 + AMP_SQ_BLOCK;
        if (stats) {
            __m256 fsa = zero, fsb = zero, fqa = zero, fqb = zero;
            for (uint64_t k = b0; k < end; k += 16) {
                __m256 a = cpu_avx2_ld8(g, dt, i0 + k), b = cpu_avx2_ld8(g, dt, i0 + k + 8);
                AMP_STATS8(a, fsa, fqa);
                AMP_STATS8(b, fsb, fqb);
            }
            __m256 nf = _mm256_or_ps(
                _mm256_or_ps(_mm256_cmp_ps(_mm256_and_ps(fsa, abs_mask), inf, _CMP_NLT_UQ),
                             _mm256_cmp_ps(_mm256_and_ps(fsb, abs_mask), inf, _CMP_NLT_UQ)),
                _mm256_or_ps(_mm256_cmp_ps(fqa, inf, _CMP_NLT_UQ),
                             _mm256_cmp_ps(fqb, inf, _CMP_NLT_UQ)));
            if (!_mm256_movemask_ps(nf)) { /* stats_flush's adds, four lanes at a time */
                AMP_FLUSH8(fsa, sa0, sa1);
                AMP_FLUSH8(fsb, sb0, sb1);
                AMP_FLUSH8(fqa, qa0, qa1);
                AMP_FLUSH8(fqb, qb0, qb1);
            } else { /* rare: a lane overflowed f32 */
                double s[16], q[16];
                float fsl[16], fql[16], xb[AMP_SQ_BLOCK];
                _mm256_storeu_pd(s, sa0), _mm256_storeu_pd(s + 4, sa1);
                _mm256_storeu_pd(s + 8, sb0), _mm256_storeu_pd(s + 12, sb1);
                _mm256_storeu_pd(q, qa0), _mm256_storeu_pd(q + 4, qa1);
                _mm256_storeu_pd(q + 8, qb0), _mm256_storeu_pd(q + 12, qb1);
                _mm256_storeu_ps(fsl, fsa), _mm256_storeu_ps(fsl + 8, fsb);
                _mm256_storeu_ps(fql, fqa), _mm256_storeu_ps(fql + 8, fqb);
                cpu_load_f32(xb, g, dt, i0 + b0, end - b0);
                stats_flush(s, q, fsl, fql, xb, (end - b0) / 16);
                sa0 = _mm256_loadu_pd(s), sa1 = _mm256_loadu_pd(s + 4);
                sb0 = _mm256_loadu_pd(s + 8), sb1 = _mm256_loadu_pd(s + 12);
                qa0 = _mm256_loadu_pd(q), qa1 = _mm256_loadu_pd(q + 4);
                qb0 = _mm256_loadu_pd(q + 8), qb1 = _mm256_loadu_pd(q + 12);
            }
        }
        if (mul || chk || sq) {
            __m256 fa = zero, fb = zero; /* the squares' f32 block sums */
            for (uint64_t k = b0; k < end; k += 16) {
                __m256 a = cpu_avx2_ld8(g, dt, i0 + k), b = cpu_avx2_ld8(g, dt, i0 + k + 8);
                if (mul) { /* bf16/f16: stored rounded, checked and squared as stored */
                    a = _mm256_mul_ps(a, vinv);
                    b = _mm256_mul_ps(b, vinv);
                    cpu_avx2_st8(g, dt, i0 + k, a);
                    cpu_avx2_st8(g, dt, i0 + k + 8, b);
                    if (dt != AMPX_F32) {
                        a = cpu_avx2_ld8(g, dt, i0 + k);
                        b = cpu_avx2_ld8(g, dt, i0 + k + 8);
                    }
                }
                if (chk_own) {
                    bad = _mm256_or_ps(bad,
                                       _mm256_cmp_ps(_mm256_and_ps(a, abs_mask), inf, _CMP_NLT_UQ));
                    bad = _mm256_or_ps(bad,
                                       _mm256_cmp_ps(_mm256_and_ps(b, abs_mask), inf, _CMP_NLT_UQ));
                }
                if (sq) {
                    fa = _mm256_fmadd_ps(a, a, fa);
                    fb = _mm256_fmadd_ps(b, b, fb);
                }
            }
            if (sq) {
                AMP_FLUSH8(fa, ea0, ea1);
                AMP_FLUSH8(fb, eb0, eb1);
            }
        }
    }
    if (stats) {
        float ml[8];
        p->sum += fold4x4(sa0, sa1, sb0, sb1);
        p->sumsq += fold4x4(qa0, qa1, qb0, qb1);
        _mm256_storeu_ps(ml, vmax);
        for (int i = 0; i < 8; i++)
            if (ml[i] > p->max_abs) p->max_abs = ml[i];
        uint64_t finite = sum_i32x8(c_fin), zeros = sum_i32x8(c_zero);
        p->finite += finite;
        p->zeros += zeros;
        p->tiny += sum_i32x8(c_below) - zeros;
        p->nonfinite += n16 - finite;
        p->nan += sum_i32x8(c_nan);
    }
    if (sq) {
        double e = fold4x4(ea0, ea1, eb0, eb1);
        p->sq += e;
        if (chk && !isfinite(e)) /* rare: look at the values as stored */
            for (uint64_t i = 0; i < n16 && !p->bad; i++)
                p->bad |= !isfinite(cpu_ld(g, dt, i0 + i));
    }
    if (chk_own) p->bad |= _mm256_movemask_ps(bad) != 0;
    span_tail(g, dt, i0, n16, n, inv, tiny, what, p);
}

CPU_AVX2_FN static void span_avx2(void *g, ampx_dtype dt, uint64_t i0, uint64_t n, float inv,
                                  float tiny, unsigned what, amp_part *p) {
    switch (dt) { /* one copy per dtype, so the conversions are resolved at compile time */
    case AMPX_F32: span_avx2_body(g, AMPX_F32, i0, n, inv, tiny, what, p); break;
    case AMPX_BF16: span_avx2_body(g, AMPX_BF16, i0, n, inv, tiny, what, p); break;
    default: span_avx2_body(g, AMPX_F16, i0, n, inv, tiny, what, p); break;
    }
}

#undef AMP_STATS8
#undef AMP_FLUSH8

/* The statistics of sixteen values (AMP_STATS8 of both halves): zmm fs and fq are the AVX2
 * path's fsa and fsb (lanes 0-7 and 8-15); the counts are popcounts of the compare masks,
 * added in scalar registers (off the vector pipes). */
#define AMP_STATS16(v, fs, fq)                                                                     \
    do {                                                                                           \
        __m512 av_     = _mm512_and_ps(v, abs_mask);                                               \
        __mmask16 fin_ = _mm512_cmp_ps_mask(av_, inf, _CMP_LT_OQ); /* false for inf and NaN */     \
        __m512 vf_     = _mm512_maskz_mov_ps(fin_, v);             /* non-finite lanes become 0 */ \
        vmax           = _mm512_max_ps(vmax, _mm512_maskz_mov_ps(fin_, av_));                      \
        n_fin += (uint64_t)__builtin_popcount(fin_);                                               \
        n_zero += (uint64_t)__builtin_popcount(_mm512_cmp_ps_mask(v, zero, _CMP_EQ_OQ));           \
        n_below += (uint64_t)__builtin_popcount(_mm512_cmp_ps_mask(av_, vtiny, _CMP_LT_OQ));       \
        n_nan += (uint64_t)__builtin_popcount(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));             \
        fs = _mm512_add_ps(fs, vf_);                                                               \
        fq = _mm512_fmadd_ps(vf_, vf_, fq);                                                        \
    } while (0)

/* The f32 block sums of sixteen lanes added to their double lanes: lanes 0-7 to a (the AVX2
 * path's x0 and x1), 8-15 to b. */
#define AMP_FLUSH16(f, a, b)                                                                       \
    do {                                                                                           \
        a = _mm512_add_pd(a, _mm512_cvtps_pd(cpu_avx512_lo8(f)));                                  \
        b = _mm512_add_pd(b, _mm512_cvtps_pd(cpu_avx512_hi8(f)));                                  \
    } while (0)

#define AMP_FOLD16(a, b)                                                                           \
    fold4x4(cpu_avx512_lo4d(a), cpu_avx512_hi4d(a), cpu_avx512_lo4d(b), cpu_avx512_hi4d(b))

/* The whole span on the AVX-512 paths: elements i0 .. i0 + n - 1 of g (dtype dt) read and,
 * when unscaling, written where they lie, bf16 and f16 converted in registers. The lanes
 * are span_avx2's sixteen (one zmm), in the same blocks and order, and the last n % 16
 * values go one by one as in span(); a bf16/f16 value is unscaled in f32, rounded to dt,
 * stored, and checked and squared as stored, as amp_chunk does through its f32 chunk. So
 * the results are the AVX2 and portable paths' bits. */
CPU_AVX512_INLINE void span_avx512_body(void *g, const ampx_dtype dt, uint64_t i0, uint64_t n,
                                        float inv, float tiny, unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 inf = _mm512_set1_ps(__builtin_inff()), vtiny = _mm512_set1_ps(tiny);
    const __m512 vinv = _mm512_set1_ps(inv), zero = _mm512_setzero_ps();
    const int chk_own = chk && !sq;
    __m512 vmax       = zero;
    __mmask16 bad     = 0;
    uint64_t n_fin = 0, n_zero = 0, n_below = 0, n_nan = 0;
    __m512d ea = _mm512_setzero_pd(), eb = ea, sa = ea, sb = ea, qa = ea, qb = ea;
    uint64_t n16 = n & ~(uint64_t)15;
    for (uint64_t b0 = 0; b0 < n16; b0 += AMP_SQ_BLOCK) {
        uint64_t end = n16 - b0 < AMP_SQ_BLOCK ? n16 : b0 + AMP_SQ_BLOCK;
        if (stats) {
            __m512 fs = zero, fq = zero;
            for (uint64_t k = b0; k < end; k += 16) {
                __m512 v = cpu_avx512_ld16(g, dt, i0 + k, 0xffff);
                AMP_STATS16(v, fs, fq);
            }
            __mmask16 nf = _mm512_cmp_ps_mask(_mm512_and_ps(fs, abs_mask), inf, _CMP_NLT_UQ) |
                           _mm512_cmp_ps_mask(fq, inf, _CMP_NLT_UQ);
            if (!nf) {
                AMP_FLUSH16(fs, sa, sb);
                AMP_FLUSH16(fq, qa, qb);
            } else { /* rare: a lane overflowed f32 */
                double sl[16], ql[16];
                float fsl[16], fql[16], xb[AMP_SQ_BLOCK];
                _mm512_storeu_pd(sl, sa), _mm512_storeu_pd(sl + 8, sb);
                _mm512_storeu_pd(ql, qa), _mm512_storeu_pd(ql + 8, qb);
                _mm512_storeu_ps(fsl, fs), _mm512_storeu_ps(fql, fq);
                cpu_load_f32(xb, g, dt, i0 + b0, end - b0);
                stats_flush(sl, ql, fsl, fql, xb, (end - b0) / 16);
                sa = _mm512_loadu_pd(sl), sb = _mm512_loadu_pd(sl + 8);
                qa = _mm512_loadu_pd(ql), qb = _mm512_loadu_pd(ql + 8);
            }
        }
        if (mul || chk || sq) {
            __m512 f = zero; /* the squares' f32 block sums */
            for (uint64_t k = b0; k < end; k += 16) {
                __m512 a = cpu_avx512_ld16(g, dt, i0 + k, 0xffff);
                if (mul) {
                    a = _mm512_mul_ps(a, vinv);
                    if (dt == AMPX_F32) {
                        _mm512_storeu_ps((float *)g + i0 + k, a);
                    } else { /* stored rounded; checked and squared as stored */
                        __m256i h =
                            dt == AMPX_BF16 ? cpu_avx512_ps_to_bf16(a) : cpu_avx512_ps_to_f16(a);
                        _mm256_storeu_si256((__m256i *)((uint16_t *)g + i0 + k), h);
                        a = dt == AMPX_BF16 ? cpu_avx512_bf16_to_ps(h) : cpu_avx512_f16_to_ps(h);
                    }
                }
                if (chk_own)
                    bad |= _mm512_cmp_ps_mask(_mm512_and_ps(a, abs_mask), inf, _CMP_NLT_UQ);
                if (sq) f = _mm512_fmadd_ps(a, a, f);
            }
            if (sq) AMP_FLUSH16(f, ea, eb);
        }
    }
    if (stats) {
        p->sum += AMP_FOLD16(sa, sb);
        p->sumsq += AMP_FOLD16(qa, qb);
        float ml = _mm512_reduce_max_ps(vmax);
        if (ml > p->max_abs) p->max_abs = ml;
        p->finite += n_fin;
        p->zeros += n_zero;
        p->tiny += n_below - n_zero;
        p->nonfinite += n16 - n_fin;
        p->nan += n_nan;
    }
    if (sq) {
        double e = AMP_FOLD16(ea, eb);
        p->sq += e;
        if (chk && !isfinite(e)) /* rare: look at the values as stored */
            for (uint64_t i = 0; i < n16 && !p->bad; i++)
                p->bad |= !isfinite(cpu_ld(g, dt, i0 + i));
    }
    if (chk_own) p->bad |= bad != 0;
    span_tail(g, dt, i0, n16, n, inv, tiny, what, p);
}
#undef AMP_STATS16
#undef AMP_FLUSH16
#undef AMP_FOLD16

CPU_AVX512_FN static void span_avx512(void *g, ampx_dtype dt, uint64_t i0, uint64_t n, float inv,
                                      float tiny, unsigned what, amp_part *p) {
    switch (dt) { /* one copy per dtype, so the conversions are resolved at compile time */
    case AMPX_F32: span_avx512_body(g, AMPX_F32, i0, n, inv, tiny, what, p); break;
    case AMPX_BF16: span_avx512_body(g, AMPX_BF16, i0, n, inv, tiny, what, p); break;
    default: span_avx512_body(g, AMPX_F16, i0, n, inv, tiny, what, p); break;
    }
}
#endif

/* x[0 .. n) through the pass: the lanes, then the last n % 16 values one by one. */
static void span(const float *x, float *y, uint64_t n, float inv, float tiny, unsigned what,
                 amp_part *p) {
    uint64_t k = span_portable(x, y, n, inv, tiny, what, p);
    for (; k < n; k++) {
        float v = x[k];
        if (what & CPU_AMP_STATS) part_add(p, v, tiny);
        float r = v;
        if (what & CPU_AMP_UNSCALE) y[k] = r = v * inv;
        if (what & CPU_AMP_CHECK) p->bad |= !isfinite(r);
        if (what & CPU_AMP_SQ) p->sq += (double)r * (double)r;
    }
}

static void amp_chunk(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const amp_job *j = arg;
    uint32_t t       = cpu_item_tensor(j->first, j->count, item);
    uint64_t i0 = (item - j->first[t]) * CPU_CHUNK, nt = j->n_elems[t];
    uint64_t n    = nt - i0 < CPU_CHUNK ? nt - i0 : CPU_CHUNK;
    ampx_dtype dt = j->tensors[t].dtype;
    void *g       = cpu_ptr(&j->tensors[t]);
    float tiny    = ampx_kit_tiny_of(j->targets ? j->targets[t] : j->target);
    amp_part p;
    memset(&p, 0, sizeof p);
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512)
            span_avx512(g, dt, i0, n, j->inv_scale, tiny, j->what, &p);
        else
            span_avx2(g, dt, i0, n, j->inv_scale, tiny, j->what, &p);
        j->part[item] = p;
        return;
    }
#endif
    if (dt == AMPX_F32) {
        float *x = (float *)g + i0;
        span(x, x, n, j->inv_scale, tiny, j->what, &p);
    } else {
        float buf[CPU_CHUNK];
        cpu_load_f32(buf, g, dt, i0, n);
        if (j->what & CPU_AMP_UNSCALE) {
            span(buf, buf, n, j->inv_scale, tiny, j->what & (CPU_AMP_STATS | CPU_AMP_UNSCALE), &p);
            cpu_store_f32(g, dt, i0, buf, n);
            cpu_load_f32(buf, g, dt, i0, n); /* check the values as stored */
            span(buf, NULL, n, j->inv_scale, tiny, j->what & (CPU_AMP_CHECK | CPU_AMP_SQ), &p);
        } else {
            span(buf, NULL, n, j->inv_scale, tiny, j->what, &p);
        }
    }
    j->part[item] = p;
}

static int32_t count_i32(uint64_t c) {
    return c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

ampx_status cpu_amp_run(ampx_context *ctx, const char *op, const ampx_tensor_list *l, unsigned what,
                        cpu_amp_out *out) {
    size_t head    = ((size_t)l->count + 1) * sizeof(uint64_t);
    head           = (head + 63) & ~(size_t)63;
    uint64_t total = 0, n_total = 0;
    for (uint32_t t = 0; t < l->count; t++) {
        total += cpu_div_up(l->n_elems[t], CPU_CHUNK);
        n_total += l->n_elems[t];
    }
    unsigned char *ws =
        cpu_reserve_shared_ws(ctx, op, head + (size_t)(total ? total : 1) * sizeof(amp_part));
    if (!ws) return AMPX_ERR_NO_MEMORY;
    uint64_t *first = (uint64_t *)ws;
    amp_job j       = {.tensors   = l->tensors,
                       .n_elems   = l->n_elems,
                       .first     = first,
                       .count     = l->count,
                       .what      = what,
                       .inv_scale = out->inv_scale,
                       .target    = out->target,
                       .targets   = out->targets,
                       .part      = (amp_part *)(ws + head)};
    first[0]        = 0;
    for (uint32_t t = 0; t < l->count; t++)
        first[t + 1] = first[t] + cpu_div_up(l->n_elems[t], CPU_CHUNK);
    cpu_run(ctx, n_total, total, amp_chunk, &j);

    int32_t any = 0;
    for (uint32_t t = 0; t < l->count; t++) {
        amp_part s;
        memset(&s, 0, sizeof s);
        for (uint64_t c = first[t]; c < first[t + 1]; c++) {
            const amp_part *q = &j.part[c];
            if (q->max_abs > s.max_abs) s.max_abs = q->max_abs;
            s.bad |= q->bad;
            s.sum += q->sum;
            s.sumsq += q->sumsq;
            s.finite += q->finite;
            s.zeros += q->zeros;
            s.tiny += q->tiny;
            s.nonfinite += q->nonfinite;
            s.nan += q->nan;
            if (out->sq) *out->sq += q->sq; /* chunk order across the whole list */
        }
        if (out->flags) out->flags[t] = (int32_t)s.bad;
        any |= (int32_t)s.bad;
        if (out->stats) {
            float *st = out->stats + 4 * (uint64_t)t;
            st[0]     = s.max_abs;
            st[1]     = s.finite ? (float)(s.sum / (double)s.finite) : 0.0f;
            st[2]     = s.finite ? (float)sqrt(s.sumsq / (double)s.finite) : 0.0f;
            st[3]     = (float)l->n_elems[t];
        }
        if (out->counts) {
            int32_t *cn = out->counts + 3 * (uint64_t)t;
            cn[0]       = count_i32(s.zeros);
            cn[1]       = count_i32(s.tiny);
            cn[2]       = count_i32(s.nonfinite);
        }
        if (out->nans) out->nans[t] = count_i32(s.nan);
    }
    out->any = any;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// UNSCALE_CHECK, GRAD_STATS, AMP_PASS: the pass with what each asks for

ampx_status cpu_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *args) {
    ampx_unscale_check_args a;
    CPU_TRY(ampx_kit_take_unscale_check(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_of(&a.scalars);
    cpu_amp_out o   = {.inv_scale = ampx_km_inv_scale(s->scale),
                       .flags     = (int32_t *)cpu_ptr(&a.flags) + a.flag_base};
    unsigned what   = CPU_AMP_CHECK | (s->mode != AMPX_SCALER_NONE ? CPU_AMP_UNSCALE : 0);
    CPU_TRY(cpu_amp_run(ctx, "unscale_check", &a.grads, what, &o));
    s->found_inf |= o.any;
    return AMPX_OK;
}

/* GRAD_STATS: per tensor, over the values as stored (widened exactly to f32): max |g|, mean
 * and RMS of the finite values (sums in double), element count, and counts of zeros, of
 * finite non-zeros below the target dtype's smallest normal, of non-finite values. */
ampx_status cpu_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *args) {
    ampx_grad_stats_args a;
    CPU_TRY(ampx_kit_take_grad_stats(AMPX_KIT(ctx), args, &a));
    cpu_amp_out o = {.target = a.target,
                     .stats  = cpu_ptr(&a.stats),
                     .counts = cpu_ptr(&a.counts),
                     .nans   = a.nan_counts.buf ? cpu_ptr(&a.nan_counts) : NULL};
    return cpu_amp_run(ctx, "grad_stats", &a.grads, CPU_AMP_STATS, &o);
}

ampx_status cpu_amp_pass(ampx_context *ctx, const ampx_amp_pass_args *args) {
    ampx_amp_pass_args a;
    CPU_TRY(ampx_kit_take_amp_pass(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_of(&a.scalars);
    float *sq_out   = a.sq_sum.buf ? cpu_ptr(&a.sq_sum) : NULL;
    double sq       = sq_out && a.sq_accumulate ? (double)*sq_out : 0.0;
    cpu_amp_out o   = {.inv_scale = ampx_km_inv_scale(s->scale),
                       .target    = a.target,
                       .targets   = a.targets,
                       .flags     = (int32_t *)cpu_ptr(&a.flags) + a.flag_base,
                       .sq        = sq_out ? &sq : NULL,
                       .stats     = a.stats.buf ? cpu_ptr(&a.stats) : NULL,
                       .counts    = a.counts.buf ? cpu_ptr(&a.counts) : NULL,
                       .nans      = a.nan_counts.buf ? cpu_ptr(&a.nan_counts) : NULL};
    unsigned what   = CPU_AMP_CHECK | (s->mode != AMPX_SCALER_NONE ? CPU_AMP_UNSCALE : 0) |
                    (sq_out ? CPU_AMP_SQ : 0) | (o.stats || o.counts || o.nans ? CPU_AMP_STATS : 0);
    CPU_TRY(cpu_amp_run(ctx, "amp_pass", &a.grads, what, &o));
    s->found_inf |= o.any;
    if (sq_out) *sq_out = (float)sq;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// SCALER_UPDATE: backend.h's pseudo-code on the block, plugin_kit.h's ampx_kit_scaler_update
// (the f32 scale times the double factor, rounded once to f32, as PyTorch).

ampx_status cpu_scaler_update(ampx_context *ctx, const ampx_scaler_update_args *args) {
    ampx_scaler_update_args a;
    CPU_TRY(ampx_kit_take_scaler_update(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_of(&a.scalars);
    ampx_kit_scaler_update(s, ampx_kit_scaler_factor(a.growth_factor_f64, s->growth_factor),
                           ampx_kit_scaler_factor(a.backoff_factor_f64, s->backoff_factor));
    return AMPX_OK;
}
