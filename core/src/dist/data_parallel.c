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
 * scaler's decision are too. Under ZeRO-1 (host paths) each bucket is reduce-scattered
 * instead: every rank receives the sum of its own shard only, and the flags and the squared
 * norm are agreed on afterwards (dp_agree). */
#include "dist/data_parallel.h"

#include <errno.h>
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

void dp_init(dp_state *dp, ampx_dist *dist, call_ctx *call, ampx_err e) {
    dp->dist  = dist;
    dp->rank  = ampx_dist_rank(dist);
    dp->world = ampx_dist_size(dist);
    dp->call  = call;
    dp->err   = e;
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

/* What every rank must agree on, hashed part by part so that a refusal can say which part
 * differs. */
enum {
    H_VERSION,
    H_MODEL,
    H_POLICY,
    H_SCALER,
    H_OPTIMIZER,
    H_TRAIN,
    H_START,
    H_CKPT,
    H_DATA,
    H_PATHS,
    H_CONTENTS,
    H_GRAPH,
    H_ENV,
    H_COUNT
};
static const char *const part_names[H_COUNT] = {
    "ampx or backend version",
    "model file (its bytes)",
    "policy",
    "loss scaler and schedule",
    "optimizer settings",
    "training settings (steps, batch, accumulation, seed, intervals)",
    "start: --resume or --init-from on some ranks only",
    "checkpoint (--resume or --init-from: its step and bytes)",
    "data settings",
    "data file paths",
    "data files' contents (the same paths, other bytes)",
    "graph (values, dtypes, shapes)",
    "AMPX_BUCKET_KB or AMPX_DIST_PATH"};

/* A file's bytes, eight at a time (a digest to compare ranks by, not a cryptographic one);
 * a file that cannot be read hashes as its errno. */
static uint64_t file_digest(uint64_t h, const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return fnv(h, &errno, sizeof errno);
    static uint64_t buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (n % 8) memset((char *)buf + n, 0, 8 - n % 8);
        for (size_t i = 0; i < (n + 7) / 8; i++) {
            h = (h ^ buf[i]) * 0x9E3779B97F4A7C15ull;
            h ^= h >> 29;
        }
        h = fnv(h, &n, sizeof n);
    }
    fclose(f);
    return h;
}

/* The checkpoint or weights a run starts from (--resume, --init-from): the step its
 * __metadata__ names (the caller reads it; -1: none, or not an ampx checkpoint) and a digest
 * of its bytes. A rank that cannot open the file has none (read = 0): rank 0 alone loads it,
 * so it need only be on rank 0's machine. */
typedef struct ck_sign {
    int64_t step;
    uint64_t digest;
    int64_t read;
} ck_sign;

static ck_sign start_sign(const char *path, int64_t step) {
    ck_sign k = {.step = -1, .digest = 0, .read = 0};
    FILE *f   = path ? fopen(path, "rb") : NULL;
    if (!f) return k;
    fclose(f);
    k.read   = 1;
    k.digest = file_digest(0xCBF29CE484222325ull, path);
    k.step   = step;
    return k;
}

static uint64_t str_hash(uint64_t h, const char *s) {
    return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "", 1);
}

/* The data files a run reads, as the model resolves them. */
static void data_paths(const data_config *d, const char *out[8]) {
    const char *p[8] = {d->train_images, d->train_labels, d->test_images, d->test_labels,
                        d->train_csv,    d->test_csv,     d->text_train,  d->text_val};
    memcpy(out, p, sizeof p);
}

