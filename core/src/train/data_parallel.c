/* data_parallel.c — the trainer's side of data-parallel training (docs/DISTRIBUTED.md):
 * refusing ranks that run something else than rank 0, making every rank's state rank 0's,
 * the bucketed gradient all-reduce of a step, the mean of the per-rank losses, and the
 * check that the ranks still agree.
 *
 * Once the backward's last node writing into a bucket has run (in the step's last
 * micro-batch), the bucket's all-reduce starts: MPI_Iallreduce on host memory (the arena
 * itself on the CPU backend, a copy read from the device otherwise), given a chance to
 * progress after every later node, waited for after the last one, multiplied by 1/N and
 * written back; or ncclAllReduce on the backend's CUDA stream. Unscale-and-check then reads
 * gradients that are bitwise the same on every rank, so the non-finite flags and the
 * scaler's decision are too. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "graph/ops.h"
#include "obs/trace.h"
#include "train/trainer.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static ampx_status comm_fail(ampx_trainer *t, ampx_status st) {
    return tr_fail(t, st, "%s", t->dist->error);
}

// ---------------------------------------------------------------------------------------
// What a rank runs: a hash compared with rank 0's at start

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}
#define HASH(h, x) ((h) = fnv((h), &(x), sizeof(x)))

/* The model file's bytes, the settings as parsed (the policy and scaler, also from --policy;
 * command-line overrides), the graph with every value's dtype, the ampx and backend
 * versions, and the environment that shapes the all-reduce (bucket size, path). */
static uint64_t run_hash(const ampx_trainer *t) {
    const settings *c = &t->m->cfg;
    uint64_t h        = 0xCBF29CE484222325ull;
    h                 = fnv(h, AMPX_VERSION_STRING, sizeof AMPX_VERSION_STRING);
    h                 = fnv(h, t->ifc->name, strlen(t->ifc->name));
    h                 = fnv(h, t->ifc->version, strlen(t->ifc->version));
    FILE *f           = fopen(c->file, "rb");
    if (f) {
        unsigned char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            h = fnv(h, buf, n);
        fclose(f);
    }
    const policy *p = &c->pol;
    HASH(h, p->params), HASH(h, p->compute), HASH(h, p->output), HASH(h, p->class_dtype);
    for (int i = 0; i < p->n_overrides; i++)
        h = fnv(h, p->overrides[i].glob, strlen(p->overrides[i].glob)),
        HASH(h, p->overrides[i].dtype);
    ampx_scalars s; /* the scaler and schedule configuration, as the device gets it */
    init_scalars(t->m, &s);
    HASH(h, s);
    const optimizer_config *o = &c->opt;
    HASH(h, o->kind), HASH(h, o->lr), HASH(h, o->weight_decay), HASH(h, o->beta1);
    HASH(h, o->beta2), HASH(h, o->eps), HASH(h, o->momentum), HASH(h, o->dampening);
    HASH(h, o->clip_grad_norm), HASH(h, o->nesterov), HASH(h, o->stochastic_rounding);
    const ampx_train_config *r = &c->train;
    HASH(h, r->steps), HASH(h, r->batch), HASH(h, r->accumulate), HASH(h, r->seed);
    HASH(h, r->log_every), HASH(h, r->monitor_every), HASH(h, r->eval_every);
    const data_config *d = &c->data;
    HASH(h, d->source), HASH(h, d->samples), HASH(h, d->noise), HASH(h, d->test_fraction);
    HASH(h, d->turns), HASH(h, d->val_fraction), HASH(h, d->eval_windows), HASH(h, d->text_bytes);
    for (int v = 0; v < t->g.n_values; v++) {
        const g_value *x = &t->g.values[v];
        h                = fnv(h, x->name, strlen(x->name));
        HASH(h, x->role), HASH(h, x->dtype), HASH(h, x->ndim), HASH(h, x->dims);
    }
    for (int i = 0; i < t->g.n_nodes; i++)
        HASH(h, t->g.nodes[i].op), HASH(h, t->g.nodes[i].dtype);
    /* what decides the buckets and the all-reduce path: ranks must agree on both */
    static const char *const env[] = {"AMPX_BUCKET_KB", "AMPX_DIST_PATH"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        const char *v = getenv(env[i]);
        h             = fnv(h, env[i], strlen(env[i]));
        if (v) h = fnv(h, v, strlen(v) + 1);
    }
    return h;
}

