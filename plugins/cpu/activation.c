/* activation.c — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu.
 *
 * Inputs are widened to f32 exactly; the function and its derivative are evaluated in
 * double, which is at least as accurate as the f32 the ABI asks for and keeps the gelu
 * cubic x^3 from overflowing (in f32 it overflows for |x| > ~7e12 and the derivative would
 * turn 0 * inf into NaN). The result is rounded to f32, then once more to the output dtype
 * (both round to nearest even). Forward and backward of each function sit side by side.
 * In place (y = x, dx = dy) is safe: each chunk is read before it is written.
 */
#include <math.h>

#include "avx2_math.h"
#include "cpu.h"

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* f(x) */
static double act_f(uint32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? x : (x != x ? x : 0.0); /* NaN propagates */
    case AMPX_ACT_GELU: return 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x)));
    case AMPX_ACT_TANH: return tanh(x);
    case AMPX_ACT_SIGMOID: return sigmoid(x);
    case AMPX_ACT_SILU: return x * sigmoid(x);
    default: return 0.0;
    }
}

/* f'(x) */
static double act_df(uint32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? 1.0 : (x != x ? x : 0.0); /* 0 at x <= 0 */
    case AMPX_ACT_GELU: {
        /* d/dx 0.5 x (1 + tanh u), u = k (x + c x^3):
         *   0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2) */
        double t = tanh(GELU_K * (x + GELU_C * x * x * x));
        double s = 1.0 - t * t;
        double d = s == 0.0 ? 0.0 : 0.5 * x * s * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        return 0.5 * (1.0 + t) + d;
    }
    case AMPX_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case AMPX_ACT_SIGMOID: {
        double s = sigmoid(x);
        return s * (1.0 - s);
    }
    case AMPX_ACT_SILU: { /* sigma(x) (1 + x (1 - sigma(x))) */
        double s = sigmoid(x);
        return s * (1.0 + x * (1.0 - s));
    }
    default: return 0.0;
    }
}

typedef struct act_job {
    uint32_t act;
    int bwd;
    const void *x, *dy;
    void *out;
    ampx_dtype xdt, dydt, odt;
    uint64_t n;
} act_job;

#if CPU_HAVE_AVX2_TABLE
/* gelu, sigmoid and silu forward and backward four doubles at a time on the AVX2 path, with
 * cpu_avx2_exp_pd: sigmoid(x) = 1 / (1 + exp(-x)), and gelu's 0.5 (1 + tanh u) =
 * sigmoid(2u), so gelu(x) = x sigmoid(2u) with no cancellation. The last n % 4 elements go
 * through act_f/act_df. Returns 0 for the other activations (the caller's loop runs). */
/* 4 * CPU_EXP_W elements from x (and dy) to out, in double: the activation, or dy times its
 * derivative. */
CPU_AVX2_FN static inline __attribute__((always_inline)) void
act16_avx2(uint32_t act, int bwd, const float *xs, const float *dys, float *out) {
    const __m256d one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5);
    const __m256d gk = _mm256_set1_pd(GELU_K), gc = _mm256_set1_pd(GELU_C);
    __m256d x[CPU_EXP_W], e[CPU_EXP_W];
#pragma GCC unroll 4
    for (int w = 0; w < CPU_EXP_W; w++) {
        x[w]      = _mm256_cvtps_pd(_mm_loadu_ps(xs + 4 * w));
        __m256d u = x[w];
        if (act == AMPX_ACT_GELU) /* 2u = 2 k (x + c x^3) */
            u = _mm256_mul_pd(
                _mm256_set1_pd(2.0),
                _mm256_mul_pd(
                    gk,
                    _mm256_add_pd(u, _mm256_mul_pd(gc, _mm256_mul_pd(_mm256_mul_pd(u, u), u)))));
        e[w] = _mm256_sub_pd(_mm256_setzero_pd(), u);
    }
    cpu_avx2_exp_pd4(e);
#pragma GCC unroll 4
    for (int w = 0; w < CPU_EXP_W; w++) {
        __m256d s = _mm256_div_pd(one, _mm256_add_pd(one, e[w])), r; /* sigmoid(u) */
        if (!bwd) {
            r = act == AMPX_ACT_SIGMOID ? s : _mm256_mul_pd(x[w], s);
        } else {
            __m256d df;
            if (act == AMPX_ACT_SIGMOID) {
                df = _mm256_mul_pd(s, _mm256_sub_pd(one, s));
            } else if (act == AMPX_ACT_SILU) {
                df = _mm256_mul_pd(s,
                                   _mm256_add_pd(one, _mm256_mul_pd(x[w], _mm256_sub_pd(one, s))));
            } else { /* t = tanh u = 2 s - 1; df = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) */
                __m256d t  = _mm256_sub_pd(_mm256_add_pd(s, s), one);
                __m256d sq = _mm256_sub_pd(one, _mm256_mul_pd(t, t));
                __m256d d  = _mm256_mul_pd(
                     _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(half, x[w]), sq), gk),
                     _mm256_add_pd(one, _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(3.0), gc),
                                                      _mm256_mul_pd(x[w], x[w]))));
                d  = _mm256_blendv_pd(d, _mm256_setzero_pd(),
                                      _mm256_cmp_pd(sq, _mm256_setzero_pd(), _CMP_EQ_OQ));
                df = _mm256_add_pd(_mm256_mul_pd(half, _mm256_add_pd(one, t)), d);
            }
            r = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(dys + 4 * w)), df);
        }
        _mm_storeu_ps(out + 4 * w, _mm256_cvtpd_ps(r));
    }
}

