/* cases_gemm_epilogue.c — conformance cases of GEMM's ABI 1.5 epilogue: bias, pre_act and
 * activation applied before C's one rounding, and the bias gradient (column sums of op(B)),
 * against ref_gemm, ref_gemm_epilogue and ref_gemm_bias_grad. They are the last variants of
 * GEMM's table (cases_gemm.c hands them here). A backend that does not claim the epilogue
 * for the dtypes (ampx_backend_gemm_epilogue) must refuse such a GEMM with an error. */
#include <inttypes.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_gemm_epi, ampx_gemm_args)

/* bias_dt: 0 C's dtype, else that dtype + 1 (an f32, bf16 or f16 bias whatever C is);
 * act: an ampx_act or -1; grad: 0 no bias gradient, 1 written, 2 accumulated. */
typedef struct epi_cfg {
    uint64_t m, n, k, batch;
    int ta, tb;
    float alpha, beta;
    int act, bias_dt, pre, grad;
} epi_cfg;

static const epi_cfg epi_cfgs[] = {
    {7, 13, 31, 1, 0, 1, 1.0f, 0.5f, AMPX_ACT_GELU, 1, 1, 1},
    {33, 40, 65, 1, 1, 0, 1.0f, 0.0f, AMPX_ACT_RELU, 0, 1, 2},
    {64, 300, 100, 1, 0, 0, 1.0f, 0.0f, AMPX_ACT_SILU, 2, 0, 1},    /* several tiles of n */
    {130, 4, 77, 2, 1, 1, 0.75f, -1.0f, AMPX_ACT_SIGMOID, 3, 1, 0}, /* narrow: C^T on cpu */
    {45, 67, 128, 1, 1, 0, 1.0f, 0.0f, AMPX_ACT_TANH, 1, 1, 2},
    {16, 48, 0, 1, 0, 0, 1.0f, 0.5f, AMPX_ACT_GELU, 1, 1, 1},     /* k = 0: C = f(beta C + b) */
    {50, 70, 20, 3, 0, 0, 1.0f, 0.0f, -1, 1, 0, 1},               /* bias alone, 3 batches */
    {0, 24, 33, 1, 1, 0, 1.0f, 0.0f, -1, -1, 0, 2},               /* m = 0: the bias grad alone */
    {200, 264, 150, 1, 0, 0, 1.0f, 0.0f, AMPX_ACT_GELU, 1, 1, 0}, /* the dense layer's shape */
};

#define EPI_VARIANTS ((int)(sizeof epi_cfgs / sizeof epi_cfgs[0]))

_Static_assert(EPI_VARIANTS == CONF_GEMM_EPILOGUE_VARIANTS, "harness.h counts these variants");

static double epi_input(conf_case_ctx *cc, ampx_dtype dt, double lim) {
    return ref_round(dt, conf_uniform(&cc->rng, -lim, lim));
}

/* The epilogue refused as it must be where the backend does not claim it. */
static void epi_refused(conf_run *r, conf_case_ctx *cc, const ampx_gemm_args *a) {
    if (conf_upload(cc)) return;
    ampx_status st = call_gemm_epi(r, AMPX_OP_GEMM, a);
    if (st == AMPX_OK) st = r->ifc->synchronize(r->ctx);
    if (st == AMPX_OK)
        conf_fail(cc, "supports() does not claim the GEMM epilogue, but a GEMM asking for it "
                      "succeeded");
}

/* C (and pre_act) against the reference: elements of the m x n blocks only. */
static void epi_compare(conf_case_ctx *cc, const char *what, const conf_tensor *T,
                        const uint8_t *active, const double *ref, const double *mag, uint64_t nc,
                        double k) {
    double *g = conf_alloc(cc, nc * sizeof(double)), *rf = conf_alloc(cc, nc * sizeof(double));
    double *mg = conf_alloc(cc, nc * sizeof(double));
    if (!conf_ok(cc)) return;
    uint64_t na = 0;
    for (uint64_t e = 0; e < nc; e++) {
        if (!active[e]) continue;
        g[na] = conf_tensor_get(T, e), rf[na] = ref[e], mg[na++] = mag[e];
    }
    conf_compare(cc, what, g, rf, mg, na, T->dt, k, CMP_NORM | CMP_ELEM);
}

