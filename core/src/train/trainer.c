/* trainer.c — creating a trainer: the model's graph with its backward (autodiff), the
 * checks that the backend has every op the graph needs and computes what it reports, the
 * parameters with their optimizer state and working copies, the gradient arena and its
 * all-reduce buckets, the memory check, the plan and the executor; freeing it; and the
 * parameters' accessors. The steps are step.c's; trainer.h says which file owns what. */
#include "train/hooks.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/ops.h"
#include "passes/autodiff.h"
#include "passes/copies.h"
#include "passes/fuse.h"

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

static ampx_status write_values(ampx_trainer *t, ampx_buffer *b, const g_value *v, uint64_t n,
                                uint64_t seed) {
    float *host = malloc(n * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", v->name);
    if (v->role == ROLE_CONST)
        for (uint64_t i = 0; i < n; i++)
            host[i] = v->const_fill;
    else
        init_values(host, n, v->init, v->init_std, (uint64_t)v->fan_in, (uint64_t)v->fan_out, seed);
    ampx_status st = tr_check(t, t->ifc->buffer_write(t->ctx, b, 0, host, n * 4), "buffer_write");
    free(host);
    return st;
}

static ampx_status cast_copy(ampx_trainer *t, const param *p) {
    ampx_cast_args c = {.size = sizeof c,
                        .n    = p->n,
                        .src  = tr_tensor(p->master, 0, AMPX_F32),
                        .dst  = tr_tensor(p->copy, 0, p->copy_dtype)};
    return tr_step_op(t, AMPX_OP_CAST, &c);
}

/* ZeRO-1: this rank's shard of the parameter (dp_shard); without ZeRO all of it. A
 * parameter with a working copy keeps only its shard of the f32 master too. */
static void zero_shard(const ampx_trainer *t, param *p) {
    p->lo = 0, p->shard = p->n;
    if (t->zero) dp_shard(p->n, t->dp.rank, t->dp.world, &p->lo, &p->shard);
    p->mshard = t->zero && p->copy_dtype != AMPX_F32;
}

ampx_status tr_copy_from_host(ampx_trainer *t, const param *p, const float *full) {
    ampx_buffer *tmp = NULL;
    ampx_status st   = tr_alloc_zero(t, p->n * 4, &tmp);
    if (!st) st = tr_check(t, t->ifc->buffer_write(t->ctx, tmp, 0, full, p->n * 4), "buffer_write");
    ampx_cast_args c = {.size = sizeof c,
                        .n    = p->n,
                        .src  = tr_tensor(tmp, 0, AMPX_F32),
                        .dst  = tr_tensor(p->copy, 0, p->copy_dtype)};
    if (!st) st = tr_step_op(t, AMPX_OP_CAST, &c);
    if (tmp) t->ifc->buffer_free(t->ctx, tmp);
    return st;
}

static uint64_t param_seed(const ampx_trainer *t, int i) {
    return t->m->cfg.train.seed * 1000003ull + (uint64_t)i * 7919ull + 1;
}

/* ZeRO-1, a sharded master's first values: drawn whole (as without ZeRO), the copy cast from
 * them, this rank's shard kept (and on rank 0 the whole, staged: zero_stage). */
static ampx_status init_sharded(ampx_trainer *t, param *p, const g_value *val) {
    float *host = malloc(p->n * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", val->name);
    init_values(host, p->n, val->init, val->init_std, (uint64_t)val->fan_in, (uint64_t)val->fan_out,
                param_seed(t, t->n_params));
    ampx_status st = tr_copy_from_host(t, p, host);
    if (!st && p->shard)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, p->master, 0, host + p->lo, p->shard * 4),
                      "buffer_write");
    free(host);
    return st;
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
    p->wd         = val->decay ? m->cfg.opt.weight_decay : 0;
    p->copy_dtype = val->copy >= 0 ? t->g.values[val->copy].dtype : AMPX_F32;
    zero_shard(t, p);
    uint64_t bytes = (p->shard ? p->shard : 1) * 4; /* the optimizer state: this rank's shard */
    ampx_status st;
    /* the gradient: grad_arena() */
    if ((st = tr_alloc_zero(t, p->mshard ? bytes : p->n * 4, &p->master))) return st;
    /* a sampler or predictor holds no optimizer state (nor gradients) */
    if (!t->inference && (m->cfg.opt.kind == OPT_ADAMW || m->cfg.opt.momentum != 0))
        if ((st = tr_alloc_zero(t, bytes, &p->s1))) return st;
    if (!t->inference && m->cfg.opt.kind == OPT_ADAMW && (st = tr_alloc_zero(t, bytes, &p->s2)))
        return st;
    if (p->copy_dtype != AMPX_F32 && (st = tr_alloc_zero(t, p->n * 2, &p->copy))) return st;
    /* a run that starts from a file draws nothing it would overwrite (the buffers are zero) */
    if (!m->cfg.train.skip_init && p->mshard && (st = init_sharded(t, p, val))) return st;
    if (!m->cfg.train.skip_init && !p->mshard) {
        if ((st = write_values(t, p->master, val, p->n, param_seed(t, t->n_params)))) return st;
        if (p->copy_dtype != AMPX_F32 && (st = cast_copy(t, p))) return st;
    }
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
            if ((st = tr_alloc_zero(t, n * 4, &t->own[v])) ||
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
    uint32_t step[] = {AMPX_OP_UNSCALE_CHECK,
                       AMPX_OP_SUM_SQUARES,
                       AMPX_OP_SCALER_UPDATE,
                       t->m->cfg.opt.kind == OPT_ADAMW ? AMPX_OP_ADAMW : AMPX_OP_SGD,
                       copies ? AMPX_OP_CAST : AMPX_OP_SCALER_UPDATE,
                       t->g.n_fp8 ? AMPX_OP_FP8_SCALE_UPDATE : AMPX_OP_SCALER_UPDATE};
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
    ampx_status st   = tr_check(t, t->ifc->buffer_alloc(t->ctx, sizeof host, &buf), "buffer_alloc");
    if (st) return st;
    if (!(st = tr_check(t, t->ifc->buffer_write(t->ctx, buf, 0, host, sizeof host),
                        "buffer_write"))) {
        ampx_gemm_args g = {.size  = sizeof g,
                            .m     = 2,
                            .n     = 2,
                            .k     = 3,
                            .batch = 1,
                            .lda   = 3,
                            .ldb   = 2,
                            .ldc   = 2,
                            .alpha = 1,
                            .a     = tr_tensor(buf, 0, AMPX_F32),
                            .b     = tr_tensor(buf, 24, AMPX_F32),
                            .c     = tr_tensor(buf, 48, AMPX_F32)};
        if (!(st = call_op(&t->call, "self-check", AMPX_OP_GEMM, &g)))
            st = tr_check(t, t->ifc->buffer_read(t->ctx, buf, 48, c, sizeof c), "buffer_read");
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
    grad_layout *gl = &t->grads;
    int order[TR_MAX_PARAMS];
    gl->n_params = t->n_params;
    if (t->inference) return AMPX_OK; /* no backward: no gradients */
    for (int i = 0; i < t->n_params; i++) {
        int gv           = t->g.values[t->params[i].value].grad;
        gl->done_node[i] = -1;
        for (int k = 0; gv >= 0 && k < t->g.n_nodes; k++) {
            const g_node *n = &t->g.nodes[k];
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o] >= 0 && g_root(&t->g, n->out[o]) == gv) gl->done_node[i] = k;
        }
        order[i] = i;
    }
    /* insertion sort by completion node: stable, so ties keep the declaration order */
    for (int i = 1; i < t->n_params; i++)
        for (int j = i; j > 0 && gl->done_node[order[j - 1]] > gl->done_node[order[j]]; j--) {
            int x    = order[j];
            order[j] = order[j - 1], order[j - 1] = x;
        }
    uint64_t cap = bucket_cap(), off = 0;
    gl->n_buckets = 0;
    for (int k = 0; k < t->n_params; k++) {
        param *p       = &t->params[order[k]];
        uint64_t bytes = (p->n * 4 + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
        grad_bucket *b = gl->n_buckets ? &gl->buckets[gl->n_buckets - 1] : NULL;
        /* (past GRAD_MAX_BUCKETS the last bucket grows) */
        if (!b || (b->bytes + bytes > cap && gl->n_buckets < GRAD_MAX_BUCKETS)) {
            b  = &gl->buckets[gl->n_buckets++];
            *b = (grad_bucket){.off = off};
        }
        p->grad_off             = off;
        gl->bucket[order[k]]    = (int)(b - gl->buckets);
        gl->param_off[order[k]] = off;
        gl->param_n[order[k]]   = p->n;
        b->bytes += bytes;
        b->n_params++;
        off += bytes;
    }
    gl->bytes      = off;
    ampx_status st = tr_alloc_zero(t, off, &gl->buf);
    if (st) return st;
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        int gv   = t->g.values[p->value].grad;
        p->grad  = gl->buf;
        if (gv >= 0) t->own[gv] = gl->buf, t->own_off[gv] = p->grad_off;
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

/* Refuses, with the figures, a model whose parameters, optimizer state and data cannot fit
 * the device (or the host's memory for the data), before anything is allocated: the kernel
 * would otherwise kill the process with no message. Computed in double: shapes are
 * untrusted and their products may not fit 64 bits. */
static ampx_status check_memory(ampx_trainer *t, const data_request *req) {
    const ampx_model *m = t->m;
    double state        = m->cfg.opt.kind == OPT_ADAMW ? 8 : m->cfg.opt.momentum != 0 ? 4 : 0;
    double per_elem     = 8 + state / (t->zero ? t->dp.world : 1); /* ZeRO-1: a shard */
    double device = 0, host = 0;
    for (int v = 0; v < t->g.n_values; v++) {
        const g_value *val = &t->g.values[v];
        double n           = 1;
        for (int k = 0; k < val->ndim; k++)
            n *= (double)val->dims[k];
        if (val->role == ROLE_PARAM)
            device += n * (val->master >= 0 ? 2 /* the working copy */
                           : t->zero && val->copy >= 0
                               ? per_elem - 4 + 4.0 / t->dp.world /* a shard of the master */
                               : per_elem);
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
    double have = (double)info.memory_bytes, gib = (double)(1u << 30);
    if (info.memory_bytes && device > have)
        return tr_fail(t, AMPX_ERR_NO_MEMORY,
                       "%s: the parameters, optimizer state and data need %.1f GiB (at least) but "
                       "the device (%s) has %.1f GiB",
                       m->cfg.file, device / gib, info.name, have / gib);
    /* the activations and their gradients: the planned arena */
    double arena = (double)t->plan.arena_bytes;
    if (info.memory_bytes && device + arena > have)
        return tr_fail(t, AMPX_ERR_NO_MEMORY,
                       "%s (model \"%s\"): the activation arena (%.1f GiB planned for batch %lld) "
                       "and the parameters, optimizer state and data (%.1f GiB) need %.1f GiB (at "
                       "least) but the device (%s) has %.1f GiB: lower train.batch or the window",
                       m->cfg.file, m->cfg.name, arena / gib, (long long)t->B, device / gib,
                       (device + arena) / gib, info.name, have / gib);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && host > (double)pages * (double)page)
        return tr_fail(t, AMPX_ERR_NO_MEMORY,
                       "%s: the training data need %.1f GiB of host memory (at least), more than "
                       "the %.1f GiB there is",
                       m->cfg.file, host / (double)(1u << 30),
                       (double)pages * (double)page / (double)(1u << 30));
    return AMPX_OK;
}

/* GEMM's epilogue for these dtypes; with fp8 operands, GEMM_FP8's (ABI 1.7). */
static int gemm_epilogue(void *be, const ampx_dtype *dtypes) {
    if (!ampx_dtype_is_fp8(dtypes[0])) return ampx_backend_gemm_epilogue(be, dtypes);
    const ampx_backend_iface *ifc = ampx_backend_iface_of(be);
    return ifc->abi_minor >= 7 && ampx_backend_op_slot(be, AMPX_OP_GEMM_FP8) &&
           ifc->supports(ampx_backend_context(be), AMPX_OP_GEMM_FP8, dtypes, 3,
                         AMPX_SHAPE_GEMM_EPILOGUE);
}

/* The graph with its backward nodes (each dense layer one GEMM with an epilogue where the
 * backend takes it), the executor's per-value tables, and the backend's checks (every op
 * there, and computing what it reports). */
static ampx_status create_graph(ampx_trainer *t) {
    ampx_status st;
    g_copy_graph(&t->g, &t->m->graph);
    /* a sampler or predictor keeps its copies: no optimizer state beside them, and each
     * token's forward would cast every weight again */
    unsigned recompute = t->m->cfg.recompute;
    if (!t->inference && model_casts_copies(t->m)) {
        if (copies_cast_on_use(&t->g) < 0)
            return tr_fail(t, AMPX_ERR_INVALID, "the graph is too large for its copies' casts");
        recompute |= RECOMPUTE_COPIES;
    }
    fuse_dense(&t->g, gemm_epilogue, t->be);
    /* a sampler or predictor runs the forward alone: its plan, and the ops it needs, too */
    if (!t->inference && autodiff(&t->g, recompute, t->error, sizeof t->error))
        return AMPX_ERR_INVALID;
    t->own        = calloc((size_t)t->g.n_values, sizeof *t->own);
    t->own_off    = calloc((size_t)t->g.n_values, sizeof *t->own_off);
    t->persistent = calloc((size_t)t->g.n_values, 1);
    if (!t->own || !t->own_off || !t->persistent)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int v = 0; v < t->g.n_values; v++)
        if (t->g.values[v].role == ROLE_PARAM && t->g.values[v].grad >= 0)
            t->persistent[t->g.values[v].grad] = 1;
    if ((st = check_ops(t)) || (st = self_check(t))) return st;
    if (t->dp.world > 1) {
        ampx_scalars fresh;
        init_scalars(t->m, &fresh);
        if ((st = dp_join(&t->dp, &t->m->cfg, &t->g, &fresh,
                          ck_file_step(t->m->cfg.train.start_from))))
            return st;
    }
    return AMPX_OK;
}

/* The data the inputs read (nothing for a sampler or predictor: the caller's rows), and the
 * host staging for it. */
static ampx_status create_data(ampx_trainer *t) {
    const char *file = t->m->cfg.file;
    data_request req;
    ampx_status st;
    if ((st = inputs_map(t, &req))) return st;
    /* the plan first: its arena counts in the memory check (a sampler's values each keep
     * their place: the KV cache reads the keys and values of earlier calls) */
    if (plan_make(&t->g, (uint64_t)t->B, t->persistent, t->inference != 0, &t->plan))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    if ((st = check_memory(t, &req))) return st;
    if (t->inference == 1 && !t->in.tokens)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: sampling reads a token model (an i32 token input and its labels)",
                       file);
    if (t->inference == 2 && t->in.tokens)
        return tr_fail(t, AMPX_ERR_INVALID, "%s: a token model: sample from it with ampx generate",
                       file);
    if (t->inference) {
        t->in.data.window   = req.window;
        t->in.data.features = req.features + req.targets; /* rows as data_load lays them */
        t->in.data.n_train  = t->B * t->dp.world;         /* nothing is loaded: the caller's rows */
    } else if (data_load(&req, &t->in.data, t->error, sizeof t->error)) {
        return AMPX_ERR_INVALID;
    }
    if (t->in.data.n_train < t->B * t->dp.world) {
        if (t->dp.world > 1)
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: %lld training examples are fewer than one global batch of %lld (%d "
                           "ranks x %lld)",
                           file, (long long)t->in.data.n_train, (long long)(t->B * t->dp.world),
                           t->dp.world, (long long)t->B);
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: %lld training examples are fewer than one batch of %lld", file,
                       (long long)t->in.data.n_train, (long long)t->B);
    }
    const dataset *d = &t->in.data;
    for (int s = 0; d->sequential && s < d->n_shards; s++)
        if (d->shard_start[s + 1] - d->shard_start[s] < t->B * t->dp.world * d->window + 1)
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: training shard %d of %d holds %lld tokens, fewer than one "
                           "sequential chunk of %lld x %lld + 1",
                           file, s + 1, d->n_shards,
                           (long long)(d->shard_start[s + 1] - d->shard_start[s]),
                           (long long)(t->B * t->dp.world), (long long)d->window);
    t->in.micro_per_epoch = t->in.data.n_train / (t->B * t->dp.world);
    if (t->in.tokens) t->in.data.n_train = 0; /* no examples to shuffle: windows are drawn */
    return inputs_alloc(t);
}

