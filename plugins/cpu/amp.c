/* amp.c — the loss-scaling ops: UNSCALE_CHECK (the fused unscale + non-finite check),
 * GRAD_STATS (gradient health per tensor) and SCALER_UPDATE (the scaler's state machine on
 * the scalars block).
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
// UNSCALE_CHECK
//
// inv_scale = (float)(1.0 / (double)scale), as PyTorch's _amp_foreach_non_finite_check_and_
// unscale_ computes it; g * inv_scale is one f32 product, rounded once to g's dtype. A
// tensor is flagged when any value as stored afterwards is non-finite (a product that only
// overflows when narrowed to bf16/f16 counts too).

typedef struct unscale_job {
    void *g;
    ampx_dtype dt;
    uint64_t n;
    float inv_scale;
    int multiply; /* 0 in AMPX_SCALER_NONE mode: check only, g untouched */
    uint8_t *bad; /* one flag per chunk */
} unscale_job;

CPU_INLINE void unscale_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const unscale_job *j = arg;
    uint64_t i0          = item * CPU_CHUNK;
    uint64_t n           = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    float t[CPU_CHUNK];
    cpu_load_f32(t, j->g, j->dt, i0, n);
    if (j->multiply) {
        for (uint64_t k = 0; k < n; k++)
            t[k] = t[k] * j->inv_scale;
        cpu_store_f32(j->g, j->dt, i0, t, n);
        cpu_load_f32(t, j->g, j->dt, i0, n); /* check the values as stored */
    }
    uint8_t bad = 0;
    for (uint64_t k = 0; k < n; k++)
        bad |= !isfinite(t[k]);
    j->bad[item] = bad;
}
CPU_ISA_CHUNK(unscale_chunk, unscale_chunk_body)

ampx_status cpu_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *args) {
    static const char *op = "unscale_check";
    ampx_unscale_check_args a;
    CPU_TRY(ampx_kit_take_unscale_check(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s = scalars_of(&a.scalars);
    int32_t *flags  = (int32_t *)cpu_ptr(&a.flags) + a.flag_base;

    uint64_t max_chunks = cpu_list_max_chunks(&a.grads);
    uint8_t *bad        = cpu_reserve_shared_ws(ctx, op, (size_t)max_chunks);
    if (!bad) return AMPX_ERR_NO_MEMORY;

    float inv_scale = (float)(1.0 / (double)s->scale);
    int32_t any     = 0;
    for (uint32_t t = 0; t < a.grads.count; t++) {
        unscale_job j   = {cpu_ptr(&a.grads.tensors[t]), a.grads.tensors[t].dtype,
                           a.grads.n_elems[t],           inv_scale,
                           s->mode != AMPX_SCALER_NONE,  bad};
        uint64_t chunks = cpu_div_up(j.n, CPU_CHUNK);
        cpu_run(ctx, j.n, chunks, unscale_chunk, &j);
        int32_t flag = 0;
        for (uint64_t c = 0; c < chunks; c++)
            flag |= bad[c];
        flags[t] = flag;
        any |= flag;
    }
    s->found_inf |= any;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// GRAD_STATS: per tensor, over the values as stored (widened exactly to f32):
// max |g|, mean and RMS of the finite values (sums in double), element count, and counts of
// zeros, of finite non-zeros below the target dtype's smallest normal, of non-finite values.

typedef struct stats_part {
    float max_abs;
    double sum, sumsq;
    uint64_t finite, zeros, tiny, nonfinite, nan;
} stats_part;

typedef struct stats_job {
    const void *g;
    ampx_dtype dt;
    uint64_t n;
    float tiny;       /* smallest normal of the target dtype */
    stats_part *part; /* one per chunk */
} stats_job;

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

/* The AVX2 statistics of t[0 .. n), eight values a step: masks instead of branches, the
 * sums in four-lane double accumulators combined in a fixed order at the end (a different
 * order from the portable loop: the sums may differ in the last bits; max and counts are
 * exact either way). The last n % 8 values go through the scalar loop. Returns the index
 * where that loop starts. */
__attribute__((target("avx2,fma,f16c"))) static uint64_t stats_avx2(const float *t, uint64_t n,
                                                                    float tiny, stats_part *p) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(__builtin_inff()), vtiny = _mm256_set1_ps(tiny);
    __m256 vmax = _mm256_setzero_ps();
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    uint64_t finite = 0, zeros = 0, small = 0, nan = 0, k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v   = _mm256_loadu_ps(t + k);
        __m256 av  = _mm256_and_ps(v, abs_mask);
        __m256 fin = _mm256_cmp_ps(av, inf, _CMP_LT_OQ); /* false for inf and NaN */
        __m256 vf  = _mm256_and_ps(v, fin);              /* non-finite lanes become 0 */
        __m256 zer = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ);
        __m256 sml = _mm256_andnot_ps(zer, _mm256_cmp_ps(av, vtiny, _CMP_LT_OQ));
        vmax       = _mm256_max_ps(vmax, _mm256_and_ps(av, fin));
        finite += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(fin));
        zeros += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(zer));
        small += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(sml));
        nan += (uint64_t)__builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(vf));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(vf, 1));
        s0         = _mm256_add_pd(s0, lo);
        s1         = _mm256_add_pd(s1, hi);
        q0         = _mm256_add_pd(q0, _mm256_mul_pd(lo, lo));
        q1         = _mm256_add_pd(q1, _mm256_mul_pd(hi, hi));
    }
    double sl[4], ql[4];
    float ml[8];
    _mm256_storeu_pd(sl, _mm256_add_pd(s0, s1));
    _mm256_storeu_pd(ql, _mm256_add_pd(q0, q1));
    _mm256_storeu_ps(ml, vmax);
    p->sum   = (sl[0] + sl[1]) + (sl[2] + sl[3]);
    p->sumsq = (ql[0] + ql[1]) + (ql[2] + ql[3]);
    for (int i = 0; i < 8; i++)
        if (ml[i] > p->max_abs) p->max_abs = ml[i];
    p->finite    = finite;
    p->zeros     = zeros;
    p->tiny      = small;
    p->nonfinite = k - finite;
    p->nan       = nan;
    return k;
}
#endif

