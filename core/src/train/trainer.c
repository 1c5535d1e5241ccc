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
 *   scaler_update; the scalars block is copied into the ring. */
#include "train/trainer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/dtype.h"
#include "graph/ops.h"
#include "train/autodiff.h"

#define SLOT_SCALARS 0
#define SLOT_GSQ 128
#define SLOT_LOSS 136

ampx_status tr_fail(ampx_trainer *t, ampx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof t->error, fmt, ap);
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
    if ((st = alloc_zero(t, bytes, &p->master)) || (st = alloc_zero(t, bytes, &p->grad))) return st;
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
    if (val->grad >= 0) t->own[val->grad] = p->grad;
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

/* Maps the inputs onto the data: f32 inputs take consecutive features in declaration order,
 * the labels input the class, an f32 target of the mean squared error its one-hot code. */
static ampx_status map_inputs(ampx_trainer *t, data_request *req) {
    const g_graph *g = &t->g;
    int64_t f        = 0;
    static char names[512];
    names[0] = 0;
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
                           "and CSV readers give one class per example",
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
    for (int i = 0; i < t->g.n_inputs; i++) {
        uint64_t bytes;
        const void *src = input_rows(t, i, t->data.x_test, t->data.y_test, t->data.n_test, &bytes);
        if ((st = upload(t, &t->in_test[i], src, bytes))) return st;
        uint64_t per = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) * 4;
        if ((st = alloc_zero(t, (uint64_t)t->data.n_train * per, &t->in_train[i]))) return st;
    }
    return AMPX_OK;
}

ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out, char *err,
                                size_t err_cap) {
    *out            = NULL;
    ampx_trainer *t = calloc(1, sizeof *t);
    if (!t || g_init_graph(&t->g)) {
        free(t);
        snprintf(err, err_cap, "out of memory");
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
    t->epoch_on_device = -1;
    call_init(&t->call, be, t->error, sizeof t->error);
    ampx_status st = AMPX_ERR_INVALID;
    g_copy_graph(&t->g, &m->graph);
    if (autodiff(&t->g, t->error, sizeof t->error)) goto fail;
    t->own        = calloc((size_t)t->g.n_values, sizeof *t->own);
    t->persistent = calloc((size_t)t->g.n_values, 1);
    if (!t->own || !t->persistent) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int v = 0; v < t->g.n_values; v++)
        if (t->g.values[v].role == ROLE_PARAM && t->g.values[v].grad >= 0)
            t->persistent[t->g.values[v].grad] = 1;
    if ((st = check_ops(t))) goto fail;
    data_request req;
    if ((st = map_inputs(t, &req))) goto fail;
    st = AMPX_ERR_INVALID;
    if (data_load(&req, &t->data, t->error, sizeof t->error)) goto fail;
    if (t->data.n_train < t->B) {
        tr_fail(t, st, "%s: %lld training examples are fewer than one batch of %lld", m->cfg.file,
                (long long)t->data.n_train, (long long)t->B);
        goto fail;
    }
    t->micro_per_epoch = t->data.n_train / t->B;
    uint64_t f = (uint64_t)t->data.features, widest = f + 1;
    for (int i = 0; i < t->g.n_inputs; i++)
        if ((uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) > widest)
            widest = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]);
    int64_t most = t->data.n_train > t->data.n_test ? t->data.n_train : t->data.n_test;
    t->shuffle_x = malloc(sizeof(float) * (size_t)(t->data.n_train * (int64_t)f + 1));
    t->shuffle_y = malloc(sizeof(int32_t) * (size_t)(t->data.n_train + 1));
    t->host_in   = malloc(sizeof(float) * (size_t)((uint64_t)most * widest + 1));
    if (!t->shuffle_x || !t->shuffle_y || !t->host_in) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the training set");
        goto fail;
    }
    if ((st = create_values(t))) goto fail;
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
    t->x            = (g_exec){.g             = &t->g,
                               .p             = &t->plan,
                               .call          = &t->call,
                               .arena         = t->arena,
                               .own           = t->own,
                               .rows          = (uint64_t)t->B,
                               .training      = 1,
                               .micro_batches = (uint64_t)t->A,
                               .seed          = m->cfg.train.seed,
                               .scalars       = buf_tensor(t->scalars, 0, AMPX_F32)};
    t->t_last_flush = now_ms();
    *out            = t;
    return AMPX_OK;
fail:
    snprintf(err, err_cap, "%s", t->error);
    ampx_trainer_free(t);
    return st ? st : AMPX_ERR_INVALID;
}

