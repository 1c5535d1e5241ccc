/* builder.c — lowers the model file into the IR. A user node ("fc1", a dense layer with a
 * relu) becomes primitive nodes (matmul "fc1", bias "fc1", act "fc1.relu") whose output values
 * carry the names a later node refers to; parameters are values of role PARAM named
 * "fc1.weight", "fc1.bias", ...; "share" makes a node use an earlier node's parameters (one
 * gradient for both uses). Shapes are inferred by each op's rule as nodes are added, and a
 * mismatch is reported at the input that does not fit. Each layer kind is one entry of the
 * table layer_kinds (its name, the keys it accepts, its parse function); lower.c holds the
 * names and the positioned values, nodes and parameters they are built from. */
#include "graph/builder.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/lower.h"
#include "graph/ops.h"

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
    K_CONV2D,
    K_MAXPOOL2D,
    K_AVGPOOL2D,
    K_GLOBAL_AVGPOOL,
    K_FLATTEN,
    K_CONCAT,
    K_COUNT
};

/* "share": "other" — the parameters of an earlier node of the same kind. */
static int shared(builder *b, const b_node *n, const b_name **out) {
    const json_value *s = json_get(n->v, "share");
    int kind            = n->kind;
    *out                = NULL;
    if (!s) return 0;
    if (s->type != JSON_STRING) return jerr(b->c, s, "expected the name of an earlier node");
    int i = b_find_name(b, s->str);
    /* a dense node may share an embedding's table: the output head tied to it */
    int tied = kind == K_DENSE && i >= 0 && b->names[i].kind == K_EMBEDDING;
    if (i < 0 || b->names[i].n_params == 0 || (b->names[i].kind != kind && !tied))
        return jerr(b->c, s, "\"%s\" is not an earlier %s node with parameters%s", s->str,
                    n->kind_name, kind == K_DENSE ? " or an embedding" : "");
    *out = &b->names[i];
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
    return b_new_act(b, at, pn, AMPX_F32);
}

/* matmul (+ bias) of x with new parameters "<name>.<part>.weight" [in, units]. */
static int projection(builder *b, const json_value *at, const json_value *iv, const char *name,
                      const char *part, int x, int64_t units, int bias, float std, int *params,
                      int *n_params, int *out) {
    char pn[G_NAME_MAX], mm[G_NAME_MAX + 8];
    snprintf(pn, sizeof pn, "%.63s.%.16s", name, part);
    snprintf(mm, sizeof mm, "%s.matmul", pn);
    int64_t in = g_last(&b->g->values[x]), wd[2] = {in, units}, bd[1] = {units};
    int w = b_param(b, at, pn, "weight", ROLE_PARAM, 2, wd, INIT_NORMAL, std, in, units, 1);
    if (w < 0) return -1;
    params[(*n_params)++] = w;
    g_attrs a             = {.alpha = 1};
    int y = b_new_act(b, at, bias ? mm : pn, AMPX_F32), mi[2] = {x, w};
    if (y < 0 || b_add_node(b, at, iv, OP_MATMUL, mi, 2, &y, 1, &a, pn)) return -1;
    *out = y;
    if (!bias) return 0;
    int bv = b_param(b, at, pn, "bias", ROLE_PARAM, 1, bd, INIT_ZEROS, std, in, units, 0);
    if (bv < 0) return -1;
    params[(*n_params)++] = bv;
    int yb = b_new_act(b, at, pn, AMPX_F32), bin[2] = {y, bv};
    if (yb < 0 || b_add_node(b, at, NULL, OP_BIAS, bin, 2, &yb, 1, &a, pn)) return -1;
    *out = yb;
    return 0;
}

/* The composite: split the fused projection into head-major q, k, v (three PERMUTEs), scores
 * q k^T, softmax (scale, causal) in f32, dropout on the probabilities, context p v, merge the
 * heads back (a PERMUTE). */
