/* cases_softmax.c — conformance cases of SOFTMAX_FWD, SOFTMAX_BWD and SOFTMAX_XENT. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_softmax, ampx_softmax_args)
CONF_DEFINE_CALL(call_xent, ampx_softmax_xent_args)

// ---------------------------------------------------------------------------------------
// Softmax forward/backward and fused cross-entropy

typedef struct softmax_cfg {
    uint64_t rows, cols;
    int causal;
    uint64_t seq_q;
    int log_;
    float scale;
} softmax_cfg;

static const softmax_cfg softmax_cfgs[] = {
    {1, 1, 0, 0, 0, 1.0f},
    {7, 13, 0, 0, 1, 1.0f},
    {12, 31, 1, 4, 0, 0.125f},
    {32, 16, 1, 16, 1, 1.0f},
    {33, 127, 0, 0, 0, 1.0f},
    {4, 1031, 0, 0, 1, 0.5f},
    {5, 64, 1, 5, 0, 1.0f},
    /* large tier */
    {300, 257, 1, 100, 0, 0.125f},
    {257, 1031, 0, 0, 1, 0.5f},
};

void conf_case_softmax_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const softmax_cfg *c = &softmax_cfgs[variant];
    uint64_t n           = c->rows * c->cols;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s scale=%g", c->rows, c->cols,
               c->log_ ? " log" : "", c->causal ? " causal" : "", (double)c->scale);
    if (c->causal) {
        size_t l = strlen(cc->rep.shape);
        snprintf(cc->rep.shape + l, sizeof cc->rep.shape - l, " seq_q=%" PRIu64, c->seq_q);
    }
    conf_tensor *X = conf_tensor_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y = conf_tensor_new(cc, "y", dts[1], n, CT_OUT);
    double *ref = conf_alloc(cc, n * sizeof(double)), *mag = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -8, 8);
    ampx_softmax_args a = {sizeof a,          (uint32_t)c->causal,
                           (uint32_t)c->log_, c->rows,
                           c->cols,           c->seq_q,
                           c->scale,          X->t,
                           conf_null_tensor,  Y->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "softmax_fwd", call_softmax(r, AMPX_OP_SOFTMAX_FWD, &a)))
        goto done;
    ref_softmax_fwd(c->rows, c->cols, c->causal, c->seq_q, c->log_, c->scale, X->v, ref);
    /* exp(z - max) is off by |z - max| f32 roundings of its argument; log-softmax adds the
     * absolute error of max and log(sum). */
    for (uint64_t rr = 0; rr < c->rows; rr++) {
        double amax = 0.0;
        for (uint64_t j = 0; j < c->cols; j++)
            amax = fmax(amax, fabs(c->scale * X->v[rr * c->cols + j]));
        for (uint64_t j = 0; j < c->cols; j++) {
            uint64_t i = rr * c->cols + j;
            mag[i]     = c->log_ ? fabs(ref[i]) + 2.0 * amax + log((double)c->cols) + 1.0
                                 : fabs(ref[i]) * (1.0 + 2.0 * amax);
        }
    }
    double *g = conf_values(cc, Y);
    if (g) conf_compare(cc, "y", g, ref, mag, n, Y->dt, CONF_K_ROW(c->cols), CMP_NORM | CMP_ELEM);
done:
    return;
}

