/* activation.c — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu.
 *
 * Inputs are widened to f32 exactly. The portable path evaluates the function and its
 * derivative in double (ampx_km_act_f and ampx_km_act_df of ampx/kernel_math.h, the cuda
 * kernels' and the example plugin's too), then rounds to f32 and once more to the output dtype
 * (both round to nearest even). The AVX2 path evaluates gelu, sigmoid and silu in f32, eight lanes,
 * with no division and no library call (act8_avx2 on cpu_avx2_sigmoid_neg_ps: exp by Cephes'
 * polynomial, the reciprocal by three Newton steps; the terms are arranged so nothing cancels, and
 * the 0 * inf of an overflowing gelu cubic is 0, as in double). Its error against the double
 * reference, measured in tests/test_cpu_args.c (math/activations_f32): sigmoid within 1.7 / 2.7 f32
 * ulps (fwd / bwd), silu 1.3 / 1.4, gelu 12.3 / 11.8 where gelu is tiny (x near -5: the f32
 * rounding of the cubic's argument, amplified by exp) and a few ulps elsewhere; a sigmoid below
 * 2^-115 (argument past 80) is 0. Forward and
 * backward of each function sit side by side. In place (y = x, dx = dy) is safe: each chunk is read
 * before it is written.
 */
#include <math.h>

#include "ampx/kernel_math.h"
#include "avx2_math.h"
#include "cpu.h"

typedef struct act_job {
    uint32_t act;
    int bwd;
    const void *x, *dy;
    void *out;
    ampx_dtype xdt, dydt, odt;
    uint64_t n;
} act_job;

#if CPU_HAVE_AVX2_TABLE
/* Eight elements x (and dy) in f32: the activation, or dy times its derivative.
 * With v = -u (u = x for sigmoid and silu, u = 2k(x + c x^3) for gelu), s = sigmoid(u) and
 * om = 1 - s = exp(-u) s come from cpu_avx2_sigmoid_neg_ps as a product, not a difference,
 * so nothing cancels: gelu's 0.5 (1 + tanh) = s and 1 - tanh^2 = 4 s (1 - s). Where s is 0
 * 1 - s is 1; where a gelu term would be 0 * inf (|x| so large that x^2 overflows while
 * s (1 - s) is 0) the term is 0, as in ampx_km_gelu_df. */
CPU_AVX2_FN static inline __attribute__((always_inline)) __m256 act8_avx2(uint32_t act, int bwd,
                                                                          __m256 x, __m256 dy) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    const __m256 gk = _mm256_set1_ps((float)AMPX_KM_GELU_K),
                 gc = _mm256_set1_ps((float)AMPX_KM_GELU_C);
    __m256 v        = cpu_avx2_act_neg_arg_ps(act, x), s, om;
    cpu_avx2_sigmoid_neg_ps(v, &s, &om);
    if (!bwd) return act == AMPX_ACT_SIGMOID ? s : _mm256_mul_ps(x, s);
    __m256 df;
    if (act == AMPX_ACT_SIGMOID) {
        df = _mm256_mul_ps(s, om);
    } else if (act == AMPX_ACT_SILU) { /* s (1 + x (1 - s)) */
        df = _mm256_mul_ps(s, _mm256_fmadd_ps(x, om, one));
    } else { /* s + 0.5 x (4 s (1 - s)) k (1 + 3 c x^2) */
        __m256 sq = _mm256_mul_ps(_mm256_set1_ps(4.0f), _mm256_mul_ps(s, om));
        __m256 d  = _mm256_mul_ps(
             _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_mul_ps(sq, gk)),
             _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(3.0f), gc), _mm256_mul_ps(x, x), one));
        d  = _mm256_blendv_ps(d, zero, _mm256_cmp_ps(sq, zero, _CMP_EQ_OQ));
        df = _mm256_add_ps(s, d);
    }
    return _mm256_mul_ps(dy, df);
}

