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

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "ampx/ampx.h"
#include "ampx/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampx_model ampx_model;
typedef struct ampx_trainer ampx_trainer;

/* Examples from the caller's memory, in place of the model file's "data" (ampx_model_set_data).
 * A row is the model's f32 inputs in declaration order, each its number of values (the
 * features), followed, for a regression model (an mse or mae loss on real-valued targets),
 * by its target values; `row` says how many values that is and must match. y holds one class
 * per row, in [0, classes), for a classifier; NULL for a regression model. Every value must be
 * finite. n_train >= 1 and n_test >= 1 (the held-out evaluation reads the test rows). */
typedef struct ampx_memory_data {
    int64_t n_train, n_test;
    int64_t row; /* f32 values per row */
    const float *x_train, *x_test;
    const int32_t *y_train, *y_test;
} ampx_memory_data;

/* The run settings of a model ("train" in the JSON); the command line may change them
 * between ampx_model_load and ampx_trainer_create. */
typedef struct ampx_train_config {
    int64_t steps;          /* total optimizer steps (applied + skipped) of the run */
    int64_t batch;          /* examples per micro-batch */
    int64_t accumulate;     /* micro-batches per step */
    uint64_t seed;          /* initialization, data generation and shuffling */
    int64_t log_every;      /* steps between host reads of the record ring */
    int64_t monitor_every;  /* gradient-health monitor every N steps ("monitor"); 0: off */
    int64_t eval_every;     /* steps between validation evaluations (0: only at the end) */
    int skip_init;          /* 1: parameters start at zero, not drawn from the seed: the caller
                               overwrites every one (ampx_trainer_init_from, ampx_trainer_load) */
    const char *start_from; /* the checkpoint or weights the caller will load (NULL: none):
                               data-parallel ranks compare its step and a digest of its bytes */
    int zero;               /* 1: ZeRO stage 1 in a data-parallel run: each rank keeps and
                               updates its shard of the optimizer state ("zero") */
    int forensics;          /* 1: overflow forensics armed on every step ("forensics"; the
                               steps the monitor scans are diagnosed in any case) */
} ampx_train_config;

/* Loads MODEL.json; policy_path (optional) is a JSON file whose "policy" and/or "scaler"
 * replace the model's. Errors: one line "FILE:LINE:COL: $.path: message". */
AMPX_API ampx_status ampx_model_load(const char *path, const char *policy_path, ampx_model **out,
                                     char *err, size_t err_cap);
/* The same with `--set PATH=VALUE` overrides applied to the file's JSON before it is read
 * ("optimizer.lr=3e-4", "train.batch=128", "nodes[3].units=64"; VALUE is JSON or a string),
 * validated as the file's own keys; a message about one names the flag. */
AMPX_API ampx_status ampx_model_load_with(const char *path, const char *policy_path,
                                          const char *const *sets, int n_sets, ampx_model **out,
                                          char *err, size_t err_cap);
/* The same for a backend whose ops are backend_ops (bit i: op i, ampx_backend_op_mask): a
 * layer with a fused form lowers to its composite when the backend lacks the fused ops (an
 * attention layer without ATTN_FWD and ATTN_BWD runs as GEMMs, softmax and permutes).
 * AMPX_ALL_OPS (what ampx_model_load assumes) builds the fused forms. */
#define AMPX_ALL_OPS (~(uint64_t)0)
AMPX_API ampx_status ampx_model_load_for(const char *path, const char *policy_path,
                                         const char *const *sets, int n_sets, uint64_t backend_ops,
                                         ampx_model **out, char *err, size_t err_cap);
AMPX_API void ampx_model_free(ampx_model *m);
/* Trains m on the caller's arrays (above) instead of its "data": the pointers are kept, and
 * each trainer created from m copies and checks the rows at its creation (ampx_trainer_create
 * fails with one line naming the first bad value, row and column); they must stay valid while
 * trainers are created from m. Not for token models (AMPX_ERR_UNSUPPORTED); NULL d returns to
 * the model's own data. The rows are not part of a data-parallel job's agreement check: each
 * rank trains on the arrays its own program gives. */
