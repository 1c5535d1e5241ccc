/* place.c — the probe of a placed graph and the copies its run needs (place.h). */
#include "exec/place.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "exec/executor.h"
#include "graph/ops.h"

// ---------------------------------------------------------------------------------------
// Which slots a node writes

/* The storage slot of value v: its root (the loss, parameters, inputs: their own). */
static int slot_of(const g_graph *g, int v) {
    return g_root(g, v);
}

/* Whether node n writes slot s: one of its outputs' roots, a state value it updates in place
 * (batch norm's running statistics), or a block outside the values. */
static int node_writes(const g_graph *g, const g_node *n, int s) {
    if (s >= g->n_values) return 1;
    if (g->values[s].role == ROLE_STATE) return 1;
    for (int o = 0; o < n->n_out; o++)
        if (n->out[o] >= 0 && slot_of(g, n->out[o]) == s) return 1;
    return 0;
}

/* Per slot, 1 for a value that lives within one run (the plan's arena): nothing holds it
 * before its producer writes it, so the first member to touch it needs no copy. Parameters'
 * gradients, the loss and the blocks persist. NULL when out of memory. */
static uint8_t *transient_map(const g_graph *g) {
    uint8_t *t = calloc((size_t)g->n_values + PLACE_PSEUDO, 1);
    if (!t) return NULL;
    for (int v = 0; v < g->n_values; v++)
        t[v] = (g->values[v].role == ROLE_ACTIVATION || g->values[v].role == ROLE_GRADIENT) &&
               v != g->loss;
    for (int p = 0; p < g->n_values; p++)
        if (g->values[p].role == ROLE_PARAM && g->values[p].grad >= 0) t[g->values[p].grad] = 0;
    return t;
}

// ---------------------------------------------------------------------------------------
// The probe: each node's rule against a recording executor

typedef struct recorder {
    g_exec h; /* first */
    const g_graph *g;
    uint64_t rows;
    int training, node, n;
    ampx_backend *const *members;
    place_probe *p;
    int failed;
} recorder;

_Static_assert(offsetof(recorder, h) == 0, "the handle must be the recorder's first member");

static recorder *rec(g_exec *h) {
    return (recorder *)h;
}
static const recorder *rec_c(const g_exec *h) {
    return (const recorder *)h;
}

static void touch(recorder *r, int s) {
    place_probe *p   = r->p;
    place_touch *t   = &p->touch[r->node];
    const g_node *nd = &r->g->nodes[r->node];
    for (int k = t->first; k < t->first + t->count; k++)
        if (p->slot[k] == s) return;
    if (p->n_touched == p->cap) {
        int cap = p->cap ? 2 * p->cap : 1024;
        int *sl = realloc(p->slot, sizeof *sl * (size_t)cap);
        if (sl) p->slot = sl;
        uint8_t *w = realloc(p->writes, (size_t)cap);
        if (w) p->writes = w;
        if (!sl || !w) {
            r->failed = 1;
            return;
        }
        p->cap = cap;
    }
    p->slot[p->n_touched]   = s;
    p->writes[p->n_touched] = (uint8_t)node_writes(r->g, nd, s);
    p->n_touched++;
    t->count++;
}

/* A distinct non-null handle per slot: the calls are only looked at, never run. */
static ampx_tensor fake(int s, ampx_dtype d) {
    return (ampx_tensor){.buf = (ampx_buffer *)(uintptr_t)(4096 + 64 * (uint64_t)s), .dtype = d};
}

