/* cases_elementwise.c — conformance cases of ADD, MUL, SCALE and BIAS_GRAD. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_add, ampx_add_args)
CONF_DEFINE_CALL(call_mul, ampx_mul_args)
CONF_DEFINE_CALL(call_scale, ampx_scale_args)
CONF_DEFINE_CALL(call_bias_grad, ampx_bias_grad_args)

// ---------------------------------------------------------------------------------------
// ADD, MUL, SCALE: elementwise in f32; row broadcast; in place on a or b.

/* Elementwise: got must equal one of two candidates (NaN matches NaN). */
static void expect_one_of(conf_case_ctx *cc, const char *what, const conf_tensor *ct,
                          const double *e1, const double *e2) {
    for (uint64_t i = 0; i < ct->n; i++) {
        double g = conf_tensor_get(ct, i);
        if (isnan(g) && (isnan(e1[i]) || isnan(e2[i]))) continue;
        if (g == e1[i] || g == e2[i]) continue;
        conf_fail(cc, "%s[%" PRIu64 "] = %.9g, expected exactly %.9g", what, i, g, e1[i]);
        return;
    }
}

typedef struct add_cfg {
    uint64_t rows, cols;
    int bcast, inplace; /* inplace: 1 y = a, 2 y = b */
    float alpha, beta;
} add_cfg;

static const add_cfg add_cfgs[] = {
    {1, 1, 0, 0, 1.0f, 1.0f},
    {7, 13, 0, 1, 0.5f, -2.0f},
    {31, 127, 1, 0, 1.0f, 1.0f},
    {64, 67, 0, 2, -1.0f, 0.25f},
    {13, 1031, 1, 1, 2.0f, 1.0f},
    {3, 5, 1, 0, 1.0f, -1.0f},
    /* large tier */
    {263, 401, 0, 2, 0.75f, -1.5f},
    {1031, 71, 1, 1, 1.0f, 0.5f},
};