AMPX_API ampx_status ampx_model_set_data(ampx_model *m, const ampx_memory_data *d);
AMPX_API ampx_train_config *ampx_model_train_config(ampx_model *m);
/* A placement rule "GLOB=BACKEND" (--place), after the model and policy files' rules: the
 * nodes whose names match run on that backend of the list. */
AMPX_API ampx_status ampx_model_place(ampx_model *m, const char *rule, char *err, size_t err_cap);
/* The model's name as a terminal may show it: control bytes and '\\' written as \xNN. */
AMPX_API const char *ampx_model_name(const ampx_model *m);
/* The files the model reads (its file, its data files, resolved as the run opens them), at
 * most cap of them into out with their roles in words: the inputs of ampx_check_outputs. */
AMPX_API int ampx_model_inputs(const ampx_model *m, ampx_file_role *out, int cap);

/* Writes the resolved precision plan, one line per call of `line`: every tensor with its
 * dtype and why, every cast inserted, the scaler and the optimizer state dtypes. */
typedef void (*ampx_line_fn)(void *user, const char *line);
AMPX_API void ampx_model_describe(const ampx_model *m, ampx_line_fn line, void *user);
/* The model's products (dense and convolution layers' matmuls, batched products, fused
 * attention) in execution order, each node name once, with the dtype the policy gave it:
 * the names a policy override sets a product's dtype by (`"overrides": {"fc1": "f32"}`).
 * Returns how many there are; names and dtypes get the first cap. The names live as long
 * as m. */
AMPX_API int ampx_model_products(const ampx_model *m, const char **names, ampx_dtype *dtypes,
                                 int cap);

/* What a training step of the model holds on the device, in bytes by dtype (indexed by
 * ampx_dtype), as the planner places it at the model's batch (train.batch) with its
 * train.recompute: the host-side passes alone, no backend. */
typedef struct ampx_memory {
    /* activations and their gradients live at the planned peak, and one micro-batch of the
     * model's inputs */
    uint64_t activations[AMPX_DTYPE_COUNT], activations_total;
    uint64_t arena;  /* the planned arena (>= the live activations: placement) */
    uint64_t inputs; /* one micro-batch of inputs (in activations too) */
    /* f32 masters, parameter gradients and optimizer state, working copies, running
     * statistics and constants */
    uint64_t params[AMPX_DTYPE_COUNT], params_total;
    uint64_t total; /* arena + inputs + params_total */
} ampx_memory;
/* The model under its policy (as_f32 0) or the same model under f32 (1). */
AMPX_API ampx_status ampx_model_memory(const ampx_model *m, int as_f32, ampx_memory *out, char *err,
                                       size_t err_cap);
/* Lines "memory ..." of ampx_model_memory, the policy's figures by dtype against f32's (and
 * what train.recompute recomputes): what `ampx policy` prints after ampx_model_describe and
 * `ampx train` at its start. */
AMPX_API void ampx_model_describe_memory(const ampx_model *m, ampx_line_fn line, void *user);

/* Gradient health of one tensor (the grad_stats op), in unscaled units. */
typedef struct ampx_tensor_health {
    const char *name;      /* "fc1.weight" (a parameter gradient) or a node's output */
    const char *layer;     /* "fc1": the model node it belongs to */
    ampx_dtype compute;    /* the dtype its layer computes in: underflow is judged against it */
    uint64_t n;            /* elements */
    double max_abs;        /* max |g| over finite values */
    double rms;            /* root mean square over finite values */
    double zero_frac;      /* fraction of exact zeros */
    double underflow_frac; /* fraction of non-zero values below the compute dtype's smallest
                              normal as the backward saw them (scaled) */
    int64_t inf, nan;      /* counts; nan is -1 when the backend counts only non-finite (ABI < 1.2):
                              inf then holds the non-finite count */
} ampx_tensor_health;

