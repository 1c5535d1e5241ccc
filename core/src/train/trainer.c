/* trainer.c — creating a trainer: the model's graph with its backward (autodiff), the
 * checks that the backend has every op the graph needs and computes what it reports, the
 * parameters with their optimizer state and working copies, the gradient arena and its
 * all-reduce buckets, the memory check, the plan and the executor; freeing it; and the
 * parameters' accessors. The steps are step.c's; trainer.h says which file owns what. */
#include "exec/hooks.h"
#include "formats/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/ops.h"
#include "backend/caps.h"
#include "passes/pipeline.h"
#include "exec/fp8.h"
#include "exec/inputs.h"
#include "exec/params.h"
#include "exec/placed.h"
#include "exec/step.h"
#include "infer/kvcache.h"
#include "watch/watch.h"

/* Every op a node of the graph issues, and those of the step, must be there (on a backend
 * list, the placement pass has found a member for each node: the step's ops are home's). */
static ampx_status check_ops(ampx_trainer *t) {
    for (int i = 0; t->place.n < 2 && i < t->g.n_nodes; i++) {
        const g_node *n = &t->g.nodes[i];
        const g_rule *r = g_rule_of(n->op);
        for (int k = 0; k < 4 && r->ops[k] != AMPX_OP_COUNT; k++)
            if (!ampx_backend_op_slot(t->be, r->ops[k]))
                return tr_fail(t, AMPX_ERR_UNSUPPORTED,
                               "backend %s has no %s, which node \"%s\" needs", t->ifc->name,
                               ampx_op_name(r->ops[k]), n->name);
    }
    uint32_t step[8];
    int k = step_ops_needed(t, &t->g, step);
    for (int i = 0; i < k; i++)
        if (!ampx_backend_op_slot(t->be, step[i]))
            return tr_fail(t, AMPX_ERR_UNSUPPORTED, "backend %s has no %s, which training needs%s",
                           t->ifc->name, ampx_op_name(step[i]),
                           t->place.n > 1 ? " (no backend of the list has every op of the step)"
                                          : "");
    return AMPX_OK;
}

/* A backend whose ops return OK and compute nothing would train "successfully": one small
 * GEMM of integers (exact in every dtype's f32 accumulation) is checked before anything
 * else runs. The full check is `ampx conformance`. */
static ampx_status self_check_one(ampx_trainer *t, call_ctx *call) {
    static const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, -1, 2, 0, -2, 3}; /* 2x3, 3x2 */
    float host[16] = {0}, c[4] = {-7, -7, -7, -7};
    memcpy(host, a, sizeof a);
    memcpy(host + 6, b, sizeof b);
    memcpy(host + 12, c, sizeof c);
    ampx_buffer *buf              = NULL;
    const ampx_backend_iface *ifc = call->ifc;
    ampx_status st =
        call_check(call, ifc->buffer_alloc(call->ctx, sizeof host, &buf), "buffer_alloc");
    if (st) return st;
    if (!(st = call_check(call, ifc->buffer_write(call->ctx, buf, 0, host, sizeof host),
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
        if (!(st = call_op(call, "self-check", AMPX_OP_GEMM, &g)))
            st = call_check(call, ifc->buffer_read(call->ctx, buf, 48, c, sizeof c), "buffer_read");
    }
    ifc->buffer_free(call->ctx, buf);
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
                           ifc->name, i, (double)c[i], want, ifc->name);
    }
    return AMPX_OK;
}

