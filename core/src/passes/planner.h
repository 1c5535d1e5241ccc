/* planner.h — arena offsets for the values that live within one micro-batch, by liveness
 * over the node order, first fit, largest first; the peak is the arena's size. */
#ifndef AMPX_PASSES_PLANNER_H
#define AMPX_PASSES_PLANNER_H

#include <stdint.h>

#include "ampx/dtype.h"
#include "graph/graph.h"

#define PLAN_ALIGN 64

typedef struct plan {
    uint64_t *offset;  /* per value: its byte offset in the arena (views: their root's) */
    uint8_t *in_arena; /* per value: 1 when it lives in the arena */
    uint64_t arena_bytes, unplanned_bytes;
    /* the most bytes live at once (placement may leave the arena larger), at node peak_node,
     * and those bytes by dtype */
    uint64_t live_peak, live_by_dtype[AMPX_DTYPE_COUNT];
    int peak_node;
} plan;

/* Values in the arena: activations and gradients within a micro-batch of `rows` rows.
 * persistent[v] says which gradients live outside it (parameter gradients). With keep, no
 * two values share a place (a sampler's KV cache reads values of earlier calls). */
int plan_make(const g_graph *g, uint64_t rows, const uint8_t *persistent, int keep, plan *p);
void plan_free(plan *p);

#endif
