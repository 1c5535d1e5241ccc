/* norm.c — layer norm and batch norm. Statistics are f32 and saved by the forward for the
 * backward; gamma, beta and the running statistics are f32 whatever the policy (the guide's
 * "keep batch-norm parameters and statistics in f32"). */
#include <stdio.h>

#include "graph/ops.h"

/* A statistics value of x: x's dims with the normalized ones set to 1. */
static void stats_shape(g_graph *g, int stat, int x, int from, int to) {
    g_set_shape_like(g, stat, x);
    for (int i = from; i < to; i++)
        g->values[stat].dims[i] = 1;
}

/* The backward of either norm: in x, gamma, mean, rstd, dy; out dx, dgamma, dbeta. dx is
 * always written (the ops compute it), into a scratch gradient when x needs none. */
static int norm_bwd(g_graph *g, int self, int op) {
    const g_node *n = &g->nodes[self];
    int x = n->in[0], dy = g_grad_of(g, n->out[0]);
    if (dy < 0) return 0;
    g_attrs a = n->a;
    int acc_beta;
    int dx = g_new_grad(g, x, g->values[x].dtype), dg = g_param_grad(g, n->in[1], &a.accumulate),
        db = g_param_grad(g, n->in[2], &acc_beta);
    if (dx < 0 || dg < 0 || db < 0) return -1;
    int ins[5] = {x, n->in[1], n->out[1], n->out[2], dy}, outs[3] = {dx, dg, db};
    if (g_emit(g, self, op, ins, 5, outs, 3, &a) < 0) return -1;
    return g_needs_grad(g, x) ? g_contribute(g, x, dx, self) : 0;
}

// ---------------------------------------------------------------------------------------
// layernorm over the last axis: in x, gamma, beta; out y, mean, rstd

static int layernorm_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]], *gm = &g->values[n->in[1]];
    if (gm->dims[0] != g_last(x)) {
        snprintf(e->msg, sizeof e->msg, "gamma of %lld does not match %lld features",
                 (long long)gm->dims[0], (long long)g_last(x));
        e->input = 0;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    int last = g->values[n->in[0]].ndim - 1;
    stats_shape(g, n->out[1], n->in[0], last, last + 1);
    stats_shape(g, n->out[2], n->in[0], last, last + 1);
    return 0;
}

static ampx_layernorm_args ln_args(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t cols = (uint64_t)g_last(&g->values[n->in[0]]);
    return (ampx_layernorm_args){.size  = sizeof(ampx_layernorm_args),
                                 .rows  = gx_numel(x, n->in[0]) / cols,
                                 .cols  = cols,
                                 .eps   = n->a.eps,
                                 .x     = gx_tensor(x, n->in[0]),
                                 .gamma = gx_tensor(x, n->in[1])};
}

static ampx_status layernorm_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_layernorm_args a = ln_args(x, g, n);
    a.beta                = gx_tensor(x, n->in[2]);
    a.y_or_dx             = gx_tensor(x, n->out[0]);
    a.mean                = gx_tensor(x, n->out[1]);
    a.rstd                = gx_tensor(x, n->out[2]);
    return gx_call(x, n, AMPX_OP_LAYERNORM_FWD, &a);
}

static int layernorm_bwd(g_graph *g, int self) {
    return norm_bwd(g, self, OP_LAYERNORM_BWD);
}

const g_rule g_rule_layernorm = {"layernorm",
                                 {AMPX_OP_LAYERNORM_FWD, AMPX_OP_COUNT},
                                 layernorm_shape,
                                 layernorm_fwd,
                                 layernorm_bwd};

static ampx_status layernorm_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_layernorm_args a = ln_args(x, g, n);
    a.accumulate          = (uint32_t)gx_accumulate(x, n);
    a.mean                = gx_tensor(x, n->in[2]);
    a.rstd                = gx_tensor(x, n->in[3]);
    a.dy                  = gx_tensor(x, n->in[4]);
    a.y_or_dx             = gx_tensor(x, n->out[0]);
    a.dgamma              = gx_tensor(x, n->out[1]);
    a.dbeta               = gx_tensor(x, n->out[2]);
    return gx_call(x, n, AMPX_OP_LAYERNORM_BWD, &a);
}

