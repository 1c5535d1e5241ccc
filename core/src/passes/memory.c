/* memory.c — what a training step of a model holds on the device, by dtype: the planned
 * activations (the planner's arena of activations and their gradients within a micro-batch,
 * and one micro-batch of inputs) and the parameters (f32 masters, gradients and optimizer
 * state, low-precision working copies, running statistics). The same passes the trainer
 * runs on its copy of the graph (autodiff with train.recompute, the planner), host-only; the
 * f32 comparison runs the policy pass again on the graph as built. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "passes/model.h"
#include "passes/pipeline.h"

// ---------------------------------------------------------------------------------------
// Counting

/* The parameters as the trainer allocates them: per master its f32 values, its gradient in
 * the gradient arena (each padded to PLAN_ALIGN), Adam's m and v or SGD's momentum; a
 * working copy in its dtype; state and constants f32. */
static void count_params(const g_graph *g, const optimizer_config *o, ampx_memory *out) {
    int states = o->kind == OPT_ADAMW ? 2 : o->momentum != 0 ? 1 : 0;
    for (int v = 0; v < g->n_values; v++) {
        const g_value *val = &g->values[v];
        uint64_t n         = (uint64_t)g_elems(val);
        if (val->role == ROLE_PARAM && val->master < 0)
            out->params[AMPX_F32] +=
                n * 4 * (uint64_t)(1 + states) + (n * 4 + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
        else if (val->role == ROLE_PARAM)
            out->params[val->dtype] += n * ampx_dtype_size(val->dtype);
        else if (val->role == ROLE_STATE || val->role == ROLE_CONST)
            out->params[AMPX_F32] += n * 4;
    }
}

/* Fusion, autodiff and the plan of the resolved forward graph fwd at `rows` rows, as the
 * trainer makes them on a backend with the GEMM epilogue (the in-tree backends each take it);
 * with cast, the working copies cast on use (copies.h). */
static int measure(const g_graph *fwd, const settings *cfg, int cast, ampx_memory *out,
                   ampx_err e) {
    memset(out, 0, sizeof *out);
    g_graph g;
    if (g_init_graph(&g)) return err_set(e, "out of memory");
    g_copy_graph(&g, fwd);
    pass_caps caps;
    pass_caps_all(&caps);
    pass_job job = {.g           = &g,
                    .caps        = &caps,
                    .cast_copies = cast,
                    .recompute   = cfg->recompute,
                    .rows        = (uint64_t)cfg->train.batch,
                    .err         = e};
    /* a failing pass writes its message */
    int rc = pass_run(&job, PASS_COPIES, PASS_PLAN) ? -1 : 0;
    if (!rc) {
        out->arena = job.plan.arena_bytes;
        for (int d = 0; d < AMPX_DTYPE_COUNT; d++)
            out->activations[d] = job.plan.live_by_dtype[d];
        for (int i = 0; i < g.n_inputs; i++) {
            const g_value *v = &g.values[g.inputs[i]];
            uint64_t b       = g_numel(v, (uint64_t)cfg->train.batch) * ampx_dtype_size(v->dtype);
            out->activations[v->dtype] += b;
            out->inputs += b;
        }
        count_params(&g, &cfg->opt, out);
        for (int d = 0; d < AMPX_DTYPE_COUNT; d++) {
            out->activations_total += out->activations[d];
            out->params_total += out->params[d];
        }
        out->total = out->arena + out->inputs + out->params_total;
    }
    pass_job_free(&job);
    g_free_graph(&g);
    return rc;
}

static int has_copies(const g_graph *g) {
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].role == ROLE_PARAM && g->values[v].master >= 0) return 1;
    return 0;
}

/* The model under f32: the policy pass again on the graph as built. */
static int measure_f32(const ampx_model *m, ampx_memory *out, ampx_err e) {
    g_graph g;
    if (g_init_graph(&g)) return AMPX_ERR_NO_MEMORY;
    g_copy_graph(&g, &m->raw);
    policy f32;
    policy_defaults(&f32, "f32");
    char msg[256];
    int rc = policy_apply(&g, &f32, ERR(msg, sizeof msg));
    if (rc)
        err_set(e, "%s", msg);
    else
        rc = measure(&g, &m->cfg, 0, out, e);
    g_free_graph(&g);
    return rc;
}

/* model_casts_copies(m); where "auto" had to plan the model with its copies kept and under
 * f32 to decide, those figures too (*planned 1), so that no caller plans them again. */
static int decide(const ampx_model *m, ampx_memory *keep, ampx_memory *f32, int *planned) {
    *planned = 0;
    if (m->cfg.weight_copies == COPIES_KEEP || m->cfg.opt.stochastic_rounding ||
        !has_copies(&m->graph))
        return 0;
    if (m->cfg.weight_copies == COPIES_CAST) return 1;
    char err[256];
    if (measure(&m->graph, &m->cfg, 0, keep, ERR(err, sizeof err)) ||
        measure_f32(m, f32, ERR(err, sizeof err)))
        return 0; /* the trainer's own passes will say what is wrong */
    *planned = 1;
    return keep->total > f32->total;
}

int model_casts_copies(const ampx_model *m) {
    ampx_memory keep, f32;
    int planned;
    return decide(m, &keep, &f32, &planned);
}

