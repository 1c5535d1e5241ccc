/* policy.c — the precision policy and the loss-scaler settings: parsing (presets, jmp-style
 * strings, objects), resolving each node's dtype (per-layer override > op class > global
 * compute, torch.autocast's defaults), inserting casts, and describing the result. */
#include <fnmatch.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/model.h"

#define CLASS_DEFAULT (-1)
#define CLASS_COMPUTE (-2)

static const char *const class_names[] = {"dense", "activation", "layernorm", "add", "loss", NULL};

// ---------------------------------------------------------------------------------------
// Policy

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
            for (int j = 0; class_names[j]; j++)
                if (!strcmp(class_names[j], e->str)) k = j;
        if (k < 0) {
            const char *near = e->type == JSON_STRING ? did_you_mean(e->str, class_names) : NULL;
            if (near)
                return jerr(c, e, "unknown op class \"%s\" (did you mean \"%s\"?)", e->str, near);
            return jerr(c, e, "expected an op class: dense, activation, layernorm, add, loss");
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
        static const char *const keys[] = {"preset",      "params",  "compute",   "output",
                                           "compute_ops", "f32_ops", "overrides", NULL};
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
            if (ov->n_items > MODEL_MAX_OVERRIDES)
                return jerr(c, ov, "at most %d overrides", MODEL_MAX_OVERRIDES);
            for (size_t i = 0; i < ov->n_items; i++) {
                if (strlen(ov->items[i]->key) >= MODEL_NAME_MAX)
                    return jerr(c, ov->items[i], "glob too long");
                snprintf(p->overrides[i].glob, MODEL_NAME_MAX, "%s", ov->items[i]->key);
                if (dtype_at(c, ov->items[i], &p->overrides[i].dtype)) return -1;
            }
            p->n_overrides = (int)ov->n_items;
        }
        snprintf(p->spelled, sizeof p->spelled, "%s",
                 pre && pre->type == JSON_STRING ? pre->str : "custom");
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
                s->mode = i;
                if (i == AMPX_SCALER_NONE) s->init_scale = 1.0f;
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
        s->init_scale = 1.0f;
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
    s->growth_factor          = (float)gf;
    s->backoff_factor         = (float)bf;
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
// Resolution: each node's dtype, and the casts the dense layers need

static op_class class_of(const node *n) {
    switch (n->kind) {
    case NODE_DENSE: return CLASS_DENSE;
    case NODE_ACT: return CLASS_ACTIVATION;
    case NODE_LAYERNORM: return CLASS_LAYERNORM;
    case NODE_ADD: return CLASS_ADD;
    default: return CLASS_LOSS;
    }
}

static ampx_dtype wider(ampx_dtype a, ampx_dtype b) {
    return a == b ? a : AMPX_F32;
}

/* The dtype a node runs in, and why; in0/in1 are its inputs' dtypes. */
static ampx_dtype node_dtype(const ampx_model *m, const node *n, ampx_dtype in0, ampx_dtype in1,
                             const char **why) {
    const policy *p = &m->pol;
    for (int i = 0; i < p->n_overrides; i++)
        if (!fnmatch(p->overrides[i].glob, n->name, 0)) {
            *why = "per-layer override";
            return p->overrides[i].dtype;
        }
    if (n->kind == NODE_LOSS) {
        *why = "losses run in f32";
        return AMPX_F32;
    }
    int cd = p->class_dtype[class_of(n)];
    if (cd == CLASS_COMPUTE) {
        *why = "op class in compute_ops";
        return p->compute;
    }
    if (cd >= 0) {
        *why = "op class in f32_ops";
        return (ampx_dtype)cd;
    }
    switch (n->kind) {
    case NODE_DENSE:
        if (n->is_output) {
            *why = "output layer: the policy's output dtype";
            return p->output;
        }
        *why = "dense: the compute dtype";
        return p->compute;
    case NODE_LAYERNORM: *why = "norms run in f32"; return AMPX_F32;
    case NODE_ADD: *why = "follows its inputs"; return wider(in0, in1);
    default: *why = "follows its input"; return in0;
    }
}

