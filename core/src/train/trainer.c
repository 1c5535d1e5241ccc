/* trainer.c — training a model: creates the parameters, working copies and state, runs
 * autodiff and the planner on the model's graph, checks the backend has every op the graph
 * needs, and runs steps through the executor and the call layer, reading the device's
 * per-step records only when it logs.
 *
 * A step, on the device and in this order, with no host wait:
 *   for each micro-batch: the forward nodes; the loss (its record into the ring, the
 *   prediction's gradient seeded with the loss scale); the backward nodes (parameter
 *   gradients accumulate in f32); then unscale_check (flags into the ring); sum_squares
 *   (into the ring, for clipping and the norm); the optimizer (skips itself on found_inf);
 *   scaler_update; the scalars block is copied into the ring. A backend with AMP_PASS (ABI
 *   1.4) does the monitor's grad_stats, unscale_check and sum_squares as that one op, with
 *   the same results. */
#include "train/trainer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "graph/ops.h"
#include "obs/trace.h"
#include "passes/autodiff.h"

#define SLOT_SCALARS 0
#define SLOT_GSQ 128
#define SLOT_LOSS 136

ampx_status tr_fail(ampx_trainer *t, ampx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    t->error[0] = 0;
    err_vadd(ERR(t->error, sizeof t->error), fmt, ap);
    va_end(ap);
    return st;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Buffer calls and the step's own ops go through the call layer like the nodes' ops. */
static ampx_status check(ampx_trainer *t, ampx_status st, const char *what) {
    return call_check(&t->call, st, what);
}

static ampx_status step_op(ampx_trainer *t, uint32_t op, const void *args) {
    t->call.phase = op == AMPX_OP_SGD || op == AMPX_OP_ADAMW ? CALL_OPTIMIZER : CALL_AMP;
    t->call.dtype = op == AMPX_OP_CAST ? ((const ampx_cast_args *)args)->dst.dtype : AMPX_F32;
    return call_op(&t->call, "step", op, args);
}

static ampx_tensor buf_tensor(ampx_buffer *b, uint64_t off, ampx_dtype d) {
    return (ampx_tensor){.buf = b, .offset = off, .dtype = d};
}

// ---------------------------------------------------------------------------------------
// Micro-batches

/* Points the graph's inputs at the training or the held-out buffers. */
static void bind_inputs(ampx_trainer *t, int test) {
    for (int i = 0; i < t->g.n_inputs; i++)
        t->own[t->g.inputs[i]] = test ? t->in_test[i] : t->in_train[i];
}

/* One micro-batch: the forward nodes (and, training, the backward ones). */
static ampx_status micro_batch(ampx_trainer *t) {
    return exec_run(&t->x, 0, t->x.training ? t->g.n_nodes : t->g.n_forward);
}

// ---------------------------------------------------------------------------------------
// Parameters, state and constants

static void init_values(float *v, uint64_t n, g_init kind, float std, uint64_t fan_in,
                        uint64_t fan_out, uint64_t seed) {
    double limit = kind == INIT_GLOROT_UNIFORM ? sqrt(6.0 / (double)(fan_in + fan_out))
                                               : sqrt(6.0 / (double)fan_in);
    for (uint64_t i = 0; i < n; i++) {
        double u = data_uniform(seed, i), z;
        switch (kind) {
        case INIT_GLOROT_UNIFORM:
        case INIT_HE_UNIFORM: v[i] = (float)((2 * u - 1) * limit); break;
        case INIT_HE_NORMAL:
        case INIT_NORMAL:
            z    = sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * data_uniform(seed + 7, i));
            v[i] = (float)(z * (kind == INIT_NORMAL ? std : sqrt(2.0 / (double)fan_in)));
            break;
        case INIT_ZEROS: v[i] = 0; break;
        case INIT_ONES: v[i] = 1; break;
        }
    }
}

static ampx_status alloc_zero(ampx_trainer *t, uint64_t bytes, ampx_buffer **out) {
    ampx_status st = check(t, t->ifc->buffer_alloc(t->ctx, bytes ? bytes : 4, out), "buffer_alloc");
    if (st) return st;
    return check(t, t->ifc->buffer_fill(t->ctx, *out, 0, bytes ? bytes : 4, 0, 4), "buffer_fill");
}

