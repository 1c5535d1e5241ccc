/* test_conformance.c — the conformance suite under Criterion, one test per op.
 *
 * Each test opens every backend named in AMPX_CONFORMANCE_BACKENDS (comma-separated, default
 * "cpu"; a name or a path to a plugin), runs ampx_conformance_run for its op only, logs
 * every failing case, and requires no failure and at least one pass. AMPX_CONFORMANCE_QUICK=1
 * runs the smaller sweep; AMPX_CONFORMANCE_SEED overrides the data seed.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"

// ---------------------------------------------------------------------------------------
// Reporting

typedef struct conf_log {
    const char *backend;
    unsigned n_logged;
} conf_log;

static void conf_report(void *user, const ampx_conf_case *c) {
    conf_log *log = user;
    if (c->verdict != AMPX_CONF_FAIL) return;
    if (log->n_logged++ >= 50) return; /* enough to diagnose; the count says the rest */
    char dts[64] = "";
    for (uint32_t i = 0; i < c->n_dtypes && i < 4; i++) {
        size_t l = strlen(dts);
        snprintf(dts + l, sizeof dts - l, "%s%s", i ? "," : "", ampx_dtype_name(c->dtypes[i]));
    }
    cr_log_error("%s: %s [%s] case %d, %s: %s (%s error %.3g, tolerance %.3g)", log->backend,
                 ampx_op_name(c->op), dts, c->index, c->shape, c->message,
                 c->measure[0] ? c->measure : "no", c->err, c->tol);
}

// ---------------------------------------------------------------------------------------
// One op against every configured backend

static void conf_check_op(uint32_t op) {
    const char *env = getenv("AMPX_CONFORMANCE_BACKENDS");
    char list[1024];
    snprintf(list, sizeof list, "%s", env && *env ? env : "cpu");
    int quick = getenv("AMPX_CONFORMANCE_QUICK") && atoi(getenv("AMPX_CONFORMANCE_QUICK")) != 0;
    uint64_t seed =
        getenv("AMPX_CONFORMANCE_SEED") ? strtoull(getenv("AMPX_CONFORMANCE_SEED"), NULL, 0) : 0;
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        ampx_backend *be = NULL;
        char err[512];
        ampx_status st = ampx_backend_open(name, NULL, 0, &be, err, sizeof err);
        cr_assert_eq(st, AMPX_OK, "cannot open backend %s: %s", name, err);
        ampx_conf_options opt = {seed, (int32_t)op, quick};
        ampx_conf_summary sum = {0};
        conf_log log          = {name, 0};
        st                    = ampx_conformance_run(be, &opt, conf_report, &log, &sum);
        ampx_backend_close(be);
        cr_assert_eq(st, AMPX_OK, "%s: ampx_conformance_run returned %s", name,
                     ampx_status_name(st));
        cr_log_info("%s %s: %u passed, %u failed, %u unsupported", name, ampx_op_name(op),
                    sum.passed, sum.failed, sum.unsupported);
        cr_expect_eq(sum.failed, 0u, "%s: %s: %u failing cases", name, ampx_op_name(op),
                     sum.failed);
        cr_expect_gt(sum.passed, 0u, "%s: %s: no case passed", name, ampx_op_name(op));
        cr_expect_eq(sum.ops_run, 1u, "%s: %s: no supported dtype combination ran", name,
                     ampx_op_name(op));
        cr_expect(ampx_conformance_passed(st, &sum, 0), "%s: %s does not pass", name,
                  ampx_op_name(op));
    }
}

#define CONF_TEST(opname, opnum)                                                                   \
    Test(conformance, opname, .timeout = 600) {                                                    \
        conf_check_op(opnum);                                                                      \
    }

/* One test per op of AMPX_OPS: conformance.gemm, conformance.cast, ... */
#define CONF_TEST_EACH(index, slot, OP, ...) CONF_TEST(slot, AMPX_OP_##OP)
AMPX_OPS(CONF_TEST_EACH)
#undef CONF_TEST_EACH

/* The API's own contract: bad arguments are refused without running anything. */
Test(conformance, api_arguments) {
    ampx_conf_summary sum = {.passed = 1, .failed = 1, .unsupported = 1};
    cr_expect_eq(ampx_conformance_run(NULL, NULL, NULL, NULL, &sum), AMPX_ERR_INVALID);
    cr_expect_eq(sum.passed + sum.failed + sum.unsupported, 0u);
    ampx_backend *be = NULL;
    char err[512];
    cr_assert_eq(ampx_backend_open("cpu", NULL, 0, &be, err, sizeof err), AMPX_OK, "%s", err);
    ampx_conf_options opt = {0, AMPX_OP_COUNT, 1};
    cr_expect_eq(ampx_conformance_run(be, &opt, NULL, NULL, &sum), AMPX_ERR_INVALID);
    ampx_backend_close(be);
}

// ---------------------------------------------------------------------------------------
// What passing means: a backend of GEMM and CAST only (the OLD_MINOR test plugin around the
// CPU backend) passes the cases of those two ops but not conformance, and an op it lacks
// does not pass on the strength of the probes that check it refuses the dtypes.

static ampx_backend *open_gemm_cast_only(void) {
    ampx_backend *be = NULL;
    char err[512];
    setenv("AMPX_TEST_INNER_PLUGIN", AMPX_TEST_CPU_PLUGIN, 0); /* the plugin it wraps */
    cr_assert_eq(
        ampx_backend_open(AMPX_TEST_PLUGIN_DIR "/libold_minor.so", NULL, 0, &be, err, sizeof err),
        AMPX_OK, "%s", err);
    return be;
}

Test(conformance, minimum_set_is_required) {
    ampx_backend *be      = open_gemm_cast_only();
    ampx_conf_options opt = {0, -1, 1};
    ampx_conf_summary sum = {0};
    ampx_status st        = ampx_conformance_run(be, &opt, NULL, NULL, &sum);
    ampx_backend_close(be);
    cr_assert_eq(st, AMPX_OK);
    cr_expect_eq(sum.failed, 0u, "gemm and cast should pass");
    cr_expect_eq(sum.ops_run, 2u, "%u ops ran", sum.ops_run);
    cr_expect_eq(sum.ops_passing, 2u);
    cr_expect_eq(sum.required_missing, 9u, "missing: %s", sum.missing);
    cr_expect(strstr(sum.missing, "adamw") && strstr(sum.missing, "softmax_xent") &&
                  !strstr(sum.missing, "gemm"),
              "missing: %s", sum.missing);
    cr_expect(!ampx_conformance_passed(st, &sum, 1), "a backend without the minimum set passed");
}

Test(conformance, refused_dtypes_alone_do_not_pass_an_op) {
    ampx_backend *be      = open_gemm_cast_only();
    ampx_conf_options opt = {0, AMPX_OP_ADAMW, 1};
    ampx_conf_summary sum = {0};
    ampx_status st        = ampx_conformance_run(be, &opt, NULL, NULL, &sum);
    ampx_backend_close(be);
    cr_assert_eq(st, AMPX_OK);
    cr_expect_gt(sum.passed, 0u, "the refused-dtypes probe should pass");
    cr_expect_eq(sum.ops_run, 0u);
    cr_expect(!ampx_conformance_passed(st, &sum, 0), "adamw passed with no supported dtype");
}