static int attention_composite(builder *b, const json_value *at, const char *name, int qkv,
                               int64_t heads, int causal, double rate, int64_t d, int *out) {
    int qkv3[3] = {part_act(b, at, name, "q"), part_act(b, at, name, "k"),
                   part_act(b, at, name, "v")};
    g_attrs ha  = {.alpha = 1, .heads = (int)heads, .parts = 3};
    char nn[G_NAME_MAX];
    snprintf(nn, sizeof nn, "%s.heads", name);
    if (qkv3[0] < 0 || qkv3[1] < 0 || qkv3[2] < 0 ||
        b_add_node(b, at, NULL, OP_SPLIT_HEADS, &qkv, 1, qkv3, 3, &ha, nn))
        return -1;
    /* scores = q k^T, the 1/sqrt(D/H) scale applied by the softmax in f32 */
    g_attrs sa = {.alpha = 1, .trans_b = 1};
    int scores = part_act(b, at, name, "scores"), qk[2] = {qkv3[0], qkv3[1]};
    snprintf(nn, sizeof nn, "%s.scores", name);
    if (scores < 0 || b_add_node(b, at, NULL, OP_BMM, qk, 2, &scores, 1, &sa, nn)) return -1;
    g_attrs pa = {.alpha = (float)(1.0 / sqrt((double)(d / heads))), .causal = causal};
    int probs  = part_act(b, at, name, "probs");
    snprintf(nn, sizeof nn, "%s.softmax", name);
    if (probs < 0 || b_add_node(b, at, NULL, OP_SOFTMAX, &scores, 1, &probs, 1, &pa, nn)) return -1;
    if (rate > 0) {
        g_attrs da  = {.alpha = 1, .rate = (float)rate};
        int dropped = part_act(b, at, name, "probs.dropout");
        snprintf(nn, sizeof nn, "%s.dropout", name);
        if (dropped < 0 || b_add_node(b, at, NULL, OP_DROPOUT, &probs, 1, &dropped, 1, &da, nn))
            return -1;
        probs = dropped;
    }
    g_attrs ca = {.alpha = 1};
    int ctx = part_act(b, at, name, "context"), pv[2] = {probs, qkv3[2]};
    snprintf(nn, sizeof nn, "%s.context", name);
    if (ctx < 0 || b_add_node(b, at, NULL, OP_BMM, pv, 2, &ctx, 1, &ca, nn)) return -1;
    g_attrs ma = {.alpha = 1, .heads = (int)heads, .parts = 1};
    int merged = part_act(b, at, name, "merged");
    snprintf(nn, sizeof nn, "%s.merge", name);
    if (merged < 0 || b_add_node(b, at, NULL, OP_MERGE_HEADS, &ctx, 1, &merged, 1, &ma, nn))
        return -1;
    *out = merged;
    return 0;
}

/* The fused op: one node reads the projection's [B, T, 3D] and writes the context [B, T, D]
 * the output projection reads, and the f32 log-sum-exp of each row for its backward. */
static int attention_fused(builder *b, const json_value *at, const char *name, int qkv,
                           int64_t heads, int causal, double rate, int64_t d, int *out) {
    g_attrs a = {.alpha  = (float)(1.0 / sqrt((double)(d / heads))),
                 .causal = causal,
                 .rate   = (float)rate,
                 .heads  = (int)heads};
    char nn[G_NAME_MAX];
    snprintf(nn, sizeof nn, "%s.attention", name);
    int o[2] = {part_act(b, at, name, "merged"), part_act(b, at, name, "lse")};
    if (o[0] < 0 || o[1] < 0 || b_add_node(b, at, NULL, OP_ATTENTION, &qkv, 1, o, 2, &a, nn))
        return -1;
    *out = o[0];
    return 0;
}

/* attention's "init": one init object for both projections, or {"qkv": {...}, "proj":
 * {...}} each its own (GPT-2: std 0.02 for qkv, 0.02 / sqrt(2 L) for the output projection,
 * "proj": {"std": 0.02, "residual_layers": L}). */
static int attention_init(builder *b, const json_value *v, float *qkv_std, float *proj_std) {
    const json_value *iv = json_get(v, "init");
    g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
    if (!iv || !(json_get(iv, "qkv") || json_get(iv, "proj"))) {
        if (b_parse_init(b, v, &wi, &bi, qkv_std)) return -1;
        *proj_std = *qkv_std;
        return 0;
    }
    static const char *const keys[] = {"qkv", "proj", NULL};
    if (jkeys(b->c, iv, keys)) return -1;
    const json_value *q = json_get(iv, "qkv"), *o = json_get(iv, "proj");
    return (q && b_parse_init_obj(b, q, &wi, &bi, qkv_std)) ||
                   (o && b_parse_init_obj(b, o, &wi, &bi, proj_std))
               ? -1
               : 0;
}

static int parse_attention(builder *b, b_node *n) {
    const json_value *v = n->v, *iv = n->iv, *at = n->at;
    const char *name = n->name;
    int x = n->ins[0], *params = n->params, *n_params = &n->n_params, *out = &n->out;
    jctx *c       = b->c;
    g_graph *g    = b->g;
    int64_t heads = 0;
    int causal = 1, bias = 1, fused = 1;
    double rate = 0;
    g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
    float std = 0.02f, proj_std = 0.02f;
    if (jint(c, v, "heads", 1, 1, 1 << 12, &heads) || jbool(c, v, "causal", &causal) ||
        jbool(c, v, "bias", &bias) || jnum(c, v, "dropout", 0, 0.0, 0.999, &rate) ||
        jbool(c, v, "fused", &fused) || attention_init(b, v, &std, &proj_std))
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
    int merged;
    if (fused && (b->ops >> AMPX_OP_ATTN_FWD & 1) && (b->ops >> AMPX_OP_ATTN_BWD & 1)) {
        if (attention_fused(b, at, name, qkv, heads, causal, rate, d, &merged)) return -1;
    } else if (attention_composite(b, at, name, qkv, heads, causal, rate, d, &merged)) {
        return -1;
    }
    (void)wi, (void)bi;
    return projection(b, at, NULL, name, "proj", merged, d, bias, proj_std, params, n_params, out);
}