/* Warning limits of the monitor (docs/OBSERVABILITY.md); ampx_health_defaults fills them. */
typedef struct ampx_health_limits {
    double underflow_frac;   /* warn when a tensor's underflow fraction is above this (0.01) */
    double vanish_max_abs;   /* warn when a tensor's max |g| is below this (1e-12) and not 0... */
    double vanish_zero_frac; /* ...or its zero fraction is at least this (0.999) */
} ampx_health_limits;

AMPX_API void ampx_health_defaults(ampx_health_limits *lim);
/* Warnings in words for one monitored step: underflow (raise the loss scale, or keep the
 * layer in f32), overflow at the minimum loss scale, vanishing gradients. One call of
 * line per warning; returns how many. scale: the loss scale of the step; min_scale: the
 * scaler's floor (0: none). */
AMPX_API int ampx_health_warnings(const ampx_tensor_health *h, int n, const ampx_health_limits *lim,
                                  double scale, double min_scale, ampx_line_fn line, void *user);

/* One training step as the device recorded it. */
/* policy.fp8: one fp8 tensor's scaling state, on the last step of each log interval. */
typedef struct ampx_fp8_record {
    const char *name;   /* the tensor: "fc1.x_q", "fc1.w_q", "fc1.matmul.grad_q" */
    const char *format; /* "e4m3" or "e5m2" */
    float scale;        /* its scale after this step's update */
    float amax;         /* this step's amax (the history's newest row); NaN with a history of 1 */
    /* of the values it quantized since the last record: the fraction whose rounding lay past
     * the format's largest value (saturated), and of the non-zero ones that became zero */
    double saturated, flushed;
} ampx_fp8_record;

typedef struct ampx_step_record {
    int64_t step;         /* 1-based step number */
    double loss;          /* mean loss over the step's micro-batches (unscaled) */
    double grad_norm;     /* global L2 norm of the unscaled gradients (before clipping) */
    float scale;          /* loss scale after this step's update */
    float lr;             /* learning rate the optimizer used last */
    int skipped;          /* 1: non-finite gradients, the step was skipped */
    double time_ms;       /* host time per step, averaged over the log interval */
    const char *overflow; /* skipped steps: the names of the non-finite gradients */
    /* monitored steps (every monitor_every): every parameter gradient's health */
    const ampx_tensor_health *health; /* NULL on steps not monitored */
    int n_health;
    double monitor_scale; /* the loss scale the monitored gradients were computed with */
    /* monitored steps with non-finite values: the first tensor, in the order the step
     * computed them (forward activations, their gradients, parameter gradients), that held
     * one, e.g. "fc2.relu (forward)"; "" when none or not monitored */
    const char *first_nonfinite;
    int64_t applied_steps; /* applied steps of the run so far (resumed runs included) */
    const char *warning;   /* a run-health warning that fired at this step, else "" */
    /* monitored steps with non-finite values: the node that created the first one from
     * finite inputs ("" when an input it does not scan handed it in, or none), and a
     * sentence on it: the op, phase and dtype, its inputs' largest finite magnitudes, the
     * dtype's range, the loss scale a backward node's values carried, and the nodes that
     * passed the value on; "" when none or not monitored */
    const char *created_by;
    const char *overflow_origin;
    /* monitored steps: headroom, the forward activation closest to its dtype's largest
     * value ("" when none scanned): its name, the binary orders of magnitude left between
     * its max |x| and that value (log2(max of dtype / max |x|)), and the fraction of its
     * values below the smallest normal of the dtype its node computes in; and a warning the
     * first time a tensor within
     * 8 binary orders of its dtype's largest value would reach it, its max |x| fitted over
     * its last monitored steps, within 50 monitor intervals, else "" */
    const char *headroom_tensor;
    double headroom_bits;
    double headroom_underflow;
    const char *headroom_warning;
    /* policy.fp8: every fp8 tensor's state on the last step of each log interval (NULL, 0 on
     * other steps and without fp8) */
    const ampx_fp8_record *fp8;
    int n_fp8;
} ampx_step_record;

