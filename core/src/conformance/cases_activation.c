/* cases_activation.c — conformance cases of ACT_FWD and ACT_BWD. */
#include <inttypes.h>
#include <math.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_act, ampx_act_args)

// ---------------------------------------------------------------------------------------
// Activations. relu is exact; the transcendental ones are held to 16 f32 roundings of the
// terms' size (|x| enters because gelu's 1 + tanh cancels for negative x).

static const char *const act_names[] = {"relu", "gelu", "tanh", "sigmoid", "silu"};

/* Variants 0..4: each function at n = 1031; 5..9: each at n = 13 in place; then the large
 * tier: gelu at n = 100003, relu at n = 70001 in place. */
static void case_act(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant, int bwd) {
    uint32_t act = (uint32_t)variant % AMPX_ACT_COUNT;
    uint64_t n   = variant < AMPX_ACT_COUNT ? 1031 : 13;
    int want_inp = variant >= AMPX_ACT_COUNT;
    if (variant >= 2 * AMPX_ACT_COUNT) {
        int big  = variant == 2 * AMPX_ACT_COUNT;
        act      = big ? AMPX_ACT_GELU : AMPX_ACT_RELU;
        n        = big ? 100003 : 70001;
        want_inp = !big;
    }
    ampx_dtype ydt = bwd ? dts[2] : dts[1];
    int inp        = want_inp && (bwd ? dts[2] == dts[1] : dts[1] == dts[0]);
    conf_shape(cc, "%s n=%" PRIu64 "%s", act_names[act], n, inp ? " in place" : "");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, !bwd && inp ? CT_INOUT : CT_IN);
    conf_tensor *DY = bwd ? conf_tensor_new(cc, "dy", dts[1], n, inp ? CT_INOUT : CT_IN) : NULL;
    conf_tensor *Y  = inp ? (bwd ? DY : X) : conf_tensor_new(cc, bwd ? "dx" : "y", ydt, n, CT_OUT);
    double *ref = conf_alloc(cc, n * sizeof(double)), *mag = conf_alloc(cc, n * sizeof(double));
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -6, 6);
    if (n > 3) conf_tensor_set(X, 3, 0.0);
    if (bwd) conf_tensor_fill(cc, DY, -1, 1);
    ampx_act_args a = {sizeof a, act, n, X->t, bwd ? DY->t : conf_null_tensor, Y->t};
    if (conf_upload(cc)) goto done;
    if (conf_finish_call(cc, bwd ? "act_bwd" : "act_fwd",
                         call_act(r, bwd ? AMPX_OP_ACT_BWD : AMPX_OP_ACT_FWD, &a)))
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        double x = X->v[i];
        if (bwd) {
            double dy = DY->v[i];
            ref[i]    = dy * ref_act_deriv(act, x);
            mag[i]    = fabs(ref[i]) + fabs(dy) * (1.0 + fabs(x) + 0.1 * fabs(x * x * x) + 0x1p-6);
        } else {
            ref[i] = ref_act(act, x);
            mag[i] = fabs(ref[i]) + fabs(x) + 0x1p-6;
        }
        if (act == AMPX_ACT_RELU) ref[i] = ref_round(ydt, ref[i]); /* exact up to the store */
    }
    double *g = conf_values(cc, Y);
    if (!g) goto done;
    if (act == AMPX_ACT_RELU)
        conf_compare(cc, bwd ? "dx" : "y", g, ref, NULL, n, ydt, 0, CMP_EXACT);
    else
        conf_compare(cc, bwd ? "dx" : "y", g, ref, mag, n, ydt, 16, CMP_NORM | CMP_ELEM);
done:
    return;
}

void conf_case_act_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_act(r, cc, dts, variant, 0);
}

void conf_case_act_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_act(r, cc, dts, variant, 1);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_act_fwd = {conf_case_act_fwd, 12, 5, NULL};
const conf_op_cases conf_op_act_bwd = {conf_case_act_bwd, 12, 5, NULL};