// ---------------------------------------------------------------------------------------
// The layer kinds: each reads its own keys and adds its parameters and primitive nodes

/* dense's parameters: its own, an earlier dense node's, or (a dense node sharing an
 * embedding) the embedding's [vocab, dim] table read transposed, logits = x E^T: the output
 * head tied to it, with no bias unless asked for. */
static int dense_params(builder *b, b_node *n, int *bias, int *trans_b) {
    jctx *c             = b->c;
    g_graph *g          = b->g;
    const json_value *v = n->v;
    int64_t in = g_last(&g->values[n->ins[0]]), units = 0;
    g_init wi = INIT_GLOROT_UNIFORM, bi = INIT_ZEROS;
    float std        = 0.02f;
    const b_name *sh = NULL;
    if (shared(b, n, &sh)) return -1;
    int tied             = sh && sh->kind == K_EMBEDDING;
    const g_value *w0    = sh ? &g->values[sh->params[0]] : NULL;
    const json_value *sv = json_get(v, "share");
    if (tied) {
        units = w0->dims[0], *bias = 0;
        *trans_b = 1;
        if (w0->dims[1] != in)
            return jerr(c, sv, "\"%s\" embeds into %lld features; this node's input has %lld",
                        sh->name, (long long)w0->dims[1], (long long)in);
    }
    if (jint(c, v, "units", !tied, 1, 1 << 24, &units) || jbool(c, v, "bias", bias) ||
        b_parse_init(b, v, &wi, &bi, &std))
        return -1;
    int64_t wd[2] = {in, units}, bd[1] = {units};
    if (tied) {
        if (units != w0->dims[0])
            return jerr(c, json_get(v, "units"), "a head tied to \"%s\" has %lld units", sh->name,
                        (long long)w0->dims[0]);
        n->params[0] = sh->params[0];
        n->n_params  = 1;
    } else if (sh) {
        if (w0->dims[0] != in || w0->dims[1] != units || (sh->n_params == 2) != *bias)
            return jerr(c, sv, "\"%s\" has a %lldx%lld weight%s; this node needs %lldx%lld%s",
                        sh->name, (long long)w0->dims[0], (long long)w0->dims[1],
                        sh->n_params == 2 ? " and a bias" : "", (long long)in, (long long)units,
                        *bias ? " and a bias" : "");
        memcpy(n->params, sh->params, sizeof n->params);
        n->n_params = sh->n_params;
        return 0;
    } else {
        n->params[0] =
            b_param(b, n->at, n->name, "weight", ROLE_PARAM, 2, wd, wi, std, in, units, 1);
        if (n->params[0] < 0) return -1;
        n->n_params = 1;
    }
    if (*bias && (n->params[n->n_params++] = b_param(b, n->at, n->name, "bias", ROLE_PARAM, 1, bd,
                                                     bi, std, in, units, 0)) < 0)
        return -1;
    return 0;
}

/* dense: y = x W (+ b); its activation, if any, is added once the name is defined. */
static int parse_dense(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1};
    int bias  = 1;
    if (dense_params(b, n, &bias, &a.trans_b)) return -1;
    char mm[G_NAME_MAX];
    snprintf(mm, sizeof mm, "%s.matmul", n->name);
    int y     = b_new_act(b, n->at, bias ? mm : n->name, AMPX_F32);
    int mi[2] = {n->ins[0], n->params[0]};
    if (y < 0 || b_add_node(b, n->at, n->iv, OP_MATMUL, mi, 2, &y, 1, &a, n->name)) return -1;
    n->out = y;
    if (!bias) return 0;
    int yb = b_new_act(b, n->at, n->name, AMPX_F32), bin[2] = {y, n->params[1]};
    if (yb < 0 || b_add_node(b, n->at, n->iv, OP_BIAS, bin, 2, &yb, 1, &a, n->name)) return -1;
    n->out = yb;
    return 0;
}

/* "activation": a node "<name>.<act>" after the dense one, the layer's output: the name
 * refers to it (as a conv2d's does), and "<name>.<act>" is kept as an alias of it. */
static int dense_activation(builder *b, b_node *n) {
    int act = -1;
    if (jenum(b->c, n->v, "activation", 0, b_act_names, &act)) return -1;
    if (act < 0) return 0;
    char an[G_NAME_MAX];
    snprintf(an, sizeof an, "%s.%s", n->name, b_act_names[act]);
    const json_value *aat = json_get(n->v, "activation");
    int ya                = b_new_act(b, aat, an, AMPX_F32);
    g_attrs aa            = {.act = act, .alpha = 1};
    b_name *alias         = NULL;
    if (ya < 0 || b_add_node(b, aat, NULL, OP_ACT, &n->out, 1, &ya, 1, &aa, an) ||
        !(alias = b_add_name(b, aat, an, ya, K_RELU + act)))
        return -1;
    alias->alias = 1;
    n->out       = ya;
    return 0;
}