static ampx_tensor r_tensor(g_exec *h, int v) {
    recorder *r = rec(h);
    int s       = slot_of(r->g, v);
    touch(r, s);
    return fake(s, r->g->values[v].dtype);
}
static uint64_t r_numel(const g_exec *h, int v) {
    return g_numel(&rec_c(h)->g->values[v], rec_c(h)->rows);
}
static uint64_t r_positions(const g_exec *h, uint64_t *first) {
    (void)h;
    *first = 0;
    return 0;
}
static int r_training(const g_exec *h) {
    return rec_c(h)->training;
}
static int r_accumulate(const g_exec *h, const g_node *n) {
    (void)h;
    return n->a.accumulate;
}
static uint64_t r_micro_batches(const g_exec *h) {
    (void)h;
    return 1;
}
static ampx_tensor r_scalars(g_exec *h) {
    recorder *r = rec(h);
    touch(r, r->g->n_values + PLACE_SCALARS);
    return fake(r->g->n_values + PLACE_SCALARS, AMPX_F32);
}
static uint64_t r_dropout_seed(const g_exec *h, const g_node *n) {
    (void)h, (void)n;
    return 0;
}
static ampx_status r_zero(g_exec *h, const g_node *n, int v) {
    (void)n;
    r_tensor(h, v);
    return AMPX_OK;
}
static ampx_status r_call(g_exec *h, const g_node *n, uint32_t op, const void *args) {
    recorder *r  = rec(h);
    pass_need *q = &r->p->need[n - r->g->nodes];
    q->ops++;
    for (int m = 0; m < r->n; m++) {
        if (!(q->ok >> m & 1) || call_accepts(r->members[m], op, args)) continue;
        q->ok &= (uint8_t) ~(1u << m);
        q->refused_op[m] = (uint8_t)op;
        q->no_slot[m]    = !ampx_backend_op_slot(r->members[m], op);
        call_event e;
        call_describe(op, args, &e);
        memcpy(q->refused_dtypes[m], e.dtypes, sizeof q->refused_dtypes[m]);
        q->refused_dtypes[m][sizeof q->refused_dtypes[m] - 1] = 0;
    }
    return AMPX_OK;
}
static ampx_tensor r_fp8(g_exec *h, int slot, int what) {
    recorder *r = rec(h);
    (void)slot;
    if ((what == GX_FP8_AMAX || what == GX_FP8_COUNTS) && !r->training) return gx_null(AMPX_F32);
    int s = r->g->n_values + (what == GX_FP8_COUNTS ? PLACE_FP8_COUNTS : PLACE_FP8_STATE);
    touch(r, s);
    return fake(s, what == GX_FP8_COUNTS ? AMPX_I32 : AMPX_F32);
}

static const struct g_exec_ops recorder_ops = {
    .tensor        = r_tensor,
    .numel         = r_numel,
    .positions     = r_positions,
    .training      = r_training,
    .accumulate    = r_accumulate,
    .micro_batches = r_micro_batches,
    .scalars       = r_scalars,
    .dropout_seed  = r_dropout_seed,
    .zero          = r_zero,
    .call          = r_call,
    .fp8           = r_fp8,
};

int place_probe_run(place_probe *p, const g_graph *g, uint64_t rows, int training,
                    ampx_backend *const *members, int n) {
    memset(p, 0, sizeof *p);
    p->need  = calloc((size_t)g->n_nodes + 1, sizeof *p->need);
    p->touch = calloc((size_t)g->n_nodes + 1, sizeof *p->touch);
    if (!p->need || !p->touch) return -1;
    recorder r = {.h        = {.ops = &recorder_ops},
                  .g        = g,
                  .rows     = rows ? rows : 1,
                  .training = training,
                  .n        = n,
                  .members  = members,
                  .p        = p};
    int last   = training ? g->n_nodes : g->n_forward;
    for (int i = 0; i < g->n_nodes; i++) {
        pass_need *q = &p->need[i];
        q->ok        = (uint8_t)((1u << n) - 1);
        memset(q->refused_op, AMPX_OP_COUNT, sizeof q->refused_op);
        p->touch[i].first = p->n_touched;
        r.node            = i;
        if (i < last) g_rule_of(g->nodes[i].op)->forward(&r.h, g, &g->nodes[i]);
        if (r.failed) return -1;
    }
    return 0;
}

void place_probe_free(place_probe *p) {
    free(p->need), free(p->touch), free(p->slot), free(p->writes);
    memset(p, 0, sizeof *p);
}

