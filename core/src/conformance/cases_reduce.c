/* cases_reduce.c — conformance cases of REDUCE, SUM_SQUARES and ABS_MAX. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_reduce, ampx_reduce_args)
CONF_DEFINE_CALL(call_sum_squares, ampx_sum_squares_args)
CONF_DEFINE_CALL(call_abs_max, ampx_abs_max_args)

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

/* A signalling NaN's bits in dtype dt (quiet bit clear, payload 1). */
static uint32_t snan_bits(ampx_dtype dt) {
    return dt == AMPX_F32 ? 0x7f800001u : dt == AMPX_BF16 ? 0x7f81u : 0x7c01u;
}

/* ABS_MAX: each tensor's out exactly its reference (the largest |x| as stored; a NaN out
 * the quiet 0x7FC00000, which the poisoned out is not); the largest placed first, in the
 * middle or in the last element, negative or positive, and tensors of zeros and of
 * subnormals, a NaN in a vector loop's scalar tail, a tensor of no elements and a list of
 * 40 tensors (more than one launch's worth on the cuda backend). */
void conf_case_abs_max(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    enum { AM_PLAIN, AM_INF, AM_NAN_INF, AM_SNAN, AM_TINY, AM_TAIL, AM_MANY };
    enum { MAX_T = 40 };
    static const struct {
        uint32_t count;
        uint64_t sizes[4];
        int special, mixed;
    } cfgs[] = {
        {1, {1}, AM_PLAIN, 0},
        {3, {7, 13, 31}, AM_PLAIN, 0},
        {3, {1031, 4099, 33}, AM_INF, 0},
        {2, {127, 64}, AM_NAN_INF, 0},
        {4, {5, 6, 7, 8}, AM_TINY, 1},
        {2, {65, 3}, AM_SNAN, 0},
        {3, {67, 9, 11}, AM_TAIL, 0},
        {MAX_T, {0}, AM_MANY, 1},
        /* large tier */
        {3, {100003, 1, 65537}, AM_PLAIN, 0},
        {3, {70001, 100003, 5}, AM_NAN_INF, 1},
    };
    uint32_t count = cfgs[variant].count;
    int special    = cfgs[variant].special,
        mixed      = cfgs[variant].mixed && conf_all_floats_supported(r, AMPX_OP_ABS_MAX);
    static const char *const what[] = {"",
                                       " with inf",
                                       " with NaN and inf",
                                       " with a sNaN",
                                       " zeros and subnormals",
                                       " a NaN last, an empty tensor",
                                       ""};
    conf_tensor *X[MAX_T]           = {0};
    ampx_tensor tl[MAX_T];
    uint64_t ne[MAX_T];
    char sizes[64] = "";
    for (uint32_t t = 0; t < count && special != AM_MANY; t++) {
        size_t l = strlen(sizes);
        snprintf(sizes + l, sizeof sizes - l, "%s%" PRIu64, t ? "," : "", cfgs[variant].sizes[t]);
    }
    if (special == AM_MANY) snprintf(sizes, sizeof sizes, "%u tensors of 1..97", count);
    conf_shape(cc, "tensors=[%s]%s%s", sizes, what[special], mixed ? " mixed dtypes" : "");
    for (uint32_t t = 0; t < count; t++) {
        uint64_t n = special == AM_MANY ? 1 + (t * 37) % 97 : cfgs[variant].sizes[t];
        X[t]       = conf_tensor_new(cc, "x[t]", mixed ? (ampx_dtype)(t % 3) : dts[0], n, CT_IN);
        if (!X[t]) goto done;
        tl[t] = X[t]->t;
        ne[t] = X[t]->n;
    }
    conf_tensor *OUT = conf_tensor_new(cc, "out", AMPX_F32, count, CT_OUT);
    if (!conf_ok(cc)) goto done;
    for (uint32_t t = 0; t < count; t++) {
        uint64_t n = X[t]->n;
        conf_tensor_fill(cc, X[t], -2, 2);
        /* the largest magnitude: last (the tail), first or in the middle, either sign */
        conf_tensor_set(X[t], t % 3 == 0 ? n - 1 : t % 3 == 1 ? 0 : n / 2, t % 2 ? -3.5 : 3.25);
    }
    if (special == AM_INF)
        conf_tensor_set(X[1], 17, -INFINITY), conf_tensor_set(X[2], 32, INFINITY);
    if (special == AM_NAN_INF) {
        conf_tensor_set(X[0], 5, INFINITY);
        conf_tensor_set(X[1], X[1]->n - 1, NAN);
        conf_tensor_set(X[1], 3, -INFINITY);
    }
    if (special == AM_SNAN) conf_tensor_set_bits(X[0], 40, snan_bits(X[0]->dt));
    if (special == AM_TAIL) { /* 67 = 64 + 3: the NaN past every vector width's loop */
        conf_tensor_set(X[0], 66, NAN);
        ne[2] = 0; /* a tensor of no elements: 0 */
    }
    if (special == AM_MANY) conf_tensor_set(X[37], X[37]->n / 2, -INFINITY);
    if (special == AM_TINY) {
        for (uint64_t i = 0; i < X[0]->n; i++)
            conf_tensor_set(X[0], i, i % 2 ? -0.0 : 0.0);
        int e = X[1]->dt == AMPX_F16 ? -24 : -130; /* subnormals of the tensor's dtype */
        for (uint64_t i = 0; i < X[1]->n; i++)
            conf_tensor_set(X[1], i, ldexp(i % 2 ? -(double)(i + 1) : (double)(i + 1), e));
    }
    ampx_abs_max_args a = {sizeof a, {count, tl, ne}, OUT->t};
    if (conf_upload(cc) || conf_finish_call(cc, "abs_max", call_abs_max(r, AMPX_OP_ABS_MAX, &a)))
        goto done;
    for (uint32_t t = 0; t < count; t++) {
        double ref = ref_abs_max(ne[t], X[t]->v), got = conf_tensor_get(OUT, t);
        uint32_t bits = conf_tensor_bits(OUT, OUT->back, t);
        if (special == AM_SNAN && t == 0) ref = NAN;
        if (isnan(ref) ? bits != 0x7fc00000u : got != ref) {
            conf_fail(cc, "out[%u] = %.9g (bits 0x%08x), expected %.9g%s", t, got, bits, ref,
                      isnan(ref) ? " (the quiet NaN 0x7fc00000)" : "");
            break;
        }
    }
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_reduce      = {conf_case_reduce, 7, 3, NULL};
const conf_op_cases conf_op_sum_squares = {conf_case_sum_squares, 7, 5, NULL};
const conf_op_cases conf_op_abs_max     = {conf_case_abs_max, 10, 8, NULL};
