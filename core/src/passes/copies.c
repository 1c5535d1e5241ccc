/* copies.c — working copies cast on use (copies.h). A kept copy costs 2 bytes a weight for
 * the whole run; a cast copy lives from its cast to its forward reader, and its second cast
 * from just before the backward's reader to that reader: a layer's weights at a time. The
 * cast rounds the master to nearest even, the same bits the optimizer writes into a kept
 * copy after each applied step, so training is bit-identical either way (stochastic rounding
 * is the exception, and keeps its copies). */
#include "passes/copies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops.h"

static int is_kept_copy(const g_graph *g, int v) {
    return v >= 0 && g->values[v].role == ROLE_PARAM && g->values[v].master >= 0;
}

/* Appends the cast writing copy v from its master; -1 when the graph is full. */
static int add_cast(g_graph *g, int v, const g_node *reader) {
    g_value *c             = &g->values[v];
    int master             = c->master;
    c->role                = ROLE_ACTIVATION;
    c->producer            = -1;
    g->values[master].copy = -1;
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.50s->%s", g->values[master].name, ampx_dtype_name(c->dtype));
    int id = g_add_node(g, OP_CAST, &master, 1, &v, 1, NULL, name);
    if (id < 0) return -1;
    g->nodes[id].dtype = c->dtype;
    g->nodes[id].why   = WHY_COPY;
    g->nodes[id].line  = reader->line;
    g->nodes[id].col   = reader->col;
    c->producer        = id;
    return 0;
}

int copies_cast_on_use(g_graph *g) {
    int n_old = g->n_forward, turned = 0;
    for (int v = 0; v < g->n_values; v++)
        turned += is_kept_copy(g, v);
    if (!turned) return 0;
    if (g->n_nodes != n_old || n_old + turned > G_MAX_NODES) return -1;
    g_node *old = malloc(sizeof *old * (size_t)n_old);
    if (!old) return -1;
    memcpy(old, g->nodes, sizeof *old * (size_t)n_old);
    g->n_nodes = 0; /* the nodes again in order, each cast in front of the copy's first reader */
    int rc     = 0;
    for (int i = 0; i < n_old && !rc; i++) {
        for (int k = 0; k < old[i].n_in && !rc; k++)
            if (is_kept_copy(g, old[i].in[k])) rc = add_cast(g, old[i].in[k], &old[i]);
        int id = rc ? -1
                    : g_add_node(g, old[i].op, old[i].in, old[i].n_in, old[i].out, old[i].n_out,
                                 &old[i].a, old[i].name);
        if (id < 0) {
            rc = -1;
            break;
        }
        g->nodes[id] = old[i];
        for (int k = 0; k < old[i].n_out; k++)
            if (old[i].out[k] >= 0 && g->values[old[i].out[k]].producer == i)
                g->values[old[i].out[k]].producer = id;
        if (g->loss_node == i) g->loss_node = id;
    }
    free(old);
    g->n_forward = g->n_nodes;
    return rc ? -1 : turned;
}
