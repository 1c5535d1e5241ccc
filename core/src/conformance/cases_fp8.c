/* cases_fp8.c — conformance cases of ABI 1.7's fp8 ops: FP8_QUANTIZE (bit-exact both ways,
 * saturating and not, with its amax and its overflow and flush counts, exact), GEMM_FP8
 * (every mix of e4m3 and e5m2 operands into each float C, with both dequantization factors,
 * alpha and beta, transposes, batches and the epilogue where the backend has it; held to
 * GEMM's tolerance) and FP8_SCALE_UPDATE (the whole state block bit for bit against
 * backend.h's formula: zero, infinite, NaN and tiny amaxes, both algorithms, margins, the
 * roll, and the skipped step). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_quantize, ampx_fp8_quantize_args)
CONF_DEFINE_CALL(call_gemm_fp8, ampx_gemm_fp8_args)
CONF_DEFINE_CALL(call_scale_update, ampx_fp8_scale_update_args)

static int is_fp8(ampx_dtype dt) {
    return dt == AMPX_E4M3 || dt == AMPX_E5M2;
}

// ---------------------------------------------------------------------------------------
// FP8_QUANTIZE

/* Values around both formats' edges: the largest finite and the ties past it (e4m3 448,
 * 464, 480; e5m2 57344, 61440), subnormals and their halves, zeros, infinities, NaN. */
static const double q_specials[] = {
    0.0,       -0.0,      INFINITY,  -INFINITY, NAN,        1.0,      -1.0,
    448.0,     464.0,     465.0,     480.0,     -470.0,     57344.0,  61439.0,
    61440.0,   -61440.0,  65504.0,   1e5,       0x1p-6,     0x1p-9,   0x1p-10,
    0x1.8p-9,  0x1.4p-10, 0x1p-16,   0x1p-17,   0x1.8p-16,  0x3p-18,  -0x1p-17,
    0x1.2p-17, 0.3,       1.0 / 3.0, 0x1p-30,   1e-40,      3.0e38,   0x1.fffffep127,
    1.0625,    1.1875,    -1.4375,   240.0,     248.0,      232.0,    0x1.cp15,
    0x1.ep15,  0x1.dp15,  7.0,       -0x1.9p-7, 0x1.0001p0, 0x1.fp-1, 0x1.e8p-1,
};
#define N_Q_SPECIALS (sizeof q_specials / sizeof q_specials[0])

typedef struct quant_cfg {
    int mode;        /* 0 specials (from fp8: all 256 codes), 1 random over many binades */
    uint64_t n;      /* elements (specials: repeated) */
    double scale;    /* the factor */
    int saturate;    /* to fp8: 0, 1, or 2 (saturating, an infinite input kept) */
    int amax_counts; /* to fp8: pass amax and counts */
} quant_cfg;

static const quant_cfg quant_cfgs[] = {
    {0, N_Q_SPECIALS, 1.0, 1, 1},
    {0, N_Q_SPECIALS, 1.0, 0, 1},
    {1, 1031, 0x1.5ep-3, 1, 1}, /* a factor that is not a power of two */
    {1, 1, 1.0, 0, 0},
    {1, 4099, 300.75, 1, 1}, /* many overflow and some flush at once */
    {0, 2 * N_Q_SPECIALS, 0x1p-12, 0, 1},
    {0, N_Q_SPECIALS, 3.0, 2, 1}, /* saturating, an infinite input kept non-finite */
    {1, 70001, 12.5, 0, 1},       /* large tier */
};
#define N_QUANT (sizeof quant_cfgs / sizeof quant_cfgs[0])

/* A value of dtype dt over many binades, either sign: 2^-30 .. 2^20. */
static double wide_value(conf_case_ctx *cc, ampx_dtype dt) {
    double x = ldexp(conf_uniform(&cc->rng, 1.0, 2.0), (int)(conf_next(&cc->rng) % 51) - 30);
    return ref_round(dt, (conf_next(&cc->rng) & 1) ? -x : x);
}