/* gelu, sigmoid and silu forward and backward on the AVX2 path in f32, eight lanes, with
 * cpu_avx2_exp_ps: sigmoid(x) = 1 / (1 + exp(-x)), and gelu's 0.5 (1 + tanh u) = sigmoid(2u),
 * so gelu(x) = x sigmoid(2u) with no cancellation. The last n % 8 elements go through
 * ampx_km_act_f/ampx_km_act_df (the chunking is fixed, so which elements those are does not
 * depend on the threads).
 * Returns 0 for the other activations (the caller's loop runs). */
CPU_AVX2_FN static int act_avx2(const act_job *j, const float *x, const float *dy, float *out,
                                uint64_t n) {
    uint32_t act = j->act;
    int bwd      = j->bwd;
    if (act != AMPX_ACT_GELU && act != AMPX_ACT_SIGMOID && act != AMPX_ACT_SILU) return 0;
    uint64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 vx = _mm256_loadu_ps(x + k);
        _mm256_storeu_ps(out + k, act8_avx2(act, bwd, vx, bwd ? _mm256_loadu_ps(dy + k) : vx));
    }
    for (; k < n; k++)
        out[k] = bwd ? (float)((double)dy[k] * ampx_km_act_df(act, x[k]))
                     : (float)ampx_km_act_f(act, x[k]);
    return 1;
}

/* One copy of the AVX-512 loop per function, direction and dtype (all three tensors of one
 * dtype); mixed dtypes take the generic copy. */
#define ACT_DT_CASES(BODY, ACT, BWD)                                                               \
    do {                                                                                           \
        if (xdt == AMPX_F32)                                                                       \
            BODY(j, ACT, BWD, AMPX_F32, AMPX_F32, AMPX_F32, i0, n);                                \
        else if (xdt == AMPX_BF16)                                                                 \
            BODY(j, ACT, BWD, AMPX_BF16, AMPX_BF16, AMPX_BF16, i0, n);                             \
        else                                                                                       \
            BODY(j, ACT, BWD, AMPX_F16, AMPX_F16, AMPX_F16, i0, n);                                \
    } while (0)
#define ACT_CASES(BODY)                                                                            \
    do {                                                                                           \
        if (xdt != j->odt || (bwd && xdt != j->dydt))                                              \
            BODY(j, act, bwd, xdt, j->dydt, j->odt, i0, n);                                        \
        else if (act == AMPX_ACT_GELU && !bwd)                                                     \
            ACT_DT_CASES(BODY, AMPX_ACT_GELU, 0);                                                  \
        else if (act == AMPX_ACT_GELU)                                                             \
            ACT_DT_CASES(BODY, AMPX_ACT_GELU, 1);                                                  \
        else if (act == AMPX_ACT_SIGMOID && !bwd)                                                  \
            ACT_DT_CASES(BODY, AMPX_ACT_SIGMOID, 0);                                               \
        else if (act == AMPX_ACT_SIGMOID)                                                          \
            ACT_DT_CASES(BODY, AMPX_ACT_SIGMOID, 1);                                               \
        else if (!bwd)                                                                             \
            ACT_DT_CASES(BODY, AMPX_ACT_SILU, 0);                                                  \
        else                                                                                       \
            ACT_DT_CASES(BODY, AMPX_ACT_SILU, 1);                                                  \
    } while (0)

#endif

#if CPU_HAVE_AVX2_TABLE
/* The same on the AVX-512 paths, sixteen lanes: every lane goes through the IEEE operations
 * of act8_avx2 and cpu_avx2_exp_ps in the same order (masks where those blend), so the
 * results are the AVX2 path's bits, twice as many per instruction. x, dy and the output are
 * read and written where they lie, bf16 and f16 converted in registers (avx2_math.h). */
