/* data_parallel.h — the trainer's side of data-parallel training (data_parallel.c): what a
 * rank runs compared with rank 0's, rank 0's bytes to every rank, the bucketed gradient
 * all-reduce of a step, the mean of the per-rank losses and the check that the ranks agree.
 *
 * The code here never sees the trainer: it is handed its communicator, the trainer's call
 * layer (buffer calls and their messages), the message buffer, and the gradient arena's
 * layout (grad_layout, which the trainer fills). Every dp_ function but dp_init, dp_free and
 * dp_path_name is collective: all ranks call it. */
#ifndef AMPX_TRAIN_DATA_PARALLEL_H
#define AMPX_TRAIN_DATA_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/call.h"
#include "base/error.h"
#include "config/settings.h"
#include "graph/graph.h"

#define GRAD_MAX_PARAMS 1024
#define GRAD_MAX_BUCKETS 512
#define DP_MAX_RANKS 4096 /* ZeRO-1's all-gather counts */

/* A bucket of the gradient all-reduce: a byte range of the gradient arena, started once the
 * last backward node writing into it has run. */
typedef struct grad_bucket {
    uint64_t off, bytes;
    int n_params;
} grad_bucket;

/* The parameter gradients: one f32 arena, parameters in the order the backward completes
 * them, so an all-reduce bucket is one offset range. */
typedef struct grad_layout {
    ampx_buffer *buf;
    uint64_t bytes;
    int n_buckets, n_params;
    grad_bucket buckets[GRAD_MAX_BUCKETS];
    int done_node[GRAD_MAX_PARAMS];      /* per parameter: the last backward node writing its
                                            gradient; -1: none */
    int bucket[GRAD_MAX_PARAMS];         /* per parameter: the bucket holding it */
    uint64_t param_off[GRAD_MAX_PARAMS]; /* per parameter: its gradient's byte offset */
    uint64_t param_n[GRAD_MAX_PARAMS];   /* per parameter: its elements */
} grad_layout;

struct trace;
struct dist_nccl;

/* A rank's data-parallel state (the trainer's t->dp). */
typedef struct dp_state {
    ampx_dist *dist; /* NULL: one process */
    int rank, world;
    call_ctx *call; /* the trainer's call layer */
    ampx_err err;   /* where messages go (the trainer's) */
    const grad_layout *grads;
    int path;          /* DP_HOST_COPY, DP_HOST_DIRECT, DP_NCCL (data_parallel.c) */
    float *grads_host; /* the host memory the all-reduce runs on (a copy, or the arena) */
    void *grads_dev;   /* DP_NCCL: the arena's device pointer, and the backend's stream */
    void *stream;
    struct dist_nccl *nccl;
    int zero;       /* ZeRO-1 on a host path: each bucket reduce-scattered, not all-reduced */
    float *rs_buf;  /* ZeRO-1: the buckets packed rank-major (grads->bytes), then this
                       rank's sums of its shards at each bucket's offset */
    int *rs_counts; /* ZeRO-1: per bucket, every rank's count (n_buckets x world) */
    int pending[GRAD_MAX_BUCKETS]; /* this step: parameters not yet complete per bucket */
    int next_bucket;
    uint64_t inject_off;  /* this step: the gradient byte set to +inf before its bucket's
                             all-reduce (a fault injection); UINT64_MAX: none */
    struct trace *traced; /* this step is traced: the timeline of its comm slices */
    int live;             /* this micro-batch: the buckets are watched after each node */
    double comm_ms;       /* host time in the gradient all-reduce */
    double step_t0;       /* when the step under way began (ms, monotonic) */
} dp_state;

void dp_init(dp_state *dp, ampx_dist *dist, call_ctx *call, ampx_err e);
/* ZeRO-1's shard of a tensor of n elements on rank `rank` of `world`: elements [*lo, *lo +
 * *count), the bounds n r / N rounded down to 16 elements (64 bytes: kernels' vectors start
 * aligned), the last rank taking the rest. */
void dp_shard(uint64_t n, int rank, int world, uint64_t *lo, uint64_t *count);
/* Every rank's shard of the n f32 values at host (its own updated, the others stale) into
 * every rank's host: the all-gather after a ZeRO-1 update. */
ampx_status dp_gather_shards(dp_state *dp, float *host, uint64_t n);
/* The same for n 16-bit values (bf16/f16 working copies). */
ampx_status dp_gather_shards16(dp_state *dp, uint16_t *host, uint64_t n);
/* In place: the sum over all ranks of n f32 values. */
ampx_status dp_sum(dp_state *dp, float *v, uint64_t n);
/* to_root 1: every rank's shard (mine) of n values into rank 0's full; 0: rank 0's full
 * into every rank's shard. full is rank 0's alone (NULL elsewhere). */
ampx_status dp_move_shards(dp_state *dp, float *full, float *mine, uint64_t n, int to_root);

/* Refuses ranks running another model, settings, graph or ampx than rank 0. fresh: the
 * scalars block of a fresh run (the scaler and schedule configuration); start_step: the step
 * the checkpoint the run starts from names (st_file_step), -1 for none. */
ampx_status dp_join(dp_state *dp, const settings *cfg, const g_graph *g, const ampx_scalars *fresh,
                    int64_t start_step);
/* Picks the all-reduce path for the gradient arena (once it is allocated). zero: ZeRO-1,
 * where a host path reduce-scatters each bucket (every rank's dp_shard of each parameter)
 * and only this rank's shard of the gradients is summed; NCCL still all-reduces. */
ampx_status dp_setup(dp_state *dp, const grad_layout *grads, int zero);
void dp_free(dp_state *dp);
/* One device buffer range, rank 0's bytes into every rank's (host: scratch of bytes). */
ampx_status dp_bcast_buffer(dp_state *dp, ampx_buffer *b, uint64_t off, uint64_t bytes, void *host);
/* Rank 0's value of *v (bytes of it) into every rank's. */
ampx_status dp_bcast_host(dp_state *dp, void *v, uint64_t bytes);

/* Step `step` (counted from 1) begins: inject_off and traced as in dp_state. */
void dp_begin_step(dp_state *dp, int64_t step, uint64_t inject_off, struct trace *traced);
ampx_status dp_after_node(dp_state *dp, int node); /* last micro-batch: starts buckets */
ampx_status dp_finish(dp_state *dp);               /* waits, averages, writes back */
/* ZeRO-1, after each rank checked its shard: the largest of n values of max_vals (the
 * non-finite flags) and the sum of *sum (the squared norm) over all ranks, in place. */
ampx_status dp_agree(dp_state *dp, float *max_vals, uint64_t n, float *sum);

/* At each log interval: the mean over ranks of n losses; the check that every rank holds
 * rank 0's scalars block and sum of squared weights after step `step`. */
ampx_status dp_mean_losses(dp_state *dp, float *loss, uint64_t n);
ampx_status dp_check(dp_state *dp, const ampx_scalars *s, float weights_sq, int64_t step,
                     const void *fp8, uint64_t fp8_bytes);

/* "host copy", "host memory in place", "NCCL"; "" for one process. */
const char *dp_path_name(const dp_state *dp);

#endif