static void quant_fill(conf_case_ctx *cc, conf_tensor *S, const quant_cfg *c) {
    for (uint64_t i = 0; i < S->n; i++) {
        if (is_fp8(S->dt)) /* every code, NaNs included, then random codes */
            conf_tensor_set_bits(
                S, i, c->mode == 0 ? (uint32_t)(i % 256) : (uint32_t)(conf_next(&cc->rng) & 0xffu));
        else if (c->mode == 0)
            conf_tensor_set(S, i, ref_round(S->dt, q_specials[i % N_Q_SPECIALS]));
        else
            conf_tensor_set(S, i, wide_value(cc, S->dt));
    }
}

static void case_fp8_quantize(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const quant_cfg *c = &quant_cfgs[variant];
    int to8            = is_fp8(dts[1]);
    uint64_t n         = c->mode == 0 && is_fp8(dts[0]) ? 512 : c->n;
    int acc            = to8 && c->amax_counts;
    conf_shape(cc, "n=%" PRIu64 " scale %a%s%s", n, c->scale,
               to8 ? (c->saturate == 2 ? " saturating finite"
                      : c->saturate    ? " saturating"
                                       : " not saturating")
                   : "",
               acc ? " amax counts" : "");
    conf_tensor *S  = conf_tensor_new(cc, "src", dts[0], n, CT_IN);
    conf_tensor *D  = conf_tensor_new(cc, "dst", dts[1], n, CT_OUT);
    conf_tensor *SC = conf_tensor_new(cc, "scale", AMPX_F32, 1, CT_IN);
    conf_tensor *AM = acc ? conf_tensor_new(cc, "amax", AMPX_F32, 1, CT_INOUT) : NULL;
    conf_tensor *CN = acc ? conf_tensor_new(cc, "counts", AMPX_I32, 2, CT_INOUT) : NULL;
    double *ref     = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) return;
    quant_fill(cc, S, c);
    conf_tensor_set(SC, 0, c->scale);
    double amax      = 0.0;
    int64_t count[2] = {0, 0};
    if (acc) { /* accumulate onto what is there: a small amax, counts from earlier parts */
        amax = ref_round(AMPX_F32, conf_uniform(&cc->rng, 0.0, 0.5));
        conf_tensor_set(AM, 0, amax);
        count[0] = (int64_t)(conf_next(&cc->rng) % 1000);
        count[1] = (int64_t)(conf_next(&cc->rng) % 1000);
        conf_tensor_set(CN, 0, (double)count[0]);
        conf_tensor_set(CN, 1, (double)count[1]);
    }
    ampx_fp8_quantize_args a = {.size     = sizeof a,
                                .saturate = (uint32_t)c->saturate,
                                .n        = n,
                                .src      = S->t,
                                .dst      = D->t,
                                .scale    = SC->t,
                                .amax     = acc ? AM->t : conf_null_tensor,
                                .counts   = acc ? CN->t : conf_null_tensor};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "fp8_quantize", call_quantize(r, AMPX_OP_FP8_QUANTIZE, &a)))
        return;
    ref_fp8_quantize(S->dt, D->dt, n, S->v, c->scale, c->saturate, ref, &amax, count);
    for (uint64_t i = 0; i < n && conf_ok(cc); i++) {
        double got = conf_tensor_get(D, i);
        if (isnan(ref[i]) ? !isnan(got)
                          : conf_tensor_bits(D, D->back, i) != ref_encode(D->dt, ref[i]))
            conf_fail(cc, "dst[%" PRIu64 "] = %a for source %a x %a, expected %a", i, got, S->v[i],
                      c->scale, ref[i]);
    }
    if (acc && conf_ok(cc)) {
        double ga = conf_tensor_get(AM, 0);
        if (ga != amax) conf_fail(cc, "amax = %a, expected %a", ga, amax);
        for (int k = 0; k < 2 && conf_ok(cc); k++)
            if (conf_tensor_get(CN, (uint64_t)k) != (double)count[k])
                conf_fail(cc, "counts[%d] (%s) = %.0f, expected %" PRId64, k,
                          k ? "flushed to zero" : "overflowed", conf_tensor_get(CN, (uint64_t)k),
                          count[k]);
    }
    conf_measure(cc, "exact", 0.0, 0.0);
}

// ---------------------------------------------------------------------------------------
// GEMM_FP8

typedef struct gemm8_cfg {
    uint64_t m, n, k, batch;
    int ta, tb;
    float alpha, beta;
    int epilogue; /* 1: bias and gelu, pre_act (when the backend has them) */
} gemm8_cfg;

