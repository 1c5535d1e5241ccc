/* fuse.h — the fusion pass: each dense layer (matmul, bias, optional activation) becomes one
 * dense node, a GEMM with an epilogue, where the backend takes that epilogue. Host-only: what
 * the backend takes comes as data (caps.h). */
#ifndef AMPX_PASSES_FUSE_H
#define AMPX_PASSES_FUSE_H

#include "graph/graph.h"
#include "passes/caps.h"

/* Rewrites the forward graph before autodiff; returns the number of layers fused. */
int fuse_dense(g_graph *g, const pass_caps *caps);

#endif