CPU_AVX512_INLINE __m512 act16_avx512(uint32_t act, int bwd, __m512 x, __m512 dy) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    const __m512 gk = _mm512_set1_ps((float)AMPX_KM_GELU_K),
                 gc = _mm512_set1_ps((float)AMPX_KM_GELU_C);
    if (!bwd) return cpu_avx512_act_fwd_ps(act, x);
    __m512 s, om;
    cpu_avx512_sigmoid_neg_ps(cpu_avx512_act_neg_arg_ps(act, x), &s, &om);
    __m512 df;
    if (act == AMPX_ACT_SIGMOID) {
        df = _mm512_mul_ps(s, om);
    } else if (act == AMPX_ACT_SILU) {
        df = _mm512_mul_ps(s, _mm512_fmadd_ps(x, om, one));
    } else {
        __m512 sq = _mm512_mul_ps(_mm512_set1_ps(4.0f), _mm512_mul_ps(s, om));
        __m512 d  = _mm512_mul_ps(
             _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_mul_ps(sq, gk)),
             _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(3.0f), gc), _mm512_mul_ps(x, x), one));
        d  = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(sq, zero, _CMP_EQ_OQ), d, zero);
        df = _mm512_add_ps(s, d);
    }
    return _mm512_mul_ps(dy, df);
}

/* Elements i0 .. i0 + n - 1 sixteen at a time; the last n % 16 are widened into f32 and go
 * through act_avx2 (its eight lanes, then ampx_km_act_f/ampx_km_act_df), as on the AVX2 path, whose
 * chunks are the same. */
CPU_AVX512_INLINE void act_avx512_body(const act_job *j, uint32_t act, int bwd, ampx_dtype xdt,
                                       ampx_dtype dydt, ampx_dtype odt, uint64_t i0, uint64_t n) {
    const int ne = cpu_bf16_ne();
    uint64_t k   = 0;
    for (; k + 32 <= n; k += 32) { /* two independent vectors a step: their chains overlap */
        __m512 x0  = cpu_avx512_ld16(j->x, xdt, i0 + k, 0xffff);
        __m512 x1  = cpu_avx512_ld16(j->x, xdt, i0 + k + 16, 0xffff);
        __m512 dy0 = bwd ? cpu_avx512_ld16(j->dy, dydt, i0 + k, 0xffff) : x0;
        __m512 dy1 = bwd ? cpu_avx512_ld16(j->dy, dydt, i0 + k + 16, 0xffff) : x1;
        __m512 r0 = act16_avx512(act, bwd, x0, dy0), r1 = act16_avx512(act, bwd, x1, dy1);
        cpu_avx512_st16_ne(j->out, odt, i0 + k, r0, 0xffff, ne);
        cpu_avx512_st16_ne(j->out, odt, i0 + k + 16, r1, 0xffff, ne);
    }
    for (; k + 16 <= n; k += 16) {
        __m512 x  = cpu_avx512_ld16(j->x, xdt, i0 + k, 0xffff);
        __m512 dy = bwd ? cpu_avx512_ld16(j->dy, dydt, i0 + k, 0xffff) : x;
        cpu_avx512_st16_ne(j->out, odt, i0 + k, act16_avx512(act, bwd, x, dy), 0xffff, ne);
    }
    if (k < n) {
        float tx[16], tdy[16] = {0}, to[16];
        cpu_load_f32(tx, j->x, xdt, i0 + k, n - k);
        if (bwd) cpu_load_f32(tdy, j->dy, dydt, i0 + k, n - k);
        act_avx2(j, tx, tdy, to, n - k);
        cpu_store_f32(j->out, odt, i0 + k, to, n - k);
    }
}

/* One copy of the loop per function, direction and dtype (ACT_CASES). Returns 0 for the
 * other activations. */
