/* describe.c — `ampx policy`'s description of a loaded model (ampx_model_describe): every
 * tensor with its dtype and the policy's reason, every cast inserted, each weight's working
 * copy (kept, or cast on use as train.weight_copies decides: memory.c) and weight decay, the
 * scaler and the optimizer state dtypes. */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops.h"
#include "passes/model.h"

// ---------------------------------------------------------------------------------------
// Describe

/* "128" for one axis per example, "[28, 28]" otherwise; a parameter's full shape "2x128". */
static void features(const g_value *v, char *buf, size_t cap) {
    int first = v->batched ? 1 : 0;
    if (v->ndim - first == 1) {
        snprintf(buf, cap, "%lld", (long long)v->dims[first]);
        return;
    }
    size_t n = 0;
    buf[0]   = 0;
    for (int i = first; i < v->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld",
                              i == first ? (v->batched ? "[" : "") : (v->batched ? ", " : "x"),
                              (long long)v->dims[i]);
    if (v->batched && n < cap) snprintf(buf + n, cap - n, "]");
}

/* Parameter v's line; wd: the optimizer's weight decay, said per weight when it is not 0;
 * cast: the working copies are cast on use (train.weight_copies), not kept. */
static void describe_param(const g_graph *g, int v, float wd, int cast, ampx_line_fn line,
                           void *user) {
    const g_value *p = &g->values[v];
    char pn[G_NAME_MAX + 4], shape[64], extra[128] = "";
    snprintf(pn, sizeof pn, "  %s", p->name);
    features(p, shape, sizeof shape);
    if (p->role == ROLE_STATE) {
        linef(line, user,
              "%-28s %-6s %-9s running statistic, f32 (updated in training, saved in "
              "checkpoints)",
              pn, "f32", shape);
        return;
    }
    size_t n = 0;
    if (p->copy >= 0)
        n = (size_t)snprintf(extra, sizeof extra, "; %s working copy %s",
                             ampx_dtype_name(g->values[p->copy].dtype),
                             cast ? "cast from it where read" : "written by the optimizer");
    else if (p->ndim == 1)
        n = (size_t)snprintf(extra, sizeof extra, " (read as f32 by the op)");
    if (wd != 0 && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, p->decay ? "; weight decay %g" : "; no weight decay",
                 (double)wd);
    linef(line, user, "%-28s %-6s %-9s master weight, gradient f32%s", pn, "f32", shape, extra);
}

/* The three fp8 tensors of a matmul_fp8 node: its operands' codes and its output's
 * gradient's, each with its slot of the scaling state and why policy.fp8 chose the node. */
static void fp8_lines(const ampx_model *m, const g_node *n, ampx_line_fn line, void *user) {
    const g_graph *g    = &m->graph;
    const fp8_config *f = &m->cfg.pol.fp8;
    char why[128];
    snprintf(why, sizeof why, "policy.fp8.ops \"%s\"", n->a.conv ? "conv" : "dense");
    for (int k = 0; k < f->n_layers; k++)
        if (!fnmatch(f->layers[k], n->name, 0) ||
            !fnmatch(f->layers[k], g->values[n->out[0]].name, 0)) {
            snprintf(why, sizeof why, "policy.fp8.layers \"%s\"", f->layers[k]);
            break;
        }
    const char *what[3] = {"input", "weight", "output's gradient, quantized by the backward"};
    for (int k = 0; k < 3; k++) {
        char name[G_NAME_MAX + 8], shape[64];
        const g_value *v = &g->values[k < 2 ? n->out[1 + k] : n->out[0]];
        snprintf(name, sizeof name, "%s", k < 2 ? v->name : "");
        if (k == 2) snprintf(name, sizeof name, "%.80s.grad_q", n->name);
        features(v, shape, sizeof shape);
        ampx_dtype dt = k < 2 ? v->dtype : (ampx_dtype)n->a.fp8_grad;
        linef(line, user, "  %-26s %-6s %-9s fp8 slot %d: %s's %s (%s)", name, ampx_dtype_name(dt),
              shape, n->a.fp8_slot + k, n->name, what[k], why);
    }
}

/* The parameters node n reads (a bias node: its matmul's too), each once (shown). */
static void node_params(const ampx_model *m, const g_node *n, char *shown, int cast,
                        ampx_line_fn line, void *user) {
    const g_graph *g = &m->graph;
    /* the parameters this node reads (a bias node: its matmul's too) */
    const g_node *owners[2] = {n, NULL};
    int prod                = g->values[n->in[0]].producer;
    if (n->op == OP_BIAS && prod >= 0 &&
        (g->nodes[prod].op == OP_MATMUL || g->nodes[prod].op == OP_MATMUL_FP8) &&
        !g->nodes[prod].a.conv)
        owners[0] = &g->nodes[g->values[n->in[0]].producer], owners[1] = n;
    for (int o = 0; o < 2 && owners[o]; o++)
        for (int k = 0; k < owners[o]->n_in; k++) {
            int v = owners[o]->in[k];
            if (v < 0) continue;
            if (g->values[v].master >= 0) v = g->values[v].master;
            const g_value *pv = &g->values[v];
            if ((pv->role != ROLE_PARAM && pv->role != ROLE_STATE) || (shown && shown[v])) continue;
            if (shown) shown[v] = 1;
            describe_param(g, v, m->cfg.opt.weight_decay, cast, line, user);
        }
}

