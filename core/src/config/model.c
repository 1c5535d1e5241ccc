/* model.c — reads a model file: inputs, layers or nodes, loss, optimizer, data, training
 * settings (policy and scaler in policy.c), with every error placed at file:line:col and
 * its JSON path, and shapes checked at load time. */
#include "config/model.h"

#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Positioned errors and typed getters

int jerr(jctx *c, const json_value *v, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    char path[256];
    json_path(v, path, sizeof path);
    int n = snprintf(c->err, c->cap, "%s:%d:%d: %s: ", c->file, v->line, v->col, path);
    if (n >= 0 && (size_t)n < c->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

const char *did_you_mean(const char *word, const char *const *choices) {
    const char *best = NULL;
    size_t best_d    = 99;
    for (const char *const *c = choices; *c; c++) {
        size_t d = edit_distance(word, *c);
        if (d < best_d) best_d = d, best = *c;
    }
    size_t len = strlen(word);
    return best && best_d <= (len < 5 ? 1 : len / 3 + 1) ? best : NULL;
}

static void join_choices(const char *const *choices, char *buf, size_t cap) {
    buf[0] = 0;
    for (const char *const *c = choices; *c; c++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", c == choices ? "" : ", ", *c);
    }
}

int jkeys(jctx *c, const json_value *obj, const char *const *allowed) {
    if (obj->type != JSON_OBJECT)
        return jerr(c, obj, "expected an object, found %s", json_type_name(obj->type));
    for (size_t i = 0; i < obj->n_items; i++) {
        const json_value *m = obj->items[i];
        int ok              = 0;
        for (const char *const *a = allowed; *a; a++)
            if (!strcmp(*a, m->key)) ok = 1;
        if (ok) continue;
        const char *near = did_you_mean(m->key, allowed);
        char list[512];
        join_choices(allowed, list, sizeof list);
        /* Place the message at the key, not the value. */
        json_value at = *m;
        at.line       = m->key_line;
        at.col        = m->key_col;
        if (near) return jerr(c, &at, "unknown key \"%s\" (did you mean \"%s\"?)", m->key, near);
        return jerr(c, &at, "unknown key \"%s\" (expected one of: %s)", m->key, list);
    }
    return 0;
}

static int missing(jctx *c, const json_value *obj, const char *key) {
    return jerr(c, obj, "missing required key \"%s\"", key);
}

int jint(jctx *c, const json_value *obj, const char *key, int required, int64_t lo, int64_t hi,
         int64_t *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? missing(c, obj, key) : 0;
    if (v->type != JSON_NUMBER || v->num != floor(v->num) || fabs(v->num) > 9e15) {
        if (lo >= 1) return jerr(c, v, "expected a positive integer");
        return jerr(c, v, "expected an integer");
    }
    if (lo == 1 && v->num < 1) return jerr(c, v, "expected a positive integer");
    if (v->num < (double)lo || v->num > (double)hi) {
        return jerr(c, v, "expected an integer in [%lld, %lld], found %.17g", (long long)lo,
                    (long long)hi, v->num);
    }
    *out = (int64_t)v->num;
    return 0;
}

int jnum(jctx *c, const json_value *obj, const char *key, int required, double lo, double hi,
         double *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? missing(c, obj, key) : 0;
    if (v->type != JSON_NUMBER)
        return jerr(c, v, "expected a number, found %s", json_type_name(v->type));
    if (v->num < lo || v->num > hi)
        return jerr(c, v, "expected a number in [%g, %g], found %.17g", lo, hi, v->num);
    *out = v->num;
    return 0;
}

int jbool(jctx *c, const json_value *obj, const char *key, int *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return 0;
    if (v->type != JSON_BOOL)
        return jerr(c, v, "expected true or false, found %s", json_type_name(v->type));
    *out = v->boolean;
    return 0;
}

int jstr(jctx *c, const json_value *obj, const char *key, int required, const char **out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? missing(c, obj, key) : 0;
    if (v->type != JSON_STRING)
        return jerr(c, v, "expected a string, found %s", json_type_name(v->type));
    *out = v->str;
    return 0;
}

int jenum(jctx *c, const json_value *obj, const char *key, int required, const char *const *choices,
          int *out) {
    const char *s = NULL;
    if (jstr(c, obj, key, required, &s)) return -1;
    if (!s) return 0;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(choices[i], s)) {
            *out = i;
            return 0;
        }
    const json_value *v = json_get(obj, key);
    const char *near    = did_you_mean(s, choices);
    char list[512];
    join_choices(choices, list, sizeof list);
    if (near) return jerr(c, v, "unknown value \"%s\" (did you mean \"%s\"?)", s, near);
    return jerr(c, v, "unknown value \"%s\" (expected one of: %s)", s, list);
}

int parse_dtype(const char *s, ampx_dtype *out) {
    static const struct {
        const char *name;
        ampx_dtype d;
    } names[] = {{"f32", AMPX_F32},     {"float32", AMPX_F32},   {"fp32", AMPX_F32},
                 {"bf16", AMPX_BF16},   {"bfloat16", AMPX_BF16}, {"f16", AMPX_F16},
                 {"float16", AMPX_F16}, {"fp16", AMPX_F16},      {"half", AMPX_F16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].d;
            return 0;
        }
    return -1;
}

const char *dtype_name(ampx_dtype d) {
    switch (d) {
    case AMPX_F32: return "f32";
    case AMPX_BF16: return "bf16";
    case AMPX_F16: return "f16";
    case AMPX_I32: return "i32";
    default: return "?";
    }
}

// ---------------------------------------------------------------------------------------
// Nodes

static const char *const node_ops[]   = {"dense", "relu",      "gelu", "tanh", "sigmoid",
                                         "silu",  "layernorm", "add",  NULL};
static const char *const act_names[]  = {"relu", "gelu", "tanh", "sigmoid", "silu", NULL};
static const char *const init_names[] = {"glorot_uniform", "he_uniform", "he_normal", "normal",
                                         "zeros",          "ones",       NULL};

static int find_node(const ampx_model *m, const char *name) {
    for (int i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i].name, name)) return i;
    return -1;
}

