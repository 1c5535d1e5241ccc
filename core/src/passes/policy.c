/* policy.c — the precision policy pass over the forward graph: each node's dtype and the
 * reason for it (per-layer override > op class list > the op's default, torch.autocast's
 * defaults: GEMMs in the compute dtype, the output layer in the policy's output dtype, norms,
 * softmax, reductions and losses in f32, the rest following their inputs), working copies of
 * the weights that a low-precision GEMM reads, and cast nodes in front of the nodes that read
 * their input in their own dtype. `ampx policy`'s description of the result is describe.c's. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/edit_distance.h"
#include "base/error.h"
#include "graph/ops.h"
#include "passes/model.h"

const char *policy_why(g_why why) {
    switch (why) {
    case WHY_OVERRIDE: return "per-layer override";
    case WHY_CLASS_COMPUTE: return "op class in compute_ops";
    case WHY_CLASS_F32: return "op class in f32_ops";
    case WHY_OUTPUT: return "output layer: the policy's output dtype";
    case WHY_COMPUTE: return "dense: the compute dtype";
    case WHY_F32_OP: return "norms, softmax, reductions and losses run in f32";
    case WHY_EMBED: return "embedding: rows of its f32 table";
    case WHY_FOLLOWS: return "follows its input";
    case WHY_WIDER: return "follows its inputs";
    case WHY_CAST: return "cast inserted by the policy";
    case WHY_BACKWARD: return "backward of its forward node";
    case WHY_WRITES_READER:
        return "runs in f32, writes the dtype of the product that reads it, no cast";
    case WHY_RECOMPUTE: return "recomputed in the backward (train.recompute)";
    case WHY_COPY: return "working copy cast from its master on use (train.weight_copies)";
    case WHY_FP8: return "operands in fp8 (policy.fp8), output in the compute dtype";
    case WHY_NONE: break;
    }
    return "";
}

static int class_of(const g_node *n) {
    if (n->op == OP_MATMUL && n->a.conv) return CLASS_CONV;
    switch (n->op) {
    case OP_POOL: return CLASS_POOL;
    case OP_MATMUL:
    case OP_BMM:
    case OP_ATTENTION: return CLASS_DENSE;
    case OP_ACT: return CLASS_ACTIVATION;
    case OP_LAYERNORM: return CLASS_LAYERNORM;
    case OP_BATCHNORM: return CLASS_BATCHNORM;
    case OP_ADD: return CLASS_ADD;
    case OP_MUL: return CLASS_MUL;
    case OP_SOFTMAX: return CLASS_SOFTMAX;
    case OP_REDUCE: return CLASS_REDUCE;
    case OP_DROPOUT: return CLASS_DROPOUT;
    case OP_XENT:
    case OP_MSE: return CLASS_LOSS;
    default: return -1;
    }
}

static ampx_dtype wider(ampx_dtype a, ampx_dtype b) {
    return a == b ? a : AMPX_F32;
}

/* The first override whose glob matches node n: its name as the model writes it, or the name
 * of one of its outputs, as `ampx policy` lists them (h0.attn.probs, h0.attn.k); -1: none. */
static int matches(const g_graph *g, const char *glob, const g_node *n) {
    if (!fnmatch(glob, n->name, 0)) return 1;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && !fnmatch(glob, g->values[n->out[k]].name, 0)) return 1;
    return 0;
}

static int override_of(const g_graph *g, const policy *p, const g_node *n) {
    for (int i = 0; i < p->n_overrides; i++)
        if (matches(g, p->overrides[i].glob, n)) return i;
    return -1;
}

/* The dtype node n runs in, and why; in0/in1 are its inputs' dtypes (after the pass), ov the
 * override that matches it (-1: none). */
