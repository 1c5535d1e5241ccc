/* cases_norm.c — conformance cases of LAYERNORM_FWD/BWD and BATCHNORM_FWD/BWD. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_layernorm, ampx_layernorm_args)
CONF_DEFINE_CALL(call_batchnorm, ampx_batchnorm_args)

// ---------------------------------------------------------------------------------------
// Layer norm and batch norm. Inputs are offset from zero so the mean matters; the backward
// gets mean and rstd as the forward would save them (reference statistics rounded to f32).

void conf_case_layernorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int affine;
        float eps;
    } cfgs[] = {
        {2, 1, 1, 1e-5f},
        {7, 13, 0, 1e-5f},
        {31, 127, 1, 1e-5f},
        {3, 1031, 1, 1e-3f},
        {64, 67, 0, 1e-5f},
        /* large tier */
        {300, 257, 1, 1e-5f},
        {97, 1031, 0, 1e-3f},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int aff   = cfgs[variant].affine;
    float eps = cfgs[variant].eps;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " eps=%g%s", rows, cols, (double)eps,
               aff ? "" : " no gamma/beta");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y  = conf_tensor_new(cc, "y", dts[1], n, CT_OUT);
    conf_tensor *G  = aff ? conf_tensor_new(cc, "gamma", AMPX_F32, cols, CT_IN) : NULL;
    conf_tensor *Bt = aff ? conf_tensor_new(cc, "beta", AMPX_F32, cols, CT_IN) : NULL;
    conf_tensor *M  = conf_tensor_new(cc, "mean", AMPX_F32, rows, CT_OUT);
    conf_tensor *RS = conf_tensor_new(cc, "rstd", AMPX_F32, rows, CT_OUT);
    double *ry = conf_alloc(cc, n * sizeof(double)), *rm = conf_alloc(cc, rows * sizeof(double));
    double *rr = conf_alloc(cc, rows * sizeof(double)), *mm = conf_alloc(cc, rows * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -1, 3);
    if (aff) {
        conf_tensor_fill(cc, G, 0.5, 1.5);
        conf_tensor_fill(cc, Bt, -0.5, 0.5);
    }
    ampx_layernorm_args a = {sizeof a,
                             0,
                             rows,
                             cols,
                             eps,
                             X->t,
                             G ? G->t : conf_null_tensor,
                             Bt ? Bt->t : conf_null_tensor,
                             M->t,
                             RS->t,
                             conf_null_tensor,
                             Y->t,
                             conf_null_tensor,
                             conf_null_tensor};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "layernorm_fwd", call_layernorm(r, AMPX_OP_LAYERNORM_FWD, &a)))
        goto done;
    ref_layernorm_fwd(rows, cols, eps, X->v, G ? G->v : NULL, Bt ? Bt->v : NULL, ry, rm, rr);
    for (uint64_t i = 0; i < rows; i++) {
        mm[i] = 0.0;
        for (uint64_t j = 0; j < cols; j++)
            mm[i] += fabs(X->v[i * cols + j]) / (double)cols;
    }
    double *gy = conf_values(cc, Y), *gm = conf_values(cc, M), *gr = conf_values(cc, RS);
    if (!conf_ok(cc)) goto done;
    conf_compare(cc, "y", gy, ry, NULL, n, Y->dt, CONF_K_ROW(cols), CMP_NORM);
    conf_compare(cc, "mean", gm, rm, mm, rows, AMPX_F32, CONF_K_ROW(cols), CMP_NORM | CMP_ELEM);
    conf_compare(cc, "rstd", gr, rr, NULL, rows, AMPX_F32, CONF_K_ROW(cols), CMP_NORM | CMP_ELEM);
done:
    return;
}