typedef struct ampx_eval_result {
    double accuracy; /* held-out accuracy in [0, 1]; -1 for a model without classes */
    double loss;     /* held-out mean loss (cross-entropy, or the mse loss) */
    int64_t examples;
    /* regression on real-valued targets (CSV): regression = 1 and the held-out mean squared
     * error, mean absolute error and R^2 (1 - SSE/SST per target column, averaged over the
     * columns, as scikit-learn's r2_score) of the predictions; else regression = 0 */
    int regression;
    double mse, mae, r2;
} ampx_eval_result;

/* Creates the trainer: opens the data, initializes parameters from the seed, plans buffers
 * and allocates them on the backend. The model must outlive the trainer. */
AMPX_API ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out,
                                         char *err, size_t err_cap);
/* The same as one rank of a data-parallel job (d from ampx_dist_init; NULL: one process):
 * ranks with another model, policy, settings or ampx version than rank 0's are refused; the
 * batch is per rank and rank r reads the r-th shard of every global batch; parameters and
 * state are broadcast from rank 0; gradients are averaged in f32 across ranks before
 * unscale-and-check; the loss in the records is the mean over ranks; at every log interval
 * a checksum of the scalars block and of the weights is compared across ranks. Every rank
 * must call the same trainer functions in the same order (they are collective). */
AMPX_API ampx_status ampx_trainer_create_dist(ampx_model *m, ampx_backend *be, ampx_dist *d,
                                              ampx_trainer **out, char *err, size_t err_cap);
/* Data-parallel runs: every rank's parameters, working copies, optimizer state, running
 * statistics, scalars block and step become rank 0's (after rank 0 alone loaded a
 * checkpoint, say). A no-op in one process. */
AMPX_API ampx_status ampx_trainer_sync(ampx_trainer *t);
/* Host milliseconds spent on the gradient all-reduce so far (reads, all-reduces, waits,
 * writes; with NCCL only the enqueueing, the transfers run on the device); 0 in one
 * process. */
AMPX_API double ampx_trainer_comm_ms(const ampx_trainer *t);
/* How gradients are all-reduced: "NCCL", "host memory in place" (MPI on the CPU backend's
 * buffers), "host copy" (read, MPI, write back); "" in one process. */
AMPX_API const char *ampx_trainer_dist_path(const ampx_trainer *t);
/* The gradient arena: its bytes (f32, every parameter's gradient, each padded to 64 bytes)
 * and the all-reduce buckets it is cut into (AMPX_BUCKET_KB each at most, default 1024). */
AMPX_API void ampx_trainer_gradient_layout(const ampx_trainer *t, uint64_t *bytes, int *buckets);
AMPX_API void ampx_trainer_free(ampx_trainer *t);
/* Starts from plain safetensors weights (no ampx metadata, e.g. `ampx export`'s, or a
 * PyTorch state dict saved with safetensors): every parameter by its name, F32, BF16 or F16,
 * of the model's shape (a dense weight [in, out]; with transpose_linear, PyTorch Linear's
 * [out, in]); a tensor the model does not have, a missing one or a non-finite value is
 * refused. The optimizer state and the step stay those of a fresh run. */
AMPX_API ampx_status ampx_trainer_init_from(ampx_trainer *t, const char *path, int transpose_linear,
                                            char *err, size_t err_cap);
/* Writes the trainer's parameters as an llm.c GPT-2 checkpoint (train_gpt2.c reads it): version
 * 3 (f32) or 5 (bf16), the vocabulary padded to a multiple of 128 with zero rows, projection
 * weights as llm.c's [out, in]. A model that is not llm.c's GPT-2 (docs/LANGUAGE_MODELS.md) is
 * refused naming the parameter that differs. ampx_trainer_init_from reads such a file (told by
 * its magic), every header field checked against the model. */
AMPX_API ampx_status ampx_trainer_export_llmc(ampx_trainer *t, const char *path, ampx_dtype dtype,
                                              char *err, size_t err_cap);