static ampx_dtype decide(const policy *p, const g_node *n, int ov, int is_output, ampx_dtype in0,
                         ampx_dtype in1, g_why *why) {
    int op = n->op;
    if (op == OP_XENT || op == OP_MSE) {
        *why = WHY_F32_OP;
        return AMPX_F32;
    }
    if (op == OP_EMBED) {
        *why = WHY_EMBED;
        return AMPX_F32;
    }
    if (op == OP_RESHAPE || op == OP_TRANSPOSE || op == OP_BIAS) {
        *why = WHY_FOLLOWS; /* views and the bias add keep their input's dtype */
        return in0;
    }
    if (ov >= 0) {
        *why = WHY_OVERRIDE;
        return p->overrides[ov].dtype;
    }
    int k = class_of(n), cd = k >= 0 ? p->class_dtype[k] : CLASS_DEFAULT;
    if (cd == CLASS_COMPUTE) {
        *why = WHY_CLASS_COMPUTE;
        return p->compute;
    }
    if (cd >= 0) {
        *why = WHY_CLASS_F32;
        return (ampx_dtype)cd;
    }
    switch (op) {
    case OP_MATMUL:
        *why = is_output ? WHY_OUTPUT : WHY_COMPUTE;
        return is_output ? p->output : p->compute;
    case OP_BMM:
    case OP_ATTENTION: *why = WHY_COMPUTE; return p->compute;
    case OP_LAYERNORM:
    case OP_BATCHNORM:
    case OP_SOFTMAX:
    case OP_REDUCE: *why = WHY_F32_OP; return AMPX_F32;
    case OP_ADD:
    case OP_MUL:
    case OP_CONCAT: *why = WHY_WIDER; return wider(in0, in1);
    default: *why = WHY_FOLLOWS; return in0;
    }
}

/* How many of node n's first inputs it reads in its own dtype (casts go in front): GEMMs
 * always (both operands of a product of activations), one-input elementwise ops when their
 * dtype was chosen for them. */
static int casts_inputs(const g_node *n, g_why why) {
    if (n->op == OP_MATMUL || n->op == OP_ATTENTION) return 1;
    if (n->op == OP_BMM) return 2;
    int elementwise = n->op == OP_ACT || n->op == OP_DROPOUT || n->op == OP_SCALE;
    return elementwise && why != WHY_FOLLOWS;
}

/* The output layer: the matmul the loss reads through bias and activations (-1: none). */
static int output_node(const g_graph *g) {
    for (int v = g->logits; v >= 0 && g->values[v].producer >= 0;) {
        const g_node *n = &g->nodes[g->values[v].producer];
        if (n->op == OP_MATMUL) return g->values[v].producer;
        if (n->op != OP_BIAS && n->op != OP_ACT) break;
        v = n->in[0];
    }
    return -1;
}

/* Points the inputs node n reads in its own dtype d at casts of them, one cast per (value,
 * dtype), shared by every node that needs it. */
static int insert_casts(g_graph *g, g_node *n, g_why why, ampx_dtype d, ampx_err e) {
    for (int ci = 0; ci < casts_inputs(n, why); ci++) {
        if (g->values[n->in[ci]].dtype == d) continue;
        int src = n->in[ci], found = -1;
        for (int k = 0; k < g->n_nodes && found < 0; k++)
            if (g->nodes[k].op == OP_CAST && g->nodes[k].in[0] == src &&
                g->values[g->nodes[k].out[0]].dtype == d)
                found = g->nodes[k].out[0];
        if (found < 0) {
            char cname[G_NAME_MAX];
            snprintf(cname, sizeof cname, "%.50s->%s", g->values[src].name, ampx_dtype_name(d));
            int cv = g_add_value_like(g, cname, ROLE_ACTIVATION, d, src);
            int id = cv < 0 ? -1 : g_add_node(g, OP_CAST, &src, 1, &cv, 1, NULL, cname);
            if (id < 0) return err_set(e, "too many nodes after inserting casts");
            g->nodes[id].dtype = d;
            g->nodes[id].why   = WHY_CAST;
            g->nodes[id].line  = n->line;
            g->nodes[id].col   = n->col;
            found              = cv;
        }
        n->in[ci] = found;
    }
    return 0;
}

/* A GEMM in dtype d below f32 reads its weight's working copy, which the optimizer writes:
 * made on first use, refused when nodes sharing the weight read it in different dtypes. */
