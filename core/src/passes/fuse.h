/* fuse.h — the fusion pass: each dense layer (matmul, bias, optional activation) becomes one
 * dense node, a GEMM with an epilogue, where the backend takes that epilogue. Host-only: the
 * caller answers for the backend. */
#ifndef AMPX_PASSES_FUSE_H
#define AMPX_PASSES_FUSE_H

#include "graph/graph.h"

/* 1 when the backend runs GEMM with dtypes {A, B, C} and the epilogue. */
typedef int (*fuse_epilogue_fn)(void *user, const ampx_dtype *dtypes);

/* Rewrites the forward graph before autodiff; returns the number of layers fused. */
int fuse_dense(g_graph *g, fuse_epilogue_fn epilogue, void *user);

#endif
