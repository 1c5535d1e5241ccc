/* embed.c — token embedding: a gather of f32 table rows by i32 ids, and its backward, the
 * f32 scatter-add of the output gradient into the table's gradient. The table keeps its f32
 * master (the policy does not give it a working copy unless a GEMM reads it in another
 * dtype: a tied output head). */
#include <stdio.h>

#include "ampx/dtype.h"
#include "graph/ops.h"

/* embed: in ids [.., T] (i32), table [V, D]; out [.., T, D] */
static int embed_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *ids = &g->values[n->in[0]], *w = &g->values[n->in[1]];
    if (ids->dtype != AMPX_I32 || ids->ndim >= G_MAX_DIMS) {
        snprintf(e->msg, sizeof e->msg,
                 "an embedding reads i32 token ids of at most %d axes; \"%s\" is %s",
                 G_MAX_DIMS - 2, ids->name, ampx_dtype_name(ids->dtype));
        e->input = 0;
        return -1;
    }
    g_value *y = &g->values[n->out[0]];
    y->batched = ids->batched;
    y->ndim    = ids->ndim + 1;
    for (int i = 0; i < ids->ndim; i++)
        y->dims[i] = ids->dims[i];
    y->dims[ids->ndim] = w->dims[1];
    return 0;
}

static ampx_embedding_args embed_args(g_exec *x, const g_graph *g, const g_node *n, int table) {
    const g_value *w = &g->values[table];
    return (ampx_embedding_args){.size            = sizeof(ampx_embedding_args),
                                 .n               = gx_numel(x, n->in[0]),
                                 .vocab           = (uint64_t)w->dims[0],
                                 .dim             = (uint64_t)w->dims[1],
                                 .table_or_dtable = gx_tensor(x, table),
                                 .ids             = gx_tensor(x, n->in[0])};
}

static ampx_status embed_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_embedding_args a = embed_args(x, g, n, n->in[1]);
    a.y_or_dy             = gx_tensor(x, n->out[0]);
    return gx_call(x, n, AMPX_OP_EMBEDDING_FWD, &a);
}

static int embed_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int w = n->in[1], dy = g_grad_of(g, n->out[0]);
    if (dy < 0 || !g_needs_grad(g, w)) return 0;
    g_attrs a = {0};
    int dw    = g_param_grad(g, w, &a.accumulate);
    int in[2] = {n->in[0], dy};
    return dw < 0 || g_emit(g, self, OP_EMBED_BWD, in, 2, &dw, 1, &a) < 0 ? -1 : 0;
}

const g_rule g_rule_embed = {
    "embedding", {AMPX_OP_EMBEDDING_FWD, AMPX_OP_COUNT}, embed_shape, embed_fwd, embed_bwd};

/* dtable (+)= scatter of dy by ids: in ids, dy; out dtable (f32). The op adds, so a first
 * writer clears the gradient first. */
static ampx_status embed_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_embedding_args a = embed_args(x, g, n, n->out[0]);
    a.y_or_dy             = gx_tensor(x, n->in[1]);
    if (!gx_accumulate(x, n)) {
        ampx_status st = gx_zero(x, n, n->out[0]);
        if (st) return st;
    }
    return gx_call(x, n, AMPX_OP_EMBEDDING_BWD, &a);
}

const g_rule g_rule_embed_bwd = {
    "embedding_bwd", {AMPX_OP_EMBEDDING_BWD, AMPX_OP_COUNT}, NULL, embed_bwd_fwd, NULL};

// ---------------------------------------------------------------------------------------
// position: y = x + table[:T], a learned position table of P >= T rows [P, D] of which an
// example of T positions reads the first T (GPT-2's wpe of 1024 rows trained at a shorter
// context). Row-major, the first T rows are the first T*D elements: the add reads them in
// place, and the backward writes only them; the rows past T keep a zero gradient (the arena
// starts zeroed and nothing else writes there), as llm.c's encoder_backward leaves them.

static int position_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]];
    if (x->ndim != 3 || w->ndim != 2 || w->dims[1] != x->dims[2] || w->dims[0] < x->dims[1]) {
        char sx[64], sw[64];
        g_shape_str(x, sx, sizeof sx);
        g_shape_str(w, sw, sizeof sw);
        snprintf(e->msg, sizeof e->msg,
                 "a position table %s does not cover \"%s\" of shape %s (rows >= positions, "
                 "the same features)",
                 sw, x->name, sx);
        e->input = 0;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    return 0;
}

/* T*D: the elements of the table one example reads */
static uint64_t position_cols(const g_graph *g, const g_node *n) {
    const g_value *x = &g->values[n->in[0]];
    return (uint64_t)(x->dims[1] * x->dims[2]);
}

/* x + the table's first T rows, broadcast over the examples (the bias add's op) */
static ampx_status position_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return g_row_add_fwd(x, g, n, position_cols(g, n));
}

static int position_bwd(g_graph *g, int self) {
    return g_row_add_bwd(g, self, OP_POSITION_GRAD);
}

const g_rule g_rule_position = {
    "position", {AMPX_OP_ADD, AMPX_OP_COUNT}, position_shape, position_fwd, position_bwd};

/* dtable[:T] (+)= sum over examples of dy: in dy [.., T, D]; out dtable [P, D] (f32) */
static ampx_status position_grad_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *dy     = &g->values[n->in[0]];
    uint64_t cols         = (uint64_t)(dy->dims[1] * dy->dims[2]);
    ampx_bias_grad_args a = {.size       = sizeof a,
                             .accumulate = (uint32_t)gx_accumulate(x, n),
                             .rows       = gx_numel(x, n->in[0]) / cols,
                             .cols       = cols,
                             .dy         = gx_tensor(x, n->in[0]),
                             .db         = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_BIAS_GRAD, &a);
}

const g_rule g_rule_position_grad = {
    "position_grad", {AMPX_OP_BIAS_GRAD, AMPX_OP_COUNT}, NULL, position_grad_fwd, NULL};