/* Everything on the device: parameters, state, the gradient arena, the plan's arena, the
 * ring, the scalars block, the inputs; then the executor, the monitor. */
static ampx_status create_device(ampx_trainer *t) {
    const ampx_model *m = t->m;
    ampx_status st;
    if ((st = create_values(t)) || (st = grad_arena(t))) return st;
    ampx_scalars s;
    init_scalars(m, &s);
    if ((st = tr_alloc_zero(t, t->plan.arena_bytes, &t->arena)) || (st = ring_setup(t)) ||
        (st = tr_alloc_zero(t, 64, &t->eval_loss)) ||
        (st = tr_upload(t, &t->scalars, &s, sizeof s)) || (st = inputs_upload(t)))
        return st;
    t->x = (executor){.h             = EXEC_HANDLE,
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
                      .replica       = (uint32_t)t->dp.rank,
                      .replicas      = (uint32_t)t->dp.world,
                      .scalars       = tr_tensor(t->scalars, 0, AMPX_F32)};
    if ((st = fp8_setup(t))) return st;
    t->ring.t_last_flush = tr_now_ms();
    t->mon.every         = m->cfg.train.monitor_every;
    /* a slot past the table of an older minor reads as NULL; the minor is checked too */
    t->amp_fused = t->ifc->abi_minor >= 4 && ampx_backend_op_slot(t->be, AMPX_OP_AMP_PASS) != NULL;
    t->mon.armed = m->cfg.train.forensics && !t->inference;
    if (t->mon.every > 0 && (st = monitor_setup(t))) return st;
    return forensics_setup(t);
}

