/* layout.c — ops that move no arithmetic: reshape is a view of its input's storage (no op is
 * issued; the planner keeps the storage alive for both), transpose swaps the two last axes
 * with one strided PERMUTE. Each is its own backward's shape. */
#include <stdio.h>

#include "graph/ops.h"

// ---------------------------------------------------------------------------------------
// reshape: the same elements, another shape of one example (one -1 entry is inferred)

static int reshape_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    g_value *y       = &g->values[n->out[0]];
    int64_t known = 1, total = g_elems(x);
    int infer = -1;
    for (int i = 0; i < n->a.shape_ndim; i++) {
        if (n->a.shape[i] == -1 && infer < 0)
            infer = i;
        else if (n->a.shape[i] < 1) {
            snprintf(e->msg, sizeof e->msg, "a shape has positive sizes and at most one -1");
            e->input = -1;
            return -1;
        } else
            known *= n->a.shape[i];
    }
    if (infer >= 0 && known > 0 && total % known == 0) n->a.shape[infer] = total / known;
    if ((infer >= 0 && total % known) || (infer < 0 && known != total)) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" of shape %s (%lld per example) cannot take that shape", x->name, s,
                 (long long)total);
        e->input = 0;
        return -1;
    }
    y->batched = x->batched;
    y->ndim    = n->a.shape_ndim + (x->batched ? 1 : 0);
    for (int i = 0; i < n->a.shape_ndim; i++)
        y->dims[i + (x->batched ? 1 : 0)] = n->a.shape[i];
    y->view_of = n->in[0];
    return 0;
}

static ampx_status reshape_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    (void)x, (void)g, (void)n;
    return AMPX_OK; /* a view */
}

static int reshape_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int dx = g_new_grad(g, in, g->values[dy].dtype);
    if (dx < 0) return -1;
    g->values[dx].view_of = dy;
    g_attrs a             = {0};
    const g_value *xv     = &g->values[in];
    a.shape_ndim          = xv->ndim - (xv->batched ? 1 : 0);
    for (int i = 0; i < a.shape_ndim; i++)
        a.shape[i] = xv->dims[i + (xv->batched ? 1 : 0)];
    if (g_emit(g, self, OP_RESHAPE, &dy, 1, &dx, 1, &a) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

const g_rule g_rule_reshape = {"reshape", {AMPX_OP_COUNT}, reshape_shape, reshape_fwd, reshape_bwd};

// ---------------------------------------------------------------------------------------
// transpose: y[.., j, i] = x[.., i, j]

static int transpose_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    if (x->ndim - (x->batched ? 1 : 0) < 2) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" has shape %s: a transpose needs two axes per example", x->name, s);
        e->input = 0;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    g_value *y           = &g->values[n->out[0]];
    y->dims[y->ndim - 2] = x->dims[x->ndim - 1];
    y->dims[y->ndim - 1] = x->dims[x->ndim - 2];
    return 0;
}

static ampx_status transpose_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *v = &g->values[n->in[0]];
    uint64_t r = (uint64_t)v->dims[v->ndim - 2], c = (uint64_t)v->dims[v->ndim - 1];
    ampx_permute_args a = {.size      = sizeof a,
                           .ndim      = 3,
                           .dims      = {gx_numel(x, n->in[0]) / (r * c), r, c},
                           .x_strides = {r * c, c, 1},
                           .y_strides = {r * c, 1, r},
                           .x         = gx_tensor(x, n->in[0]),
                           .y         = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_PERMUTE, &a);
}

static int transpose_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int dx = g_new_grad(g, in, g->values[dy].dtype);
    if (dx < 0 || g_emit(g, self, OP_TRANSPOSE, &dy, 1, &dx, 1, NULL) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

const g_rule g_rule_transpose = {
    "transpose", {AMPX_OP_PERMUTE, AMPX_OP_COUNT}, transpose_shape, transpose_fwd, transpose_bwd};
