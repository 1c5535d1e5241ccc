/* diff.c — `ampx diff`'s engine (core/internal/ampx/diff.h): two trainers of the same graph
 * on two backends run one step node by node. Before each node, every tensor the node reads or
 * writes on trainer b is overwritten with trainer a's bytes, so the outputs compared after it
 * differ by that one op's arithmetic on each backend, never by what earlier ops left behind.
 * The update (the AMP pass, the optimizer and the scaler's update) is compared the same way,
 * from a's gradients, weights, optimizer state and scalars on both.
 *
 * What an output may differ by: each backend is held by its conformance to 2 u(out) + 4 K
 * 2^-24 of the exact result, normwise (K the op's reduction length, docs/CONFORMANCE.md), so
 * two conforming backends may differ by twice that; fused attention may also round its
 * probabilities to bf16 (backend.h), which adds 4 u(bf16) where its inputs are bf16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/diff.h"
#include "ampx/dtype.h"
#include "graph/ops.h"
#include "exec/trainer.h"
#include "exec/step.h"

/* Bytes of value v as trainer t holds it now (t->x placed it), into a new buffer. */
static ampx_status read_value(ampx_trainer *t, int v, unsigned char **out, uint64_t *bytes) {
    ampx_tensor ts = exec_tensor(&t->x, v);
    *bytes         = exec_numel(&t->x, v) * ampx_dtype_size(ts.dtype);
    *out           = malloc(*bytes + 1);
    if (!*out)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory reading \"%s\"", t->g.values[v].name);
    return tr_check(t, t->ifc->buffer_read(t->ctx, ts.buf, ts.offset, *out, *bytes), "buffer_read");
}

/* Trainer a's bytes of value v written over trainer b's. */
static ampx_status copy_value(ampx_trainer *a, ampx_trainer *b, int v) {
    unsigned char *raw = NULL;
    uint64_t bytes;
    ampx_status st = read_value(a, v, &raw, &bytes);
    ampx_tensor tb = exec_tensor(&b->x, v);
    if (!st)
        st = tr_check(b, b->ifc->buffer_write(b->ctx, tb.buf, tb.offset, raw, bytes),
                      "buffer_write");
    free(raw);
    return st;
}

static double element(const unsigned char *raw, ampx_dtype dt, uint64_t i) {
    uint16_t h;
    float f;
    int32_t k;
    switch (dt) {
    case AMPX_F32: memcpy(&f, raw + 4 * i, 4); return f;
    case AMPX_BF16: memcpy(&h, raw + 2 * i, 2); return ampx_bf16_to_f32(h);
    case AMPX_F16: memcpy(&h, raw + 2 * i, 2); return ampx_f16_to_f32(h);
    case AMPX_E4M3:
    case AMPX_E5M2: return ampx_fp8_to_f32(raw[i], dt);
    default: memcpy(&k, raw + 4 * i, 4); return k;
    }
}

/* The unit in the last place of dt at |x| (the subnormal spacing below the normals). */
static double ulp(ampx_dtype dt, double x) {
    int p = dt == AMPX_BF16 ? 8 : dt == AMPX_F16 ? 11 : 24, emin = dt == AMPX_F16 ? -14 : -126;
    int e = x == 0 || !isfinite(x) ? emin : ilogb(x);
    return ldexp(1.0, (e < emin ? emin : e) - (p - 1));
}

static double unit_roundoff(ampx_dtype dt) {
    return dt == AMPX_BF16 ? 0x1p-8 : dt == AMPX_F16 ? 0x1p-11 : 0x1p-24;
}

