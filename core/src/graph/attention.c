/* attention.c — the pieces multi-head attention is built from: a batched product of two
 * activations (Q K^T, P V and their backward), and the split of a fused [T, P*D] projection
 * into P head-major tensors [H, T, D/H] and its inverse, each one strided PERMUTE per part
 * (llm.c's permute / unpermute). The builder composes them with the dense and softmax rules
 * into an `attention` node's composite; each is the other's backward. The fused `attention`
 * node (ATTN_FWD / ATTN_BWD) does all of it in one op where the backend has it. */
#include <math.h>
#include <stdio.h>

#include "graph/ops.h"

// ---------------------------------------------------------------------------------------
// bmm: C[.., m, n] = alpha op(A)[.., m, k] op(B)[.., k, n] over every leading index

/* Rows and columns of op(X) for the stored matrix of value v. */
static void mat_dims(const g_value *v, int trans, int64_t *rows, int64_t *cols) {
    int64_t r = v->dims[v->ndim - 2], c = v->dims[v->ndim - 1];
    *rows = trans ? c : r;
    *cols = trans ? r : c;
}

static int bmm_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *a = &g->values[n->in[0]], *b = &g->values[n->in[1]];
    int64_t m, ka, kb, cols;
    if (a->ndim < 3 || a->ndim != b->ndim || a->batched != b->batched) {
        snprintf(e->msg, sizeof e->msg,
                 "a batched product needs two values of the same rank with matrices on the two "
                 "last axes (\"%s\" and \"%s\")",
                 a->name, b->name);
        e->input = 1;
        return -1;
    }
    for (int i = a->batched; i < a->ndim - 2; i++)
        if (a->dims[i] != b->dims[i]) {
            snprintf(e->msg, sizeof e->msg, "\"%s\" and \"%s\" differ on axis %d", a->name, b->name,
                     i);
            e->input = 1;
            return -1;
        }
    mat_dims(a, n->a.trans_a, &m, &ka);
    mat_dims(b, n->a.trans_b, &kb, &cols);
    if (ka != kb) {
        char sa[64], sb[64];
        g_shape_str(a, sa, sizeof sa);
        g_shape_str(b, sb, sizeof sb);
        snprintf(e->msg, sizeof e->msg, "\"%s\" %s and \"%s\" %s do not multiply", a->name, sa,
                 b->name, sb);
        e->input = 1;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    g_value *y           = &g->values[n->out[0]];
    y->dims[y->ndim - 2] = m;
    y->dims[y->ndim - 1] = cols;
    return 0;
}

static ampx_status bmm_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *a = &g->values[n->in[0]], *b = &g->values[n->in[1]];
    int64_t m, k, kb, cols;
    mat_dims(a, n->a.trans_a, &m, &k);
    mat_dims(b, n->a.trans_b, &kb, &cols);
    uint64_t mk = (uint64_t)(m * k), kn = (uint64_t)(k * cols);
    ampx_gemm_args p = {.size     = sizeof p,
                        .trans_a  = (uint32_t)n->a.trans_a,
                        .trans_b  = (uint32_t)n->a.trans_b,
                        .m        = (uint64_t)m,
                        .n        = (uint64_t)cols,
                        .k        = (uint64_t)k,
                        .batch    = gx_numel(x, n->in[0]) / mk,
                        .lda      = (uint64_t)a->dims[a->ndim - 1],
                        .ldb      = (uint64_t)b->dims[b->ndim - 1],
                        .ldc      = (uint64_t)cols,
                        .stride_a = mk,
                        .stride_b = kn,
                        .stride_c = (uint64_t)(m * cols),
                        .alpha    = n->a.alpha,
                        .beta     = 0,
                        .a        = gx_tensor(x, n->in[0]),
                        .b        = gx_tensor(x, n->in[1]),
                        .c        = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_GEMM, &p);
}

/* One backward product: out = alpha op(p) op(q), contributed to value `to`'s gradient. */
static int bmm_grad(g_graph *g, int self, int to, int p, int q, int ta, int tb) {
    int d = g_new_grad(g, to, g->values[to].dtype);
    if (d < 0) return -1;
    g_attrs a = {.alpha = g->nodes[self].a.alpha, .trans_a = ta, .trans_b = tb};
    int in[2] = {p, q};
    if (g_emit(g, self, OP_BMM, in, 2, &d, 1, &a) < 0) return -1;
    return g_contribute(g, to, d, self);
}