/* The model under its policy (*pol, with *cast: the copies cast on use) and, when f32 is not
 * NULL, under f32; each planned once. */
static int plan_both(const ampx_model *m, ampx_memory *pol, ampx_memory *f32, int *cast,
                     ampx_err e) {
    int planned;
    ampx_memory keep, as_f32;
    *cast = decide(m, &keep, &as_f32, &planned);
    if (planned && !*cast)
        *pol = keep;
    else if (measure(&m->graph, &m->cfg, *cast, pol, e))
        return -1;
    if (f32 && planned) *f32 = as_f32;
    return f32 && !planned ? measure_f32(m, f32, e) : 0;
}

ampx_status ampx_model_memory(const ampx_model *m, int as_f32, ampx_memory *out, char *err,
                              size_t err_cap) {
    err_clear(ERR(err, err_cap));
    int cast;
    int rc = as_f32 ? measure_f32(m, out, ERR(err, err_cap))
                    : plan_both(m, out, NULL, &cast, ERR(err, err_cap));
    return rc ? AMPX_ERR_INVALID : AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Describing

/* MiB from 1 MiB up, KiB below: the unit for figures of about `most` bytes. */
static double unit_of(uint64_t most, const char **name) {
    *name = most >= (1u << 20) ? "MiB" : "KiB";
    return most >= (1u << 20) ? 1048576.0 : 1024.0;
}

/* "bf16 8.1, f32 4.2" in unit u: the dtypes that hold anything, largest first. */
static void by_dtype(const uint64_t *b, double u, char *buf, size_t cap) {
    static const char *const names[AMPX_DTYPE_COUNT] = {"f32", "bf16", "f16",
                                                        "i32", "e4m3", "e5m2"};
    int used[AMPX_DTYPE_COUNT]                       = {0};
    size_t n                                         = 0;
    buf[0]                                           = 0;
    for (int k = 0; k < AMPX_DTYPE_COUNT; k++) {
        int best = -1;
        for (int d = 0; d < AMPX_DTYPE_COUNT; d++)
            if (!used[d] && b[d] && (best < 0 || b[d] > b[best])) best = d;
        if (best < 0) break;
        used[best] = 1;
        double x   = (double)b[best] / u;
        if (n < cap && x < 0.05) /* held, but less than the last digit shown */
            n += (size_t)snprintf(buf + n, cap - n, "%s%s <0.1", n ? ", " : "", names[best]);
        else if (n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s %.1f", n ? ", " : "", names[best], x);
    }
}

void ampx_model_describe_memory(const ampx_model *m, ampx_line_fn line, void *user) {
    ampx_memory mp, mf;
    char err[512];
    if (m->cfg.recompute) {
        char what[128] = "";
        size_t n       = 0;
        for (int k = 0; recompute_names[k]; k++) {
            unsigned bit = k == 0 ? RECOMPUTE_LAYERNORM : RECOMPUTE_ACT(k - 1);
            if ((m->cfg.recompute & bit) && n < sizeof what)
                n += (size_t)snprintf(what + n, sizeof what - n, "%s%s", n ? ", " : "",
                                      recompute_names[k]);
        }
        linef(line, user,
              "recompute: %s (their outputs run again in the backward instead of being kept)",
              what);
    }
    int cast;
    if (plan_both(m, &mp, &mf, &cast, ERR(err, sizeof err))) {
        linef(line, user, "memory: not planned (%s)", err);
        return;
    }
    if (cast)
        linef(line, user,
              "weight copies: cast from the f32 masters where read, in the forward and again in "
              "the backward (train.weight_copies %s)",
              m->cfg.weight_copies == COPIES_CAST ? "\"cast\""
                                                  : "\"auto\": keeping them would cost more "
                                                    "than f32's total");
    const char *ua, *up;
    double a = unit_of(mf.arena > mp.arena ? mf.arena : mp.arena, &ua);
    double p = unit_of(mf.params_total > mp.params_total ? mf.params_total : mp.params_total, &up);
    char da[128], dp[128];
    by_dtype(mp.activations, a, da, sizeof da);
    by_dtype(mp.params, p, dp, sizeof dp);
    linef(line, user,
          "memory at batch %lld: activations %.1f %s live at the peak (%s) vs f32 %.1f %s "
          "(%.2fx); planned arena %.1f vs f32 %.1f %s",
          (long long)m->cfg.train.batch, (double)mp.activations_total / a, ua, da,
          (double)mf.activations_total / a, ua,
          mf.activations_total ? (double)mp.activations_total / (double)mf.activations_total : 1.0,
          (double)mp.arena / a, (double)mf.arena / a, ua);
    const char *ut;
    double t = unit_of(mf.total > mp.total ? mf.total : mp.total, &ut);
    linef(line, user,
          "memory: parameters+state %.1f %s (%s) vs f32 %.1f %s; total %.1f vs f32 %.1f %s "
          "(%.2fx: arena, inputs, parameters+state)",
          (double)mp.params_total / p, up, dp, (double)mf.params_total / p, up,
          (double)mp.total / t, (double)mf.total / t, ut,
          mf.total ? (double)mp.total / (double)mf.total : 1.0);
}
