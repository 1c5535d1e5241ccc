/* trainer.h — the trainer's state and the few helpers its files share. struct ampx_trainer
 * is the model's graph, plan and executor, the parameters, and one part per job, each
 * written by the file that owns it (and declared in that folder's header):
 *   exec/params.c          the parameters, their state and working copies (params)
 *   exec/inputs.c          the graph's inputs over the data (in)
 *   exec/step.c            a step, the ring of step records and its flush (ring)
 *   exec/hooks.h           what attaches to a step (hooks): the list is train/hooks.c's
 *   exec/fp8.c             the fp8 scaling state (fp8*)
 *   exec/replicas.c        the data-parallel and ZeRO-1 hooks over dist/data_parallel.c (dp)
 *   exec/inject.c          fault injection for tests (inject)
 *   watch/monitor.c        the gradient-health monitor, headroom.c, forensics.c (mon)
 *   watch/timeline.c       the trace window (timeline)
 *   formats/checkpoint.c   save and resume (keeper); export.c, llmc.c: weights out and in
 *   infer/infer.c          evaluate, logits, predict; kvcache.c: the KV cache (kv)
 *   train/trainer.c        creation (the graph through the pass pipeline, the gradient arena
 *                          (grads), the device, each part's setup) and freeing
 * Calls go one way, to earlier stages and within a folder: the step reaches the hooks only
 * through t->hooks. What every file needs (messages, buffer calls, one micro-batch) is the
 * static inline helpers at the end. */
#ifndef AMPX_TRAINER_H
#define AMPX_TRAINER_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "ampx/train.h"
#include "backend/call.h"
#include "base/error.h"
#include "obs/health.h"
#include "passes/model.h"
#include "passes/planner.h"
#include "data/data.h"
#include "dist/data_parallel.h"
#include "exec/executor.h"
#include "exec/place.h"
#include "passes/place.h"

#define TR_MAX_PARAMS GRAD_MAX_PARAMS

/* A trainable parameter: f32 master, f32 gradient, optimizer state, working copy. */
typedef struct param {
    char name[G_NAME_MAX];
    int value; /* the master's value id */
    uint64_t n;
    int ndim;
    uint64_t dims[G_MAX_DIMS];
    float wd;
    ampx_buffer *master, *grad, *s1, *s2, *copy; /* s1/s2: adam m, v or sgd momentum */
    uint64_t lo, shard;       /* ZeRO-1: this rank updates elements [lo, lo + shard); s1/s2 hold
                                 them alone (without ZeRO: 0 and n) */
    float *s1_full, *s2_full; /* ZeRO-1, rank 0: the whole state staged for checkpoints */
    int mshard;               /* ZeRO-1 with a working copy: master holds [lo, lo + shard) only
                                 (the forward reads the copy), staged whole in m_full on rank 0 */
    float *m_full;
    uint64_t grad_off;     /* bytes: where the gradient sits in grad (the gradient arena) */
    ampx_dtype copy_dtype; /* AMPX_F32: no working copy */
} param;

/* Non-trainable state saved in checkpoints (batch-norm running statistics). */
typedef struct state_tensor {
    int value;
    uint64_t n;
    ampx_buffer *buf;
} state_tensor;

/* The graph's inputs over the data (inputs.c). */
typedef struct tr_inputs {
    dataset data;
    int tokens; /* the data is a token stream: windows are drawn per micro-batch */
    int64_t micro_per_epoch, epoch_on_device;
    float *shuffle_x, *host; /* host: one input's rows as the device gets them */
    int32_t *shuffle_y;
    ampx_buffer *train[G_MAX_INPUTS], *test[G_MAX_INPUTS];
    int64_t offset[G_MAX_INPUTS]; /* f32 inputs: first feature; -1 labels; -2 one-hot;
                                     -3 token ids */
    ampx_batch_fn batch_fn;       /* the caller's training batches (ampx_trainer_set_batches) */
    void *batch_user;
    float *batch_x; /* one micro-batch of rows from batch_fn, and its classes */
    int32_t *batch_y;
} tr_inputs;

/* The ring of step records, read by the host only when it logs (step.c). */
typedef struct tr_ring {
    ampx_buffer *buf; /* K slots of slot_bytes */
    uint64_t slot_bytes;
    int64_t first;       /* step number of the first unread record */
    double t_last_flush; /* host clock at the last flush */
    health_state health; /* the run-health verdicts over the records */
} tr_ring;