/* For C = op(A) op(B):  d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC, transposed back to
 * the stored layout when op transposes. */
static int bmm_bwd(g_graph *g, int self) {
    const g_node n = g->nodes[self];
    int a = n.in[0], b = n.in[1], dc = g_grad_of(g, n.out[0]);
    int ta = n.a.trans_a, tb = n.a.trans_b;
    if (dc < 0) return 0;
    if (g_needs_grad(g, a) &&
        (ta ? bmm_grad(g, self, a, b, dc, tb, 1) : bmm_grad(g, self, a, dc, b, 0, !tb)))
        return -1;
    if (g_needs_grad(g, b) &&
        (tb ? bmm_grad(g, self, b, dc, a, 1, ta) : bmm_grad(g, self, b, a, dc, !ta, 0)))
        return -1;
    return 0;
}

const g_rule g_rule_bmm = {"bmm", {AMPX_OP_GEMM, AMPX_OP_COUNT}, bmm_shape, bmm_fwd, bmm_bwd};

// ---------------------------------------------------------------------------------------
// heads: x [.., T, P*D] <-> P values [.., H, T, D/H] (a.heads = H, parts = P)

/* The PERMUTE between part p of the fused layout and one head-major tensor, of `rows` of
 * the T positions from where both tensors start; `to_heads` picks the direction. dims walk
 * [B, H, rows, hd]. */
static ampx_status heads_permute(g_exec *x, const g_node *n, ampx_tensor fused, int p,
                                 ampx_tensor heads, uint64_t batch, uint64_t t, uint64_t rows,
                                 uint64_t d, int to_heads) {
    uint64_t h = (uint64_t)n->a.heads, hd = d / h, parts = (uint64_t)n->a.parts;
    uint64_t fs[4] = {t * parts * d, hd, parts * d, 1}, hs[4] = {h * t * hd, t * hd, hd, 1};
    fused.offset += (uint64_t)p * d * ampx_dtype_size(fused.dtype);
    ampx_permute_args a = {.size = sizeof a, .ndim = 4, .dims = {batch, h, rows, hd}};
    for (int i = 0; i < 4; i++) {
        a.x_strides[i] = to_heads ? fs[i] : hs[i];
        a.y_strides[i] = to_heads ? hs[i] : fs[i];
    }
    a.x = to_heads ? fused : heads;
    a.y = to_heads ? heads : fused;
    return gx_call(x, n, AMPX_OP_PERMUTE, &a);
}

/* split: in x [.., T, P*D]; out P values [.., H, T, D/H] */
static int split_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    int64_t w = g_last(x), parts = n->a.parts, h = n->a.heads;
    if (x->ndim != 2 + x->batched || w % parts || (w / parts) % h) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" has shape %s: %lld heads need [.., T, D] with D a multiple of %lld",
                 x->name, s, (long long)h, (long long)h);
        e->input = 0;
        return -1;
    }
    for (int k = 0; k < n->n_out; k++) {
        g_value *y = &g->values[n->out[k]];
        y->batched = x->batched;
        y->ndim    = x->ndim + 1;
        int i      = 0;
        if (x->batched) y->dims[i++] = 0;
        y->dims[i++] = h;
        y->dims[i++] = x->dims[x->ndim - 2];
        y->dims[i]   = w / parts / h;
    }
    return 0;
}

/* Positions and features per part of the fused value f, and its leading count at this batch. */
static void heads_sizes(const g_exec *x, const g_graph *g, int f, int64_t parts, uint64_t *batch,
                        uint64_t *t, uint64_t *d) {
    const g_value *v = &g->values[f];
    *t               = (uint64_t)v->dims[v->ndim - 2];
    *d               = (uint64_t)(g_last(v) / parts);
    *batch           = gx_numel(x, f) / (*t * *d * (uint64_t)parts);
}

/* A run on some positions alone (an incremental forward) writes their rows of each head:
 * the fused input's tensor starts at the first of them already. */
static ampx_status split_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t batch, t, d, first, count = gx_positions(x, &first);
    heads_sizes(x, g, n->in[0], n->a.parts, &batch, &t, &d);
    if (count) batch = gx_numel(x, n->in[0]) / (count * d * (uint64_t)n->a.parts);
    ampx_status st = AMPX_OK;
    for (int p = 0; p < n->n_out && !st; p++) {
        ampx_tensor heads = gx_tensor(x, n->out[p]);
        heads.offset += first * (d / (uint64_t)n->a.heads) * ampx_dtype_size(heads.dtype);
        st = heads_permute(x, n, gx_tensor(x, n->in[0]), p, heads, batch, t, count ? count : t, d,
                           1);
    }
    return st;
}