/* Fills e's figures from a's and b's bytes of n elements of dtype dt. */
static void compare(const unsigned char *ra, const unsigned char *rb, ampx_dtype dt, uint64_t n,
                    ampx_diff_entry *e) {
    size_t es = ampx_dtype_size(dt);
    double d2 = 0, a2 = 0, amax = 0;
    e->dtype = dt, e->n = n;
    for (uint64_t i = 0; i < n && ampx_dtype_is_float(dt); i++) {
        double x = element(ra, dt, i);
        if (isfinite(x)) a2 += x * x, amax = fmax(amax, fabs(x));
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!memcmp(ra + i * es, rb + i * es, es)) continue;
        e->differ++;
        double x = element(ra, dt, i), y = element(rb, dt, i);
        if (!ampx_dtype_is_float(dt) || isfinite(x) != isfinite(y) || isnan(x) != isnan(y)) {
            e->beyond = 1;
            continue;
        }
        if (!isfinite(x)) { /* two NaNs (another payload) agree; opposite infinities do not */
            if (!(isnan(x) && isnan(y)) && x != y) e->beyond = 1;
            continue;
        }
        double d = fabs(x - y);
        if (d > e->max_abs) e->max_abs = d;
        d2 += d * d;
    }
    e->max_ulps = e->max_abs / ulp(dt, amax);
    e->norm_rel = d2 == 0 ? 0 : sqrt(d2) / fmax(sqrt(a2), 1e-300);
    if (e->norm_rel > e->tol) e->beyond = 1;
}

// ---------------------------------------------------------------------------------------
// The tolerance of a node's outputs

static double row_k(double len) {
    return 2.0 * (16.0 + sqrt(len)); /* docs/CONFORMANCE.md's row ops, twice */
}

/* K of node n: the length of the sums behind one output element. */
static double node_k(const ampx_trainer *t, const g_node *n) {
    const g_graph *g = &t->g;
    const g_value *x = &g->values[n->in[0]];
    double last = (double)g_last(x), all = (double)exec_numel(&t->x, n->in[0]);
    double rows = all / (last > 0 ? last : 1);
    switch (n->op) {
    case OP_MATMUL:
    case OP_MATMUL_FP8:
    case OP_DENSE_FP8:
    case OP_DENSE:
    case OP_MATMUL_DX:
    case OP_MATMUL_DX_FP8: return last / (n->a.groups > 1 ? n->a.groups : 1);
    case OP_MATMUL_DW:
    case OP_MATMUL_DW_FP8:
    case OP_BIAS_GRAD:
    case OP_POSITION_GRAD:
    case OP_EMBED_BWD: return rows;
    case OP_BMM: return fmax(last, x->ndim > 1 ? (double)x->dims[x->ndim - 2] : 1);
    case OP_ATTENTION:
    case OP_ATTENTION_BWD: return (x->ndim > 1 ? (double)x->dims[x->ndim - 2] : 1) + last;
    case OP_LAYERNORM:
    case OP_LAYERNORM_BWD:
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_XENT: return row_k(last);
    case OP_BATCHNORM:
    case OP_BATCHNORM_BWD: return row_k(all / (double)x->dims[n->a.axis]);
    case OP_REDUCE: return (double)x->dims[n->a.axis];
    case OP_MSE: return all;
    case OP_COL2IM:
    case OP_POOL:
    case OP_POOL_BWD: return (double)(n->a.kh * n->a.kw);
    default: return 2;
    }
}

static double node_tol(const ampx_trainer *t, const g_node *n, ampx_dtype out) {
    double tol    = 2.0 * (2.0 * unit_roundoff(out) + 4.0 * node_k(t, n) * 0x1p-24);
    ampx_dtype in = t->g.values[n->in[0]].dtype;
    if ((n->op == OP_ATTENTION || n->op == OP_ATTENTION_BWD) && in != AMPX_F32)
        tol += 4.0 * unit_roundoff(AMPX_BF16);
    return tol;
}

// ---------------------------------------------------------------------------------------
// Node by node