static void stats_chunk(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const stats_job *j = arg;
    uint64_t i0        = item * CPU_CHUNK;
    uint64_t n         = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    float t[CPU_CHUNK];
    stats_part p;
    memset(&p, 0, sizeof p);
    cpu_load_f32(t, j->g, j->dt, i0, n);
    uint64_t k0 = 0;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) k0 = stats_avx2(t, n, j->tiny, &p);
#endif
    for (uint64_t k = k0; k < n; k++) {
        float v = t[k];
        if (!isfinite(v)) {
            p.nonfinite++;
            p.nan += isnan(v) != 0;
            continue;
        }
        float av = fabsf(v);
        p.finite++;
        p.sum += v;
        p.sumsq += (double)v * (double)v;
        if (av > p.max_abs) p.max_abs = av;
        if (v == 0.0f)
            p.zeros++;
        else if (av < j->tiny)
            p.tiny++;
    }
    j->part[item] = p;
}

static int32_t count_i32(uint64_t c) {
    return c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

ampx_status cpu_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *args) {
    static const char *op = "grad_stats";
    ampx_grad_stats_args a;
    CPU_TRY(ampx_kit_take_grad_stats(AMPX_KIT(ctx), args, &a));
    float *stats    = cpu_ptr(&a.stats);
    int32_t *counts = cpu_ptr(&a.counts);
    int32_t *nans   = a.nan_counts.buf ? cpu_ptr(&a.nan_counts) : NULL;
    float tiny      = a.target == AMPX_F16 ? 0x1p-14f : 0x1p-126f;

    uint64_t max_chunks = cpu_list_max_chunks(&a.grads);
    stats_part *part    = cpu_reserve_shared_ws(ctx, op, (size_t)max_chunks * sizeof(stats_part));
    if (!part) return AMPX_ERR_NO_MEMORY;

    for (uint32_t t = 0; t < a.grads.count; t++) {
        stats_job j = {cpu_ptr(&a.grads.tensors[t]), a.grads.tensors[t].dtype, a.grads.n_elems[t],
                       tiny, part};
        uint64_t chunks = cpu_div_up(j.n, CPU_CHUNK);
        cpu_run(ctx, j.n, chunks, stats_chunk, &j);
        stats_part s;
        memset(&s, 0, sizeof s);
        for (uint64_t c = 0; c < chunks; c++) {
            if (part[c].max_abs > s.max_abs) s.max_abs = part[c].max_abs;
            s.sum += part[c].sum;
            s.sumsq += part[c].sumsq;
            s.finite += part[c].finite;
            s.zeros += part[c].zeros;
            s.tiny += part[c].tiny;
            s.nonfinite += part[c].nonfinite;
            s.nan += part[c].nan;
        }
        stats[4 * t + 0]  = s.max_abs;
        stats[4 * t + 1]  = s.finite ? (float)(s.sum / (double)s.finite) : 0.0f;
        stats[4 * t + 2]  = s.finite ? (float)sqrt(s.sumsq / (double)s.finite) : 0.0f;
        stats[4 * t + 3]  = (float)j.n;
        counts[3 * t + 0] = count_i32(s.zeros);
        counts[3 * t + 1] = count_i32(s.tiny);
        counts[3 * t + 2] = count_i32(s.nonfinite);
        if (nans) nans[t] = count_i32(s.nan);
    }
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
