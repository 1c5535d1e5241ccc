/* trainer.h — the trainer's state, shared by the step loop (trainer.c) and the checkpoint
 * code (checkpoint.c). */
#ifndef AMPX_TRAINER_H
#define AMPX_TRAINER_H

#include "ampx/train.h"
#include "backend/call.h"
#include "obs/health.h"
#include "passes/model.h"
#include "passes/planner.h"
#include "train/data.h"
#include "train/executor.h"

#define TR_MAX_PARAMS 512
#define TR_MAX_BUCKETS 512

/* A trainable parameter: f32 master, f32 gradient, optimizer state, working copy. */
typedef struct param {
    char name[G_NAME_MAX];
    int value; /* the master's value id */
    uint64_t n;
    int ndim;
    uint64_t dims[G_MAX_DIMS];
    float wd;
    ampx_buffer *master, *grad, *s1, *s2, *copy; /* s1/s2: adam m, v or sgd momentum */
    uint64_t grad_off;     /* bytes: where the gradient sits in grad (the gradient arena) */
    int done_node;         /* the last backward node that writes the gradient; -1: none */
    int bucket;            /* the all-reduce bucket holding it (data-parallel runs) */
    ampx_dtype copy_dtype; /* AMPX_F32: no working copy */
} param;

/* A bucket of the gradient all-reduce: a byte range of the gradient arena, started once the
 * last backward node writing into it has run. */
typedef struct grad_bucket {
    uint64_t off, bytes;
    int n_params, pending; /* pending: parameters not yet complete in this step */
} grad_bucket;

/* Non-trainable state saved in checkpoints (batch-norm running statistics). */
typedef struct state_tensor {
    int value;
    uint64_t n;
    ampx_buffer *buf;
} state_tensor;

struct ampx_trainer {
    ampx_model *m;
    ampx_backend *be;
    const ampx_backend_iface *ifc;
    ampx_context *ctx;
    call_ctx call;
    g_graph g; /* the model's graph with its backward nodes */
    plan plan;
    executor x;
    ampx_buffer **own; /* per value (the executor's placement) */
    uint8_t *persistent;
    dataset data;
    int tokens;      /* the data is a token stream: windows are drawn per micro-batch */
    int inference;   /* created for sampling: no data is loaded */
    int64_t B, A, K; /* micro-batch rows, micro-batches per step, ring slots */
    int64_t micro_per_epoch, epoch_on_device;
    float *shuffle_x, *host_in;
    int32_t *shuffle_y;
    ampx_buffer *in_train[G_MAX_INPUTS], *in_test[G_MAX_INPUTS];
    int64_t in_offset[G_MAX_INPUTS]; /* f32 inputs: first feature; -1 labels; -2 one-hot */
    int n_params, n_state;
    param params[TR_MAX_PARAMS];
    state_tensor state[TR_MAX_PARAMS];
    ampx_buffer *arena;
    /* the parameter gradients: one f32 arena, parameters in the order the backward completes
     * them, so an all-reduce bucket is one offset range */
    ampx_buffer *grads;
    uint64_t grads_bytes;
    uint64_t *own_off; /* per value: offset in its own buffer (the gradients' arena offsets) */
    /* data-parallel runs (world > 1) */
    ampx_dist *dist;
    int rank, world;
    int dp_path;       /* DP_HOST_COPY, DP_HOST_DIRECT, DP_NCCL (data_parallel.c) */
    float *grads_host; /* the host memory the all-reduce runs on (a copy, or the arena) */
    void *grads_dev;   /* DP_NCCL: the arena's device pointer, and the backend's stream */
    void *dp_stream;
    struct dist_nccl *nccl;
    int n_buckets, next_bucket;
    grad_bucket buckets[TR_MAX_BUCKETS];
    double comm_ms;        /* host time in the gradient all-reduce */
    int mon_live, dp_live; /* this micro-batch: the monitor scans, the buckets are watched */
    ampx_buffer *scalars, *ring, *eval_loss;
    uint64_t slot_bytes;
    int64_t step;        /* steps done (applied + skipped) */
    int64_t ring_first;  /* step number of the first unread record */
    double t_last_flush; /* host clock at the last flush */
    int64_t inject_step, inject_w_step;
    int inject_param, inject_w_param;
    /* gradient-health monitor, every mon_every steps; 0: off. Per ring slot of mon: the
     * loss scale (f32, padded to 16 bytes), then for the parameters and then for the
     * scanned node outputs (n_scan per micro-batch): 4 f32 stats each, 3 i32 counts each,
     * an i32 NaN count each. */
    int64_t mon_every;
    int amp_fused; /* the backend has AMP_PASS (ABI 1.4): one op instead of grad_stats,
                      unscale_check and sum_squares */
    ampx_buffer *mon;
    uint64_t mon_slot_bytes;
    ampx_dtype mon_compute[TR_MAX_PARAMS]; /* per parameter: its layer's compute dtype */
    ampx_dtype mon_target[TR_MAX_PARAMS];  /* its grad_stats target: f16, bf16, else f32 */
    char mon_layer[TR_MAX_PARAMS][G_NAME_MAX];
    int *scan_first, *scan_count; /* per node: first scan position and count */
    int *scan_value, *scan_node;  /* per scan position: the value, its node */
    int n_scan, mon_ready;
    uint64_t mon_slot_cur;   /* offset of the monitored step's slot */
    unsigned char *mon_host; /* host copy of the monitor slots at a flush */
    ampx_tensor_health health[TR_MAX_PARAMS];
    char first_nonfinite[320];
    health_state health_st;
    uint64_t last_step_ops; /* ops the last step issued */
    struct trace *trace;    /* (optional) --trace: the timeline being written */
    uint64_t *dev_ns;       /* device timestamps of a traced step, 2 per op */
    uint32_t dev_cap;       /* ops dev_ns holds; 0: the backend has no timestamps */
    char error[1024];
};

/* The scalars block of a fresh run: scaler and schedule configuration, initial state. */
void init_scalars(const ampx_model *m, ampx_scalars *s);

/* Data-parallel runs (data_parallel.c); every one is collective: all ranks call it. */
ampx_status dp_join(ampx_trainer *t);  /* refuses ranks running another model than rank 0 */
ampx_status dp_setup(ampx_trainer *t); /* picks the all-reduce path */
void dp_free(ampx_trainer *t);
void dp_begin_step(ampx_trainer *t);
ampx_status dp_after_node(ampx_trainer *t, int node); /* last micro-batch: starts buckets */
ampx_status dp_finish(ampx_trainer *t);               /* waits, averages, writes back */
ampx_status dp_mean_losses(ampx_trainer *t, float *loss, uint64_t n);
ampx_status dp_check(ampx_trainer *t, const ampx_scalars *s, float weights_sq);

/* Writes a message into t->error and returns st. */
ampx_status tr_fail(ampx_trainer *t, ampx_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