static ampx_status write_values(ampx_trainer *t, ampx_buffer *b, const g_value *v, uint64_t n,
                                uint64_t seed) {
    float *host = malloc(n * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", v->name);
    if (v->role == ROLE_CONST)
        for (uint64_t i = 0; i < n; i++)
            host[i] = v->const_fill;
    else
        init_values(host, n, v->init, v->init_std, (uint64_t)v->fan_in, (uint64_t)v->fan_out, seed);
    ampx_status st = check(t, t->ifc->buffer_write(t->ctx, b, 0, host, n * 4), "buffer_write");
    free(host);
    return st;
}

static ampx_status cast_copy(ampx_trainer *t, const param *p) {
    ampx_cast_args c = {.size = sizeof c,
                        .n    = p->n,
                        .src  = buf_tensor(p->master, 0, AMPX_F32),
                        .dst  = buf_tensor(p->copy, 0, p->copy_dtype)};
    return step_op(t, AMPX_OP_CAST, &c);
}

static ampx_status add_param(ampx_trainer *t, int v) {
    const ampx_model *m = t->m;
    const g_value *val  = &t->g.values[v];
    if (t->n_params >= TR_MAX_PARAMS) return tr_fail(t, AMPX_ERR_INVALID, "too many parameters");
    param *p = &t->params[t->n_params];
    snprintf(p->name, sizeof p->name, "%s", val->name);
    p->value = v;
    p->n     = (uint64_t)g_elems(val);
    p->ndim  = val->ndim;
    for (int i = 0; i < val->ndim; i++)
        p->dims[i] = (uint64_t)val->dims[i];
    p->wd          = val->decay ? m->cfg.opt.weight_decay : 0;
    p->copy_dtype  = val->copy >= 0 ? t->g.values[val->copy].dtype : AMPX_F32;
    uint64_t bytes = p->n * 4;
    ampx_status st;
    if ((st = alloc_zero(t, bytes, &p->master))) return st; /* the gradient: grad_arena() */
    if (m->cfg.opt.kind == OPT_ADAMW || m->cfg.opt.momentum != 0)
        if ((st = alloc_zero(t, bytes, &p->s1))) return st;
    if (m->cfg.opt.kind == OPT_ADAMW && (st = alloc_zero(t, bytes, &p->s2))) return st;
    if (p->copy_dtype != AMPX_F32 && (st = alloc_zero(t, p->n * 2, &p->copy))) return st;
    if ((st = write_values(t, p->master, val, p->n,
                           m->cfg.train.seed * 1000003ull + (uint64_t)t->n_params * 7919ull + 1)))
        return st;
    if (p->copy_dtype != AMPX_F32 && (st = cast_copy(t, p))) return st;
    t->own[v] = p->master;
    if (val->copy >= 0) t->own[val->copy] = p->copy;
    t->n_params++;
    return AMPX_OK;
}

/* Parameters in the order the model declares them, state, constants. */
static ampx_status create_values(ampx_trainer *t) {
    ampx_status st;
    for (int v = 0; v < t->g.n_values; v++) {
        const g_value *val = &t->g.values[v];
        if (val->role == ROLE_PARAM && val->master < 0) {
            if ((st = add_param(t, v))) return st;
        } else if (val->role == ROLE_STATE || val->role == ROLE_CONST) {
            uint64_t n = (uint64_t)g_elems(val);
            if ((st = alloc_zero(t, n * 4, &t->own[v])) ||
                (st = write_values(t, t->own[v], val, n, 0)))
                return st;
            if (val->role == ROLE_STATE)
                t->state[t->n_state++] = (state_tensor){.value = v, .n = n, .buf = t->own[v]};
        }
    }
    return AMPX_OK;
}

/* Every op a node of the graph issues, and those of the step, must be there. */
static ampx_status check_ops(ampx_trainer *t) {
    for (int i = 0; i < t->g.n_nodes; i++) {
        const g_node *n = &t->g.nodes[i];
        const g_rule *r = g_rule_of(n->op);
        for (int k = 0; k < 4 && r->ops[k] != AMPX_OP_COUNT; k++)
            if (!ampx_backend_op_slot(t->be, r->ops[k]))
                return tr_fail(t, AMPX_ERR_UNSUPPORTED,
                               "backend %s has no %s, which node \"%s\" needs", t->ifc->name,
                               ampx_op_name(r->ops[k]), n->name);
    }
    /* cast writes the working copies, when there are any */
    int copies = 0;
    for (int v = 0; v < t->g.n_values; v++)
        copies |= t->g.values[v].master >= 0;
    uint32_t step[] = {AMPX_OP_UNSCALE_CHECK, AMPX_OP_SUM_SQUARES, AMPX_OP_SCALER_UPDATE,
                       t->m->cfg.opt.kind == OPT_ADAMW ? AMPX_OP_ADAMW : AMPX_OP_SGD,
                       copies ? AMPX_OP_CAST : AMPX_OP_SCALER_UPDATE};
    for (size_t i = 0; i < sizeof step / sizeof step[0]; i++)
        if (!ampx_backend_op_slot(t->be, step[i]))
            return tr_fail(t, AMPX_ERR_UNSUPPORTED, "backend %s has no %s, which training needs",
                           t->ifc->name, ampx_op_name(step[i]));
    return AMPX_OK;
}

/* A backend whose ops return OK and compute nothing would train "successfully": one small
 * GEMM of integers (exact in every dtype's f32 accumulation) is checked before anything
 * else runs. The full check is `ampx conformance`. */
static ampx_status self_check(ampx_trainer *t) {
    static const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, -1, 2, 0, -2, 3}; /* 2x3, 3x2 */
    float host[16] = {0}, c[4] = {-7, -7, -7, -7};
    memcpy(host, a, sizeof a);
    memcpy(host + 6, b, sizeof b);
    memcpy(host + 12, c, sizeof c);
    ampx_buffer *buf = NULL;
    ampx_status st   = check(t, t->ifc->buffer_alloc(t->ctx, sizeof host, &buf), "buffer_alloc");
    if (st) return st;
    if (!(st = check(t, t->ifc->buffer_write(t->ctx, buf, 0, host, sizeof host), "buffer_write"))) {
        ampx_gemm_args g = {.size  = sizeof g,
                            .m     = 2,
                            .n     = 2,
                            .k     = 3,
                            .batch = 1,
                            .lda   = 3,
                            .ldb   = 2,
                            .ldc   = 2,
                            .alpha = 1,
                            .a     = buf_tensor(buf, 0, AMPX_F32),
                            .b     = buf_tensor(buf, 24, AMPX_F32),
                            .c     = buf_tensor(buf, 48, AMPX_F32)};
        if (!(st = call_op(&t->call, "self-check", AMPX_OP_GEMM, &g)))
            st = check(t, t->ifc->buffer_read(t->ctx, buf, 48, c, sizeof c), "buffer_read");
    }
    t->ifc->buffer_free(t->ctx, buf);
    if (st) return st;
    for (int i = 0; i < 4; i++) {
        double want = 0;
        for (int k = 0; k < 3; k++)
            want += (double)a[(i / 2) * 3 + k] * b[k * 2 + i % 2];
        if ((double)c[i] != want)
            return tr_fail(t, AMPX_ERR_DEVICE,
                           "backend %s returned OK from a 2x3 by 3x2 gemm but computed C[%d] = %g, "
                           "expected %g: its ops do not compute what they report (check it with "
                           "ampx conformance --backend %s)",
                           t->ifc->name, i, (double)c[i], want, t->ifc->name);
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// The gradient arena and its all-reduce buckets

/* Bucket bytes: AMPX_BUCKET_KB (KiB), else 1 MiB. A parameter larger than that is a bucket. */
static uint64_t bucket_cap(void) {
    const char *e = getenv("AMPX_BUCKET_KB");
    long long kb  = e && *e ? atoll(e) : 1024;
    return (uint64_t)(kb > 0 ? kb : 1024) * 1024;
}

/* Every parameter gradient in one f32 buffer, in the order the backward completes them (the
 * last node writing each), cut into buckets of at most bucket_cap() bytes, so bucket k is
 * complete before bucket k+1 and its all-reduce can start while the backward goes on. */
static ampx_status grad_arena(ampx_trainer *t) {
    int order[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        param *p     = &t->params[i];
        int gv       = t->g.values[p->value].grad;
        p->done_node = -1;
        for (int k = 0; gv >= 0 && k < t->g.n_nodes; k++) {
            const g_node *n = &t->g.nodes[k];
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o] >= 0 && g_root(&t->g, n->out[o]) == gv) p->done_node = k;
        }
        order[i] = i;
    }
    /* insertion sort by completion node: stable, so ties keep the declaration order */
    for (int i = 1; i < t->n_params; i++)
        for (int j = i; j > 0 && t->params[order[j - 1]].done_node > t->params[order[j]].done_node;
             j--) {
            int x    = order[j];
            order[j] = order[j - 1], order[j - 1] = x;
        }
    uint64_t cap = bucket_cap(), off = 0;
    t->n_buckets = 0;
    for (int k = 0; k < t->n_params; k++) {
        param *p       = &t->params[order[k]];
        uint64_t bytes = (p->n * 4 + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
        grad_bucket *b = t->n_buckets ? &t->buckets[t->n_buckets - 1] : NULL;
        /* (past TR_MAX_BUCKETS the last bucket grows) */
        if (!b || (b->bytes + bytes > cap && t->n_buckets < TR_MAX_BUCKETS)) {
            b  = &t->buckets[t->n_buckets++];
            *b = (grad_bucket){.off = off};
        }
        p->grad_off = off;
        p->bucket   = (int)(b - t->buckets);
        b->bytes += bytes;
        b->n_params++;
        off += bytes;
    }
    t->grads_bytes = off;
    ampx_status st = alloc_zero(t, off, &t->grads);
    if (st) return st;
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        int gv   = t->g.values[p->value].grad;
        p->grad  = t->grads;
        if (gv >= 0) t->own[gv] = t->grads, t->own_off[gv] = p->grad_off;
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Creation

void init_scalars(const ampx_model *m, ampx_scalars *s) {
    const scaler_config *c    = &m->cfg.scaler;
    const optimizer_config *o = &m->cfg.opt;
    memset(s, 0, sizeof *s);
    s->scale                  = c->mode == AMPX_SCALER_NONE ? 1.0f : c->init_scale;
    s->hysteresis_left        = c->hysteresis;
    s->mode                   = c->mode;
    s->growth_factor          = (float)c->growth_factor;
    s->backoff_factor         = (float)c->backoff_factor;
    s->growth_interval        = c->growth_interval;
    s->hysteresis             = c->hysteresis;
    s->consecutive_hysteresis = c->consecutive_hysteresis;
    s->min_scale              = c->min_scale;
    s->max_scale              = c->max_scale;
    s->on_min_scale_error     = c->on_min_scale_error;
    s->max_consecutive_skips  = c->max_consecutive_skips;
    s->lr_schedule            = o->schedule;
    s->lr_base                = o->lr;
    s->lr_min                 = o->min_lr;
    s->warmup_steps           = o->warmup_steps;
    s->decay_steps            = o->decay_steps ? o->decay_steps : o->file_steps;
    s->lr                     = ampx_scheduled_lr(s, 0);
}

static ampx_status monitor_setup(ampx_trainer *t);

static ampx_status upload(ampx_trainer *t, ampx_buffer **b, const void *src, uint64_t bytes) {
    ampx_status st = check(t, t->ifc->buffer_alloc(t->ctx, bytes ? bytes : 4, b), "buffer_alloc");
    if (st || !bytes) return st;
    return check(t, t->ifc->buffer_write(t->ctx, *b, 0, src, bytes), "buffer_write");
}

/* Host rows [0, n) of x/y laid out as graph input i: a slice of the features, the labels,
 * or the one-hot encoding of the labels (an f32 regression target). */
static const void *input_rows(ampx_trainer *t, int i, const float *x, const int32_t *y, int64_t n,
                              uint64_t *bytes) {
    const g_value *v = &t->g.values[t->g.inputs[i]];
    int64_t e = g_elems(v), f = t->data.features, off = t->in_offset[i];
    *bytes = (uint64_t)(n * e) * 4;
    if (off == -1) return y;
    for (int64_t r = 0; r < n; r++)
        for (int64_t k = 0; k < e; k++)
            t->host_in[r * e + k] = off == -2 ? (float)(y[r] == k) : x[r * f + off + k];
    return t->host_in;
}

/* Token data: one i32 token input [T] and the i32 labels [T], the tokens that follow. */
static ampx_status map_tokens(ampx_trainer *t, data_request *req) {
    const g_graph *g  = &t->g;
    const char *file  = t->m->cfg.file;
    int ids           = -1;
    const g_value *lv = &g->values[g->labels];
    if (lv->dtype != AMPX_I32)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: token data trains a softmax cross-entropy over i32 labels", file);
    for (int i = 0; i < g->n_inputs; i++) {
        const g_value *v = &g->values[g->inputs[i]];
        if (g->inputs[i] == g->labels) {
            t->in_offset[i] = -1;
        } else if (v->dtype == AMPX_I32 && ids < 0) {
            t->in_offset[i] = -3;
            ids             = i;
        } else {
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: input \"%s\": token data feeds one i32 token input and the labels",
                           file, v->name);
        }
    }
    if (ids < 0)
        return tr_fail(
            t, AMPX_ERR_INVALID,
            "%s: token data needs an i32 token input (\"dtype\": \"i32\", \"shape\": [T])", file);
    const g_value *iv = &g->values[g->inputs[ids]];
    if (g_elems(iv) != g_elems(lv))
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: tokens \"%s\" hold %lld positions but labels \"%s\" %lld: the labels "
                       "are the next token at every position",
                       file, iv->name, (long long)g_elems(iv), lv->name, (long long)g_elems(lv));
    req->cfg        = &t->m->cfg;
    req->features   = 0;
    req->input_name = iv->name;
    req->classes    = g->classes;
    req->window     = g_elems(iv);
    t->tokens       = 1;
    return AMPX_OK;
}

/* Maps the inputs onto the data: f32 inputs take consecutive features in declaration order,
 * the labels input the class, an f32 target of the mean squared error its one-hot code. */
static ampx_status map_inputs(ampx_trainer *t, data_request *req) {
    const g_graph *g = &t->g;
    int64_t f        = 0;
    static char names[512];
    names[0] = 0;
    memset(req, 0, sizeof *req);
    if (data_is_tokens(&t->m->cfg)) return map_tokens(t, req);
    for (int i = 0; i < g->n_inputs; i++) {
        const g_value *v = &g->values[g->inputs[i]];
        if (g->inputs[i] == g->labels) {
            if (v->dtype == AMPX_I32 && g_elems(v) != 1)
                return tr_fail(t, AMPX_ERR_INVALID,
                               "%s: labels \"%s\" hold %lld values per example; the embedded, "
                               "MNIST and CSV readers give one class per example",
                               t->m->cfg.file, v->name, (long long)g_elems(v));
            t->in_offset[i] = v->dtype == AMPX_I32 ? -1 : -2;
            continue;
        }
        if (v->dtype == AMPX_I32)
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: i32 input \"%s\" is not the loss's labels; the embedded, MNIST "
                           "and CSV readers give one class per example (token inputs read a "
                           "text, tokens or embedded_text source)",
                           t->m->cfg.file, v->name);
        t->in_offset[i] = f;
        f += g_elems(v);
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s\"%s\"", len ? " + " : "", v->name);
    }
    req->cfg        = &t->m->cfg;
    req->features   = f;
    req->input_name = names;
    if (g->values[g->labels].dtype == AMPX_I32)
        req->classes = g->classes;
    else
        req->classes = g_elems(&g->values[g->labels]);
    if (req->classes < 2)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: an mse target of %lld values cannot be a class code of this data",
                       t->m->cfg.file, (long long)req->classes);
    return AMPX_OK;
}