static int working_copy(g_graph *g, g_node *n, ampx_dtype d, ampx_err e) {
    if (n->op != OP_MATMUL || d == AMPX_F32) return 0;
    g_value *w = &g->values[n->in[1]];
    if (w->copy >= 0 && g->values[w->copy].dtype != d) {
        err_set(e, "weight \"%s\" is read in %s and %s by nodes sharing it", w->name,
                ampx_dtype_name(g->values[w->copy].dtype), ampx_dtype_name(d));
        return -1;
    }
    if (w->copy < 0) {
        int master = n->in[1], cv = g_add_value_like(g, w->name, ROLE_PARAM, d, master);
        if (cv < 0) return err_set(e, "too many values");
        g->values[cv].master   = master;
        g->values[master].copy = cv;
    }
    n->in[1] = g->values[n->in[1]].copy;
    return 0;
}

/* The dtypes of node n's outputs (its id: id): the node's dtype; statistics stay f32; a
 * loss's gradient output takes the dtype of the prediction it is the gradient of. */
static void output_dtypes(g_graph *g, const g_node *n, int id, ampx_dtype d) {
    for (int k = 0; k < n->n_out; k++)
        g->values[n->out[k]].producer = id;
    g->values[n->out[0]].dtype = d;
    if (n->op == OP_SPLIT_HEADS)
        for (int k = 1; k < n->n_out; k++)
            g->values[n->out[k]].dtype = d;
    if (n->op == OP_XENT || n->op == OP_MSE) g->values[n->out[1]].dtype = g->values[n->in[0]].dtype;
    if (n->op == OP_RESHAPE) g->values[n->out[0]].dtype = g->values[n->in[0]].dtype;
    if (n->op == OP_ATTENTION) g->values[n->out[1]].dtype = AMPX_F32; /* lse */
    if (n->op == OP_LAYERNORM || n->op == OP_BATCHNORM) {
        g->values[n->out[1]].dtype = AMPX_F32;
        g->values[n->out[2]].dtype = AMPX_F32;
    }
    if (n->op == OP_XENT || n->op == OP_MSE) g->loss_node = id;
}

/* Appends forward node n (from the graph before the pass) with its dtype and reason, after
 * the casts it needs; used[i] is set for each override that set a dtype. Returns -1 with e
 * set. */
