/* reduce.c — sum or mean over one axis of an example (the axis leaves the shape), in f32.
 * Over the last axis the forward is one REDUCE; over any other it is a batched GEMM with a
 * ones vector (stride 0 on A): y_o[1 x inner] = alpha * ones[1 x L] x_o[L x inner]. The
 * backward broadcasts dy back over the axis the same way with k = 1. */
#include <stdio.h>

#include "graph/ops.h"

/* outer x L x inner around the reduced axis, at this batch size */
static void split(const g_exec *x, const g_graph *g, const g_node *n, uint64_t *outer,
                  uint64_t *len, uint64_t *inner) {
    const g_value *v = &g->values[n->in[0]];
    *len             = (uint64_t)v->dims[n->a.axis];
    *inner           = 1;
    for (int i = n->a.axis + 1; i < v->ndim; i++)
        *inner *= (uint64_t)v->dims[i];
    *outer = gx_numel(x, n->in[0]) / (*len * *inner);
}

static int reduce_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    if (n->a.axis < (x->batched ? 1 : 0) || n->a.axis >= x->ndim) {
        snprintf(e->msg, sizeof e->msg, "axis %d is outside the %d axes of one example", n->a.axis,
                 x->ndim - (x->batched ? 1 : 0));
        e->input = -1;
        return -1;
    }
    g_value *y = &g->values[n->out[0]];
    y->batched = x->batched;
    y->ndim    = x->ndim - 1;
    for (int i = 0, k = 0; i < x->ndim; i++)
        if (i != n->a.axis) y->dims[k++] = x->dims[i];
    return 0;
}

static ampx_status reduce_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t outer, len, inner;
    split(x, g, n, &outer, &len, &inner);
    if (inner == 1) {
        ampx_reduce_args a = {.size = sizeof a,
                              .mode = (uint32_t)n->a.mode,
                              .rows = outer,
                              .cols = len,
                              .x    = gx_tensor(x, n->in[0]),
                              .y    = gx_tensor(x, n->out[0])};
        return gx_call(x, n, AMPX_OP_REDUCE, &a);
    }
    ampx_gemm_args a = {.size     = sizeof a,
                        .m        = 1,
                        .n        = inner,
                        .k        = len,
                        .batch    = outer,
                        .lda      = len,
                        .ldb      = inner,
                        .ldc      = inner,
                        .stride_a = 0,
                        .stride_b = len * inner,
                        .stride_c = inner,
                        .alpha    = n->a.mode == AMPX_REDUCE_MEAN ? 1.0f / (float)len : 1.0f,
                        .beta     = 0,
                        .a        = gx_tensor(x, n->in[1]),
                        .b        = gx_tensor(x, n->in[0]),
                        .c        = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_GEMM, &a);
}

static int reduce_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int dx = g_new_grad(g, in, g->values[in].dtype), ins[2] = {dy, n->in[1]};
    if (dx < 0 || g_emit(g, self, OP_REDUCE_BWD, ins, 2, &dx, 1, &n->a) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

const g_rule g_rule_reduce = {
    "reduce", {AMPX_OP_REDUCE, AMPX_OP_GEMM, AMPX_OP_COUNT}, reduce_shape, reduce_fwd, reduce_bwd};

/* dx_o[L x inner] = alpha * ones[L x 1] dy_o[1 x inner]: in dy, ones; out dx, shaped like
 * the forward input (so the backward need not keep that input alive) */
static ampx_status reduce_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    g_node fwd = *n;
    fwd.in[0]  = n->out[0];
    uint64_t outer, len, inner;
    split(x, g, &fwd, &outer, &len, &inner);
    ampx_gemm_args a = {.size     = sizeof a,
                        .m        = len,
                        .n        = inner,
                        .k        = 1,
                        .batch    = outer,
                        .lda      = 1,
                        .ldb      = inner,
                        .ldc      = inner,
                        .stride_a = 0,
                        .stride_b = inner,
                        .stride_c = len * inner,
                        .alpha    = n->a.mode == AMPX_REDUCE_MEAN ? 1.0f / (float)len : 1.0f,
                        .beta     = 0,
                        .a        = gx_tensor(x, n->in[1]),
                        .b        = gx_tensor(x, n->in[0]),
                        .c        = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_GEMM, &a);
}

const g_rule g_rule_reduce_bwd = {
    "reduce_bwd", {AMPX_OP_GEMM, AMPX_OP_COUNT}, NULL, reduce_bwd_fwd, NULL};
