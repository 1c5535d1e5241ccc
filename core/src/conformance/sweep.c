/* sweep.c — ampx_conformance_run: every (op, dtypes) a backend supports, checked
 * against the double-precision reference in reference.c; the cases are in cases_*.c, built
 * from harness.c's helpers.
 *
 * For each op the sweep enumerates every dtype combination its heading in backend.h allows
 * and asks supports(). A rejected combination is reported UNSUPPORTED after checking that
 * calling the op anyway returns an error. An accepted one runs over several awkward shapes
 * (1, primes, sizes off every power-of-two block, one long reduction) on seeded random data,
 * and in the full sweep over a large tier too: the last variants of each table, past the
 * sizes where backends change code paths (> 65536 elements, several GEMM tiles and chunks):
 *   - every tensor lives in its own buffer between guard bytes, at a byte offset that is
 *     sometimes 0 and usually not; guards must come back unchanged;
 *   - outputs are poisoned with a NaN pattern first, so an element the op forgets shows;
 *     outputs that accumulate start from random values the reference starts from too;
 *   - inputs must come back bitwise unchanged (except where the op works in place);
 *   - results are compared with the reference computed in double from the same rounded
 *     inputs, normwise and elementwise, against the tolerance table (harness.h); exact ops
 *     (casts, unscale, the scaler, counts, copies) are compared bit for bit.
 * Every case owns its host and device memory through one conf_case_ctx and releases it in
 * conf_case_end on every path, so a failing op only records a failed case.
 */
#include "conformance/harness.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// The sweep

typedef struct conf_op_desc {
    uint32_t op;
    uint32_t n_dtypes; /* floating dtype slots of the heading: 3^n combinations */
    uint32_t f32;      /* bit i: slot i is f32 only (AMPX_OPS) */
    const conf_op_cases *cases;
} conf_op_desc;