/* The check on every backend of the list that has a GEMM. */
static ampx_status self_check(ampx_trainer *t) {
    ampx_status st = AMPX_OK;
    for (int m = 0; m < t->place.n && !st; m++) {
        call_ctx *c = m == t->place.home ? &t->call : &t->place.calls[m];
        if (ampx_backend_op_slot(t->place.members[m], AMPX_OP_GEMM) || t->place.n < 2)
            st = self_check_one(t, c);
    }
    return st;
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

/* The graph with its backward nodes (each dense layer one GEMM with an epilogue where the
 * backend takes it) and its plan, through the pass pipeline; the executor's per-value tables;
 * and the backend's checks (every op there, and computing what it reports). */
static ampx_status create_graph(ampx_trainer *t) {
    ampx_status st;
    g_copy_graph(&t->g, &t->m->graph);
    pass_caps caps;
    backend_pass_caps(placed_gemm_member(t), &caps);
    /* a sampler or predictor keeps its copies (no optimizer state beside them, and each
     * token's forward would cast every weight again), runs the forward alone and keeps every
     * value in its place (the KV cache reads the keys and values of earlier calls) */
    pass_job job = {.g            = &t->g,
                    .caps         = &caps,
                    .cast_copies  = !t->inference && model_casts_copies(t->m),
                    .recompute    = t->m->cfg.recompute,
                    .forward_only = t->inference != 0,
                    .rows         = (uint64_t)t->B,
                    .keep         = t->inference != 0,
                    .err          = tr_err(t)};
    if ((st = pass_run(&job, PASS_COPIES, PASS_AUTODIFF)) || (st = placed_probe(t, &job)) ||
        (st = pass_run(&job, PASS_PLACE, PASS_PLAN))) {
        pass_job_free(&job);
        return st;
    }
    t->plan       = job.plan;
    t->persistent = job.persistent;
    placed_choose_home(t);
    t->own     = calloc((size_t)t->g.n_values, sizeof *t->own);
    t->own_off = calloc((size_t)t->g.n_values, sizeof *t->own_off);
    if (!t->own || !t->own_off) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    if ((st = check_ops(t)) || (st = self_check(t))) return st;
    if (t->dp.world > 1) {
        ampx_scalars fresh;
        init_scalars(t->m, &fresh);
        if ((st = dp_join(&t->dp, &t->m->cfg, &t->g, &fresh,
                          st_file_step(t->m->cfg.train.start_from))))
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
    } else if (data_load(&req, &t->in.data, tr_err(t))) {
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
    if ((st = params_create(t)) || (st = grad_arena(t))) return st;
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
    if ((st = fp8_setup(t)) || (st = placed_attach(t))) return st;
    t->ring.t_last_flush = tr_now_ms();
    t->mon->every        = m->cfg.train.monitor_every;
    /* a slot past the table of an older minor reads as NULL; the minor is checked too */
    t->amp_fused  = t->ifc->abi_minor >= 4 && ampx_backend_op_slot(t->be, AMPX_OP_AMP_PASS) != NULL;
    t->mon->armed = m->cfg.train.forensics && !t->inference;
    if (t->mon->every > 0 && (st = monitor_setup(t))) return st;
    return forensics_setup(t);
}

static ampx_status create(ampx_model *m, ampx_backend *be, ampx_dist *dist, ampx_trainer **out,
                          ampx_err e, int inference) {
    *out            = NULL;
    ampx_trainer *t = calloc(1, sizeof *t);
    tr_monitor *mon = calloc(1, sizeof *mon);
    if (!t || !mon || g_init_graph(&t->g)) {
        free(t), free(mon);
        err_set(e, "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    t->m                  = m;
    t->mon                = mon;
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
    placed_open(t, be);
    call_init(&t->call, t->be, tr_err(t));
    t->call.track = t->place.home;
    dp_init(&t->dp, dist, &t->call, tr_err(t));
    t->zero = !inference && m->cfg.train.zero && t->dp.world > 1;
    ampx_status st;
    if (t->zero && m->cfg.opt.stochastic_rounding) {
        st = tr_fail(t, AMPX_ERR_UNSUPPORTED,
                     "train.zero 1 with optimizer.stochastic_rounding: not supported (the working "
                     "copies are cast from the gathered masters, to nearest)");
        goto fail;
    }
    if ((st = create_graph(t)) || (st = create_data(t)) || (st = create_device(t)) ||
        (st = params_stage_zero(t)))
        goto fail;
    /* every rank starts from rank 0's parameters */
    if (t->dp.world > 1 &&
        ((st = dp_setup(&t->dp, &t->grads, t->zero)) || (st = ampx_trainer_sync(t))))
        goto fail;
    *out = t;
    return AMPX_OK;
fail:
    err_set(e, "%s", t->error);
    ampx_trainer_free(t);
    return st ? st : AMPX_ERR_INVALID;
}

ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out, char *err,
                                size_t err_cap) {
    return create(m, be, NULL, out, ERR(err, err_cap), 0);
}

ampx_status ampx_trainer_create_dist(ampx_model *m, ampx_backend *be, ampx_dist *d,
                                     ampx_trainer **out, char *err, size_t err_cap) {
    return create(m, be, d, out, ERR(err, err_cap), 0);
}

ampx_status ampx_trainer_create_sampler(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                        char *err, size_t err_cap) {
    return create(m, be, NULL, out, ERR(err, err_cap), 1);
}

ampx_status ampx_trainer_create_predictor(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                          char *err, size_t err_cap) {
    return create(m, be, NULL, out, ERR(err, err_cap), 2);
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
    placed_free(t);
    plan_free(&t->plan);
    g_free_graph(&t->g);
    free(t->own);
    free(t->own_off);
    dp_free(&t->dp);
    free(t->persistent);
    free(t->mon);
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
