/* model.h — a model as read from JSON: graph nodes, precision policy, loss scaler,
 * optimizer, data source and training settings, all validated at load time. */
#ifndef AMPX_MODEL_H
#define AMPX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"
#include "ampx/train.h"
#include "config/json.h"

#define MODEL_NAME_MAX 64
#define MODEL_MAX_NODES 256
#define MODEL_MAX_OVERRIDES 32

typedef enum node_kind {
    NODE_INPUT,     /* the feature input (f32 rows) */
    NODE_LABELS,    /* the i32 label input */
    NODE_DENSE,     /* y = x W + b */
    NODE_ACT,       /* y = f(x) */
    NODE_LAYERNORM, /* per-row layer norm with gamma, beta */
    NODE_ADD,       /* y = a + b (residual) */
    NODE_CAST,      /* inserted by the policy */
    NODE_LOSS,      /* softmax cross-entropy of logits against labels */
} node_kind;

/* Op classes the policy assigns dtypes to (torch.autocast's lists, by class). */
typedef enum op_class {
    CLASS_DENSE,
    CLASS_ACTIVATION,
    CLASS_LAYERNORM,
    CLASS_ADD,
    CLASS_LOSS,
    CLASS_COUNT,
} op_class;

typedef enum init_kind {
    INIT_GLOROT_UNIFORM,
    INIT_HE_UNIFORM,
    INIT_HE_NORMAL,
    INIT_NORMAL,
    INIT_ZEROS,
    INIT_ONES,
} init_kind;

typedef struct node {
    char name[MODEL_NAME_MAX];
    node_kind kind;
    int inputs[2];
    int n_inputs;
    int64_t cols;     /* output features */
    int act;          /* ampx_act for NODE_ACT */
    int bias;         /* dense: has a bias */
    float eps;        /* layernorm */
    init_kind init_w; /* dense weight / layernorm gamma initializer */
    float init_std;   /* INIT_NORMAL */
    init_kind init_b;
    int line, col; /* where the node was declared */
    /* resolved by the policy */
    ampx_dtype dtype; /* output dtype (= compute dtype) */
    int is_output;    /* dense layer whose output feeds the loss */
    const char *why;  /* how its dtype was chosen */
} node;

typedef struct policy {
    ampx_dtype params, compute, output;
    int class_dtype[CLASS_COUNT]; /* -1: default, else an ampx_dtype; -2: the compute dtype */
    int n_overrides;
    struct {
        char glob[MODEL_NAME_MAX];
        ampx_dtype dtype;
    } overrides[MODEL_MAX_OVERRIDES];
    char spelled[96]; /* how it was given: preset or "custom" */
} policy;

typedef struct scaler_config {
    int mode; /* ampx_scaler_mode */
    float init_scale, growth_factor, backoff_factor, min_scale, max_scale;
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

struct ampx_model {
    char *file; /* the model file's path, for messages */
    char name[MODEL_NAME_MAX];
    int n_nodes;
    node nodes[MODEL_MAX_NODES]; /* topological order; casts inserted by the policy */
    int input, labels, logits, loss;
    int64_t classes;
    int ignore_index;
    policy pol;
    scaler_config scaler;
    optimizer_config opt;
    data_config data;
    ampx_train_config train;
};

/* "file:line:col: $.path: message" reporting over one parsed file. */
typedef struct jctx {
    const char *file;
    char *err;
    size_t cap;
    int failed;
} jctx;

int jerr(jctx *c, const json_value *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Every key of obj must be in allowed (NULL-terminated); an unknown key is an error at the
 * key with a did-you-mean. Also checks obj is an object. */
int jkeys(jctx *c, const json_value *obj, const char *const *allowed);
/* Typed getters: absent and !required leaves *out as it is and returns 0. */
int jint(jctx *c, const json_value *obj, const char *key, int required, int64_t lo, int64_t hi,
         int64_t *out);
int jnum(jctx *c, const json_value *obj, const char *key, int required, double lo, double hi,
         double *out);
int jbool(jctx *c, const json_value *obj, const char *key, int *out);
int jstr(jctx *c, const json_value *obj, const char *key, int required, const char **out);
/* A string among choices (NULL-terminated): *out is its index. */
int jenum(jctx *c, const json_value *obj, const char *key, int required, const char *const *choices,
          int *out);
/* The choice nearest to word (edit distance), or NULL if none is close. */
const char *did_you_mean(const char *word, const char *const *choices);

int parse_dtype(const char *s, ampx_dtype *out);
const char *dtype_name(ampx_dtype d);

/* policy.c */
int policy_parse(jctx *c, const json_value *v, policy *p);
int scaler_parse(jctx *c, const json_value *v, scaler_config *s);
void policy_defaults(policy *p, const char *preset);
void scaler_defaults(scaler_config *s, ampx_dtype compute);
/* Resolves every node's dtype and inserts casts; errors go to err. */
int policy_resolve(ampx_model *m, char *err, size_t cap);

#endif
