/* planner.c — live intervals over the execution order (forward then backward nodes), then
 * first-fit placement, largest first. A view extends its root's interval. */
#include "passes/planner.h"

#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"

typedef struct item {
    uint64_t bytes, offset;
    int first, last, value;
} item;

static int by_size_desc(const void *a, const void *b) {
    const item *p = a, *q = b;
    return p->bytes < q->bytes ? 1 : p->bytes > q->bytes ? -1 : p->value - q->value;
}

/* The node at which the most bytes are live, and their split by dtype. */
static void live_peak(const g_graph *g, const item *items, int k, plan *p) {
    p->live_peak = 0;
    p->peak_node = -1;
    memset(p->live_by_dtype, 0, sizeof p->live_by_dtype);
    for (int i = 0; i < g->n_nodes; i++) {
        uint64_t live = 0;
        for (int a = 0; a < k; a++)
            if (items[a].first <= i && i <= items[a].last) live += items[a].bytes;
        if (live <= p->live_peak) continue;
        p->live_peak = live;
        p->peak_node = i;
    }
    for (int a = 0; a < k && p->peak_node >= 0; a++)
        if (items[a].first <= p->peak_node && p->peak_node <= items[a].last)
            p->live_by_dtype[g->values[items[a].value].dtype] += items[a].bytes;
}

int plan_make(const g_graph *g, uint64_t rows, const uint8_t *persistent, int keep, plan *p) {
    int nv      = g->n_values;
    p->offset   = calloc((size_t)nv, sizeof *p->offset);
    p->in_arena = calloc((size_t)nv, 1);
    int *first = malloc(sizeof(int) * (size_t)nv), *last = malloc(sizeof(int) * (size_t)nv);
    item *items = malloc(sizeof *items * (size_t)nv);
    if (!p->offset || !p->in_arena || !first || !last || !items) {
        free(first), free(last), free(items);
        plan_free(p);
        return -1;
    }
    for (int v = 0; v < nv; v++) {
        const g_value *val = &g->values[v];
        p->in_arena[v]     = (val->role == ROLE_ACTIVATION || val->role == ROLE_GRADIENT) &&
                         !persistent[v] && v != g->loss;
        first[v] = last[v] = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const g_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
            if (v < 0) continue;
            v = g_root(g, v);
            if (!p->in_arena[v]) continue;
            if (first[v] < 0) first[v] = i;
            last[v] = keep ? g->n_nodes : i;
        }
    }
    int k = 0;
    for (int v = 0; v < nv; v++)
        if (p->in_arena[v] && first[v] >= 0 && g->values[v].view_of < 0) {
            uint64_t b = g_numel(&g->values[v], rows) * ampx_dtype_size(g->values[v].dtype);
            items[k++] = (item){.bytes = (b + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN,
                                .first = first[v],
                                .last  = last[v],
                                .value = v};
        }
    qsort(items, (size_t)k, sizeof *items, by_size_desc);
    p->arena_bytes = p->unplanned_bytes = 0;
    for (int a = 0; a < k; a++) {
        item *it     = &items[a];
        uint64_t off = 0;
        p->unplanned_bytes += it->bytes;
        for (int moved = 1; moved;) { /* first fit among placed items that overlap in time */
            moved = 0;
            for (int b = 0; b < a; b++) {
                const item *q = &items[b];
                int in_time   = !(q->last < it->first || it->last < q->first);
                if (in_time && off < q->offset + q->bytes && q->offset < off + it->bytes) {
                    off   = q->offset + q->bytes;
                    moved = 1;
                }
            }
        }
        it->offset           = off;
        p->offset[it->value] = off;
        if (off + it->bytes > p->arena_bytes) p->arena_bytes = off + it->bytes;
    }
    for (int v = 0; v < nv; v++)
        if (g->values[v].view_of >= 0) p->offset[v] = p->offset[g_root(g, v)];
    live_peak(g, items, k, p);
    free(first), free(last), free(items);
    return 0;
}

void plan_free(plan *p) {
    free(p->offset);
    free(p->in_arena);
    p->offset   = NULL;
    p->in_arena = NULL;
}