/* The new parameters of a norm: gamma and beta, and batchnorm's running statistics. */
static int norm_params(builder *b, b_node *n, const int64_t *ch, g_init wi, g_init bi, float std) {
    if ((n->params[0] = b_param(b, n->at, n->name, "gamma", ROLE_PARAM, 1, ch, wi, std, ch[0],
                                ch[0], 0)) < 0 ||
        (n->params[1] =
             b_param(b, n->at, n->name, "beta", ROLE_PARAM, 1, ch, bi, std, ch[0], ch[0], 0)) < 0)
        return -1;
    n->n_params = 2;
    if (n->kind != K_BATCHNORM) return 0;
    if ((n->params[2] = b_param(b, n->at, n->name, "running_mean", ROLE_STATE, 1, ch, INIT_ZEROS, 0,
                                1, 1, 0)) < 0 ||
        (n->params[3] = b_param(b, n->at, n->name, "running_var", ROLE_STATE, 1, ch, INIT_ONES, 0,
                                1, 1, 0)) < 0)
        return -1;
    n->n_params = 4;
    return 0;
}

/* layernorm and batchnorm: y, and the mean and rstd the backward reads. */
static int parse_norm(builder *b, b_node *n) {
    jctx *c             = b->c;
    g_graph *g          = b->g;
    const json_value *v = n->v;
    int x = n->ins[0], is_bn = n->kind == K_BATCHNORM;
    double eps = 1e-5, mom = 0.1;
    g_init wi = INIT_ONES, bi = INIT_ZEROS;
    float std        = 0.02f;
    int axis         = g->values[x].ndim - 1;
    const b_name *sh = NULL;
    if (jnum(c, v, "eps", 0, 1e-12, 1.0, &eps) || b_parse_init(b, v, &wi, &bi, &std) ||
        shared(b, n, &sh))
        return -1;
    if (is_bn && (jnum(c, v, "momentum", 0, 0.0, 1.0, &mom) || b_axis_of(b, v, x, -1, &axis)))
        return -1;
    int64_t ch[1] = {g->values[x].dims[axis]};
    g_attrs a     = {.alpha = 1, .eps = (float)eps, .momentum = (float)mom, .axis = axis};
    if (sh) {
        if (g->values[sh->params[0]].dims[0] != ch[0])
            return jerr(c, json_get(v, "share"), "\"%s\" normalizes %lld features, this node %lld",
                        sh->name, (long long)g->values[sh->params[0]].dims[0], (long long)ch[0]);
        memcpy(n->params, sh->params, sizeof n->params);
        n->n_params = sh->n_params;
    } else if (norm_params(b, n, ch, wi, bi, std)) {
        return -1;
    }
    char sn[2][G_NAME_MAX];
    snprintf(sn[0], sizeof sn[0], "%s.mean", n->name);
    snprintf(sn[1], sizeof sn[1], "%s.rstd", n->name);
    int outs[3] = {b_new_act(b, n->at, n->name, AMPX_F32), b_new_act(b, n->at, sn[0], AMPX_F32),
                   b_new_act(b, n->at, sn[1], AMPX_F32)};
    int nin[5]  = {x, n->params[0], n->params[1], n->params[2], n->params[3]};
    if (outs[0] < 0 || outs[1] < 0 || outs[2] < 0 ||
        b_add_node(b, n->at, n->iv, is_bn ? OP_BATCHNORM : OP_LAYERNORM, nin, is_bn ? 5 : 3, outs,
                   3, &a, n->name))
        return -1;
    n->out = outs[0];
    return 0;
}

static int parse_act(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1, .act = n->kind - K_RELU};
    return b_one_node(b, n, OP_ACT, n->ins, 1, &a);
}

static int parse_binary(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1};
    return b_one_node(b, n, n->kind == K_ADD ? OP_ADD : OP_MUL, n->ins, 2, &a);
}

static int parse_scale(builder *b, b_node *n) {
    double f = 1;
    if (jnum(b->c, n->v, "factor", 1, -1e30, 1e30, &f)) return -1;
    g_attrs a = {.alpha = (float)f};
    return b_one_node(b, n, OP_SCALE, n->ins, 1, &a);
}

