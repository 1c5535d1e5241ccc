/* settings.c — the parts of a model file that are not the graph: the precision policy
 * (presets, jmp-style strings, objects with op-class lists and per-layer overrides), the loss
 * scaler, the optimizer and its schedule, the data source and the training settings. */
#include "config/settings.h"

#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Policy

const char *const op_class_names[] = {"dense",     "activation", "layernorm", "add",    "loss",
                                      "batchnorm", "softmax",    "mul",       "reduce", "dropout",
                                      "conv",      "pool",       NULL};

void policy_defaults(policy *p, const char *preset) {
    memset(p, 0, sizeof *p);
    p->params = p->compute = p->output = AMPX_F32;
    if (!strcmp(preset, "mixed_bf16")) p->compute = AMPX_BF16;
    if (!strcmp(preset, "mixed_f16")) p->compute = AMPX_F16;
    for (int i = 0; i < CLASS_COUNT; i++)
        p->class_dtype[i] = CLASS_DEFAULT;
    snprintf(p->spelled, sizeof p->spelled, "%s", preset);
}

/* jmp's spelling: "params=float32,compute=bfloat16,output=float32" (any subset, any order). */
static int parse_jmp(jctx *c, const json_value *v, policy *p) {
    policy_defaults(p, "f32");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v->str);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *eq = strchr(tok, '=');
        if (!eq)
            return jerr(
                c, v,
                "expected a preset (f32, mixed_bf16, mixed_f16) or key=dtype pairs, found \"%s\"",
                tok);
        *eq = 0;
        ampx_dtype d;
        if (parse_dtype(eq + 1, &d)) return jerr(c, v, "unknown dtype \"%s\" for %s", eq + 1, tok);
        if (!strcmp(tok, "params") || !strcmp(tok, "p"))
            p->params = d;
        else if (!strcmp(tok, "compute") || !strcmp(tok, "c"))
            p->compute = d;
        else if (!strcmp(tok, "output") || !strcmp(tok, "o"))
            p->output = d;
        else {
            static const char *const keys[] = {"params", "compute", "output", NULL};
            const char *near                = did_you_mean(tok, keys);
            if (near)
                return jerr(c, v, "unknown policy key \"%s\" (did you mean \"%s\"?)", tok, near);
            return jerr(c, v, "unknown policy key \"%s\" (expected params, compute, output)", tok);
        }
    }
    snprintf(p->spelled, sizeof p->spelled, "%s", v->str);
    return 0;
}

static int dtype_at(jctx *c, const json_value *v, ampx_dtype *out) {
    if (v->type != JSON_STRING) return jerr(c, v, "expected a dtype string (f32, bf16, f16)");
    if (parse_dtype(v->str, out))
        return jerr(c, v, "unknown dtype \"%s\" (expected f32, bf16 or f16)", v->str);
    return 0;
}

static int parse_class_list(jctx *c, const json_value *obj, const char *key, int value, policy *p) {
    const json_value *l = json_get(obj, key);
    if (!l) return 0;
    if (l->type != JSON_ARRAY) return jerr(c, l, "expected an array of op classes");
    for (size_t i = 0; i < l->n_items; i++) {
        const json_value *e = l->items[i];
        int k               = -1;
        if (e->type == JSON_STRING)
            for (int j = 0; op_class_names[j]; j++)
                if (!strcmp(op_class_names[j], e->str)) k = j;
        if (k < 0) {
            const char *near = e->type == JSON_STRING ? did_you_mean(e->str, op_class_names) : NULL;
            if (near)
                return jerr(c, e, "unknown op class \"%s\" (did you mean \"%s\"?)", e->str, near);
            return jerr(c, e,
                        "expected an op class: dense, activation, layernorm, add, loss, batchnorm, "
                        "softmax, mul, reduce, dropout");
        }
        if (k == CLASS_LOSS && value == CLASS_COMPUTE)
            return jerr(c, e,
                        "the loss always runs in f32 (softmax and log in low precision lose the "
                        "small probabilities)");
        if (p->class_dtype[k] != CLASS_DEFAULT)
            return jerr(c, e, "op class \"%s\" is listed twice", e->str);
        p->class_dtype[k] = value;
    }
    return 0;
}