static node *add_node(jctx *c, ampx_model *m, const json_value *at, const char *name,
                      node_kind kind) {
    if (m->n_nodes >= MODEL_MAX_NODES) {
        jerr(c, at, "too many nodes (at most %d)", MODEL_MAX_NODES);
        return NULL;
    }
    if (strlen(name) == 0 || strlen(name) >= MODEL_NAME_MAX) {
        jerr(c, at, "a name must have 1 to %d characters", MODEL_NAME_MAX - 1);
        return NULL;
    }
    int prev = find_node(m, name);
    if (prev >= 0) {
        jerr(c, at, "name \"%s\" is already used (line %d)", name, m->nodes[prev].line);
        return NULL;
    }
    node *n = &m->nodes[m->n_nodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->kind   = kind;
    n->line   = at->line;
    n->col    = at->col;
    n->init_w = INIT_GLOROT_UNIFORM;
    n->init_b = INIT_ZEROS;
    n->eps    = 1e-5f;
    n->bias   = 1;
    return n;
}

/* Resolves an input reference by name, with a did-you-mean over the names defined so far. */
static int resolve_input(jctx *c, ampx_model *m, const json_value *v, int *out) {
    if (v->type != JSON_STRING)
        return jerr(c, v, "expected a node or input name, found %s", json_type_name(v->type));
    int i = find_node(m, v->str);
    if (i >= 0 && m->nodes[i].kind != NODE_LABELS) {
        *out = i;
        return 0;
    }
    if (i >= 0) return jerr(c, v, "\"%s\" holds labels; only the loss reads it", v->str);
    const char *names[MODEL_MAX_NODES + 1];
    int n = 0;
    for (int k = 0; k < m->n_nodes; k++)
        names[n++] = m->nodes[k].name;
    names[n]         = NULL;
    const char *near = did_you_mean(v->str, names);
    if (near)
        return jerr(c, v, "no node or input named \"%s\" before this one (did you mean \"%s\"?)",
                    v->str, near);
    return jerr(c, v, "no node or input named \"%s\" before this one", v->str);
}

static int parse_init(jctx *c, const json_value *obj, node *n) {
    const json_value *v = json_get(obj, "init");
    if (!v) return 0;
    static const char *const keys[] = {"weight", "bias", "std", NULL};
    if (jkeys(c, v, keys)) return -1;
    int w = (int)n->init_w, b = (int)n->init_b;
    if (jenum(c, v, "weight", 0, init_names, &w) || jenum(c, v, "bias", 0, init_names, &b))
        return -1;
    double std = 0.02;
    if (jnum(c, v, "std", 0, 0.0, 1e6, &std)) return -1;
    n->init_w   = (init_kind)w;
    n->init_b   = (init_kind)b;
    n->init_std = (float)std;
    return 0;
}

/* One node of "nodes" (inputs given), or one layer of "layers" (input = previous). */
static int parse_node(jctx *c, ampx_model *m, const json_value *v, int is_layer, int prev) {
    static const char *const node_keys[]  = {"name",       "op",  "inputs", "units", "bias",
                                             "activation", "eps", "init",   NULL};
    static const char *const layer_keys[] = {"name", "type", "units",  "bias", "activation",
                                             "eps",  "init", "inputs", NULL};
    if (jkeys(c, v, is_layer ? layer_keys : node_keys)) return -1;
    int op = -1;
    if (jenum(c, v, is_layer ? "type" : "op", 1, node_ops, &op)) return -1;
    const char *name = NULL;
    char auto_name[MODEL_NAME_MAX];
    if (jstr(c, v, "name", !is_layer, &name)) return -1;
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "%s%d", node_ops[op], m->n_nodes);
        name = auto_name;
    }
    /* inputs */
    int ins[2] = {prev, -1}, n_in = 1;
    const json_value *iv = json_get(v, "inputs");
    if (iv) {
        if (iv->type != JSON_ARRAY) return jerr(c, iv, "expected an array of names");
        n_in = (int)iv->n_items;
        for (int i = 0; i < n_in && i < 2; i++)
            if (resolve_input(c, m, iv->items[i], &ins[i])) return -1;
    } else if (!is_layer) {
        return missing(c, v, "inputs");
    } else if (prev < 0) {
        return jerr(c, v, "the first layer has no input");
    }
    int want = !strcmp(node_ops[op], "add") ? 2 : 1;
    if (n_in != want)
        return jerr(c, iv ? iv : v, "\"%s\" takes %d input%s, found %d", node_ops[op], want,
                    want == 1 ? "" : "s", n_in);
    node_kind kind = op == 0                              ? NODE_DENSE
                     : !strcmp(node_ops[op], "layernorm") ? NODE_LAYERNORM
                     : !strcmp(node_ops[op], "add")       ? NODE_ADD
                                                          : NODE_ACT;
    /* keys that belong to one op only */
    if (kind != NODE_DENSE)
        for (const char *const *k = (const char *const[]){"units", "bias", "activation", NULL}; *k;
             k++)
            if (json_get(v, *k))
                return jerr(c, json_get(v, *k), "\"%s\" applies to dense only", *k);
    if (kind != NODE_LAYERNORM && json_get(v, "eps"))
        return jerr(c, json_get(v, "eps"), "\"eps\" applies to layernorm only");
    if ((kind == NODE_ACT || kind == NODE_ADD) && json_get(v, "init"))
        return jerr(c, json_get(v, "init"), "\"%s\" has no parameters to initialize", node_ops[op]);

    node *n = add_node(c, m, json_get(v, "name") ? json_get(v, "name") : v, name, kind);
    if (!n) return -1;
    n->n_inputs     = n_in;
    n->inputs[0]    = ins[0];
    n->inputs[1]    = ins[1];
    int64_t in_cols = m->nodes[ins[0]].cols;
    n->cols         = in_cols;
    if (kind == NODE_DENSE) {
        if (jint(c, v, "units", 1, 1, 1 << 24, &n->cols) || jbool(c, v, "bias", &n->bias) ||
            parse_init(c, v, n))
            return -1;
    } else if (kind == NODE_LAYERNORM) {
        double eps = 1e-5;
        if (jnum(c, v, "eps", 0, 1e-12, 1.0, &eps)) return -1;
        n->eps    = (float)eps;
        n->init_w = INIT_ONES;
        if (parse_init(c, v, n)) return -1;
    } else if (kind == NODE_ACT) {
        n->act = op - 1;
    } else if (kind == NODE_ADD) {
        const node *a = &m->nodes[ins[0]], *b = &m->nodes[ins[1]];
        if (a->cols != b->cols)
            return jerr(
                c, iv,
                "shape mismatch: \"%s\" has %lld features (line %d) but \"%s\" has %lld (line %d)",
                a->name, (long long)a->cols, a->line, b->name, (long long)b->cols, b->line);
    }
    /* "activation" on a dense layer: a separate activation node after it */
    int act = -1;
    if (kind == NODE_DENSE && jenum(c, v, "activation", 0, act_names, &act)) return -1;
    if (act >= 0) {
        char an[MODEL_NAME_MAX + 8];
        snprintf(an, sizeof an, "%s.%s", n->name, act_names[act]);
        int self = m->n_nodes - 1;
        node *a  = add_node(c, m, json_get(v, "activation"), an, NODE_ACT);
        if (!a) return -1;
        a->act       = act;
        a->n_inputs  = 1;
        a->inputs[0] = self;
        a->cols      = m->nodes[self].cols;
    }
    return 0;
}

