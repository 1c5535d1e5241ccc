/* softmax.c — softmax and log-softmax over the last axis, with an optional causal mask and
 * pre-scale; computed in f32 with the row maximum subtracted (the policy keeps it f32). */
#include "graph/ops.h"

static int softmax_shape(g_graph *g, g_node *n, g_shape_error *e) {
    (void)e;
    g_set_shape_like(g, n->out[0], n->in[0]);
    return 0;
}

/* Rows of one causal score block: the second-to-last axis (query positions). */
static uint64_t seq_q(const g_value *v) {
    return v->ndim >= 2 + v->batched ? (uint64_t)v->dims[v->ndim - 2] : 1;
}

static ampx_softmax_args sm_args(g_exec *x, const g_graph *g, const g_node *n, int v) {
    const g_value *val = &g->values[v];
    uint64_t cols      = (uint64_t)g_last(val);
    return (ampx_softmax_args){.size   = sizeof(ampx_softmax_args),
                               .causal = (uint32_t)n->a.causal,
                               .log    = (uint32_t)n->a.log,
                               .rows   = gx_numel(x, v) / cols,
                               .cols   = cols,
                               .seq_q  = n->a.causal ? seq_q(val) : 1,
                               .scale  = n->a.alpha};
}

static ampx_status softmax_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_softmax_args a = sm_args(x, g, n, n->in[0]);
    a.x_or_y            = gx_tensor(x, n->in[0]);
    a.y_or_dx           = gx_tensor(x, n->out[0]);
    return gx_call(x, n, AMPX_OP_SOFTMAX_FWD, &a);
}

/* dx from the forward output y and dy: in y, dy; out dx */
static int softmax_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int dx = g_new_grad(g, in, g->values[in].dtype), ins[2] = {n->out[0], dy};
    if (dx < 0 || g_emit(g, self, OP_SOFTMAX_BWD, ins, 2, &dx, 1, &n->a) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

const g_rule g_rule_softmax = {
    "softmax", {AMPX_OP_SOFTMAX_FWD, AMPX_OP_COUNT}, softmax_shape, softmax_fwd, softmax_bwd};

static ampx_status softmax_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_softmax_args a = sm_args(x, g, n, n->in[0]);
    a.x_or_y            = gx_tensor(x, n->in[0]);
    a.dy                = gx_tensor(x, n->in[1]);
    a.y_or_dx           = gx_tensor(x, n->out[0]);
    return gx_call(x, n, AMPX_OP_SOFTMAX_BWD, &a);
}

const g_rule g_rule_softmax_bwd = {
    "softmax_bwd", {AMPX_OP_SOFTMAX_BWD, AMPX_OP_COUNT}, NULL, softmax_bwd_fwd, NULL};
