/* diff.h — two backends compared op by op on the same training step (`ampx diff`). Not
 * installed: the hook of the project's own command line, exported by libampx as inject.h's
 * are. */
#ifndef AMPX_DIFF_H
#define AMPX_DIFF_H

#include <stdint.h>

#include "ampx/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One output of one op, as trainer a and trainer b computed it from the same inputs. */
typedef struct ampx_diff_entry {
    int index;         /* position in execution order */
    const char *value; /* the tensor ("h0.ln1", "fc1.weight", "fc1.weight (m)") */
    const char *node;  /* the node, or the step's op for the update ("adamw") */
    const char *op;    /* the node kind ("layernorm", "matmul_dw") or "update" */
    const char *phase; /* "forward", "backward" or "update" */
    ampx_dtype dtype;
    uint64_t n;      /* elements */
    uint64_t differ; /* elements that are not the same bits */
    double max_abs;  /* the largest |a - b| */
    double max_ulps; /* the largest |a - b| in units of the last place of a's largest |value| */
    double norm_rel; /* ||a - b|| / ||a|| (0 when both are 0) */
    double tol;      /* what the dtypes allow of norm_rel: twice the conformance bound */
    int beyond;      /* norm_rel > tol, or a value finite on one side only */
} ampx_diff_entry;

/* Returns non-zero to stop the comparison (the entries so far stand). */
typedef int (*ampx_diff_fn)(void *user, const ampx_diff_entry *e);

/* Runs the next training step of a and of b, whose models must lower to the same graph
 * (build both for the ops both backends have), one node at a time: before each node, every
 * tensor it reads or writes on b is set to a's, so each comparison sees one op's difference
 * alone. Then the update (AMP pass, optimizer, scaler) from a's gradients and state on both.
 * fn gets every output in execution order; *n_beyond counts those beyond their tolerance.
 * The trainers are left mid-step: free them afterwards. AMPX_ERR_INVALID with the reason in
 * err when the graphs differ. */
AMPX_API ampx_status ampx_diff_step(ampx_trainer *a, ampx_trainer *b, ampx_diff_fn fn, void *user,
                                    int *n_beyond, char *err, size_t err_cap);

#ifdef __cplusplus
}
#endif

#endif
