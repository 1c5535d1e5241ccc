/* data_parallel.c — the trainer's side of data-parallel training (docs/DISTRIBUTED.md):
 * refusing ranks that run something else than rank 0, rank 0's bytes to every rank, the
 * bucketed gradient all-reduce of a step, the mean of the per-rank losses, and the check
 * that the ranks still agree. It works on a dp_state and what the trainer hands it
 * (data_parallel.h), never on the trainer itself.
 *
 * Once the backward's last node writing into a bucket has run (in the step's last
 * micro-batch), the bucket's all-reduce starts: MPI_Iallreduce on host memory (the arena
 * itself on the CPU backend, a copy read from the device otherwise), given a chance to
 * progress after every later node, waited for after the last one, multiplied by 1/N and
 * written back; or ncclAllReduce on the backend's CUDA stream. Unscale-and-check then reads
 * gradients that are bitwise the same on every rank, so the non-finite flags and the
 * scaler's decision are too. */
#include "train/data_parallel.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "graph/ops.h"
#include "obs/trace.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static ampx_status comm_fail(dp_state *dp, ampx_status st) {
    err_set(dp->err, "%s", dp->dist->error);
    return st;
}

/* Buffer calls go through the trainer's call layer, which words their failures. */
static ampx_status check(dp_state *dp, ampx_status st, const char *what) {
    return call_check(dp->call, st, what);
}