static void hash_settings(uint64_t *h, const settings *c, const ampx_scalars *fresh) {
    const policy *p = &c->pol;
    HASH(h[H_POLICY], p->params), HASH(h[H_POLICY], p->compute), HASH(h[H_POLICY], p->output);
    HASH(h[H_POLICY], p->class_dtype);
    for (int i = 0; i < p->n_overrides; i++)
        h[H_POLICY] = str_hash(h[H_POLICY], p->overrides[i].glob),
        HASH(h[H_POLICY], p->overrides[i].dtype);
    HASH(h[H_SCALER], *fresh); /* the scaler and schedule configuration, as the device gets it */
    const optimizer_config *o = &c->opt;
    uint64_t *ho              = &h[H_OPTIMIZER];
    HASH(*ho, o->kind), HASH(*ho, o->lr), HASH(*ho, o->weight_decay), HASH(*ho, o->beta1);
    HASH(*ho, o->beta2), HASH(*ho, o->eps), HASH(*ho, o->momentum), HASH(*ho, o->dampening);
    HASH(*ho, o->clip_grad_norm), HASH(*ho, o->nesterov), HASH(*ho, o->stochastic_rounding);
    const ampx_train_config *r = &c->train;
    uint64_t *ht               = &h[H_TRAIN];
    HASH(*ht, r->steps), HASH(*ht, r->batch), HASH(*ht, r->accumulate), HASH(*ht, r->seed);
    HASH(*ht, r->log_every), HASH(*ht, r->monitor_every), HASH(*ht, r->eval_every);
    HASH(h[H_START], r->skip_init);
    const data_config *d = &c->data;
    uint64_t *hd         = &h[H_DATA];
    HASH(*hd, d->source), HASH(*hd, d->samples), HASH(*hd, d->noise), HASH(*hd, d->test_fraction);
    HASH(*hd, d->turns), HASH(*hd, d->val_fraction), HASH(*hd, d->eval_windows);
    HASH(*hd, d->text_bytes), HASH(*hd, d->label_column), HASH(*hd, d->header);
    HASH(*hd, d->order), HASH(*hd, d->shuffle_seed);
    const char *paths[8];
    data_paths(d, paths);
    for (int i = 0; i < 8; i++) {
        h[H_PATHS] = str_hash(h[H_PATHS], paths[i]);
        if (paths[i]) h[H_CONTENTS] = file_digest(h[H_CONTENTS], paths[i]);
    }
}

/* The parts: the model file's bytes, the settings as parsed (the policy and scaler, also from
 * --policy; command-line overrides), the data files' paths and contents, the graph with every
 * value's dtype, the ampx and backend versions, and the environment that shapes the
 * all-reduce (bucket size, path). */