int policy_resolve(ampx_model *m, char *err, size_t cap) {
    /* The output layer: the dense node the loss reads, through activations if any. */
    int o = m->logits;
    while (o >= 0 && m->nodes[o].kind == NODE_ACT)
        o = m->nodes[o].inputs[0];
    if (o >= 0 && m->nodes[o].kind == NODE_DENSE) m->nodes[o].is_output = 1;

    node *out = malloc(sizeof(node) * MODEL_MAX_NODES);
    int map[MODEL_MAX_NODES];
    if (!out) {
        snprintf(err, cap, "%s: out of memory", m->file);
        return -1;
    }
    int n_out = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        node n = m->nodes[i];
        for (int k = 0; k < n.n_inputs; k++)
            n.inputs[k] = map[n.inputs[k]];
        if (n.kind != NODE_INPUT && n.kind != NODE_LABELS) {
            const char *why = NULL;
            ampx_dtype in1  = n.n_inputs > 1 ? out[n.inputs[1]].dtype : AMPX_F32;
            n.dtype         = node_dtype(m, &n, out[n.inputs[0]].dtype, in1, &why);
            n.why           = why;
            /* Dense layers (and activations given a dtype explicitly) read their input in
             * their own dtype: a cast node goes in front. */
            int needs_cast =
                n.kind == NODE_DENSE || (n.kind == NODE_ACT && strcmp(why, "follows its input"));
            if (needs_cast && out[n.inputs[0]].dtype != n.dtype) {
                char cname[MODEL_NAME_MAX];
                snprintf(cname, sizeof cname, "%.50s->%s", out[n.inputs[0]].name,
                         dtype_name(n.dtype));
                int found = -1;
                for (int k = 0; k < n_out; k++)
                    if (!strcmp(out[k].name, cname)) found = k;
                if (found < 0) {
                    if (n_out >= MODEL_MAX_NODES) {
                        snprintf(err, cap, "%s: too many nodes after inserting casts", m->file);
                        free(out);
                        return -1;
                    }
                    node *cn = &out[n_out];
                    memset(cn, 0, sizeof *cn);
                    snprintf(cn->name, sizeof cn->name, "%s", cname);
                    cn->kind      = NODE_CAST;
                    cn->n_inputs  = 1;
                    cn->inputs[0] = n.inputs[0];
                    cn->cols      = out[n.inputs[0]].cols;
                    cn->dtype     = n.dtype;
                    cn->line      = n.line;
                    cn->col       = n.col;
                    cn->why       = "cast inserted by the policy";
                    found         = n_out++;
                }
                n.inputs[0] = found;
            }
        }
        if (n_out >= MODEL_MAX_NODES) {
            snprintf(err, cap, "%s: too many nodes after inserting casts", m->file);
            free(out);
            return -1;
        }
        map[i]       = n_out;
        out[n_out++] = n;
    }
    memcpy(m->nodes, out, sizeof(node) * (size_t)n_out);
    m->n_nodes = n_out;
    m->input   = map[m->input];
    m->labels  = map[m->labels];
    m->logits  = map[m->logits];
    m->loss    = map[m->loss];
    free(out);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Describe

static void linef(ampx_line_fn line, void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void linef(ampx_line_fn line, void *user, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    line(user, buf);
}

void ampx_model_describe(const ampx_model *m, ampx_line_fn line, void *user) {
    const policy *p        = &m->pol;
    const scaler_config *s = &m->scaler;
    linef(line, user, "model %s (%s)", m->name, m->file);
    linef(line, user, "policy %s: params %s, compute %s, output %s", p->spelled,
          dtype_name(p->params), dtype_name(p->compute), dtype_name(p->output));
    static const char *const modes[] = {"none", "static", "dynamic"};
    if (s->mode == AMPX_SCALER_DYNAMIC)
        linef(line, user,
              "scaler dynamic: init_scale %g, growth_factor %g every %d applied steps, "
              "backoff_factor %g, hysteresis %d%s, min_scale %g, max_scale %g, on_min_scale %s, "
              "max_consecutive_skips %d",
              s->init_scale, s->growth_factor, s->growth_interval, s->backoff_factor, s->hysteresis,
              s->consecutive_hysteresis ? " (consecutive)" : "", s->min_scale, s->max_scale,
              s->on_min_scale_error ? "error" : "skip", s->max_consecutive_skips);
    else
        linef(line, user, "scaler %s: scale %g; steps with non-finite gradients are skipped",
              modes[s->mode], s->init_scale);
    linef(line, user, "%-28s %-6s %-9s %s", "tensor", "dtype", "features", "why");
    int casts = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const node *n   = &m->nodes[i];
        const char *why = n->kind == NODE_INPUT    ? "input"
                          : n->kind == NODE_LABELS ? "labels"
                                                   : n->why;
        char from[128]  = "";
        if (n->kind == NODE_CAST) {
            casts++;
            snprintf(from, sizeof from, " (%s %s -> %s)", m->nodes[n->inputs[0]].name,
                     dtype_name(m->nodes[n->inputs[0]].dtype), dtype_name(n->dtype));
        }
        linef(line, user, "%-28s %-6s %-9lld %s%s", n->kind == NODE_LOSS ? "loss" : n->name,
              dtype_name(n->dtype), (long long)n->cols, why, from);
        if (n->kind == NODE_DENSE || n->kind == NODE_LAYERNORM) {
            int dense  = n->kind == NODE_DENSE;
            int64_t in = m->nodes[n->inputs[0]].cols;
            char pn[MODEL_NAME_MAX + 16], shape[48], copy[96] = "";
            if (dense && n->dtype != AMPX_F32)
                snprintf(copy, sizeof copy, "; %s working copy written by the optimizer",
                         dtype_name(n->dtype));
            snprintf(pn, sizeof pn, "  %s.%s", n->name, dense ? "weight" : "gamma");
            snprintf(shape, sizeof shape, dense ? "%lldx%lld" : "%lld",
                     (long long)(dense ? in : n->cols), (long long)n->cols);
            linef(line, user, "%-28s %-6s %-9s master weight, gradient f32%s", pn, "f32", shape,
                  copy);
            if (!dense || n->bias) {
                snprintf(pn, sizeof pn, "  %s.%s", n->name, dense ? "bias" : "beta");
                linef(line, user,
                      "%-28s %-6s %-9lld master weight, gradient f32 (read as f32 by the op)", pn,
                      "f32", (long long)n->cols);
            }
        }
    }
    linef(line, user, "casts inserted: %d", casts);
    linef(line, user, "optimizer %s: master weights, gradients as accumulated and %s in f32%s",
          m->opt.kind == OPT_ADAMW ? "adamw" : "sgd",
          m->opt.kind == OPT_ADAMW ? "m and v" : "momentum",
          m->opt.stochastic_rounding ? "; working copies stochastically rounded" : "");
}