static int resolve_node(g_graph *g, const policy *p, g_node n, int is_output, uint8_t *used,
                        ampx_err e) {
    ampx_dtype in0 = g->values[n.in[0]].dtype;
    ampx_dtype in1 = n.n_in > 1 && n.in[1] >= 0 ? g->values[n.in[1]].dtype : in0;
    for (int k = 2; n.op == OP_CONCAT && k < n.n_in; k++)
        in1 = wider(in1, g->values[n.in[k]].dtype);
    g_why why    = WHY_NONE;
    int ov       = override_of(g, p, &n);
    ampx_dtype d = decide(p, &n, ov, is_output, in0, in1, &why);
    if (why == WHY_OVERRIDE) used[ov] = 1;
    if (n.op == OP_BIAS && n.in[0] >= 0 && g->values[n.in[0]].producer >= 0 &&
        g->nodes[g->values[n.in[0]].producer].op == OP_MATMUL)
        why = g->nodes[g->values[n.in[0]].producer].why; /* reads as its dense layer */
    if (insert_casts(g, &n, why, d, e) || working_copy(g, &n, d, e)) return -1;
    n.dtype = d;
    n.why   = why;
    int id  = g_add_node(g, n.op, n.in, n.n_in, n.out, n.n_out, &n.a, n.name);
    if (id < 0) return err_set(e, "too many nodes after inserting casts");
    g->nodes[id] = n;
    output_dtypes(g, &n, id, d);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Norms and softmax writing the dtype of the product that reads them

/* Layer norm, batch norm, softmax and im2col (a copy that converts) compute in f32 and round
 * once to their output's dtype, so a cast of their f32 output is the same bits as the node
 * writing the cast's dtype itself.
 * When that cast is the only reader of the output, the node writes it and the cast goes: no
 * f32 copy beside the low-precision one, and one pass over the data fewer. (The softmax's
 * backward then reads its output in that dtype too, as llm.c's does.) */
static int foldable(const g_graph *g, const g_node *c) {
    int s = c->in[0], p = g->values[s].producer, readers = 0;
    if (c->why != WHY_CAST || p < 0 || s == g->logits) return 0;
    const g_node *pn = &g->nodes[p];
    if (pn->out[0] != s || (pn->op != OP_LAYERNORM && pn->op != OP_BATCHNORM &&
                            pn->op != OP_SOFTMAX && pn->op != OP_IM2COL))
        return 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            readers += g->nodes[i].in[k] == s;
    return readers == 1;
}

/* Folds every foldable cast into its producer and drops it from the node list. */
static int fold_casts(g_graph *g) {
    int *to       = malloc(sizeof *to * (size_t)g->n_values);
    uint8_t *drop = calloc((size_t)g->n_nodes, 1);
    if (!to || !drop) {
        free(to), free(drop);
        return -1;
    }
    for (int v = 0; v < g->n_values; v++)
        to[v] = v;
    for (int i = 0; i < g->n_nodes; i++) {
        const g_node *c = &g->nodes[i];
        if (c->op != OP_CAST || !foldable(g, c)) continue;
        int s                               = c->in[0];
        g->values[s].dtype                  = g->values[c->out[0]].dtype;
        g->nodes[g->values[s].producer].why = WHY_WRITES_READER;
        g->values[c->out[0]].producer       = -1; /* read by nothing now */
        to[c->out[0]]                       = s;
        drop[i]                             = 1;
    }
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (drop[i]) continue;
        g_node *d = &g->nodes[n];
        *d        = g->nodes[i];
        for (int k = 0; k < d->n_in; k++)
            if (d->in[k] >= 0) d->in[k] = to[d->in[k]];
        for (int k = 0; k < d->n_out; k++)
            if (d->out[k] >= 0 && g->values[d->out[k]].producer == i)
                g->values[d->out[k]].producer = n;
        if (d->op == OP_XENT || d->op == OP_MSE) g->loss_node = n;
        n++;
    }
    g->n_nodes = n;
    free(to), free(drop);
    return 0;
}

/* The name of a tensor or node of g nearest to glob (for a did-you-mean), or NULL. */
static const char *nearest_name(const g_graph *g, const g_node *nodes, int n_nodes,
                                const char *glob) {
    const char *best = NULL;
    size_t bd        = 99;
    for (int i = 0; i < n_nodes; i++)
        for (int k = -1; k < nodes[i].n_out; k++) {
            if (k >= 0 && nodes[i].out[k] < 0) continue;
            const char *name = k < 0 ? nodes[i].name : g->values[nodes[i].out[k]].name;
            size_t d         = edit_distance(glob, name);
            if (d < bd) bd = d, best = name;
        }
    return bd <= 3 + strlen(glob) / 3 ? best : NULL;
}

/* The tensors and nodes attention's composite form has ("fused": false, or a backend without
 * ATTN_FWD/ATTN_BWD) and its fused node does not. */
static const char *const composite_parts[] = {"heads",   "q",       "k",     "v",
                                              "scores",  "softmax", "probs", "probs.dropout",
                                              "dropout", "context", "merge", NULL};

/* The edit distance from glob to the nearest piece of the composite attention whose fused
 * node (NAME.attention) replaces it (0: glob matches one), its name in piece; 99 for a node
 * that is not a fused attention. *base: NAME's length. */
static size_t composite_distance(const char *glob, const g_node *fused, int *base, char *piece,
                                 size_t cap) {
    const char *dot = strrchr(fused->name, '.');
    size_t best     = 99;
    if (fused->op != OP_ATTENTION || !dot) return best;
    *base = (int)(dot - fused->name);
    char name[G_NAME_MAX + 16];
    for (const char *const *k = composite_parts; *k && best; k++) {
        snprintf(name, sizeof name, "%.*s.%s", *base, fused->name, *k);
        size_t d = fnmatch(glob, name, 0) ? edit_distance(glob, name) : 0;
        if (d < best) best = d, snprintf(piece, cap, "%s", name);
    }
    return best;
}

