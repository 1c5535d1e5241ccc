/* elementwise.c — ops that map each element on its own: add, mul, scale, cast, activations
 * and dropout. All compute in f32 inside the backend and round once to the output dtype. */
#include <math.h>
#include <stdio.h>

#include "graph/ops.h"

static int same_as_first(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *a = &g->values[n->in[0]];
    for (int i = 1; i < n->n_in; i++) {
        const g_value *b = &g->values[n->in[i]];
        if (!g_same_shape(a, b) && a->ndim == 2 && b->ndim == 2 && a->batched && b->batched) {
            snprintf(
                e->msg, sizeof e->msg,
                "shape mismatch: \"%s\" has %lld features (line %d) but \"%s\" has %lld (line %d)",
                a->name, (long long)a->dims[1], a->line, b->name, (long long)b->dims[1], b->line);
            e->input = -2;
            return -1;
        }
        if (!g_same_shape(a, b)) {
            char sa[64], sb[64];
            g_shape_str(a, sa, sizeof sa);
            g_shape_str(b, sb, sizeof sb);
            snprintf(e->msg, sizeof e->msg, "shape mismatch: \"%s\" has shape %s but \"%s\" has %s",
                     a->name, sa, b->name, sb);
            e->input = i;
            return -1;
        }
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    return 0;
}

/* Emits a one-input node of kind op from dy into a fresh gradient of `to` (dtype of `to`),
 * and contributes it. */
static int emit_unary(g_graph *g, int self, int op, const int *ins, int n_in, int to,
                      const g_attrs *a) {
    int dx = g_new_grad(g, to, g->values[to].dtype);
    if (dx < 0 || g_emit(g, self, op, ins, n_in, &dx, 1, a) < 0) return -1;
    return g_contribute(g, to, dx, self);
}

// ---------------------------------------------------------------------------------------
// add: y = a + b. Its backward hands dy to both inputs unchanged; autodiff also uses it to
// sum two contributions to one gradient (in f32).

static ampx_status add_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_add_args a = {.size  = sizeof a,
                       .rows  = 1,
                       .cols  = gx_numel(x, n->out[0]),
                       .alpha = 1,
                       .beta  = 1,
                       .a     = gx_tensor(x, n->in[0]),
                       .b     = gx_tensor(x, n->in[1]),
                       .y     = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_ADD, &a);
}

static int add_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy          = g_grad_of(g, n->out[0]);
    if (dy < 0) return 0;
    for (int k = 0; k < 2; k++)
        if (g_needs_grad(g, n->in[k]) && g_contribute(g, n->in[k], dy, self)) return -1;
    return 0;
}

const g_rule g_rule_add = {"add", {AMPX_OP_ADD, AMPX_OP_COUNT}, same_as_first, add_fwd, add_bwd};

// ---------------------------------------------------------------------------------------
// mul: y = a * b; da = dy * b, db = dy * a

static ampx_status mul_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_mul_args a = {.size = sizeof a,
                       .rows = 1,
                       .cols = gx_numel(x, n->out[0]),
                       .a    = gx_tensor(x, n->in[0]),
                       .b    = gx_tensor(x, n->in[1]),
                       .y    = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_MUL, &a);
}

static int mul_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy          = g_grad_of(g, n->out[0]);
    if (dy < 0) return 0;
    for (int k = 0; k < 2; k++) {
        int in = n->in[k], ins[2] = {dy, n->in[1 - k]};
        if (g_needs_grad(g, in) && emit_unary(g, self, OP_MUL, ins, 2, in, NULL)) return -1;
    }
    return 0;
}

const g_rule g_rule_mul = {"mul", {AMPX_OP_MUL, AMPX_OP_COUNT}, same_as_first, mul_fwd, mul_bwd};

// ---------------------------------------------------------------------------------------
// scale: y = alpha x; dx = alpha dy

static ampx_status scale_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_scale_args a = {.size  = sizeof a,
                         .n     = gx_numel(x, n->out[0]),
                         .alpha = n->a.alpha,
                         .x     = gx_tensor(x, n->in[0]),
                         .y     = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_SCALE, &a);
}

