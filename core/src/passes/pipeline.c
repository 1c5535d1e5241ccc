/* pipeline.c — the one pass pipeline (pipeline.h). */
#include "passes/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "passes/autodiff.h"
#include "passes/copies.h"
#include "passes/fuse.h"

void pass_caps_all(pass_caps *c) {
    memset(c->gemm_epilogue, 1, sizeof c->gemm_epilogue);
}

static ampx_status plan_pass(pass_job *j) {
    const g_graph *g = j->g;
    if (!(j->persistent = calloc((size_t)g->n_values + 1, 1))) goto oom;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].role == ROLE_PARAM && g->values[v].grad >= 0)
            j->persistent[g->values[v].grad] = 1;
    if (plan_make(g, j->rows, j->persistent, j->keep, &j->plan)) goto oom;
    return AMPX_OK;
oom:
    err_set(j->err, "out of memory");
    return AMPX_ERR_NO_MEMORY;
}

static ampx_status one_pass(pass_job *j, pass_id p) {
    switch (p) {
    case PASS_POLICY: return policy_resolve(j->m, j->err) ? AMPX_ERR_INVALID : AMPX_OK;
    case PASS_COPIES:
        if (j->cast_copies && copies_cast_on_use(j->g) < 0) {
            err_set(j->err, "the graph is too large for its copies' casts");
            return AMPX_ERR_INVALID;
        }
        return AMPX_OK;
    case PASS_FUSE: fuse_dense(j->g, j->caps); return AMPX_OK;
    case PASS_AUTODIFF:
        if (j->forward_only) return AMPX_OK;
        return autodiff(j->g, j->recompute | (j->cast_copies ? RECOMPUTE_COPIES : 0u), j->err)
                   ? AMPX_ERR_INVALID
                   : AMPX_OK;
    case PASS_PLACE:
        return j->place && place_nodes(j->g, j->place, j->err) ? AMPX_ERR_UNSUPPORTED : AMPX_OK;
    case PASS_PLAN: return plan_pass(j);
    }
    return AMPX_ERR_INVALID;
}

ampx_status pass_run(pass_job *j, pass_id first, pass_id last) {
    ampx_status st = AMPX_OK;
    for (int p = first; p <= (int)last && !st; p++)
        st = one_pass(j, (pass_id)p);
    return st;
}

void pass_job_free(pass_job *j) {
    free(j->persistent);
    j->persistent = NULL;
    plan_free(&j->plan);
}