/* The message for an override that matches no tensor: one that names (or nearly names) a piece
 * of the composite attention, where this model runs it fused, says so; else the nearest name. */
static int unmatched(const g_graph *g, const g_node *old, int n_old, const char *glob,
                     const char *place, ampx_err e) {
    const char *near = nearest_name(g, old, n_old, glob);
    size_t dn = near ? edit_distance(glob, near) : 99, dc = 99;
    int base = 0, at = -1;
    char piece[G_NAME_MAX + 16] = "", p[G_NAME_MAX + 16];
    for (int k = 0; k < n_old; k++) {
        int bk   = 0;
        size_t d = composite_distance(glob, &old[k], &bk, p, sizeof p);
        if (d < dc) dc = d, at = k, base = bk, snprintf(piece, sizeof piece, "%s", p);
    }
    if (at >= 0 && (dc == 0 || (dc < dn && dc <= 3 + strlen(glob) / 3))) {
        const char *a = old[at].name;
        return err_set(e,
                       "%s: matches no tensor%s%s%s: attention \"%.*s\" runs fused (one node), "
                       "which has no q, k, v, scores or probs; its names are %.*s.qkv, %s "
                       "(writes %.*s.merged and %.*s.lse) and %.*s.proj (\"fused\": false builds "
                       "the composite that has them)",
                       place, dc ? "; \"" : "", dc ? piece : "",
                       dc ? "\" is a tensor of the composite attention" : "", base, a, base, a, a,
                       base, a, base, a, base, a);
    }
    return err_set(e, "%s: matches no tensor%s%s%s (`ampx policy MODEL` lists the names)", place,
                   near ? "; did you mean \"" : "", near ? near : "", near ? "\"?" : "");
}

/* An override that set no dtype is a mistake the user should hear of: one that matched
 * nothing (a misspelt name), or only nodes whose dtype is fixed (embeddings, losses, views).
 * The message names where the override is written (its file, line, column and path). */
static int check_overrides(const g_graph *g, const g_node *old, int n_old, const policy *p,
                           const uint8_t *used, ampx_err e) {
    for (int i = 0; i < p->n_overrides; i++) {
        if (used[i]) continue;
        const char *glob = p->overrides[i].glob;
        char place[300];
        if (p->overrides[i].place[0])
            snprintf(place, sizeof place, "%s", p->overrides[i].place);
        else
            snprintf(place, sizeof place, "$.policy.overrides.\"%s\"", glob);
        int matched = 0, shadowed = 0; /* shadowed: an earlier override decides a match */
        for (int k = 0; k < n_old; k++)
            if (matches(g, glob, &old[k])) matched = 1, shadowed |= override_of(g, p, &old[k]) < i;
        if (!matched) return unmatched(g, old, n_old, glob, place, e);
        const char *why =
            shadowed ? "matches only tensors an earlier override or a fixed dtype decides"
                     : "matches only tensors whose dtype is fixed (embeddings, losses, views)";
        return err_set(e, "%s: %s (`ampx policy MODEL` lists the names)", place, why);
    }
    return 0;
}

int policy_apply(g_graph *g, const policy *p, ampx_err e) {
    int out_node = output_node(g), n_old = g->n_nodes;
    g_node *old   = malloc(sizeof *old * (size_t)n_old);
    uint8_t *used = calloc((size_t)p->n_overrides + 1, 1);
    if (!old || !used) {
        free(old), free(used);
        return err_set(e, "out of memory");
    }
    memcpy(old, g->nodes, sizeof *old * (size_t)n_old);
    g->n_nodes = 0; /* the nodes are appended again, casts in front of their readers */
    int rc     = 0;
    for (int i = 0; i < n_old && !rc; i++)
        rc = resolve_node(g, p, old[i], i == out_node, used, e);
    if (!rc) rc = check_overrides(g, old, n_old, p, used, e);
    free(old), free(used);
    if (!rc && fold_casts(g)) rc = err_set(e, "out of memory");
    g->n_forward = g->n_nodes;
    return rc;
}