// ---------------------------------------------------------------------------------------
// The copies, simulated

uint64_t place_simulate(const place_probe *p, const g_graph *g, const int8_t *node_member, int home,
                        int first, int last, const uint64_t *sizes, int keep, uint64_t *per_node) {
    int n_slots    = g->n_values + PLACE_PSEUDO;
    uint8_t *valid = malloc((size_t)n_slots), *fresh = transient_map(g);
    if (!valid || !fresh) {
        free(valid), free(fresh);
        return 0;
    }
    for (int s = 0; s < n_slots; s++)
        valid[s] = !keep && fresh[s] ? 0 : (uint8_t)(1u << home);
    free(fresh);
    uint64_t total = 0;
    for (int i = first; i < last; i++) {
        int m                = node_member[i];
        uint64_t bytes       = 0;
        const place_touch *t = &p->touch[i];
        for (int k = t->first; k < t->first + t->count; k++) {
            int s = p->slot[k];
            if (valid[s] && !(valid[s] >> m & 1)) bytes += sizes[s], valid[s] |= (uint8_t)(1u << m);
        }
        for (int k = t->first; k < t->first + t->count; k++)
            if (p->writes[k]) valid[p->slot[k]] = (uint8_t)(1u << m);
        if (per_node) per_node[i] = bytes;
        total += bytes;
    }
    for (int s = 0; s < n_slots; s++)
        if (valid[s] && !(valid[s] >> home & 1)) total += sizes[s];
    free(valid);
    return total;
}

// ---------------------------------------------------------------------------------------
// The executor's copies

/* Where slot s lives at home, from its first byte. */
static ampx_tensor home_base(const executor *x, int s) {
    const g_graph *g = x->g;
    if (s >= g->n_values) {
        switch (s - g->n_values) {
        case PLACE_SCALARS: return x->scalars;
        case PLACE_FP8_STATE: return x->fp8_state;
        default: return x->fp8_counts;
        }
    }
    const g_value *val = &g->values[s];
    if (s == g->loss) return x->loss;
    if (x->own[s]) {
        uint64_t off = val->role == ROLE_INPUT
                           ? x->row0 * (uint64_t)g_elems(val) * ampx_dtype_size(val->dtype)
                       : x->own_off ? x->own_off[s]
                                    : 0;
        return (ampx_tensor){.buf = x->own[s], .offset = off, .dtype = val->dtype};
    }
    return (ampx_tensor){.buf = x->arena, .offset = x->p->offset[s], .dtype = val->dtype};
}

static uint64_t slot_bytes(const executor *x, int s) {
    const g_graph *g = x->g;
    if (s >= g->n_values) return x->pl->pseudo_bytes[s - g->n_values];
    if (s == g->loss) return 4;
    const g_value *v = &g->values[s];
    return g_numel(v, x->rows) * ampx_dtype_size(v->dtype);
}

/* Slot s on member m, from its first byte (a mirror, made on first use). */
static ampx_status member_base(executor *x, int s, int m, ampx_tensor *out) {
    exec_place *pl = x->pl;
    if (m == pl->home) {
        *out = home_base(x, s);
        return AMPX_OK;
    }
    size_t k       = (size_t)m * (size_t)pl->n_slots + (size_t)s;
    uint64_t bytes = slot_bytes(x, s), alloc = (bytes + 3) / 4 * 4;
    call_ctx *c = pl->calls[m];
    if (!pl->mirror[k] || pl->mirror_bytes[k] < alloc) {
        if (pl->mirror[k]) c->ifc->buffer_free(c->ctx, pl->mirror[k]);
        pl->mirror[k]  = NULL;
        ampx_status st = call_check(
            c, c->ifc->buffer_alloc(c->ctx, alloc ? alloc : 4, &pl->mirror[k]), "buffer_alloc");
        if (st) return st;
        pl->mirror_bytes[k] = alloc;
    }
    ampx_dtype d = s < x->g->n_values ? x->g->values[s].dtype : AMPX_F32;
    *out         = (ampx_tensor){.buf = pl->mirror[k], .offset = 0, .dtype = d};
    return AMPX_OK;
}

