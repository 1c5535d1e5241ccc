/* autodiff.c — reverse-mode differentiation. The walk is here; what each op contributes is
 * its rule's backward (graph/). A value read by several nodes gets one gradient, the f32 sum
 * of the contributions; a parameter read by several nodes (a shared weight) gets one
 * persistent f32 gradient that the second writer accumulates into. Then recomputation
 * (train.recompute): the outputs of the cheap forward nodes it names are not kept until the
 * backward, a copy of the node runs again just before the backward reads them. */
#include "passes/autodiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/settings.h"
#include "graph/ops.h"

// ---------------------------------------------------------------------------------------
// Recompute: the same kernel on the same inputs writes the same bits, so a recomputed run
// is bit-identical to one that keeps the value. Layer norms and activations qualify: their
// inputs stay alive for their own backward anyway (the norm's x, the activation's x), and
// they read no state that the forward changes (batch norm's running statistics would be
// updated twice; dropout's mask is keyed by the node, so it is left out too). So do the
// casts of working copies from their masters (copies.h): the optimizer writes a master after
// the backward, never between a cast and its second run.

static int recomputable(const g_node *n, unsigned mask) {
    unsigned bit = n->op == OP_LAYERNORM                    ? RECOMPUTE_LAYERNORM
                   : n->op == OP_ACT                        ? RECOMPUTE_ACT(n->a.act)
                   : n->op == OP_CAST && n->why == WHY_COPY ? RECOMPUTE_COPIES
                                                            : 0u;
    return (mask & bit) != 0;
}

/* The first node in [from, to) that reads v, or -1. */
static int first_reader(const g_graph *g, int v, int from, int to) {
    for (int i = from; i < to; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == v) return i;
    return -1;
}

static int has_views(const g_graph *g, int v) {
    for (int u = 0; u < g->n_values; u++)
        if (g->values[u].view_of == v) return 1;
    return 0;
}

/* Appends a copy of forward node f writing fresh values, and points the backward nodes in
 * [nf, n_bwd_end) that read f's output at the copy's. Returns the copy's id, -1 when full. */
static int add_clone(g_graph *g, int f, int nf, int n_bwd_end) {
    g_node n = g->nodes[f];
    int outs[G_MAX_OUT];
    for (int k = 0; k < n.n_out; k++) {
        char name[G_NAME_MAX];
        snprintf(name, sizeof name, "%.80s.again", g->values[n.out[k]].name);
        outs[k] = g_add_value_like(g, name, ROLE_ACTIVATION, g->values[n.out[k]].dtype, n.out[k]);
        if (outs[k] < 0) return -1;
    }
    int id = g_add_node(g, n.op, n.in, n.n_in, outs, n.n_out, &n.a, n.name);
    if (id < 0) return -1;
    g_node *c = &g->nodes[id];
    c->phase  = PHASE_BACKWARD;
    c->of     = f;
    c->dtype  = n.dtype;
    c->why    = WHY_RECOMPUTE;
    c->line   = n.line;
    c->col    = n.col;
    for (int i = nf; i < n_bwd_end; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == n.out[0]) g->nodes[i].in[k] = outs[0];
    return id;
}

/* Moves the copies (appended at [n_bwd_end, n_nodes), each to run before node at[copy]) into
 * place, and renumbers the producers of the values the backward writes. */
static int place_clones(g_graph *g, int nf, int n_bwd_end, const int *at) {
    int n = g->n_nodes, j = nf;
    g_node *moved = malloc(sizeof *moved * (size_t)n);
    int *pos      = malloc(sizeof *pos * (size_t)n);
    if (!moved || !pos) {
        free(moved), free(pos);
        return -1;
    }
    for (int i = 0; i < nf; i++)
        pos[i] = i;
    for (int i = nf; i < n_bwd_end; i++) {
        for (int c = n_bwd_end; c < n; c++)
            if (at[c - n_bwd_end] == i) moved[j] = g->nodes[c], pos[c] = j++;
        moved[j] = g->nodes[i], pos[i] = j++;
    }
    memcpy(g->nodes + nf, moved + nf, sizeof *moved * (size_t)(n - nf));
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].producer >= nf) g->values[v].producer = pos[g->values[v].producer];
    free(moved), free(pos);
    return 0;
}

static int recompute(g_graph *g, unsigned mask) {
    int nf = g->n_forward, n_bwd_end = g->n_nodes;
    int *at = malloc(sizeof *at * G_MAX_NODES);
    if (!at) return -1;
    for (int f = 0; f < nf; f++) {
        const g_node *n = &g->nodes[f];
        if (!recomputable(n, mask) || has_views(g, n->out[0])) continue;
        int first = first_reader(g, n->out[0], nf, n_bwd_end);
        if (first < 0) continue; /* the backward does not read it: nothing to recompute */
        int id = add_clone(g, f, nf, n_bwd_end);
        if (id < 0) {
            free(at);
            return -1;
        }
        at[id - n_bwd_end] = first;
    }
    int rc = g->n_nodes > n_bwd_end ? place_clones(g, nf, n_bwd_end, at) : 0;
    free(at);
    return rc;
}

// ---------------------------------------------------------------------------------------
// The walk

int autodiff(g_graph *g, unsigned recompute_mask, ampx_err e) {
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
            err_set(e, "the graph is too large for its backward pass (at most %d nodes)",
                    G_MAX_NODES);
            return -1;
        }
    }
    if (recompute_mask && recompute(g, recompute_mask)) {
        err_set(e,
                "the graph is too large for its backward pass with recomputation (at most %d "
                "values and %d nodes)",
                G_MAX_VALUES, G_MAX_NODES);
        return -1;
    }
    return 0;
}