static const gemm8_cfg gemm8_cfgs[] = {
    {1, 1, 1, 1, 0, 0, 1.0f, 0.0f, 0},       {7, 5, 3, 1, 0, 0, 1.0f, 0.0f, 0},
    {33, 17, 65, 1, 1, 0, 0.5f, 0.0f, 0},    {16, 48, 31, 1, 0, 1, 1.0f, 0.75f, 0},
    {9, 70, 100, 3, 1, 1, -1.25f, 0.0f, 0},  {24, 40, 64, 2, 0, 1, 1.0f, 0.0f, 1},
    {130, 129, 257, 1, 0, 0, 1.0f, 0.0f, 0}, /* large tier: several tiles and k blocks */
    {96, 256, 768, 1, 0, 1, 1.0f, 1.0f, 0},
};
#define N_GEMM8 (sizeof gemm8_cfgs / sizeof gemm8_cfgs[0])

/* An operand's codes: finite values of its format with a spread of magnitudes (no NaN or
 * inf: a GEMM of them has no finite reference). */
static void gemm8_fill(conf_case_ctx *cc, conf_tensor *T) {
    double top = T->dt == AMPX_E4M3 ? 448.0 : 57344.0;
    for (uint64_t i = 0; i < T->n; i++)
        do
            conf_tensor_set_bits(T, i, (uint32_t)(conf_next(&cc->rng) & 0xffu));
        while (!isfinite(T->v[i]) || fabs(T->v[i]) > top / 64);
}