/* The call's args: C's layout as set up, the epilogue's tensors where the variant has them. */
static ampx_gemm_args epi_args(const epi_cfg *g, uint64_t lda, uint64_t ldb, uint64_t ldc,
                               uint64_t sa, uint64_t sb, uint64_t sc, const conf_tensor *A,
                               const conf_tensor *B, const conf_tensor *C, const conf_tensor *Bs,
                               const conf_tensor *P, const conf_tensor *D) {
    ampx_gemm_args a = {.size     = sizeof a,
                        .trans_a  = (uint32_t)g->ta,
                        .trans_b  = (uint32_t)g->tb,
                        .m        = g->m,
                        .n        = g->n,
                        .k        = g->k,
                        .batch    = g->batch,
                        .lda      = lda,
                        .ldb      = ldb,
                        .ldc      = ldc,
                        .stride_a = sa,
                        .stride_b = sb,
                        .stride_c = sc,
                        .alpha    = g->alpha,
                        .beta     = g->beta,
                        .a        = A->t,
                        .b        = B->t,
                        .c        = C->t,
                        .bias     = Bs ? Bs->t : (ampx_tensor){0},
                        .act      = g->act < 0 ? AMPX_GEMM_ACT_NONE : AMPX_GEMM_ACT(g->act),
                        .bias_grad_accumulate = g->grad == 2,
                        .pre_act              = P ? P->t : (ampx_tensor){0},
                        .bias_grad            = D ? D->t : (ampx_tensor){0}};
    return a;
}

/* Inputs in [-1, 1] (bias [-2, 2], an accumulated bias gradient [-4, 4]); C's padding, and its
 * active part when beta != 0, random; active marks the m x n blocks. */
static void epi_fill(conf_case_ctx *cc, const epi_cfg *g, conf_tensor *A, conf_tensor *B,
                     conf_tensor *C, conf_tensor *Bs, conf_tensor *D, uint8_t *active, uint64_t sc,
                     uint64_t ldc) {
    for (uint64_t e = 0; e < A->n; e++)
        conf_tensor_set(A, e, epi_input(cc, A->dt, 1));
    for (uint64_t e = 0; e < B->n; e++)
        conf_tensor_set(B, e, epi_input(cc, B->dt, 1));
    for (uint64_t b = 0; b < g->batch; b++)
        for (uint64_t i = 0; i < g->m; i++)
            for (uint64_t j = 0; j < g->n; j++)
                active[b * sc + i * ldc + j] = 1;
    for (uint64_t e = 0; e < C->n; e++) /* padding must survive; beta 0 leaves C poisoned */
        if (!active[e] || g->beta != 0.0f) conf_tensor_set(C, e, epi_input(cc, C->dt, 1));
    for (uint64_t j = 0; Bs && j < g->n; j++)
        conf_tensor_set(Bs, j, epi_input(cc, Bs->dt, 2));
    for (uint64_t j = 0; D && g->grad == 2 && j < g->n; j++)
        conf_tensor_set(D, j, epi_input(cc, AMPX_F32, 4));
}