void conf_case_layernorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int acc;
    } cfgs[] = {
        {2, 1, 0},
        {7, 13, 0},
        {31, 127, 1},
        {3, 1031, 0},
        {64, 67, 1},
        /* large tier */
        {300, 257, 1},
        {97, 1031, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int acc = cfgs[variant].acc;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s", rows, cols, acc ? " accumulate" : "");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *DY = conf_tensor_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = conf_tensor_new(cc, "dx", dts[2], n, CT_OUT);
    conf_tensor *G  = conf_tensor_new(cc, "gamma", AMPX_F32, cols, CT_IN);
    conf_tensor *M  = conf_tensor_new(cc, "mean", AMPX_F32, rows, CT_IN);
    conf_tensor *RS = conf_tensor_new(cc, "rstd", AMPX_F32, rows, CT_IN);
    conf_tensor *DG = conf_tensor_new(cc, "dgamma", AMPX_F32, cols, acc ? CT_INOUT : CT_OUT);
    conf_tensor *DB = conf_tensor_new(cc, "dbeta", AMPX_F32, cols, acc ? CT_INOUT : CT_OUT);
    double *tmp = conf_alloc(cc, n * sizeof(double)), *rdx = conf_alloc(cc, n * sizeof(double));
    double *rm = conf_alloc(cc, rows * sizeof(double)), *rr = conf_alloc(cc, rows * sizeof(double));
    double *rdg = conf_alloc(cc, cols * sizeof(double)),
           *rdb = conf_alloc(cc, cols * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -1, 3);
    conf_tensor_fill(cc, DY, -1, 1);
    conf_tensor_fill(cc, G, 0.5, 1.5);
    ref_layernorm_fwd(rows, cols, 1e-5, X->v, NULL, NULL, tmp, rm, rr);
    for (uint64_t i = 0; i < rows; i++) {
        conf_tensor_set(M, i, ref_round(AMPX_F32, rm[i]));
        conf_tensor_set(RS, i, ref_round(AMPX_F32, rr[i]));
    }
    if (acc) {
        conf_tensor_fill(cc, DG, -2, 2);
        conf_tensor_fill(cc, DB, -2, 2);
    }
    ampx_layernorm_args a = {sizeof a,         (uint32_t)acc, rows,  cols,  1e-5f, X->t,  G->t,
                             conf_null_tensor, M->t,          RS->t, DY->t, DX->t, DG->t, DB->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "layernorm_bwd", call_layernorm(r, AMPX_OP_LAYERNORM_BWD, &a)))
        goto done;
    memcpy(rdg, DG->v, cols * sizeof(double));
    memcpy(rdb, DB->v, cols * sizeof(double));
    ref_layernorm_bwd(rows, cols, acc, X->v, G->v, M->v, RS->v, DY->v, rdx, rdg, rdb);
    double *gdx = conf_values(cc, DX), *gdg = conf_values(cc, DG), *gdb = conf_values(cc, DB);
    if (!conf_ok(cc)) goto done;
    conf_compare(cc, "dx", gdx, rdx, NULL, n, DX->dt, CONF_K_ROW(cols), CMP_NORM);
    conf_compare(cc, "dgamma", gdg, rdg, NULL, cols, AMPX_F32, (double)(rows + cols) + 16,
                 CMP_NORM);
    conf_compare(cc, "dbeta", gdb, rdb, NULL, cols, AMPX_F32, (double)rows + 16, CMP_NORM);
done:
    return;
}

typedef struct bn_cfg {
    uint64_t outer, channels, inner;
    int training, affine, acc;
    float momentum;
} bn_cfg;

static const bn_cfg bn_cfgs[] = {
    {2, 3, 5, 1, 1, 0, 0.1f},
    {4, 7, 1, 1, 0, 1, 0.1f},
    {3, 5, 13, 0, 1, 0, 0.1f},
    {8, 16, 31, 1, 1, 1, 0.01f},
    {1, 3, 1031, 1, 1, 0, 0.1f},
    {2, 3, 7, 0, 0, 1, 0.1f},
    /* large tier: several channels of N = 16496; one channel of N = 100005 */
    {16, 5, 1031, 1, 1, 1, 0.1f},
    {3, 1, 33335, 1, 0, 0, 0.1f},
};