/* Counts, on every rank, the ranks for which `differs` is set (an f32 sum: exact). */
static ampx_status count_ranks(ampx_trainer *t, int differs, int *count) {
    float n        = differs ? 1.0f : 0.0f;
    ampx_status st = dist_allreduce(t->dist, &n, 1);
    *count         = (int)n;
    return st ? comm_fail(t, st) : AMPX_OK;
}

ampx_status dp_join(ampx_trainer *t) {
    uint64_t mine = run_hash(t), first = mine;
    ampx_status st = dist_broadcast(t->dist, &first, sizeof first, 0);
    if (st) return comm_fail(t, st);
    int bad;
    if ((st = count_ranks(t, mine != first, &bad))) return st;
    if (!bad) return AMPX_OK;
    if (mine != first)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "rank %d runs another model, policy, settings or ampx version than rank 0 "
                       "(hash %016llx, rank 0: %016llx): every rank must start the same ampx "
                       "with the same model file, policy, options and AMPX_BUCKET_KB and "
                       "AMPX_DIST_PATH",
                       t->rank, (unsigned long long)mine, (unsigned long long)first);
    return tr_fail(t, AMPX_ERR_INVALID,
                   "%d of %d ranks run another model, policy, settings or ampx version than rank "
                   "%d: refused",
                   bad, t->world, t->rank);
}

// ---------------------------------------------------------------------------------------
// Rank 0's state to every rank

/* One device buffer range, rank 0's bytes into every rank's. */
static ampx_status bcast_buffer(ampx_trainer *t, ampx_buffer *b, uint64_t off, uint64_t bytes,
                                void *host) {
    ampx_status st =
        call_check(&t->call, t->ifc->buffer_read(t->ctx, b, off, host, bytes), "buffer_read");
    if (st) return st;
    if ((st = dist_broadcast(t->dist, host, bytes, 0))) return comm_fail(t, st);
    return call_check(&t->call, t->ifc->buffer_write(t->ctx, b, off, host, bytes), "buffer_write");
}

ampx_status ampx_trainer_sync(ampx_trainer *t) {
    if (t->world < 2) return AMPX_OK;
    uint64_t most = sizeof(ampx_scalars);
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].n * 4 > most) most = t->params[i].n * 4;
    for (int i = 0; i < t->n_state; i++)
        if (t->state[i].n * 4 > most) most = t->state[i].n * 4;
    void *host = malloc(most);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p = &t->params[i];
        /* the working copy as bytes too: with stochastic rounding it is not a cast of the
         * master that each rank could redo */
        if (!(st = bcast_buffer(t, p->master, 0, p->n * 4, host)) && p->copy)
            st = bcast_buffer(t, p->copy, 0, p->n * 2, host);
        if (!st && p->s1) st = bcast_buffer(t, p->s1, 0, p->n * 4, host);
        if (!st && p->s2) st = bcast_buffer(t, p->s2, 0, p->n * 4, host);
    }
    for (int i = 0; i < t->n_state && !st; i++)
        st = bcast_buffer(t, t->state[i].buf, 0, t->state[i].n * 4, host);
    if (!st) st = bcast_buffer(t, t->scalars, 0, sizeof(ampx_scalars), host);
    free(host);
    int64_t step = t->step;
    if (!st && (st = dist_broadcast(t->dist, &step, sizeof step, 0))) return comm_fail(t, st);
    if (!st) t->step = t->ring_first = step;
    return st;
}

// ---------------------------------------------------------------------------------------
// The gradient all-reduce of a step

/* Where the gradient all-reduce runs, from what the backend exposes (ABI 1.3 handles):
 *   DP_NCCL         CUDA device pointers: ncclAllReduce (ncclAvg) on the backend's stream,
 *                   ordered after the backward ops that wrote the bucket; no host wait;
 *   DP_HOST_DIRECT  host memory (the CPU backend): MPI on the arena itself, no copies;
 *   DP_HOST_COPY    anything else (OpenCL, older plugins): read, MPI, write back.
 * The choice depends on the backend and the build alone, which the run hash makes the same
 * on every rank. AMPX_DIST_PATH=copy forces the copy path (tests), =host keeps CUDA buffers
 * off NCCL. */
enum { DP_HOST_COPY, DP_HOST_DIRECT, DP_NCCL };