static int parse_inputs(jctx *c, ampx_model *m, const json_value *v) {
    if (v->type != JSON_OBJECT) return jerr(c, v, "expected an object of named inputs");
    for (size_t i = 0; i < v->n_items; i++) {
        const json_value *in            = v->items[i];
        static const char *const keys[] = {"dtype", "shape", "classes", NULL};
        if (jkeys(c, in, keys)) return -1;
        const char *dt = NULL;
        if (jstr(c, in, "dtype", 1, &dt)) return -1;
        ampx_dtype d;
        if (!strcmp(dt, "i32") || !strcmp(dt, "int32")) {
            if (m->labels >= 0) return jerr(c, in, "only one i32 (labels) input is supported");
            if (json_get(in, "shape"))
                return jerr(c, json_get(in, "shape"),
                            "a labels input has no shape, only \"classes\"");
            node *n = add_node(c, m, in, in->key, NODE_LABELS);
            if (!n) return -1;
            if (jint(c, in, "classes", 1, 2, 1 << 24, &n->cols)) return -1;
            n->dtype   = AMPX_I32;
            m->labels  = m->n_nodes - 1;
            m->classes = n->cols;
            continue;
        }
        if (parse_dtype(dt, &d))
            return jerr(c, json_get(in, "dtype"), "unknown dtype \"%s\" (expected f32 or i32)", dt);
        if (d != AMPX_F32)
            return jerr(c, json_get(in, "dtype"), "inputs are read as f32 (the policy casts them)");
        if (json_get(in, "classes"))
            return jerr(c, json_get(in, "classes"), "\"classes\" applies to an i32 labels input");
        if (m->input >= 0) return jerr(c, in, "only one feature input is supported");
        const json_value *sh = json_get(in, "shape");
        if (!sh) return missing(c, in, "shape");
        if (sh->type != JSON_ARRAY || sh->n_items != 1)
            return jerr(c, sh, "expected [features] (one dimension per example)");
        node *n = add_node(c, m, in, in->key, NODE_INPUT);
        if (!n) return -1;
        const json_value *f = sh->items[0];
        if (f->type != JSON_NUMBER || f->num != floor(f->num) || f->num < 1 || f->num > (1 << 24))
            return jerr(c, f, "expected a positive integer");
        n->cols  = (int64_t)f->num;
        n->dtype = AMPX_F32;
        m->input = m->n_nodes - 1;
    }
    if (m->input < 0) return jerr(c, v, "no f32 feature input declared");
    if (m->labels < 0)
        return jerr(c, v, "no i32 labels input declared (\"dtype\": \"i32\", \"classes\": N)");
    return 0;
}

