/* settings.h — what a model file says besides its graph: precision policy, loss scaler,
 * optimizer, data source and training settings, each parsed and validated with positions. */
#ifndef AMPX_CONFIG_SETTINGS_H
#define AMPX_CONFIG_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"
#include "ampx/train.h"
#include "config/schema.h"

#define NAME_MAX_LEN 64
#define MAX_OVERRIDES 32

/* Op classes the policy assigns dtypes to (torch.autocast's lists, by class). */
typedef enum op_class {
    CLASS_DENSE,
    CLASS_ACTIVATION,
    CLASS_LAYERNORM,
    CLASS_ADD,
    CLASS_LOSS,
    CLASS_BATCHNORM,
    CLASS_SOFTMAX,
    CLASS_MUL,
    CLASS_REDUCE,
    CLASS_DROPOUT,
    CLASS_COUNT,
} op_class;
extern const char *const op_class_names[]; /* by op_class, NULL-terminated */

#define CLASS_DEFAULT (-1)
#define CLASS_COMPUTE (-2)

typedef struct policy {
    ampx_dtype params, compute, output;
    int class_dtype[CLASS_COUNT]; /* CLASS_DEFAULT, CLASS_COMPUTE, or an ampx_dtype */
    int n_overrides;
    struct {
        char glob[NAME_MAX_LEN];
        ampx_dtype dtype;
    } overrides[MAX_OVERRIDES];
    char spelled[96]; /* how it was given: preset or "custom" */
} policy;

typedef struct scaler_config {
    int mode; /* ampx_scaler_mode */
    float init_scale, min_scale, max_scale;
    double growth_factor, backoff_factor; /* as written: PyTorch multiplies the f32 scale by
                                             a double factor (SCALER_UPDATE's args) */
    int32_t growth_interval, hysteresis, consecutive_hysteresis, on_min_scale_error;
    int32_t max_consecutive_skips;
    int given; /* the user wrote a scaler */
} scaler_config;

typedef enum opt_kind { OPT_SGD, OPT_ADAMW } opt_kind;

typedef struct optimizer_config {
    opt_kind kind;
    float lr, weight_decay, beta1, beta2, eps, momentum, dampening, clip_grad_norm;
    int nesterov, stochastic_rounding;
    int schedule;                      /* ampx_lr_schedule */
    int32_t warmup_steps, decay_steps; /* decay_steps 0: the model file's train.steps */
    int32_t file_steps;                /* train.steps as the model file gives it */
    float min_lr;
} optimizer_config;

typedef enum data_source { DATA_EMBEDDED, DATA_MNIST, DATA_CSV } data_source;

typedef struct data_config {
    data_source source;
    /* embedded spirals */
    int64_t samples;
    double noise, test_fraction, turns;
    /* files (resolved against the model file's folder) */
    char *train_images, *train_labels, *test_images, *test_labels; /* mnist */
    char *train_csv, *test_csv;                                    /* csv */
    int64_t label_column;                                          /* csv: -1 = the last column */
    int header;                                                    /* csv: -1 auto, 0 no, 1 yes */
} data_config;

/* Everything but the graph. */
typedef struct settings {
    char *file; /* the model file's path, for messages and relative data paths */
    char name[NAME_MAX_LEN];
    policy pol;
    scaler_config scaler;
    optimizer_config opt;
    data_config data;
    ampx_train_config train;
} settings;

void settings_defaults(settings *m);
void settings_free(settings *m);

int policy_parse(jctx *c, const json_value *v, policy *p);
int scaler_parse(jctx *c, const json_value *v, scaler_config *s);
void policy_defaults(policy *p, const char *preset);
void scaler_defaults(scaler_config *s, ampx_dtype compute);
int optimizer_parse(jctx *c, settings *m, const json_value *v);
int data_parse(jctx *c, settings *m, const json_value *v);
int train_parse(jctx *c, settings *m, const json_value *v);

#endif