static ampx_status upload_test(ampx_trainer *t) {
    ampx_status st;
    if (t->tokens) {
        /* the fixed held-out windows; the training buffers hold one micro-batch */
        uint64_t bytes = (uint64_t)(t->data.n_test * t->data.window) * 4;
        for (int i = 0; i < t->g.n_inputs; i++) {
            const void *src = t->in_offset[i] == -3 ? t->data.ids_test : t->data.y_test;
            if ((st = upload(t, &t->in_test[i], src, bytes)) ||
                (st = alloc_zero(t, (uint64_t)(t->B * t->data.window) * 4, &t->in_train[i])))
                return st;
        }
        return AMPX_OK;
    }
    for (int i = 0; i < t->g.n_inputs; i++) {
        uint64_t bytes;
        const void *src = input_rows(t, i, t->data.x_test, t->data.y_test, t->data.n_test, &bytes);
        if ((st = upload(t, &t->in_test[i], src, bytes))) return st;
        uint64_t per = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) * 4;
        if ((st = alloc_zero(t, (uint64_t)t->data.n_train * per, &t->in_train[i]))) return st;
    }
    return AMPX_OK;
}

/* Refuses, with the figures, a model whose parameters, optimizer state and data cannot fit
 * the device (or the host's memory for the data), before anything is allocated: the kernel
 * would otherwise kill the process with no message. Computed in double: shapes are
 * untrusted and their products may not fit 64 bits. */
static ampx_status check_memory(ampx_trainer *t, const data_request *req) {
    const ampx_model *m = t->m;
    double per_elem     = 8 + (m->cfg.opt.kind == OPT_ADAMW ? 8 : m->cfg.opt.momentum != 0 ? 4 : 0);
    double device = 0, host = 0;
    for (int v = 0; v < t->g.n_values; v++) {
        const g_value *val = &t->g.values[v];
        double n           = 1;
        for (int k = 0; k < val->ndim; k++)
            n *= (double)val->dims[k];
        if (val->role == ROLE_PARAM)
            device += n * (val->master < 0 ? per_elem : 2); /* the working copy: 2 bytes */
        else if (val->role == ROLE_STATE || val->role == ROLE_CONST)
            device += n * 4;
    }
    if (m->cfg.data.source == DATA_EMBEDDED) { /* the files' sizes bound the other sources */
        double bytes = (double)m->cfg.data.samples * (double)(req->features + 1) * 4;
        host += 2 * bytes; /* the set and its shuffled copy */
        device += bytes;
    }
    ampx_device_info info = {.size = sizeof info};
    ampx_backend_device_info(t->be, &info);
    if (info.memory_bytes && device > (double)info.memory_bytes)
        return tr_fail(t, AMPX_ERR_NO_MEMORY,
                       "%s: the parameters, optimizer state and data need %.1f GiB (at least) but "
                       "the device (%s) has %.1f GiB",
                       m->cfg.file, device / (double)(1u << 30), info.name,
                       (double)info.memory_bytes / (double)(1u << 30));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && host > (double)pages * (double)page)
        return tr_fail(t, AMPX_ERR_NO_MEMORY,
                       "%s: the training data need %.1f GiB of host memory (at least), more than "
                       "the %.1f GiB there is",
                       m->cfg.file, host / (double)(1u << 30),
                       (double)pages * (double)page / (double)(1u << 30));
    return AMPX_OK;
}

static ampx_status create(ampx_model *m, ampx_backend *be, ampx_dist *dist, ampx_trainer **out,
                          char *err, size_t err_cap, int inference) {
    *out            = NULL;
    ampx_trainer *t = calloc(1, sizeof *t);
    if (!t || g_init_graph(&t->g)) {
        free(t);
        err_set(ERR(err, err_cap), "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    t->m               = m;
    t->be              = be;
    t->ifc             = ampx_backend_iface_of(be);
    t->ctx             = ampx_backend_context(be);
    t->B               = m->cfg.train.batch;
    t->A               = m->cfg.train.accumulate;
    t->K               = m->cfg.train.log_every;
    t->inject_step     = -1;
    t->inject_w_step   = -1;
    t->epoch_on_device = -1;
    t->inference       = inference;
    t->dist            = dist;
    t->rank            = ampx_dist_rank(dist);
    t->world           = ampx_dist_size(dist);
    call_init(&t->call, be, t->error, sizeof t->error);
    ampx_status st = AMPX_ERR_INVALID;
    g_copy_graph(&t->g, &m->graph);
    if (autodiff(&t->g, t->error, sizeof t->error)) goto fail;
    t->own        = calloc((size_t)t->g.n_values, sizeof *t->own);
    t->own_off    = calloc((size_t)t->g.n_values, sizeof *t->own_off);
    t->persistent = calloc((size_t)t->g.n_values, 1);
    if (!t->own || !t->own_off || !t->persistent) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int v = 0; v < t->g.n_values; v++)
        if (t->g.values[v].role == ROLE_PARAM && t->g.values[v].grad >= 0)
            t->persistent[t->g.values[v].grad] = 1;
    if ((st = check_ops(t)) || (st = self_check(t))) goto fail;
    if (t->world > 1 && (st = dp_join(t))) goto fail;
    data_request req;
    if ((st = map_inputs(t, &req)) || (st = check_memory(t, &req))) goto fail;
    st = AMPX_ERR_INVALID;
    if (inference == 1 && !t->tokens) {
        tr_fail(t, st, "%s: sampling reads a token model (an i32 token input and its labels)",
                m->cfg.file);
        goto fail;
    }
    if (inference == 2 && t->tokens) {
        tr_fail(t, st, "%s: a token model: sample from it with ampx generate", m->cfg.file);
        goto fail;
    }
    if (inference) {
        t->data.window   = req.window;
        t->data.features = req.features;
        t->data.n_train  = t->B * t->world; /* nothing is loaded: the caller's rows */
    } else if (data_load(&req, &t->data, t->error, sizeof t->error))
        goto fail;
    if (t->data.n_train < t->B * t->world) {
        if (t->world > 1)
            tr_fail(t, st,
                    "%s: %lld training examples are fewer than one global batch of %lld (%d ranks "
                    "x %lld)",
                    m->cfg.file, (long long)t->data.n_train, (long long)(t->B * t->world), t->world,
                    (long long)t->B);
        else
            tr_fail(t, st, "%s: %lld training examples are fewer than one batch of %lld",
                    m->cfg.file, (long long)t->data.n_train, (long long)t->B);
        goto fail;
    }
    t->micro_per_epoch = t->data.n_train / (t->B * t->world);
    if (t->tokens) t->data.n_train = 0; /* no examples to shuffle: windows are drawn */
    uint64_t f = (uint64_t)t->data.features, widest = f + 1;
    for (int i = 0; i < t->g.n_inputs; i++)
        if ((uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) > widest)
            widest = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]);
    int64_t most = t->data.n_train > t->data.n_test ? t->data.n_train : t->data.n_test;
    if (t->tokens) most = 2 * t->B; /* ids and labels of one micro-batch */
    t->shuffle_x = malloc(sizeof(float) * (size_t)(t->data.n_train * (int64_t)f + 1));
    t->shuffle_y = malloc(sizeof(int32_t) * (size_t)(t->data.n_train + 1));
    t->host_in   = malloc(sizeof(float) * (size_t)((uint64_t)most * widest + 1));
    if (!t->shuffle_x || !t->shuffle_y || !t->host_in) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the training set");
        goto fail;
    }
    if ((st = create_values(t)) || (st = grad_arena(t))) goto fail;
    if (plan_make(&t->g, (uint64_t)t->B, t->persistent, &t->plan)) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    t->slot_bytes = (SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)t->n_params + PLAN_ALIGN - 1) /
                    PLAN_ALIGN * PLAN_ALIGN;
    ampx_scalars s;
    init_scalars(m, &s);
    if ((st = alloc_zero(t, t->plan.arena_bytes, &t->arena)) ||
        (st = alloc_zero(t, t->slot_bytes * (uint64_t)t->K, &t->ring)) ||
        (st = alloc_zero(t, 64, &t->eval_loss)) || (st = upload(t, &t->scalars, &s, sizeof s)) ||
        (st = upload_test(t)))
        goto fail;
    t->x            = (executor){.h             = EXEC_HANDLE,
                                 .g             = &t->g,
                                 .p             = &t->plan,
                                 .call          = &t->call,
                                 .arena         = t->arena,
                                 .own           = t->own,
                                 .own_off       = t->own_off,
                                 .rows          = (uint64_t)t->B,
                                 .training      = 1,
                                 .micro_batches = (uint64_t)t->A,
                                 .seed          = m->cfg.train.seed,
                                 .replica       = (uint32_t)t->rank,
                                 .replicas      = (uint32_t)t->world,
                                 .scalars       = buf_tensor(t->scalars, 0, AMPX_F32)};
    t->t_last_flush = now_ms();
    t->mon_every    = m->cfg.train.monitor_every;
    /* a slot past the table of an older minor reads as NULL; the minor is checked too */
    t->amp_fused = t->ifc->abi_minor >= 4 && ampx_backend_op_slot(be, AMPX_OP_AMP_PASS) != NULL;
    if (t->mon_every > 0 && (st = monitor_setup(t))) goto fail;
    /* every rank starts from rank 0's parameters */
    if (t->world > 1 && ((st = dp_setup(t)) || (st = ampx_trainer_sync(t)))) goto fail;
    *out = t;
    return AMPX_OK;
