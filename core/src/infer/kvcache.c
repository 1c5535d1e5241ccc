/* kvcache.c — a token model's logits at the last position of a window, reusing what earlier
 * runs left on the device (a KV cache): sampling appends one token to the window, and only
 * that position is computed.
 *
 * Every forward node of a GPT works on each position's row alone, except attention (and the
 * position table, indexed by position). So an incremental run issues each such node over
 * the rows of the new positions only (KV_ROWS: the executor offsets every input and
 * activation tensor to those rows and counts only them), and the attention nodes over the
 * whole window as always (KV_FULL): they read the keys and values of the earlier positions
 * from the rows of their input (the QKV projection) that the earlier runs wrote, which is
 * the cache. A causal attention's rows up to the new position see nothing past it, so the
 * rows past it (stale, from earlier windows) change nothing that is read; every row that is
 * read is the result of the very ops the whole forward issues for it. The loss is not run.
 *
 * The cache holds the window's token ids and how many positions are computed; a call first
 * finds how many leading ids match, then computes the rest, or runs the whole forward when
 * none match (the first call, or a window shifted left once full: learned positions change
 * every row). Any other run of the trainer (a step, an evaluation) empties it.
 *
 * Used only where it is exact: every forward node is a per-position kind or a causal
 * attention (fused, or its composite's pieces), every per-position value is [B, T, ..], and
 * the planner gave the values the attention nodes read from earlier runs storage no other
 * forward value shares. Otherwise every call runs the whole forward (kv_why says why). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "graph/ops.h"
#include "exec/trainer.h"
#include "exec/inputs.h"
#include "infer/kvcache.h"

/* Ops that compute each position's row from that position's rows alone. */
static int per_position(const g_node *n) {
    switch (n->op) {
    case OP_MATMUL:
    case OP_MATMUL_FP8:
    case OP_DENSE_FP8:
    case OP_BIAS:
    case OP_ADD:
    case OP_MUL:
    case OP_SCALE:
    case OP_CAST:
    case OP_ACT:
    case OP_DROPOUT:
    case OP_LAYERNORM:
    case OP_EMBED:
    case OP_POSITION:
    case OP_DENSE:
    case OP_FUSED: return 1;
    case OP_SOFTMAX: return !n->a.causal; /* a causal one masks by its row's position */
    default: return 0;
    }
}

/* Ops of an attention that may run over the whole window with stale rows past the new
 * positions: causal ones, and those that keep positions apart (heads, products). */
static int attention_piece(const g_node *n) {
    switch (n->op) {
    case OP_ATTENTION:
    case OP_SOFTMAX: return n->a.causal;
    case OP_SPLIT_HEADS:
    case OP_MERGE_HEADS:
    case OP_BMM:
    case OP_DROPOUT:
    case OP_SCALE:
    case OP_CAST:
    case OP_ACT:
    case OP_MUL:
    case OP_ADD: return 1;
    default: return 0;
    }
}

/* A value of one window's positions on its first axis after the batch. */
static int positional(const g_graph *g, int v, int64_t T) {
    const g_value *val = &g->values[v];
    return val->batched && val->ndim >= 2 && val->dims[1] == T;
}

static int fail_why(ampx_trainer *t, const char *fmt, const char *name) {
    snprintf(t->kv.why, sizeof t->kv.why, fmt, name);
    return -1;
}

/* 1 when value v's storage overlaps a value another forward node writes. */
static int shares_storage(const ampx_trainer *t, int v) {
    const g_graph *g = &t->g;
    int root         = g_root(g, v);
    uint64_t off = t->plan.offset[root], end = off + g_numel(&g->values[root], (uint64_t)t->B) *
                                                         ampx_dtype_size(g->values[root].dtype);
    for (int i = 0; i < g->n_forward; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++) {
            int o = g->nodes[i].out[k], r = o < 0 ? -1 : g_root(g, o);
            if (o < 0 || r == root || !t->plan.in_arena[r]) continue;
            uint64_t ro = t->plan.offset[r], re = ro + g_numel(&g->values[r], (uint64_t)t->B) *
                                                           ampx_dtype_size(g->values[r].dtype);
            if (ro < end && off < re) return 1;
        }
    return 0;
}

