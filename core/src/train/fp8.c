/* fp8.c — the trainer's fp8 scaling state (policy.fp8): one FP8 STATE block (backend.h) for
 * the graph's slots, three per fp8 product (x, W, the output's gradient), created with every
 * scale 1 and an empty history as Transformer Engine starts; the per-slot largest values of
 * their formats; and the step's FP8_SCALE_UPDATE after the optimizer, with every rank's amaxes
 * combined by a MAX all-reduce first so that all ranks keep the same scales. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "graph/ops.h"
#include "train/trainer.h"

ampx_dtype fp8_slot_dtype(const g_graph *g, int slot) {
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *n = &g->nodes[i];
        if (n->op != OP_MATMUL_FP8 || slot < n->a.fp8_slot || slot > n->a.fp8_slot + 2) continue;
        return slot == n->a.fp8_slot + 2 ? (ampx_dtype)n->a.fp8_grad : AMPX_E4M3;
    }
    return AMPX_E4M3;
}

uint64_t fp8_state_floats(const ampx_trainer *t) {
    return (2 + (uint64_t)t->fp8_history) * (uint64_t)t->g.n_fp8;
}

ampx_status fp8_setup(ampx_trainer *t) {
    int n = t->g.n_fp8;
    if (n == 0) return AMPX_OK;
    t->fp8_history  = t->m->cfg.pol.fp8.history;
    uint64_t floats = fp8_state_floats(t);
    float *host     = calloc(floats, sizeof *host);
    float *fmax     = calloc((size_t)n, sizeof *fmax);
    ampx_status st  = AMPX_OK;
    if (!host || !fmax) st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; !st && i < n; i++) {
        host[i] = host[n + i] = 1.0f; /* scale and scale_inv; the history starts at 0 */
        fmax[i]               = ampx_fp8_max(fp8_slot_dtype(&t->g, i));
    }
    if (!st) st = tr_upload(t, &t->fp8, host, floats * sizeof *host);
    if (!st) st = tr_upload(t, &t->fp8_max, fmax, (uint64_t)n * sizeof *fmax);
    free(host), free(fmax);
    if (st) return st;
    t->x.fp8_state = tr_tensor(t->fp8, 0, AMPX_F32);
    t->x.fp8_n     = (uint64_t)n;
    return AMPX_OK;
}

/* Every rank's current amaxes (row 0 of the history), their largest into every rank's. */
static ampx_status max_across_ranks(ampx_trainer *t) {
    uint64_t n = (uint64_t)t->g.n_fp8, at = 2 * n * 4;
    float *host = malloc(n * sizeof *host);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st =
        tr_check(t, t->ifc->buffer_read(t->ctx, t->fp8, at, host, n * 4), "buffer_read");
    if (!st && (st = dist_allreduce_max(t->dp.dist, host, n)))
        tr_fail(t, st, "fp8 amax all-reduce: %s", t->dp.dist->error);
    if (!st)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, t->fp8, at, host, n * 4), "buffer_write");
    free(host);
    return st;
}

ampx_status fp8_step_update(ampx_trainer *t) {
    ampx_status st;
    /* AMPX_FP8_LOCAL_AMAX=1 (tests): no all-reduce, so that the ranks' scales part and the
     * agreement check at each log interval must say so */
    const char *local = getenv("AMPX_FP8_LOCAL_AMAX");
    if (t->dp.world > 1 && !(local && !strcmp(local, "1")) && (st = max_across_ranks(t))) return st;
    const fp8_config *f          = &t->m->cfg.pol.fp8;
    ampx_fp8_scale_update_args a = {.size              = sizeof a,
                                    .algo              = (uint32_t)f->algo,
                                    .n                 = (uint64_t)t->g.n_fp8,
                                    .history           = (uint32_t)t->fp8_history,
                                    .margin            = f->margin,
                                    .skip_on_found_inf = 1,
                                    .state             = tr_tensor(t->fp8, 0, AMPX_F32),
                                    .fp8_max           = tr_tensor(t->fp8_max, 0, AMPX_F32),
                                    .scalars           = tr_tensor(t->scalars, 0, AMPX_F32)};
    return tr_step_op(t, AMPX_OP_FP8_SCALE_UPDATE, &a);
}