/* ZeRO-1, rank 0: host memory for the whole optimizer state, where checkpoints are written
 * from and read into (ampx_trainer_gather_state, ampx_trainer_sync move the shards). */
static ampx_status zero_stage(ampx_trainer *t) {
    if (!t->zero || t->dp.rank != 0) return AMPX_OK;
    uint64_t total = 1;
    for (int i = 0; i < t->n_params; i++)
        total += t->params[i].n *
                 (uint64_t)(!!t->params[i].s1 + !!t->params[i].s2 + t->params[i].mshard);
    if (!(t->zero_full = calloc(total, sizeof(float))))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the optimizer state's staging");
    float *at = t->zero_full;
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        if (p->s1) p->s1_full = at, at += p->n;
        if (p->s2) p->s2_full = at, at += p->n;
        if (!p->mshard) continue;
        p->m_full          = at, at += p->n;
        const g_value *val = &t->g.values[p->value];
        if (!t->m->cfg.train.skip_init) /* the values init_sharded drew */
            init_values(p->m_full, p->n, val->init, val->init_std, (uint64_t)val->fan_in,
                        (uint64_t)val->fan_out, param_seed(t, i));
    }
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
    t->m                  = m;
    t->be                 = be;
    t->ifc                = ampx_backend_iface_of(be);
    t->ctx                = ampx_backend_context(be);
    t->B                  = m->cfg.train.batch;
    t->A                  = m->cfg.train.accumulate;
    t->K                  = m->cfg.train.log_every;
    t->inject.grad_step   = -1;
    t->inject.update_step = -1;
    t->in.epoch_on_device = -1;
    t->keeper.best_loss   = INFINITY;
    t->keeper.best_step   = -1;
    t->inference          = inference;
    t->hooks              = step_hooks;
    t->n_hooks            = n_step_hooks;
    call_init(&t->call, be, t->error, sizeof t->error);
    dp_init(&t->dp, dist, &t->call, t->error, sizeof t->error);
    t->zero = !inference && m->cfg.train.zero && t->dp.world > 1;
    ampx_status st;
    if (t->zero && m->cfg.opt.stochastic_rounding) {
        st = tr_fail(t, AMPX_ERR_UNSUPPORTED,
                     "train.zero 1 with optimizer.stochastic_rounding: not supported (the working "
                     "copies are cast from the gathered masters, to nearest)");
        goto fail;
    }
    if ((st = create_graph(t)) || (st = create_data(t)) || (st = create_device(t)) ||
        (st = zero_stage(t)))
        goto fail;
    /* every rank starts from rank 0's parameters */
    if (t->dp.world > 1 &&
        ((st = dp_setup(&t->dp, &t->grads, t->zero)) || (st = ampx_trainer_sync(t))))
        goto fail;
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
    free(t->zero_full);
    if (t->ctx) t->ifc->synchronize(t->ctx);
    for (int h = 0; h < t->n_hooks; h++)
        if (t->hooks[h]->release) t->hooks[h]->release(t);
    ampx_buffer **bufs[] = {&t->arena,     &t->ring.buf, &t->eval_loss, &t->scalars,
                            &t->grads.buf, &t->fp8,      &t->fp8_max,   &t->fp8_counts};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) t->ifc->buffer_free(t->ctx, *bufs[i]);
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
    inputs_free(t);
    kv_free(t);
    plan_free(&t->plan);
    g_free_graph(&t->g);
    free(t->own);
    free(t->own_off);
    dp_free(&t->dp);
    free(t->persistent);
    free(t);
}