static int parse_softmax(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1};
    double s  = 1;
    if (jbool(b->c, n->v, "causal", &a.causal) || jbool(b->c, n->v, "log", &a.log) ||
        jnum(b->c, n->v, "scale", 0, -1e30, 1e30, &s))
        return -1;
    a.alpha = (float)s;
    if (a.causal) {
        const g_value *xv = &b->g->values[n->ins[0]];
        if (xv->ndim < 3 || xv->dims[xv->ndim - 1] < xv->dims[xv->ndim - 2])
            return jerr(b->c, json_get(n->v, "causal"),
                        "a causal softmax needs scores [.., queries, keys] with keys >= "
                        "queries");
    }
    return b_one_node(b, n, OP_SOFTMAX, n->ins, 1, &a);
}

static int parse_reshape(builder *b, b_node *n) {
    g_attrs a           = {.alpha = 1};
    const json_value *s = json_get(n->v, "shape");
    if (!s) return jmissing(b->c, n->v, "shape");
    if (s->type != JSON_ARRAY || s->n_items < 1 || s->n_items > G_MAX_DIMS - 1)
        return jerr(b->c, s, "expected the shape of one example: 1 to %d sizes", G_MAX_DIMS - 1);
    a.shape_ndim = (int)s->n_items;
    for (size_t i = 0; i < s->n_items; i++) {
        const json_value *d = s->items[i];
        if (d->type != JSON_NUMBER || d->num != floor(d->num) || (d->num < 1 && d->num != -1) ||
            d->num > (1 << 30))
            return jerr(b->c, d, "expected a positive size or -1");
        a.shape[i] = (int64_t)d->num;
    }
    return b_one_node(b, n, OP_RESHAPE, n->ins, 1, &a);
}

static int parse_transpose(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1};
    return b_one_node(b, n, OP_TRANSPOSE, n->ins, 1, &a);
}

/* mean and sum over an axis: a reduce against a constant of ones. */
static int parse_reduce(builder *b, b_node *n) {
    g_graph *g = b->g;
    g_attrs a  = {.alpha = 1};
    int x      = n->ins[0];
    if (g->values[x].ndim < 2) return jerr(b->c, n->v, "\"%s\" has no axis to reduce", n->name);
    if (b_axis_of(b, n->v, x, -1, &a.axis)) return -1;
    a.mode = n->kind == K_MEAN ? AMPX_REDUCE_MEAN : AMPX_REDUCE_SUM;
    char on[G_NAME_MAX];
    snprintf(on, sizeof on, "%s.ones", n->name);
    int64_t len[1] = {g->values[x].dims[a.axis]};
    int ones       = g_add_value(g, on, ROLE_CONST, AMPX_F32, 0, 1, len);
    if (ones < 0) return b_full(b, n->at);
    g->values[ones].const_fill = 1.0f;
    int rin[2]                 = {x, ones};
    return b_one_node(b, n, OP_REDUCE, rin, 2, &a);
}

static int parse_dropout(builder *b, b_node *n) {
    double r = 0.1;
    if (jnum(b->c, n->v, "rate", 0, 0.0, 0.999, &r)) return -1;
    g_attrs a = {.alpha = 1, .rate = (float)r};
    return b_one_node(b, n, OP_DROPOUT, n->ins, 1, &a);
}

static int parse_embedding(builder *b, b_node *n) {
    jctx *c             = b->c;
    g_graph *g          = b->g;
    const json_value *v = n->v;
    int64_t vocab = 0, dim = 0;
    g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
    float std = 0.02f;
    if (jint(c, v, "vocab", 1, 1, 1 << 24, &vocab) || jint(c, v, "dim", 1, 1, 1 << 20, &dim) ||
        b_parse_init(b, v, &wi, &bi, &std))
        return -1;
    if (g->classes && g->values[n->ins[0]].role == ROLE_INPUT && vocab < g->classes)
        return jerr(c, json_get(v, "vocab"), "vocab %lld is smaller than the %lld classes",
                    (long long)vocab, (long long)g->classes);
    int64_t wd[2] = {vocab, dim};
    n->params[0]  = b_param(b, n->at, n->name, "weight", ROLE_PARAM, 2, wd, wi, std, vocab, dim, 1);
    if (n->params[0] < 0) return -1;
    n->n_params = 1;
    g_attrs a   = {.alpha = 1};
    int ei[2]   = {n->ins[0], n->params[0]};
    return b_one_node(b, n, OP_EMBED, ei, 2, &a);
}

/* a learned [T, D] table added to every example (GPT-2's wpe, Flax's AddPositionEmbs); with
 * "max_positions": P, a [P, D] table of which the first T rows are read (GPT-2's 1024) */
