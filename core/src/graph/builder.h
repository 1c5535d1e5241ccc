/* builder.h — the model builder: lowers a model file's "inputs", "layers" or "nodes" and
 * "loss" into the IR. Composite layers expand into primitive nodes (dense = matmul + bias
 * [+ activation]); every error is positioned at the offending JSON value. */
#ifndef AMPX_GRAPH_BUILDER_H
#define AMPX_GRAPH_BUILDER_H

#include "config/schema.h"
#include "graph/graph.h"

/* Reads root's inputs, layers/nodes and loss into g (initialized, empty). backend_ops (bit
 * i: backend op i) chooses between a layer's fused and composite form. Returns 0, or -1
 * with the error in c. */
int g_build(jctx *c, const json_value *root, uint64_t backend_ops, g_graph *g);

#endif