/* Copies slot s from member `from` to member `to` through host memory. */
static ampx_status copy_slot(executor *x, int s, int from, int to) {
    exec_place *pl = x->pl;
    uint64_t bytes = slot_bytes(x, s);
    ampx_tensor src, dst;
    ampx_status st;
    if ((st = member_base(x, s, from, &src)) || (st = member_base(x, s, to, &dst))) return st;
    if (!bytes) return AMPX_OK;
    if (pl->staging_cap < bytes) {
        void *p = realloc(pl->staging, bytes);
        if (!p) return call_check(pl->calls[to], AMPX_ERR_NO_MEMORY, "placement staging");
        pl->staging     = p;
        pl->staging_cap = bytes;
    }
    call_ctx *a = pl->calls[from], *b = pl->calls[to];
    int64_t t0 = call_now_ns();
    if ((st = call_check(a, a->ifc->buffer_read(a->ctx, src.buf, src.offset, pl->staging, bytes),
                         "placement copy: buffer_read")) ||
        (st = call_check(b, b->ifc->buffer_write(b->ctx, dst.buf, dst.offset, pl->staging, bytes),
                         "placement copy: buffer_write")))
        return st;
    pl->moved[from][to] += bytes;
    pl->copies++;
    pl->copy_ns += (uint64_t)(call_now_ns() - t0);
    call_ctx *home = pl->calls[pl->home];
    if (home->observe) {
        call_event e = {.op     = AMPX_OP_COUNT,
                        .who    = s < x->g->n_values ? x->g->values[s].name : "scalars",
                        .phase  = home->phase,
                        .dtype  = dst.dtype,
                        .bytes  = 2 * bytes,
                        .t0_ns  = t0,
                        .t1_ns  = call_now_ns(),
                        .status = AMPX_OK,
                        .track  = -1};
        snprintf(e.shapes, sizeof e.shapes, "%s -> %s", a->ifc->name, b->ifc->name);
        snprintf(e.dtypes, sizeof e.dtypes, "%s", ampx_dtype_name(dst.dtype));
        home->observe(home->observe_user, &e);
    }
    return AMPX_OK;
}

/* Makes slot s valid on member m. */
static ampx_status ensure(executor *x, int s, int m) {
    exec_place *pl = x->pl;
    uint8_t v      = pl->valid[s];
    if (!v || v >> m & 1) return AMPX_OK;
    if ((pl->fault == 1 && m == pl->home) ||
        (pl->fault == 2 && s == x->g->n_values + PLACE_SCALARS &&
         pl->mirror[(size_t)m * (size_t)pl->n_slots + (size_t)s]))
        return AMPX_OK;
    int from       = v >> pl->home & 1 ? pl->home : __builtin_ctz(v);
    ampx_status st = copy_slot(x, s, from, m);
    if (!st) pl->valid[s] |= (uint8_t)(1u << m);
    return st;
}

/* Tests plant a fault to see the byte-identity checks fail: AMPX_TEST_PLACE_FAULT=
 * "no-writeback" (what a node writes on another backend never comes home) or "stale-scalars"
 * (the scalars block is never copied to another backend after its first copy). */
static int planted(const char *what) {
    const char *e = getenv("AMPX_TEST_PLACE_FAULT");
    return e && strcmp(e, what) == 0;
}

void place_run_begin(executor *x, int first) {
    exec_place *pl = x->pl;
    call_ctx *home = pl->calls[pl->home];
    for (int m = 0; m < pl->n; m++) { /* a timeline watches every member's ops */
        pl->calls[m]->observe      = home->observe;
        pl->calls[m]->observe_user = home->observe_user;
        pl->calls[m]->sync_each    = home->sync_each;
    }
    for (int s = 0; s < pl->n_slots; s++)
        pl->valid[s] = first == 0 && !pl->keep && pl->transient[s] ? 0 : (uint8_t)(1u << pl->home);
    pl->cur = -1;
}