static void run_hash(const dp_state *dp, const settings *c, const g_graph *g,
                     const ampx_scalars *fresh, uint64_t *h) {
    const ampx_backend_iface *ifc = dp->call->ifc;
    for (int i = 0; i < H_COUNT; i++)
        h[i] = 0xCBF29CE484222325ull;
    h[H_VERSION] = str_hash(h[H_VERSION], AMPX_VERSION_STRING);
    h[H_VERSION] = str_hash(str_hash(h[H_VERSION], ifc->name), ifc->version);
    h[H_MODEL]   = file_digest(h[H_MODEL], c->file);
    hash_settings(h, c, fresh);
    for (int v = 0; v < g->n_values; v++) {
        const g_value *x = &g->values[v];
        h[H_GRAPH]       = str_hash(h[H_GRAPH], x->name);
        HASH(h[H_GRAPH], x->role), HASH(h[H_GRAPH], x->dtype), HASH(h[H_GRAPH], x->ndim);
        HASH(h[H_GRAPH], x->dims);
    }
    for (int i = 0; i < g->n_nodes; i++)
        HASH(h[H_GRAPH], g->nodes[i].op), HASH(h[H_GRAPH], g->nodes[i].dtype);
    /* what decides the buckets and the all-reduce path: ranks must agree on both */
    static const char *const env[] = {"AMPX_BUCKET_KB", "AMPX_DIST_PATH"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        h[H_ENV] = str_hash(str_hash(h[H_ENV], env[i]), getenv(env[i]));
}

/* Counts, on every rank, the ranks for which `differs` is set (an f32 sum: exact). */
static ampx_status count_ranks(dp_state *dp, int differs, int *count) {
    float n        = differs ? 1.0f : 0.0f;
    ampx_status st = dist_allreduce(dp->dist, &n, 1);
    *count         = (int)n;
    return st ? comm_fail(dp, st) : AMPX_OK;
}

/* The refusal of a rank whose part `part` differs from rank 0's: paths are shown both ways
 * (rank 0's come in `first_paths`). */
/* The data files' paths, space-separated (cut at cap), for the refusal's words. */
static void joined_paths(const data_config *d, char *out, size_t cap) {
    const char *paths[8];
    data_paths(d, paths);
    out[0] = 0;
    for (int i = 0, at = 0; i < 8; i++)
        if (paths[i] && at < (int)cap)
            at += snprintf(out + at, cap - (size_t)at, "%s%s", at ? " " : "", paths[i]);
}

/* "step 25, digest 0123456789abcdef" (or "no step, ..."), for the refusal's words. */
static void sign_text(const ck_sign *k, char *out, size_t cap) {
    if (k->step >= 0)
        snprintf(out, cap, "step %lld, digest %016llx", (long long)k->step,
                 (unsigned long long)k->digest);
    else
        snprintf(out, cap, "no step, digest %016llx", (unsigned long long)k->digest);
}

static ampx_status refuse(dp_state *dp, const settings *cfg, int part, const char *first_paths,
                          const ck_sign *mine, const ck_sign *first) {
    char paths[512], a[64], b[64];
    joined_paths(&cfg->data, paths, sizeof paths);
    if (part == H_PATHS) {
        err_set(dp->err, "rank %d reads other data files than rank 0: %s here, %s on rank 0",
                dp->rank, paths, first_paths);
    } else if (part == H_CKPT) {
        sign_text(mine, a, sizeof a), sign_text(first, b, sizeof b);
        err_set(dp->err,
                "rank %d's checkpoint %s is not rank 0's: %s here, %s on rank 0 (give every "
                "rank the same --resume or --init-from file, or have it on rank 0's machine "
                "only)",
                dp->rank, cfg->train.start_from, a, b);
    } else {
        err_set(dp->err,
                "rank %d's %s differs from rank 0's: every rank must start the same ampx with "
                "the same model file, policy, data, options and AMPX_BUCKET_KB and "
                "AMPX_DIST_PATH",
                dp->rank, part_names[part]);
    }
    return AMPX_ERR_INVALID;
}

ampx_status dp_join(dp_state *dp, const settings *cfg, const g_graph *g, const ampx_scalars *fresh,
                    int64_t start_step) {
    uint64_t mine[H_COUNT], first[H_COUNT];
    char paths[512] = "";
    ck_sign ck = start_sign(cfg->train.start_from, start_step), ck0 = ck;
    run_hash(dp, cfg, g, fresh, mine);
    mine[H_CKPT] = fnv(fnv(mine[H_CKPT], &ck.step, sizeof ck.step), &ck.digest, sizeof ck.digest);
    memcpy(first, mine, sizeof mine);
    if (dp->rank == 0) joined_paths(&cfg->data, paths, sizeof paths);
    ampx_status st = dist_broadcast(dp->dist, first, sizeof first, 0);
    if (!st) st = dist_broadcast(dp->dist, paths, sizeof paths, 0);
    if (!st) st = dist_broadcast(dp->dist, &ck0, sizeof ck0, 0);
    if (st) return comm_fail(dp, st);
    paths[sizeof paths - 1] = 0;
    /* a file only one side can open is not compared: rank 0 alone loads it */
    if (!ck.read || !ck0.read) mine[H_CKPT] = first[H_CKPT];
    int part = -1, bad;
    for (int i = 0; i < H_COUNT && part < 0; i++)
        if (mine[i] != first[i]) part = i;
    if ((st = count_ranks(dp, part >= 0, &bad))) return st;
    if (!bad) return AMPX_OK;
    if (part >= 0) return refuse(dp, cfg, part, paths, &ck, &ck0);
    /* The first rank to report ends the job: give the ranks that differ, whose messages name
     * what differs, half a second to say so before this generic one. */
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    err_set(dp->err,
            "%d of %d ranks run another model, policy, data, settings, checkpoint or ampx "
            "version than rank %d: refused",
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

/* ZeRO-1 on a host path: the packed buckets, this rank's sums and the counts. */
static ampx_status zero_setup(dp_state *dp) {
    const grad_layout *g = dp->grads;
    if (!dp->zero || dp->path == DP_NCCL) return AMPX_OK;
    for (int b = 0; b < g->n_buckets; b++)
        if (g->buckets[b].bytes / 4 > (uint64_t)INT32_MAX) {
            err_set(dp->err, "ZeRO-1 reduce-scatters buckets of at most %d values", INT32_MAX);
            return AMPX_ERR_UNSUPPORTED;
        }
    dp->rs_buf    = malloc(g->bytes + 4);
    dp->rs_counts = calloc((size_t)g->n_buckets * (size_t)dp->world, sizeof(int));
    if (!dp->rs_buf || !dp->rs_counts) {
        err_set(dp->err, "out of memory for ZeRO-1's reduce-scatter buffers");
        return AMPX_ERR_NO_MEMORY;
    }
    return AMPX_OK;
}

static ampx_status pick_path(dp_state *dp, const grad_layout *grads);

ampx_status dp_setup(dp_state *dp, const grad_layout *grads, int zero) {
    dp->zero       = zero;
    ampx_status st = pick_path(dp, grads);
    return st ? st : zero_setup(dp);
}

static ampx_status pick_path(dp_state *dp, const grad_layout *grads) {
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
            if ((st = dist_nccl_init(dp->dist, &dp->nccl, ERR(err, sizeof err)))) {
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
    free(dp->rs_buf), free(dp->rs_counts);
    dp->grads_host = NULL, dp->nccl = NULL;
    dp->rs_buf = NULL, dp->rs_counts = NULL;
}

void dp_begin_step(dp_state *dp, int64_t step, uint64_t inject_off, struct trace *traced) {
    const grad_layout *g = dp->grads;
    double now           = now_ms();
    /* the watchdog's words and its floor: twice the last step's time */
    if (dp->dist->step > 0 && step == dp->dist->step + 1)
        dp->dist->step_s = (now - dp->step_t0) / 1e3;
    dp->dist->step = step;
    dp->step_t0    = now;
    for (int b = 0; b < g->n_buckets; b++)
        dp->pending[b] = 0;
    for (int i = 0; i < g->n_params; i++)
        if (g->done_node[i] >= 0) dp->pending[g->bucket[i]]++;
    dp->next_bucket = 0;
    dp->inject_off  = inject_off;
    dp->traced      = traced;
}

/* ZeRO-1: bucket b's gradients (in host memory h, the bucket's first value) packed
 * rank-major, rank r's dp_shard of each parameter in turn, and its reduce-scatter started in
 * place: rank r's sums of its shards, the elements it updates, land at the bucket's start. */
static ampx_status scatter_bucket(dp_state *dp, int b) {
    const grad_layout *g = dp->grads;
    uint64_t base = g->buckets[b].off / 4, at = 0;
    int *counts = dp->rs_counts + (size_t)b * (size_t)dp->world;
    for (int r = 0; r < dp->world; r++) {
        uint64_t start = at;
        for (int i = 0; i < g->n_params; i++) {
            uint64_t lo, count;
            if (g->bucket[i] != b) continue;
            dp_shard(g->param_n[i], r, dp->world, &lo, &count);
            memcpy(dp->rs_buf + base + at, dp->grads_host + g->param_off[i] / 4 + lo, count * 4);
            at += count;
        }
        counts[r] = (int)(at - start);
    }
    ampx_status st = dist_ireduce_scatter(dp->dist, dp->rs_buf + base, counts);
    return st ? comm_fail(dp, st) : AMPX_OK;
}

/* ZeRO-1, the reduce-scatters done: this rank's sums times 1/N into its shard of each
 * gradient (written back to the device on the copy path). The rest of the arena keeps this
 * rank's own gradients, which nothing reads. */
static ampx_status unpack_shards(dp_state *dp, float inv) {
    const grad_layout *g = dp->grads;
    for (int b = 0; b < g->n_buckets; b++) {
        const float *sum = dp->rs_buf + g->buckets[b].off / 4;
        for (int i = 0; i < g->n_params; i++) {
            uint64_t lo, count;
            if (g->bucket[i] != b) continue;
            dp_shard(g->param_n[i], dp->rank, dp->world, &lo, &count);
            float *dst = dp->grads_host + g->param_off[i] / 4 + lo;
            for (uint64_t j = 0; j < count; j++)
                dst[j] = sum[j] * inv;
            sum += count;
            ampx_status st;
            if (dp->path == DP_HOST_COPY && count &&
                (st = check(dp,
                            dp->call->ifc->buffer_write(dp->call->ctx, g->buf,
                                                        g->param_off[i] + lo * 4, dst, count * 4),
                            "buffer_write")))
                return st;
        }
    }
    return AMPX_OK;
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
                                     dp->stream, ERR(err, sizeof err));
        if (st) err_set(dp->err, "%s", err);
        return st;
    }
    float *h = dp->grads_host + k->off / 4;
    if (dp->path == DP_HOST_COPY &&
        (st = check(dp, ifc->buffer_read(dp->call->ctx, g->buf, k->off, h, k->bytes),
                    "buffer_read")))
        return st;
    if (dp->zero) return scatter_bucket(dp, b);
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
        comm_slice(dp, dp->zero ? "reduce_scatter.start.f32" : "allreduce.start.f32", ns0, bytes);
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
    if (dp->zero) {
        st = unpack_shards(dp, inv);
        comm_slice(dp, "reduce_scatter.f32", ns0, g->bytes);
        dp->comm_ms += now_ms() - t0;
        return st;
    }
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
// ZeRO stage 1: the optimizer state sharded

void dp_shard(uint64_t n, int rank, int world, uint64_t *lo, uint64_t *count) {
    uint64_t r = (uint64_t)rank, w = (uint64_t)world;
    uint64_t hi = r + 1 == w ? n : n * (r + 1) / w / 16 * 16;
    *lo         = n * r / w / 16 * 16;
    *count      = hi - *lo;
}

/* Every rank's shard bounds of n values as MPI's counts and displacements. */
static ampx_status shard_table(dp_state *dp, uint64_t n, int *counts, int *displs) {
    if (dp->world > DP_MAX_RANKS || n > (uint64_t)INT32_MAX) {
        err_set(dp->err, "ZeRO-1 takes at most %d ranks and %d values per parameter", DP_MAX_RANKS,
                INT32_MAX);
        return AMPX_ERR_UNSUPPORTED;
    }
    for (int r = 0; r < dp->world; r++) {
        uint64_t lo, count;
        dp_shard(n, r, dp->world, &lo, &count);
        counts[r] = (int)count, displs[r] = (int)lo;
    }
    return AMPX_OK;
}

ampx_status dp_gather_shards(dp_state *dp, float *host, uint64_t n) {
    int counts[DP_MAX_RANKS], displs[DP_MAX_RANKS];
    ampx_status st = shard_table(dp, n, counts, displs);
    if (!st && (st = dist_allgather(dp->dist, host, counts, displs))) st = comm_fail(dp, st);
    return st;
}

ampx_status dp_gather_shards16(dp_state *dp, uint16_t *host, uint64_t n) {
    int counts[DP_MAX_RANKS], displs[DP_MAX_RANKS];
    ampx_status st = shard_table(dp, n, counts, displs);
    if (!st && (st = dist_allgather16(dp->dist, host, counts, displs))) st = comm_fail(dp, st);
    return st;
}

ampx_status dp_sum(dp_state *dp, float *v, uint64_t n) {
    ampx_status st = dist_allreduce(dp->dist, v, n);
    return st ? comm_fail(dp, st) : AMPX_OK;
}

ampx_status dp_move_shards(dp_state *dp, float *full, float *mine, uint64_t n, int to_root) {
    int counts[DP_MAX_RANKS], displs[DP_MAX_RANKS];
    ampx_status st = shard_table(dp, n, counts, displs);
    if (!st && (st = dist_shards(dp->dist, full, mine, counts, displs, to_root)))
        st = comm_fail(dp, st);
    return st;
}

ampx_status dp_agree(dp_state *dp, float *max_vals, uint64_t n, float *sum) {
    ampx_status st = dist_allreduce_max(dp->dist, max_vals, n);
    if (!st) st = dist_allreduce(dp->dist, sum, 1);
    return st ? comm_fail(dp, st) : AMPX_OK;
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

ampx_status dp_check(dp_state *dp, const ampx_scalars *s, float weights_sq, int64_t step,
                     const void *fp8, uint64_t fp8_bytes) {
    uint64_t mine  = fnv(0xCBF29CE484222325ull, s, sizeof *s);
    mine           = fnv(mine, &weights_sq, sizeof weights_sq);
    mine           = fp8_bytes ? fnv(mine, fp8, fp8_bytes) : mine;
    mine           = fnv(mine, &step, sizeof step);
    uint64_t first = mine;
    ampx_status st = dist_broadcast(dp->dist, &first, sizeof first, 0);
    if (st) return comm_fail(dp, st);
    int bad;
    if ((st = count_ranks(dp, mine != first, &bad)) || !bad) return st;
    if (mine != first)
        err_set(
            dp->err,
            "step %lld: rank %d's scalars block, fp8 scales or weights differ from rank 0's (loss "
            "scale %g, %d applied, %d skipped; sum of squared weights %.9g): the ranks "
            "diverged",
            (long long)step, dp->rank, (double)s->scale, s->applied_steps, s->skipped_steps,
            (double)weights_sq);
    else
        err_set(dp->err,
                "step %lld: %d of %d ranks hold another scalars block, fp8 scales or weights than "
                "rank %d "
                "(loss scale %g, %d applied, %d skipped): the ranks diverged",
                (long long)step, bad, dp->world, dp->rank, (double)s->scale, s->applied_steps,
                s->skipped_steps);
    return AMPX_ERR_INVALID;
}