fail:
    err_set(ERR(err, err_cap), "%s", t->error);
    ampx_trainer_free(t);
    return st ? st : AMPX_ERR_INVALID;
}

ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out, char *err,
                                size_t err_cap) {
    return create(m, be, NULL, out, err, err_cap, 0);
}

ampx_status ampx_trainer_create_dist(ampx_model *m, ampx_backend *be, ampx_dist *d,
                                     ampx_trainer **out, char *err, size_t err_cap) {
    return create(m, be, d, out, err, err_cap, 0);
}

ampx_status ampx_trainer_create_sampler(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                        char *err, size_t err_cap) {
    return create(m, be, NULL, out, err, err_cap, 1);
}

ampx_status ampx_trainer_create_predictor(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                          char *err, size_t err_cap) {
    return create(m, be, NULL, out, err, err_cap, 2);
}

void ampx_trainer_free(ampx_trainer *t) {
    if (!t) return;
    if (t->ctx) t->ifc->synchronize(t->ctx);
    char ignored[8];
    trace_close(t->trace, ignored, sizeof ignored);
    free(t->dev_ns);
    if (t->mon) t->ifc->buffer_free(t->ctx, t->mon);
    free(t->scan_first);
    free(t->scan_count);
    free(t->scan_value);
    free(t->scan_node);
    free(t->mon_host);
    ampx_buffer **bufs[] = {&t->arena, &t->ring, &t->eval_loss, &t->scalars, &t->grads};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) t->ifc->buffer_free(t->ctx, *bufs[i]);
    for (int i = 0; i < G_MAX_INPUTS; i++) {
        if (t->in_train[i]) t->ifc->buffer_free(t->ctx, t->in_train[i]);
        if (t->in_test[i]) t->ifc->buffer_free(t->ctx, t->in_test[i]);
    }
    /* params[n_params] is the one whose add_param failed half-way, if any (else all NULL) */
    for (int i = 0; i < t->n_params + (t->n_params < TR_MAX_PARAMS); i++) {
        param *p          = &t->params[i];
        ampx_buffer *pb[] = {p->master, p->s1, p->s2, p->copy};
        for (int k = 0; k < 4; k++)
            if (pb[k]) t->ifc->buffer_free(t->ctx, pb[k]);
    }
    if (t->own)
        for (int v = 0; v < t->g.n_values; v++)
            if (t->own[v] &&
                (t->g.values[v].role == ROLE_STATE || t->g.values[v].role == ROLE_CONST))
                t->ifc->buffer_free(t->ctx, t->own[v]);
    data_free(&t->data);
    plan_free(&t->plan);
    g_free_graph(&t->g);
    free(t->own);
    free(t->own_off);
    dp_free(t);
    free(t->persistent);
    free(t->shuffle_x);
    free(t->shuffle_y);
    free(t->host_in);
    free(t);
}

// ---------------------------------------------------------------------------------------
// Steps

/* Writes host rows x/y (n of them) into the training buffers of every input. */
static ampx_status write_train(ampx_trainer *t, const float *x, const int32_t *y, int64_t n) {
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->g.n_inputs && !st; i++) {
        uint64_t bytes;
        const void *src = input_rows(t, i, x, y, n, &bytes);
        st = check(t, t->ifc->buffer_write(t->ctx, t->in_train[i], 0, src, bytes), "buffer_write");
    }
    return st;
}

/* Puts epoch e's shuffle of the training set on the device (one write per input and epoch). */
static ampx_status load_epoch(ampx_trainer *t, int64_t e) {
    if (t->epoch_on_device == e) return AMPX_OK;
    int64_t n = t->data.n_train, f = t->data.features;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t seed =
        t->m->cfg.train.seed * 0x9E3779B97F4A7C15ull + (uint64_t)e * 0x2545F4914F6CDD1Dull;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(data_uniform(seed, (uint64_t)i) * (double)(i + 1));
        int64_t x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(t->shuffle_x + i * f, t->data.x_train + perm[i] * f, sizeof(float) * (size_t)f);
        t->shuffle_y[i] = t->data.y_train[perm[i]];
    }
    free(perm);
    ampx_status st = write_train(t, t->shuffle_x, t->shuffle_y, n);
    if (!st) t->epoch_on_device = e;
    return st;
}

/* Token data: micro-batch `key`'s windows, drawn with the seed, into the training buffers. */
static ampx_status write_windows(ampx_trainer *t, uint64_t key) {
    int32_t *ids = (int32_t *)t->host_in, *labels = ids + t->B * t->data.window;
    text_draw(&t->data, t->m->cfg.train.seed * 0xD1B54A32D192ED03ull + 5, key, t->B * t->world,
              t->B * t->rank, t->B, ids, labels);
    ampx_status st = AMPX_OK;
    uint64_t bytes = (uint64_t)(t->B * t->data.window) * 4;
    for (int i = 0; i < t->g.n_inputs && !st; i++)
        st = check(t,
                   t->ifc->buffer_write(t->ctx, t->in_train[i], 0,
                                        t->in_offset[i] == -3 ? ids : labels, bytes),
                   "buffer_write");
    return st;
}

static ampx_status select_micro(ampx_trainer *t, int64_t global_micro) {
    if (t->tokens) {
        bind_inputs(t, 0);
        t->x.row0 = 0;
        t->x.rows = (uint64_t)t->B;
        return write_windows(t, (uint64_t)global_micro);
    }
    /* rank r of N reads rows [r*B, (r+1)*B) of the global batch of N*B rows */
    ampx_status st = load_epoch(t, global_micro / t->micro_per_epoch);
    bind_inputs(t, 0);
    t->x.row0 = (uint64_t)(((global_micro % t->micro_per_epoch) * t->world + t->rank) * t->B);
    t->x.rows = (uint64_t)t->B;
    return st;
}

static ampx_tensor_list grad_list(ampx_trainer *t, ampx_tensor *ts, uint64_t *ns) {
    for (int i = 0; i < t->n_params; i++) {
        ts[i] = buf_tensor(t->params[i].grad, t->params[i].grad_off, AMPX_F32);
        ns[i] = t->params[i].n;
    }
    return (ampx_tensor_list){.count = (uint32_t)t->n_params, .tensors = ts, .n_elems = ns};
}

static ampx_status optimizer_step(ampx_trainer *t, ampx_tensor gsq) {
    const optimizer_config *o = &t->m->cfg.opt;
    ampx_tensor pt[TR_MAX_PARAMS], gt[TR_MAX_PARAMS], s1[TR_MAX_PARAMS], s2[TR_MAX_PARAMS],
        cp[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    float wd[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        pt[i]    = buf_tensor(p->master, 0, AMPX_F32);
        gt[i]    = buf_tensor(p->grad, p->grad_off, AMPX_F32);
        s1[i]    = buf_tensor(p->s1, 0, AMPX_F32);
        s2[i]    = buf_tensor(p->s2, 0, AMPX_F32);
        cp[i]    = p->copy_dtype != AMPX_F32 ? buf_tensor(p->copy, 0, p->copy_dtype)
                                             : buf_tensor(NULL, 0, AMPX_BF16);
        ns[i]    = p->n;
        wd[i]    = p->wd;
    }
    ampx_tensor_list params = {.count = (uint32_t)t->n_params, .tensors = pt, .n_elems = ns};
    uint64_t seed           = ampx_hash32(t->m->cfg.train.seed, (uint64_t)t->step) * 0x100000001ull;
    ampx_tensor sc          = buf_tensor(t->scalars, 0, AMPX_F32);
    if (o->kind == OPT_ADAMW) {
        ampx_adamw_args a = {.size            = sizeof a,
                             .beta1           = o->beta1,
                             .beta2           = o->beta2,
                             .eps             = o->eps,
                             .weight_decay    = o->weight_decay,
                             .max_grad_norm   = o->clip_grad_norm,
                             .wd              = wd,
                             .params          = params,
                             .grads           = gt,
                             .m               = s1,
                             .v               = s2,
                             .copies          = cp,
                             .grad_sq_sum     = gsq,
                             .scalars         = sc,
                             .stochastic_copy = (uint32_t)o->stochastic_rounding,
                             .seed            = seed};
        return step_op(t, AMPX_OP_ADAMW, &a);
    }
    ampx_sgd_args a = {.size            = sizeof a,
                       .nesterov        = (uint32_t)o->nesterov,
                       .momentum        = o->momentum,
                       .dampening       = o->dampening,
                       .weight_decay    = o->weight_decay,
                       .max_grad_norm   = o->clip_grad_norm,
                       .wd              = wd,
                       .params          = params,
                       .grads           = gt,
                       .momentum_buf    = o->momentum != 0 ? s1 : NULL,
                       .copies          = cp,
                       .grad_sq_sum     = gsq,
                       .scalars         = sc,
                       .stochastic_copy = (uint32_t)o->stochastic_rounding,
                       .seed            = seed};
    return step_op(t, AMPX_OP_SGD, &a);
}

// ---------------------------------------------------------------------------------------
// The gradient-health monitor: grad_stats over every parameter gradient (scaled, as the
// backward left it) and over every node's outputs right after the node ran, into the
// monitor slot of the step; read back with the step records, never in between.

#define MON_SCALE 0

static uint64_t mon_off(const ampx_trainer *t, int part) {
    uint64_t P = (uint64_t)t->n_params, S = (uint64_t)t->n_scan * (uint64_t)t->A;
    uint64_t offs[] = {16,
                       16 + 16 * P,
                       16 + 28 * P,
                       16 + 32 * P,
                       16 + 32 * P + 16 * S,
                       16 + 32 * P + 28 * S,
                       16 + 32 * P + 32 * S};
    return offs[part];
}
enum { MON_PSTATS, MON_PCOUNTS, MON_PNAN, MON_SSTATS, MON_SCOUNTS, MON_SNAN, MON_END };

/* The compute dtype of the layer that reads parameter p (its master or working copy). */
static ampx_dtype layer_dtype(const ampx_trainer *t, const param *p) {
    int copy = t->g.values[p->value].copy;
    for (int i = 0; i < t->g.n_forward; i++) {
        const g_node *n = &t->g.nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && (n->in[k] == p->value || n->in[k] == copy)) return n->dtype;
    }
    return AMPX_F32;
}