void place_node_begin(executor *x, int node) {
    x->pl->cur       = x->pl->node_member[node];
    x->pl->n_touched = 0;
}

ampx_status place_touch_slot(executor *x, int s, ampx_tensor *t) {
    exec_place *pl = x->pl;
    ampx_status st = ensure(x, s, pl->cur);
    if (st) return st;
    int seen = 0;
    for (int k = 0; k < pl->n_touched && !seen; k++)
        seen = pl->touched[k] == s;
    if (!seen) pl->touched[pl->n_touched++] = s;
    ampx_tensor base;
    if ((st = member_base(x, s, pl->cur, &base))) return st;
    if (pl->cur != pl->home) t->buf = base.buf, t->offset -= home_base(x, s).offset;
    return AMPX_OK;
}

ampx_status place_node_end(executor *x, int node, int write_through) {
    exec_place *pl  = x->pl;
    const g_node *n = &x->g->nodes[node];
    ampx_status st  = AMPX_OK;
    int m           = pl->cur;
    for (int k = 0; k < pl->n_touched && !st; k++) {
        int s = pl->touched[k];
        if (!node_writes(x->g, n, s)) continue;
        pl->valid[s] = (uint8_t)(1u << m);
        if (write_through && m != pl->home) st = ensure(x, s, pl->home);
    }
    pl->cur = -1;
    return st;
}

int64_t place_idle_ns(executor *x) {
    exec_place *pl = x->pl;
    for (int m = 0; m < pl->n; m++)
        if (pl->calls[m]->ifc->synchronize(pl->calls[m]->ctx)) break;
    return call_now_ns();
}

ampx_status place_timed(executor *x, int node, int64_t t0) {
    exec_place *pl = x->pl;
    int m          = pl->node_member[node];
    call_ctx *c    = pl->calls[m];
    ampx_status st = call_check(c, c->ifc->synchronize(c->ctx), "synchronize");
    pl->node_ns[(size_t)node * (size_t)pl->n + (size_t)m] += (double)(call_now_ns() - t0);
    return st;
}

ampx_status place_run_end(executor *x) {
    exec_place *pl = x->pl;
    ampx_status st = AMPX_OK;
    for (int s = 0; s < pl->n_slots && !st; s++)
        st = ensure(x, s, pl->home);
    return st;
}

int place_init(exec_place *pl, const g_graph *g) {
    pl->n_slots      = g->n_values + PLACE_PSEUDO;
    size_t n         = (size_t)pl->n_slots;
    pl->valid        = calloc(n, 1);
    pl->touched      = calloc(n, sizeof *pl->touched);
    pl->mirror       = calloc(n * PLACE_MAX, sizeof *pl->mirror);
    pl->mirror_bytes = calloc(n * PLACE_MAX, sizeof *pl->mirror_bytes);
    pl->transient    = transient_map(g);
    pl->fault        = planted("no-writeback") ? 1 : planted("stale-scalars") ? 2 : 0;
    pl->cur          = -1;
    return pl->valid && pl->touched && pl->mirror && pl->mirror_bytes && pl->transient ? 0 : -1;
}

void place_free(exec_place *pl) {
    for (int m = 0; pl->mirror && m < pl->n; m++)
        for (int s = 0; s < pl->n_slots; s++) {
            ampx_buffer *b = pl->mirror[(size_t)m * (size_t)pl->n_slots + (size_t)s];
            if (b && pl->calls[m]) pl->calls[m]->ifc->buffer_free(pl->calls[m]->ctx, b);
        }
    free(pl->valid), free(pl->touched), free(pl->mirror), free(pl->mirror_bytes), free(pl->staging);
    free(pl->transient);
    pl->transient = NULL;
    pl->valid = NULL, pl->touched = NULL, pl->mirror = NULL, pl->mirror_bytes = NULL;
    pl->staging = NULL;
}
