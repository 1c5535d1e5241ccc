/* builder.c — lowers the model file into the IR. A user node ("fc1", a dense layer with a
 * relu) becomes primitive nodes (matmul "fc1", bias "fc1", act "fc1.relu") whose output values
 * carry the names a later node refers to; parameters are values of role PARAM named
 * "fc1.weight", "fc1.bias", ...; "share" makes a node use an earlier node's parameters (one
 * gradient for both uses). Shapes are inferred by each op's rule as nodes are added, and a
 * mismatch is reported at the input that does not fit. */
#include "graph/builder.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops.h"

#define B_MAX_NAMES 1024

enum {
    K_DENSE,
    K_RELU,
    K_GELU,
    K_TANH,
    K_SIGMOID,
    K_SILU,
    K_LAYERNORM,
    K_BATCHNORM,
    K_ADD,
    K_MUL,
    K_SCALE,
    K_SOFTMAX,
    K_RESHAPE,
    K_TRANSPOSE,
    K_MEAN,
    K_SUM,
    K_DROPOUT,
    K_EMBEDDING,
    K_POSITION,
    K_ATTENTION,
};
static const char *const kinds[]      = {"dense",
                                         "relu",
                                         "gelu",
                                         "tanh",
                                         "sigmoid",
                                         "silu",
                                         "layernorm",
                                         "batchnorm",
                                         "add",
                                         "mul",
                                         "scale",
                                         "softmax",
                                         "reshape",
                                         "transpose",
                                         "mean",
                                         "sum",
                                         "dropout",
                                         "embedding",
                                         "position_embedding",
                                         "attention",
                                         NULL};
static const char *const act_names[]  = {"relu", "gelu", "tanh", "sigmoid", "silu", NULL};
static const char *const init_names[] = {"glorot_uniform", "he_uniform", "he_normal", "normal",
                                         "zeros",          "ones",       NULL};

/* Keys each kind accepts besides name, op/type and inputs. */
static const char *const *kind_keys(int k) {
    static const char *const dense[] = {"units", "bias", "activation", "init", "share", NULL};
    static const char *const ln[]    = {"eps", "init", "share", NULL};
    static const char *const bn[]    = {"eps", "momentum", "axis", "init", "share", NULL};
    static const char *const scale[] = {"factor", NULL};
    static const char *const sm[]    = {"causal", "scale", "log", NULL};
    static const char *const rs[]    = {"shape", NULL};
    static const char *const red[]   = {"axis", NULL};
    static const char *const drop[]  = {"rate", NULL};
    static const char *const emb[]   = {"vocab", "dim", "init", NULL};
    static const char *const pos[]   = {"init", NULL};
    static const char *const attn[]  = {"heads", "causal", "dropout", "bias", "init", NULL};
    static const char *const none[]  = {NULL};
    switch (k) {
    case K_DENSE: return dense;
    case K_LAYERNORM: return ln;
    case K_BATCHNORM: return bn;
    case K_SCALE: return scale;
    case K_SOFTMAX: return sm;
    case K_RESHAPE: return rs;
    case K_MEAN:
    case K_SUM: return red;
    case K_DROPOUT: return drop;
    case K_EMBEDDING: return emb;
    case K_POSITION: return pos;
    case K_ATTENTION: return attn;
    default: return none;
    }
}

/* A name a later node can refer to: a model input or a user node's output. */
typedef struct b_name {
    char name[G_NAME_MAX];
    int value, kind, line;
    int params[4], n_params; /* the node's parameters, for "share" */
} b_name;

typedef struct builder {
    jctx *c;
    g_graph *g;
    b_name names[B_MAX_NAMES];
    int n_names;
    int last; /* the last value a layer produced: the next layer's input */
} builder;

static int find_name(const builder *b, const char *name) {
    for (int i = 0; i < b->n_names; i++)
        if (!strcmp(b->names[i].name, name)) return i;
    return -1;
}