void conf_case_gemm_epilogue(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int v) {
    const epi_cfg *g = &epi_cfgs[v];
    uint64_t rows_a = g->ta ? g->k : g->m, cols_a = g->ta ? g->m : g->k;
    uint64_t rows_b = g->tb ? g->n : g->k, cols_b = g->tb ? g->k : g->n;
    uint64_t lda = cols_a + 1, ldb = cols_b + 2, ldc = g->n + 3;
    uint64_t sa = rows_a * lda + 5, sb = rows_b * ldb + 3, sc = g->m * ldc + 7;
    uint64_t na = sa * (g->batch - 1) + rows_a * lda, nb = sb * (g->batch - 1) + rows_b * ldb;
    uint64_t nc    = sc * (g->batch - 1) + g->m * ldc;
    ampx_dtype bdt = g->bias_dt <= 0 ? dts[2] : (ampx_dtype)(g->bias_dt - 1);
    conf_shape(cc,
               "epilogue m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64 " batch=%" PRIu64
               "%s%s alpha=%g beta=%g act=%d bias=%s%s%s",
               g->m, g->n, g->k, g->batch, g->ta ? " tA" : "", g->tb ? " tB" : "", (double)g->alpha,
               (double)g->beta, g->act, g->bias_dt < 0 ? "none" : ampx_dtype_name(bdt),
               g->pre ? " pre_act" : "",
               g->grad == 2 ? " bias_grad+="
               : g->grad    ? " bias_grad"
                            : "");
    conf_tensor *A  = conf_tensor_new(cc, "A", dts[0], na, CT_IN);
    conf_tensor *B  = conf_tensor_new(cc, "B", dts[1], nb, CT_IN);
    conf_tensor *C  = conf_tensor_new(cc, "C", dts[2], nc ? nc : 1, CT_INOUT);
    conf_tensor *Bs = g->bias_dt >= 0 ? conf_tensor_new(cc, "bias", bdt, g->n, CT_IN) : NULL;
    /* pre_act in the other float dtype than C's half the time: its own rounding */
    ampx_dtype pdt  = v % 2 ? AMPX_F32 : dts[2];
    conf_tensor *P  = g->pre ? conf_tensor_new(cc, "pre_act", pdt, nc ? nc : 1, CT_OUT) : NULL;
    conf_tensor *D  = g->grad ? conf_tensor_new(cc, "bias_grad", AMPX_F32, g->n, CT_INOUT) : NULL;
    uint8_t *active = conf_alloc(cc, nc + 1);
    double *ref     = conf_alloc(cc, (nc + 1) * sizeof(double));
    double *mag     = conf_alloc(cc, (nc + 1) * sizeof(double));
    double *pre     = conf_alloc(cc, (nc + 1) * sizeof(double));
    double *dref = conf_alloc(cc, g->n * sizeof(double)), *dmag = conf_alloc(cc, g->n * 8);
    if (!conf_ok(cc)) return;
    epi_fill(cc, g, A, B, C, Bs, D, active, sc, ldc);
    ampx_gemm_args a = epi_args(g, lda, ldb, ldc, sa, sb, sc, A, B, C, Bs, P, D);
    if (!ampx_backend_gemm_epilogue(r->be, dts)) {
        epi_refused(r, cc, &a);
        return;
    }
    if (conf_upload(cc) || conf_finish_call(cc, "gemm", call_gemm_epi(r, AMPX_OP_GEMM, &a))) return;
    memcpy(ref, C->v, nc * sizeof(double));
    ref_gemm(g->ta, g->tb, g->m, g->n, g->k, g->batch, A->v, lda, sa, B->v, ldb, sb, g->alpha,
             g->beta, ref, ldc, sc, mag);
    ref_gemm_epilogue(g->m, g->n, g->batch, Bs ? Bs->v : NULL, g->act, ref, ldc, sc, P ? pre : NULL,
                      mag);
    if (nc) {
        for (uint64_t e = 0; e < nc; e++)
            if (!active[e] && conf_tensor_bits(C, C->image, e) != conf_tensor_bits(C, C->back, e)) {
                conf_fail(cc, "C[%" PRIu64 "] outside the m x n blocks was modified", e);
                return;
            }
        epi_compare(cc, "C", C, active, ref, mag, nc, (double)g->k + 24);
        if (P) { /* mag of pre: the product's and the bias's terms (before the activation) */
            ref_gemm(g->ta, g->tb, g->m, g->n, g->k, g->batch, A->v, lda, sa, B->v, ldb, sb,
                     g->alpha, g->beta, memcpy(ref, C->v, nc * sizeof(double)), ldc, sc, mag);
            ref_gemm_epilogue(g->m, g->n, g->batch, Bs ? Bs->v : NULL, -1, ref, ldc, sc, NULL, mag);
            epi_compare(cc, "pre_act", P, active, pre, mag, nc, (double)g->k + 4);
        }
    }
    if (D) {
        memcpy(dref, D->v, g->n * sizeof(double));
        ref_gemm_bias_grad(g->tb, g->n, g->k, g->batch, B->v, ldb, sb, g->grad == 2, dref, dmag);
        double *got = conf_values(cc, D);
        if (got)
            conf_compare(cc, "bias_grad", got, dref, dmag, g->n, AMPX_F32,
                         (double)(g->k * g->batch) + 1, CMP_NORM | CMP_ELEM);
    }
}