static void case_add_mul(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                         int is_mul) {
    const add_cfg *c = &add_cfgs[variant];
    int inp          = c->inplace;
    if (inp == 1 && dts[2] != dts[0]) inp = 0;
    if (inp == 2 && (dts[2] != dts[1] || c->bcast)) inp = 0;
    uint64_t n = c->rows * c->cols, nb = c->bcast ? c->cols : n;
    if (is_mul)
        conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s", c->rows, c->cols,
                   c->bcast ? " broadcast" : "",
                   inp == 1   ? " y=a"
                   : inp == 2 ? " y=b"
                              : "");
    else
        conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " alpha=%g beta=%g%s%s", c->rows, c->cols,
                   (double)c->alpha, (double)c->beta, c->bcast ? " broadcast" : "",
                   inp == 1   ? " y=a"
                   : inp == 2 ? " y=b"
                              : "");
    conf_tensor *A = conf_tensor_new(cc, "a", dts[0], n, inp == 1 ? CT_INOUT : CT_IN);
    conf_tensor *B = conf_tensor_new(cc, "b", dts[1], nb, inp == 2 ? CT_INOUT : CT_IN);
    conf_tensor *Y = inp == 1 ? A : inp == 2 ? B : conf_tensor_new(cc, "y", dts[2], n, CT_OUT);
    double *ref = conf_alloc(cc, n * sizeof(double)), *mag = conf_alloc(cc, n * sizeof(double));
    double *alt = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, A, -2, 2);
    conf_tensor_fill(cc, B, -2, 2);
    if (conf_upload(cc)) goto done;
    if (is_mul) {
        ampx_mul_args a = {sizeof a, (uint32_t)c->bcast, c->rows, c->cols, A->t, B->t, Y->t};
        if (conf_finish_call(cc, "mul", call_mul(r, AMPX_OP_MUL, &a))) goto done;
        ref_mul(c->rows, c->cols, c->bcast, A->v, B->v, ref);
        /* one f32 product rounded to y (two roundings), or the exact product rounded once */
        for (uint64_t i = 0; i < n; i++) {
            alt[i] = ref_round(Y->dt, ref[i]);
            ref[i] = ref_round(Y->dt, ref_round(AMPX_F32, ref[i]));
        }
        expect_one_of(cc, "y", Y, ref, alt);
    } else {
        ampx_add_args a = {
            sizeof a, (uint32_t)c->bcast, c->rows, c->cols, c->alpha, c->beta, A->t, B->t, Y->t};
        if (conf_finish_call(cc, "add", call_add(r, AMPX_OP_ADD, &a))) goto done;
        ref_add(c->rows, c->cols, c->bcast, c->alpha, c->beta, A->v, B->v, ref, mag);
        double *g = conf_values(cc, Y);
        if (g) conf_compare(cc, "y", g, ref, mag, n, Y->dt, 3, CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

void conf_case_add(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_add_mul(r, cc, dts, variant, 0);
}

void conf_case_mul(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_add_mul(r, cc, dts, variant, 1);
}

void conf_case_scale(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t n;
        float alpha;
        int inplace;
    } cfgs[] = {
        {1, 1.0f, 0},           {7, 0.5f, 1},      {1031, -3.0f, 0},
        {4099, 1.0f / 3.0f, 1}, {127, 1e-3f, 0}, /* large tier */
        {150001, 0.1f, 1},      {70001, -2.5f, 0},
    };
    uint64_t n = cfgs[variant].n;
    float al   = cfgs[variant].alpha;
    int inp    = cfgs[variant].inplace && dts[0] == dts[1];
    conf_shape(cc, "n=%" PRIu64 " alpha=%.9g%s", n, (double)al, inp ? " in place" : "");
    conf_tensor *X = conf_tensor_new(cc, "x", dts[0], n, inp ? CT_INOUT : CT_IN);
    conf_tensor *Y = inp ? X : conf_tensor_new(cc, "y", dts[1], n, CT_OUT);
    double *ref = conf_alloc(cc, n * sizeof(double)), *alt = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -100, 100);
    ampx_scale_args a = {sizeof a, n, al, X->t, Y->t};
    if (conf_upload(cc) || conf_finish_call(cc, "scale", call_scale(r, AMPX_OP_SCALE, &a)))
        goto done;
    ref_scale(n, al, X->v, ref);
    for (uint64_t i = 0; i < n; i++) {
        alt[i] = ref_round(Y->dt, ref[i]);
        ref[i] = ref_round(Y->dt, ref_round(AMPX_F32, ref[i]));
    }
    expect_one_of(cc, "y", Y, ref, alt);
done:
    return;
}

void conf_case_bias_grad(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int acc;
    } cfgs[] = {
        {1, 1, 0},
        {7, 13, 1},
        {127, 31, 0},
        {1000, 3, 1},
        {31, 1031, 0},
        /* large tier: many rows and few columns; many rows and many column blocks */
        {40000, 3, 1},
        {257, 1031, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols;
    int acc = cfgs[variant].acc;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s", rows, cols, acc ? " accumulate" : "");
    conf_tensor *DY = conf_tensor_new(cc, "dy", dts[0], rows * cols, CT_IN);
    conf_tensor *DB = conf_tensor_new(cc, "db", dts[1], cols, acc ? CT_INOUT : CT_OUT);
    double *ref     = conf_alloc(cc, cols * sizeof(double)),
           *mag     = conf_alloc(cc, cols * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, DY, -1, 1);
    if (acc) conf_tensor_fill(cc, DB, -4, 4);
    ampx_bias_grad_args a = {sizeof a, (uint32_t)acc, rows, cols, DY->t, DB->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "bias_grad", call_bias_grad(r, AMPX_OP_BIAS_GRAD, &a)))
        goto done;
    memcpy(ref, DB->v, cols * sizeof(double));
    ref_bias_grad(rows, cols, acc, DY->v, ref, mag);
    double *g = conf_values(cc, DB);
    if (g) conf_compare(cc, "db", g, ref, mag, cols, DB->dt, (double)rows + 1, CMP_NORM | CMP_ELEM);
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_add       = {conf_case_add, 8, 3, NULL};
const conf_op_cases conf_op_mul       = {conf_case_mul, 8, 3, NULL};
const conf_op_cases conf_op_scale     = {conf_case_scale, 7, 3, NULL};
const conf_op_cases conf_op_bias_grad = {conf_case_bias_grad, 7, 3, NULL};