static void layer_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
}

static ampx_status monitor_setup(ampx_trainer *t) {
    if (t->mon_ready) return AMPX_OK;
    t->mon_ready = 1;
    for (int i = 0; i < t->n_params; i++) {
        t->mon_compute[i] = layer_dtype(t, &t->params[i]);
        t->mon_target[i]  = t->mon_compute[i] == AMPX_F16 || t->mon_compute[i] == AMPX_BF16
                                ? t->mon_compute[i]
                                : AMPX_F32;
        layer_of(t->params[i].name, t->mon_layer[i], sizeof t->mon_layer[i]);
    }
    int N         = t->g.n_nodes;
    t->scan_first = calloc((size_t)N, sizeof *t->scan_first);
    t->scan_count = calloc((size_t)N, sizeof *t->scan_count);
    t->scan_value = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->scan_value);
    t->scan_node  = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->scan_node);
    if (!t->scan_first || !t->scan_count || !t->scan_value || !t->scan_node)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < N; i++) {
        const g_node *n  = &t->g.nodes[i];
        t->scan_first[i] = t->n_scan;
        if (n->op == OP_RESHAPE) continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && ampx_dtype_is_float(t->g.values[n->out[k]].dtype)) {
                t->scan_value[t->n_scan]  = n->out[k];
                t->scan_node[t->n_scan++] = i;
                t->scan_count[i]++;
            }
    }
    t->mon_slot_bytes = (mon_off(t, MON_END) + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    t->mon_host       = malloc(t->mon_slot_bytes * (uint64_t)t->K);
    if (!t->mon_host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    return alloc_zero(t, t->mon_slot_bytes * (uint64_t)t->K, &t->mon);
}

static int monitored(const ampx_trainer *t, int64_t step1) {
    return t->mon_every > 0 && step1 % t->mon_every == 0;
}

static ampx_status grad_stats(ampx_trainer *t, const char *who, ampx_dtype target,
                              ampx_tensor_list list, ampx_buffer *b, uint64_t stats,
                              uint64_t counts, uint64_t nans) {
    ampx_grad_stats_args a = {.size       = sizeof a,
                              .target     = target,
                              .grads      = list,
                              .stats      = buf_tensor(b, stats, AMPX_F32),
                              .counts     = buf_tensor(b, counts, AMPX_I32),
                              .nan_counts = buf_tensor(b, nans, AMPX_I32)};
    t->call.dtype          = target;
    return call_op(&t->call, who, AMPX_OP_GRAD_STATS, &a);
}

/* After node `node` of a monitored micro-batch: the statistics of its outputs. */
static ampx_status scan_node(executor *x, int node, void *user) {
    ampx_trainer *t = user;
    int c = t->scan_count[node], f = t->scan_first[node];
    if (!c) return AMPX_OK;
    ampx_tensor ts[G_MAX_OUT];
    uint64_t ns[G_MAX_OUT];
    for (int k = 0; k < c; k++) {
        ts[k] = exec_tensor(x, t->scan_value[f + k]);
        ns[k] = exec_numel(x, t->scan_value[f + k]);
    }
    uint64_t base = t->mon_slot_cur, at = (uint64_t)(x->micro * t->n_scan + f);
    const g_node *n = &t->g.nodes[node];
    return grad_stats(t, n->name, n->dtype,
                      (ampx_tensor_list){.count = (uint32_t)c, .tensors = ts, .n_elems = ns},
                      t->mon, base + mon_off(t, MON_SSTATS) + 16 * at,
                      base + mon_off(t, MON_SCOUNTS) + 12 * at,
                      base + mon_off(t, MON_SNAN) + 4 * at);
}

/* The parameter gradients' statistics into buffer b at slot offset base, in parameter order:
 * one grad_stats per run of parameters whose layers share a compute dtype (its target). */
static ampx_status param_stats(ampx_trainer *t, ampx_buffer *b, uint64_t base) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list all = grad_list(t, ts, ns);
    t->call.phase        = CALL_AMP;
    for (int at = 0, end; at < t->n_params; at = end) {
        for (end = at + 1; end < t->n_params && t->mon_target[end] == t->mon_target[at]; end++)
            ;
        uint64_t k     = (uint64_t)at;
        ampx_status st = grad_stats(
            t, "monitor", t->mon_target[at],
            (ampx_tensor_list){
                .count = (uint32_t)(end - at), .tensors = all.tensors + at, .n_elems = ns + at},
            b, base + mon_off(t, MON_PSTATS) + 16 * k, base + mon_off(t, MON_PCOUNTS) + 12 * k,
            base + mon_off(t, MON_PNAN) + 4 * k);
        if (st) return st;
    }
    return AMPX_OK;
}

static void read_one(const unsigned char *slot, uint64_t so, uint64_t co, uint64_t no, int k,
                     double scale, ampx_tensor_health *h) {
    float st[4];
    int32_t cn[3], nan;
    memcpy(st, slot + so + 16 * (uint64_t)k, 16);
    memcpy(cn, slot + co + 12 * (uint64_t)k, 12);
    memcpy(&nan, slot + no + 4 * (uint64_t)k, 4);
    double n          = h->n ? (double)h->n : 1;
    h->max_abs        = st[0] / scale;
    h->rms            = st[2] / scale;
    h->zero_frac      = cn[0] / n;
    h->underflow_frac = cn[1] / n;
    h->nan            = nan >= 0 && nan <= cn[2] ? nan : -1;
    h->inf            = h->nan >= 0 ? cn[2] - nan : cn[2];
}

/* Fills t->health (parameter order) from a monitor slot. */
static void read_health(ampx_trainer *t, const unsigned char *slot, double scale) {
    if (!(scale > 0)) scale = 1;
    for (int i = 0; i < t->n_params; i++) {
        ampx_tensor_health *h = &t->health[i];
        h->name               = t->params[i].name;
        h->layer              = t->mon_layer[i];
        h->compute            = t->mon_compute[i];
        h->n                  = t->params[i].n;
        read_one(slot, mon_off(t, MON_PSTATS), mon_off(t, MON_PCOUNTS), mon_off(t, MON_PNAN), i,
                 scale, h);
    }
}

/* The first scanned tensor of a monitored step that held a non-finite value. */
static void first_nonfinite(ampx_trainer *t, const unsigned char *slot) {
    t->first_nonfinite[0] = 0;
    for (int64_t a = 0; a < t->A; a++)
        for (int s = 0; s < t->n_scan; s++) {
            int32_t cn[3];
            memcpy(cn, slot + mon_off(t, MON_SCOUNTS) + 12 * (uint64_t)(a * t->n_scan + s), 12);
            if (cn[2] > 0) {
                const g_node *n = &t->g.nodes[t->scan_node[s]];
                snprintf(t->first_nonfinite, sizeof t->first_nonfinite, "%s (%s of node %s%s)",
                         t->g.values[t->scan_value[s]].name,
                         n->phase == PHASE_BACKWARD ? "backward" : "forward", n->name,
                         t->A > 1 ? ", a micro-batch" : "");
                return;
            }
        }
    for (int k = 0; k < t->n_params; k++) {
        int32_t cn[3];
        memcpy(cn, slot + mon_off(t, MON_PCOUNTS) + 12 * (uint64_t)k, 12);
        if (cn[2] > 0) {
            snprintf(t->first_nonfinite, sizeof t->first_nonfinite, "%s.grad (after the backward)",
                     t->params[k].name);
            return;
        }
    }
}

ampx_status ampx_trainer_grad_health(ampx_trainer *t, ampx_tensor_health *out) {
    ampx_status st = monitor_setup(t);
    if (st) return st;
    st = check(t, t->ifc->buffer_fill(t->ctx, t->mon, 0, t->mon_slot_bytes, 0xFFFFFFFFu, 4),
               "buffer_fill");
    if (!st) st = param_stats(t, t->mon, 0);
    if (!st)
        st = check(t, t->ifc->buffer_read(t->ctx, t->mon, 0, t->mon_host, t->mon_slot_bytes),
                   "buffer_read");
    if (st) return st;
    read_health(t, t->mon_host, 1.0);
    memcpy(out, t->health, sizeof *out * (size_t)t->n_params);
    return AMPX_OK;
}

/* A step of the trace window: the stream is drained first so the step's ops start from an
 * idle device; the ops are timed by the backend when it has timestamps, else on the host
 * with a synchronize after each. */
static ampx_status trace_begin(ampx_trainer *t) {
    ampx_status st = check(t, t->ifc->synchronize(t->ctx), "synchronize");
    if (st) return st;
    trace_step_begin(t->trace, t->step + 1);
    if (t->dev_cap && (st = check(t, t->ifc->profile_begin(t->ctx, t->dev_cap), "profile_begin")))
        return st;
    t->call.observe      = trace_op;
    t->call.observe_user = t->trace;
    t->call.sync_each    = t->dev_cap == 0;
    return AMPX_OK;
}