static void case_gemm_fp8(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const gemm8_cfg *c = &gemm8_cfgs[variant];
    int epi            = c->epilogue && !cc->probe &&
              r->ifc->supports(r->ctx, AMPX_OP_GEMM_FP8, dts, 3, AMPX_SHAPE_GEMM_EPILOGUE);
    conf_shape(cc, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " batch %" PRIu64 " %c%c alpha %g beta %g%s",
               c->m, c->n, c->k, c->batch, c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', (double)c->alpha,
               (double)c->beta, epi ? " bias gelu pre_act" : "");
    uint64_t lda = (c->ta ? c->m : c->k) + 3, ldb = (c->tb ? c->k : c->n) + 1, ldc = c->n + 2;
    uint64_t sa = lda * (c->ta ? c->k : c->m) + 5, sb = ldb * (c->tb ? c->n : c->k),
             sc     = ldc * c->m + 1;
    conf_tensor *A  = conf_tensor_new(cc, "A", dts[0], sa * c->batch, CT_IN);
    conf_tensor *B  = conf_tensor_new(cc, "B", dts[1], sb * c->batch, CT_IN);
    conf_tensor *C  = conf_tensor_new(cc, "C", dts[2], sc * c->batch, CT_INOUT);
    conf_tensor *SA = conf_tensor_new(cc, "a_scale_inv", AMPX_F32, 1, CT_IN);
    conf_tensor *SB = conf_tensor_new(cc, "b_scale_inv", AMPX_F32, 1, CT_IN);
    conf_tensor *BI = epi ? conf_tensor_new(cc, "bias", AMPX_F32, c->n, CT_IN) : NULL;
    conf_tensor *PA = epi ? conf_tensor_new(cc, "pre_act", AMPX_F32, sc * c->batch, CT_OUT) : NULL;
    uint64_t nc     = sc * c->batch;
    double *ref = conf_alloc(cc, nc * sizeof(double)), *mag = conf_alloc(cc, nc * sizeof(double)),
           *pre = conf_alloc(cc, nc * sizeof(double));
    if (!conf_ok(cc)) return;
    gemm8_fill(cc, A);
    gemm8_fill(cc, B);
    conf_tensor_fill(cc, C, -1, 1);
    double fa = ref_round(AMPX_F32, conf_uniform(&cc->rng, 0.5, 2.0) / 64.0);
    double fb = ref_round(AMPX_F32, conf_uniform(&cc->rng, 0.5, 2.0) / 1024.0);
    conf_tensor_set(SA, 0, fa);
    conf_tensor_set(SB, 0, fb);
    if (epi) conf_tensor_fill(cc, BI, -1, 1);
    ampx_gemm_fp8_args a = {.size = sizeof a, .a_scale_inv = SA->t, .b_scale_inv = SB->t};
    a.gemm               = (ampx_gemm_args){.size     = sizeof(ampx_gemm_args),
                                            .trans_a  = (uint32_t)c->ta,
                                            .trans_b  = (uint32_t)c->tb,
                                            .m        = c->m,
                                            .n        = c->n,
                                            .k        = c->k,
                                            .batch    = c->batch,
                                            .lda      = lda,
                                            .ldb      = ldb,
                                            .ldc      = ldc,
                                            .stride_a = sa,
                                            .stride_b = sb,
                                            .stride_c = sc,
                                            .alpha    = c->alpha,
                                            .beta     = c->beta,
                                            .a        = A->t,
                                            .b        = B->t,
                                            .c        = C->t};
    if (epi) {
        a.gemm.bias    = BI->t;
        a.gemm.act     = AMPX_GEMM_ACT(AMPX_ACT_GELU);
        a.gemm.pre_act = PA->t;
    }
    if (conf_upload(cc) || conf_finish_call(cc, "gemm_fp8", call_gemm_fp8(r, AMPX_OP_GEMM_FP8, &a)))
        return;
    memcpy(ref, C->v, nc * sizeof(double));
    double alpha = (double)c->alpha * fa * fb;
    ref_gemm(c->ta, c->tb, c->m, c->n, c->k, c->batch, A->v, lda, sa, B->v, ldb, sb, alpha, c->beta,
             ref, ldc, sc, mag);
    if (epi) {
        ref_gemm_epilogue(c->m, c->n, c->batch, BI->v, AMPX_ACT_GELU, ref, ldc, sc, pre, mag);
        double *gp = conf_values(cc, PA), *pv = conf_alloc(cc, nc * sizeof(double)),
               *qv = conf_alloc(cc, nc * sizeof(double)), *mp = conf_alloc(cc, nc * sizeof(double));
        if (!gp || !pv || !qv || !mp) return;
        uint64_t np = 0;
        for (uint64_t e = 0; e < nc; e++) {
            uint64_t in = e % sc;
            if (in / ldc < c->m && in % ldc < c->n)
                pv[np] = gp[e], qv[np] = pre[e], mp[np++] = mag[e];
        }
        conf_compare(cc, "pre_act", pv, qv, mp, np, AMPX_F32, (double)c->k + 4,
                     CMP_NORM | CMP_ELEM);
    }
    /* the m x n positions of each batch; the padding between them must keep its bits */
    uint64_t m = 0;
    double *g = conf_values(cc, C), *gv = conf_alloc(cc, nc * sizeof(double)),
           *rv = conf_alloc(cc, nc * sizeof(double)), *mv = conf_alloc(cc, nc * sizeof(double));
    if (!g || !gv || !rv || !mv) return;
    for (uint64_t e = 0; e < nc; e++) {
        uint64_t in = e % sc, i = in / ldc, j = in % ldc;
        if (i < c->m && j < c->n) {
            gv[m] = g[e], rv[m] = ref[e], mv[m++] = mag[e];
        } else if (conf_tensor_bits(C, C->back, e) != conf_tensor_bits(C, C->image, e)) {
            conf_fail(cc, "C[%" PRIu64 "] lies outside the m x n matrices and was written", e);
            return;
        }
    }
    conf_compare(cc, "C", gv, rv, mv, m, C->dt, (double)c->k + 4 + (epi ? 16 : 0),
                 CMP_NORM | CMP_ELEM);
}

// ---------------------------------------------------------------------------------------
// FP8_SCALE_UPDATE

typedef struct update_cfg {
    uint64_t n;
    uint32_t history;
    int algo, margin;
    int skip;     /* 0: no scalars; 1: skip_on_found_inf with found_inf 0; 2: with found_inf 1 */
    int specials; /* amaxes of 0, inf, NaN and tiny among the random ones */
} update_cfg;

static const update_cfg update_cfgs[] = {
    {6, 1, AMPX_FP8_AMAX_MAX, 0, 0, 1},
    {37, 16, AMPX_FP8_AMAX_MAX, 2, 0, 1},
    {11, 7, AMPX_FP8_AMAX_MOST_RECENT, -1, 0, 1},
    {13, 5, AMPX_FP8_AMAX_MAX, 0, 2, 1},
    {13, 5, AMPX_FP8_AMAX_MAX, 1, 1, 0},
    {300, 1024, AMPX_FP8_AMAX_MAX, 0, 1, 1}, /* Transformer Engine's default history */
};
#define N_UPDATE (sizeof update_cfgs / sizeof update_cfgs[0])