void conf_case_softmax_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int log_, causal;
        uint64_t seq_q;
        float scale;
    } cfgs[] = {
        {1, 1, 0, 0, 0, 1.0f},
        {7, 13, 1, 0, 0, 1.0f},
        {33, 127, 0, 0, 0, 0.125f},
        {4, 1031, 1, 0, 0, 1.0f},
        {12, 31, 0, 1, 4, 1.0f},
        {9, 20, 1, 1, 6, 0.5f}, /* causal log-softmax: masked dy must not leak */
        /* large tier */
        {300, 257, 0, 1, 100, 1.0f},
        {97, 1031, 1, 0, 0, 0.5f},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int log_ = cfgs[variant].log_, causal = cfgs[variant].causal;
    float scale    = cfgs[variant].scale;
    uint64_t seq_q = cfgs[variant].seq_q;
    conf_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s scale=%g", rows, cols, log_ ? " log" : "",
               causal ? " causal" : "", (double)scale);
    conf_tensor *Y  = conf_tensor_new(cc, "y", dts[0], n, CT_IN);
    conf_tensor *DY = conf_tensor_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = conf_tensor_new(cc, "dx", dts[2], n, CT_OUT);
    double *tmp = conf_alloc(cc, n * sizeof(double)), *ref = conf_alloc(cc, n * sizeof(double));
    double *mag = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    /* y is a real forward output (rounded to its dtype), as the backward always sees. */
    for (uint64_t i = 0; i < n; i++)
        tmp[i] = conf_uniform(&cc->rng, -4, 4);
    ref_softmax_fwd(rows, cols, causal, seq_q, log_, 1.0, tmp, ref);
    for (uint64_t i = 0; i < n; i++)
        conf_tensor_set(Y, i, ref_round(Y->dt, ref[i]));
    conf_tensor_fill(cc, DY, -1,
                     1); /* dy is non-zero at masked positions too: it must be ignored */
    ampx_softmax_args a = {
        sizeof a, (uint32_t)causal, (uint32_t)log_, rows, cols, seq_q, scale, Y->t, DY->t, DX->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "softmax_bwd", call_softmax(r, AMPX_OP_SOFTMAX_BWD, &a)))
        goto done;
    ref_softmax_bwd(rows, cols, causal, seq_q, log_, scale, Y->v, DY->v, ref);
    for (uint64_t rr = 0; rr < rows; rr++) {
        double s = 0.0;
        for (uint64_t j = 0; j < cols; j++) {
            uint64_t i = rr * cols + j;
            s += log_ ? fabs(DY->v[i]) : fabs(DY->v[i] * Y->v[i]);
        }
        for (uint64_t j = 0; j < cols; j++) {
            uint64_t i = rr * cols + j;
            int masked = causal && j > (rr % seq_q) + (cols - seq_q); /* dx must be 0 */
            mag[i]     = masked ? 0.0
                         : log_ ? fabs(scale) * (fabs(DY->v[i]) + exp(Y->v[i]) * s * 2.0)
                                : fabs(scale) * fabs(Y->v[i]) * (fabs(DY->v[i]) + s);
        }
    }
    double *g = conf_values(cc, DX);
    if (g) conf_compare(cc, "dx", g, ref, mag, n, DX->dt, CONF_K_ROW(cols), CMP_NORM | CMP_ELEM);
done:
    return;
}

