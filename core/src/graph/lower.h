/* lower.h — what the model builder (builder.c) lowers a model file with: its state (the graph
 * being built and the names a later node may refer to) and the calls that add values, nodes
 * and parameters to the IR, each positioned at the JSON value it comes from so that an error
 * points there. Private to graph/. */
#ifndef AMPX_GRAPH_LOWER_H
#define AMPX_GRAPH_LOWER_H

#include "config/schema.h"
#include "graph/graph.h"

#define B_MAX_NAMES 1024

/* A name a later node can refer to: a model input or a user node's output (after its
 * activation, if any); "NAME.<activation>" is an alias of a dense node's output. */
typedef struct b_name {
    char name[G_NAME_MAX];
    int value, kind, line;   /* kind: the layer kind, -1 for a model input */
    int alias;               /* 1: another name for an earlier name's value */
    const json_value *at;    /* where it is defined (errors about the node point there) */
    int params[4], n_params; /* the node's parameters, for "share" */
} b_name;

typedef struct builder {
    jctx *c;
    g_graph *g;
    b_name names[B_MAX_NAMES];
    int n_names;
    int last;     /* the last value a layer produced: the next layer's input */
    uint64_t ops; /* the backend's ops (bit i: op i): fused or composite layers */
} builder;

/* The node being parsed: what parse_node read for it, and what its kind's parse adds. */
typedef struct b_node {
    const json_value *v;  /* the node's object */
    const json_value *iv; /* its "inputs" array, NULL for a layer's implied input */
    const json_value *at; /* where its errors point: its "name", else the object */
    const char *name;
    const char *kind_name;
    int kind;
    int ins[G_MAX_IN], n_ins;     /* the input values */
    int params[4], n_params, out; /* its parameters (for "share") and its output value */
} b_node;

/* The activations a layer names ("activation": "relu"), in ampx_act order, NULL-terminated. */
extern const char *const b_act_names[];

/* The index of the name in b->names, or -1. */
int b_find_name(const builder *b, const char *name);
/* Defines a name (1 to 63 characters, not used before); NULL with the error in b->c. */
b_name *b_add_name(builder *b, const json_value *at, const char *name, int value, int kind);
/* Resolves an input reference by name, with a did-you-mean over the names defined so far. */
int b_resolve(builder *b, const json_value *v, int *out);
/* The error for a graph out of values or nodes; returns -1. */
int b_full(builder *b, const json_value *at);

/* An activation value named `name` whose shape the node's rule sets. */
int b_new_act(builder *b, const json_value *at, const char *name, ampx_dtype d);
/* Adds a forward node and infers its outputs' shapes; a mismatch is reported at the input
 * that does not fit (iv: the "inputs" array, NULL for a layer's implied input). */
int b_add_node(builder *b, const json_value *at, const json_value *iv, int op, const int *in,
               int n_in, const int *out, int n_out, const g_attrs *a, const char *name);
/* A parameter (or state) value "<owner>.<suffix>" and how it is initialized. */
int b_param(builder *b, const json_value *at, const char *owner, const char *suffix, g_role role,
            int ndim, const int64_t *dims, g_init init, float std, int64_t fan_in, int64_t fan_out,
            int decay);

/* "init": {"weight": ..., "bias": ..., "std": ...} over the defaults in *w, *bias. */
int b_parse_init(builder *b, const json_value *obj, g_init *w, g_init *bias, float *std);
/* The same over an init object itself ({"weight", "bias", "std", "residual_layers"}). */
int b_parse_init_obj(builder *b, const json_value *v, g_init *w, g_init *bias, float *std);
/* "axis": an example axis from the file (0-based, negative from the end) to the IR's
 * (batch = 0) for value x. */
int b_axis_of(builder *b, const json_value *obj, int x, int dflt, int *out);

/* The node's one primitive node: op over ins, its output value named for the node. */
int b_one_node(builder *b, b_node *n, int op, const int *ins, int n_in, const g_attrs *a);

/* build_conv.c: the image layers; each reads its keys and adds its parameters and nodes. */
int b_parse_conv2d(builder *b, b_node *n);
int b_parse_maxpool2d(builder *b, b_node *n);
int b_parse_avgpool2d(builder *b, b_node *n);
int b_parse_global_avgpool(builder *b, b_node *n);
int b_parse_flatten(builder *b, b_node *n);
int b_parse_concat(builder *b, b_node *n);

#endif