static double amax_value(conf_case_ctx *cc, int specials) {
    static const double sp[] = {0.0, INFINITY, NAN, 1e-40, 0x1p-126, 3e38};
    if (specials && conf_next(&cc->rng) % 8 == 0) return sp[conf_next(&cc->rng) % 6];
    return ref_round(AMPX_F32,
                     ldexp(conf_uniform(&cc->rng, 1.0, 2.0), (int)(conf_next(&cc->rng) % 40) - 20));
}

static void case_fp8_scale_update(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts,
                                  int variant) {
    (void)dts;
    const update_cfg *c = &update_cfgs[variant];
    uint64_t ns         = (2 + (uint64_t)c->history) * c->n;
    conf_shape(cc, "n=%" PRIu64 " history %u %s margin %d%s", c->n, c->history,
               c->algo == AMPX_FP8_AMAX_MAX ? "max" : "most_recent", c->margin,
               c->skip == 2 ? " skipped step"
               : c->skip    ? " step applied"
                            : "");
    conf_tensor *ST = conf_tensor_new(cc, "state", AMPX_F32, ns, CT_INOUT);
    conf_tensor *FM = conf_tensor_new(cc, "fp8_max", AMPX_F32, c->n, CT_IN);
    conf_tensor *S  = c->skip ? conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_IN) : NULL;
    double *ref     = conf_alloc(cc, ns * sizeof(double));
    if (!conf_ok(cc)) return;
    for (uint64_t i = 0; i < c->n; i++) {
        double sc = ref_round(
            AMPX_F32, ldexp(conf_uniform(&cc->rng, 1.0, 2.0), (int)(conf_next(&cc->rng) % 16) - 4));
        conf_tensor_set(ST, i, sc);
        conf_tensor_set(ST, c->n + i, ref_round(AMPX_F32, 1.0 / sc));
        conf_tensor_set(FM, i, (conf_next(&cc->rng) & 1) ? 448.0 : 57344.0);
    }
    for (uint64_t e = 2 * c->n; e < ns; e++)
        conf_tensor_set(ST, e, amax_value(cc, c->specials));
    if (S) {
        ampx_scalars sc = {.scale = 1024.0f, .found_inf = c->skip == 2 ? 1 : 0};
        conf_scalars_to_tensor(S, &sc);
    }
    ampx_fp8_scale_update_args a = {.size              = sizeof a,
                                    .algo              = (uint32_t)c->algo,
                                    .n                 = c->n,
                                    .history           = c->history,
                                    .margin            = c->margin,
                                    .skip_on_found_inf = c->skip ? 1u : 0u,
                                    .state             = ST->t,
                                    .fp8_max           = FM->t,
                                    .scalars           = S ? S->t : conf_null_tensor};
    if (conf_upload(cc) || conf_finish_call(cc, "fp8_scale_update",
                                            call_scale_update(r, AMPX_OP_FP8_SCALE_UPDATE, &a)))
        return;
    memcpy(ref, ST->v, ns * sizeof(double));
    ref_fp8_scale_update(c->n, c->history, c->algo, c->margin, c->skip == 2, FM->v, ref);
    for (uint64_t e = 0; e < ns && conf_ok(cc); e++) {
        double got = conf_tensor_get(ST, e);
        if (isnan(ref[e]) ? !isnan(got)
                          : conf_tensor_bits(ST, ST->back, e) != ref_encode(AMPX_F32, ref[e]))
            conf_fail(cc, "%s[%" PRIu64 "] = %a, expected %a",
                      e < c->n       ? "scale"
                      : e < 2 * c->n ? "scale_inv"
                                     : "history",
                      e < 2 * c->n ? e % c->n : e - 2 * c->n, got, ref[e]);
    }
    conf_measure(cc, "exact", 0.0, 0.0);
}

const conf_op_cases conf_op_fp8_quantize     = {case_fp8_quantize, (int)N_QUANT, 4, NULL};
const conf_op_cases conf_op_gemm_fp8         = {case_gemm_fp8, (int)N_GEMM8, 6, NULL};
const conf_op_cases conf_op_fp8_scale_update = {case_fp8_scale_update, (int)N_UPDATE, 5, NULL};