/* gelu, sigmoid and silu forward and backward on the AVX2 path, with cpu_avx2_exp_pd4:
 * sigmoid(x) = 1 / (1 + exp(-x)), and gelu's 0.5 (1 + tanh u) = sigmoid(2u), so gelu(x) =
 * x sigmoid(2u) with no cancellation. The last n % 16 elements go through act_f/act_df
 * (the chunking is fixed, so which elements those are does not depend on the threads).
 * Returns 0 for the other activations (the caller's loop runs). */
CPU_AVX2_FN static int act_avx2(const act_job *j, float *tx, const float *tdy, uint64_t n) {
    uint32_t act = j->act;
    int bwd      = j->bwd;
    if (act != AMPX_ACT_GELU && act != AMPX_ACT_SIGMOID && act != AMPX_ACT_SILU) return 0;
    uint64_t k = 0;
    for (; k + 4 * CPU_EXP_W <= n; k += 4 * CPU_EXP_W)
        act16_avx2(act, bwd, tx + k, tdy + k, tx + k);
    for (; k < n; k++)
        tx[k] = bwd ? (float)((double)tdy[k] * act_df(act, tx[k])) : (float)act_f(act, tx[k]);
    return 1;
}
#endif

CPU_INLINE void act_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const act_job *j = arg;
    uint64_t i0      = item * CPU_CHUNK;
    uint64_t n       = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    float tx[CPU_CHUNK], tdy[CPU_CHUNK];
    cpu_load_f32(tx, j->x, j->xdt, i0, n);
    if (j->bwd) cpu_load_f32(tdy, j->dy, j->dydt, i0, n);
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2 && act_avx2(j, tx, tdy, n)) {
        cpu_store_f32(j->out, j->odt, i0, tx, n);
        return;
    }
#endif
    if (j->bwd && j->act == AMPX_ACT_RELU) { /* act_df inlined, without calls: vectorises */
        for (uint64_t k = 0; k < n; k++) {
            double x = tx[k], d = x > 0.0 ? 1.0 : (x != x ? x : 0.0);
            tx[k] = (float)((double)tdy[k] * d);
        }
    } else if (j->act == AMPX_ACT_RELU) {
        for (uint64_t k = 0; k < n; k++) {
            double x = tx[k];
            tx[k]    = (float)(x > 0.0 ? x : (x != x ? x : 0.0));
        }
    } else if (j->bwd) {
        for (uint64_t k = 0; k < n; k++)
            tx[k] = (float)((double)tdy[k] * act_df(j->act, tx[k]));
    } else {
        for (uint64_t k = 0; k < n; k++)
            tx[k] = (float)act_f(j->act, tx[k]);
    }
    cpu_store_f32(j->out, j->odt, i0, tx, n);
}
CPU_ISA_CHUNK(act_chunk, act_chunk_body)

// ---------------------------------------------------------------------------------------
// ACT_FWD: y = f(x)

ampx_status cpu_act_fwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    CPU_TRY(ampx_kit_take_act_fwd(AMPX_KIT(ctx), args, &a));
    act_job j = {.act = a.act,
                 .x   = cpu_ptr(&a.x),
                 .out = cpu_ptr(&a.y_or_dx),
                 .xdt = a.x.dtype,
                 .odt = a.y_or_dx.dtype,
                 .n   = a.n};
    cpu_run_chunks(ctx, j.n, act_chunk, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ACT_BWD: dx = dy * f'(x)

ampx_status cpu_act_bwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    CPU_TRY(ampx_kit_take_act_bwd(AMPX_KIT(ctx), args, &a));
    act_job j = {.act  = a.act,
                 .bwd  = 1,
                 .x    = cpu_ptr(&a.x),
                 .dy   = cpu_ptr(&a.dy),
                 .out  = cpu_ptr(&a.y_or_dx),
                 .xdt  = a.x.dtype,
                 .dydt = a.dy.dtype,
                 .odt  = a.y_or_dx.dtype,
                 .n    = a.n};
    cpu_run_chunks(ctx, j.n, act_chunk, &j);
    return AMPX_OK;
}
