/* autodiff.c — reverse-mode differentiation. The walk is here; what each op contributes is
 * its rule's backward (graph/). A value read by several nodes gets one gradient, the f32 sum
 * of the contributions; a parameter read by several nodes (a shared weight) gets one
 * persistent f32 gradient that the second writer accumulates into. */
#include "passes/autodiff.h"

#include <stdio.h>

#include "base/error.h"
#include "graph/ops.h"

int autodiff(g_graph *g, char *err, size_t cap) {
    for (int v = 0; v < g->n_values; v++)
        g->values[v].requires_grad = g->values[v].role == ROLE_PARAM;
    for (int i = 0; i < g->n_forward; i++) {
        g_node *n = &g->nodes[i];
        int any   = 0;
        for (int k = 0; k < n->n_in; k++)
            any |= g_needs_grad(g, n->in[k]);
        for (int k = 0; k < n->n_out; k++)
            if (g->values[n->out[k]].role == ROLE_ACTIVATION)
                g->values[n->out[k]].requires_grad = any;
    }
    for (int i = g->n_forward - 1; i >= 0; i--) {
        const g_rule *r = g_rule_of(g->nodes[i].op);
        if (r->backward && r->backward(g, i)) {
            err_set(ERR(err, cap),
                    "the graph is too large for its backward pass (at most %d nodes)", G_MAX_NODES);
            return -1;
        }
    }
    return 0;
}