static ampx_status trace_end(ampx_trainer *t, ampx_status st, uint64_t before) {
    t->call.observe   = NULL;
    t->call.sync_each = 0;
    uint32_t n        = 0;
    if (t->dev_cap) {
        ampx_status pe = t->ifc->profile_end(t->ctx, t->dev_ns, t->dev_cap, &n);
        if (!st) st = check(t, pe, "profile_end");
    }
    trace_step_end(t->trace, t->dev_cap ? t->dev_ns : NULL, n, call_total(&t->call) - before);
    return st;
}

static ampx_status step_ops(ampx_trainer *t);

static ampx_status one_step(ampx_trainer *t) {
    uint64_t before = call_total(&t->call);
    ampx_status st;
    if (!trace_wants(t->trace, t->step + 1))
        st = step_ops(t);
    else if (!(st = trace_begin(t)))
        st = trace_end(t, step_ops(t), before);
    t->last_step_ops = call_total(&t->call) - before;
    return st;
}

/* Weights made non-finite by an applied update: one sum of squares over the masters at each
 * log interval, read with the records. */
#define WEIGHTS_SQ_OFFSET 32

static ampx_status weights_check(ampx_trainer *t) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        ts[i] = buf_tensor(t->params[i].master, 0, AMPX_F32);
        ns[i] = t->params[i].n;
    }
    ampx_sum_squares_args q = {.size = sizeof q,
                               .x = {.count = (uint32_t)t->n_params, .tensors = ts, .n_elems = ns},
                               .out = buf_tensor(t->eval_loss, WEIGHTS_SQ_OFFSET, AMPX_F32)};
    t->call.phase           = CALL_AMP;
    t->call.dtype           = AMPX_F32;
    return call_op(&t->call, "health", AMPX_OP_SUM_SQUARES, &q);
}

/* The first parameter whose master holds a non-finite value (host scan, at a stop only). */
static const char *nonfinite_param(ampx_trainer *t) {
    for (int i = 0; i < t->n_params; i++) {
        float *h = malloc(t->params[i].n * 4 + 4);
        int bad  = 0;
        if (h && !ampx_trainer_get(t, i, 0, h))
            for (uint64_t k = 0; k < t->params[i].n && !bad; k++)
                bad = !isfinite(h[k]);
        free(h);
        if (bad) return t->params[i].name;
    }
    return NULL;
}

/* After each node of a step: the monitor's scan, and the all-reduce buckets it completed. */
static ampx_status after_node(executor *x, int node, void *user) {
    ampx_trainer *t = user;
    ampx_status st  = t->mon_live ? scan_node(x, node, t) : AMPX_OK;
    if (!st && t->dp_live) st = dp_after_node(t, node);
    return st;
}

static ampx_status step_ops(ampx_trainer *t) {
    ampx_status st;
    int64_t ring_at = (t->step - t->ring_first) % t->K;
    uint64_t slot   = (uint64_t)ring_at * t->slot_bytes;
    int mon         = monitored(t, t->step + 1);
    t->x.training   = 1;
    t->x.step       = (uint64_t)t->step;
    if (mon) {
        t->mon_slot_cur = (uint64_t)ring_at * t->mon_slot_bytes;
        if ((st = check(t,
                        t->ifc->buffer_fill(t->ctx, t->mon, t->mon_slot_cur, t->mon_slot_bytes,
                                            0xFFFFFFFFu, 4),
                        "buffer_fill")) ||
            (st = check(
                 t,
                 t->ifc->buffer_copy(t->ctx, t->mon, t->mon_slot_cur + MON_SCALE, t->scalars, 0, 4),
                 "buffer_copy")))
            return st;
    }
    int dp      = t->world > 1;
    t->mon_live = mon;
    if (dp) dp_begin_step(t);
    t->x.after_node = mon || dp ? after_node : NULL;
    t->x.after_user = t;
    for (int64_t a = 0; a < t->A; a++) {
        t->x.micro = (int)a;
        t->x.loss  = buf_tensor(t->ring, slot + SLOT_LOSS + 4 * (uint64_t)a, AMPX_F32);
        t->dp_live = dp && a == t->A - 1; /* gradients are final in the last micro-batch */
        if ((st = select_micro(t, t->step * t->A + a)) || (st = micro_batch(t))) break;
    }
    t->x.after_node = NULL;
    t->dp_live      = 0;
    if (st) return st;
    /* the mean gradient of all ranks, before anything reads the gradients */
    if (dp && (st = dp_finish(t))) return st;
    if (!dp && t->step + 1 == t->inject_step) {
        uint32_t inf = 0x7F800000u;
        if ((st = check(t,
                        t->ifc->buffer_fill(t->ctx, t->params[t->inject_param].grad,
                                            t->params[t->inject_param].grad_off, 4, inf, 4),
                        "buffer_fill")))
            return st;
    }
    if (mon && !t->amp_fused && (st = param_stats(t, t->mon, t->mon_slot_cur))) return st;
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list grads    = grad_list(t, ts, ns);
    ampx_tensor gsq           = buf_tensor(t->ring, slot + SLOT_GSQ, AMPX_F32);
    ampx_unscale_check_args u = {
        .size      = sizeof u,
        .flag_base = 0,
        .grads     = grads,
        .flags     = buf_tensor(t->ring, slot + SLOT_LOSS + 4 * (uint64_t)t->A, AMPX_I32),
        .scalars   = buf_tensor(t->scalars, 0, AMPX_F32)};
    ampx_sum_squares_args q   = {.size = sizeof q, .x = grads, .out = gsq};
    ampx_scaler_update_args v = {.size               = sizeof v,
                                 .scalars            = u.scalars,
                                 .growth_factor_f64  = t->m->cfg.scaler.growth_factor,
                                 .backoff_factor_f64 = t->m->cfg.scaler.backoff_factor};
    if (t->amp_fused) {
        /* the same three ops in one pass: the statistics of the scaled gradients (as
         * param_stats takes them), the unscale and check, the square sum of the result */
        uint64_t mb          = t->mon_slot_cur;
        ampx_amp_pass_args f = {.size      = sizeof f,
                                .flag_base = u.flag_base,
                                .grads     = grads,
                                .flags     = u.flags,
                                .scalars   = u.scalars,
                                .sq_sum    = gsq,
                                .target    = AMPX_F32};
        if (mon) {
            f.targets    = t->mon_target;
            f.stats      = buf_tensor(t->mon, mb + mon_off(t, MON_PSTATS), AMPX_F32);
            f.counts     = buf_tensor(t->mon, mb + mon_off(t, MON_PCOUNTS), AMPX_I32);
            f.nan_counts = buf_tensor(t->mon, mb + mon_off(t, MON_PNAN), AMPX_I32);
        }
        st = step_op(t, AMPX_OP_AMP_PASS, &f);
    } else if (!(st = step_op(t, AMPX_OP_UNSCALE_CHECK, &u))) {
        st = step_op(t, AMPX_OP_SUM_SQUARES, &q);
    }
    if (st || (st = optimizer_step(t, gsq)) || (st = step_op(t, AMPX_OP_SCALER_UPDATE, &v)))
        return st;
    if (t->step + 1 == t->inject_w_step &&
        (st = check(
             t,
             t->ifc->buffer_fill(t->ctx, t->params[t->inject_w_param].master, 0, 4, 0x7F800000u, 4),
             "buffer_fill")))
        return st;
    st = check(t,
               t->ifc->buffer_copy(t->ctx, t->ring, slot + SLOT_SCALARS, t->scalars, 0,
                                   sizeof(ampx_scalars)),
               "buffer_copy");
    if (!st) t->step++;
    return st;
}

/* Data-parallel runs: the records' losses become the mean over ranks (so every rank's run
 * health sees the same values), then the ranks' scalars blocks and weights are compared. */
static ampx_status dp_records(ampx_trainer *t, unsigned char *buf, int64_t n, float wsq) {
    uint64_t k    = (uint64_t)(n * t->A);
    float *losses = malloc(sizeof(float) * k);
    if (!losses) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        memcpy(losses + i * t->A, buf + (uint64_t)i * t->slot_bytes + SLOT_LOSS,
               sizeof(float) * (size_t)t->A);
    ampx_status st = dp_mean_losses(t, losses, k);
    for (int64_t i = 0; !st && i < n; i++)
        memcpy(buf + (uint64_t)i * t->slot_bytes + SLOT_LOSS, losses + i * t->A,
               sizeof(float) * (size_t)t->A);
    free(losses);
    ampx_scalars last;
    memcpy(&last, buf + (uint64_t)(n - 1) * t->slot_bytes + SLOT_SCALARS, sizeof last);
    return st ? st : dp_check(t, &last, wsq);
}