static int split_bwd(g_graph *g, int self) {
    const g_node n = g->nodes[self];
    int in         = n.in[0], dys[G_MAX_IN];
    if (!g_needs_grad(g, in)) return 0;
    for (int p = 0; p < n.n_out; p++)
        if ((dys[p] = g_grad_of(g, n.out[p])) < 0) return 0; /* every part or none */
    int dx = g_new_grad(g, in, g->values[dys[0]].dtype);
    if (dx < 0 || g_emit(g, self, OP_MERGE_HEADS, dys, n.n_out, &dx, 1, &n.a) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

const g_rule g_rule_split_heads = {
    "split_heads", {AMPX_OP_PERMUTE, AMPX_OP_COUNT}, split_shape, split_fwd, split_bwd};

/* merge: in P values [.., H, T, D/H]; out [.., T, P*D] */
static int merge_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    if (x->ndim != 3 + x->batched) {
        snprintf(e->msg, sizeof e->msg, "\"%s\" is not [.., heads, T, D/heads]", x->name);
        e->input = 0;
        return -1;
    }
    g_value *y = &g->values[n->out[0]];
    y->batched = x->batched;
    y->ndim    = x->ndim - 1;
    int i      = 0;
    if (x->batched) y->dims[i++] = 0;
    y->dims[i++] = x->dims[x->ndim - 2];
    y->dims[i]   = x->dims[x->ndim - 3] * x->dims[x->ndim - 1] * n->n_in;
    return 0;
}

static ampx_status merge_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t batch, t, d;
    heads_sizes(x, g, n->out[0], n->a.parts, &batch, &t, &d);
    ampx_status st = AMPX_OK;
    for (int p = 0; p < n->n_in && !st; p++)
        st = heads_permute(x, n, gx_tensor(x, n->out[0]), p, gx_tensor(x, n->in[p]), batch, t, t, d,
                           0);
    return st;
}

static int merge_bwd(g_graph *g, int self) {
    const g_node n = g->nodes[self];
    int dy         = g_grad_of(g, n.out[0]), dxs[G_MAX_OUT];
    if (dy < 0) return 0;
    int any = 0;
    for (int p = 0; p < n.n_in; p++)
        any |= g_needs_grad(g, n.in[p]);
    if (!any) return 0;
    for (int p = 0; p < n.n_in; p++)
        if ((dxs[p] = g_new_grad(g, n.in[p], g->values[dy].dtype)) < 0) return -1;
    if (g_emit(g, self, OP_SPLIT_HEADS, &dy, 1, dxs, n.n_in, &n.a) < 0) return -1;
    for (int p = 0; p < n.n_in; p++)
        if (g_needs_grad(g, n.in[p]) && g_contribute(g, n.in[p], dxs[p], self)) return -1;
    return 0;
}

const g_rule g_rule_merge_heads = {
    "merge_heads", {AMPX_OP_PERMUTE, AMPX_OP_COUNT}, merge_shape, merge_fwd, merge_bwd};

// ---------------------------------------------------------------------------------------
// attention: the fused op. in qkv [.., T, 3D] (the QKV projection's output, heads a.heads);
// out context [.., T, D] and lse [.., H, T] (f32, for the backward). a.alpha is the logits'
// scale 1/sqrt(D/H), a.causal the mask, a.rate the dropout on the probabilities, keyed as
// the composite's dropout node (g_mask_name), so both paths drop the same elements.

static int attention_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]];
    int64_t w = g_last(x), h = n->a.heads;
    if (x->ndim != 3 || !x->batched || w % 3 || (w / 3) % h) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" has shape %s: fused attention reads [B, T, 3D] with D a multiple of %lld",
                 x->name, s, (long long)h);
        e->input = 0;
        return -1;
    }
    g_value *y = &g->values[n->out[0]], *l = &g->values[n->out[1]];
    y->batched = l->batched = 1;
    y->ndim = l->ndim = 3;
    y->dims[0] = l->dims[0] = 0;
    y->dims[1]              = x->dims[1];
    y->dims[2]              = w / 3;
    l->dims[1]              = h;
    l->dims[2]              = x->dims[1];
    return 0;
}

/* The args both directions share: q, k, v the three parts of the fused value, the context
 * [B, T, D], lse; dropout only while training. */
