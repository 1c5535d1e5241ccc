/* executor.c — the executor the op rules run against: its answers to graph/exec.h (the
 * g_exec_ops table every executor's handle points to), and the loop over the nodes. */
#include "exec/executor.h"

#include <stddef.h>
#include <stdio.h>

#include "ampx/dtype.h"
#include "graph/ops.h"

/* The handle is the executor's first member, so a pointer to it is a pointer to the executor. */
_Static_assert(offsetof(executor, h) == 0, "the g_exec handle must be the executor's first member");
static executor *of(g_exec *h) {
    return (executor *)h;
}
static const executor *of_const(const g_exec *h) {
    return (const executor *)h;
}

/* Whether value v is offset to the rows of positions [pos0, pos0 + pos_n) in this node's
 * run (an incremental one's KV_ROWS node, and v laid out a row a position), and the bytes
 * from its start to them. */
static int pos_rows(const executor *x, int v) {
    return x->rows_only && x->kv_rows[v];
}

static uint64_t pos_offset(const executor *x, int v, const g_value *val) {
    if (!pos_rows(x, v)) return 0;
    return x->pos0 * ((uint64_t)g_elems(val) / x->seq) * ampx_dtype_size(val->dtype);
}

ampx_tensor exec_tensor(const executor *x, int v) {
    const g_value *val = &x->g->values[v];
    if (v == x->g->loss) return x->loss;
    int root = g_root(x->g, v);
    ampx_tensor t;
    if (x->own[root]) {
        uint64_t off = val->role == ROLE_INPUT
                           ? x->row0 * (uint64_t)g_elems(val) * ampx_dtype_size(val->dtype)
                       : x->own_off ? x->own_off[root]
                                    : 0;
        t            = (ampx_tensor){.buf = x->own[root], .offset = off, .dtype = val->dtype};
    } else {
        t = (ampx_tensor){.buf = x->arena, .offset = x->p->offset[root], .dtype = val->dtype};
    }
    t.offset += pos_offset(x, v, val);
    return t;
}

uint64_t exec_numel(const executor *x, int v) {
    const g_value *val = &x->g->values[v];
    uint64_t n         = g_numel(val, x->rows);
    if (pos_rows(x, v)) n = n / x->seq * x->pos_n;
    return n;
}

/* On a placed run, value v (or a block outside the values, slot n_values + PLACE_*) on the
 * member of the node being run; a failed copy leaves its status for x_call to return. */
static ampx_tensor placed(executor *x, int slot, ampx_tensor t) {
    if (!x->pl || x->pl->cur < 0 || x->place_st) return t;
    x->place_st = place_touch_slot(x, slot, &t);
    return t;
}

static ampx_tensor x_tensor(g_exec *h, int v) {
    executor *x = of(h);
    return placed(x, g_root(x->g, v), exec_tensor(x, v));
}

static uint64_t x_numel(const g_exec *h, int v) {
    return exec_numel(of_const(h), v);
}

static uint64_t x_positions(const g_exec *h, uint64_t *first) {
    const executor *x = of_const(h);
    *first            = x->rows_only || x->upto ? x->pos0 : 0;
    return x->rows_only || x->upto ? x->pos_n : 0;
}

static int x_training(const g_exec *h) {
    return of_const(h)->training;
}

static int x_accumulate(const g_exec *h, const g_node *n) {
    return n->a.accumulate || of_const(h)->micro > 0;
}

static uint64_t x_micro_batches(const g_exec *h) {
    return of_const(h)->micro_batches;
}

static ampx_tensor x_scalars(g_exec *h) {
    executor *x = of(h);
    return placed(x, x->g->n_values + PLACE_SCALARS, x->scalars);
}

static uint64_t x_dropout_seed(const g_exec *h, const g_node *n) {
    const executor *x = of_const(h);
    /* the forward node's mask name keys the mask, so its backward finds the same one, and a
     * fused attention node the one of the composite's dropout node */
    int fwd     = n->phase == PHASE_BACKWARD ? n->of : (int)(n - x->g->nodes);
    uint64_t id = g_mask_key(x->g, fwd);
    uint64_t mb = (uint64_t)x->micro * (x->replicas ? x->replicas : 1) + x->replica;
    uint64_t hi = ampx_hash32(x->seed ^ 0xD809u, x->step * 65536u + mb);
    uint64_t lo = ampx_hash32(hi, id);
    return hi << 32 | lo;
}