/* Reads the records of the steps since the last flush and hands them to record(). */
static ampx_status flush(ampx_trainer *t, ampx_record_fn record, void *user, int *stop) {
    int64_t n = t->step - t->ring_first;
    if (n <= 0) return AMPX_OK;
    unsigned char *buf = malloc((size_t)(t->slot_bytes * (uint64_t)n));
    if (!buf) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st =
        check(t, t->ifc->buffer_read(t->ctx, t->ring, 0, buf, t->slot_bytes * (uint64_t)n),
              "buffer_read");
    ampx_status wst = weights_check(t);
    if (!st) st = wst;
    float wsq = 0;
    if (!st)
        st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, WEIGHTS_SQ_OFFSET, &wsq, 4),
                   "buffer_read");
    if (!st && t->world > 1) st = dp_records(t, buf, n, wsq);
    int any_mon = 0;
    for (int64_t i = 0; i < n; i++)
        any_mon |= monitored(t, t->ring_first + i + 1);
    if (!st && any_mon)
        st = check(
            t, t->ifc->buffer_read(t->ctx, t->mon, 0, t->mon_host, t->mon_slot_bytes * (uint64_t)n),
            "buffer_read");
    double now = now_ms(), per = (now - t->t_last_flush) / (double)n;
    t->t_last_flush = now;
    for (int64_t i = 0; !st && i < n; i++) {
        const unsigned char *s = buf + (uint64_t)i * t->slot_bytes;
        ampx_scalars sc;
        float gsq, loss = 0;
        memcpy(&sc, s + SLOT_SCALARS, sizeof sc);
        memcpy(&gsq, s + SLOT_GSQ, 4);
        double lsum = 0;
        for (int64_t a = 0; a < t->A; a++) {
            memcpy(&loss, s + SLOT_LOSS + 4 * a, 4);
            lsum += loss;
        }
        char names[2048] = "";
        if (sc.last_found_inf)
            for (int p = 0; p < t->n_params; p++) {
                int32_t flag;
                memcpy(&flag, s + SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)p, 4);
                size_t len = strlen(names);
                if (flag && len + strlen(t->params[p].name) + 8 < sizeof names)
                    snprintf(names + len, sizeof names - len, "%s%s.grad", len ? ", " : "",
                             t->params[p].name);
            }
        ampx_step_record r   = {.step      = t->ring_first + i + 1,
                                .loss      = lsum / (double)t->A,
                                .grad_norm = sqrt((double)gsq),
                                .scale     = sc.scale,
                                .lr        = sc.lr,
                                .skipped   = sc.last_found_inf,
                                .time_ms   = per,
                                .overflow  = names};
        r.applied_steps      = sc.applied_steps;
        char health_msg[768] = "";
        int verdict          = health_step(&t->health_st, &r, health_msg, sizeof health_msg);
        r.warning            = verdict == 1 ? health_msg : "";
        if (monitored(t, r.step)) {
            const unsigned char *ms = t->mon_host + (uint64_t)i * t->mon_slot_bytes;
            float mscale;
            memcpy(&mscale, ms + MON_SCALE, 4);
            read_health(t, ms, mscale);
            first_nonfinite(t, ms);
            r.health          = t->health;
            r.n_health        = t->n_params;
            r.monitor_scale   = mscale;
            r.first_nonfinite = t->first_nonfinite;
        } else {
            r.first_nonfinite = "";
        }
        if (t->trace)
            trace_counters(t->trace, r.step, r.loss, r.scale, r.grad_norm, r.lr, sc.skipped_steps);
        if (record && record(user, &r)) *stop = 1;
        if (verdict == 2 && !*stop && isfinite(wsq)) {
            *stop = 2;
            st    = tr_fail(t, AMPX_ERR_INVALID, "%s", health_msg);
        }
        if (sc.stop_reason && !*stop && isfinite(wsq)) {
            *stop = 2;
            if (sc.stop_reason & AMPX_STOP_MIN_SCALE)
                st = tr_fail(t, AMPX_ERR_INVALID,
                             "step %lld: the loss scale reached min_scale %g and gradients still "
                             "overflow (on_min_scale = error): the model diverges, or the policy "
                             "needs more f32",
                             (long long)r.step, (double)sc.min_scale);
            else
                st = tr_fail(t, AMPX_ERR_INVALID,
                             "step %lld: more than %d consecutive steps skipped "
                             "(max_consecutive_skips): training does not recover",
                             (long long)r.step, sc.max_consecutive_skips);
        }
    }
    free(buf);
    if (!st && *stop != 1 && !isfinite(wsq)) {
        *stop             = 2;
        const char *first = nonfinite_param(t);
        if (first)
            st = tr_fail(t, AMPX_ERR_INVALID,
                         "steps %lld..%lld: the weights became non-finite (first: %s) in an "
                         "applied step: the update itself overflowed; lower the learning rate or "
                         "clip gradients (clip_grad_norm)",
                         (long long)t->ring_first + 1, (long long)t->step, first);
        else /* finite, but so large that their sum of squares overflows f32 */
            st = tr_fail(t, AMPX_ERR_INVALID,
                         "steps %lld..%lld: the weights grew beyond 1e19 (their sum of squares "
                         "overflows f32): the updates diverge; lower the learning rate or clip "
                         "gradients (clip_grad_norm)",
                         (long long)t->ring_first + 1, (long long)t->step);
    }
    t->ring_first = t->step;
    return st;
}

ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record, void *user) {
    int stop        = 0;
    ampx_status st  = AMPX_OK;
    t->ring_first   = t->step;
    t->t_last_flush = now_ms();
    while (t->step < until && !stop) {
        if ((st = one_step(t))) return st;
        if (t->step - t->ring_first == t->K || t->step == until)
            if ((st = flush(t, record, user, &stop))) return st;
    }
    return st;
}

ampx_status ampx_trainer_evaluate(ampx_trainer *t, ampx_eval_result *out) {
    const g_graph *g = &t->g;
    int64_t n = t->data.n_test, correct = 0;
    double loss_sum       = 0;
    int classify          = g->values[g->labels].dtype == AMPX_I32;
    uint64_t c            = (uint64_t)g_last(&g->values[g->logits]);
    uint64_t pos          = classify ? (uint64_t)g_elems(&g->values[g->labels]) : 1;
    ampx_dtype ld         = g->values[g->logits].dtype;
    unsigned char *logits = malloc((size_t)((uint64_t)t->B * pos * c * 4));
    if (!logits) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    t->x.training  = 0;
    t->x.micro     = 0;
    t->x.loss      = buf_tensor(t->eval_loss, 0, AMPX_F32);
    bind_inputs(t, 1);
    for (int64_t r0 = 0; r0 < n && !st; r0 += t->B) {
        t->x.row0 = (uint64_t)r0;
        t->x.rows = (uint64_t)(n - r0 < t->B ? n - r0 : t->B);
        if ((st = micro_batch(t))) break;
        ampx_tensor lt = exec_tensor(&t->x, g->logits);
        float loss;
        if ((classify && (st = check(t,
                                     t->ifc->buffer_read(t->ctx, lt.buf, lt.offset, logits,
                                                         t->x.rows * pos * c * ampx_dtype_size(ld)),
                                     "buffer_read"))) ||
            (st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, &loss, 4), "buffer_read")))
            break;
        loss_sum += (double)loss * (double)t->x.rows;
        for (uint64_t r = 0; classify && r < t->x.rows * pos; r++) {
            int64_t best = 0;
            float bv     = -INFINITY;
            for (uint64_t j = 0; j < c; j++) {
                uint64_t k = r * c + j;
                float v    = ld == AMPX_F32    ? ((float *)logits)[k]
                             : ld == AMPX_BF16 ? ampx_bf16_to_f32(((uint16_t *)logits)[k])
                                               : ampx_f16_to_f32(((uint16_t *)logits)[k]);
                if (v > bv) bv = v, best = (int64_t)j;
            }
            correct += best == t->data.y_test[r0 * (int64_t)pos + (int64_t)r];
        }
    }
    n *= (int64_t)pos; /* accuracy per position */
    free(logits);
    t->x.training = 1;
    bind_inputs(t, 0);
    if (st) return st;
    out->examples = n;
    out->accuracy = !classify ? -1 : n ? (double)correct / (double)n : 0;
    out->loss     = n ? loss_sum / (double)(n / (int64_t)pos) : 0;
    return AMPX_OK;
}

int64_t ampx_trainer_step(const ampx_trainer *t) {
    return t->step;
}
const char *ampx_trainer_error(const ampx_trainer *t) {
    return t->error;
}

ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out) {
    return check(t, t->ifc->buffer_read(t->ctx, t->scalars, 0, out, sizeof *out), "buffer_read");
}

void ampx_trainer_memory(const ampx_trainer *t, uint64_t *peak, uint64_t *unplanned) {
    *peak      = t->plan.arena_bytes;
    *unplanned = t->plan.unplanned_bytes;
}

int ampx_trainer_n_params(const ampx_trainer *t) {
    return t->n_params;
}
const char *ampx_trainer_param_name(const ampx_trainer *t, int i) {
    return i >= 0 && i < t->n_params ? t->params[i].name : NULL;
}
uint64_t ampx_trainer_param_size(const ampx_trainer *t, int i) {
    return i >= 0 && i < t->n_params ? t->params[i].n : 0;
}

static ampx_buffer *param_buf(ampx_trainer *t, int i, int what) {
    if (i < 0 || i >= t->n_params) return NULL;
    param *p = &t->params[i];
    return what == 0   ? p->master
           : what == 1 ? p->grad
           : what == 2 ? p->s1
           : what == 3 ? p->s2
                       : NULL;
}

ampx_status ampx_trainer_get(ampx_trainer *t, int i, int what, float *host) {
    ampx_buffer *b = param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    uint64_t off = what == 1 ? t->params[i].grad_off : 0;
    return check(t, t->ifc->buffer_read(t->ctx, b, off, host, t->params[i].n * 4), "buffer_read");
}

ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host) {
    ampx_buffer *b = param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    param *p = &t->params[i];
    ampx_status st =
        check(t, t->ifc->buffer_write(t->ctx, b, what == 1 ? p->grad_off : 0, host, p->n * 4),
              "buffer_write");
    if (!st && what == 0 && p->copy_dtype != AMPX_F32) st = cast_copy(t, p);
    return st;
}