static int parse_position(builder *b, b_node *n) {
    g_init wi = INIT_NORMAL, bi = INIT_ZEROS;
    float std    = 0.02f;
    int64_t rows = 0;
    if (b_parse_init(b, n->v, &wi, &bi, &std) ||
        jint(b->c, n->v, "max_positions", 0, 1, 1 << 24, &rows))
        return -1;
    const g_value *xv = &b->g->values[n->ins[0]];
    if (xv->ndim != 3)
        return jerr(b->c, n->iv ? n->iv->items[0] : n->v,
                    "a position embedding reads [positions, features] per example");
    if (rows && rows < xv->dims[1])
        return jerr(b->c, json_get(n->v, "max_positions"),
                    "max_positions %lld is fewer than the %lld positions of \"%s\"",
                    (long long)rows, (long long)xv->dims[1], xv->name);
    int64_t pd[2] = {rows ? rows : xv->dims[1], xv->dims[2]};
    n->params[0] =
        b_param(b, n->at, n->name, "weight", ROLE_PARAM, 2, pd, wi, std, pd[0], pd[1], 1);
    if (n->params[0] < 0) return -1;
    n->n_params = 1;
    g_attrs a   = {.alpha = 1};
    int pi[2]   = {n->ins[0], n->params[0]};
    return b_one_node(b, n, rows ? OP_POSITION : OP_BIAS, pi, 2, &a);
}

/* One entry per layer kind, indexed by K_*. */
typedef struct b_kind {
    const char *name;
    int n_inputs;                        /* the inputs it reads */
    const char *const *keys;             /* keys it accepts besides name, op/type and inputs */
    int (*parse)(builder *b, b_node *n); /* reads its keys, adds its parameters and nodes */
    int (*after)(builder *b, b_node *n); /* (optional) runs once the node's name is defined */
} b_kind;

static const char *const dense_keys[] = {"units", "bias", "activation", "init", "share", NULL};
static const char *const ln_keys[]    = {"eps", "init", "share", NULL};
static const char *const bn_keys[]    = {"eps", "momentum", "axis", "init", "share", NULL};
static const char *const scale_keys[] = {"factor", NULL};
static const char *const sm_keys[]    = {"causal", "scale", "log", NULL};
static const char *const rs_keys[]    = {"shape", NULL};
static const char *const red_keys[]   = {"axis", NULL};
static const char *const drop_keys[]  = {"rate", NULL};
static const char *const emb_keys[]   = {"vocab", "dim", "init", NULL};
static const char *const pos_keys[]   = {"init", "max_positions", NULL};
static const char *const attn_keys[]  = {"heads", "causal", "dropout", "bias",
                                         "init",  "fused",  NULL};
static const char *const conv_keys[]  = {"filters", "kernel",     "stride", "padding", "dilation",
                                         "groups",  "activation", "bias",   "init",    NULL};
static const char *const pool_keys[]  = {"kernel", "stride", "padding", "count_padding", NULL};
static const char *const cat_keys[]   = {"axis", NULL};
static const char *const no_keys[]    = {NULL};

static const b_kind layer_kinds[K_COUNT] = {
    [K_DENSE]          = {"dense", 1, dense_keys, parse_dense, dense_activation},
    [K_RELU]           = {"relu", 1, no_keys, parse_act, NULL},
    [K_GELU]           = {"gelu", 1, no_keys, parse_act, NULL},
    [K_TANH]           = {"tanh", 1, no_keys, parse_act, NULL},
    [K_SIGMOID]        = {"sigmoid", 1, no_keys, parse_act, NULL},
    [K_SILU]           = {"silu", 1, no_keys, parse_act, NULL},
    [K_LAYERNORM]      = {"layernorm", 1, ln_keys, parse_norm, NULL},
    [K_BATCHNORM]      = {"batchnorm", 1, bn_keys, parse_norm, NULL},
    [K_ADD]            = {"add", 2, no_keys, parse_binary, NULL},
    [K_MUL]            = {"mul", 2, no_keys, parse_binary, NULL},
    [K_SCALE]          = {"scale", 1, scale_keys, parse_scale, NULL},
    [K_SOFTMAX]        = {"softmax", 1, sm_keys, parse_softmax, NULL},
    [K_RESHAPE]        = {"reshape", 1, rs_keys, parse_reshape, NULL},
    [K_TRANSPOSE]      = {"transpose", 1, no_keys, parse_transpose, NULL},
    [K_MEAN]           = {"mean", 1, red_keys, parse_reduce, NULL},
    [K_SUM]            = {"sum", 1, red_keys, parse_reduce, NULL},
    [K_DROPOUT]        = {"dropout", 1, drop_keys, parse_dropout, NULL},
    [K_EMBEDDING]      = {"embedding", 1, emb_keys, parse_embedding, NULL},
    [K_POSITION]       = {"position_embedding", 1, pos_keys, parse_position, NULL},
    [K_ATTENTION]      = {"attention", 1, attn_keys, parse_attention, NULL},
    [K_CONV2D]         = {"conv2d", 1, conv_keys, b_parse_conv2d, NULL},
    [K_MAXPOOL2D]      = {"maxpool2d", 1, pool_keys, b_parse_maxpool2d, NULL},
    [K_AVGPOOL2D]      = {"avgpool2d", 1, pool_keys, b_parse_avgpool2d, NULL},
    [K_GLOBAL_AVGPOOL] = {"global_avgpool", 1, no_keys, b_parse_global_avgpool, NULL},
    [K_FLATTEN]        = {"flatten", 1, no_keys, b_parse_flatten, NULL},
    [K_CONCAT]         = {"concat", -1, cat_keys, b_parse_concat, NULL},
};

