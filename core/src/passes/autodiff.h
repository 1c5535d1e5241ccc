/* autodiff.h — reverse-mode differentiation of the forward graph: walks the forward nodes
 * backwards and lets each op's rule append its backward nodes to the same graph. */
#ifndef AMPX_PASSES_AUTODIFF_H
#define AMPX_PASSES_AUTODIFF_H

#include <stddef.h>

#include "base/error.h"
#include "graph/graph.h"

/* Marks which values need gradients and appends the backward nodes; the loss node seeds the
 * walk (its forward writes its prediction's gradient). recompute (RECOMPUTE_* bits of
 * config/settings.h, 0: none) names the forward nodes whose outputs the backward recomputes
 * just before it reads them instead of keeping them. Returns 0, or -1 with err set. */
int autodiff(g_graph *g, unsigned recompute, ampx_err e);

#endif