/* (optional) --trace: the timeline being written (timeline.c). */
typedef struct tr_timeline {
    struct trace *trace;
    uint64_t *dev_ns; /* device timestamps of a traced step, 2 per op */
    uint32_t dev_cap; /* ops dev_ns holds; 0: the backend has no timestamps */
    int open;         /* the step being run is traced */
} tr_timeline;

/* Fault injection (tests, inject.c): +inf into a gradient before the step's unscale and
 * check, or into a master after the step's update; steps are 1-based, -1: none. */
typedef struct tr_inject {
    int64_t grad_step, update_step;
    int grad_param, update_param;
} tr_inject;

/* The KV cache of incremental sampling (kvcache.c): per forward node its mode (KV_ROWS,
 * KV_FULL, KV_SKIP), whether that plan is usable (else why), and the token ids of the
 * positions [0, len) whose rows the device holds. */
/* An ordered backend list (--backend a,b): its members, the calls of each, what the probe
 * found each node needs, the placement pass's answer and the executor's copies (exec/place.h).
 * n < 2: one backend, none of this is used. */
typedef struct tr_placed {
    int n, home;
    ampx_backend *members[PLACE_MAX];
    call_ctx calls[PLACE_MAX]; /* [home] unused: the trainer's call is home's */
    place_probe probe;
    pass_placing placing;
    exec_place run;
    uint64_t step_bytes;  /* bytes the copies of one step move, as planned */
    uint64_t *node_bytes; /* per node: bytes copied in before it, as planned */
    /* placement "measured" (placed.c): the first steps run each variant (variant v: every
     * node on its v-th candidate member) and then the per-node best, all timed node by node;
     * the fastest is kept */
    int measuring; /* measuring steps left; 0: not measuring */
    int variants, reps, step_i;
    int8_t *assign;  /* [variant][node]: the members of each variant (variants + 1 rows) */
    double *node_ns; /* [node][member]: this step's times (the executor's) */
    double *sum_ns;  /* [node][member]: over the measuring steps */
    uint32_t *runs;  /* [node][member]: steps measured */
    double variant_ns[PLACE_MAX + 1];
    int variant_steps[PLACE_MAX + 1];
    char report[768];
} tr_placed;

typedef struct tr_kvcache {
    uint8_t *mode, *rows; /* rows: per value, laid out a row a position (executor.kv_rows) */
    int32_t *ids;
    int64_t len;
    int planned, ok;
    char why[256];
} tr_kvcache;

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
    uint64_t *own_off; /* per value: offset in its own buffer (the gradients' arena offsets) */
    uint8_t *persistent;
    int inference;   /* created for sampling (1) or predicting (2): no data is loaded */
    int64_t B, A, K; /* micro-batch rows, micro-batches per step, ring slots */
    int n_params, n_state;
    param params[TR_MAX_PARAMS];
    state_tensor state[TR_MAX_PARAMS];
    ampx_buffer *arena;
    ampx_buffer *scalars, *eval_loss;
    /* policy.fp8 (train/fp8.c): the scaling state of g.n_fp8 slots (backend.h's FP8 STATE
     * block: scale, scale_inv, the amax history) and each slot's format's largest value */
    ampx_buffer *fp8, *fp8_max;
    int fp8_history;
    /* the quantizing casts' counts (i32 [slots][2]: saturated, flushed), read and cleared at
     * each log interval into the records (names and elements quantized per step by slot) */
    ampx_buffer *fp8_counts;
    ampx_fp8_record *fp8_rec;
    char (*fp8_names)[96];
    uint64_t *fp8_elems;
    int64_t step;                         /* steps done (applied + skipped) */
    uint64_t last_step_ops;               /* ops the last step issued */
    const struct step_hook *const *hooks; /* what attaches to a step (hooks.h), in order */
    int n_hooks;
    uint32_t hooks_on_nodes; /* this step: bit i, hooks[i] watches each node (step.c) */
    int amp_fused;           /* the backend has AMP_PASS (ABI 1.4): one op instead of grad_stats,
                                unscale_check and sum_squares */
    grad_layout grads;
    tr_inputs in;
    tr_ring ring;
    struct tr_monitor *mon; /* the monitor and the forensics (watch/watch.h) */
    tr_timeline timeline;
    tr_inject inject;
    dp_state dp;      /* data-parallel runs (dp.world > 1) */
    int zero;         /* ZeRO stage 1: the optimizer state sharded over the ranks (dp.world > 1) */
    float *zero_full; /* rank 0: every s1_full and s2_full (host memory) */
    tr_kvcache kv;
    tr_placed place;
    char error[1024];
    char notice[768];   /* what the last load changed, for the user (ampx_trainer_notice) */
    ampx_keeper keeper; /* saved in and loaded from checkpoints (checkpoint.c) */
    const volatile sig_atomic_t *stop; /* ampx_trainer_stop_on: run stops when non-zero */
    _Atomic(uintptr_t) user; /* the thread inside run, evaluate, save or load (tr_claim) */
};

