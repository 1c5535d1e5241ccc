/* cases_reduce.c — conformance cases of REDUCE and SUM_SQUARES. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_reduce, ampx_reduce_args)
CONF_DEFINE_CALL(call_sum_squares, ampx_sum_squares_args)

// ---------------------------------------------------------------------------------------
// Reductions

/* Large reductions: the bound grows with K (4% of the terms' size at K = 165000), more than
 * a dropped tail chunk of a few thousand terms would move the result. A sentinel, the
 * smallest power of two s >= 4 tol_rel mag, placed last in the reduction makes losing it
 * alone exceed the bound (s > tol_rel (mag + s) for tol_rel < 3/4), while the rest of the
 * data stays typical. Powers of two are exact in every float dtype. */
static double conf_sentinel(double tol_rel, double mag) {
    return ldexp(1.0, (int)ceil(log2(4.0 * tol_rel * mag)));
}

void conf_case_reduce(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int mean;
    } cfgs[] = {
        {1, 1, 0},
        {7, 13, 1},
        {1, 4099, 0},
        {31, 127, 1},
        {100, 1031, 0},
        /* large tier: one long row; many short rows */
        {1, 200003, 0},
        {1500, 97, 1},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols;
    int mean = cfgs[variant].mean;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " %s", rows, cols, mean ? "mean" : "sum");
    conf_tensor *X = conf_tensor_new(cc, "x", dts[0], rows * cols, CT_IN);
    conf_tensor *Y = conf_tensor_new(cc, "y", dts[1], rows, CT_OUT);
    double *ref    = conf_alloc(cc, rows * sizeof(double)),
           *mag    = conf_alloc(cc, rows * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -1, 1.5);
    if (cols >= CONF_LARGE) /* each row's last term: a negative sentinel (keeps f16 sums finite) */
        for (uint64_t rr = 0; rr < rows; rr++) {
            double m = 0.0;
            for (uint64_t c = 0; c < cols; c++)
                m += fabs(X->v[rr * cols + c]);
            conf_tensor_set(X, rr * cols + cols - 1,
                            -conf_sentinel(conf_tol(AMPX_F32, (double)cols + 2), m));
        }
    ampx_reduce_args a = {sizeof a, mean ? AMPX_REDUCE_MEAN : AMPX_REDUCE_SUM, rows, cols, X->t,
                          Y->t};
    if (conf_upload(cc) || conf_finish_call(cc, "reduce", call_reduce(r, AMPX_OP_REDUCE, &a)))
        goto done;
    ref_reduce(rows, cols, mean, X->v, ref, mag);
    double *g = conf_values(cc, Y);
    if (g) conf_compare(cc, "y", g, ref, mag, rows, Y->dt, (double)cols + 2, CMP_NORM | CMP_ELEM);
done:
    return;
}

void conf_case_sum_squares(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint32_t count;
        uint64_t sizes[4];
        int acc, nonfinite, mixed;
    } cfgs[] = {
        {1, {1}, 0, 0, 0},
        {3, {7, 13, 31}, 1, 0, 0},
        {3, {1031, 4099, 1}, 0, 0, 0},
        {2, {127, 64}, 0, 1, 0},
        {4, {5, 6, 7, 8}, 1, 0, 1},
        /* large tier */
        {3, {100003, 1, 65537}, 1, 0, 0},
        {3, {70001, 100003, 5}, 0, 0, 1},
    };
    uint32_t count = cfgs[variant].count;
    int acc = cfgs[variant].acc, mixed = cfgs[variant].mixed && dts[0] != AMPX_I32 &&
                                         conf_all_floats_supported(r, AMPX_OP_SUM_SQUARES);
    conf_tensor *X[4] = {0};
    ampx_tensor tl[4];
    uint64_t ne[4], total = 0;
    char sizes[64] = "";
    for (uint32_t t = 0; t < count; t++) {
        size_t l = strlen(sizes);
        snprintf(sizes + l, sizeof sizes - l, "%s%" PRIu64, t ? "," : "", cfgs[variant].sizes[t]);
    }
    conf_shape(cc, "tensors=[%s]%s%s%s", sizes, acc ? " accumulate" : "",
               cfgs[variant].nonfinite ? " with inf" : "", mixed ? " mixed dtypes" : "");
    for (uint32_t t = 0; t < count; t++) {
        X[t] = conf_tensor_new(cc, "x[t]", mixed ? (ampx_dtype)(t % 3) : dts[0],
                               cfgs[variant].sizes[t], CT_IN);
        if (!X[t]) goto done;
        tl[t] = X[t]->t;
        ne[t] = X[t]->n;
        total += X[t]->n;
    }
    conf_tensor *OUT = conf_tensor_new(cc, "out", AMPX_F32, 1, acc ? CT_INOUT : CT_OUT);
    if (!conf_ok(cc)) goto done;
    double sq = 0.0;
    for (uint32_t t = 0; t < count; t++) {
        conf_tensor_fill(cc, X[t], -2, 2);
        sq += ref_sum_squares(X[t]->n, X[t]->v);
    }
    /* the last element of each long tensor: a power of two s with s^2 >= 16 tol_rel sq, so
     * that losing it alone exceeds the bound (4x over, shared by at most two sentinels) */
    double tol_sq = conf_tol(AMPX_F32, (double)total + 2);
    for (uint32_t t = 0; t < count; t++)
        if (X[t]->n >= CONF_LARGE)
            conf_tensor_set(X[t], X[t]->n - 1,
                            ldexp(1.0, (int)ceil(0.5 * log2(16.0 * tol_sq * sq))));
    if (cfgs[variant].nonfinite) conf_tensor_set(X[1], 17, INFINITY);
    if (acc) conf_tensor_set(OUT, 0, 3.5);
    ampx_sum_squares_args a = {sizeof a, (uint32_t)acc, {count, tl, ne}, OUT->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "sum_squares", call_sum_squares(r, AMPX_OP_SUM_SQUARES, &a)))
        goto done;
    double ref = acc ? OUT->v[0] : 0.0, got = conf_tensor_get(OUT, 0);
    for (uint32_t t = 0; t < count; t++)
        ref += ref_sum_squares(X[t]->n, X[t]->v);
    if (cfgs[variant].nonfinite) {
        if (isfinite(got)) conf_fail(cc, "out = %.9g with an inf input, expected non-finite", got);
        goto done;
    }
    conf_compare(cc, "out", &got, &ref, NULL, 1, AMPX_F32, (double)total + 2, CMP_NORM | CMP_ELEM);
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_reduce      = {conf_case_reduce, 7, 3, NULL};
const conf_op_cases conf_op_sum_squares = {conf_case_sum_squares, 7, 5, NULL};
