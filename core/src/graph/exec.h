/* exec.h — what an op's forward rule may ask of the executor that runs it. The rules are
 * written against this interface alone and are handed it: a g_exec is the executor's handle,
 * its table of functions first (as SQLite's sqlite3_file carries its io_methods), and the
 * executor's own state after it, which the rules never see. exec/executor.c fills the table
 * (placing values in the arena, issuing every op through the checked call layer), so graph/
 * links against nothing of a later stage. One indirect call per question, a few per op. */
#ifndef AMPX_GRAPH_EXEC_H
#define AMPX_GRAPH_EXEC_H

#include <stdint.h>

#include "ampx/backend.h"

typedef struct g_exec g_exec;
struct g_node;

/* The executor's answers; every slot is set. */
struct g_exec_ops {
    /* Where value v lives in this micro-batch (its dtype as planned). */
    ampx_tensor (*tensor)(g_exec *x, int v);
    /* Elements of value v at this batch size. */
    uint64_t (*numel)(const g_exec *x, int v);
    /* The positions of the token window this node runs on, when only some: their count, the
     * first in *first (a row-per-position value's tensor then starts at its rows; an
     * attention's tensors stay whole, and only its query rows up to the last of them are
     * read); 0: the whole window. */
    uint64_t (*positions)(const g_exec *x, uint64_t *first);
    /* 1 while training (backward follows, batch norm uses batch statistics, dropout drops). */
    int (*training)(const g_exec *x);
    /* 1 when a parameter-gradient write of node n adds to what is there (a later micro-batch
     * of the step, or an earlier node of the same graph wrote it first). */
    int (*accumulate)(const g_exec *x, const struct g_node *n);
    /* Micro-batches per step: the loss gradient is divided by it. */
    uint64_t (*micro_batches)(const g_exec *x);
    /* The scalars block (its first field is the f32 loss scale). The loss value of the graph
     * is placed by tensor in this micro-batch's record. */
    ampx_tensor (*scalars)(g_exec *x);
    /* The dropout key of node n this micro-batch: the run's seed, the step, the micro-batch. */
    uint64_t (*dropout_seed)(const g_exec *x, const struct g_node *n);
    /* Fills value v's storage at this batch size with zero bytes (a gradient an op adds into). */
    ampx_status (*zero)(g_exec *x, const struct g_node *n, int v);
    /* Enqueues backend op `op` for node n through the call layer. */
    ampx_status (*call)(g_exec *x, const struct g_node *n, uint32_t op, const void *args);
    /* The fp8 scaling state of slot s (an f32 [1] tensor): what GX_FP8_SCALE, _SCALE_INV or
     * _AMAX (the current step's row of its amax history; a null tensor when not training, so
     * evaluation does not move the scales) asks for; GX_FP8_COUNTS: the slot's i32 [2]
     * saturated and flushed counts (null when not training). */
    ampx_tensor (*fp8)(g_exec *x, int slot, int what);
};

enum { GX_FP8_SCALE, GX_FP8_SCALE_INV, GX_FP8_AMAX, GX_FP8_COUNTS };

/* The handle a rule is handed: the first member of the executor's state. */
struct g_exec {
    const struct g_exec_ops *ops;
};

/* What the rules call: the table's slots, and the null tensor. */
static inline ampx_tensor gx_tensor(g_exec *x, int v) {
    return x->ops->tensor(x, v);
}
static inline uint64_t gx_numel(const g_exec *x, int v) {
    return x->ops->numel(x, v);
}
static inline uint64_t gx_positions(const g_exec *x, uint64_t *first) {
    return x->ops->positions(x, first);
}
static inline int gx_training(const g_exec *x) {
    return x->ops->training(x);
}
static inline int gx_accumulate(const g_exec *x, const struct g_node *n) {
    return x->ops->accumulate(x, n);
}
static inline uint64_t gx_micro_batches(const g_exec *x) {
    return x->ops->micro_batches(x);
}
static inline ampx_tensor gx_scalars(g_exec *x) {
    return x->ops->scalars(x);
}
static inline uint64_t gx_dropout_seed(const g_exec *x, const struct g_node *n) {
    return x->ops->dropout_seed(x, n);
}
static inline ampx_status gx_zero(g_exec *x, const struct g_node *n, int v) {
    return x->ops->zero(x, n, v);
}
static inline ampx_status gx_call(g_exec *x, const struct g_node *n, uint32_t op,
                                  const void *args) {
    return x->ops->call(x, n, op, args);
}
static inline ampx_tensor gx_fp8(g_exec *x, int slot, int what) {
    return x->ops->fp8(x, slot, what);
}
/* A null tensor (an optional argument left out) of dtype d. */
static inline ampx_tensor gx_null(ampx_dtype d) {
    return (ampx_tensor){.buf = NULL, .offset = 0, .dtype = d};
}

#endif