void conf_case_xent(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols, n_ignore;
        int32_t ignore_index;
        float loss_scale; /* 0: no scalars block */
        float grad_scale;
        int with_dlogits, special; /* special 1: all ignored, 2: a label out of range */
    } cfgs[] = {
        {1, 1, 0, -100, 0, 1.0f, 1, 0},
        {7, 13, 2, -100, 0, 1.0f, 1, 0},
        {33, 127, 5, -100, 1024, 1.0f, 1, 0},
        {5, 1031, 1, -100, 0, 0.5f, 0, 0},
        {4, 9, 4, -100, 0, 1.0f, 1, 1},
        {6, 10, 1, -100, 0, 1.0f, 1, 2},
        {64, 67, 3, 3, 65536, 1.0f, 1, 0},
        /* large tier */
        {300, 1031, 7, -100, 1024, 1.0f, 1, 0},
        {2000, 67, 40, 5, 4096, 0.25f, 1, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int32_t ign = cfgs[variant].ignore_index;
    int special = cfgs[variant].special, with_d = cfgs[variant].with_dlogits;
    float lscale = cfgs[variant].loss_scale;
    conf_shape(cc,
               "rows=%" PRIu64 " cols=%" PRIu64 " ignored=%" PRIu64
               " ignore_index=%d grad_scale=%g%s%s%s",
               rows, cols, cfgs[variant].n_ignore, ign, (double)cfgs[variant].grad_scale,
               lscale != 0 ? " loss-scaled" : "", with_d ? "" : " loss only",
               special == 2 ? " bad label" : "");
    conf_tensor *X   = conf_tensor_new(cc, "logits", dts[0], n, CT_IN);
    conf_tensor *L   = conf_tensor_new(cc, "labels", AMPX_I32, rows, CT_IN);
    conf_tensor *OUT = conf_tensor_new(cc, "loss", AMPX_F32, 1, CT_OUT);
    conf_tensor *D   = with_d ? conf_tensor_new(cc, "dlogits", dts[1], n, CT_OUT) : NULL;
    conf_tensor *S   = lscale != 0 ? conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_IN) : NULL;
    int32_t *labels  = conf_alloc(cc, rows * sizeof(int32_t));
    double *ref      = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -4, 4);
    for (uint64_t i = 0; i < rows; i++) {
        labels[i] = (int32_t)(conf_next(&cc->rng) % cols);
        if (ign >= 0 && labels[i] == ign) labels[i] = (ign + 1) % (int32_t)cols;
    }
    if (cols > 1) labels[0] = (int32_t)cols - 1;
    for (uint64_t i = 0; i < cfgs[variant].n_ignore && i < rows; i++)
        labels[rows - 1 - 2 * i % rows] = ign;
    if (special == 1)
        for (uint64_t i = 0; i < rows; i++)
            labels[i] = ign;
    if (special == 2) labels[rows / 2] = (int32_t)cols;
    for (uint64_t i = 0; i < rows; i++)
        conf_tensor_set(L, i, labels[i]);
    if (S) {
        ampx_scalars s = {0};
        s.scale        = lscale;
        s.mode         = AMPX_SCALER_DYNAMIC;
        for (uint64_t i = 0; i < 32; i++) {
            int32_t w;
            memcpy(&w, (const char *)&s + 4 * i, 4);
            conf_tensor_set_bits(S, i, (uint32_t)w);
        }
    }
    ampx_softmax_xent_args a = {sizeof a,
                                ign,
                                rows,
                                cols,
                                cfgs[variant].grad_scale,
                                X->t,
                                L->t,
                                OUT->t,
                                D ? D->t : conf_null_tensor,
                                S ? S->t : conf_null_tensor};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "softmax_xent", call_xent(r, AMPX_OP_SOFTMAX_XENT, &a)))
        goto done;
    double loss;
    int64_t nv      = ref_softmax_xent(rows, cols, labels, ign, cfgs[variant].grad_scale,
                                  lscale != 0 ? lscale : 1.0, X->v, &loss, ref);
    double got_loss = conf_tensor_get(OUT, 0);
    if (nv < 0) {
        if (!isnan(got_loss))
            conf_fail(cc, "loss = %.9g for an out-of-range label, expected NaN", got_loss);
        goto done;
    }
    /* per-row terms lse - x[label] are >= 0; their absolute error scales with the row's
     * largest |logit| (4) and log(cols) */
    double lmag = fabs(loss) + 4.0 + log((double)cols);
    conf_compare(cc, "loss", &got_loss, &loss, &lmag, 1, AMPX_F32, (double)(cols + rows) + 16,
                 nv == 0 ? CMP_EXACT : CMP_ELEM);
    if (D) {
        double *g = conf_values(cc, D);
        if (!g) goto done;
        for (uint64_t rr = 0; rr < rows; rr++)
            if (labels[rr] == ign)
                for (uint64_t j = 0; j < cols; j++)
                    if (g[rr * cols + j] != 0.0) {
                        conf_fail(cc, "dlogits[%" PRIu64 ",%" PRIu64 "] = %.9g in an ignored row",
                                  rr, j, g[rr * cols + j]);
                        goto done;
                    }
        conf_compare(cc, "dlogits", g, ref, NULL, n, D->dt, CONF_K_ROW(cols),
                     nv == 0 ? CMP_EXACT : CMP_NORM);
    }
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_softmax_fwd  = {conf_case_softmax_fwd, 9, 4, NULL};
const conf_op_cases conf_op_softmax_bwd  = {conf_case_softmax_bwd, 8, 3, NULL};
const conf_op_cases conf_op_softmax_xent = {conf_case_xent, 9, 5, NULL};