// ---------------------------------------------------------------------------------------
// Shared helpers

/* The trainer's message buffer, t->error, as the ampx_err every failing path writes. */
static inline ampx_err tr_err(ampx_trainer *t) {
    return ERR(t->error, sizeof t->error);
}

/* One thread at a time (docs/C_API.md), enforced where it is cheap: run, evaluate, save and
 * load claim the trainer for their thread, and another thread's call meanwhile returns
 * AMPX_ERR_BUSY (writing nothing into t->error, which is the other thread's). The same
 * thread may nest (a record callback that saves). Returns 1: claimed (tr_release after),
 * 0: nested, -1: busy. */
static inline int tr_claim(ampx_trainer *t) {
    _Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "pthread_t as an integer");
    uintptr_t none = 0, self = (uintptr_t)pthread_self();
    if (atomic_compare_exchange_strong(&t->user, &none, self)) return 1;
    return none == self ? 0 : -1;
}

static inline void tr_release(ampx_trainer *t, int claimed) {
    if (claimed == 1) atomic_store(&t->user, 0);
}

/* Writes a message into t->error and returns st (err_fail on tr_err). */
#define tr_fail(t, st, ...) err_fail(tr_err(t), (st), __VA_ARGS__)

/* Buffer calls and the step's own ops go through the call layer like the nodes' ops. */
static inline ampx_status tr_check(ampx_trainer *t, ampx_status st, const char *what) {
    return call_check(&t->call, st, what);
}

static inline ampx_tensor tr_tensor(ampx_buffer *b, uint64_t off, ampx_dtype d) {
    return (ampx_tensor){.buf = b, .offset = off, .dtype = d};
}

/* A zeroed buffer of at least bytes, rounded up to whole 4-byte patterns (buffer_fill takes
 * whole patterns: an odd-sized bf16 working copy, 3 x 5 weights, is 30 bytes). */
static inline ampx_status tr_alloc_zero(ampx_trainer *t, uint64_t bytes, ampx_buffer **out) {
    uint64_t n     = bytes ? (bytes + 3) / 4 * 4 : 4;
    ampx_status st = tr_check(t, t->ifc->buffer_alloc(t->ctx, n, out), "buffer_alloc");
    if (st) return st;
    return tr_check(t, t->ifc->buffer_fill(t->ctx, *out, 0, n, 0, 4), "buffer_fill");
}

static inline ampx_status tr_upload(ampx_trainer *t, ampx_buffer **b, const void *src,
                                    uint64_t bytes) {
    ampx_status st =
        tr_check(t, t->ifc->buffer_alloc(t->ctx, bytes ? bytes : 4, b), "buffer_alloc");
    if (st || !bytes) return st;
    return tr_check(t, t->ifc->buffer_write(t->ctx, *b, 0, src, bytes), "buffer_write");
}

/* A step's own op (cast, unscale, optimizer...), in the phase the trace shows it in. */
static inline ampx_status tr_step_op(ampx_trainer *t, uint32_t op, const void *args) {
    t->call.phase = op == AMPX_OP_SGD || op == AMPX_OP_ADAMW ? CALL_OPTIMIZER : CALL_AMP;
    t->call.dtype = op == AMPX_OP_CAST ? ((const ampx_cast_args *)args)->dst.dtype : AMPX_F32;
    return call_op(&t->call, "step", op, args);
}

/* One micro-batch: the forward nodes (and, training, the backward ones). */
static inline ampx_status tr_micro_batch(ampx_trainer *t) {
    t->kv.len = 0; /* the cache's rows are overwritten */
    return exec_run(&t->x, 0, t->x.training ? t->g.n_nodes : t->g.n_forward);
}

/* The parameter gradients as one tensor list (ts, ns: TR_MAX_PARAMS entries); under ZeRO-1
 * this rank's shard of each, the only part its reduce-scatter summed. */
static inline ampx_tensor_list tr_grad_list(ampx_trainer *t, ampx_tensor *ts, uint64_t *ns) {
    for (int i = 0; i < t->n_params; i++) {
        const param *p = &t->params[i];
        ts[i]          = tr_tensor(p->grad, p->grad_off + p->lo * 4, AMPX_F32);
        ns[i]          = p->shard;
    }
    return (ampx_tensor_list){.count = (uint32_t)t->n_params, .tensors = ts, .n_elems = ns};
}

static inline double tr_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
