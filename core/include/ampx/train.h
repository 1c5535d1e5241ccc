/* train.h — training a JSON-described model with automatic mixed precision and dynamic
 * loss scaling, on any backend, through the plugin ABI alone.
 *
 *   ampx_model *m;   ampx_model_load("models/mlp.json", NULL, &m, err, sizeof err);
 *   ampx_trainer *t; ampx_trainer_create(m, backend, &t, err, sizeof err);
 *   ampx_trainer_run(t, m_steps, on_record, user);   // records arrive when the host logs
 *   ampx_trainer_evaluate(t, &eval);
 *   ampx_trainer_save(t, "ckpt.safetensors", err, sizeof err);
 *
 * The host never waits on the device inside a step: per-step values (loss, scale, skipped,
 * lr, gradient norm, overflow flags) are written by the device into a ring of records that
 * the host reads every log_every steps. */
#ifndef AMPX_TRAIN_H
#define AMPX_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/ampx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampx_model ampx_model;
typedef struct ampx_trainer ampx_trainer;

/* The run settings of a model ("train" in the JSON); the command line may change them
 * between ampx_model_load and ampx_trainer_create. */
typedef struct ampx_train_config {
    int64_t steps;      /* total optimizer steps (applied + skipped) of the run */
    int64_t batch;      /* examples per micro-batch */
    int64_t accumulate; /* micro-batches per step */
    uint64_t seed;      /* initialization, data generation and shuffling */
    int64_t log_every;  /* steps between host reads of the record ring */
} ampx_train_config;

/* Loads MODEL.json; policy_path (optional) is a JSON file whose "policy" and/or "scaler"
 * replace the model's. Errors: one line "FILE:LINE:COL: $.path: message". */
AMPX_API ampx_status ampx_model_load(const char *path, const char *policy_path, ampx_model **out,
                                     char *err, size_t err_cap);
AMPX_API void ampx_model_free(ampx_model *m);
AMPX_API ampx_train_config *ampx_model_train_config(ampx_model *m);
AMPX_API const char *ampx_model_name(const ampx_model *m);

/* Writes the resolved precision plan, one line per call of `line`: every tensor with its
 * dtype and why, every cast inserted, the scaler and the optimizer state dtypes. */
typedef void (*ampx_line_fn)(void *user, const char *line);
AMPX_API void ampx_model_describe(const ampx_model *m, ampx_line_fn line, void *user);

/* One training step as the device recorded it. */
typedef struct ampx_step_record {
    int64_t step;         /* 1-based step number */
    double loss;          /* mean loss over the step's micro-batches (unscaled) */
    double grad_norm;     /* global L2 norm of the unscaled gradients (before clipping) */
    float scale;          /* loss scale after this step's update */
    float lr;             /* learning rate the optimizer used last */
    int skipped;          /* 1: non-finite gradients, the step was skipped */
    double time_ms;       /* host time per step, averaged over the log interval */
    const char *overflow; /* skipped steps: the names of the non-finite gradients */
} ampx_step_record;

typedef struct ampx_eval_result {
    double accuracy; /* held-out accuracy in [0, 1] */
    double loss;     /* held-out mean cross-entropy */
    int64_t examples;
} ampx_eval_result;

/* Creates the trainer: opens the data, initializes parameters from the seed, plans buffers
 * and allocates them on the backend. The model must outlive the trainer. */
AMPX_API ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                         char *err, size_t err_cap);
AMPX_API void ampx_trainer_free(ampx_trainer *t);

/* Runs steps until the step count reaches `until` (total, as in --steps). record() is called
 * for every step when the host reads the ring; a non-zero return stops the run. A scaler
 * stop condition (on_min_scale = error, max_consecutive_skips) ends it with
 * AMPX_ERR_INVALID and the reason in ampx_trainer_error(). */
typedef int (*ampx_record_fn)(void *user, const ampx_step_record *r);
AMPX_API ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record,
                                      void *user);
AMPX_API ampx_status ampx_trainer_evaluate(ampx_trainer *t, ampx_eval_result *out);
AMPX_API int64_t ampx_trainer_step(const ampx_trainer *t);
AMPX_API const char *ampx_trainer_error(const ampx_trainer *t);
/* The scalars block as the device holds it now (waits for the device). */
AMPX_API ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out);
/* Bytes of activation/gradient memory: planned peak, and the sum without reuse. */
AMPX_API void ampx_trainer_memory(const ampx_trainer *t, uint64_t *peak_bytes,
                                  uint64_t *unplanned_bytes);

/* Checkpoints in the safetensors format: parameters, working copies, optimizer state, the
 * scalars block and the step. Written to a temporary file created beside path (O_EXCL),
 * fsynced and renamed; a save whose weights are not finite fails and leaves path as it was.
 * Loading validates the whole file (layout, metadata, scalars, every value) before anything
 * reaches the device. */
AMPX_API ampx_status ampx_trainer_save(ampx_trainer *t, const char *path, char *err,
                                       size_t err_cap);
AMPX_API ampx_status ampx_trainer_load(ampx_trainer *t, const char *path, char *err,
                                       size_t err_cap);
/* Whether a checkpoint can be written at path (its folder exists and takes a new file, path
 * is not a folder): checked before training so a bad path is found before the run. */
AMPX_API ampx_status ampx_checkpoint_check_path(const char *path, char *err, size_t err_cap);

// ---------------------------------------------------------------------------------------
// Introspection, for tests and tools.

/* Trainable tensors: parameters in a fixed order ("fc1.weight", "fc1.bias", ...). */
AMPX_API int ampx_trainer_n_params(const ampx_trainer *t);
AMPX_API const char *ampx_trainer_param_name(const ampx_trainer *t, int i);
AMPX_API uint64_t ampx_trainer_param_size(const ampx_trainer *t, int i);
/* what: 0 = master weights, 1 = gradient (f32, as accumulated), 2 and 3 = optimizer state
 * (AdamW m and v; SGD momentum as 2). Copies f32 values to or from host memory. */
AMPX_API ampx_status ampx_trainer_get(ampx_trainer *t, int i, int what, float *host);
AMPX_API ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host);
/* Forward and backward of one micro-batch (training rows first..first+batch) with the loss
 * scale as it stands, leaving the scaled gradients in place: no unscale, no optimizer.
 * *loss gets the batch loss. */
AMPX_API ampx_status ampx_trainer_gradients(ampx_trainer *t, int64_t first, double *loss);
/* Makes gradient tensor `param` hold a non-finite value after the backward of step `step`
 * (1-based): a fault injection for testing that overflows are skipped. */
AMPX_API void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int param);

#ifdef __cplusplus
}
#endif
#endif