/* Whether node n reads inputs and activations laid out a row a position alone (pos). */
static int inputs_positional(const ampx_trainer *t, const g_node *n, const uint8_t *pos) {
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0) continue;
        g_role r = t->g.values[v].role;
        if ((r == ROLE_INPUT || r == ROLE_ACTIVATION) && !pos[v]) return 0;
    }
    return 1;
}

/* Node i's mode, marking its outputs: pos[v] 1 for a value laid out a row a position, made[v]
 * 1 for one a KV_ROWS node writes (only the new positions' part of it each run); -1 when it
 * cannot run incrementally (kv.why says why). cache[v] marks the values a KV_FULL node reads
 * from earlier runs: the cache. */
static int node_mode(ampx_trainer *t, int i, uint8_t *pos, uint8_t *made, uint8_t *cache) {
    const g_graph *g = &t->g;
    const g_node *n  = &g->nodes[i];
    int64_t T        = t->in.data.window;
    if (i == g->loss_node || n->op == OP_XENT || n->op == OP_MSE) return KV_SKIP;
    int heads = n->op == OP_SPLIT_HEADS; /* its rule writes the new positions of each head */
    if ((per_position(n) || heads) && inputs_positional(t, n, pos)) {
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && pos[n->in[k]] && !positional(g, n->in[k], T))
                return fail_why(t, "\"%s\" reads a value that is not one row per position",
                                n->name);
        for (int k = 0; k < n->n_out; k++) {
            if (n->out[k] < 0) continue;
            /* an fp8 product's weight codes (W_q): quantized whole again at every call */
            if ((n->op == OP_MATMUL_FP8 || n->op == OP_DENSE_FP8) && k == 2) continue;
            if (!heads && !positional(g, n->out[k], T))
                return fail_why(t, "\"%s\" is not one row per position", n->name);
            pos[n->out[k]] = (uint8_t)!heads, made[n->out[k]] = 1;
        }
        return KV_ROWS;
    }
    if (!attention_piece(n))
        return fail_why(t, "\"%s\" mixes positions (only causal attention may)", n->name);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && made[n->in[k]]) cache[n->in[k]] = 1;
    /* the context of the whole window: one row per position again */
    if ((n->op == OP_ATTENTION || n->op == OP_MERGE_HEADS) && positional(g, n->out[0], T))
        pos[n->out[0]] = 1;
    return n->op == OP_ATTENTION ? KV_UPTO : KV_FULL;
}

/* The modes of the forward nodes, or kv.why. */
static ampx_status kv_plan(ampx_trainer *t) {
    const g_graph *g = &t->g;
    t->kv.planned    = 1;
    t->kv.mode       = calloc((size_t)g->n_forward + 1, 1);
    t->kv.rows       = calloc((size_t)g->n_values, 1);
    t->kv.ids        = calloc((size_t)t->in.data.window, sizeof *t->kv.ids);
    uint8_t *pos = t->kv.rows, *made = calloc((size_t)g->n_values, 1),
            *cache = calloc((size_t)g->n_values, 1);
    if (!t->kv.mode || !pos || !t->kv.ids || !made || !cache) {
        free(made), free(cache);
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    }
    int ok = t->in.tokens && t->in.data.window > 1;
    if (!ok) snprintf(t->kv.why, sizeof t->kv.why, "not a token model with a window");
    for (int i = 0; i < g->n_inputs; i++)
        if (t->in.offset[i] == -3)
            pos[g->inputs[i]] = made[g->inputs[i]] =
                (uint8_t)positional(g, g->inputs[i], t->in.data.window);
    for (int i = 0; ok && i < g->n_forward; i++) {
        int m = node_mode(t, i, pos, made, cache);
        if (m < 0) ok = 0;
        t->kv.mode[i] = (uint8_t)(m < 0 ? KV_FULL : m);
    }
    if (ok && !pos[g->logits])
        ok = fail_why(t, "the logits \"%s\" are not one row per position",
                      g->values[g->logits].name) == 0;
    for (int v = 0; ok && v < g->n_values; v++)
        if (cache[v] && shares_storage(t, v))
            ok =
                fail_why(t, "\"%s\" shares its storage with another value", g->values[v].name) == 0;
    free(made), free(cache);
    t->kv.ok = ok;
    return AMPX_OK;
}