/* policy.fp8: {"format": "hybrid" | "e4m3", "amax_history": N, "amax_algo": "max" |
 * "most_recent", "margin": M, "ops": ["dense", "conv"] or "layers": ["glob", ...]}. */
static int fp8_parse(jctx *c, const json_value *v, fp8_config *f) {
    static const char *const keys[]    = {"format", "amax_history", "amax_algo", "margin",
                                          "ops",    "layers",       NULL};
    static const char *const formats[] = {"e4m3", "hybrid", NULL};
    static const char *const algos[]   = {"max", "most_recent", NULL};
    if (jkeys(c, v, keys)) return -1;
    *f        = (fp8_config){.on = 1, .hybrid = 1, .history = 1024, .algo = AMPX_FP8_AMAX_MAX};
    int64_t h = f->history, margin = 0;
    if (jenum(c, v, "format", 0, formats, &f->hybrid) ||
        jint(c, v, "amax_history", 0, 1, 1 << 16, &h) ||
        jenum(c, v, "amax_algo", 0, algos, &f->algo) || jint(c, v, "margin", 0, -64, 64, &margin))
        return -1;
    f->history            = (int)h;
    f->margin             = (int)margin;
    const json_value *ops = json_get(v, "ops"), *layers = json_get(v, "layers");
    if (ops && ops->type != JSON_ARRAY) return jerr(c, ops, "expected an array of op classes");
    for (size_t i = 0; ops && i < ops->n_items; i++) {
        const json_value *e = ops->items[i];
        if (e->type != JSON_STRING || (strcmp(e->str, "dense") && strcmp(e->str, "conv")))
            return jerr(c, e,
                        "expected \"dense\" or \"conv\": the products of weights run in fp8 "
                        "(attention's products of activations, norms and softmax do not)");
        f->classes |= 1u << (!strcmp(e->str, "dense") ? CLASS_DENSE : CLASS_CONV);
    }
    if (layers) {
        if (layers->type != JSON_ARRAY || layers->n_items == 0)
            return jerr(c, layers, "expected a non-empty array of layer name globs");
        if (layers->n_items > FP8_MAX_LAYERS)
            return jerr(c, layers, "at most %d globs", FP8_MAX_LAYERS);
        for (size_t i = 0; i < layers->n_items; i++) {
            const json_value *e = layers->items[i];
            if (e->type != JSON_STRING || !e->str[0] || strlen(e->str) >= NAME_MAX_LEN)
                return jerr(c, e, "expected a layer name glob of 1 to %d characters",
                            NAME_MAX_LEN - 1);
            snprintf(f->layers[i], NAME_MAX_LEN, "%s", e->str);
            jplace(c, e, f->place[i], sizeof f->place[i]);
        }
        f->n_layers = (int)layers->n_items;
    }
    if (!ops && !layers) f->classes = 1u << CLASS_DENSE;
    return 0;
}