/* Writes the weights of checkpoint ckpt (parameters and running statistics, no optimizer
 * state) to a plain safetensors file in f32, bf16 or f16, which the safetensors reference
 * reader and PyTorch load. */
AMPX_API ampx_status ampx_checkpoint_export(const char *ckpt, const char *path, ampx_dtype dtype,
                                            char *err, size_t err_cap);
/* A trainer for sampling from a token model: no data is read (load a checkpoint, then call
 * ampx_trainer_logits). */
AMPX_API ampx_status ampx_trainer_create_sampler(ampx_model *m, ampx_backend *be,
                                                 ampx_trainer **out, char *err, size_t err_cap);
/* Token models: the forward pass (eval mode: no dropout) over `rows` windows of
 * ampx_trainer_window() token ids (rows <= the batch), writing logits [rows][window][vocab] as
 * f32. Position t's logits depend on ids [0, t] only in a causal model. */
AMPX_API ampx_status ampx_trainer_logits(ampx_trainer *t, const int32_t *ids, int64_t rows,
                                         float *logits);
/* The f32 logits (ampx_trainer_vocab() of them) of the last position of the window ids[0,
 * len), len <= ampx_trainer_window(): what ampx_trainer_logits gives at position len - 1,
 * computed for the positions past those whose ids match the window of the last call alone
 * (a KV cache: sampling that appends one token computes one position). The whole forward
 * runs when none match, or always when ampx_trainer_cache() says no. Any other run of the
 * trainer (a step, an evaluation) empties the cache. */
AMPX_API ampx_status ampx_trainer_logits_last(ampx_trainer *t, const int32_t *ids, int64_t len,
                                              float *logits);
/* 1 when ampx_trainer_logits_last computes only new positions for this model; else 0 and
 * *why (when why is not NULL) says why in a phrase (the trainer owns it). */
AMPX_API int ampx_trainer_cache(ampx_trainer *t, const char **why);
/* A trainer for predictions of a feature model: no data is read (load a checkpoint, then call
 * ampx_trainer_predict). */
AMPX_API ampx_status ampx_trainer_create_predictor(ampx_model *m, ampx_backend *be,
                                                   ampx_trainer **out, char *err, size_t err_cap);
/* Feature models: the forward pass (eval mode) over `rows` examples (rows <= the batch) of
 * ampx_trainer_features() f32 values each (the f32 inputs' slices in declaration order),
 * writing ampx_trainer_outputs() values per row: a classifier's softmax probabilities, or an
 * mse model's predictions. */
AMPX_API ampx_status ampx_trainer_predict(ampx_trainer *t, const float *x, int64_t rows,
                                          float *out);
AMPX_API int64_t ampx_trainer_features(const ampx_trainer *t);
AMPX_API int64_t ampx_trainer_outputs(const ampx_trainer *t);
/* 1 for a classifier (softmax cross-entropy over i32 labels), 0 for an mse model. */
AMPX_API int ampx_trainer_classifier(const ampx_trainer *t);
/* Real-valued targets per example of a regression on CSV data (the mse loss's target input;
 * its columns follow the features in the data rows), 0 for any other model. */
AMPX_API int64_t ampx_trainer_targets(const ampx_trainer *t);
/* Positions per window and the vocabulary of a token model; 0 otherwise. */
AMPX_API int64_t ampx_trainer_window(const ampx_trainer *t);
AMPX_API int64_t ampx_trainer_vocab(const ampx_trainer *t);
/* Bytes of text per token of a token model's validation data: 1 for byte-level text, the
 * data's "bytes_per_token" for token files (0 when not given, and for other models), so that
 * losses per byte compare across tokenizers. */
AMPX_API double ampx_trainer_bytes_per_token(const ampx_trainer *t);