void kv_free(ampx_trainer *t) {
    free(t->kv.mode), free(t->kv.rows), free(t->kv.ids);
    t->kv.mode = t->kv.rows = NULL, t->kv.ids = NULL;
}

/* Positions [first, len) of ids on the device, then the forward over their rows. */
static ampx_status run_positions(ampx_trainer *t, const int32_t *ids, int64_t first, int64_t len) {
    const g_graph *g = &t->g;
    ampx_status st   = AMPX_OK;
    for (int i = 0; i < g->n_inputs && !st; i++)
        if (t->in.offset[i] == -3)
            st = tr_check(t,
                          t->ifc->buffer_write(t->ctx, t->in.train[i], (uint64_t)first * 4,
                                               ids + first, (uint64_t)(len - first) * 4),
                          "buffer_write");
    if (st) return st;
    inputs_bind(t, 0);
    t->x.training = 0;
    t->x.micro    = 0;
    t->x.loss     = tr_tensor(t->eval_loss, 0, AMPX_F32);
    t->x.row0     = 0;
    t->x.rows     = 1;
    t->x.kv_mode  = t->kv.mode;
    t->x.kv_rows  = t->kv.rows;
    t->x.pos0     = (uint64_t)first;
    t->x.pos_n    = (uint64_t)(len - first);
    t->x.seq      = (uint64_t)t->in.data.window;
    st            = exec_run(&t->x, 0, g->n_forward);
    t->x.kv_mode  = NULL;
    t->x.training = 1;
    t->x.rows     = (uint64_t)t->B;
    return st;
}

int ampx_trainer_cache(ampx_trainer *t, const char **why) {
    if (!t->kv.planned && kv_plan(t)) {
        if (why) *why = t->error;
        return 0;
    }
    if (why) *why = t->kv.ok ? "" : t->kv.why;
    return t->kv.ok;
}

/* The cache brought to the window ids[0 .. len): the positions after the prefix it shares
 * with the last window computed alone. *same: that prefix's length, or 0 when nothing is
 * shared (or the model has no cache), where the caller runs the whole forward instead
 * (which kv_filled records). */
ampx_status kv_advance(ampx_trainer *t, const int32_t *ids, int64_t len, int64_t *same) {
    *same = 0;
    if (!t->kv.planned && kv_plan(t)) return AMPX_ERR_NO_MEMORY;
    int64_t n = 0;
    while (t->kv.ok && n < t->kv.len && n < len - 1 && ids[n] == t->kv.ids[n])
        n++;
    if (n == 0) return AMPX_OK;
    t->kv.len      = 0;
    ampx_status st = run_positions(t, ids, n, len);
    if (st) return st;
    memcpy(t->kv.ids + n, ids + n, sizeof *ids * (size_t)(len - n));
    t->kv.len = len;
    *same     = n;
    return AMPX_OK;
}

/* After a whole forward of one window: it is what the cache holds. */
void kv_filled(ampx_trainer *t, const int32_t *ids, int64_t rows) {
    if (rows != 1 || !t->kv.ids) return;
    memcpy(t->kv.ids, ids, sizeof *ids * (size_t)t->in.data.window);
    t->kv.len = t->in.data.window;
}