// ---------------------------------------------------------------------------------------
// One node of "nodes" (inputs given), or one layer of "layers" (input = the previous)

/* Rejects a key the kind does not accept; a key of another kind gets the clearer message. */
static int check_keys(builder *b, const json_value *v, int is_layer, int kind) {
    const char *allowed[16] = {"name", is_layer ? "type" : "op", "inputs"};
    int na                  = 3;
    for (const char *const *k = layer_kinds[kind].keys; *k; k++)
        allowed[na++] = *k;
    allowed[na] = NULL;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *key = v->items[i]->key;
        int ok          = 0;
        for (int k = 0; allowed[k]; k++)
            ok |= !strcmp(allowed[k], key);
        for (int k = 0; k < K_COUNT && !ok; k++)
            for (const char *const *o = layer_kinds[k].keys; *o; o++)
                if (!strcmp(*o, key))
                    return jerr(b->c, v->items[i], "\"%s\" does not apply to %s", key,
                                layer_kinds[kind].name);
    }
    return jkeys(b->c, v, allowed);
}

/* The node's inputs: its "inputs" by name, or for a layer the previous layer's output. Only an
 * embedding reads i32 values. */
static int node_inputs(builder *b, b_node *n, int is_layer) {
    jctx *c             = b->c;
    const json_value *v = n->v;
    int want = layer_kinds[n->kind].n_inputs, n_in = 1; /* want -1: 2 to G_MAX_IN */
    const json_value *iv = json_get(v, "inputs");
    n->ins[0] = b->last, n->ins[1] = -1;
    n->iv = iv;
    if (iv) {
        if (iv->type != JSON_ARRAY) return jerr(c, iv, "expected an array of names");
        n_in = (int)iv->n_items;
        for (int i = 0; i < n_in && i < G_MAX_IN; i++)
            if (b_resolve(b, iv->items[i], &n->ins[i])) return -1;
    } else if (!is_layer) {
        return jmissing(c, v, "inputs");
    } else if (b->last < 0) {
        return jerr(c, v, "the first layer has no input");
    }
    if (want < 0 && (n_in < 2 || n_in > G_MAX_IN))
        return jerr(c, iv ? iv : v, "\"%s\" takes 2 to %d inputs, found %d", n->kind_name, G_MAX_IN,
                    n_in);
    if (want > 0 && n_in != want)
        return jerr(c, iv ? iv : v, "\"%s\" takes %d input%s, found %d", n->kind_name, want,
                    want == 1 ? "" : "s", n_in);
    n->n_ins = n_in;
    for (int i = 0; i < n_in; i++) {
        const g_value *x = &b->g->values[n->ins[i]];
        int is_i32       = x->dtype == AMPX_I32;
        if (is_i32 && n->kind != K_EMBEDDING)
            return jerr(c, iv ? iv->items[i] : v,
                        "\"%s\" holds i32 values; only an embedding or the loss reads it", x->name);
        if (!is_i32 && n->kind == K_EMBEDDING)
            return jerr(c, iv ? iv->items[i] : v, "an embedding reads i32 token ids; \"%s\" is f32",
                        x->name);
    }
    return 0;
}

