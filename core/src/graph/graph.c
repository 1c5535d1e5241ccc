/* graph.c — values and nodes of the IR, and the bookkeeping the backward rules use. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops.h"

int g_init_graph(g_graph *g) {
    memset(g, 0, sizeof *g);
    g->values = calloc(G_MAX_VALUES, sizeof *g->values);
    g->nodes  = calloc(G_MAX_NODES, sizeof *g->nodes);
    g->loss = g->logits = g->labels = -1;
    if (!g->values || !g->nodes) {
        g_free_graph(g);
        return -1;
    }
    return 0;
}

void g_free_graph(g_graph *g) {
    free(g->values);
    free(g->nodes);
    g->values = NULL;
    g->nodes  = NULL;
}

void g_copy_graph(g_graph *dst, const g_graph *src) {
    g_value *v  = dst->values;
    g_node *n   = dst->nodes;
    *dst        = *src;
    dst->values = v;
    dst->nodes  = n;
    memcpy(v, src->values, sizeof *v * (size_t)src->n_values);
    memcpy(n, src->nodes, sizeof *n * (size_t)src->n_nodes);
}

int g_add_value(g_graph *g, const char *name, g_role role, ampx_dtype dtype, int batched, int ndim,
                const int64_t *dims) {
    if (g->n_values >= G_MAX_VALUES || ndim < 0 || ndim > G_MAX_DIMS) return -1;
    g_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->role     = role;
    v->dtype    = dtype;
    v->batched  = batched;
    v->ndim     = ndim;
    v->view_of  = -1;
    v->producer = -1;
    v->grad     = -1;
    v->master   = -1;
    v->copy     = -1;
    v->fp8_slot = -1;
    for (int i = 0; i < ndim; i++)
        v->dims[i] = dims ? dims[i] : 0;
    if (batched && ndim > 0) v->dims[0] = 0;
    return g->n_values++;
}

int g_add_value_like(g_graph *g, const char *name, g_role role, ampx_dtype dtype, int like) {
    const g_value *l = &g->values[like];
    int64_t dims[G_MAX_DIMS];
    memcpy(dims, l->dims, sizeof dims);
    int v = g_add_value(g, name, role, dtype, l->batched, l->ndim, dims);
    if (v >= 0) {
        g->values[v].line = l->line;
        g->values[v].col  = l->col;
    }
    return v;
}

int g_add_node(g_graph *g, int op, const int *in, int n_in, const int *out, int n_out,
               const g_attrs *a, const char *name) {
    if (g->n_nodes >= G_MAX_NODES || n_in > G_MAX_IN || n_out > G_MAX_OUT) return -1;
    int id    = g->n_nodes++;
    g_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op    = op;
    n->n_in  = n_in;
    n->n_out = n_out;
    for (int i = 0; i < n_in; i++)
        n->in[i] = in[i];
    for (int i = 0; i < n_out; i++) {
        n->out[i] = out[i];
        if (out[i] >= 0 && g->values[out[i]].producer < 0 && g->values[out[i]].role != ROLE_PARAM &&
            g->values[out[i]].role != ROLE_STATE)
            g->values[out[i]].producer = id;
    }
    if (a) n->a = *a;
    n->of = -1;
    /* name may be another node's (a backward node takes its forward node's name) */
    char copy[G_NAME_MAX];
    snprintf(copy, sizeof copy, "%s", name ? name : "");
    memcpy(n->name, copy, sizeof copy);
    return id;
}

int64_t g_elems(const g_value *v) {
    int64_t n = 1;
    for (int i = v->batched ? 1 : 0; i < v->ndim; i++)
        n *= v->dims[i];
    return n;
}

uint64_t g_numel(const g_value *v, uint64_t rows) {
    return (uint64_t)g_elems(v) * (v->batched ? rows : 1);
}

int64_t g_last(const g_value *v) {
    return v->ndim > (v->batched ? 1 : 0) ? v->dims[v->ndim - 1] : 1;
}

void g_shape_str(const g_value *v, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < v->ndim && n < cap; i++) {
        const char *sep = i ? ", " : "";
        if (i == 0 && v->batched)
            n += (size_t)snprintf(buf + n, cap - n, "B");
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s%lld", sep, (long long)v->dims[i]);
    }
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

int g_same_shape(const g_value *a, const g_value *b) {
    if (a->ndim != b->ndim || a->batched != b->batched) return 0;
    for (int i = a->batched ? 1 : 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

void g_set_shape_like(g_graph *g, int dst, int src) {
    g_value *d       = &g->values[dst];
    const g_value *s = &g->values[src];
    d->batched       = s->batched;
    d->ndim          = s->ndim;
    for (int i = 0; i < G_MAX_DIMS; i++)
        d->dims[i] = s->dims[i];
}

int g_root(const g_graph *g, int v) {
    while (v >= 0 && g->values[v].view_of >= 0)
        v = g->values[v].view_of;
    return v;
}

// ---------------------------------------------------------------------------------------
// Autodiff bookkeeping

int g_grad_of(const g_graph *g, int v) {
    return v >= 0 ? g->values[v].grad : -1;
}

int g_needs_grad(const g_graph *g, int v) {
    return v >= 0 && g->values[v].requires_grad;
}

int g_new_grad(g_graph *g, int v, ampx_dtype dtype) {
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.grad", g->values[v].name);
    return g_add_value_like(g, name, ROLE_GRADIENT, dtype, v);
}

int g_emit(g_graph *g, int of, int op, const int *in, int n_in, const int *out, int n_out,
           const g_attrs *a) {
    int id = g_add_node(g, op, in, n_in, out, n_out, a, g->nodes[of].name);
    if (id < 0) return -1;
    g_node *n = &g->nodes[id];
    n->phase  = PHASE_BACKWARD;
    n->of     = of;
    n->dtype  = n_out > 0 && out[0] >= 0 ? g->values[out[0]].dtype : g->nodes[of].dtype;
    n->why    = WHY_BACKWARD;
    n->line   = g->nodes[of].line;
    n->col    = g->nodes[of].col;
    return id;
}

int g_contribute(g_graph *g, int v, int contrib, int of) {
    g_value *val = &g->values[v];
    if (val->grad < 0) {
        val->grad = contrib;
        return 0;
    }
    /* A second contribution: the sum goes to a new f32 value, so a gradient that another
     * value shares (an add's dy) is never written in place. */
    int sum = g_new_grad(g, v, AMPX_F32);
    if (sum < 0) return -1;
    int in[2] = {val->grad, contrib};
    g_attrs a = {.alpha = 1};
    if (g_emit(g, of, OP_ADD, in, 2, &sum, 1, &a) < 0) return -1;
    g->values[v].grad = sum;
    return 0;
}

int g_param_grad(g_graph *g, int param, int *accumulate) {
    if (g->values[param].master >= 0) param = g->values[param].master;
    g_value *p = &g->values[param];
    if (p->grad >= 0) {
        *accumulate = 1;
        return p->grad;
    }
    *accumulate = 0;
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.grad", p->name);
    int gv = g_add_value(g, name, ROLE_GRADIENT, AMPX_F32, 0, p->ndim, p->dims);
    if (gv < 0) return -1;
    g->values[param].grad = gv;
    return gv;
}