static b_name *add_name(builder *b, const json_value *at, const char *name, int value, int kind) {
    if (b->n_names >= B_MAX_NAMES) {
        jerr(b->c, at, "too many nodes (at most %d)", B_MAX_NAMES);
        return NULL;
    }
    if (strlen(name) == 0 || strlen(name) >= 64) {
        jerr(b->c, at, "a name must have 1 to 63 characters");
        return NULL;
    }
    int prev = find_name(b, name);
    if (prev >= 0) {
        jerr(b->c, at, "name \"%s\" is already used (line %d)", name, b->names[prev].line);
        return NULL;
    }
    b_name *n = &b->names[b->n_names++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->value = value;
    n->kind  = kind;
    n->line  = at->line;
    return n;
}

static int full(builder *b, const json_value *at) {
    return jerr(b->c, at, "the graph is too large (at most %d values and %d nodes)", G_MAX_VALUES,
                G_MAX_NODES);
}

/* Resolves an input reference by name, with a did-you-mean over the names defined so far. */
static int resolve(builder *b, const json_value *v, int *out) {
    if (v->type != JSON_STRING)
        return jerr(b->c, v, "expected a node or input name, found %s", json_type_name(v->type));
    int i = find_name(b, v->str);
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
// Values and nodes

/* An activation value named `name` whose shape the node's rule sets. */
static int new_act(builder *b, const json_value *at, const char *name, ampx_dtype d) {
    int v = g_add_value(b->g, name, ROLE_ACTIVATION, d, 1, 0, NULL);
    if (v < 0) return full(b, at);
    b->g->values[v].line = at->line;
    b->g->values[v].col  = at->col;
    return v;
}

/* Adds a forward node and infers its outputs' shapes; a mismatch is reported at the input
 * that does not fit (iv: the "inputs" array, NULL for a layer's implied input). */
static int node(builder *b, const json_value *at, const json_value *iv, int op, const int *in,
                int n_in, const int *out, int n_out, const g_attrs *a, const char *name) {
    int id = g_add_node(b->g, op, in, n_in, out, n_out, a, name);
    if (id < 0) return full(b, at);
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

static int param(builder *b, const json_value *at, const char *owner, const char *suffix,
                 g_role role, int ndim, const int64_t *dims, g_init init, float std, int64_t fan_in,
                 int64_t fan_out, int decay) {
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.%.12s", owner, suffix);
    int v = g_add_value(b->g, name, role, AMPX_F32, 0, ndim, dims);
    if (v < 0) return full(b, at);
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

/* "init": {"weight": ..., "bias": ..., "std": ...} */
static int parse_init(builder *b, const json_value *obj, g_init *w, g_init *bias, float *std) {
    const json_value *v = json_get(obj, "init");
    if (!v) return 0;
    static const char *const keys[] = {"weight", "bias", "std", NULL};
    if (jkeys(b->c, v, keys)) return -1;
    int wi = (int)*w, bi = (int)*bias;
    if (jenum(b->c, v, "weight", 0, init_names, &wi) || jenum(b->c, v, "bias", 0, init_names, &bi))
        return -1;
    double s = 0.02;
    if (jnum(b->c, v, "std", 0, 0.0, 1e6, &s)) return -1;
    *w = (g_init)wi, *bias = (g_init)bi, *std = (float)s;
    return 0;
}

/* "share": "other" — the parameters of an earlier node of the same kind. */
static int shared(builder *b, const json_value *v, int kind, const b_name **out) {
    const json_value *s = json_get(v, "share");
    *out                = NULL;
    if (!s) return 0;
    if (s->type != JSON_STRING) return jerr(b->c, s, "expected the name of an earlier node");
    int i = find_name(b, s->str);
    /* a dense node may share an embedding's table: the output head tied to it */
    int tied = kind == K_DENSE && i >= 0 && b->names[i].kind == K_EMBEDDING;
    if (i < 0 || b->names[i].n_params == 0 || (b->names[i].kind != kind && !tied))
        return jerr(b->c, s, "\"%s\" is not an earlier %s node with parameters%s", s->str,
                    kinds[kind], kind == K_DENSE ? " or an embedding" : "");
    *out = &b->names[i];
    return 0;
}

/* An example axis from the file (0-based, negative from the end) to the IR's (batch = 0). */
static int axis_of(builder *b, const json_value *obj, int x, int dflt, int *out) {
    int64_t a = dflt;
    int ex    = b->g->values[x].ndim - 1;
    if (jint(b->c, obj, "axis", 0, -ex, ex - 1, &a)) return -1;
    *out = (int)(a < 0 ? a + ex : a) + 1;
    return 0;
}

// ---------------------------------------------------------------------------------------
// attention: causal multi-head self-attention over x [T, D], a composite of primitive
// nodes (GPT-2's and llm.c's layout):
//   qkv = x Wqkv + bqkv [T, 3D];  q, k, v = split into H heads [H, T, D/H]
//   scores = q k^T [H, T, T];  probs = softmax(scores / sqrt(D/H), causal)  (f32)
//   context = probs v [H, T, D/H];  merged [T, D];  y = merged Wo + bo

/* An activation named "<name>.<part>". */
static int part_act(builder *b, const json_value *at, const char *name, const char *part) {
    char pn[G_NAME_MAX];
    snprintf(pn, sizeof pn, "%s.%s", name, part);
    return new_act(b, at, pn, AMPX_F32);
}

/* matmul (+ bias) of x with new parameters "<name>.<part>.weight" [in, units]. */
static int projection(builder *b, const json_value *at, const json_value *iv, const char *name,
                      const char *part, int x, int64_t units, int bias, float std, int *params,
                      int *n_params, int *out) {
    char pn[G_NAME_MAX], mm[G_NAME_MAX + 8];
    snprintf(pn, sizeof pn, "%.63s.%.16s", name, part);
    snprintf(mm, sizeof mm, "%s.matmul", pn);
    int64_t in = g_last(&b->g->values[x]), wd[2] = {in, units}, bd[1] = {units};
    int w = param(b, at, pn, "weight", ROLE_PARAM, 2, wd, INIT_NORMAL, std, in, units, 1);
    if (w < 0) return -1;
    params[(*n_params)++] = w;
    g_attrs a             = {.alpha = 1};
    int y = new_act(b, at, bias ? mm : pn, AMPX_F32), mi[2] = {x, w};
    if (y < 0 || node(b, at, iv, OP_MATMUL, mi, 2, &y, 1, &a, pn)) return -1;
    *out = y;
    if (!bias) return 0;
    int bv = param(b, at, pn, "bias", ROLE_PARAM, 1, bd, INIT_ZEROS, std, in, units, 0);
    if (bv < 0) return -1;
    params[(*n_params)++] = bv;
    int yb = new_act(b, at, pn, AMPX_F32), bin[2] = {y, bv};
    if (yb < 0 || node(b, at, NULL, OP_BIAS, bin, 2, &yb, 1, &a, pn)) return -1;
    *out = yb;
    return 0;
}

static int attention(builder *b, const json_value *v, const json_value *iv, const json_value *at,
                     const char *name, int x, int *params, int *n_params, int *out) {
    jctx *c       = b->c;
    g_graph *g    = b->g;
    int64_t heads = 0;
    int causal = 1, bias = 1;
    double rate = 0;
    g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
    float std = 0.02f;
    if (jint(c, v, "heads", 1, 1, 1 << 12, &heads) || jbool(c, v, "causal", &causal) ||
        jbool(c, v, "bias", &bias) || jnum(c, v, "dropout", 0, 0.0, 0.999, &rate) ||
        parse_init(b, v, &wi, &bi, &std))
        return -1;
    const g_value *xv = &g->values[x];
    if (xv->ndim != 3)
        return jerr(c, iv ? iv->items[0] : v,
                    "attention reads [positions, features] per example; \"%s\" is not", xv->name);
    int64_t d = xv->dims[2];
    if (d % heads)
        return jerr(c, json_get(v, "heads"), "%lld features do not split into %lld heads",
                    (long long)d, (long long)heads);
    int qkv;
    if (projection(b, at, iv, name, "qkv", x, 3 * d, bias, std, params, n_params, &qkv)) return -1;
    int qkv3[3] = {part_act(b, at, name, "q"), part_act(b, at, name, "k"),
                   part_act(b, at, name, "v")};
    g_attrs ha  = {.alpha = 1, .heads = (int)heads, .parts = 3};
    char nn[G_NAME_MAX];
    snprintf(nn, sizeof nn, "%s.heads", name);
    if (qkv3[0] < 0 || qkv3[1] < 0 || qkv3[2] < 0 ||
        node(b, at, NULL, OP_SPLIT_HEADS, &qkv, 1, qkv3, 3, &ha, nn))
        return -1;
    /* scores = q k^T, the 1/sqrt(D/H) scale applied by the softmax in f32 */
    g_attrs sa = {.alpha = 1, .trans_b = 1};
    int scores = part_act(b, at, name, "scores"), qk[2] = {qkv3[0], qkv3[1]};
    snprintf(nn, sizeof nn, "%s.scores", name);
    if (scores < 0 || node(b, at, NULL, OP_BMM, qk, 2, &scores, 1, &sa, nn)) return -1;
    g_attrs pa = {.alpha = (float)(1.0 / sqrt((double)(d / heads))), .causal = causal};
    int probs  = part_act(b, at, name, "probs");
    snprintf(nn, sizeof nn, "%s.softmax", name);
    if (probs < 0 || node(b, at, NULL, OP_SOFTMAX, &scores, 1, &probs, 1, &pa, nn)) return -1;
    if (rate > 0) {
        g_attrs da  = {.alpha = 1, .rate = (float)rate};
        int dropped = part_act(b, at, name, "probs.dropout");
        snprintf(nn, sizeof nn, "%s.dropout", name);
        if (dropped < 0 || node(b, at, NULL, OP_DROPOUT, &probs, 1, &dropped, 1, &da, nn))
            return -1;
        probs = dropped;
    }
    g_attrs ca = {.alpha = 1};
    int ctx = part_act(b, at, name, "context"), pv[2] = {probs, qkv3[2]};
    snprintf(nn, sizeof nn, "%s.context", name);
    if (ctx < 0 || node(b, at, NULL, OP_BMM, pv, 2, &ctx, 1, &ca, nn)) return -1;
    g_attrs ma = {.alpha = 1, .heads = (int)heads, .parts = 1};
    int merged = part_act(b, at, name, "merged");
    snprintf(nn, sizeof nn, "%s.merge", name);
    if (merged < 0 || node(b, at, NULL, OP_MERGE_HEADS, &ctx, 1, &merged, 1, &ma, nn)) return -1;
    (void)wi, (void)bi;
    return projection(b, at, NULL, name, "proj", merged, d, bias, std, params, n_params, out);
}

// ---------------------------------------------------------------------------------------
// One node of "nodes" (inputs given), or one layer of "layers" (input = the previous)

static int parse_node(builder *b, const json_value *v, int is_layer, int index) {
    jctx *c = b->c;
    if (v->type != JSON_OBJECT)
        return jerr(c, v, "expected an object, found %s", json_type_name(v->type));
    int kind = -1;
    if (jenum(c, v, is_layer ? "type" : "op", 1, kinds, &kind)) return -1;
    const char *allowed[16] = {"name", is_layer ? "type" : "op", "inputs"};
    int na                  = 3;
    for (const char *const *k = kind_keys(kind); *k; k++)
        allowed[na++] = *k;
    allowed[na] = NULL;
    /* a key of another kind gets the old, clearer message */
    for (size_t i = 0; i < v->n_items; i++) {
        const char *key = v->items[i]->key;
        int ok          = 0;
        for (int k = 0; allowed[k]; k++)
            ok |= !strcmp(allowed[k], key);
        for (int k = 0; kinds[k] && !ok; k++)
            for (const char *const *o = kind_keys(k); *o; o++)
                if (!strcmp(*o, key))
                    return jerr(c, v->items[i], "\"%s\" does not apply to %s", key, kinds[kind]);
    }
    if (jkeys(c, v, allowed)) return -1;
    const char *name = NULL;
    char auto_name[64];
    if (jstr(c, v, "name", !is_layer, &name)) return -1;
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "%s%d", kinds[kind], index);
        name = auto_name;
    }
    const json_value *at = json_get(v, "name") ? json_get(v, "name") : v;
    /* inputs */
    int want   = kind == K_ADD || kind == K_MUL ? 2 : 1;
    int ins[2] = {b->last, -1}, n_in = 1;
    const json_value *iv = json_get(v, "inputs");
    if (iv) {
        if (iv->type != JSON_ARRAY) return jerr(c, iv, "expected an array of names");
        n_in = (int)iv->n_items;
        for (int i = 0; i < n_in && i < 2; i++)
            if (resolve(b, iv->items[i], &ins[i])) return -1;
    } else if (!is_layer) {
        return jmissing(c, v, "inputs");
    } else if (b->last < 0) {
        return jerr(c, v, "the first layer has no input");
    }
    if (n_in != want)
        return jerr(c, iv ? iv : v, "\"%s\" takes %d input%s, found %d", kinds[kind], want,
                    want == 1 ? "" : "s", n_in);
    for (int i = 0; i < n_in; i++) {
        int is_i32 = b->g->values[ins[i]].dtype == AMPX_I32;
        if (is_i32 && kind != K_EMBEDDING)
            return jerr(c, iv ? iv->items[i] : v,
                        "\"%s\" holds i32 values; only an embedding or the loss reads it",
                        b->g->values[ins[i]].name);
        if (!is_i32 && kind == K_EMBEDDING)
            return jerr(c, iv ? iv->items[i] : v, "an embedding reads i32 token ids; \"%s\" is f32",
                        b->g->values[ins[i]].name);
    }

    g_graph *g = b->g;
    g_attrs a  = {.alpha = 1};
    int x      = ins[0];
    int64_t in = g_last(&g->values[x]);
    int params[4], n_params = 0, out = -1;
    const b_name *sh = NULL;
    switch (kind) {
    case K_DENSE: {
        int64_t units = 0;
        int bias      = 1;
        g_init wi = INIT_GLOROT_UNIFORM, bi = INIT_ZEROS;
        float std = 0.02f;
        if (shared(b, v, K_DENSE, &sh)) return -1;
        int tied = sh && sh->kind == K_EMBEDDING;
        if (tied) {
            /* logits = x E^T: the embedding's [vocab, dim] table read transposed; no bias
             * unless asked for */
            const g_value *e = &g->values[sh->params[0]];
            units = e->dims[0], bias = 0;
            a.trans_b = 1;
            if (e->dims[1] != in)
                return jerr(c, json_get(v, "share"),
                            "\"%s\" embeds into %lld features; this node's input has %lld",
                            sh->name, (long long)e->dims[1], (long long)in);
        }
        if (jint(c, v, "units", !tied, 1, 1 << 24, &units) || jbool(c, v, "bias", &bias) ||
            parse_init(b, v, &wi, &bi, &std))
            return -1;
        int64_t wd[2] = {in, units}, bd[1] = {units};
        if (tied) {
            if (units != g->values[sh->params[0]].dims[0])
                return jerr(c, json_get(v, "units"), "a head tied to \"%s\" has %lld units",
                            sh->name, (long long)g->values[sh->params[0]].dims[0]);
            params[0] = sh->params[0];
            n_params  = 1;
            if (bias && (params[n_params++] = param(b, at, name, "bias", ROLE_PARAM, 1, bd, bi, std,
                                                    in, units, 0)) < 0)
                return -1;
        } else if (sh) {
            const g_value *w0 = &g->values[sh->params[0]];
            if (w0->dims[0] != in || w0->dims[1] != units || (sh->n_params == 2) != bias)
                return jerr(c, json_get(v, "share"),
                            "\"%s\" has a %lldx%lld weight%s; this node needs %lldx%lld%s",
                            sh->name, (long long)w0->dims[0], (long long)w0->dims[1],
                            sh->n_params == 2 ? " and a bias" : "", (long long)in, (long long)units,
                            bias ? " and a bias" : "");
            memcpy(params, sh->params, sizeof params);
            n_params = sh->n_params;
        } else {
            if ((params[0] =
                     param(b, at, name, "weight", ROLE_PARAM, 2, wd, wi, std, in, units, 1)) < 0)
                return -1;
            n_params = 1;
            if (bias && (params[n_params++] = param(b, at, name, "bias", ROLE_PARAM, 1, bd, bi, std,
                                                    in, units, 0)) < 0)
                return -1;
        }
        char mm[G_NAME_MAX];
        snprintf(mm, sizeof mm, "%s.matmul", name);
        int y     = new_act(b, at, bias ? mm : name, AMPX_F32);
        int mi[2] = {x, params[0]};
        if (y < 0 || node(b, at, iv, OP_MATMUL, mi, 2, &y, 1, &a, name)) return -1;
        out = y;
        if (bias) {
            int yb = new_act(b, at, name, AMPX_F32), bin[2] = {y, params[1]};
            if (yb < 0 || node(b, at, iv, OP_BIAS, bin, 2, &yb, 1, &a, name)) return -1;
            out = yb;
        }
        b_name *nm = add_name(b, at, name, out, kind);
        if (!nm) return -1;
        memcpy(nm->params, params, sizeof params);
        nm->n_params = n_params;
        int act      = -1;
        if (jenum(c, v, "activation", 0, act_names, &act)) return -1;
        if (act >= 0) {
            char an[G_NAME_MAX];
            snprintf(an, sizeof an, "%s.%s", name, act_names[act]);
            const json_value *aat = json_get(v, "activation");
            int ya                = new_act(b, aat, an, AMPX_F32);
            g_attrs aa            = {.act = act, .alpha = 1};
            if (ya < 0 || node(b, aat, NULL, OP_ACT, &out, 1, &ya, 1, &aa, an) ||
                !add_name(b, aat, an, ya, K_RELU + act))
                return -1;
            out = ya;
        }
        b->last = out;
        return 0;
    }
    case K_LAYERNORM:
    case K_BATCHNORM: {
        double eps = 1e-5, mom = 0.1;
        g_init wi = INIT_ONES, bi = INIT_ZEROS;
        float std = 0.02f;
        int axis  = g->values[x].ndim - 1;
        if (jnum(c, v, "eps", 0, 1e-12, 1.0, &eps) || parse_init(b, v, &wi, &bi, &std) ||
            shared(b, v, kind, &sh))
            return -1;
        if (kind == K_BATCHNORM &&
            (jnum(c, v, "momentum", 0, 0.0, 1.0, &mom) || axis_of(b, v, x, -1, &axis)))
            return -1;
        int64_t ch[1] = {g->values[x].dims[axis]};
        a.eps = (float)eps, a.momentum = (float)mom, a.axis = axis;
        if (sh) {
            if (g->values[sh->params[0]].dims[0] != ch[0])
                return jerr(c, json_get(v, "share"),
                            "\"%s\" normalizes %lld features, this node %lld", sh->name,
                            (long long)g->values[sh->params[0]].dims[0], (long long)ch[0]);
            memcpy(params, sh->params, sizeof params);
            n_params = sh->n_params;
        } else {
            if ((params[0] = param(b, at, name, "gamma", ROLE_PARAM, 1, ch, wi, std, ch[0], ch[0],
                                   0)) < 0 ||
                (params[1] =
                     param(b, at, name, "beta", ROLE_PARAM, 1, ch, bi, std, ch[0], ch[0], 0)) < 0)
                return -1;
            n_params = 2;
            if (kind == K_BATCHNORM) {
                if ((params[2] = param(b, at, name, "running_mean", ROLE_STATE, 1, ch, INIT_ZEROS,
                                       0, 1, 1, 0)) < 0 ||
                    (params[3] = param(b, at, name, "running_var", ROLE_STATE, 1, ch, INIT_ONES, 0,
                                       1, 1, 0)) < 0)
                    return -1;
                n_params = 4;
            }
        }
        char sn[2][G_NAME_MAX];
        snprintf(sn[0], sizeof sn[0], "%s.mean", name);
        snprintf(sn[1], sizeof sn[1], "%s.rstd", name);
        int outs[3] = {new_act(b, at, name, AMPX_F32), new_act(b, at, sn[0], AMPX_F32),
                       new_act(b, at, sn[1], AMPX_F32)};
        int nin[5]  = {x, params[0], params[1], params[2], params[3]};
        if (outs[0] < 0 || outs[1] < 0 || outs[2] < 0 ||
            node(b, at, iv, kind == K_LAYERNORM ? OP_LAYERNORM : OP_BATCHNORM, nin,
                 kind == K_LAYERNORM ? 3 : 5, outs, 3, &a, name))
            return -1;
        out = outs[0];
        break;
    }
    case K_RELU:
    case K_GELU:
    case K_TANH:
    case K_SIGMOID:
    case K_SILU:
        a.act = kind - K_RELU;
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_ACT, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    case K_ADD:
    case K_MUL:
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, kind == K_ADD ? OP_ADD : OP_MUL, ins, 2, &out, 1, &a, name))
            return -1;
        break;
    case K_SCALE: {
        double f = 1;
        if (jnum(c, v, "factor", 1, -1e30, 1e30, &f)) return -1;
        a.alpha = (float)f;
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_SCALE, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_SOFTMAX: {
        double s = 1;
        if (jbool(c, v, "causal", &a.causal) || jbool(c, v, "log", &a.log) ||
            jnum(c, v, "scale", 0, -1e30, 1e30, &s))
            return -1;
        a.alpha = (float)s;
        if (a.causal) {
            const g_value *xv = &g->values[x];
            if (xv->ndim < 3 || xv->dims[xv->ndim - 1] < xv->dims[xv->ndim - 2])
                return jerr(c, json_get(v, "causal"),
                            "a causal softmax needs scores [.., queries, keys] with keys >= "
                            "queries");
        }
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_SOFTMAX, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_RESHAPE: {
        const json_value *s = json_get(v, "shape");
        if (!s) return jmissing(c, v, "shape");
        if (s->type != JSON_ARRAY || s->n_items < 1 || s->n_items > G_MAX_DIMS - 1)
            return jerr(c, s, "expected the shape of one example: 1 to %d sizes", G_MAX_DIMS - 1);
        a.shape_ndim = (int)s->n_items;
        for (size_t i = 0; i < s->n_items; i++) {
            const json_value *d = s->items[i];
            if (d->type != JSON_NUMBER || d->num != floor(d->num) || (d->num < 1 && d->num != -1) ||
                d->num > (1 << 30))
                return jerr(c, d, "expected a positive size or -1");
            a.shape[i] = (int64_t)d->num;
        }
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_RESHAPE, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_TRANSPOSE:
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_TRANSPOSE, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    case K_MEAN:
    case K_SUM: {
        if (g->values[x].ndim < 2) return jerr(c, v, "\"%s\" has no axis to reduce", name);
        if (axis_of(b, v, x, -1, &a.axis)) return -1;
        a.mode = kind == K_MEAN ? AMPX_REDUCE_MEAN : AMPX_REDUCE_SUM;
        char on[G_NAME_MAX];
        snprintf(on, sizeof on, "%s.ones", name);
        int64_t len[1] = {g->values[x].dims[a.axis]};
        int ones       = g_add_value(g, on, ROLE_CONST, AMPX_F32, 0, 1, len);
        if (ones < 0) return full(b, at);
        g->values[ones].const_fill = 1.0f;
        int rin[2]                 = {x, ones};
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_REDUCE, rin, 2, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_DROPOUT: {
        double r = 0.1;
        if (jnum(c, v, "rate", 0, 0.0, 0.999, &r)) return -1;
        a.rate = (float)r;
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_DROPOUT, ins, 1, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_EMBEDDING: {
        int64_t vocab = 0, dim = 0;
        g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
        float std = 0.02f;
        if (jint(c, v, "vocab", 1, 1, 1 << 24, &vocab) || jint(c, v, "dim", 1, 1, 1 << 20, &dim) ||
            parse_init(b, v, &wi, &bi, &std))
            return -1;
        if (g->classes && g->values[x].role == ROLE_INPUT && vocab < g->classes)
            return jerr(c, json_get(v, "vocab"), "vocab %lld is smaller than the %lld classes",
                        (long long)vocab, (long long)g->classes);
        int64_t wd[2] = {vocab, dim};
        if ((params[0] = param(b, at, name, "weight", ROLE_PARAM, 2, wd, wi, std, vocab, dim, 1)) <
            0)
            return -1;
        n_params  = 1;
        int ei[2] = {x, params[0]};
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_EMBED, ei, 2, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_POSITION: {
        /* a learned [T, D] table added to every example (GPT-2's wpe, Flax's AddPositionEmbs) */
        g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
        float std = 0.02f;
        if (parse_init(b, v, &wi, &bi, &std)) return -1;
        const g_value *xv = &g->values[x];
        if (xv->ndim != 3)
            return jerr(c, iv ? iv->items[0] : v,
                        "a position embedding reads [positions, features] per example");
        int64_t pd[2] = {xv->dims[1], xv->dims[2]};
        if ((params[0] =
                 param(b, at, name, "weight", ROLE_PARAM, 2, pd, wi, std, pd[0], pd[1], 1)) < 0)
            return -1;
        n_params  = 1;
        int pi[2] = {x, params[0]};
        if ((out = new_act(b, at, name, AMPX_F32)) < 0 ||
            node(b, at, iv, OP_BIAS, pi, 2, &out, 1, &a, name))
            return -1;
        break;
    }
    case K_ATTENTION:
        if (attention(b, v, iv, at, name, x, params, &n_params, &out)) return -1;
        break;
    }
    b_name *nm = add_name(b, at, name, out, kind);
    if (!nm) return -1;
    memcpy(nm->params, params, sizeof params);
    nm->n_params = n_params;
    b->last      = out;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Inputs and the loss

static int parse_inputs(builder *b, const json_value *v) {
    jctx *c = b->c;
    if (v->type != JSON_OBJECT) return jerr(c, v, "expected an object of named inputs");
    if (v->n_items == 0) return jerr(c, v, "no inputs declared");
    if (v->n_items > G_MAX_INPUTS) return jerr(c, v, "at most %d inputs", G_MAX_INPUTS);
    for (size_t i = 0; i < v->n_items; i++) {
        const json_value *in            = v->items[i];
        static const char *const keys[] = {"dtype", "shape", "classes", NULL};
        if (jkeys(c, in, keys)) return -1;
        const char *dt = NULL;
        if (jstr(c, in, "dtype", 1, &dt)) return -1;
        ampx_dtype d;
        int is_i32 = !strcmp(dt, "i32") || !strcmp(dt, "int32");
        if (!is_i32 && parse_dtype(dt, &d))
            return jerr(c, json_get(in, "dtype"), "unknown dtype \"%s\" (expected f32 or i32)", dt);
        if (!is_i32 && d != AMPX_F32)
            return jerr(c, json_get(in, "dtype"), "inputs are read as f32 (the policy casts them)");
        if (!is_i32 && json_get(in, "classes"))
            return jerr(c, json_get(in, "classes"), "\"classes\" applies to an i32 labels input");
        int64_t dims[G_MAX_DIMS] = {0};
        int ndim                 = 1;
        const json_value *sh     = json_get(in, "shape");
        if (!sh && !is_i32) return jmissing(c, in, "shape");
        if (sh) {
            if (sh->type != JSON_ARRAY || sh->n_items > G_MAX_DIMS - 1 ||
                (!is_i32 && sh->n_items == 0))
                return jerr(c, sh, "expected the shape of one example: %s to %d sizes",
                            is_i32 ? "0" : "1", G_MAX_DIMS - 1);
            for (size_t k = 0; k < sh->n_items; k++) {
                const json_value *f = sh->items[k];
                if (f->type != JSON_NUMBER || f->num != floor(f->num) || f->num < 1 ||
                    f->num > (1 << 24))
                    return jerr(c, f, "expected a positive integer");
                dims[ndim++] = (int64_t)f->num;
            }
        }
        int val =
            g_add_value(b->g, in->key, ROLE_INPUT, is_i32 ? AMPX_I32 : AMPX_F32, 1, ndim, dims);
        if (val < 0) return full(b, in);
        b->g->values[val].line = in->line;
        b->g->values[val].col  = in->col;
        if (g_elems(&b->g->values[val]) > (1 << 24))
            return jerr(c, sh, "an example of more than 2^24 elements");
        if (is_i32) {
            int64_t classes = 0;
            if (jint(c, in, "classes", 0, 2, 1 << 24, &classes)) return -1;
            if (classes) b->g->classes = classes;
        }
        b->g->inputs[b->g->n_inputs++] = val;
        if (!add_name(b, in, in->key, val, -1)) return -1;
        if (b->last < 0 && !is_i32) b->last = val;
    }
    /* a token model starts from its i32 ids (an embedding reads them) */
    for (int i = 0; i < b->g->n_inputs && b->last < 0; i++)
        if (!json_get(v->items[i], "classes")) b->last = b->g->inputs[i];
    if (b->last < 0) return jerr(c, v, "no feature or token input declared");
    return 0;
}

/* The one input of dtype d among the inputs, or -1 (-2 when there are several). */
static int only_input(const g_graph *g, ampx_dtype d, int except) {
    int found = -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].dtype == d && g->inputs[i] != except)
            found = found == -1 ? g->inputs[i] : -2;
    return found;
}

static int parse_loss(builder *b, const json_value *v) {
    jctx *c                          = b->c;
    static const char *const keys[]  = {"type",        "logits",  "labels", "ignore_index",
                                        "predictions", "targets", NULL};
    static const char *const types[] = {"softmax_cross_entropy", "mse", NULL};
    if (jkeys(c, v, keys)) return -1;
    int type = 0;
    if (jenum(c, v, "type", 0, types, &type)) return -1;
    g_graph *g     = b->g;
    const char *pk = type == 0 ? "logits" : "predictions", *tk = type == 0 ? "labels" : "targets";
    const char *bad = type == 0 ? "predictions" : "logits";
    if (json_get(v, bad)) return jerr(c, json_get(v, bad), "\"%s\" applies to the other loss", bad);
    bad = type == 0 ? "targets" : "labels";
    if (json_get(v, bad)) return jerr(c, json_get(v, bad), "\"%s\" applies to the other loss", bad);
    if (type == 1 && json_get(v, "ignore_index"))
        return jerr(c, json_get(v, "ignore_index"), "\"ignore_index\" applies to cross-entropy");
    int pred = b->last;
    if (json_get(v, pk) && resolve(b, json_get(v, pk), &pred)) return -1;
    int target           = only_input(g, type == 0 ? AMPX_I32 : AMPX_F32, b->last);
    const json_value *tv = json_get(v, tk);
    if (tv) {
        if (tv->type != JSON_STRING) return jerr(c, tv, "expected the name of an input");
        int i = find_name(b, tv->str);
        if (i < 0 || b->names[i].kind != -1)
            return jerr(c, tv, "\"%s\" is not an input of the model", tv->str);
        target = b->names[i].value;
        if (g->values[target].dtype != (type == 0 ? AMPX_I32 : AMPX_F32))
            return jerr(c, tv, "\"%s\" is %s; %s are %s", tv->str,
                        ampx_dtype_name(g->values[target].dtype), tk, type == 0 ? "i32" : "f32");
    } else if (target < 0) {
        return jerr(c, v,
                    type == 0 ? "no i32 labels input declared (\"dtype\": \"i32\", \"classes\": N)"
                              : "name the f32 input holding the \"targets\"");
    }
    const g_value *pv = &g->values[pred], *lv = &g->values[target];
    const json_value *at = json_get(v, pk) ? json_get(v, pk) : v;
    if (type == 0) {
        int64_t ig = -100;
        if (jint(c, v, "ignore_index", 0, INT32_MIN, INT32_MAX, &ig)) return -1;
        if (!g->classes) return jerr(c, v, "the labels input \"%s\" needs \"classes\"", lv->name);
        if (g_last(pv) != g->classes && pv->ndim == 2)
            return jerr(c, at,
                        "shape mismatch: logits \"%s\" has %lld features (line %d) but labels "
                        "\"%s\" has %lld classes (line %d)",
                        pv->name, (long long)g_last(pv), pv->line, lv->name, (long long)g->classes,
                        lv->line);
        if (g_last(pv) != g->classes)
            return jerr(c, at,
                        "logits \"%s\" have %lld classes on the last axis, labels \"%s\" %lld",
                        pv->name, (long long)g_last(pv), lv->name, (long long)g->classes);
        g_attrs a  = {.ignore_index = (int)ig, .alpha = 1};
        int loss   = g_add_value(g, "loss", ROLE_ACTIVATION, AMPX_F32, 0, 1, (int64_t[]){1});
        int dl     = loss < 0 ? -1 : g_new_grad(g, pred, AMPX_F32);
        int ins[2] = {pred, target}, outs[2] = {loss, dl};
        if (dl < 0) return full(b, v);
        if (node(b, v, NULL, OP_XENT, ins, 2, outs, 2, &a, "loss")) return -1;
        g->loss = loss;
    } else {
        g_attrs a = {.alpha = 1};
        int loss  = g_add_value(g, "loss", ROLE_ACTIVATION, AMPX_F32, 0, 1, (int64_t[]){1});
        int dp    = loss < 0 ? -1 : g_new_grad(g, pred, AMPX_F32);
        int diff  = dp < 0 ? -1 : g_add_value_like(g, "loss.diff", ROLE_ACTIVATION, AMPX_F32, pred);
        int ins[2] = {pred, target}, outs[3] = {loss, dp, diff};
        if (diff < 0) return full(b, v);
        if (node(b, v, NULL, OP_MSE, ins, 2, outs, 3, &a, "loss")) return -1;
        g->loss = loss;
    }
    g->loss_node = g->n_nodes - 1;
    g->logits    = pred;
    g->labels    = target;
    return 0;
}

int g_build(jctx *c, const json_value *root, g_graph *g) {
    builder *b = calloc(1, sizeof *b);
    if (!b) return jerr(c, root, "out of memory");
    b->c                     = c;
    b->g                     = g;
    b->last                  = -1;
    int rc                   = -1;
    const json_value *inputs = json_get(root, "inputs");
    const json_value *layers = json_get(root, "layers"), *nodes = json_get(root, "nodes");
    const json_value *list = layers ? layers : nodes, *loss = json_get(root, "loss");
    json_value empty = {.type = JSON_OBJECT, .line = root->line, .col = root->col};
    if (!inputs) {
        jmissing(c, root, "inputs");
        goto done;
    }
    if (parse_inputs(b, inputs)) goto done;
    if (layers && nodes) {
        jerr(c, nodes, "give \"layers\" or \"nodes\", not both");
        goto done;
    }
    if (!list) {
        jerr(c, root, "missing \"layers\" (a sequential model) or \"nodes\" (a graph)");
        goto done;
    }
    if (list->type != JSON_ARRAY || list->n_items == 0) {
        jerr(c, list, "expected a non-empty array");
        goto done;
    }
    for (size_t i = 0; i < list->n_items; i++)
        if (parse_node(b, list->items[i], layers != NULL, g->n_inputs + (int)i)) goto done;
    rc = parse_loss(b, loss ? loss : &empty);
done:
    free(b);
    return rc;
}