void ampx_trainer_free(ampx_trainer *t) {
    if (!t) return;
    if (t->ctx) t->ifc->synchronize(t->ctx);
    ampx_buffer **bufs[] = {&t->arena, &t->ring, &t->eval_loss, &t->scalars};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) t->ifc->buffer_free(t->ctx, *bufs[i]);
    for (int i = 0; i < G_MAX_INPUTS; i++) {
        if (t->in_train[i]) t->ifc->buffer_free(t->ctx, t->in_train[i]);
        if (t->in_test[i]) t->ifc->buffer_free(t->ctx, t->in_test[i]);
    }
    for (int i = 0; i < t->n_params; i++) {
        param *p          = &t->params[i];
        ampx_buffer *pb[] = {p->master, p->grad, p->s1, p->s2, p->copy};
        for (int k = 0; k < 5; k++)
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

static ampx_status select_micro(ampx_trainer *t, int64_t global_micro) {
    ampx_status st = load_epoch(t, global_micro / t->micro_per_epoch);
    bind_inputs(t, 0);
    t->x.row0 = (uint64_t)((global_micro % t->micro_per_epoch) * t->B);
    t->x.rows = (uint64_t)t->B;
    return st;
}

static ampx_tensor_list grad_list(ampx_trainer *t, ampx_tensor *ts, uint64_t *ns) {
    for (int i = 0; i < t->n_params; i++) {
        ts[i] = buf_tensor(t->params[i].grad, 0, AMPX_F32);
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
        gt[i]    = buf_tensor(p->grad, 0, AMPX_F32);
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

static ampx_status one_step(ampx_trainer *t) {
    ampx_status st;
    uint64_t slot = (uint64_t)((t->step - t->ring_first) % t->K) * t->slot_bytes;
    t->x.training = 1;
    t->x.step     = (uint64_t)t->step;
    for (int64_t a = 0; a < t->A; a++) {
        t->x.micro = (int)a;
        t->x.loss  = buf_tensor(t->ring, slot + SLOT_LOSS + 4 * (uint64_t)a, AMPX_F32);
        if ((st = select_micro(t, t->step * t->A + a)) || (st = micro_batch(t))) return st;
    }
    if (t->step + 1 == t->inject_step) {
        uint32_t inf = 0x7F800000u;
        if ((st = check(t,
                        t->ifc->buffer_fill(t->ctx, t->params[t->inject_param].grad, 0, 4, inf, 4),
                        "buffer_fill")))
            return st;
    }
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
    if ((st = step_op(t, AMPX_OP_UNSCALE_CHECK, &u)) ||
        (st = step_op(t, AMPX_OP_SUM_SQUARES, &q)) || (st = optimizer_step(t, gsq)) ||
        (st = step_op(t, AMPX_OP_SCALER_UPDATE, &v)))
        return st;
    st = check(t,
               t->ifc->buffer_copy(t->ctx, t->ring, slot + SLOT_SCALARS, t->scalars, 0,
                                   sizeof(ampx_scalars)),
               "buffer_copy");
    if (!st) t->step++;
    return st;
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
        ampx_step_record r = {.step      = t->ring_first + i + 1,
                              .loss      = lsum / (double)t->A,
                              .grad_norm = sqrt((double)gsq),
                              .scale     = sc.scale,
                              .lr        = sc.lr,
                              .skipped   = sc.last_found_inf,
                              .time_ms   = per,
                              .overflow  = names};
        if (record && record(user, &r)) *stop = 1;
        if (sc.stop_reason && !*stop) {
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
    ampx_dtype ld         = g->values[g->logits].dtype;
    unsigned char *logits = malloc((size_t)((uint64_t)t->B * c * 4));
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
        ampx_tensor lt = gx_tensor(&t->x, g->logits);
        float loss;
        if ((classify && (st = check(t,
                                     t->ifc->buffer_read(t->ctx, lt.buf, lt.offset, logits,
                                                         t->x.rows * c * ampx_dtype_size(ld)),
                                     "buffer_read"))) ||
            (st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, &loss, 4), "buffer_read")))
            break;
        loss_sum += (double)loss * (double)t->x.rows;
        for (uint64_t r = 0; classify && r < t->x.rows; r++) {
            int64_t best = 0;
            float bv     = -INFINITY;
            for (uint64_t j = 0; j < c; j++) {
                uint64_t k = r * c + j;
                float v    = ld == AMPX_F32    ? ((float *)logits)[k]
                             : ld == AMPX_BF16 ? ampx_bf16_to_f32(((uint16_t *)logits)[k])
                                               : ampx_f16_to_f32(((uint16_t *)logits)[k]);
                if (v > bv) bv = v, best = (int64_t)j;
            }
            correct += best == t->data.y_test[r0 + (int64_t)r];
        }
    }
    free(logits);
    t->x.training = 1;
    bind_inputs(t, 0);
    if (st) return st;
    out->examples = n;
    out->accuracy = !classify ? -1 : n ? (double)correct / (double)n : 0;
    out->loss     = n ? loss_sum / (double)n : 0;
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
    return check(t, t->ifc->buffer_read(t->ctx, b, 0, host, t->params[i].n * 4), "buffer_read");
}

ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host) {
    ampx_buffer *b = param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    ampx_status st =
        check(t, t->ifc->buffer_write(t->ctx, b, 0, host, t->params[i].n * 4), "buffer_write");
    param *p = &t->params[i];
    if (!st && what == 0 && p->copy_dtype != AMPX_F32) st = cast_copy(t, p);
    return st;
}

ampx_status ampx_trainer_gradients(ampx_trainer *t, int64_t first, double *loss) {
    if (first < 0 || first + t->B > t->data.n_train)
        return tr_fail(t, AMPX_ERR_INVALID, "rows %lld..%lld are outside the training set",
                       (long long)first, (long long)(first + t->B));
    /* unshuffled rows: written over the epoch's copy, which is reloaded on the next step */
    int64_t f      = t->data.features;
    ampx_status st = write_train(t, t->data.x_train + first * f, t->data.y_train + first, t->B);
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

void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int which) {
    t->inject_step  = step;
    t->inject_param = which < 0 || which >= t->n_params ? 0 : which;
}