void dp_init(dp_state *dp, ampx_dist *dist, call_ctx *call, char *err, size_t cap) {
    dp->dist  = dist;
    dp->rank  = ampx_dist_rank(dist);
    dp->world = ampx_dist_size(dist);
    dp->call  = call;
    dp->err   = ERR(err, cap);
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
static uint64_t run_hash(const dp_state *dp, const settings *c, const g_graph *g,
                         const ampx_scalars *fresh) {
    const ampx_backend_iface *ifc = dp->call->ifc;
    uint64_t h                    = 0xCBF29CE484222325ull;
    h                             = fnv(h, AMPX_VERSION_STRING, sizeof AMPX_VERSION_STRING);
    h                             = fnv(h, ifc->name, strlen(ifc->name));
    h                             = fnv(h, ifc->version, strlen(ifc->version));
    FILE *f                       = fopen(c->file, "rb");
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
    HASH(h, *fresh); /* the scaler and schedule configuration, as the device gets it */
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
    for (int v = 0; v < g->n_values; v++) {
        const g_value *x = &g->values[v];
        h                = fnv(h, x->name, strlen(x->name));
        HASH(h, x->role), HASH(h, x->dtype), HASH(h, x->ndim), HASH(h, x->dims);
    }
    for (int i = 0; i < g->n_nodes; i++)
        HASH(h, g->nodes[i].op), HASH(h, g->nodes[i].dtype);
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
static ampx_status count_ranks(dp_state *dp, int differs, int *count) {
    float n        = differs ? 1.0f : 0.0f;
    ampx_status st = dist_allreduce(dp->dist, &n, 1);
    *count         = (int)n;
    return st ? comm_fail(dp, st) : AMPX_OK;
}

ampx_status dp_join(dp_state *dp, const settings *cfg, const g_graph *g,
                    const ampx_scalars *fresh) {
    uint64_t mine = run_hash(dp, cfg, g, fresh), first = mine;
    ampx_status st = dist_broadcast(dp->dist, &first, sizeof first, 0);
    if (st) return comm_fail(dp, st);
    int bad;
    if ((st = count_ranks(dp, mine != first, &bad))) return st;
    if (!bad) return AMPX_OK;
    if (mine != first) {
        err_set(dp->err,
                "rank %d runs another model, policy, settings or ampx version than rank 0 "
                "(hash %016llx, rank 0: %016llx): every rank must start the same ampx "
                "with the same model file, policy, options and AMPX_BUCKET_KB and "
                "AMPX_DIST_PATH",
                dp->rank, (unsigned long long)mine, (unsigned long long)first);
        return AMPX_ERR_INVALID;
    }
    err_set(dp->err,
            "%d of %d ranks run another model, policy, settings or ampx version than rank "
            "%d: refused",
            bad, dp->world, dp->rank);
    return AMPX_ERR_INVALID;
}

// ---------------------------------------------------------------------------------------
// Rank 0's state to every rank

ampx_status dp_bcast_buffer(dp_state *dp, ampx_buffer *b, uint64_t off, uint64_t bytes,
                            void *host) {
    const ampx_backend_iface *ifc = dp->call->ifc;
    ampx_status st = check(dp, ifc->buffer_read(dp->call->ctx, b, off, host, bytes), "buffer_read");
    if (st) return st;
    if ((st = dist_broadcast(dp->dist, host, bytes, 0))) return comm_fail(dp, st);
    return check(dp, ifc->buffer_write(dp->call->ctx, b, off, host, bytes), "buffer_write");
}

ampx_status dp_bcast_host(dp_state *dp, void *v, uint64_t bytes) {
    ampx_status st = dist_broadcast(dp->dist, v, bytes, 0);
    return st ? comm_fail(dp, st) : AMPX_OK;
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

ampx_status dp_setup(dp_state *dp, const grad_layout *grads) {
    const ampx_backend_iface *ifc = dp->call->ifc;
    ampx_context *ctx             = dp->call->ctx;
    const char *force             = getenv("AMPX_DIST_PATH");
    uint32_t bk = AMPX_NATIVE_NONE, sk = AMPX_NATIVE_NONE;
    void *bh = NULL, *sh = NULL;
    dp->grads = grads;
    dp->path  = DP_HOST_COPY;
    if (ifc->size > offsetof(ampx_backend_iface, stream_native) && ifc->buffer_native &&
        ifc->stream_native && !(force && !strcmp(force, "copy"))) {
        ampx_status st;
        if ((st = check(dp, ifc->buffer_native(ctx, grads->buf, &bk, &bh), "buffer_native")) ||
            (st = check(dp, ifc->stream_native(ctx, &sk, &sh), "stream_native")))
            return st;
        if (bk == AMPX_NATIVE_HOST && sk == AMPX_NATIVE_HOST && bh) {
            dp->path       = DP_HOST_DIRECT;
            dp->grads_host = bh;
            return AMPX_OK;
        }
        if (bk == AMPX_NATIVE_CUDA && sk == AMPX_NATIVE_CUDA && dist_nccl_built() &&
            !(force && !strcmp(force, "host"))) {
            char err[512];
            /* the kernels that wrote the parameters must be done before NCCL's first read */
            if ((st = check(dp, ifc->synchronize(ctx), "synchronize"))) return st;
            if ((st = dist_nccl_init(dp->dist, &dp->nccl, err, sizeof err))) {
                err_set(dp->err, "%s", err);
                return st;
            }
            dp->path      = DP_NCCL;
            dp->grads_dev = bh;
            dp->stream    = sh;
            return AMPX_OK;
        }
    }
    if (!(dp->grads_host = malloc(grads->bytes + 4))) {
        err_set(dp->err, "out of memory for the gradients' host copy");
        return AMPX_ERR_NO_MEMORY;
    }
    return AMPX_OK;
}

void dp_free(dp_state *dp) {
    if (dp->path == DP_HOST_COPY) free(dp->grads_host);
    dist_nccl_free(dp->nccl);
    dp->grads_host = NULL, dp->nccl = NULL;
}

void dp_begin_step(dp_state *dp, uint64_t inject_off, struct trace *traced) {
    const grad_layout *g = dp->grads;
    for (int b = 0; b < g->n_buckets; b++)
        dp->pending[b] = 0;
    for (int i = 0; i < g->n_params; i++)
        if (g->done_node[i] >= 0) dp->pending[g->bucket[i]]++;
    dp->next_bucket = 0;
    dp->inject_off  = inject_off;
    dp->traced      = traced;
}

/* Bucket b's gradients are final on this rank: its all-reduce starts. */
static ampx_status start_bucket(dp_state *dp, int b) {
    const grad_layout *g          = dp->grads;
    const grad_bucket *k          = &g->buckets[b];
    const ampx_backend_iface *ifc = dp->call->ifc;
    ampx_status st;
    /* a fault injection (tests) lands before the all-reduce, on this rank only */
    if (dp->inject_off != UINT64_MAX && dp->inject_off >= k->off &&
        dp->inject_off < k->off + k->bytes &&
        (st = check(dp, ifc->buffer_fill(dp->call->ctx, g->buf, dp->inject_off, 4, 0x7F800000u, 4),
                    "buffer_fill")))
        return st;
    if (dp->path == DP_NCCL) {
        char err[512];
        st = dist_nccl_allreduce_f32(dp->nccl, (char *)dp->grads_dev + k->off, k->bytes / 4, 1,
                                     dp->stream, err, sizeof err);
        if (st) err_set(dp->err, "%s", err);
        return st;
    }
    float *h = dp->grads_host + k->off / 4;
    if (dp->path == DP_HOST_COPY &&
        (st = check(dp, ifc->buffer_read(dp->call->ctx, g->buf, k->off, h, k->bytes),
                    "buffer_read")))
        return st;
    if ((st = dist_iallreduce(dp->dist, h, k->bytes / 4))) return comm_fail(dp, st);
    return AMPX_OK;
}

/* Starts the buckets, in order, whose gradients are all complete. */
static ampx_status start_ready(dp_state *dp) {
    ampx_status st;
    while (dp->next_bucket < dp->grads->n_buckets && dp->pending[dp->next_bucket] == 0)
        if ((st = start_bucket(dp, dp->next_bucket++))) return st;
    return AMPX_OK;
}

/* The trace's communication slice, in a traced step. */
static void comm_slice(dp_state *dp, const char *name, int64_t t0, uint64_t bytes) {
    if (dp->traced) trace_comm(dp->traced, name, t0, call_now_ns(), bytes);
}

ampx_status dp_after_node(dp_state *dp, int node) {
    const grad_layout *g = dp->grads;
    double t0            = now_ms();
    int64_t ns0          = call_now_ns();
    int before           = dp->next_bucket;
    for (int i = 0; i < g->n_params; i++)
        if (g->done_node[i] == node) dp->pending[g->bucket[i]]--;
    ampx_status st = start_ready(dp);
    if (!st && dp->next_bucket > before) {
        uint64_t bytes = 0;
        for (int b = before; b < dp->next_bucket; b++)
            bytes += g->buckets[b].bytes;
        comm_slice(dp, "allreduce.start.f32", ns0, bytes);
    }
    if (!st && dp->path != DP_NCCL && (st = dist_progress(dp->dist))) st = comm_fail(dp, st);
    dp->comm_ms += now_ms() - t0;
    return st;
}

ampx_status dp_finish(dp_state *dp) {
    const grad_layout *g = dp->grads;
    double t0            = now_ms();
    int64_t ns0          = call_now_ns();
    /* anything not started by the hooks (parameters no node writes: zeros) starts now */
    for (int b = dp->next_bucket; b < g->n_buckets; b++)
        dp->pending[b] = 0;
    ampx_status st = start_ready(dp);
    if (st || dp->path == DP_NCCL) { /* NCCL: enqueued, averaged, nothing to wait for */
        dp->comm_ms += now_ms() - t0;
        return st;
    }
    if ((st = dist_wait(dp->dist))) return comm_fail(dp, st);
    /* the mean: x/N, one rounding, the same on every rank (exact for N a power of two) */
    float inv  = 1.0f / (float)dp->world;
    uint64_t n = g->bytes / 4;
    for (uint64_t i = 0; i < n; i++)
        dp->grads_host[i] *= inv;
    if (dp->path == DP_HOST_COPY)
        st = check(dp,
                   dp->call->ifc->buffer_write(dp->call->ctx, g->buf, 0, dp->grads_host, g->bytes),
                   "buffer_write");
    comm_slice(dp, "allreduce.f32", ns0, g->bytes);
    dp->comm_ms += now_ms() - t0;
    return st;
}

const char *dp_path_name(const dp_state *dp) {
    static const char *const names[] = {"host copy", "host memory in place", "NCCL"};
    return dp->world > 1 ? names[dp->path] : "";
}

// ---------------------------------------------------------------------------------------
// At each log interval

ampx_status dp_mean_losses(dp_state *dp, float *loss, uint64_t n) {
    ampx_status st = dist_allreduce(dp->dist, loss, n);
    if (st) return comm_fail(dp, st);
    for (uint64_t i = 0; i < n; i++)
        loss[i] /= (float)dp->world;
    return AMPX_OK;
}

ampx_status dp_check(dp_state *dp, const ampx_scalars *s, float weights_sq, int64_t step) {
    uint64_t mine  = fnv(0xCBF29CE484222325ull, s, sizeof *s);
    mine           = fnv(mine, &weights_sq, sizeof weights_sq);
    mine           = fnv(mine, &step, sizeof step);
    uint64_t first = mine;
    ampx_status st = dist_broadcast(dp->dist, &first, sizeof first, 0);
    if (st) return comm_fail(dp, st);
    int bad;
    if ((st = count_ranks(dp, mine != first, &bad)) || !bad) return st;
    if (mine != first)
        err_set(dp->err,
                "step %lld: rank %d's scalars block or weights differ from rank 0's (loss "
                "scale %g, %d applied, %d skipped; sum of squared weights %.9g): the ranks "
                "diverged",
                (long long)step, dp->rank, (double)s->scale, s->applied_steps, s->skipped_steps,
                (double)weights_sq);
    else
        err_set(dp->err,
                "step %lld: %d of %d ranks hold another scalars block or weights than rank %d "
                "(loss scale %g, %d applied, %d skipped): the ranks diverged",
                (long long)step, bad, dp->world, dp->rank, (double)s->scale, s->applied_steps,
                s->skipped_steps);
    return AMPX_ERR_INVALID;
}