#define CONF_OP(index, slot, OP, args, n_dtypes, f32)                                              \
    {AMPX_OP_##OP, n_dtypes, f32, &conf_op_##slot},
static const conf_op_desc conf_ops[] = {AMPX_OPS(CONF_OP)};
#undef CONF_OP

_Static_assert(sizeof conf_ops / sizeof conf_ops[0] == AMPX_OP_COUNT,
               "the conformance suite must cover every op of the ABI");

static void conf_prefix_shape(conf_case_ctx *cc, const char *prefix) {
    char tmp[sizeof cc->rep.shape];
    size_t lp = strlen(prefix), ls = strlen(cc->rep.shape);
    if (lp >= sizeof tmp) return;
    if (ls > sizeof tmp - 1 - lp) ls = sizeof tmp - 1 - lp;
    memcpy(tmp, prefix, lp);
    memcpy(tmp + lp, cc->rep.shape, ls);
    tmp[lp + ls] = '\0';
    memcpy(cc->rep.shape, tmp, sizeof tmp);
}

/* Dtypes outside the heading (i32 where a float belongs; dtable other than f32): supports()
 * must say no, and calling the op anyway must return an error, not crash. */
static void conf_probe_invalid(conf_run *r, const conf_op_desc *d, const ampx_dtype *dts) {
    conf_case_ctx cc;
    conf_case_begin(r, &cc, d->op, dts, d->n_dtypes, 0, 2);
    if (ampx_backend_supports(r->be, d->op, dts, d->n_dtypes)) {
        conf_shape(&cc, "invalid dtypes");
        conf_fail(&cc, "supports() accepts dtypes the ABI does not allow for this op");
    } else {
        d->cases->fn(r, &cc, dts, 0);
        conf_prefix_shape(&cc, "invalid dtypes: ");
    }
    conf_case_end(&cc);
}

/* The slots the op fixes to f32 hold f32. */
static int conf_f32_slots_ok(const conf_op_desc *d, const ampx_dtype *dts) {
    for (uint32_t i = 0; i < d->n_dtypes; i++)
        if ((d->f32 >> i & 1) && dts[i] != AMPX_F32) return 0;
    return 1;
}

/* The fp8 ops (ABI 1.7) take e4m3 and e5m2 where their headings say: FP8_QUANTIZE exactly
 * one side, GEMM_FP8 A and B. 1 when dts (over all five float and fp8 dtypes) is such a
 * combination; every other op's combinations are the three float dtypes'. */
static int conf_fp8_op(uint32_t op) {
    return op == AMPX_OP_FP8_QUANTIZE || op == AMPX_OP_GEMM_FP8;
}

static int conf_fp8_combo_ok(uint32_t op, const ampx_dtype *dts) {
    int f0 = dts[0] >= AMPX_E4M3, f1 = dts[1] >= AMPX_E4M3;
    if (op == AMPX_OP_FP8_QUANTIZE) return f0 != f1;
    return f0 && f1 && dts[2] < AMPX_I32;
}

static void conf_sweep_op(conf_run *r, const conf_op_desc *d) {
    uint32_t nd = d->n_dtypes, combos = 1, radix = conf_fp8_op(d->op) ? 5 : 3;
    /* the op counts as run when a supported combination ran: a backend that supports nothing
     * of it passes only the probes, which is not passing the op */
    uint32_t run_cases = 0, failed0 = r->sum->failed;
    for (uint32_t i = 0; i < nd; i++)
        combos *= radix;
    for (uint32_t c = 0; c < combos; c++) {
        ampx_dtype dts[4] = {AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32}; /* ATTN_BWD has 4 */
        for (uint32_t i = 0, q = c; i < nd; i++, q /= radix) {
            uint32_t k      = q % radix; /* f32, bf16, f16, then e4m3, e5m2 */
            dts[nd - 1 - i] = (ampx_dtype)(k < 3 ? k : AMPX_E4M3 + (k - 3));
        }
        if (!conf_f32_slots_ok(d, dts)) continue; /* e.g. EMBEDDING_BWD's dtable */
        if (radix == 5 && !conf_fp8_combo_ok(d->op, dts)) continue;
        conf_case_ctx cc;
        if (!ampx_backend_supports(r->be, d->op, dts, nd)) {
            /* not a failure, but calling it anyway must fail cleanly */
            conf_case_begin(r, &cc, d->op, dts, nd, 0, 1);
            d->cases->fn(r, &cc, dts, 0);
            conf_case_end(&cc);
            continue;
        }
        int nv = r->quick ? d->cases->n_quick : d->cases->n_full;
        for (int v = 0; v < nv && r->fatal == AMPX_OK; v++) {
            if (d->cases->runs && !d->cases->runs(dts, v)) continue;
            conf_case_begin(r, &cc, d->op, dts, nd, v, 0);
            d->cases->fn(r, &cc, dts, v);
            conf_case_end(&cc);
            run_cases++;
        }
        if (r->fatal != AMPX_OK) return;
    }
    if (nd > 0) {
        ampx_dtype bad[4] = {AMPX_I32, AMPX_F32, AMPX_F32, AMPX_F32};
        conf_probe_invalid(r, d, bad);
    }
    if (radix == 5) { /* the fp8 ops without an fp8 operand */
        ampx_dtype bad[4] = {AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32};
        conf_probe_invalid(r, d, bad);
    }
    for (uint32_t i = 0; i < nd; i++) /* a slot that must be f32 given bf16 */
        if (d->f32 >> i & 1) {
            ampx_dtype bad[4] = {AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32};
            bad[i]            = AMPX_BF16;
            conf_probe_invalid(r, d, bad);
        }
    if (run_cases > 0) {
        r->sum->ops_run++;
        if (r->sum->failed == failed0) r->sum->ops_passing++;
    }
}

// ---------------------------------------------------------------------------------------
// The minimum set: what models/mlp.json needs with the f32 policy (its graph rules' ops and
// the step's), each in f32. A backend that lacks one cannot train the smallest model, so it
// does not pass conformance, however well it does the rest. docs/CONFORMANCE.md lists it.

static const struct {
    uint32_t op, n;
} conf_minimum[] = {
    {AMPX_OP_GEMM, 3},          /* dense: matmul and its two backward GEMMs */
    {AMPX_OP_ADD, 3},           /* dense: the bias */
    {AMPX_OP_BIAS_GRAD, 2},     /* dense: the bias gradient */
    {AMPX_OP_ACT_FWD, 2},       /* the relu */
    {AMPX_OP_ACT_BWD, 3},       /* and its gradient */
    {AMPX_OP_SOFTMAX_XENT, 2},  /* the loss */
    {AMPX_OP_UNSCALE_CHECK, 1}, /* the step: unscale and check */
    {AMPX_OP_SUM_SQUARES, 1},   /* gradient norm (clip_grad_norm, metrics) */
    {AMPX_OP_SCALER_UPDATE, 0}, /* the scaler */
    {AMPX_OP_ADAMW, 1},         /* the optimizer */
};

static void conf_check_minimum(conf_run *r) {
    static const ampx_dtype f32[3] = {AMPX_F32, AMPX_F32, AMPX_F32};
    ampx_conf_summary *s           = r->sum;
    for (size_t i = 0; i < sizeof conf_minimum / sizeof conf_minimum[0]; i++) {
        if (ampx_backend_supports(r->be, conf_minimum[i].op, f32, conf_minimum[i].n)) continue;
        size_t used = strlen(s->missing);
        snprintf(s->missing + used, sizeof s->missing - used, "%s%s",
                 s->required_missing ? ", " : "", ampx_op_name(conf_minimum[i].op));
        s->required_missing++;
    }
}

AMPX_API int ampx_conformance_passed(ampx_status run_status, const ampx_conf_summary *s,
                                     int all_ops) {
    return run_status == AMPX_OK && s && s->failed == 0 && s->ops_passing > 0 &&
           s->ops_passing == s->ops_run && (!all_ops || s->required_missing == 0);
}

// ---------------------------------------------------------------------------------------
// Entry point

#define CONF_DEFAULT_SEED 0x616d7078u /* "ampx" */

AMPX_API ampx_status ampx_conformance_run(ampx_backend *be, const ampx_conf_options *opt,
                                          ampx_conf_report_fn report, void *user,
                                          ampx_conf_summary *summary) {
    ampx_conf_summary local;
    if (!summary) summary = &local;
    memset(summary, 0, sizeof *summary);
    if (!be) return AMPX_ERR_INVALID;
    conf_run r   = {0};
    r.be         = be;
    r.ifc        = ampx_backend_iface_of(be);
    r.ctx        = ampx_backend_context(be);
    r.seed       = opt && opt->seed ? opt->seed : CONF_DEFAULT_SEED;
    r.quick      = opt ? opt->quick : 0;
    r.report     = report;
    r.user       = user;
    r.sum        = summary;
    int32_t only = opt ? opt->op : -1;
    if (only < -1 || only >= (int32_t)AMPX_OP_COUNT) return AMPX_ERR_INVALID;
    if (!r.ifc || !r.ctx || !r.ifc->buffer_alloc || !r.ifc->buffer_free || !r.ifc->buffer_write ||
        !r.ifc->buffer_read || !r.ifc->synchronize)
        return AMPX_ERR_INVALID;
    for (size_t i = 0; i < sizeof conf_ops / sizeof conf_ops[0] && r.fatal == AMPX_OK; i++)
        if (only < 0 || (uint32_t)only == conf_ops[i].op) conf_sweep_op(&r, &conf_ops[i]);
    if (only < 0) conf_check_minimum(&r);
    return r.fatal;
}
