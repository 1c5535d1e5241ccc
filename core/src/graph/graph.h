/* graph.h — the IR: N-D tensor values with a dtype and a role, and nodes that are ops with
 * attributes. The model builder fills it, the policy pass sets dtypes and inserts cast
 * nodes, autodiff appends backward nodes to the same list, the planner places the values and
 * the executor runs the nodes in order. Nothing here knows about any of those stages; each
 * op kind's rule (shape, forward, backward) lives in the op-family files of this folder. */
#ifndef AMPX_GRAPH_H
#define AMPX_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"

#define G_MAX_DIMS 4 /* dims of a value, the implied batch dimension included */
#define G_MAX_IN 5
#define G_MAX_OUT 4
#define G_NAME_MAX 96
#define G_MAX_VALUES 8192
#define G_MAX_NODES 8192
#define G_MAX_INPUTS 16

typedef enum g_role {
    ROLE_INPUT,      /* a named model input, one slice of each example */
    ROLE_PARAM,      /* a trainable parameter (f32 master) or its working copy */
    ROLE_ACTIVATION, /* produced by a forward node, per micro-batch */
    ROLE_GRADIENT,   /* produced by a backward node; parameter gradients persist */
    ROLE_STATE,      /* non-trainable state that persists: batch-norm running statistics */
    ROLE_CONST,      /* a constant filled once at creation (the ones vector of reductions) */
} g_role;

typedef enum g_init {
    INIT_GLOROT_UNIFORM,
    INIT_HE_UNIFORM,
    INIT_HE_NORMAL,
    INIT_NORMAL,
    INIT_ZEROS,
    INIT_ONES,
} g_init;

/* Why a node runs in its dtype: the policy's decision, printed in words by `ampx policy`. */
typedef enum g_why {
    WHY_NONE,
    WHY_OVERRIDE,      /* a per-layer override (name glob) */
    WHY_CLASS_COMPUTE, /* its op class is in compute_ops */
    WHY_CLASS_F32,     /* its op class is in f32_ops */
    WHY_OUTPUT,        /* the output layer: the policy's output dtype */
    WHY_COMPUTE,       /* a GEMM-class op: the compute dtype */
    WHY_F32_OP,        /* norms, softmax, reductions, losses run in f32 */
    WHY_EMBED,         /* an embedding gathers rows of its f32 table */
    WHY_FOLLOWS,       /* follows its input */
    WHY_WIDER,         /* the wider of its inputs */
    WHY_CAST,          /* a cast inserted by the policy */
    WHY_BACKWARD,      /* a backward node: the dtypes of the forward node it differentiates */
    WHY_WRITES_READER, /* runs in f32 and writes its output in the dtype of its one reader */
    WHY_RECOMPUTE,     /* a forward node run again in the backward, just before its output
                          is read (train.recompute) */
    WHY_COPY,          /* a weight's working copy cast from its master on use
                          (train.weight_copies) */
    WHY_FP8,           /* a product of weights with fp8 operands (policy.fp8) */
} g_why;

typedef struct g_value {
    char name[G_NAME_MAX];
    g_role role;
    ampx_dtype dtype;
    int ndim;                 /* dims[0] is the batch when batched (its value is 0: runtime) */
    int64_t dims[G_MAX_DIMS]; /* row-major */
    int batched;              /* the leading dimension is the micro-batch */
    int view_of;              /* -1, or the value whose storage this one shares (reshape) */
    int producer;             /* node id, -1 for inputs, parameters, state and constants */
    int grad;                 /* autodiff: the value holding this one's gradient, -1 if none */
    int requires_grad;        /* a parameter, or computed from one */
    /* parameters and state */
    int master;     /* working copy: the f32 master it is a copy of; else -1 */
    int copy;       /* master: its working copy, -1 if none */
    g_init init;    /* initializer */
    float init_std; /* INIT_NORMAL */
    int64_t fan_in, fan_out;
    int decay;        /* weight decay applies (weights, not biases or norm parameters) */
    float const_fill; /* ROLE_CONST */
    int line, col;    /* where the model file declared what made it */
    int fp8_slot;     /* an e4m3 or e5m2 value: its slot of the fp8 scaling state; else -1 */
} g_value;