CPU_AVX512_FN static int act_avx512(const act_job *j, uint64_t i0, uint64_t n) {
    uint32_t act = j->act;
    int bwd      = j->bwd;
    if (act != AMPX_ACT_GELU && act != AMPX_ACT_SIGMOID && act != AMPX_ACT_SILU) return 0;
    const ampx_dtype xdt = j->xdt;
    ACT_CASES(act_avx512_body);
    return 1;
}
#undef ACT_DT_CASES
#undef ACT_CASES
#endif

#if CPU_HAVE_AVX2_TABLE
/* relu forward and backward on the AVX-512 paths where the tensors lie, sixteen lanes, the
 * portable path's values: f(x) = x for x > 0, x + x for NaN (quieted), +0 otherwise; dx = dy * d
 * with d = 1 for x > 0, x for NaN, +0 otherwise, one f32 product (exact as in double, NaN operands
 * chosen the same way). */
CPU_AVX512_FN static void relu_avx512(const act_job *j, uint64_t i0, uint64_t n) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    for (uint64_t k = 0; k < n; k += 16) {
        __mmask16 msk = cpu_avx512_mask16(n - k);
        __m512 x      = cpu_avx512_ld16(j->x, j->xdt, i0 + k, msk);
        __mmask16 pos = _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ);
        __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        __m512 r;
        if (!j->bwd) {
            r = _mm512_mask_add_ps(_mm512_maskz_mov_ps(pos, x), nan, x, x); /* NaN + NaN: quiet */
        } else {
            __m512 d = _mm512_mask_mov_ps(_mm512_maskz_mov_ps(pos, one), nan, x);
            r        = _mm512_mul_ps(cpu_avx512_ld16(j->dy, j->dydt, i0 + k, msk), d);
        }
        cpu_avx512_st16(j->out, j->odt, i0 + k, r, msk);
    }
}

#endif

/* x, dy and out may be one and the same array (in place, or one scratch chunk): every loop
 * reads element k before it writes it. */
CPU_INLINE void act_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const act_job *j = arg;
    uint64_t i0      = item * CPU_CHUNK;
    uint64_t n       = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512 && j->act == AMPX_ACT_RELU) {
        relu_avx512(j, i0, n);
        return;
    }
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512 && act_avx512(j, i0, n)) return;
#endif
    float tx[CPU_CHUNK], tdy[CPU_CHUNK];
    const float *x  = cpu_in_f32(tx, j->x, j->xdt, i0, n);
    const float *dy = j->bwd ? cpu_in_f32(tdy, j->dy, j->dydt, i0, n) : NULL;
    float *out      = cpu_out_f32(tx, j->out, j->odt, i0);
#if CPU_HAVE_AVX2_TABLE
    /* AVX2: bf16/f16 chunks are widened first (eight-lane converters inside this loop cost
     * more than the two passes over a chunk in cache) */
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2 && act_avx2(j, x, dy, out, n)) {
        cpu_out_f32_done(j->out, j->odt, i0, out, n);
        return;
    }
#endif
    if (j->bwd && j->act == AMPX_ACT_RELU) { /* ampx_km_relu_df, written out: vectorises */
        for (uint64_t k = 0; k < n; k++) {
            double v = x[k], d = v > 0.0 ? 1.0 : (v != v ? v : 0.0);
            out[k] = (float)((double)dy[k] * d);
        }
    } else if (j->act == AMPX_ACT_RELU) { /* exact in f32; a NaN is quieted by v + v (a
                                           * double round trip would be folded away) */
        for (uint64_t k = 0; k < n; k++) {
            float v = x[k];
            out[k]  = v > 0.0f ? v : (v != v ? v + v : 0.0f);
        }
    } else if (j->bwd) {
        for (uint64_t k = 0; k < n; k++)
            out[k] = (float)((double)dy[k] * ampx_km_act_df(j->act, x[k]));
    } else {
        for (uint64_t k = 0; k < n; k++)
            out[k] = (float)ampx_km_act_f(j->act, x[k]);
    }
    cpu_out_f32_done(j->out, j->odt, i0, out, n);
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
