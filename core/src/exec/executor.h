/* executor.h — runs a range of graph nodes through their rules, placing each value: the
 * arena at the plan's offset for what lives within a micro-batch, its own buffer for inputs
 * (at the micro-batch's first row), parameters, working copies, state, constants and
 * parameter gradients. Every op goes through the call layer. */
#ifndef AMPX_TRAIN_EXECUTOR_H
#define AMPX_TRAIN_EXECUTOR_H

#include "backend/call.h"
#include "graph/exec.h"
#include "graph/graph.h"
#include "passes/planner.h"
#include "exec/place.h"

typedef struct executor executor;
struct executor {
    g_exec h; /* first: the handle the rules are handed (= EXEC_HANDLE) */
    const g_graph *g;
    const plan *p;
    call_ctx *call;
    ampx_buffer *arena;
    ampx_buffer **own;       /* per value: its own buffer, NULL for arena values */
    const uint64_t *own_off; /* (optional) per value: its offset in that buffer; NULL: 0 */
    uint64_t rows, row0;     /* inputs are read from row row0 of their buffers */
    int training, micro;
    uint64_t micro_batches;
    uint64_t seed, step;        /* the run's seed and the step being run (dropout keys) */
    uint32_t replica, replicas; /* data-parallel: this rank of how many (0: one process); each
                                   rank's micro-batch gets its own dropout key */
    ampx_tensor scalars, loss;
    ampx_tensor fp8_state;  /* the fp8 scaling state of fp8_n slots (f32), when the graph has any */
    ampx_tensor fp8_counts; /* the quantizing casts' counts, i32 [fp8_n][2] */
    int fp8_frozen;         /* 1: training-mode runs outside a step raise no amax, count nothing */
    uint64_t fp8_n;
    /* (optional) an incremental run (infer/kvcache.c): per forward node, KV_FULL (over the
     * whole window), KV_ROWS (on the rows of positions [pos0, pos0 + pos_n) of the window of
     * seq positions alone: its inputs' and activations' tensors start there and hold pos_n
     * positions: those of kv_rows, which the executor offsets; a rule that reads others asks
     * gx_positions), KV_UPTO (over the window's tensors, where the rule may stop at the last
     * new position: gx_positions says them, an attention's query rows) or KV_SKIP (the loss);
     * NULL: every node over the whole window */
    const uint8_t *kv_mode;
    const uint8_t *kv_rows; /* per value: 1 for those laid out [B, T, ..] (a row a position) */
    uint64_t pos0, pos_n, seq;
    int rows_only;        /* the node being run is KV_ROWS */
    int upto;             /* the node being run is KV_UPTO */
    ampx_status place_st; /* a placed run: the failure of a copy the node being run needed */
    /* (optional) an ordered backend list: each node's member and the copies between them;
     * NULL: one backend, every op through `call` */
    exec_place *pl;
    /* (optional) called after each node has issued its ops (the monitor's scan) */
    ampx_status (*after_node)(executor *x, int node, void *user);
    void *after_user;
};

enum { KV_FULL, KV_ROWS, KV_SKIP, KV_UPTO };

/* The handle's table: the executor's answers to graph/exec.h; an executor is initialized
 * with .h = EXEC_HANDLE. */
extern const struct g_exec_ops exec_ops;
#define EXEC_HANDLE                                                                                \
    { .ops = &exec_ops }

/* Where value v lives, and its elements at this batch size (gx_tensor, gx_numel). */
ampx_tensor exec_tensor(const executor *x, int v);
uint64_t exec_numel(const executor *x, int v);
/* Runs nodes [first, last) in order; stops at the first failure (message in the call ctx). */
ampx_status exec_run(executor *x, int first, int last);

#endif