/* Runs steps until the step count reaches `until` (total, as in --steps). record() is called
 * for every step when the host reads the ring; a non-zero return stops the run. A scaler
 * stop condition (on_min_scale = error, max_consecutive_skips) or a run-health stop (no
 * step applied, a non-finite or diverging loss, weights made non-finite by an update; see
 * docs/OBSERVABILITY.md) ends it with AMPX_ERR_INVALID and the diagnosis in
 * ampx_trainer_error(). Run, evaluate, save and load called while another thread is inside
 * one of them on the same trainer return AMPX_ERR_BUSY at once (docs/C_API.md, "Threading");
 * the record callback's own thread may call them. */
typedef int (*ampx_record_fn)(void *user, const ampx_step_record *r);
AMPX_API ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record,
                                      void *user);
/* A source of training batches (ampx_trainer_set_batches): writes the `rows` rows of
 * micro-batch `micro` into x (rows x ampx_trainer_row_values values, each row laid out as an
 * ampx_memory_data row: the inputs, then a regression model's targets) and, when the model's
 * labels are classes (a classifier, or an mse model on their one-hot codes), their classes
 * into y (NULL for real-valued targets). micro counts the micro-batches of the
 * trainer from 0 (step s has micro-batches s x accumulate ...; a resumed run continues the
 * count), so a source that derives its rows from micro makes a resumed run the straight one.
 * In a data-parallel job every rank is asked for the same micro and gives its own rows.
 * Returns 0, or non-zero to stop the run. Called on the thread of ampx_trainer_run. */
typedef int (*ampx_batch_fn)(void *user, int64_t micro, int64_t rows, float *x, int32_t *y);
/* Trains on the batches of fn instead of the data's shuffled training rows; the held-out
 * evaluation still reads the data's (or ampx_model_set_data's) test rows. NULL fn returns to
 * the data's rows. Each batch is checked as in-memory rows are: a non-finite value or a class
 * out of range stops the run with AMPX_ERR_INVALID and a message naming the micro-batch, row
 * and column, as does a source that returns non-zero. Not for token models
 * (AMPX_ERR_UNSUPPORTED). */
AMPX_API ampx_status ampx_trainer_set_batches(ampx_trainer *t, ampx_batch_fn fn, void *user);
/* f32 values per row of a batch source (or an in-memory data row). */
AMPX_API int64_t ampx_trainer_row_values(const ampx_trainer *t);
AMPX_API ampx_status ampx_trainer_evaluate(ampx_trainer *t, ampx_eval_result *out);
AMPX_API int64_t ampx_trainer_step(const ampx_trainer *t);
AMPX_API const char *ampx_trainer_error(const ampx_trainer *t);
/* The scalars block as the device holds it now (waits for the device). */
AMPX_API ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out);
/* The run-health verdict on the steps this trainer ran so far (docs/OBSERVABILITY.md, "Run
 * health"), for the end of a run: 1 with a one-line warning in buf when more than 10% of
 * them were skipped for non-finite gradients or the loss scale ends at the scaler's
 * min_scale after skipping; 0 and "" when neither; -1 when the scalars cannot be read
 * (ampx_trainer_error says why). */
AMPX_API int ampx_trainer_health_end(ampx_trainer *t, char *buf, size_t cap);
/* Where t's nodes run on an ordered backend list (ampx_backend_open "a,b"): full 0 gives
 * one summary line ("placement: 41 nodes on example, 23 on cpu (layernorm, ...); 3.1 MiB
 * copied per step; home ...", nothing on one backend); full 1 a line per node with its
 * backend, the bytes copied in before it and why it runs there (each earlier backend's
 * refusal: "example has no layernorm_bwd"), then the copies' total; full 2 what placement
 * "measured" timed and chose, once it has (nothing before, or under another mode). */
AMPX_API void ampx_trainer_placement(const ampx_trainer *t, int full, ampx_line_fn line,
                                     void *user);
/* Bytes the placement's copies moved so far (0 on one backend), and (seconds, optional) the
 * host time they took, each copy's wait for the work before it included. */