ampx_status ampx_trainer_gradients(ampx_trainer *t, int64_t first, double *loss) {
    ampx_status st;
    if (t->tokens) {
        /* the windows of a draw keyed apart from the steps' */
        st = first < 0 ? tr_fail(t, AMPX_ERR_INVALID, "no draw %lld", (long long)first)
                       : write_windows(t, (uint64_t)first | 1ull << 62);
    } else {
        if (first < 0 || first + t->B > t->data.n_train)
            return tr_fail(t, AMPX_ERR_INVALID, "rows %lld..%lld are outside the training set",
                           (long long)first, (long long)(first + t->B));
        /* unshuffled rows: written over the epoch's copy, which is reloaded on the next step */
        int64_t f = t->data.features;
        st        = write_train(t, t->data.x_train + first * f, t->data.y_train + first, t->B);
    }
    if (st) return st;
    t->epoch_on_device = -1;
    bind_inputs(t, 0);
    t->x.training      = 1;
    t->x.micro         = 0;
    t->x.step          = (uint64_t)t->step;
    t->x.loss          = buf_tensor(t->eval_loss, 0, AMPX_F32);
    t->x.row0          = 0;
    t->x.rows          = (uint64_t)t->B;
    t->x.micro_batches = 1;
    st                 = micro_batch(t);
    t->x.micro_batches = (uint64_t)t->A;
    float l            = 0;
    if (!st) st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, &l, 4), "buffer_read");
    *loss = l;
    return st;
}

void ampx_trainer_inject_nonfinite_update(ampx_trainer *t, int64_t step, int which) {
    t->inject_w_step  = step;
    t->inject_w_param = which < 0 || which >= t->n_params ? 0 : which;
}

void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int which) {
    t->inject_step  = step;
    t->inject_param = which < 0 || which >= t->n_params ? 0 : which;
}

ampx_status ampx_trainer_logits(ampx_trainer *t, const int32_t *ids, int64_t rows, float *logits) {
    const g_graph *g = &t->g;
    if (!t->tokens)
        return tr_fail(t, AMPX_ERR_INVALID, "logits of token windows need a token model");
    if (rows < 1 || rows > t->B)
        return tr_fail(t, AMPX_ERR_INVALID, "%lld windows; at most the batch, %lld",
                       (long long)rows, (long long)t->B);
    uint64_t T = (uint64_t)t->data.window, c = (uint64_t)g_last(&g->values[g->logits]);
    uint64_t n     = (uint64_t)rows * T;
    ampx_dtype ld  = g->values[g->logits].dtype;
    ampx_status st = AMPX_OK;
    memset(t->host_in, 0, n * 4);
    for (int i = 0; i < g->n_inputs && !st; i++)
        st = check(t,
                   t->ifc->buffer_write(t->ctx, t->in_train[i], 0,
                                        t->in_offset[i] == -3 ? (const void *)ids : t->host_in,
                                        n * 4),
                   "buffer_write");
    if (st) return st;
    bind_inputs(t, 0);
    t->x.training = 0;
    t->x.micro    = 0;
    t->x.loss     = buf_tensor(t->eval_loss, 0, AMPX_F32);
    t->x.row0     = 0;
    t->x.rows     = (uint64_t)rows;
    st            = micro_batch(t);
    t->x.training = 1;
    t->x.rows     = (uint64_t)t->B;
    if (st) return st;
    ampx_tensor lt = exec_tensor(&t->x, g->logits);
    size_t es      = ampx_dtype_size(ld);
    void *raw      = ld == AMPX_F32 ? (void *)logits : malloc(n * c * es);
    if (!raw) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    st = check(t, t->ifc->buffer_read(t->ctx, lt.buf, lt.offset, raw, n * c * es), "buffer_read");
    if (ld != AMPX_F32) {
        for (uint64_t k = 0; !st && k < n * c; k++)
            logits[k] = ld == AMPX_BF16 ? ampx_bf16_to_f32(((uint16_t *)raw)[k])
                                        : ampx_f16_to_f32(((uint16_t *)raw)[k]);
        free(raw);
    }
    return st;
}

int64_t ampx_trainer_window(const ampx_trainer *t) {
    return t->tokens ? t->data.window : 0;
}

int64_t ampx_trainer_vocab(const ampx_trainer *t) {
    return t->tokens ? (int64_t)g_last(&t->g.values[t->g.logits]) : 0;
}

// ---------------------------------------------------------------------------------------
// The timeline

ampx_status ampx_trainer_trace(ampx_trainer *t, const char *path, int64_t first, int64_t last,
                               char *err, size_t err_cap) {
    if (t->trace) {
        err_set(ERR(err, err_cap), "a trace is already being written");
        return AMPX_ERR_INVALID;
    }
    if (first < 1 || last < first) {
        err_set(ERR(err, err_cap), "trace window %lld:%lld: expected 1 <= first <= last",
                (long long)first, (long long)last);
        return AMPX_ERR_INVALID;
    }
    t->trace = trace_open(path, first, last, err, err_cap);
    if (!t->trace) return AMPX_ERR_INVALID;
    /* one op per node and micro-batch at most a few times over, and the step's own */
    uint32_t cap = (uint32_t)(t->g.n_nodes * 8 * t->A + 64);
    if (t->ifc->size > offsetof(ampx_backend_iface, profile_end) && t->ifc->profile_begin &&
        t->ifc->profile_end && (t->dev_ns = calloc(2 * (size_t)cap, sizeof *t->dev_ns)))
        t->dev_cap = cap;
    char v[256];
    trace_meta(t->trace, "ampx_version", AMPX_VERSION_STRING);
    trace_meta(t->trace, "model", t->m->cfg.file);
    snprintf(v, sizeof v, "%s %s (ABI %u.%u)", t->ifc->name, t->ifc->version, t->ifc->abi_major,
             t->ifc->abi_minor);
    trace_meta(t->trace, "backend", v);
    trace_meta(t->trace, "timing", t->dev_cap ? "device" : "host");
    trace_meta(t->trace, "timing_note",
               t->dev_cap ? "op times are the backend's device timestamps"
                          : "the backend has no device timestamps (ABI 1.2 profile slots): op "
                            "times are the host's clock around each op, with a synchronize after "
                            "it, so they include launch overhead and the steps run slower");
    snprintf(v, sizeof v, "%lld:%lld", (long long)first, (long long)last);
    trace_meta(t->trace, "steps", v);
    return AMPX_OK;
}

ampx_status ampx_trainer_trace_close(ampx_trainer *t, char *err, size_t err_cap) {
    if (!t->trace) return AMPX_OK;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)call_total(&t->call));
    trace_meta(t->trace, "ops_issued", v);
    int bad  = trace_close(t->trace, err, err_cap);
    t->trace = NULL;
    return bad ? AMPX_ERR_INVALID : AMPX_OK;
}

uint64_t ampx_trainer_ops_issued(const ampx_trainer *t) {
    return call_total(&t->call);
}

uint64_t ampx_trainer_last_step_ops(const ampx_trainer *t) {
    return t->last_step_ops;
}

int64_t ampx_trainer_features(const ampx_trainer *t) {
    return t->tokens ? 0 : t->data.features;
}

int64_t ampx_trainer_outputs(const ampx_trainer *t) {
    return t->tokens ? 0 : g_elems(&t->g.values[t->g.logits]);
}

ampx_status ampx_trainer_predict(ampx_trainer *t, const float *x, int64_t rows, float *out) {
    const g_graph *g = &t->g;
    if (t->tokens) return tr_fail(t, AMPX_ERR_INVALID, "predictions of rows need a feature model");
    if (rows < 1 || rows > t->B)
        return tr_fail(t, AMPX_ERR_INVALID, "%lld rows; at most the batch, %lld", (long long)rows,
                       (long long)t->B);
    int32_t *zeros = calloc((size_t)rows, sizeof *zeros);
    if (!zeros) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = write_train(t, x, zeros, rows);
    free(zeros);
    if (st) return st;
    t->epoch_on_device = -1; /* the training rows there were overwritten */
    bind_inputs(t, 0);
    t->x.training = 0;
    t->x.micro    = 0;
    t->x.loss     = buf_tensor(t->eval_loss, 0, AMPX_F32);
    t->x.row0     = 0;
    t->x.rows     = (uint64_t)rows;
    st            = micro_batch(t);
    t->x.training = 1;
    t->x.rows     = (uint64_t)t->B;
    if (st) return st;
    uint64_t c = (uint64_t)g_elems(&g->values[g->logits]), n = (uint64_t)rows * c;
    ampx_dtype ld  = g->values[g->logits].dtype;
    size_t es      = ampx_dtype_size(ld);
    ampx_tensor lt = exec_tensor(&t->x, g->logits);
    void *raw      = malloc(n * es + 4);
    if (!raw) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    st = check(t, t->ifc->buffer_read(t->ctx, lt.buf, lt.offset, raw, n * es), "buffer_read");
    for (uint64_t k = 0; !st && k < n; k++)
        out[k] = ld == AMPX_F32    ? ((float *)raw)[k]
                 : ld == AMPX_BF16 ? ampx_bf16_to_f32(((uint16_t *)raw)[k])
                                   : ampx_f16_to_f32(((uint16_t *)raw)[k]);
    free(raw);
    /* a classifier's logits become its probabilities (softmax in double) */
    if (!st && g->values[g->labels].dtype == AMPX_I32)
        for (int64_t r = 0; r < rows; r++) {
            float *row = out + (uint64_t)r * c;
            double mx = -INFINITY, sum = 0;
            for (uint64_t j = 0; j < c; j++)
                mx = row[j] > mx ? row[j] : mx;
            for (uint64_t j = 0; j < c; j++)
                sum += exp((double)row[j] - mx);
            for (uint64_t j = 0; j < c; j++)
                row[j] = (float)(exp((double)row[j] - mx) / sum);
        }
    return st;
}

int ampx_trainer_classifier(const ampx_trainer *t) {
    return t->g.values[t->g.labels].dtype == AMPX_I32;
}