// ---------------------------------------------------------------------------------------
// Accessors

int64_t ampx_trainer_step(const ampx_trainer *t) {
    return t->step;
}

const char *ampx_trainer_error(const ampx_trainer *t) {
    return t->error;
}

ampx_keeper *ampx_trainer_keeper(ampx_trainer *t) {
    return &t->keeper;
}

void ampx_trainer_stop_on(ampx_trainer *t, const volatile sig_atomic_t *flag) {
    t->stop = flag;
}

const char *ampx_trainer_notice(const ampx_trainer *t) {
    return t->notice;
}

ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out) {
    return tr_check(t, t->ifc->buffer_read(t->ctx, t->scalars, 0, out, sizeof *out), "buffer_read");
}

void ampx_trainer_memory(const ampx_trainer *t, uint64_t *peak, uint64_t *unplanned) {
    *peak      = t->plan.arena_bytes;
    *unplanned = t->plan.unplanned_bytes;
}

void ampx_trainer_param_bytes(const ampx_trainer *t, uint64_t *weights, uint64_t *state) {
    *weights = *state = 0;
    for (int i = 0; i < t->n_params; i++) {
        const param *p = &t->params[i];
        *weights += (p->mshard ? p->shard : p->n) * 4 + (p->copy ? p->n * 2 : 0);
        *state += (p->s1 ? p->shard * 4 : 0) + (p->s2 ? p->shard * 4 : 0);
    }
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
    ampx_buffer *b =
        t->zero && (what >= 2 || (what == 0 && t->params[i].mshard)) ? NULL : param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    uint64_t off = what == 1 ? t->params[i].grad_off : 0;
    return tr_check(t, t->ifc->buffer_read(t->ctx, b, off, host, t->params[i].n * 4),
                    "buffer_read");
}

ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host) {
    ampx_buffer *b =
        t->zero && (what >= 2 || (what == 0 && t->params[i].mshard)) ? NULL : param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    t->kv.len = 0; /* new weights: nothing cached holds */
    param *p  = &t->params[i];
    ampx_status st =
        tr_check(t, t->ifc->buffer_write(t->ctx, b, what == 1 ? p->grad_off : 0, host, p->n * 4),
                 "buffer_write");
    if (!st && what == 0 && p->copy_dtype != AMPX_F32) st = cast_copy(t, p);
    return st;
}