AMPX_API uint64_t ampx_trainer_copies(const ampx_trainer *t, double *seconds);
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
/* What the last successful ampx_trainer_load changed beyond restoring the state, in one
 * line for the user, or "": a checkpoint written under another precision policy has working
 * copies of other dtypes (or none); they are re-derived from its f32 master weights (round to
 * nearest even, what the optimizer writes after each applied step). */
AMPX_API const char *ampx_trainer_notice(const ampx_trainer *t);
/* The checkpoint keeper's state (ampx train's --keep rotation and best checkpoint), saved in
 * every checkpoint's __metadata__ ("keeper_*") so a resumed run continues it: the best
 * validation loss so far and its step, and the steps of the periodic checkpoints the run (and
 * the runs it resumes) wrote. A load sets loaded to 1 when the checkpoint held the state;
 * one written before it existed leaves the state empty (best +inf) with loaded 0. */
#define AMPX_KEEP_MAX 1001
typedef struct ampx_keeper {
    double best_loss;            /* the best validation loss so far; +inf: none or unknown */
    int64_t best_step;           /* its step; -1: none */
    int n_kept;                  /* periodic checkpoints in kept */
    int64_t kept[AMPX_KEEP_MAX]; /* their steps, oldest first */
    int loaded;                  /* the last load found this state in its checkpoint */
} ampx_keeper;
/* The trainer's keeper state: what the next ampx_trainer_save writes, what a load read. */
AMPX_API ampx_keeper *ampx_trainer_keeper(ampx_trainer *t);
/* Stops ampx_trainer_run after the step in progress once *flag is non-zero (a signal handler
 * sets it): the run returns AMPX_OK before its target step, with the records flushed. NULL:
 * never. */
AMPX_API void ampx_trainer_stop_on(ampx_trainer *t, const volatile sig_atomic_t *flag);
/* Whether a checkpoint can be written at path (its folder exists and takes a new file, path
 * is not a folder): checked before training so a bad path is found before the run. */
AMPX_API ampx_status ampx_checkpoint_check_path(const char *path, char *err, size_t err_cap);

/* Timeline: steps first..last (1-based, inclusive) of the runs that follow are written to path
 * as Chrome trace-event JSON (Perfetto, chrome://tracing). The file is complete after
 * ampx_trainer_trace_close (or ampx_trainer_free, which drops a write error). */
AMPX_API ampx_status ampx_trainer_trace(ampx_trainer *t, const char *path, int64_t first,
                                        int64_t last, char *err, size_t err_cap);
AMPX_API ampx_status ampx_trainer_trace_close(ampx_trainer *t, char *err, size_t err_cap);

// ---------------------------------------------------------------------------------------
// Introspection, for tests and tools.

/* Gradient health of the parameter gradients as they are now (waits for the device): one
 * entry per parameter, in ampx_trainer_param_name order; values as stored (scale 1). */
AMPX_API ampx_status ampx_trainer_grad_health(ampx_trainer *t, ampx_tensor_health *out);

/* Backend ops issued so far through the call layer (every node's and the step's). */
AMPX_API uint64_t ampx_trainer_ops_issued(const ampx_trainer *t);
/* Backend ops the last step issued (the executor's nodes and the step's own ops). */
AMPX_API uint64_t ampx_trainer_last_step_ops(const ampx_trainer *t);

/* Bytes this rank holds for the parameters: f32 masters and working copies (*weights), and
 * the optimizer state (*state: this rank's shard of it under train.zero 1). */
AMPX_API void ampx_trainer_param_bytes(const ampx_trainer *t, uint64_t *weights, uint64_t *state);
/* Under train.zero 1, every rank's shard of the optimizer state to rank 0, where the next
 * ampx_trainer_save on rank 0 writes it from; every rank calls it (a collective) before rank
 * 0 saves. Without ZeRO it does nothing. */
AMPX_API ampx_status ampx_trainer_gather_state(ampx_trainer *t);
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
/* (Fault injection for tests, ampx_trainer_inject_nonfinite*, is declared in the
 * repository's core/internal/ampx/inject.h: libampx exports it, the headers do not.) */

#ifdef __cplusplus
}
#endif
#endif
