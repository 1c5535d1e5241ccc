/* lower.c — the model builder's names, and the values, nodes and parameters it adds to the IR,
 * each positioned at the JSON value it comes from (lower.h). */
#include "graph/lower.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/ops.h"

static const char *const init_names[] = {"glorot_uniform", "he_uniform", "he_normal", "normal",
                                         "zeros",          "ones",       NULL};

// ---------------------------------------------------------------------------------------
// Names

int b_find_name(const builder *b, const char *name) {
    for (int i = 0; i < b->n_names; i++)
        if (!strcmp(b->names[i].name, name)) return i;
    return -1;
}

b_name *b_add_name(builder *b, const json_value *at, const char *name, int value, int kind) {
    if (b->n_names >= B_MAX_NAMES) {
        jerr(b->c, at, "too many nodes (at most %d)", B_MAX_NAMES);
        return NULL;
    }
    if (strlen(name) == 0 || strlen(name) >= 64) {
        jerr(b->c, at, "a name must have 1 to 63 characters");
        return NULL;
    }
    int prev = b_find_name(b, name);
    if (prev >= 0) {
        char w[300];
        jerr(b->c, at, "name \"%s\" is already used (%s)", name,
             jwhere(b->c, b->names[prev].line, w, sizeof w));
        return NULL;
    }
    b_name *n = &b->names[b->n_names++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->value = value;
    n->kind  = kind;
    n->line  = at->line;
    n->at    = at;
    return n;
}

int b_full(builder *b, const json_value *at) {
    return jerr(b->c, at, "the graph is too large (at most %d values and %d nodes)", G_MAX_VALUES,
                G_MAX_NODES);
}

int b_resolve(builder *b, const json_value *v, int *out) {
    if (v->type != JSON_STRING)
        return jerr(b->c, v, "expected a node or input name, found %s", json_type_name(v->type));
    int i = b_find_name(b, v->str);
    if (i >= 0) {
        *out = b->names[i].value;
        return 0;
    }
    const char *list[B_MAX_NAMES + 1];
    for (int k = 0; k < b->n_names; k++)
        list[k] = b->names[k].name;
    list[b->n_names] = NULL;
    const char *near = did_you_mean(v->str, list);
    if (near)
        return jerr(b->c, v, "no node or input named \"%s\" before this one (did you mean \"%s\"?)",
                    v->str, near);
    return jerr(b->c, v, "no node or input named \"%s\" before this one", v->str);
}

// ---------------------------------------------------------------------------------------
// Values, nodes and parameters

int b_new_act(builder *b, const json_value *at, const char *name, ampx_dtype d) {
    int v = g_add_value(b->g, name, ROLE_ACTIVATION, d, 1, 0, NULL);
    if (v < 0) return b_full(b, at);
    b->g->values[v].line = at->line;
    b->g->values[v].col  = at->col;
    return v;
}

int b_add_node(builder *b, const json_value *at, const json_value *iv, int op, const int *in,
               int n_in, const int *out, int n_out, const g_attrs *a, const char *name) {
    int id = g_add_node(b->g, op, in, n_in, out, n_out, a, name);
    if (id < 0) return b_full(b, at);
    g_node *n       = &b->g->nodes[id];
    n->line         = at->line;
    n->col          = at->col;
    g_shape_error e = {.input = -1};
    const g_rule *r = g_rule_of(op);
    if (r->shape && r->shape(b->g, n, &e)) {
        const json_value *where = at;
        if (iv && e.input == -2) where = iv;
        if (iv && e.input >= 0 && (size_t)e.input < iv->n_items) where = iv->items[e.input];
        return jerr(b->c, where, "%s", e.msg);
    }
    b->g->n_forward = b->g->n_nodes;
    return 0;
}

int b_param(builder *b, const json_value *at, const char *owner, const char *suffix, g_role role,
            int ndim, const int64_t *dims, g_init init, float std, int64_t fan_in, int64_t fan_out,
            int decay) {
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.%.12s", owner, suffix);
    int v = g_add_value(b->g, name, role, AMPX_F32, 0, ndim, dims);
    if (v < 0) return b_full(b, at);
    g_value *p  = &b->g->values[v];
    p->init     = init;
    p->init_std = std;
    p->fan_in   = fan_in;
    p->fan_out  = fan_out;
    p->decay    = decay;
    p->line     = at->line;
    p->col      = at->col;
    return v;
}

// ---------------------------------------------------------------------------------------
// Keys several layer kinds read

int b_parse_init_obj(builder *b, const json_value *v, g_init *w, g_init *bias, float *std) {
    static const char *const keys[] = {"weight", "bias", "std", "residual_layers", NULL};
    if (jkeys(b->c, v, keys)) return -1;
    int wi = (int)*w, bi = (int)*bias;
    if (jenum(b->c, v, "weight", 0, init_names, &wi) || jenum(b->c, v, "bias", 0, init_names, &bi))
        return -1;
    double s       = 0.02;
    int64_t layers = 0;
    if (jnum(b->c, v, "std", 0, 0.0, 1e6, &s) ||
        jint(b->c, v, "residual_layers", 0, 1, 1 << 16, &layers))
        return -1;
    /* GPT-2's residual scaling: a projection adding into the residual stream of L blocks
     * (two such adds each) starts at std / sqrt(2 L) */
    if (layers) s /= sqrt(2.0 * (double)layers);
    *w = (g_init)wi, *bias = (g_init)bi, *std = (float)s;
    return 0;
}

int b_parse_init(builder *b, const json_value *obj, g_init *w, g_init *bias, float *std) {
    const json_value *v = json_get(obj, "init");
    return v ? b_parse_init_obj(b, v, w, bias, std) : 0;
}

int b_axis_of(builder *b, const json_value *obj, int x, int dflt, int *out) {
    int64_t a = dflt;
    int ex    = b->g->values[x].ndim - 1;
    if (jint(b->c, obj, "axis", 0, -ex, ex - 1, &a)) return -1;
    *out = (int)(a < 0 ? a + ex : a) + 1;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Shared by the layer kinds of builder.c and build_conv.c

const char *const b_act_names[] = {"relu", "gelu", "tanh", "sigmoid", "silu", NULL};

int b_one_node(builder *b, b_node *n, int op, const int *ins, int n_in, const g_attrs *a) {
    if ((n->out = b_new_act(b, n->at, n->name, AMPX_F32)) < 0 ||
        b_add_node(b, n->at, n->iv, op, ins, n_in, &n->out, 1, a, n->name))
        return -1;
    return 0;
}
