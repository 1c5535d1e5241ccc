/* exec.h — what an op's forward rule may ask of the executor that runs it. The rules are
 * written against this interface alone; train/executor.c implements it (placing values in
 * the arena, issuing every op through the checked call layer). */
#ifndef AMPX_GRAPH_EXEC_H
#define AMPX_GRAPH_EXEC_H

#include <stdint.h>

#include "ampx/backend.h"

typedef struct g_exec g_exec;
struct g_node;

/* Where value v lives in this micro-batch (its dtype as planned). */
ampx_tensor gx_tensor(g_exec *x, int v);
/* A null tensor (an optional argument left out) of dtype d. */
ampx_tensor gx_null(ampx_dtype d);
/* Elements of value v at this batch size. */
uint64_t gx_numel(const g_exec *x, int v);
/* 1 while training (backward follows, batch norm uses batch statistics, dropout drops). */
int gx_training(const g_exec *x);
/* 1 when a parameter-gradient write of node n adds to what is there (a later micro-batch
 * of the step, or an earlier node of the same graph wrote it first). */
int gx_accumulate(const g_exec *x, const struct g_node *n);
/* Micro-batches per step: the loss gradient is divided by it. */
uint64_t gx_micro_batches(const g_exec *x);
/* The scalars block (its first field is the f32 loss scale). The loss value of the graph
 * is placed by gx_tensor in this micro-batch's record. */
ampx_tensor gx_scalars(g_exec *x);
/* The dropout key of node n this micro-batch: the run's seed, the step, the micro-batch. */
uint64_t gx_dropout_seed(const g_exec *x, const struct g_node *n);
/* Fills value v's storage at this batch size with zero bytes (a gradient an op adds into). */
ampx_status gx_zero(g_exec *x, const struct g_node *n, int v);
/* Enqueues backend op `op` for node n through the call layer. */
ampx_status gx_call(g_exec *x, const struct g_node *n, uint32_t op, const void *args);

#endif