const g_rule g_rule_layernorm_bwd = {
    "layernorm_bwd", {AMPX_OP_LAYERNORM_BWD, AMPX_OP_COUNT}, NULL, layernorm_bwd_fwd, NULL};

// ---------------------------------------------------------------------------------------
// batchnorm: per channel (axis a.axis, batch = 0) over every other axis, the batch included.
// in x, gamma, beta, running_mean, running_var; out y, mean, rstd ([C] f32 each)

static int batchnorm_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    if (n->a.axis < 1 || n->a.axis >= x->ndim) {
        snprintf(e->msg, sizeof e->msg, "axis %d is outside the %d axes of one example", n->a.axis,
                 x->ndim - 1);
        e->input = -1;
        return -1;
    }
    if (g->values[n->in[1]].dims[0] != x->dims[n->a.axis]) {
        snprintf(e->msg, sizeof e->msg, "%lld channels, parameters of %lld",
                 (long long)x->dims[n->a.axis], (long long)g->values[n->in[1]].dims[0]);
        e->input = 0;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    for (int k = 1; k < 3; k++) {
        g_value *s = &g->values[n->out[k]];
        s->batched = 0, s->ndim = 1, s->dims[0] = x->dims[n->a.axis];
    }
    return 0;
}

static ampx_batchnorm_args bn_args(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *v = &g->values[n->in[0]];
    uint64_t inner = 1, ch = (uint64_t)v->dims[n->a.axis];
    for (int i = n->a.axis + 1; i < v->ndim; i++)
        inner *= (uint64_t)v->dims[i];
    return (ampx_batchnorm_args){.size     = sizeof(ampx_batchnorm_args),
                                 .outer    = gx_numel(x, n->in[0]) / (ch * inner),
                                 .channels = ch,
                                 .inner    = inner,
                                 .eps      = n->a.eps,
                                 .momentum = n->a.momentum,
                                 .x        = gx_tensor(x, n->in[0]),
                                 .gamma    = gx_tensor(x, n->in[1])};
}

static ampx_status batchnorm_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_batchnorm_args a = bn_args(x, g, n);
    a.training            = (uint32_t)gx_training(x);
    a.beta                = gx_tensor(x, n->in[2]);
    a.running_mean        = gx_tensor(x, n->in[3]);
    a.running_var         = gx_tensor(x, n->in[4]);
    a.y_or_dx             = gx_tensor(x, n->out[0]);
    if (a.training) {
        a.mean = gx_tensor(x, n->out[1]);
        a.rstd = gx_tensor(x, n->out[2]);
    } else {
        a.mean = a.rstd = gx_null(AMPX_F32);
    }
    return gx_call(x, n, AMPX_OP_BATCHNORM_FWD, &a);
}

static int batchnorm_bwd(g_graph *g, int self) {
    return norm_bwd(g, self, OP_BATCHNORM_BWD);
}

const g_rule g_rule_batchnorm = {"batchnorm",
                                 {AMPX_OP_BATCHNORM_FWD, AMPX_OP_COUNT},
                                 batchnorm_shape,
                                 batchnorm_fwd,
                                 batchnorm_bwd};

static ampx_status batchnorm_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_batchnorm_args a = bn_args(x, g, n);
    a.training            = 1;
    a.accumulate          = (uint32_t)gx_accumulate(x, n);
    a.mean                = gx_tensor(x, n->in[2]);
    a.rstd                = gx_tensor(x, n->in[3]);
    a.dy                  = gx_tensor(x, n->in[4]);
    a.y_or_dx             = gx_tensor(x, n->out[0]);
    a.dgamma              = gx_tensor(x, n->out[1]);
    a.dbeta               = gx_tensor(x, n->out[2]);
    return gx_call(x, n, AMPX_OP_BATCHNORM_BWD, &a);
}

const g_rule g_rule_batchnorm_bwd = {
    "batchnorm_bwd", {AMPX_OP_BATCHNORM_BWD, AMPX_OP_COUNT}, NULL, batchnorm_bwd_fwd, NULL};
