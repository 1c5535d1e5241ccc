/* loss.c — the losses. Each computes its mean loss into the step's record and, while
 * training, the gradient of its prediction in the same forward (seeded with the loss scale
 * from the scalars block and divided by the micro-batches of the step), so the backward rule
 * only hands that gradient on. Both run in f32.
 *   xent: softmax cross-entropy with i32 labels and ignore_index; N-D logits [.., C] are one
 *         row per position, the mean over the positions whose label is not ignored.
 *   mse:  mean over every element of (pred - target)^2. */
#include <stdio.h>

#include "graph/ops.h"

/* Both losses: in prediction, target; out loss (f32 [1]), the prediction's gradient, and
 * for mse a scratch difference (f32, shaped like the prediction). */
static int loss_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    return g_needs_grad(g, n->in[0]) ? g_contribute(g, n->in[0], n->out[1], self) : 0;
}

// ---------------------------------------------------------------------------------------
// softmax cross-entropy

static int xent_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *lg = &g->values[n->in[0]], *lb = &g->values[n->in[1]];
    int ok = lb->ndim == lg->ndim - 1 && lb->batched == lg->batched;
    for (int i = lg->batched ? 1 : 0; ok && i < lb->ndim; i++)
        ok = lb->dims[i] == lg->dims[i];
    if (!ok) {
        char a[64], b[64];
        g_shape_str(lg, a, sizeof a);
        g_shape_str(lb, b, sizeof b);
        snprintf(e->msg, sizeof e->msg,
                 "logits \"%s\" of shape %s need labels of its leading shape, \"%s\" has %s",
                 lg->name, a, lb->name, b);
        e->input = 1;
        return -1;
    }
    g_value *l = &g->values[n->out[0]];
    l->batched = 0, l->ndim = 1, l->dims[0] = 1;
    g_set_shape_like(g, n->out[1], n->in[0]);
    return 0;
}

static ampx_status xent_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t cols            = (uint64_t)g_last(&g->values[n->in[0]]);
    ampx_softmax_xent_args a = {.size         = sizeof a,
                                .ignore_index = n->a.ignore_index,
                                .rows         = gx_numel(x, n->in[0]) / cols,
                                .cols         = cols,
                                .grad_scale   = 1.0f / (float)gx_micro_batches(x),
                                .logits       = gx_tensor(x, n->in[0]),
                                .labels       = gx_tensor(x, n->in[1]),
                                .loss         = gx_tensor(x, n->out[0]),
                                .dlogits      = gx_null(AMPX_F32),
                                .scalars      = gx_null(AMPX_F32)};
    if (gx_training(x)) {
        a.dlogits = gx_tensor(x, n->out[1]);
        a.scalars = gx_scalars(x);
    }
    return gx_call(x, n, AMPX_OP_SOFTMAX_XENT, &a);
}

const g_rule g_rule_xent = {
    "softmax_cross_entropy", {AMPX_OP_SOFTMAX_XENT, AMPX_OP_COUNT}, xent_shape, xent_fwd, loss_bwd};

// ---------------------------------------------------------------------------------------
// mean squared error: diff = pred - target; loss = sum(diff^2) / N;
// dpred = diff * (2 / (N * micro-batches)) * scale, the last factor read from the scalars
// block by a k = 1 GEMM (its first field is the f32 loss scale), so the host never reads it.

static int mse_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *p = &g->values[n->in[0]], *t = &g->values[n->in[1]];
    if (!g_same_shape(p, t)) {
        char a[64], b[64];
        g_shape_str(p, a, sizeof a);
        g_shape_str(t, b, sizeof b);
        snprintf(e->msg, sizeof e->msg,
                 "shape mismatch: prediction \"%s\" has shape %s but target \"%s\" has %s", p->name,
                 a, t->name, b);
        e->input = 1;
        return -1;
    }
    g_value *l = &g->values[n->out[0]];
    l->batched = 0, l->ndim = 1, l->dims[0] = 1;
    g_set_shape_like(g, n->out[1], n->in[0]);
    g_set_shape_like(g, n->out[2], n->in[0]);
    return 0;
}

static ampx_status mse_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t count = gx_numel(x, n->in[0]);
    ampx_tensor d = gx_tensor(x, n->out[2]), loss = gx_tensor(x, n->out[0]);
    ampx_add_args a         = {.size  = sizeof a,
                               .rows  = 1,
                               .cols  = count,
                               .alpha = 1,
                               .beta  = -1,
                               .a     = gx_tensor(x, n->in[0]),
                               .b     = gx_tensor(x, n->in[1]),
                               .y     = d};
    uint64_t one            = count;
    ampx_sum_squares_args q = {
        .size = sizeof q, .x = {.count = 1, .tensors = &d, .n_elems = &one}, .out = loss};
    ampx_scale_args s = {
        .size = sizeof s, .n = 1, .alpha = 1.0f / (float)count, .x = loss, .y = loss};
    ampx_status st;
    if ((st = gx_call(x, n, AMPX_OP_ADD, &a)) || (st = gx_call(x, n, AMPX_OP_SUM_SQUARES, &q)) ||
        (st = gx_call(x, n, AMPX_OP_SCALE, &s)) || !gx_training(x))
        return st;
    ampx_gemm_args gm = {.size  = sizeof gm,
                         .m     = count,
                         .n     = 1,
                         .k     = 1,
                         .batch = 1,
                         .lda   = 1,
                         .ldb   = 1,
                         .ldc   = 1,
                         .alpha = (float)(2.0 / ((double)count * (double)gx_micro_batches(x))),
                         .beta  = 0,
                         .a     = d,
                         .b     = gx_scalars(x),
                         .c     = gx_tensor(x, n->out[1])};
    return gx_call(x, n, AMPX_OP_GEMM, &gm);
}

const g_rule g_rule_mse = {"mse",
                           {AMPX_OP_ADD, AMPX_OP_SUM_SQUARES, AMPX_OP_SCALE, AMPX_OP_GEMM},
                           mse_shape,
                           mse_fwd,
                           loss_bwd};