static int same_graph(const ampx_trainer *a, const ampx_trainer *b, ampx_err e) {
    const g_graph *ga = &a->g, *gb = &b->g;
    int n = ga->n_nodes < gb->n_nodes ? ga->n_nodes : gb->n_nodes;
    for (int i = 0; i <= n; i++) {
        const g_node *x = i < ga->n_nodes ? &ga->nodes[i] : NULL;
        const g_node *y = i < gb->n_nodes ? &gb->nodes[i] : NULL;
        if (!x && !y) return 0;
        int same = x && y && x->op == y->op && !strcmp(x->name, y->name) && x->n_out == y->n_out &&
                   x->dtype == y->dtype;
        if (!same) {
            err_set(e,
                    "the two backends lower the model to different graphs (node %d: \"%s\" %s "
                    "and \"%s\" %s)",
                    i, x ? x->name : "(none)", x ? g_rule_of(x->op)->name : "",
                    y ? y->name : "(none)", y ? g_rule_of(y->op)->name : "");
            return -1;
        }
    }
    return 0;
}

/* Runs node i on both, b from a's tensors, and reports each output. */
static ampx_status diff_node(ampx_trainer *a, ampx_trainer *b, int i, ampx_diff_fn fn, void *user,
                             int *n_beyond, int *stop) {
    const g_node *n = &a->g.nodes[i];
    ampx_status st  = AMPX_OK;
    for (int k = 0; k < n->n_in && !st; k++)
        if (n->in[k] >= 0) st = copy_value(a, b, n->in[k]);
    for (int k = 0; k < n->n_out && !st; k++)
        if (n->out[k] >= 0) st = copy_value(a, b, n->out[k]);
    if (st || (st = exec_run(&a->x, i, i + 1)) || (st = exec_run(&b->x, i, i + 1))) return st;
    for (int k = 0; k < n->n_out && !st && !*stop; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        unsigned char *ra = NULL, *rb = NULL;
        uint64_t bytes;
        if (!(st = read_value(a, v, &ra, &bytes)) && !(st = read_value(b, v, &rb, &bytes))) {
            ampx_dtype dt     = a->g.values[v].dtype;
            ampx_diff_entry e = {.index = i,
                                 .value = a->g.values[v].name,
                                 .node  = n->name,
                                 .op    = g_rule_of(n->op)->name,
                                 .phase = n->phase == PHASE_BACKWARD ? "backward" : "forward",
                                 .tol   = node_tol(a, n, dt)};
            compare(ra, rb, dt, bytes / ampx_dtype_size(dt), &e);
            *n_beyond += e.beyond;
            *stop = fn(user, &e);
        }
        free(ra), free(rb);
    }
    return st;
}

// ---------------------------------------------------------------------------------------
// The update

typedef struct state_ref {
    ampx_buffer *ba, *bb;
    uint64_t off, n;
    ampx_dtype dt;
    const char *what;  /* "" (the master), "grad", "m", "v", "momentum", "copy" */
    const char *owner; /* the parameter's name, "ampx" for the scalars block */
} state_ref;

/* The tensors of the update: each parameter's master, gradient, working copy and optimizer
 * state, then the scalars block (32 words, compared as i32). */
static int update_refs(ampx_trainer *a, ampx_trainer *b, state_ref *r, int cap) {
    int n = 0, adam = a->m->cfg.opt.kind == OPT_ADAMW;
    for (int i = 0; i < a->n_params && n + 5 < cap; i++) {
        const param *p = &a->params[i], *q = &b->params[i];
        r[n++] = (state_ref){p->master, q->master, 0, p->n, AMPX_F32, "", p->name};
        r[n++] = (state_ref){p->grad, q->grad, p->grad_off, p->n, AMPX_F32, "grad", p->name};
        if (p->copy)
            r[n++] = (state_ref){p->copy, q->copy, 0, p->n, p->copy_dtype, "copy", p->name};
        if (p->s1)
            r[n++] = (state_ref){p->s1, q->s1, 0, p->n, AMPX_F32, adam ? "m" : "momentum", p->name};
        if (p->s2) r[n++] = (state_ref){p->s2, q->s2, 0, p->n, AMPX_F32, "v", p->name};
    }
    r[n++] = (state_ref){a->scalars, b->scalars, 0,     sizeof(ampx_scalars) / 4,
                         AMPX_I32,   "scalars",  "ampx"};
    return n;
}