ampx_status dp_setup(ampx_trainer *t) {
    const char *force = getenv("AMPX_DIST_PATH");
    uint32_t bk = AMPX_NATIVE_NONE, sk = AMPX_NATIVE_NONE;
    void *bh = NULL, *sh = NULL;
    t->dp_path = DP_HOST_COPY;
    if (t->ifc->size > offsetof(ampx_backend_iface, stream_native) && t->ifc->buffer_native &&
        t->ifc->stream_native && !(force && !strcmp(force, "copy"))) {
        ampx_status st;
        if ((st = call_check(&t->call, t->ifc->buffer_native(t->ctx, t->grads, &bk, &bh),
                             "buffer_native")) ||
            (st = call_check(&t->call, t->ifc->stream_native(t->ctx, &sk, &sh), "stream_native")))
            return st;
        if (bk == AMPX_NATIVE_HOST && sk == AMPX_NATIVE_HOST && bh) {
            t->dp_path    = DP_HOST_DIRECT;
            t->grads_host = bh;
            return AMPX_OK;
        }
        if (bk == AMPX_NATIVE_CUDA && sk == AMPX_NATIVE_CUDA && dist_nccl_built() &&
            !(force && !strcmp(force, "host"))) {
            char err[512];
            /* the kernels that wrote the parameters must be done before NCCL's first read */
            if ((st = call_check(&t->call, t->ifc->synchronize(t->ctx), "synchronize"))) return st;
            if ((st = dist_nccl_init(t->dist, &t->nccl, err, sizeof err)))
                return tr_fail(t, st, "%s", err);
            t->dp_path   = DP_NCCL;
            t->grads_dev = bh;
            t->dp_stream = sh;
            return AMPX_OK;
        }
    }
    if (!(t->grads_host = malloc(t->grads_bytes + 4)))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the gradients' host copy");
    return AMPX_OK;
}

void dp_free(ampx_trainer *t) {
    if (t->dp_path == DP_HOST_COPY) free(t->grads_host);
    dist_nccl_free(t->nccl);
    t->grads_host = NULL, t->nccl = NULL;
}

void dp_begin_step(ampx_trainer *t) {
    for (int b = 0; b < t->n_buckets; b++)
        t->buckets[b].pending = 0;
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].done_node >= 0) t->buckets[t->params[i].bucket].pending++;
    t->next_bucket = 0;
}

/* Bucket b's gradients are final on this rank: its all-reduce starts. */
static ampx_status start_bucket(ampx_trainer *t, int b) {
    const grad_bucket *k = &t->buckets[b];
    ampx_status st;
    /* a fault injection (tests) lands before the all-reduce, on this rank only */
    if (t->step + 1 == t->inject_step && t->params[t->inject_param].bucket == b &&
        (st = call_check(&t->call,
                         t->ifc->buffer_fill(t->ctx, t->grads, t->params[t->inject_param].grad_off,
                                             4, 0x7F800000u, 4),
                         "buffer_fill")))
        return st;
    if (t->dp_path == DP_NCCL) {
        char err[512];
        st = dist_nccl_allreduce_f32(t->nccl, (char *)t->grads_dev + k->off, k->bytes / 4, 1,
                                     t->dp_stream, err, sizeof err);
        return st ? tr_fail(t, st, "%s", err) : AMPX_OK;
    }
    float *h = t->grads_host + k->off / 4;
    if (t->dp_path == DP_HOST_COPY &&
        (st = call_check(&t->call, t->ifc->buffer_read(t->ctx, t->grads, k->off, h, k->bytes),
                         "buffer_read")))
        return st;
    if ((st = dist_iallreduce(t->dist, h, k->bytes / 4))) return comm_fail(t, st);
    return AMPX_OK;
}

/* Starts the buckets, in order, whose gradients are all complete. */
static ampx_status start_ready(ampx_trainer *t) {
    ampx_status st;
    while (t->next_bucket < t->n_buckets && t->buckets[t->next_bucket].pending == 0)
        if ((st = start_bucket(t, t->next_bucket++))) return st;
    return AMPX_OK;
}

/* The trace's communication slice, in a traced step. */
static void comm_slice(ampx_trainer *t, const char *name, int64_t t0, uint64_t bytes) {
    if (t->trace && trace_wants(t->trace, t->step + 1))
        trace_comm(t->trace, name, t0, call_now_ns(), bytes);
}

