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
// Sums are in double, eight lanes per chunk (lane l takes elements k with k % 8 == l up to
// the last multiple of 8), lanes folded as ((l0+l4)+(l1+l5)) + ((l2+l6)+(l3+l7)), the rest
// added one by one; chunks are added in order. The AVX2 and the portable loop follow that
// order exactly, so every ISA table, every thread count, and the ops alone or fused give the
// same bits. Max and counts are exact.

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

/* The portable span: x[0 .. n) read, y (when unscaling; may be x) written. */
static uint64_t span_portable(const float *x, float *y, uint64_t n, float inv, float tiny,
                              unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    double s[8] = {0}, q[8] = {0}, e[8] = {0};
    float mx        = 0.0f;
    uint64_t finite = 0, zeros = 0, small = 0, nan = 0, k = 0;
    uint32_t bad = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++) {
            float v = x[k + l];
            if (stats) {
                float av = fabsf(v);
                int fin  = av < __builtin_inff();
                float vf = fin ? v : 0.0f;
                if (fin && av > mx) mx = av;
                finite += (uint64_t)fin;
                zeros += v == 0.0f;
                small += v != 0.0f && av < tiny;
                nan += v != v;
                s[l] += (double)vf;
                q[l] += (double)vf * (double)vf;
            }
            float r = v;
            if (mul) y[k + l] = r = v * inv;
            if (chk) bad |= !(fabsf(r) < __builtin_inff());
            if (sq) e[l] += (double)r * (double)r;
        }
    if (stats) {
        p->sum += ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
        p->sumsq += ((q[0] + q[4]) + (q[1] + q[5])) + ((q[2] + q[6]) + (q[3] + q[7]));
        if (mx > p->max_abs) p->max_abs = mx;
        p->finite += finite;
        p->zeros += zeros;
        p->tiny += small;
        p->nonfinite += k - finite;
        p->nan += nan;
    }
    if (sq) p->sq += ((e[0] + e[4]) + (e[1] + e[5])) + ((e[2] + e[6]) + (e[3] + e[7]));
    p->bad |= bad;
    return k;
}

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

/* span_portable eight lanes at a time: masks instead of branches, the lanes' double sums in
 * two four-lane accumulators (lanes 0-3 and 4-7), folded as span_portable folds them. */
__attribute__((target("avx2,fma,f16c"))) static uint64_t
span_avx2(const float *x, float *y, uint64_t n, float inv, float tiny, unsigned what, amp_part *p) {
    const int stats = (what & CPU_AMP_STATS) != 0, mul = (what & CPU_AMP_UNSCALE) != 0;
    const int chk = (what & CPU_AMP_CHECK) != 0, sq = (what & CPU_AMP_SQ) != 0;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(__builtin_inff()), vtiny = _mm256_set1_ps(tiny);
    const __m256 vinv = _mm256_set1_ps(inv), zero = _mm256_setzero_ps();
    __m256 vmax = zero, bad = zero;
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0, e0 = s0, e1 = s0;
    uint64_t finite = 0, zeros = 0, small = 0, nan = 0, k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v = _mm256_loadu_ps(x + k);
        if (stats) {
            __m256 av  = _mm256_and_ps(v, abs_mask);
            __m256 fin = _mm256_cmp_ps(av, inf, _CMP_LT_OQ); /* false for inf and NaN */
            __m256 vf  = _mm256_and_ps(v, fin);              /* non-finite lanes become 0 */
            __m256 zer = _mm256_cmp_ps(v, zero, _CMP_EQ_OQ);
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
        __m256 r = v;
        if (mul) {
            r = _mm256_mul_ps(v, vinv);
            _mm256_storeu_ps(y + k, r);
        }
        if (chk)
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(r, abs_mask), inf, _CMP_NLT_UQ));
        if (sq) {
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(r));
            __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(r, 1));
            e0         = _mm256_add_pd(e0, _mm256_mul_pd(lo, lo));
            e1         = _mm256_add_pd(e1, _mm256_mul_pd(hi, hi));
        }
    }
    double l4[4];
    if (stats) {
        float ml[8];
        _mm256_storeu_pd(l4, _mm256_add_pd(s0, s1));
        p->sum += (l4[0] + l4[1]) + (l4[2] + l4[3]);
        _mm256_storeu_pd(l4, _mm256_add_pd(q0, q1));
        p->sumsq += (l4[0] + l4[1]) + (l4[2] + l4[3]);
        _mm256_storeu_ps(ml, vmax);
        for (int i = 0; i < 8; i++)
            if (ml[i] > p->max_abs) p->max_abs = ml[i];
        p->finite += finite;
        p->zeros += zeros;
        p->tiny += small;
        p->nonfinite += k - finite;
        p->nan += nan;
    }
    if (sq) {
        _mm256_storeu_pd(l4, _mm256_add_pd(e0, e1));
        p->sq += (l4[0] + l4[1]) + (l4[2] + l4[3]);
    }
    p->bad |= _mm256_movemask_ps(bad) != 0;
    return k;
}
#endif

/* x[0 .. n) through the pass: the lanes, then the last n % 8 values one by one. */
static void span(const float *x, float *y, uint64_t n, float inv, float tiny, unsigned what,
                 amp_part *p) {
    uint64_t k;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2)
        k = span_avx2(x, y, n, inv, tiny, what, p);
    else
#endif
        k = span_portable(x, y, n, inv, tiny, what, p);
    for (; k < n; k++) {
        float v = x[k];
        if (what & CPU_AMP_STATS) {
            if (!isfinite(v)) {
                p->nonfinite++;
                p->nan += isnan(v) != 0;
            } else {
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
        }
        float r = v;
        if (what & CPU_AMP_UNSCALE) y[k] = r = v * inv;
        if (what & CPU_AMP_CHECK) p->bad |= !isfinite(r);
        if (what & CPU_AMP_SQ) p->sq += (double)r * (double)r;
    }
}

static void amp_chunk(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const amp_job *j = arg;
    uint32_t t = 0, hi = j->count; /* the last tensor whose first chunk is <= item */
    while (hi - t > 1) {
        uint32_t mid = t + (hi - t) / 2;
        if (j->first[mid] <= item)
            t = mid;
        else
            hi = mid;
    }
    uint64_t i0 = (item - j->first[t]) * CPU_CHUNK, nt = j->n_elems[t];
    uint64_t n    = nt - i0 < CPU_CHUNK ? nt - i0 : CPU_CHUNK;
    ampx_dtype dt = j->tensors[t].dtype;
    void *g       = cpu_ptr(&j->tensors[t]);
    float tiny    = ampx_kit_tiny_of(j->targets ? j->targets[t] : j->target);
    amp_part p;
    memset(&p, 0, sizeof p);
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
    cpu_amp_out o   = {.inv_scale = (float)(1.0 / (double)s->scale),
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
    cpu_amp_out o   = {.inv_scale = (float)(1.0 / (double)s->scale),
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
