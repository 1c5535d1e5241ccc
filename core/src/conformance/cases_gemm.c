/* cases_gemm.c — conformance cases of GEMM. */
#include <inttypes.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_gemm, ampx_gemm_args)

// ---------------------------------------------------------------------------------------
// GEMM: padding of A and B holds NaN (an op that reads it poisons C); padding of C holds
// random values that must survive bitwise; beta == 0 leaves C's active part poisoned.

typedef struct gemm_cfg {
    uint64_t m, n, k, batch;
    int ta, tb;
    uint64_t pad_a, pad_b, pad_c, gap; /* extra leading dimension; extra batch stride */
    float alpha, beta;
} gemm_cfg;

static const gemm_cfg gemm_cfgs[] = {
    {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f},
    {7, 13, 31, 1, 0, 1, 3, 0, 2, 0, 1.0f, 0.5f},
    {13, 7, 127, 2, 1, 0, 0, 5, 0, 7, 0.75f, 0.0f},
    {31, 17, 1031, 1, 1, 1, 1, 2, 3, 0, 1.0f, -1.25f},
    {67, 45, 100, 3, 0, 0, 5, 0, 1, 3, -0.5f, 1.0f},
    {5, 129, 64, 1, 1, 1, 0, 0, 0, 0, 1.0f, 0.0f},
    {16, 9, 0, 2, 0, 1, 0, 0, 4, 2, 1.0f, 0.75f},
    /* large tier (full sweep only): several MC x NC tiles, KC slices and threads */
    {300, 260, 270, 1, 0, 0, 1, 3, 2, 0, 1.0f, 0.5f},
    {129, 300, 257, 2, 1, 1, 3, 1, 5, 11, -0.75f, 0.0f},
    /* the CPU driver's layouts (docs/CPU.md), any backend: C one row of tiles 1.5 times the
     * table's height (B packed per tile), one column of tiles (A packed per tile), a narrow
     * C (n = 4: computed as C^T), and several rows and columns of tiles with k over 4096
     * (k cut into blocks deeper than the 256 of the other layouts) */
    {250, 300, 270, 1, 0, 1, 2, 0, 1, 0, 1.0f, 0.5f},
    {700, 100, 300, 1, 1, 0, 0, 3, 0, 0, -1.0f, 0.0f},
    {300, 4, 700, 2, 1, 1, 1, 2, 3, 5, 0.5f, 1.0f},
    {290, 270, 4302, 1, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f},
};

/* The batched, doubly transposed large variant costs the double reference ~20M products
 * per combination: it runs where A and B share a dtype (9 of 27 combinations, which still
 * put every dtype in every slot). */
#define GEMM_LARGE_SUBSET 8
/* The deep-k variant (340M products per combination) runs where A, B and C share a dtype. */
#define GEMM_DEEP 12

int conf_gemm_runs(const ampx_dtype *dts, int variant) {
    if (variant == GEMM_DEEP) return dts[0] == dts[1] && dts[1] == dts[2];
    return variant != GEMM_LARGE_SUBSET || dts[0] == dts[1];
}

/* An input value: uniform in [-1, 1], and about one in 32 a subnormal of the dtype. A kernel
 * that widens f16 subnormals wrongly (or flushes them) misses products of up to 2^-14 |b|,
 * which the f32 tolerance sees; bf16 and f32 subnormal products (under 2^-126) are far below
 * any tolerance, so a kernel that counts those as zero (DAZ) still passes, as documented. */
static double gemm_input(conf_case_ctx *cc, ampx_dtype dt) {
    double u = conf_uniform(&cc->rng, -1, 1);
    if (conf_uniform(&cc->rng, 0, 1) >= 1.0 / 32) return ref_round(dt, u);
    double min_normal = dt == AMPX_F16 ? 0x1p-14 : 0x1p-126;
    double x          = ref_round(dt, u * min_normal);
    return x != 0.0 ? x : ref_round(dt, (u < 0 ? -0.5 : 0.5) * min_normal);
}

#define GEMM_PLAIN ((int)(sizeof gemm_cfgs / sizeof gemm_cfgs[0]))
_Static_assert(GEMM_PLAIN == 13, "conf_op_gemm below counts 13 plain variants");

