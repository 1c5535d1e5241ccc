/* placed.c — a trainer on an ordered backend list (placed.h). */
#include "exec/placed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "exec/fp8.h"
#include "graph/ops.h"

int step_ops_needed(const ampx_trainer *t, const g_graph *g, uint32_t *ops) {
    if (t->inference) return 0;
    int n = 0, copies = 0;
    for (int v = 0; v < g->n_values; v++)
        copies |= g->values[v].master >= 0;
    ops[n++] = AMPX_OP_UNSCALE_CHECK;
    ops[n++] = AMPX_OP_SUM_SQUARES;
    ops[n++] = AMPX_OP_SCALER_UPDATE;
    ops[n++] = t->m->cfg.opt.kind == OPT_ADAMW ? AMPX_OP_ADAMW : AMPX_OP_SGD;
    if (copies) ops[n++] = AMPX_OP_CAST;
    if (g->n_fp8) ops[n++] = AMPX_OP_FP8_SCALE_UPDATE;
    return n;
}

ampx_status placed_open(ampx_trainer *t, ampx_backend *be) {
    tr_placed *p = &t->place;
    p->n         = ampx_backend_count(be);
    for (int m = 0; m < p->n; m++)
        p->members[m] = ampx_backend_member(be, m);
    p->home = 0;
    if (p->n > 1 && t->m->cfg.place.mode != PLACEMENT_STRICT) {
        uint32_t ops[8];
        int k = step_ops_needed(t, &t->m->graph, ops), found = -1;
        for (int m = 0; m < p->n && found < 0; m++) {
            int all = 1;
            for (int i = 0; i < k && all; i++)
                all = ampx_backend_op_slot(p->members[m], ops[i]) != NULL;
            if (all) found = m;
        }
        p->home = found < 0 ? 0 : found; /* none: the first, whose refusal names the op */
    }
    t->be  = p->members[p->home];
    t->ifc = ampx_backend_iface_of(t->be);
    t->ctx = ampx_backend_context(t->be);
    for (int m = 0; m < p->n; m++)
        if (m != p->home) call_init(&p->calls[m], p->members[m], tr_err(t));
    return AMPX_OK;
}

ampx_backend *placed_gemm_member(const ampx_trainer *t) {
    for (int m = 0; m < t->place.n; m++)
        if (ampx_backend_op_slot(t->place.members[m], AMPX_OP_GEMM)) return t->place.members[m];
    return t->be;
}

ampx_status placed_probe(ampx_trainer *t, pass_job *job) {
    tr_placed *p = &t->place;
    if (p->n < 2) return AMPX_OK;
    if (place_probe_run(&p->probe, &t->g, (uint64_t)t->B, !t->inference, p->members, p->n))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    pass_placing *q = &p->placing;
    q->n            = p->n;
    q->home         = p->home;
    q->need         = p->probe.need;
    q->cfg          = &t->m->cfg.place;
    for (int m = 0; m < p->n; m++)
        snprintf(q->names[m], sizeof q->names[m], "%s", ampx_backend_iface_of(p->members[m])->name);
    job->place = q;
    return AMPX_OK;
}

/* Bytes of each slot at the trainer's batch (values, then the blocks outside them). */
static uint64_t *slot_sizes(const ampx_trainer *t) {
    const g_graph *g = &t->g;
    uint64_t *sz     = calloc((size_t)g->n_values + PLACE_PSEUDO, sizeof *sz);
    if (!sz) return NULL;
    for (int v = 0; v < g->n_values; v++)
        sz[v] = v == g->loss
                    ? 4
                    : g_numel(&g->values[v], (uint64_t)t->B) * ampx_dtype_size(g->values[v].dtype);
    sz[g->n_values + PLACE_SCALARS]    = sizeof(ampx_scalars);
    sz[g->n_values + PLACE_FP8_STATE]  = g->n_fp8 ? fp8_state_floats(t) * 4 : 0;
    sz[g->n_values + PLACE_FP8_COUNTS] = (uint64_t)g->n_fp8 * 8;
    return sz;
}

ampx_status placed_attach(ampx_trainer *t) {
    tr_placed *p = &t->place;
    if (p->n < 2) return AMPX_OK;
    exec_place *r = &p->run;
    if (place_init(r, &t->g)) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    r->n           = p->n;
    r->home        = p->home;
    r->keep        = t->inference != 0;
    r->node_member = p->placing.member;
    for (int m = 0; m < p->n; m++)
        r->calls[m] = m == p->home ? &t->call : &p->calls[m];
    uint64_t *sz = slot_sizes(t);
    if (!sz) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int k = 0; k < PLACE_PSEUDO; k++)
        r->pseudo_bytes[k] = sz[t->g.n_values + k];
    p->node_bytes = calloc((size_t)t->g.n_nodes + 1, sizeof *p->node_bytes);
    if (!p->node_bytes) {
        free(sz);
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    }
    int last      = t->inference ? t->g.n_forward : t->g.n_nodes;
    p->step_bytes = place_simulate(&p->probe, &t->g, p->placing.member, p->home, 0, last, sz,
                                   r->keep, p->node_bytes) *
                    (uint64_t)(t->inference ? 1 : t->A);
    free(sz);
    t->x.pl = r;
    return AMPX_OK;
}

void placed_free(ampx_trainer *t) {
    tr_placed *p = &t->place;
    if (p->run.valid) place_free(&p->run);
    place_probe_free(&p->probe);
    pass_placing_free(&p->placing);
    free(p->node_bytes);
    p->node_bytes = NULL;
}