/* Node attributes: one struct for all kinds, each kind reads the fields it documents. */
typedef struct g_attrs {
    int act;             /* ampx_act */
    float eps, momentum; /* norms */
    float alpha;         /* scale; reduce mean factor */
    float rate;          /* dropout */
    int causal;          /* softmax */
    int log;             /* softmax: log-softmax */
    int axis;            /* reduce, batchnorm: the axis (batch included: 1 = first of an example) */
    int mode;            /* reduce: ampx_reduce_mode */
    int ignore_index;    /* cross-entropy */
    int accumulate;      /* backward into a parameter gradient another node wrote first */
    int64_t shape[G_MAX_DIMS]; /* reshape: the target shape of one example */
    int shape_ndim;
    int trans_a, trans_b; /* matmul (trans_b: y = x W^T, a tied head), bmm */
    int heads, parts;     /* split/merge heads: H heads of P fused parts */
    /* dense (passes/fuse.c): the fused layer's activation (1 + ampx_act, 0 none) and whether
     * its weight gradient's GEMM also sums the bias gradient; matmul_dw with a bias gradient:
     * that gradient adds to what is there (a shared bias) */
    int epi_act, fuse_bias_grad, accumulate_bias;
    /* im2col, col2im, pool, pool_bwd (conv.c): the window over [C, H, W] images; pool_avg 1:
     * average (count_pad: the padding counts in the divisor), 0: max */
    int kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, pool_avg, count_pad;
    int groups; /* matmul: G column groups of x and of W (a grouped convolution); 0 or 1: none */
    int conv;   /* matmul: a convolution's product (the policy's class "conv") */
    int64_t at; /* slice: the first index taken along `axis` */
    /* matmul_fp8: the first of its three fp8 slots (x, W, then dy in the backward);
     * quantize: its slot */
    int fp8_slot;
    int fp8_grad; /* matmul_fp8: the ampx_dtype its output's gradient is quantized to */
} g_attrs;

typedef enum g_phase { PHASE_FORWARD, PHASE_BACKWARD } g_phase;

typedef struct g_node {
    int op;                 /* g_op */
    int in[G_MAX_IN], n_in; /* value ids; -1 for an absent optional input */
    int out[G_MAX_OUT], n_out;
    g_attrs a;
    char name[G_NAME_MAX]; /* the model node it belongs to ("fc1", "fc1.relu") */
    g_phase phase;
    int of;           /* backward: the forward node it differentiates; else -1 */
    ampx_dtype dtype; /* the dtype it computes in (its first output's) */
    g_why why;
    int line, col;
} g_node;

typedef struct g_graph {
    int n_values, n_nodes;
    g_value *values; /* G_MAX_VALUES */
    g_node *nodes;   /* G_MAX_NODES, in execution order */
    int n_forward;   /* nodes [0, n_forward) are the forward pass */
    int loss;        /* the loss value (f32 scalar), -1 before the builder sets it */
    int logits;      /* what the loss reads: predictions (argmax for accuracy) */
    int labels;      /* the loss's target value (i32 labels or f32 targets) */
    int loss_node;   /* the node computing the loss */
    int inputs[G_MAX_INPUTS], n_inputs; /* the model's inputs in declaration order */
    int64_t classes; /* classes of the labels input (softmax cross-entropy), else 0 */
    int n_fp8;       /* slots of the fp8 scaling state (passes/fp8.c) */
} g_graph;

int g_init_graph(g_graph *g);
void g_free_graph(g_graph *g);
/* Copies src into dst (both must be initialized). */
void g_copy_graph(g_graph *dst, const g_graph *src);

/* Adds a value and returns its id, or -1 when the graph is full. dims include the batch
 * (pass 0 for it) when batched. */
int g_add_value(g_graph *g, const char *name, g_role role, ampx_dtype dtype, int batched, int ndim,
                const int64_t *dims);
/* Adds a value shaped like `like`. */
int g_add_value_like(g_graph *g, const char *name, g_role role, ampx_dtype dtype, int like);
/* Appends a node; returns its id, or -1 when full. */
int g_add_node(g_graph *g, int op, const int *in, int n_in, const int *out, int n_out,
               const g_attrs *a, const char *name);

/* Elements of one example (batched) or of the whole value. */
int64_t g_elems(const g_value *v);
/* Elements at `rows` rows of the batch (or the whole value when not batched). */
uint64_t g_numel(const g_value *v, uint64_t rows);
/* Elements in the last dimension (1 for a value with no axis but the batch). */
int64_t g_last(const g_value *v);
/* "[B, 28, 28]" */
void g_shape_str(const g_value *v, char *buf, size_t cap);
int g_same_shape(const g_value *a, const g_value *b);
/* Gives value dst the shape of value src. */
void g_set_shape_like(g_graph *g, int dst, int src);
/* Follows view_of to the value that owns the storage. */
int g_root(const g_graph *g, int v);

// ---------------------------------------------------------------------------------------
// Helpers for the backward rules: autodiff's bookkeeping lives on the values.

/* The gradient of value v, or -1 when nothing downstream contributed one. */
int g_grad_of(const g_graph *g, int v);
/* A fresh gradient value shaped like v (dtype as given). */
int g_new_grad(g_graph *g, int v, ampx_dtype dtype);
/* Adds contrib to v's gradient: the first contribution becomes it; later ones are summed
 * in f32 by an add node. Returns 0, or -1 when the graph is full. */
int g_contribute(g_graph *g, int v, int contrib, int of);
/* Appends a backward node for forward node `of`. */
int g_emit(g_graph *g, int of, int op, const int *in, int n_in, const int *out, int n_out,
           const g_attrs *a);
/* Whether value v needs a gradient (a parameter, or computed from one). */
int g_needs_grad(const g_graph *g, int v);
/* A parameter's persistent f32 gradient; *accumulate is set when an earlier backward node
 * of this graph already wrote it (a shared parameter). */
int g_param_grad(g_graph *g, int param, int *accumulate);

#endif