void conf_case_batchnorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const bn_cfg *c = &bn_cfgs[variant];
    uint64_t C = c->channels, n = c->outer * C * c->inner, N = c->outer * c->inner;
    int tr = c->training;
    conf_shape(cc, "outer=%" PRIu64 " channels=%" PRIu64 " inner=%" PRIu64 " %s momentum=%g%s",
               c->outer, C, c->inner, tr ? "training" : "eval", (double)c->momentum,
               c->affine ? "" : " no gamma/beta");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y  = conf_tensor_new(cc, "y", dts[1], n, CT_OUT);
    conf_tensor *G  = c->affine ? conf_tensor_new(cc, "gamma", AMPX_F32, C, CT_IN) : NULL;
    conf_tensor *Bt = c->affine ? conf_tensor_new(cc, "beta", AMPX_F32, C, CT_IN) : NULL;
    conf_tensor *RM = conf_tensor_new(cc, "running_mean", AMPX_F32, C, tr ? CT_INOUT : CT_IN);
    conf_tensor *RV = conf_tensor_new(cc, "running_var", AMPX_F32, C, tr ? CT_INOUT : CT_IN);
    conf_tensor *M  = conf_tensor_new(cc, "mean", AMPX_F32, C, tr ? CT_OUT : CT_IN);
    conf_tensor *RS = conf_tensor_new(cc, "rstd", AMPX_F32, C, tr ? CT_OUT : CT_IN);
    double *ry = conf_alloc(cc, n * sizeof(double)), *rrm = conf_alloc(cc, C * sizeof(double));
    double *rrv = conf_alloc(cc, C * sizeof(double)), *rme = conf_alloc(cc, C * sizeof(double));
    double *rrs = conf_alloc(cc, C * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -1, 3);
    if (c->affine) {
        conf_tensor_fill(cc, G, 0.5, 1.5);
        conf_tensor_fill(cc, Bt, -0.5, 0.5);
    }
    conf_tensor_fill(cc, RM, -0.5, 0.5);
    conf_tensor_fill(cc, RV, 0.5, 2.0);
    if (!tr) { /* not written in eval mode: random contents that must survive */
        conf_tensor_fill(cc, M, -1, 1);
        conf_tensor_fill(cc, RS, 0.5, 1);
    }
    ampx_batchnorm_args a = {sizeof a,
                             (uint32_t)tr,
                             0,
                             c->outer,
                             C,
                             c->inner,
                             1e-5f,
                             c->momentum,
                             X->t,
                             G ? G->t : conf_null_tensor,
                             Bt ? Bt->t : conf_null_tensor,
                             RM->t,
                             RV->t,
                             M->t,
                             RS->t,
                             conf_null_tensor,
                             Y->t,
                             conf_null_tensor,
                             conf_null_tensor};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "batchnorm_fwd", call_batchnorm(r, AMPX_OP_BATCHNORM_FWD, &a)))
        goto done;
    memcpy(rrm, RM->v, C * sizeof(double));
    memcpy(rrv, RV->v, C * sizeof(double));
    ref_batchnorm_fwd(c->outer, C, c->inner, tr, 1e-5f, c->momentum, X->v, G ? G->v : NULL,
                      Bt ? Bt->v : NULL, rrm, rrv, rme, rrs, ry);
    double *gy = conf_values(cc, Y);
    if (!gy) goto done;
    conf_compare(cc, "y", gy, ry, NULL, n, Y->dt, (double)N + 16, CMP_NORM);
    if (tr) {
        double *gm = conf_values(cc, M), *gr = conf_values(cc, RS), *grm = conf_values(cc, RM);
        double *grv = conf_values(cc, RV);
        if (!conf_ok(cc)) goto done;
        conf_compare(cc, "mean", gm, rme, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
        conf_compare(cc, "rstd", gr, rrs, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM | CMP_ELEM);
        conf_compare(cc, "running_mean", grm, rrm, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
        conf_compare(cc, "running_var", grv, rrv, NULL, C, AMPX_F32, (double)N + 16,
                     CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

void conf_case_batchnorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const bn_cfg *c = &bn_cfgs[variant];
    uint64_t C = c->channels, n = c->outer * C * c->inner, N = c->outer * c->inner;
    conf_shape(cc, "outer=%" PRIu64 " channels=%" PRIu64 " inner=%" PRIu64 "%s", c->outer, C,
               c->inner, c->acc ? " accumulate" : "");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *DY = conf_tensor_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = conf_tensor_new(cc, "dx", dts[2], n, CT_OUT);
    conf_tensor *G  = conf_tensor_new(cc, "gamma", AMPX_F32, C, CT_IN);
    conf_tensor *M  = conf_tensor_new(cc, "mean", AMPX_F32, C, CT_IN);
    conf_tensor *RS = conf_tensor_new(cc, "rstd", AMPX_F32, C, CT_IN);
    conf_tensor *DG = conf_tensor_new(cc, "dgamma", AMPX_F32, C, c->acc ? CT_INOUT : CT_OUT);
    conf_tensor *DB = conf_tensor_new(cc, "dbeta", AMPX_F32, C, c->acc ? CT_INOUT : CT_OUT);
    double *tmp = conf_alloc(cc, n * sizeof(double)), *rdx = conf_alloc(cc, n * sizeof(double));
    double *rm = conf_alloc(cc, C * sizeof(double)), *rs = conf_alloc(cc, C * sizeof(double));
    double *rdg = conf_alloc(cc, C * sizeof(double)), *rdb = conf_alloc(cc, C * sizeof(double));
    double *run = conf_alloc(cc, 2 * C * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -1, 3);
    conf_tensor_fill(cc, DY, -1, 1);
    conf_tensor_fill(cc, G, 0.5, 1.5);
    ref_batchnorm_fwd(c->outer, C, c->inner, 1, 1e-5, 0.1, X->v, NULL, NULL, run, run + C, rm, rs,
                      tmp);
    for (uint64_t i = 0; i < C; i++) {
        conf_tensor_set(M, i, ref_round(AMPX_F32, rm[i]));
        conf_tensor_set(RS, i, ref_round(AMPX_F32, rs[i]));
    }
    if (c->acc) {
        conf_tensor_fill(cc, DG, -2, 2);
        conf_tensor_fill(cc, DB, -2, 2);
    }
    ampx_batchnorm_args a = {sizeof a,
                             1,
                             (uint32_t)c->acc,
                             c->outer,
                             C,
                             c->inner,
                             1e-5f,
                             0.1f,
                             X->t,
                             G->t,
                             conf_null_tensor,
                             conf_null_tensor,
                             conf_null_tensor,
                             M->t,
                             RS->t,
                             DY->t,
                             DX->t,
                             DG->t,
                             DB->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "batchnorm_bwd", call_batchnorm(r, AMPX_OP_BATCHNORM_BWD, &a)))
        goto done;
    memcpy(rdg, DG->v, C * sizeof(double));
    memcpy(rdb, DB->v, C * sizeof(double));
    ref_batchnorm_bwd(c->outer, C, c->inner, c->acc, X->v, G->v, M->v, RS->v, DY->v, rdx, rdg, rdb);
    double *gdx = conf_values(cc, DX), *gdg = conf_values(cc, DG), *gdb = conf_values(cc, DB);
    if (!conf_ok(cc)) goto done;
    conf_compare(cc, "dx", gdx, rdx, NULL, n, DX->dt, (double)N + 16, CMP_NORM);
    conf_compare(cc, "dgamma", gdg, rdg, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
    conf_compare(cc, "dbeta", gdb, rdb, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_layernorm_fwd = {conf_case_layernorm_fwd, 7, 3, NULL};
const conf_op_cases conf_op_layernorm_bwd = {conf_case_layernorm_bwd, 7, 3, NULL};
const conf_op_cases conf_op_batchnorm_fwd = {conf_case_batchnorm_fwd, 8, 4, NULL};
const conf_op_cases conf_op_batchnorm_bwd = {conf_case_batchnorm_bwd, 8, 3, NULL};