static call_ctx *x_call_of(executor *x) {
    return x->pl && x->pl->cur >= 0 ? x->pl->calls[x->pl->cur] : x->call;
}

static ampx_status x_zero(g_exec *h, const g_node *n, int v) {
    executor *x   = of(h);
    ampx_tensor t = x_tensor(h, v);
    call_ctx *c   = x_call_of(x);
    if (x->place_st) return x->place_st;
    uint64_t bytes = exec_numel(x, v) * ampx_dtype_size(t.dtype);
    char who[G_NAME_MAX + 8];
    snprintf(who, sizeof who, "%s: fill", n->name);
    /* buffer_fill takes whole patterns (backend.h): a zero pattern as wide as the length and
     * the offset allow, so an odd-sized bf16 value (3 x 5 weights: 30 bytes) is zeroed too */
    uint32_t w = (bytes | t.offset) % 4 == 0 ? 4 : (bytes | t.offset) % 2 == 0 ? 2 : 1;
    return call_check(c, c->ifc->buffer_fill(c->ctx, t.buf, t.offset, bytes, 0, w), who);
}

static ampx_status x_call(g_exec *h, const g_node *n, uint32_t op, const void *args) {
    executor *x = of(h);
    if (x->place_st) return x->place_st;
    call_ctx *c = x_call_of(x);
    c->phase    = n->phase == PHASE_BACKWARD ? CALL_BACKWARD : CALL_FORWARD;
    c->dtype    = n->dtype;
    return call_op(c, n->name, op, args);
}

/* Slot s of the fp8 state block (backend.h: scale[n], scale_inv[n], history[H][n]). */
static ampx_tensor x_fp8(g_exec *h, int slot, int what) {
    executor *x = of(h);
    if (!x->fp8_state.buf || slot < 0 || (uint64_t)slot >= x->fp8_n ||
        ((what == GX_FP8_AMAX || what == GX_FP8_COUNTS) && (!x->training || x->fp8_frozen)))
        return gx_null(AMPX_F32);
    if (what == GX_FP8_COUNTS) {
        ampx_tensor c = x->fp8_counts;
        c.offset += 8 * (uint64_t)slot;
        return c.buf ? placed(x, x->g->n_values + PLACE_FP8_COUNTS, c) : gx_null(AMPX_I32);
    }
    ampx_tensor t = x->fp8_state;
    t.offset += 4 * ((uint64_t)what * x->fp8_n + (uint64_t)slot);
    return placed(x, x->g->n_values + PLACE_FP8_STATE, t);
}

const struct g_exec_ops exec_ops = {
    .tensor        = x_tensor,
    .numel         = x_numel,
    .positions     = x_positions,
    .training      = x_training,
    .accumulate    = x_accumulate,
    .micro_batches = x_micro_batches,
    .scalars       = x_scalars,
    .dropout_seed  = x_dropout_seed,
    .zero          = x_zero,
    .call          = x_call,
    .fp8           = x_fp8,
};

ampx_status exec_run(executor *x, int first, int last) {
    if (x->pl) place_run_begin(x, first);
    for (int i = first; i < last; i++) {
        const g_node *n = &x->g->nodes[i];
        int mode        = x->kv_mode ? x->kv_mode[i] : KV_FULL;
        if (mode == KV_SKIP) continue;
        x->rows_only = mode == KV_ROWS;
        x->upto      = mode == KV_UPTO;
        x->place_st  = AMPX_OK;
        int64_t t0   = x->pl && x->pl->measure ? place_idle_ns(x) : 0;
        if (x->pl) place_node_begin(x, i);
        ampx_status st = g_rule_of(n->op)->forward(&x->h, x->g, n);
        if (!st) st = x->place_st;
        /* what a member other than home wrote goes home at once when a hook reads it */
        if (x->pl && !st) st = place_node_end(x, i, x->after_node != NULL);
        if (t0 && !st) st = place_timed(x, i, t0);
        x->rows_only = x->upto = 0;
        if (!st && x->after_node) st = x->after_node(x, i, x->after_user);
        if (st) return st;
    }
    return x->pl ? place_run_end(x) : AMPX_OK;
}