static int parse_node(builder *b, const json_value *v, int is_layer, int index) {
    jctx *c = b->c;
    if (v->type != JSON_OBJECT)
        return jerr(c, v, "expected an object, found %s", json_type_name(v->type));
    const char *kinds[K_COUNT + 1];
    for (int k = 0; k < K_COUNT; k++)
        kinds[k] = layer_kinds[k].name;
    kinds[K_COUNT] = NULL;
    b_node n       = {.v = v, .kind = -1, .out = -1};
    if (jenum(c, v, is_layer ? "type" : "op", 1, kinds, &n.kind) ||
        check_keys(b, v, is_layer, n.kind))
        return -1;
    const b_kind *k = &layer_kinds[n.kind];
    n.kind_name     = k->name;
    char auto_name[64];
    if (jstr(c, v, "name", !is_layer, &n.name)) return -1;
    if (!n.name) {
        snprintf(auto_name, sizeof auto_name, "%s%d", k->name, index);
        n.name = auto_name;
    }
    n.at = json_get(v, "name") ? json_get(v, "name") : v;
    if (node_inputs(b, &n, is_layer) || k->parse(b, &n)) return -1;
    b_name *nm = b_add_name(b, n.at, n.name, n.out, n.kind);
    if (!nm) return -1;
    memcpy(nm->params, n.params, sizeof n.params);
    nm->n_params = n.n_params;
    if (k->after && k->after(b, &n)) return -1;
    nm->value = n.out; /* the layer's name is its output, after its activation */
    b->last   = n.out;
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
                if (f->type != JSON_NUMBER || f->num != floor(f->num))
                    return jerr(c, f, "expected a positive integer in [1, %d]", 1 << 24);
                if (f->num < 1 || f->num > (1 << 24))
                    return jerr(c, f, "expected a positive integer in [1, %d], found %.17g",
                                1 << 24, f->num);
                dims[ndim++] = (int64_t)f->num;
            }
        }
        int val =
            g_add_value(b->g, in->key, ROLE_INPUT, is_i32 ? AMPX_I32 : AMPX_F32, 1, ndim, dims);
        if (val < 0) return b_full(b, in);
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
        if (!b_add_name(b, in, in->key, val, -1)) return -1;
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
    if (json_get(v, pk) && b_resolve(b, json_get(v, pk), &pred)) return -1;
    int target           = only_input(g, type == 0 ? AMPX_I32 : AMPX_F32, b->last);
    const json_value *tv = json_get(v, tk);
    if (tv) {
        if (tv->type != JSON_STRING) return jerr(c, tv, "expected the name of an input");
        int i = b_find_name(b, tv->str);
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
        char wp[300], wl[300];
        if (g_last(pv) != g->classes && pv->ndim == 2)
            return jerr(c, at,
                        "shape mismatch: logits \"%s\" has %lld features (%s) but labels "
                        "\"%s\" has %lld classes (%s)",
                        pv->name, (long long)g_last(pv), jwhere(c, pv->line, wp, sizeof wp),
                        lv->name, (long long)g->classes, jwhere(c, lv->line, wl, sizeof wl));
        if (g_last(pv) != g->classes)
            return jerr(c, at,
                        "logits \"%s\" have %lld classes on the last axis, labels \"%s\" %lld",
                        pv->name, (long long)g_last(pv), lv->name, (long long)g->classes);
        g_attrs a  = {.ignore_index = (int)ig, .alpha = 1};
        int loss   = g_add_value(g, "loss", ROLE_ACTIVATION, AMPX_F32, 0, 1, (int64_t[]){1});
        int dl     = loss < 0 ? -1 : g_new_grad(g, pred, AMPX_F32);
        int ins[2] = {pred, target}, outs[2] = {loss, dl};
        if (dl < 0) return b_full(b, v);
        if (b_add_node(b, v, NULL, OP_XENT, ins, 2, outs, 2, &a, "loss")) return -1;
        g->loss = loss;
    } else {
        g_attrs a = {.alpha = 1};
        int loss  = g_add_value(g, "loss", ROLE_ACTIVATION, AMPX_F32, 0, 1, (int64_t[]){1});
        int dp    = loss < 0 ? -1 : g_new_grad(g, pred, AMPX_F32);
        int diff  = dp < 0 ? -1 : g_add_value_like(g, "loss.diff", ROLE_ACTIVATION, AMPX_F32, pred);
        int ins[2] = {pred, target}, outs[3] = {loss, dp, diff};
        if (diff < 0) return b_full(b, v);
        if (b_add_node(b, v, NULL, OP_MSE, ins, 2, outs, 3, &a, "loss")) return -1;
        g->loss = loss;
    }
    g->loss_node = g->n_nodes - 1;
    g->logits    = pred;
    g->labels    = target;
    return 0;
}

/* Every node's output is read, by a later node or as the loss's logits (predictions): a node
 * nothing reads is a mistake (an input named for the wrong value), not a branch to drop. */
static int check_read(builder *b) {
    const g_graph *g = b->g;
    const char *loss = g->values[g->logits].name;
    for (int i = 0; i < b->n_names; i++)
        if (b->names[i].kind >= 0 && !b->names[i].alias && b->names[i].value == g->logits)
            loss = b->names[i].name;
    for (int i = 0; i < b->n_names; i++) {
        const b_name *nm = &b->names[i];
        int read         = nm->kind < 0 || nm->alias || nm->value == g->logits;
        for (int k = 0; k < g->n_nodes && !read; k++)
            for (int j = 0; j < g->nodes[k].n_in; j++)
                read |= g->nodes[k].in[j] == nm->value;
        if (!read)
            return jerr(b->c, nm->at,
                        "nothing reads the output of \"%s\": no later node names it in "
                        "\"inputs\" and the loss reads \"%s\"",
                        nm->name, loss);
    }
    return 0;
}

int g_build(jctx *c, const json_value *root, uint64_t backend_ops, g_graph *g) {
    builder *b = calloc(1, sizeof *b);
    if (!b) return jerr(c, root, "out of memory");
    b->ops                   = backend_ops;
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
    rc = parse_loss(b, loss ? loss : &empty) || check_read(b) ? -1 : 0;
done:
    free(b);
    return rc;
}
