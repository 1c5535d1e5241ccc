/* trainer.h — the trainer's state, shared by the executor (trainer.c) and the checkpoint
 * code (checkpoint.c). */
#ifndef AMPX_TRAINER_H
#define AMPX_TRAINER_H

#include "ampx/train.h"
#include "train/data.h"
#include "config/model.h"

#define TR_MAX_PARAMS (2 * MODEL_MAX_NODES)

/* Per node, the tensors the plan places in the arena. */
enum { T_Y, T_G, T_MEAN, T_RSTD, T_TEMP, T_PER_NODE };

typedef struct plan_item {
    uint64_t bytes, offset;
    int first, last; /* schedule positions; first < 0: unused */
} plan_item;

typedef struct param {
    char name[MODEL_NAME_MAX + 8];
    int node;
    uint64_t n, dim0, dim1; /* dim1 0: a vector */
    float wd;
    ampx_buffer *master, *grad, *s1, *s2, *copy; /* s1/s2: adam m, v or sgd momentum */
    ampx_dtype copy_dtype;                       /* AMPX_F32: no working copy */
} param;

struct ampx_trainer {
    ampx_model *m;
    ampx_backend *be;
    const ampx_backend_iface *ifc;
    const ampx_backend_ops *ops;
    ampx_context *ctx;
    dataset data;
    int64_t B, A, K; /* micro-batch rows, micro-batches per step, ring slots */
    int64_t micro_per_epoch, epoch_on_device;
    float *shuffle_x;
    int32_t *shuffle_y;
    ampx_buffer *x_train, *y_train, *x_test, *y_test;
    int n_params;
    param params[TR_MAX_PARAMS];
    int w_param[MODEL_MAX_NODES]; /* first param of a node, -1 if none */
    int need_grad[MODEL_MAX_NODES];
    plan_item plan[MODEL_MAX_NODES * T_PER_NODE];
    ampx_buffer *arena;
    uint64_t arena_bytes, unplanned_bytes;
    ampx_buffer *scalars, *ring, *eval_loss;
    uint64_t slot_bytes;
    int64_t step;        /* steps done (applied + skipped) */
    int64_t ring_first;  /* step number of the first unread record */
    double t_last_flush; /* host clock at the last flush */
    /* while emitting */
    int planning, time, micro, has_contrib[MODEL_MAX_NODES];
    int64_t rows, row0;
    int training;
    ampx_buffer *x_src, *y_src;
    uint64_t loss_offset;
    ampx_buffer *loss_buf;
    int64_t inject_step;
    int inject_param;
    char error[1024];
};

/* The scalars block of a fresh run: scaler and schedule configuration, initial state. */
void init_scalars(const ampx_model *m, ampx_scalars *s);

/* Writes a message into t->error and returns st. */
ampx_status tr_fail(ampx_trainer *t, ampx_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
