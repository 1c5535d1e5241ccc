/* autodiff.h — reverse-mode differentiation of the forward graph: walks the forward nodes
 * backwards and lets each op's rule append its backward nodes to the same graph. */
#ifndef AMPX_PASSES_AUTODIFF_H
#define AMPX_PASSES_AUTODIFF_H

#include <stddef.h>

#include "graph/graph.h"

/* Marks which values need gradients and appends the backward nodes; the loss node seeds the
 * walk (its forward writes its prediction's gradient). Returns 0, or -1 with err set. */
int autodiff(g_graph *g, char *err, size_t cap);

#endif