// ---------------------------------------------------------------------------------------
// policy.fp8: products of weights with fp8 operands

/* 1 when policy.fp8 names matmul node n (index i): a layer glob matches it, or its op class
 * is listed and it is not the output layer (which runs in fp8 only when named). */
static int fp8_wants(const g_graph *g, const fp8_config *f, const g_node *n, int is_output,
                     uint8_t *glob_used) {
    int named = 0;
    for (int k = 0; k < f->n_layers; k++)
        if (matches(g, f->layers[k], n)) named = 1, glob_used[k] = 1;
    int k = n->a.conv ? CLASS_CONV : CLASS_DENSE;
    return named || ((f->classes >> k & 1u) && !is_output);
}

/* Turns matmul node id into a matmul_fp8 node: outputs x_q and W_q (e4m3, kept for the
 * backward), three slots (x, W, and the output's gradient, quantized by the backward). */
static int fp8_node(g_graph *g, const fp8_config *f, int id, ampx_err e) {
    g_node *n = &g->nodes[id];
    char name[G_NAME_MAX];
    int q[2];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "%.80s.%s_q", n->name, k ? "w" : "x");
        q[k] = g_add_value_like(g, name, ROLE_ACTIVATION, AMPX_E4M3, n->in[k]);
        if (q[k] < 0) return err_set(e, "too many values after policy.fp8");
        g->values[q[k]].fp8_slot = g->n_fp8 + k;
        g->values[q[k]].producer = id;
        g->values[q[k]].line = n->line, g->values[q[k]].col = n->col;
    }
    n->op         = OP_MATMUL_FP8;
    n->out[1]     = q[0];
    n->out[2]     = q[1];
    n->n_out      = 3;
    n->a.fp8_slot = g->n_fp8;
    n->a.fp8_grad = f->hybrid ? AMPX_E5M2 : AMPX_E4M3;
    n->why        = WHY_FP8;
    g->n_fp8 += 3;
    return 0;
}

static int fp8_apply(g_graph *g, const fp8_config *f, ampx_err e) {
    if (!f->on) return 0;
    uint8_t used[FP8_MAX_LAYERS] = {0};
    int out = output_node(g), turned = 0;
    for (int i = 0; i < g->n_forward; i++) {
        if (g->nodes[i].op != OP_MATMUL || !fp8_wants(g, f, &g->nodes[i], i == out, used)) continue;
        if (fp8_node(g, f, i, e)) return -1;
        turned++;
    }
    for (int k = 0; k < f->n_layers; k++)
        if (!used[k]) {
            char place[300];
            if (f->place[k][0])
                snprintf(place, sizeof place, "%s", f->place[k]);
            else
                snprintf(place, sizeof place, "$.policy.fp8.layers[%d]", k);
            return err_set(e,
                           "%s: \"%s\" matches no product of weights (`ampx policy MODEL` "
                           "lists the names)",
                           place, f->layers[k]);
        }
    if (!turned)
        return err_set(
            e, "$.policy.fp8: no product of weights runs in fp8 (the output layer does only "
               "when \"layers\" names it)");
    return 0;
}

int policy_resolve(ampx_model *m, ampx_err e) {
    char msg[1024];
    g_copy_graph(&m->raw, &m->graph); /* as built: ampx_model_memory's f32 comparison */
    if (policy_apply(&m->graph, &m->cfg.pol, ERR(msg, sizeof msg)) ||
        fp8_apply(&m->graph, &m->cfg.pol.fp8, ERR(msg, sizeof msg))) {
        if (msg[0] != '$') return err_set(e, "%s", msg); /* it names its file (an override) */
        return err_set(e, "%s: %s", m->cfg.file, msg);
    }
    return 0;
}