ampx_status dp_after_node(ampx_trainer *t, int node) {
    double t0   = now_ms();
    int64_t ns0 = call_now_ns();
    int before  = t->next_bucket;
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].done_node == node) t->buckets[t->params[i].bucket].pending--;
    ampx_status st = start_ready(t);
    if (!st && t->next_bucket > before) {
        uint64_t bytes = 0;
        for (int b = before; b < t->next_bucket; b++)
            bytes += t->buckets[b].bytes;
        comm_slice(t, "allreduce.start.f32", ns0, bytes);
    }
    if (!st && t->dp_path != DP_NCCL && (st = dist_progress(t->dist))) st = comm_fail(t, st);
    t->comm_ms += now_ms() - t0;
    return st;
}

ampx_status dp_finish(ampx_trainer *t) {
    double t0   = now_ms();
    int64_t ns0 = call_now_ns();
    /* anything not started by the hooks (parameters no node writes: zeros) starts now */
    for (int b = t->next_bucket; b < t->n_buckets; b++)
        t->buckets[b].pending = 0;
    ampx_status st = start_ready(t);
    if (st || t->dp_path == DP_NCCL) { /* NCCL: enqueued, averaged, nothing to wait for */
        t->comm_ms += now_ms() - t0;
        return st;
    }
    if ((st = dist_wait(t->dist))) return comm_fail(t, st);
    /* the mean: x/N, one rounding, the same on every rank (exact for N a power of two) */
    float inv  = 1.0f / (float)t->world;
    uint64_t n = t->grads_bytes / 4;
    for (uint64_t i = 0; i < n; i++)
        t->grads_host[i] *= inv;
    if (t->dp_path == DP_HOST_COPY)
        st = call_check(&t->call,
                        t->ifc->buffer_write(t->ctx, t->grads, 0, t->grads_host, t->grads_bytes),
                        "buffer_write");
    comm_slice(t, "allreduce.f32", ns0, t->grads_bytes);
    t->comm_ms += now_ms() - t0;
    return st;
}

const char *ampx_trainer_dist_path(const ampx_trainer *t) {
    static const char *const names[] = {"host copy", "host memory in place", "NCCL"};
    return t->world > 1 ? names[t->dp_path] : "";
}

void ampx_trainer_gradient_layout(const ampx_trainer *t, uint64_t *bytes, int *buckets) {
    *bytes   = t->grads_bytes;
    *buckets = t->n_buckets;
}

double ampx_trainer_comm_ms(const ampx_trainer *t) {
    return t->comm_ms;
}

// ---------------------------------------------------------------------------------------
// At each log interval

ampx_status dp_mean_losses(ampx_trainer *t, float *loss, uint64_t n) {
    ampx_status st = dist_allreduce(t->dist, loss, n);
    if (st) return comm_fail(t, st);
    for (uint64_t i = 0; i < n; i++)
        loss[i] /= (float)t->world;
    return AMPX_OK;
}

ampx_status dp_check(ampx_trainer *t, const ampx_scalars *s, float weights_sq) {
    uint64_t mine  = fnv(0xCBF29CE484222325ull, s, sizeof *s);
    mine           = fnv(mine, &weights_sq, sizeof weights_sq);
    mine           = fnv(mine, &t->step, sizeof t->step);
    uint64_t first = mine;
    ampx_status st = dist_broadcast(t->dist, &first, sizeof first, 0);
    if (st) return comm_fail(t, st);
    int bad;
    if ((st = count_ranks(t, mine != first, &bad)) || !bad) return st;
    if (mine != first)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "step %lld: rank %d's scalars block or weights differ from rank 0's (loss "
                       "scale %g, %d applied, %d skipped; sum of squared weights %.9g): the ranks "
                       "diverged",
                       (long long)t->step, t->rank, (double)s->scale, s->applied_steps,
                       s->skipped_steps, (double)weights_sq);
    return tr_fail(t, AMPX_ERR_INVALID,
                   "step %lld: %d of %d ranks hold another scalars block or weights than rank %d "
                   "(loss scale %g, %d applied, %d skipped): the ranks diverged",
                   (long long)t->step, bad, t->world, t->rank, (double)s->scale, s->applied_steps,
                   s->skipped_steps);
}