static ampx_status read_ref(ampx_trainer *t, ampx_buffer *buf, const state_ref *r,
                            unsigned char *out) {
    return tr_check(t, t->ifc->buffer_read(t->ctx, buf, r->off, out, r->n * ampx_dtype_size(r->dt)),
                    "buffer_read");
}

static ampx_status diff_update(ampx_trainer *a, ampx_trainer *b, ampx_diff_fn fn, void *user,
                               int *n_beyond, int *stop) {
    enum { MAX_REFS = 5 * TR_MAX_PARAMS + 1 };
    state_ref *r = malloc(sizeof *r * MAX_REFS);
    if (!r) return tr_fail(a, AMPX_ERR_NO_MEMORY, "out of memory");
    int nr = update_refs(a, b, r, MAX_REFS), index = a->g.n_nodes; /* after the last node */
    ampx_status st = AMPX_OK;
    for (int k = 0; k < nr && !st; k++) { /* a's state on b */
        unsigned char *raw = malloc(r[k].n * ampx_dtype_size(r[k].dt) + 1);
        if (!raw) st = tr_fail(a, AMPX_ERR_NO_MEMORY, "out of memory");
        if (!st && !(st = read_ref(a, r[k].ba, &r[k], raw)))
            st = tr_check(b,
                          b->ifc->buffer_write(b->ctx, r[k].bb, r[k].off, raw,
                                               r[k].n * ampx_dtype_size(r[k].dt)),
                          "buffer_write");
        free(raw);
    }
    if (!st && !(st = tr_step_update(a))) st = tr_step_update(b);
    const char *opt = a->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd";
    for (int k = 0; k < nr && !st && !*stop; k++) {
        uint64_t bytes    = r[k].n * ampx_dtype_size(r[k].dt);
        unsigned char *ra = malloc(bytes + 1), *rb = malloc(bytes + 1);
        char name[G_NAME_MAX + 16];
        if (!ra || !rb) st = tr_fail(a, AMPX_ERR_NO_MEMORY, "out of memory");
        if (!st && !(st = read_ref(a, r[k].ba, &r[k], ra)) &&
            !(st = read_ref(b, r[k].bb, &r[k], rb))) {
            snprintf(name, sizeof name, "%s%s%s%s", r[k].owner, *r[k].what ? " (" : "", r[k].what,
                     *r[k].what ? ")" : "");
            int scalars       = r[k].dt == AMPX_I32;
            ampx_diff_entry e = {.index = index + k,
                                 .value = name,
                                 .node  = scalars ? "scaler_update" : opt,
                                 .op    = "update",
                                 .phase = "update",
                                 .tol   = 2.0 * (2.0 * unit_roundoff(r[k].dt) + 32 * 0x1p-24)};
            compare(ra, rb, r[k].dt, r[k].n, &e);
            *n_beyond += e.beyond;
            *stop = fn(user, &e);
        }
        free(ra), free(rb);
    }
    free(r);
    return st;
}

ampx_status ampx_diff_step(ampx_trainer *a, ampx_trainer *b, ampx_diff_fn fn, void *user,
                           int *n_beyond, char *err, size_t err_cap) {
    *n_beyond = 0;
    if (same_graph(a, b, ERR(err, err_cap))) return AMPX_ERR_INVALID;
    ampx_status st = tr_step_begin(a);
    if (!st) st = tr_step_begin(b);
    int stop = 0;
    for (int i = 0; i < a->g.n_nodes && !st && !stop; i++)
        st = diff_node(a, b, i, fn, user, n_beyond, &stop);
    if (!st && !stop) st = diff_update(a, b, fn, user, n_beyond, &stop);
    if (st)
        err_set(ERR(err, err_cap), "%s",
                *ampx_trainer_error(a) ? ampx_trainer_error(a) : ampx_trainer_error(b));
    return st;
}