static ampx_attn_args attention_args(g_exec *x, const g_graph *g, const g_node *n, int fwd_node,
                                     int qkv, int ctx, int lse) {
    const g_value *v = &g->values[qkv];
    uint64_t t = (uint64_t)v->dims[1], d = (uint64_t)(g_last(v) / 3), h = (uint64_t)n->a.heads;
    ampx_attn_args a = {.size          = sizeof a,
                        .causal        = (uint32_t)(n->a.causal != 0),
                        .batch         = gx_numel(x, qkv) / (t * 3 * d),
                        .heads         = h,
                        .seq           = t,
                        .head_dim      = d / h,
                        .scale         = n->a.alpha,
                        .dropout_scale = 1.0f,
                        .ld_q          = 3 * d,
                        .ld_k          = 3 * d,
                        .ld_v          = 3 * d,
                        .ld_o          = d,
                        .q             = gx_tensor(x, qkv),
                        .o             = gx_tensor(x, ctx),
                        .lse           = gx_tensor(x, lse)};
    a.k = a.v = a.q;
    a.k.offset += d * ampx_dtype_size(a.q.dtype);
    a.v.offset += 2 * d * ampx_dtype_size(a.q.dtype);
    if (gx_training(x) && n->a.rate > 0) {
        double th           = floor((double)n->a.rate * 4294967296.0);
        a.dropout_threshold = th > 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)th;
        a.dropout_scale     = (float)(1.0 / (1.0 - (double)n->a.rate));
        a.seed              = gx_dropout_seed(x, &g->nodes[fwd_node]);
    }
    return a;
}

/* A run on some positions of one window (an incremental forward) computes the query rows
 * of those positions alone: a causal row reads nothing past itself, so the earlier rows
 * and the later ones (never read) may stay as the earlier runs left them. */
static ampx_status attention_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_attn_args a = attention_args(x, g, n, (int)(n - g->nodes), n->in[0], n->out[0], n->out[1]);
    uint64_t first, count = gx_positions(x, &first);
    if (count && a.causal && a.batch == 1 && first + count <= a.seq) {
        a.seq     = first + count;
        a.q_first = (uint32_t)first; /* the earlier rows are there from the earlier runs */
    }
    return gx_call(x, n, AMPX_OP_ATTN_FWD, &a);
}

/* One backward node: in qkv, context, lse, d context; out d qkv and delta (f32 [.., H, T],
 * rowsum(do * o), the op's workspace). */
static int attention_bwd(g_graph *g, int self) {
    const g_node n = g->nodes[self];
    int qkv = n.in[0], dctx = g_grad_of(g, n.out[0]);
    if (dctx < 0 || !g_needs_grad(g, qkv)) return 0;
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.50s.delta", n.name);
    int delta = g_add_value_like(g, name, ROLE_ACTIVATION, AMPX_F32, n.out[1]);
    int dqkv  = delta < 0 ? -1 : g_new_grad(g, qkv, g->values[qkv].dtype);
    int in[4] = {qkv, n.out[0], n.out[1], dctx}, out[2] = {dqkv, delta};
    if (dqkv < 0 || g_emit(g, self, OP_ATTENTION_BWD, in, 4, out, 2, &n.a) < 0) return -1;
    return g_contribute(g, qkv, dqkv, self);
}

const g_rule g_rule_attention = {
    "attention", {AMPX_OP_ATTN_FWD, AMPX_OP_COUNT}, attention_shape, attention_fwd, attention_bwd};

static ampx_status attention_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_attn_args a = attention_args(x, g, n, n->of, n->in[0], n->in[1], n->in[2]);
    uint64_t d       = (uint64_t)(g_last(&g->values[n->in[0]]) / 3);
    a.d_o            = gx_tensor(x, n->in[3]);
    a.dq             = gx_tensor(x, n->out[0]);
    a.dk = a.dv = a.dq;
    a.dk.offset += d * ampx_dtype_size(a.dq.dtype);
    a.dv.offset += 2 * d * ampx_dtype_size(a.dq.dtype);
    a.ld_dq = a.ld_dk = a.ld_dv = 3 * d;
    a.delta                     = gx_tensor(x, n->out[1]);
    return gx_call(x, n, AMPX_OP_ATTN_BWD, &a);
}

const g_rule g_rule_attention_bwd = {
    "attention_bwd", {AMPX_OP_ATTN_BWD, AMPX_OP_COUNT}, NULL, attention_bwd_fwd, NULL};