// ---------------------------------------------------------------------------------------
// Data-parallel runs (the all-reduce itself is data_parallel.c's)

/* Rank 0's optimizer state tensor of n values to every rank: the whole of it, or under
 * ZeRO-1 each rank's shard of rank 0's staged copy (full). */
static ampx_status sync_state(ampx_trainer *t, ampx_buffer *b, float *full, uint64_t n,
                              float *host) {
    if (!t->zero) return dp_bcast_buffer(&t->dp, b, 0, n * 4, host);
    uint64_t lo, count;
    dp_shard(n, t->dp.rank, t->dp.world, &lo, &count);
    ampx_status st = dp_move_shards(&t->dp, full, host, n, 0);
    return st || !count
               ? st
               : tr_check(t, t->ifc->buffer_write(t->ctx, b, 0, host, count * 4), "buffer_write");
}

ampx_status ampx_trainer_gather_state(ampx_trainer *t) {
    if (!t->zero) return AMPX_OK;
    uint64_t most = 1;
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].shard > most) most = t->params[i].shard;
    float *host = malloc(most * 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p                = &t->params[i];
        ampx_buffer *const b[3] = {p->s1, p->s2, p->mshard ? p->master : NULL};
        float *const full[3]    = {p->s1_full, p->s2_full, p->m_full};
        for (int k = 0; k < 3 && !st; k++) {
            if (!b[k]) continue;
            if (p->shard)
                st = tr_check(t, t->ifc->buffer_read(t->ctx, b[k], 0, host, p->shard * 4),
                              "buffer_read");
            if (!st) st = dp_move_shards(&t->dp, full[k], host, p->n, 1);
        }
    }
    free(host);
    return st;
}

