/* executor.c — the g_exec interface the op rules run against (graph/exec.h), and the loop
 * over the nodes. */
#include "train/executor.h"

#include <stdio.h>

#include "ampx/dtype.h"
#include "graph/ops.h"

ampx_tensor gx_null(ampx_dtype d) {
    return (ampx_tensor){.buf = NULL, .offset = 0, .dtype = d};
}

ampx_tensor gx_tensor(g_exec *x, int v) {
    const g_value *val = &x->g->values[v];
    if (v == x->g->loss) return x->loss;
    int root = g_root(x->g, v);
    if (x->own[root]) {
        uint64_t off = val->role == ROLE_INPUT
                           ? x->row0 * (uint64_t)g_elems(val) * ampx_dtype_size(val->dtype)
                       : x->own_off ? x->own_off[root]
                                    : 0;
        return (ampx_tensor){.buf = x->own[root], .offset = off, .dtype = val->dtype};
    }
    return (ampx_tensor){.buf = x->arena, .offset = x->p->offset[root], .dtype = val->dtype};
}

uint64_t gx_numel(const g_exec *x, int v) {
    return g_numel(&x->g->values[v], x->rows);
}

int gx_training(const g_exec *x) {
    return x->training;
}

int gx_accumulate(const g_exec *x, const g_node *n) {
    return n->a.accumulate || x->micro > 0;
}

uint64_t gx_micro_batches(const g_exec *x) {
    return x->micro_batches;
}

ampx_tensor gx_scalars(g_exec *x) {
    return x->scalars;
}

uint64_t gx_dropout_seed(const g_exec *x, const g_node *n) {
    /* the forward node's id keys the mask, so its backward finds the same one */
    uint64_t id = n->phase == PHASE_BACKWARD ? (uint64_t)n->of : (uint64_t)(n - x->g->nodes);
    uint64_t mb = (uint64_t)x->micro * (x->replicas ? x->replicas : 1) + x->replica;
    uint64_t hi = ampx_hash32(x->seed ^ 0xD809u, x->step * 65536u + mb);
    uint64_t lo = ampx_hash32(hi, id);
    return hi << 32 | lo;
}

ampx_status gx_zero(g_exec *x, const g_node *n, int v) {
    ampx_tensor t  = gx_tensor(x, v);
    uint64_t bytes = gx_numel(x, v) * ampx_dtype_size(t.dtype);
    char who[G_NAME_MAX + 8];
    snprintf(who, sizeof who, "%s: fill", n->name);
    return call_check(x->call,
                      x->call->ifc->buffer_fill(x->call->ctx, t.buf, t.offset, bytes, 0, 4), who);
}

ampx_status gx_call(g_exec *x, const g_node *n, uint32_t op, const void *args) {
    x->call->phase = n->phase == PHASE_BACKWARD ? CALL_BACKWARD : CALL_FORWARD;
    x->call->dtype = n->dtype;
    return call_op(x->call, n->name, op, args);
}

ampx_status exec_run(g_exec *x, int first, int last) {
    for (int i = first; i < last; i++) {
        const g_node *n = &x->g->nodes[i];
        ampx_status st  = g_rule_of(n->op)->forward(x, x->g, n);
        if (!st && x->after_node) st = x->after_node(x, i, x->after_user);
        if (st) return st;
    }
    return AMPX_OK;
}