int policy_parse(jctx *c, const json_value *v, policy *p) {
    if (v->type == JSON_STRING) {
        static const char *const presets[] = {"f32", "mixed_bf16", "mixed_f16", NULL};
        for (int i = 0; presets[i]; i++)
            if (!strcmp(v->str, presets[i])) {
                policy_defaults(p, presets[i]);
                return 0;
            }
        if (!strchr(v->str, '=')) {
            const char *near = did_you_mean(v->str, presets);
            if (near)
                return jerr(c, v, "unknown policy \"%s\" (did you mean \"%s\"?)", v->str, near);
            return jerr(c, v,
                        "unknown policy \"%s\" (expected f32, mixed_bf16, mixed_f16 or "
                        "params=...,compute=...,output=...)",
                        v->str);
        }
        if (parse_jmp(c, v, p)) return -1;
    } else {
        static const char *const keys[] = {"preset",    "params",      "compute",
                                           "output",    "compute_ops", "f32_ops",
                                           "overrides", "fp8",         NULL};
        if (jkeys(c, v, keys)) return -1;
        const json_value *pre = json_get(v, "preset");
        policy_defaults(p, "f32");
        if (pre && policy_parse(c, pre, p)) return -1;
        const char *fields[] = {"params", "compute", "output"};
        ampx_dtype *dst[]    = {&p->params, &p->compute, &p->output};
        for (int i = 0; i < 3; i++) {
            const json_value *f = json_get(v, fields[i]);
            if (f && dtype_at(c, f, dst[i])) return -1;
        }
        if (parse_class_list(c, v, "compute_ops", CLASS_COMPUTE, p) ||
            parse_class_list(c, v, "f32_ops", AMPX_F32, p))
            return -1;
        const json_value *ov = json_get(v, "overrides");
        if (ov) {
            if (ov->type != JSON_OBJECT)
                return jerr(c, ov, "expected an object of \"name glob\": dtype");
            if (ov->n_items > MAX_OVERRIDES)
                return jerr(c, ov, "at most %d overrides", MAX_OVERRIDES);
            for (size_t i = 0; i < ov->n_items; i++) {
                if (strlen(ov->items[i]->key) >= NAME_MAX_LEN)
                    return jerr(c, ov->items[i], "glob too long");
                snprintf(p->overrides[i].glob, NAME_MAX_LEN, "%s", ov->items[i]->key);
                if (dtype_at(c, ov->items[i], &p->overrides[i].dtype)) return -1;
                jplace(c, ov->items[i], p->overrides[i].place, sizeof p->overrides[i].place);
            }
            p->n_overrides = (int)ov->n_items;
        }
        snprintf(p->spelled, sizeof p->spelled, "%s",
                 pre && pre->type == JSON_STRING ? pre->str : "custom");
        const json_value *f8 = json_get(v, "fp8");
        if (f8 && fp8_parse(c, f8, &p->fp8)) return -1;
    }
    if (p->params != AMPX_F32) {
        const json_value *at =
            v->type == JSON_OBJECT && json_get(v, "params") ? json_get(v, "params") : v;
        return jerr(c, at,
                    "params must be f32: master weights stay in f32 and the optimizer writes the "
                    "low-precision working copies");
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Scaler

void scaler_defaults(scaler_config *s, ampx_dtype compute) {
    int given = s->given;
    *s       = (scaler_config){.mode       = compute == AMPX_F16 ? AMPX_SCALER_DYNAMIC : AMPX_SCALER_NONE,
                               .init_scale = 65536.0f,
                               .growth_factor   = 2.0f,
                               .backoff_factor  = 0.5f,
                               .growth_interval = 2000,
                               .hysteresis      = 1,
                               .min_scale       = 0.0f,
                               .max_scale       = INFINITY};
    s->given = given;
}

int scaler_parse(jctx *c, const json_value *v, scaler_config *s) {
    static const char *const modes[] = {"none", "static", "dynamic", NULL};
    s->given                         = 1;
    if (v->type == JSON_STRING) {
        for (int i = 0; modes[i]; i++)
            if (!strcmp(modes[i], v->str)) {
                s->mode       = i;
                s->init_scale = scaler_start_scale(s);
                return 0;
            }
        const char *near = did_you_mean(v->str, modes);
        if (near) return jerr(c, v, "unknown scaler \"%s\" (did you mean \"%s\"?)", v->str, near);
        return jerr(c, v, "unknown scaler \"%s\" (expected none, static or dynamic)", v->str);
    }
    static const char *const keys[] = {"type",
                                       "init_scale",
                                       "growth_factor",
                                       "backoff_factor",
                                       "growth_interval",
                                       "hysteresis",
                                       "consecutive_hysteresis",
                                       "min_scale",
                                       "max_scale",
                                       "on_min_scale",
                                       "max_consecutive_skips",
                                       NULL};
    if (jkeys(c, v, keys)) return -1;
    int mode = s->mode;
    if (jenum(c, v, "type", 1, modes, &mode)) return -1;
    s->mode = mode;
    if (mode == AMPX_SCALER_NONE) {
        s->init_scale = scaler_start_scale(s);
        if (v->n_items > 1) return jerr(c, v, "scaler \"none\" takes no other keys");
        return 0;
    }
    double init = s->init_scale, gf = s->growth_factor, bf = s->backoff_factor, mins = s->min_scale,
           maxs = 3.4e38;
    int64_t gi = s->growth_interval, hy = s->hysteresis, mcs = s->max_consecutive_skips;
    int ch = s->consecutive_hysteresis, on_min = 0;
    static const char *const on_min_choices[] = {"skip", "error", NULL};
    if (jnum(c, v, "init_scale", 0, 1e-30, 3.4e38, &init) ||
        jnum(c, v, "growth_factor", 0, 1.0000001, 1e6, &gf) ||
        jnum(c, v, "backoff_factor", 0, 1e-6, 0.9999999, &bf) ||
        jint(c, v, "growth_interval", 0, 1, INT32_MAX, &gi) ||
        jint(c, v, "hysteresis", 0, 1, 1 << 20, &hy) ||
        jbool(c, v, "consecutive_hysteresis", &ch) ||
        jnum(c, v, "min_scale", 0, 0, 3.4e38, &mins) ||
        jnum(c, v, "max_scale", 0, 1e-30, 3.4e38, &maxs) ||
        jenum(c, v, "on_min_scale", 0, on_min_choices, &on_min) ||
        jint(c, v, "max_consecutive_skips", 0, 0, INT32_MAX, &mcs))
        return -1;
    if (mode == AMPX_SCALER_STATIC)
        for (const char *const *k =
                 (const char *const[]){"growth_factor", "backoff_factor", "growth_interval",
                                       "hysteresis", "consecutive_hysteresis", "min_scale",
                                       "max_scale", "on_min_scale", NULL};
             *k; k++)
            if (json_get(v, *k))
                return jerr(c, json_get(v, *k), "\"%s\" applies to a dynamic scaler only", *k);
    if (json_get(v, "max_scale") && maxs < init)
        return jerr(c, json_get(v, "max_scale"), "max_scale %g is below init_scale %g", maxs, init);
    if (mins > init)
        return jerr(c, json_get(v, "min_scale"), "min_scale %g is above init_scale %g", mins, init);
    s->init_scale             = (float)init;
    s->growth_factor          = gf;
    s->backoff_factor         = bf;
    s->growth_interval        = (int32_t)gi;
    s->hysteresis             = (int32_t)hy;
    s->consecutive_hysteresis = ch;
    s->min_scale              = (float)mins;
    s->max_scale              = json_get(v, "max_scale") ? (float)maxs : INFINITY;
    s->on_min_scale_error     = on_min;
    s->max_consecutive_skips  = (int32_t)mcs;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Optimizer, data, train

int optimizer_parse(jctx *c, settings *m, const json_value *v) {
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

/* A path relative to the model file's folder; "$DATA/..." is under $AMPX_DATA_DIR, or the
 * data folder beside the model file's folder (the repository's data/ for models/). */
static char *resolve_path(const char *model_file, const char *p) {
    if (!strncmp(p, "$DATA/", 6)) {
        const char *env = getenv("AMPX_DATA_DIR");
        if (env && *env) {
            size_t n  = strlen(env) + strlen(p) + 2;
            char *out = malloc(n);
            if (out) snprintf(out, n, "%s/%s", env, p + 6);
            return out;
        }
        char *copy = strdup(model_file);
        if (!copy) return NULL;
        char *dir = dirname(copy);
        size_t n  = strlen(dir) + strlen(p) + 16;
        char *out = malloc(n);
        if (out) snprintf(out, n, "%s/../data/%s", dir, p + 6);
        free(copy);
        return out;
    }
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

static int data_path(jctx *c, settings *m, const json_value *v, const char *key, int required,
                     char **out) {
    const char *p = NULL;
    if (jstr(c, v, key, required, &p)) return -1;
    if (!p) return 0;
    if (!strncmp(p, "$DATA/", 6) && !m->data.data_set[0])
        snprintf(m->data.data_set, sizeof m->data.data_set, "%.*s", (int)strcspn(p + 6, "/"),
                 p + 6);
    *out = resolve_path(m->file, p);
    return *out ? 0 : jerr(c, v, "out of memory");
}

/* The keys of a text, token or embedded_text source. */
static int text_source_parse(jctx *c, settings *m, const json_value *v) {
    data_config *d                    = &m->data;
    static const char *const keys[]   = {"source",          "train", "val",   "val_fraction",
                                         "eval_windows",    "bytes", "order", "shuffle_seed",
                                         "bytes_per_token", NULL};
    static const char *const orders[] = {"random", "sequential", "shuffled", NULL};
    if (jkeys(c, v, keys) || jenum(c, v, "order", 0, orders, &d->order) ||
        jint(c, v, "shuffle_seed", 0, 0, INT32_MAX, &d->shuffle_seed))
        return -1;
    if (json_get(v, "shuffle_seed") && d->order != DATA_ORDER_SHUFFLED)
        return jerr(c, json_get(v, "shuffle_seed"),
                    "\"shuffle_seed\" applies to \"order\": \"shuffled\"");
    int gen = d->source == DATA_EMBEDDED_TEXT;
    if (gen && (json_get(v, "train") || json_get(v, "val")))
        return jerr(c, json_get(v, "train") ? json_get(v, "train") : json_get(v, "val"),
                    "embedded_text is generated; it reads no files");
    if (!gen && json_get(v, "bytes"))
        return jerr(c, json_get(v, "bytes"), "\"bytes\" applies to embedded_text");
    if (d->source != DATA_TOKENS && json_get(v, "bytes_per_token"))
        return jerr(c, json_get(v, "bytes_per_token"),
                    "\"bytes_per_token\" applies to token files (a byte-level source has 1)");
    return data_path(c, m, v, "train", !gen, &d->text_train) ||
           data_path(c, m, v, "val", 0, &d->text_val) ||
           jnum(c, v, "val_fraction", 0, 0.001, 0.9, &d->val_fraction) ||
           jint(c, v, "eval_windows", 0, 1, 1 << 20, &d->eval_windows) ||
           jint(c, v, "bytes", 0, 10000, 1 << 30, &d->text_bytes) ||
           jnum(c, v, "bytes_per_token", 0, 0.01, 1e6, &d->bytes_per_token);
}

int data_parse(jctx *c, settings *m, const json_value *v) {
    static const char *const sources[] = {"embedded", "mnist",         "csv", "text",
                                          "tokens",   "embedded_text", NULL};
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
    if (d->source == DATA_TEXT || d->source == DATA_TOKENS || d->source == DATA_EMBEDDED_TEXT)
        return text_source_parse(c, m, v);
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

const char *const recompute_names[] = {"layernorm", "relu", "gelu", "tanh",
                                       "sigmoid",   "silu", NULL};

/* "recompute": ["gelu", "layernorm"], each name once. */
static int parse_recompute(jctx *c, settings *m, const json_value *v) {
    const json_value *l = json_get(v, "recompute");
    if (!l) return 0;
    if (l->type != JSON_ARRAY)
        return jerr(c, l, "expected an array of what to recompute (\"layernorm\", \"gelu\", ...)");
    m->recompute = 0;
    for (size_t i = 0; i < l->n_items; i++) {
        const json_value *e = l->items[i];
        int k               = -1;
        if (e->type == JSON_STRING)
            for (int j = 0; recompute_names[j]; j++)
                if (!strcmp(recompute_names[j], e->str)) k = j;
        if (k < 0) {
            const char *near =
                e->type == JSON_STRING ? did_you_mean(e->str, recompute_names) : NULL;
            if (near)
                return jerr(c, e, "cannot recompute \"%s\" (did you mean \"%s\"?)", e->str, near);
            return jerr(c, e,
                        "expected what to recompute: layernorm, relu, gelu, tanh, sigmoid or silu");
        }
        _Static_assert(AMPX_ACT_COUNT == 5, "recompute_names lists every ampx_act");
        unsigned bit = k == 0 ? RECOMPUTE_LAYERNORM : RECOMPUTE_ACT(k - 1);
        if (m->recompute & bit) return jerr(c, e, "\"%s\" is listed twice", e->str);
        m->recompute |= bit;
    }
    return 0;
}

int train_parse(jctx *c, settings *m, const json_value *v) {
    static const char *const keys[]   = {"steps",     "batch",         "accumulate", "seed",
                                         "log_every", "monitor",       "eval_every", "recompute",
                                         "forensics", "weight_copies", "zero",       NULL};
    static const char *const copies[] = {"auto", "keep", "cast", NULL};
    ampx_train_config *t              = &m->train;
    if (jkeys(c, v, keys) || parse_recompute(c, m, v) ||
        jenum(c, v, "weight_copies", 0, copies, &m->weight_copies))
        return -1;
    int64_t seed = (int64_t)t->seed;
    if (jint(c, v, "steps", 0, 1, INT32_MAX, &t->steps) ||
        jint(c, v, "batch", 0, 1, 1 << 20, &t->batch) ||
        jint(c, v, "accumulate", 0, 1, 1 << 16, &t->accumulate) ||
        jint(c, v, "seed", 0, 0, INT32_MAX, &seed) ||
        jint(c, v, "log_every", 0, 1, 1 << 20, &t->log_every) ||
        jint(c, v, "monitor", 0, 0, 1 << 20, &t->monitor_every) ||
        jint(c, v, "eval_every", 0, 0, INT32_MAX, &t->eval_every) ||
        jbool(c, v, "forensics", &t->forensics))
        return -1;
    int64_t zero = t->zero;
    if (jint(c, v, "zero", 0, 0, 1, &zero)) return -1;
    t->zero = (int)zero;
    t->seed = (uint64_t)seed;
    return 0;
}

const char *const placement_modes[] = {"first", "strict", "measured", NULL};

int placement_parse(jctx *c, settings *m, const json_value *v) {
    static const char *const keys[] = {"mode", "nodes", NULL};
    placement_config *p             = &m->place;
    if (jkeys(c, v, keys) || jenum(c, v, "mode", 0, placement_modes, &p->mode)) return -1;
    const json_value *nodes = json_get(v, "nodes");
    if (!nodes) return 0;
    if (nodes->type != JSON_OBJECT)
        return jerr(c, nodes, "expected an object of node-name globs and backend names");
    for (size_t i = 0; i < nodes->n_items; i++) {
        const json_value *e = nodes->items[i];
        if (e->type != JSON_STRING || !*e->str)
            return jerr(c, e, "expected the name of a backend of the list (\"cpu\")");
        if (p->n_rules == PLACEMENT_MAX_RULES)
            return jerr(c, e, "at most %d placement rules", PLACEMENT_MAX_RULES);
        if (strlen(e->key) >= sizeof p->rules[0].glob ||
            strlen(e->str) >= sizeof p->rules[0].backend)
            return jerr(c, e, "a glob or backend name this long is not a node's or a backend's");
        placement_rule *r = &p->rules[p->n_rules++];
        snprintf(r->glob, sizeof r->glob, "%s", e->key);
        snprintf(r->backend, sizeof r->backend, "%s", e->str);
        jplace(c, e, r->where, sizeof r->where);
    }
    return 0;
}

int placement_add_rule(placement_config *p, const char *spec, ampx_err e) {
    const char *eq = strrchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) {
        err_set(e, "--place '%s': expected GLOB=BACKEND (h*.attn*=cpu)", spec);
        return -1;
    }
    if (p->n_rules == PLACEMENT_MAX_RULES) {
        err_set(e, "--place '%s': at most %d placement rules", spec, PLACEMENT_MAX_RULES);
        return -1;
    }
    placement_rule *r = &p->rules[p->n_rules];
    if ((size_t)(eq - spec) >= sizeof r->glob || strlen(eq + 1) >= sizeof r->backend) {
        err_set(e, "--place '%s': the glob or the backend name is too long", spec);
        return -1;
    }
    snprintf(r->glob, sizeof r->glob, "%.*s", (int)(eq - spec), spec);
    snprintf(r->backend, sizeof r->backend, "%s", eq + 1);
    snprintf(r->where, sizeof r->where, "--place %s", spec);
    p->n_rules++;
    return 0;
}

void settings_defaults(settings *m) {
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
                             .header        = -1,
                             .val_fraction  = 0.1,
                             .eval_windows  = 64,
                             .shuffle_seed  = 42,
                             .text_bytes    = 1 << 20};
    m->train = (ampx_train_config){
        .steps = 1000, .batch = 64, .accumulate = 1, .seed = 1, .log_every = 50};
}

void settings_free(settings *m) {
    data_config *d = &m->data;
    free(d->train_images), free(d->train_labels), free(d->test_images), free(d->test_labels);
    free(d->train_csv), free(d->test_csv);
    free(d->text_train), free(d->text_val);
    free(m->file);
    m->file = NULL;
}

void settings_shown(const char *name, char *out, size_t cap) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && n + 5 <= cap; p++)
        if (*p < 0x20 || *p == 0x7F || *p == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    if (cap) out[n < cap ? n : cap - 1] = 0;
}