ampx_status ampx_trainer_sync(ampx_trainer *t) {
    if (t->dp.world < 2) return AMPX_OK;
    uint64_t most = sizeof(ampx_scalars);
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].n * 4 > most) most = t->params[i].n * 4;
    for (int i = 0; i < t->n_state; i++)
        if (t->state[i].n * 4 > most) most = t->state[i].n * 4;
    if (t->fp8 && fp8_state_floats(t) * 4 > most) most = fp8_state_floats(t) * 4;
    void *host = malloc(most);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    dp_state *dp   = &t->dp;
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p = &t->params[i];
        /* the working copy as bytes too: with stochastic rounding it is not a cast of the
         * master that each rank could redo */
        st = p->mshard ? sync_state(t, p->master, p->m_full, p->n, host)
                       : dp_bcast_buffer(dp, p->master, 0, p->n * 4, host);
        if (!st && p->copy) st = dp_bcast_buffer(dp, p->copy, 0, p->n * 2, host);
        if (!st && p->s1) st = sync_state(t, p->s1, p->s1_full, p->n, host);
        if (!st && p->s2) st = sync_state(t, p->s2, p->s2_full, p->n, host);
    }
    for (int i = 0; i < t->n_state && !st; i++)
        st = dp_bcast_buffer(dp, t->state[i].buf, 0, t->state[i].n * 4, host);
    if (!st) st = dp_bcast_buffer(dp, t->scalars, 0, sizeof(ampx_scalars), host);
    if (!st && t->fp8) st = dp_bcast_buffer(dp, t->fp8, 0, fp8_state_floats(t) * 4, host);
    free(host);
    int64_t step = t->step;
    if (!st && (st = dp_bcast_host(dp, &step, sizeof step))) return st;
    if (!st) t->step = t->ring.first = step;
    return st;
}

const char *ampx_trainer_dist_path(const ampx_trainer *t) {
    return dp_path_name(&t->dp);
}

void ampx_trainer_gradient_layout(const ampx_trainer *t, uint64_t *bytes, int *buckets) {
    *bytes   = t->grads.bytes;
    *buckets = t->grads.n_buckets;
}

double ampx_trainer_comm_ms(const ampx_trainer *t) {
    return t->dp.comm_ms;
}