static int scale_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    return emit_unary(g, self, OP_SCALE, &dy, 1, in, &n->a);
}

const g_rule g_rule_scale = {
    "scale", {AMPX_OP_SCALE, AMPX_OP_COUNT}, same_as_first, scale_fwd, scale_bwd};

// ---------------------------------------------------------------------------------------
// cast: y = x rounded to nearest even (or widened exactly); dx = dy cast back

static ampx_status cast_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_cast_args a = {.size = sizeof a,
                        .n    = gx_numel(x, n->out[0]),
                        .src  = gx_tensor(x, n->in[0]),
                        .dst  = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_CAST, &a);
}

static int cast_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    return emit_unary(g, self, OP_CAST, &dy, 1, in, NULL);
}

const g_rule g_rule_cast = {
    "cast", {AMPX_OP_CAST, AMPX_OP_COUNT}, same_as_first, cast_fwd, cast_bwd};

// ---------------------------------------------------------------------------------------
// act: y = f(x); dx = dy f'(x), from the forward input

static ampx_status act_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_act_args a = {.size    = sizeof a,
                       .act     = (uint32_t)n->a.act,
                       .n       = gx_numel(x, n->out[0]),
                       .x       = gx_tensor(x, n->in[0]),
                       .y_or_dx = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_ACT_FWD, &a);
}

static int act_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int ins[2] = {in, dy};
    return emit_unary(g, self, OP_ACT_BWD, ins, 2, in, &n->a);
}

const g_rule g_rule_act = {
    "act", {AMPX_OP_ACT_FWD, AMPX_OP_COUNT}, same_as_first, act_fwd, act_bwd};

/* dx = dy f'(x): in x, dy; out dx */
static ampx_status act_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_act_args a = {.size    = sizeof a,
                       .act     = (uint32_t)n->a.act,
                       .n       = gx_numel(x, n->out[0]),
                       .x       = gx_tensor(x, n->in[0]),
                       .dy      = gx_tensor(x, n->in[1]),
                       .y_or_dx = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_ACT_BWD, &a);
}

const g_rule g_rule_act_bwd = {
    "act_bwd", {AMPX_OP_ACT_BWD, AMPX_OP_COUNT}, NULL, act_bwd_fwd, NULL};

// ---------------------------------------------------------------------------------------
// dropout: y = keep(i) ? x / (1 - rate) : 0 with the counter-based mask of (seed, i); the
// seed is a function of the run's seed, the step, the micro-batch and the forward node, so
// the backward (the same op on dy, same seed) drops the same elements, every backend agrees
// and a resumed run repeats a straight one. Off outside training: y = x.

static ampx_status dropout_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    if (!gx_training(x) || n->a.rate <= 0) {
        ampx_cast_args c = {.size = sizeof c,
                            .n    = gx_numel(x, n->out[0]),
                            .src  = gx_tensor(x, n->in[0]),
                            .dst  = gx_tensor(x, n->out[0])};
        return gx_call(x, n, AMPX_OP_CAST, &c);
    }
    double t            = floor((double)n->a.rate * 4294967296.0);
    ampx_dropout_args a = {.size      = sizeof a,
                           .threshold = t > 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t,
                           .n         = gx_numel(x, n->out[0]),
                           .seed      = gx_dropout_seed(x, n),
                           .offset    = 0,
                           .scale     = (float)(1.0 / (1.0 - (double)n->a.rate)),
                           .x         = gx_tensor(x, n->in[0]),
                           .y         = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_DROPOUT, &a);
}

static int dropout_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy = g_grad_of(g, n->out[0]), in = n->in[0];
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    return emit_unary(g, self, OP_DROPOUT, &dy, 1, in, &n->a);
}

const g_rule g_rule_dropout = {"dropout",
                               {AMPX_OP_DROPOUT, AMPX_OP_CAST, AMPX_OP_COUNT},
                               same_as_first,
                               dropout_fwd,
                               dropout_bwd};
