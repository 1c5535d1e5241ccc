/* copies.h — working copies cast on use (train.weight_copies "cast", or "auto" where keeping
 * them would cost more than they save). Host-only, on the trainer's copy of the forward graph
 * before fusion and autodiff. */
#ifndef AMPX_PASSES_COPIES_H
#define AMPX_PASSES_COPIES_H

#include "graph/graph.h"

/* Turns each working copy (a parameter value with a master) into an activation written by a
 * cast of its master, placed just before the copy's first forward reader. The copy keeps its
 * master, so the GEMMs' weight gradients still go to the master's f32 gradient, and the
 * master no longer names a copy, so the trainer keeps none and the optimizer writes none.
 * Autodiff with RECOMPUTE_COPIES casts again before the backward reads the copy. Returns the
 * number of copies turned, or -1 when the graph has no room for the casts. */
int copies_cast_on_use(g_graph *g);

#endif