void conf_case_gemm(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    if (variant >= GEMM_PLAIN) { /* the epilogue's variants come after the plain ones */
        conf_case_gemm_epilogue(r, cc, dts, variant - GEMM_PLAIN);
        return;
    }
    const gemm_cfg *g = &gemm_cfgs[variant];
    uint64_t rows_a = g->ta ? g->k : g->m, cols_a = g->ta ? g->m : g->k;
    uint64_t rows_b = g->tb ? g->n : g->k, cols_b = g->tb ? g->k : g->n;
    uint64_t lda = cols_a + g->pad_a, ldb = cols_b + g->pad_b, ldc = g->n + g->pad_c;
    if (lda == 0) lda = 1;
    if (ldb == 0) ldb = 1;
    uint64_t sa = rows_a * lda + g->gap, sb = rows_b * ldb + g->gap, sc = g->m * ldc + g->gap;
    uint64_t na = sa * (g->batch - 1) + rows_a * lda, nb = sb * (g->batch - 1) + rows_b * ldb;
    uint64_t nc = sc * (g->batch - 1) + g->m * ldc;
    conf_shape(cc,
               "m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64 " batch=%" PRIu64 "%s%s lda=%" PRIu64
               " ldb=%" PRIu64 " ldc=%" PRIu64 " alpha=%g beta=%g",
               g->m, g->n, g->k, g->batch, g->ta ? " tA" : "", g->tb ? " tB" : "", lda, ldb, ldc,
               (double)g->alpha, (double)g->beta);
    conf_tensor *A  = conf_tensor_new(cc, "A", dts[0], na, CT_IN);
    conf_tensor *B  = conf_tensor_new(cc, "B", dts[1], nb, CT_IN);
    conf_tensor *C  = conf_tensor_new(cc, "C", dts[2], nc, CT_INOUT);
    uint8_t *active = conf_alloc(cc, nc);
    double *ref = conf_alloc(cc, nc * sizeof(double)), *mag = conf_alloc(cc, nc * sizeof(double));
    double *gv = conf_alloc(cc, nc * sizeof(double));
    if (!conf_ok(cc)) goto done;
    for (uint64_t b = 0; b < g->batch; b++) {
        for (uint64_t i = 0; i < rows_a; i++)
            for (uint64_t j = 0; j < cols_a; j++)
                conf_tensor_set(A, b * sa + i * lda + j, gemm_input(cc, A->dt));
        for (uint64_t i = 0; i < rows_b; i++)
            for (uint64_t j = 0; j < cols_b; j++)
                conf_tensor_set(B, b * sb + i * ldb + j, gemm_input(cc, B->dt));
        for (uint64_t i = 0; i < g->m; i++)
            for (uint64_t j = 0; j < g->n; j++)
                active[b * sc + i * ldc + j] = 1;
    }
    for (uint64_t e = 0; e < nc; e++) /* padding: random, must survive; active: see above */
        if (!active[e] || g->beta != 0.0f)
            conf_tensor_set(C, e, ref_round(C->dt, conf_uniform(&cc->rng, -1, 1)));
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
                        .c        = C->t};
    if (conf_upload(cc) || conf_finish_call(cc, "gemm", call_gemm(r, AMPX_OP_GEMM, &a))) goto done;
    memcpy(ref, C->v, nc * sizeof(double));
    ref_gemm(g->ta, g->tb, g->m, g->n, g->k, g->batch, A->v, lda, sa, B->v, ldb, sb, g->alpha,
             g->beta, ref, ldc, sc, mag);
    uint64_t na_ = 0;
    for (uint64_t e = 0; e < nc; e++) {
        if (!active[e]) {
            if (conf_tensor_bits(C, C->image, e) != conf_tensor_bits(C, C->back, e)) {
                conf_fail(cc, "C[%" PRIu64 "] outside the m x n blocks was modified", e);
                goto done;
            }
            continue;
        }
        gv[na_]    = conf_tensor_get(C, e);
        ref[na_]   = ref[e];
        mag[na_++] = mag[e];
    }
    conf_compare(cc, "C", gv, ref, mag, na_, C->dt, (double)g->k + 4, CMP_NORM | CMP_ELEM);
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_gemm = {conf_case_gemm, 13 + CONF_GEMM_EPILOGUE_VARIANTS, 4,
                                    conf_gemm_runs};