static int parse_loss(jctx *c, ampx_model *m, const json_value *v) {
    static const char *const keys[]  = {"type", "logits", "labels", "ignore_index", NULL};
    static const char *const types[] = {"softmax_cross_entropy", NULL};
    if (jkeys(c, v, keys)) return -1;
    int type = 0;
    if (jenum(c, v, "type", 0, types, &type)) return -1;
    int logits = m->n_nodes - 1;
    if (json_get(v, "logits") && resolve_input(c, m, json_get(v, "logits"), &logits)) return -1;
    const json_value *lv = json_get(v, "labels");
    if (lv) {
        if (lv->type != JSON_STRING) return jerr(c, lv, "expected the name of the labels input");
        if (strcmp(lv->str, m->nodes[m->labels].name))
            return jerr(c, lv, "\"%s\" is not the labels input (\"%s\")", lv->str,
                        m->nodes[m->labels].name);
    }
    int64_t ig = -100;
    if (jint(c, v, "ignore_index", 0, INT32_MIN, INT32_MAX, &ig)) return -1;
    m->ignore_index = (int)ig;
    const node *lg  = &m->nodes[logits];
    if (lg->cols != m->classes) {
        const json_value *at = json_get(v, "logits") ? json_get(v, "logits") : v;
        return jerr(c, at,
                    "shape mismatch: logits \"%s\" has %lld features (line %d) but labels \"%s\" "
                    "has %lld classes (line %d)",
                    lg->name, (long long)lg->cols, lg->line, m->nodes[m->labels].name,
                    (long long)m->classes, m->nodes[m->labels].line);
    }
    node *n = add_node(c, m, v, "loss", NODE_LOSS);
    if (!n) return -1;
    n->n_inputs  = 2;
    n->inputs[0] = logits;
    n->inputs[1] = m->labels;
    n->cols      = 1;
    m->logits    = logits;
    m->loss      = m->n_nodes - 1;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Optimizer, data, train

static int parse_optimizer(jctx *c, ampx_model *m, const json_value *v) {
    static const char *const keys[]  = {"type",
                                        "lr",
                                        "weight_decay",
                                        "betas",
                                        "eps",
                                        "momentum",
                                        "dampening",
                                        "nesterov",
                                        "clip_grad_norm",
                                        "schedule",
                                        "stochastic_rounding",
                                        NULL};
    static const char *const types[] = {"sgd", "adamw", NULL};
    optimizer_config *o              = &m->opt;
    if (jkeys(c, v, keys)) return -1;
    int type = (int)o->kind;
    if (jenum(c, v, "type", 0, types, &type)) return -1;
    o->kind = (opt_kind)type;
    if (o->kind == OPT_SGD) {
        o->lr           = 0.1f;
        o->weight_decay = 0;
        for (const char *const *k = (const char *const[]){"betas", "eps", NULL}; *k; k++)
            if (json_get(v, *k))
                return jerr(c, json_get(v, *k), "\"%s\" applies to adamw only", *k);
    } else {
        for (const char *const *k =
                 (const char *const[]){"momentum", "dampening", "nesterov", NULL};
             *k; k++)
            if (json_get(v, *k)) return jerr(c, json_get(v, *k), "\"%s\" applies to sgd only", *k);
    }
    double lr = o->lr, wd = o->weight_decay, eps = o->eps, mom = o->momentum, damp = o->dampening,
           clip = o->clip_grad_norm;
    if (jnum(c, v, "lr", 0, 0, 1e3, &lr) || jnum(c, v, "weight_decay", 0, 0, 1e3, &wd) ||
        jnum(c, v, "eps", 0, 0, 1, &eps) || jnum(c, v, "momentum", 0, 0, 1, &mom) ||
        jnum(c, v, "dampening", 0, 0, 1, &damp) ||
        jnum(c, v, "clip_grad_norm", 0, 0, 1e30, &clip) || jbool(c, v, "nesterov", &o->nesterov) ||
        jbool(c, v, "stochastic_rounding", &o->stochastic_rounding))
        return -1;
    if (o->nesterov && (mom <= 0 || damp != 0))
        return jerr(c, json_get(v, "nesterov"), "nesterov needs momentum > 0 and dampening 0");
    const json_value *b = json_get(v, "betas");
    if (b) {
        if (b->type != JSON_ARRAY || b->n_items != 2) return jerr(c, b, "expected [beta1, beta2]");
        for (int i = 0; i < 2; i++)
            if (b->items[i]->type != JSON_NUMBER || b->items[i]->num < 0 || b->items[i]->num >= 1)
                return jerr(c, b->items[i], "expected a number in [0, 1)");
        o->beta1 = (float)b->items[0]->num;
        o->beta2 = (float)b->items[1]->num;
    }
    o->lr = (float)lr, o->weight_decay = (float)wd, o->eps = (float)eps, o->momentum = (float)mom;
    o->dampening = (float)damp, o->clip_grad_norm = (float)clip;
    const json_value *s = json_get(v, "schedule");
    if (s) {
        static const char *const skeys[]  = {"type", "warmup_steps", "decay_steps", "min_lr", NULL};
        static const char *const stypes[] = {"constant", "warmup_cosine", NULL};
        if (jkeys(c, s, skeys)) return -1;
        int st = 1;
        if (jenum(c, s, "type", 0, stypes, &st)) return -1;
        int64_t warm = 0, decay = 0;
        double min_lr = 0;
        if (jint(c, s, "warmup_steps", 0, 0, INT32_MAX, &warm) ||
            jint(c, s, "decay_steps", 0, 1, INT32_MAX, &decay) ||
            jnum(c, s, "min_lr", 0, 0, lr, &min_lr))
            return -1;
        if (st == 0 && s->n_items > 1) return jerr(c, s, "a constant schedule takes no other keys");
        o->schedule     = st;
        o->warmup_steps = (int32_t)warm;
        o->decay_steps  = (int32_t)decay;
        o->min_lr       = (float)min_lr;
    }
    return 0;
}

static char *resolve_path(const char *model_file, const char *p) {
    if (p[0] == '/') return strdup(p);
    char *copy = strdup(model_file);
    if (!copy) return NULL;
    char *dir = dirname(copy);
    size_t n  = strlen(dir) + strlen(p) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", dir, p);
    free(copy);
    return out;
}

static int data_path(jctx *c, ampx_model *m, const json_value *v, const char *key, int required,
                     char **out) {
    const char *p = NULL;
    if (jstr(c, v, key, required, &p)) return -1;
    if (!p) return 0;
    *out = resolve_path(m->file, p);
    return *out ? 0 : jerr(c, v, "out of memory");
}

static int parse_data(jctx *c, ampx_model *m, const json_value *v) {
    static const char *const sources[] = {"embedded", "mnist", "csv", NULL};
    data_config *d                     = &m->data;
    if (v->type != JSON_OBJECT) return jerr(c, v, "expected an object");
    int src = 0;
    if (jenum(c, v, "source", 0, sources, &src)) return -1;
    d->source = (data_source)src;
    if (d->source == DATA_EMBEDDED) {
        static const char *const keys[] = {"source", "samples",       "noise",
                                           "turns",  "test_fraction", NULL};
        if (jkeys(c, v, keys)) return -1;
        return jint(c, v, "samples", 0, 100, 1 << 24, &d->samples) ||
               jnum(c, v, "noise", 0, 0, 10, &d->noise) ||
               jnum(c, v, "turns", 0, 0.1, 10, &d->turns) ||
               jnum(c, v, "test_fraction", 0, 0.01, 0.9, &d->test_fraction);
    }
    if (d->source == DATA_MNIST) {
        static const char *const keys[] = {"source",      "train_images", "train_labels",
                                           "test_images", "test_labels",  NULL};
        if (jkeys(c, v, keys)) return -1;
        return data_path(c, m, v, "train_images", 1, &d->train_images) ||
               data_path(c, m, v, "train_labels", 1, &d->train_labels) ||
               data_path(c, m, v, "test_images", 1, &d->test_images) ||
               data_path(c, m, v, "test_labels", 1, &d->test_labels);
    }
    static const char *const keys[] = {"source", "train",         "test", "label_column",
                                       "header", "test_fraction", NULL};
    if (jkeys(c, v, keys)) return -1;
    if (data_path(c, m, v, "train", 1, &d->train_csv) ||
        data_path(c, m, v, "test", 0, &d->test_csv) ||
        jint(c, v, "label_column", 0, -1, 1 << 20, &d->label_column) ||
        jnum(c, v, "test_fraction", 0, 0.01, 0.9, &d->test_fraction))
        return -1;
    if (json_get(v, "header")) {
        if (jbool(c, v, "header", &d->header)) return -1;
    }
    return 0;
}

static int parse_train(jctx *c, ampx_model *m, const json_value *v) {
    static const char *const keys[] = {"steps", "batch", "accumulate", "seed", "log_every", NULL};
    ampx_train_config *t            = &m->train;
    if (jkeys(c, v, keys)) return -1;
    int64_t seed = (int64_t)t->seed;
    if (jint(c, v, "steps", 0, 1, INT32_MAX, &t->steps) ||
        jint(c, v, "batch", 0, 1, 1 << 20, &t->batch) ||
        jint(c, v, "accumulate", 0, 1, 1 << 16, &t->accumulate) ||
        jint(c, v, "seed", 0, 0, INT32_MAX, &seed) ||
        jint(c, v, "log_every", 0, 1, 1 << 20, &t->log_every))
        return -1;
    t->seed = (uint64_t)seed;
    return 0;
}

// ---------------------------------------------------------------------------------------
// The model file

static void model_defaults(ampx_model *m) {
    m->input = m->labels = m->logits = m->loss = -1;
    m->ignore_index                            = -100;
    policy_defaults(&m->pol, "f32");
    m->opt   = (optimizer_config){.kind         = OPT_ADAMW,
                                  .lr           = 1e-3f,
                                  .weight_decay = 0.01f,
                                  .beta1        = 0.9f,
                                  .beta2        = 0.999f,
                                  .eps          = 1e-8f,
                                  .min_lr       = 0};
    m->data  = (data_config){.source        = DATA_EMBEDDED,
                             .samples       = 8000,
                             .noise         = 0.2,
                             .turns         = 1.25,
                             .test_fraction = 0.25,
                             .label_column  = -1,
                             .header        = -1};
    m->train = (ampx_train_config){
        .steps = 1000, .batch = 64, .accumulate = 1, .seed = 1, .log_every = 50};
}

/* Reads "policy" and "scaler" from obj (the model, or a --policy file). */
static int parse_policy_and_scaler(jctx *c, ampx_model *m, const json_value *obj) {
    const json_value *p = json_get(obj, "policy"), *s = json_get(obj, "scaler");
    if (p && policy_parse(c, p, &m->pol)) return -1;
    if (s) {
        scaler_defaults(&m->scaler, m->pol.compute);
        if (scaler_parse(c, s, &m->scaler)) return -1;
    }
    return 0;
}

ampx_status ampx_model_load(const char *path, const char *policy_path, ampx_model **out, char *err,
                            size_t err_cap) {
    *out          = NULL;
    ampx_model *m = calloc(1, sizeof *m);
    if (!m || !(m->file = strdup(path))) {
        free(m);
        snprintf(err, err_cap, "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    model_defaults(m);
    json_value *root = json_parse_file(path, err, err_cap), *pol = NULL;
    jctx c = {.file = path, .err = err, .cap = err_cap};
    if (!root) goto fail;
    static const char *const keys[] = {"name",   "inputs",    "layers", "nodes", "loss", "policy",
                                       "scaler", "optimizer", "data",   "train", NULL};
    if (jkeys(&c, root, keys)) goto fail;
    const char *name = "model";
    if (jstr(&c, root, "name", 0, &name)) goto fail;
    snprintf(m->name, sizeof m->name, "%s", name);
    const json_value *inputs = json_get(root, "inputs");
    if (!inputs) {
        missing(&c, root, "inputs");
        goto fail;
    }
    if (parse_inputs(&c, m, inputs)) goto fail;
    const json_value *layers = json_get(root, "layers"), *nodes = json_get(root, "nodes");
    if (layers && nodes) {
        jerr(&c, nodes, "give \"layers\" or \"nodes\", not both");
        goto fail;
    }
    const json_value *list = layers ? layers : nodes;
    if (!list) {
        jerr(&c, root, "missing \"layers\" (a sequential model) or \"nodes\" (a graph)");
        goto fail;
    }
    if (list->type != JSON_ARRAY || list->n_items == 0) {
        jerr(&c, list, "expected a non-empty array");
        goto fail;
    }
    for (size_t i = 0; i < list->n_items; i++)
        if (parse_node(&c, m, list->items[i], layers != NULL,
                       layers ? (i == 0 ? m->input : m->n_nodes - 1) : -1))
            goto fail;
    const json_value *loss = json_get(root, "loss");
    json_value empty       = {.type = JSON_OBJECT, .line = root->line, .col = root->col};
    if (parse_loss(&c, m, loss ? loss : &empty)) goto fail;
    if (parse_policy_and_scaler(&c, m, root)) goto fail;
    if (json_get(root, "optimizer") && parse_optimizer(&c, m, json_get(root, "optimizer")))
        goto fail;
    if (json_get(root, "data") && parse_data(&c, m, json_get(root, "data"))) goto fail;
    if (json_get(root, "train") && parse_train(&c, m, json_get(root, "train"))) goto fail;
    if (policy_path) {
        pol = json_parse_file(policy_path, err, err_cap);
        if (!pol) goto fail;
        jctx pc                          = {.file = policy_path, .err = err, .cap = err_cap};
        static const char *const pkeys[] = {"policy", "scaler", NULL};
        if (jkeys(&pc, pol, pkeys) || parse_policy_and_scaler(&pc, m, pol)) goto fail;
        if (!json_get(pol, "policy") && !json_get(pol, "scaler")) {
            jerr(&pc, pol, "expected \"policy\" and/or \"scaler\"");
            goto fail;
        }
    }
    if (!m->scaler.given) scaler_defaults(&m->scaler, m->pol.compute);
    m->opt.file_steps = (int32_t)m->train.steps;
    if (policy_resolve(m, err, err_cap)) goto fail;
    json_free(root);
    json_free(pol);
    *out = m;
    return AMPX_OK;
fail:
    json_free(root);
    json_free(pol);
    ampx_model_free(m);
    return AMPX_ERR_INVALID;
}

void ampx_model_free(ampx_model *m) {
    if (!m) return;
    data_config *d = &m->data;
    free(d->train_images), free(d->train_labels), free(d->test_images), free(d->test_labels);
    free(d->train_csv), free(d->test_csv);
    free(m->file);
    free(m);
}

ampx_train_config *ampx_model_train_config(ampx_model *m) {
    return &m->train;
}
const char *ampx_model_name(const ampx_model *m) {
    return m->name;
}