void ampx_model_describe(const ampx_model *m, ampx_line_fn line, void *user) {
    const policy *p        = &m->cfg.pol;
    const scaler_config *s = &m->cfg.scaler;
    const g_graph *g       = &m->graph;
    int cast               = model_casts_copies(m);
    linef(line, user, "model %s (%s)", m->cfg.name_shown, m->cfg.file);
    linef(line, user, "policy %s: params %s, compute %s, output %s", p->spelled,
          ampx_dtype_name(p->params), ampx_dtype_name(p->compute), ampx_dtype_name(p->output));
    static const char *const modes[] = {"none", "static", "dynamic"};
    if (s->mode == AMPX_SCALER_DYNAMIC)
        linef(line, user,
              "scaler dynamic: init_scale %g, growth_factor %g every %d applied steps, "
              "backoff_factor %g, hysteresis %d%s, min_scale %g, max_scale %g, on_min_scale %s, "
              "max_consecutive_skips %d",
              scaler_start_scale(s), s->growth_factor, s->growth_interval, s->backoff_factor,
              s->hysteresis, s->consecutive_hysteresis ? " (consecutive)" : "", s->min_scale,
              s->max_scale, s->on_min_scale_error ? "error" : "skip", s->max_consecutive_skips);
    else /* the scale the run starts from (1 without a scaler), not the unused init_scale */
        linef(line, user, "scaler %s: scale %g; steps with non-finite gradients are skipped",
              modes[s->mode], scaler_start_scale(s));
    linef(line, user, "%-28s %-6s %-9s %s", "tensor", "dtype", "features", "why");
    char shape[64];
    for (int i = 0; i < g->n_inputs; i++) {
        const g_value *v = &g->values[g->inputs[i]];
        features(v, shape, sizeof shape);
        linef(line, user, "%-28s %-6s %-9s %s", v->name, ampx_dtype_name(v->dtype),
              v->ndim > 1 ? shape : "", g->inputs[i] == g->labels ? "labels" : "input");
    }
    char *shown = calloc((size_t)g->n_values, 1);
    int casts   = 0;
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *n  = &g->nodes[i];
        const g_value *y = &g->values[n->out[0]];
        char from[160]   = "";
        if (n->op == OP_CAST) {
            casts++;
            const g_value *x = &g->values[n->in[0]];
            snprintf(from, sizeof from, " (%s %s -> %s)", x->name, ampx_dtype_name(x->dtype),
                     ampx_dtype_name(y->dtype));
        }
        /* which form an attention layer takes: the backend's fused op or the composite */
        if (n->op == OP_ATTENTION)
            snprintf(from, sizeof from, "; fused attention (attn_fwd, attn_bwd), lse %s",
                     ampx_dtype_name(g->values[n->out[1]].dtype));
        if (n->op == OP_SPLIT_HEADS && n->a.parts == 3)
            snprintf(from, sizeof from, "; attention as its composite (gemm, softmax, permute)");
        /* a dense layer's matmul and bias print as one line, under the layer's name (a
         * convolution's product prints as its rows, with its weight) */
        int mm     = n->op == OP_MATMUL || n->op == OP_MATMUL_FP8;
        int hidden = mm && !n->a.conv && strcmp(y->name, n->name);
        if (n->op == OP_MATMUL_FP8) fp8_lines(m, n, line, user);
        features(y, shape, sizeof shape);
        /* a norm or softmax writing its reader's dtype: the dtype it runs in, then what it
         * writes */
        if (n->why == WHY_WRITES_READER)
            snprintf(from, sizeof from, " (%s)", ampx_dtype_name(y->dtype));
        ampx_dtype column = n->why == WHY_WRITES_READER ? n->dtype : y->dtype;
        if (!hidden)
            linef(line, user, "%-28s %-6s %-9s %s%s", y->name, ampx_dtype_name(column),
                  n->op == OP_XENT || n->op == OP_MSE ? "1" : shape, policy_why(n->why), from);
        if (hidden) continue;
        /* the other outputs of the head split (k and v): the same dtype, the same reason */
        for (int k = 1; n->op == OP_SPLIT_HEADS && k < n->n_out; k++) {
            const g_value *o = &g->values[n->out[k]];
            features(o, shape, sizeof shape);
            linef(line, user, "%-28s %-6s %-9s %s", o->name, ampx_dtype_name(o->dtype), shape,
                  policy_why(n->why));
        }
        node_params(m, n, shown, cast, line, user);
    }
    free(shown);
    linef(line, user, "casts inserted: %d", casts);
    const fp8_config *f8 = &m->cfg.pol.fp8;
    if (g->n_fp8)
        linef(line, user,
              "fp8: %d products of weights, %d tensors with their own scales (%s), amax history "
              "%d, amax %s, margin %d; the output layer, norms, softmax and attention keep the "
              "policy's dtypes",
              g->n_fp8 / 3, g->n_fp8,
              f8->hybrid ? "hybrid: e4m3 forward, e5m2 gradients" : "e4m3 forward and backward",
              f8->history, f8->algo == AMPX_FP8_AMAX_MAX ? "max" : "most_recent", f8->margin);
    const optimizer_config *o = &m->cfg.opt;
    linef(line, user, "optimizer %s: master weights, gradients as accumulated and %s in f32%s",
          o->kind == OPT_ADAMW ? "adamw" : "sgd", o->kind == OPT_ADAMW ? "m and v" : "momentum",
          o->stochastic_rounding ? "; working copies stochastically rounded" : "");
}

int ampx_model_products(const ampx_model *m, const char **names, ampx_dtype *dtypes, int cap) {
    const g_graph *g = &m->graph;
    int n            = 0;
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *nd = &g->nodes[i];
        if (nd->op != OP_MATMUL && nd->op != OP_BMM && nd->op != OP_ATTENTION) continue;
        int seen = 0;
        for (int k = 0; k < n && k < cap && !seen; k++)
            seen = !strcmp(names[k], nd->name);
        if (seen) continue;
        if (n < cap) names[n] = nd->name, dtypes[n] = nd->dtype;
        n++;
    }
    return n;
}
