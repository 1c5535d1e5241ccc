/* dense.c — the dense family: matmul against a parameter, bias add, and their backward.
 * A dense layer of the model file lowers to matmul then bias. Every product accumulates in
 * f32 inside the GEMM; weight gradients are f32 and accumulate across micro-batches and
 * across the nodes that share a weight (beta 1). Where the backend takes GEMM's epilogue,
 * passes/fuse.c makes matmul, bias and activation one dense node: one GEMM that adds the
 * bias and applies the activation as it writes C, and in the backward a weight-gradient GEMM
 * that also sums the bias gradient. */
#include <stdio.h>

#include "graph/ops.h"

/* One row-major product C = op(A) op(B) (+ C), leading dimensions of the stored matrices. */
static ampx_gemm_args gemm2d_args(int trans_a, int trans_b, uint64_t m, uint64_t cols, uint64_t k,
                                  int accumulate, ampx_tensor a, ampx_tensor b, ampx_tensor c) {
    ampx_gemm_args g = {.size    = sizeof g,
                        .trans_a = (uint32_t)trans_a,
                        .trans_b = (uint32_t)trans_b,
                        .m       = m,
                        .n       = cols,
                        .k       = k,
                        .batch   = 1,
                        .lda     = trans_a ? m : k,
                        .ldb     = trans_b ? k : cols,
                        .ldc     = cols,
                        .alpha   = 1,
                        .beta    = accumulate ? 1.0f : 0.0f,
                        .a       = a,
                        .b       = b,
                        .c       = c};
    return g;
}

/* Rows of the GEMM: every leading index of x, the batch included. */
static uint64_t gemm_rows(const g_exec *x, const g_graph *g, int v) {
    return gx_numel(x, v) / (uint64_t)g_last(&g->values[v]);
}

// ---------------------------------------------------------------------------------------
// matmul: y[.., n] = x[.., k] W[k, n], or with trans_b y = x W^T for W [n, k] (an output
// head tied to an embedding table [vocab, dim])

/* W's rows and columns as the product reads it: k x n. */
static int64_t w_k(const g_node *n, const g_value *w) {
    return w->dims[n->a.trans_b ? 1 : 0];
}
static int64_t w_n(const g_node *n, const g_value *w) {
    return w->dims[n->a.trans_b ? 0 : 1];
}

/* A grouped product (a grouped convolution) splits x's last axis and W's columns into G
 * groups: y's group g = x's group g times W's group g, one GEMM batched over the groups with
 * the groups' column offsets as the batch strides. */
static int64_t groups_of(const g_node *n) {
    return n->a.groups > 1 ? n->a.groups : 1;
}

/* Turns one group's GEMM args into the batched product over G groups: each operand's
 * leading dimension is its whole row of G groups of a_cols (b_cols, c_cols) columns, its
 * batch stride one group's columns. */
static void group_gemm(ampx_gemm_args *ga, uint64_t G, uint64_t a_cols, uint64_t b_cols,
                       uint64_t c_cols) {
    if (G < 2) return;
    ga->batch = G;
    ga->lda = a_cols * G, ga->stride_a = a_cols;
    ga->ldb = b_cols * G, ga->stride_b = b_cols;
    ga->ldc = c_cols * G, ga->stride_c = c_cols;
}

static int matmul_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]];
    g_value *y     = &g->values[n->out[0]];
    int64_t groups = groups_of(n);
    if (groups > 1 && n->a.trans_b) {
        snprintf(e->msg, sizeof e->msg, "\"%s\": a grouped product reads W untransposed", n->name);
        e->input = -1;
        return -1;
    }
    if (w->ndim != 2 || g_last(x) != w_k(n, w) * groups || w_n(n, w) % groups) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        snprintf(e->msg, sizeof e->msg, "\"%s\" has shape %s but \"%s\" needs [.., %lld]", x->name,
                 s, n->name, (long long)(w_k(n, w) * groups));
        e->input = 0;
        return -1;
    }
    y->batched = x->batched;
    y->ndim    = x->ndim;
    for (int i = 0; i < x->ndim; i++)
        y->dims[i] = x->dims[i];
    y->dims[y->ndim - 1] = w_n(n, w);
    return 0;
}

/* Issues GEMM ga whose A and B are values va and vb: GEMM_FP8, with their slots' factors,
 * when they are fp8 values (the fp8 products), else GEMM. */
static ampx_status gemm_issue(g_exec *x, const g_graph *g, const g_node *n,
                              const ampx_gemm_args *ga, int va, int vb) {
    if (g->values[va].fp8_slot < 0) return gx_call(x, n, AMPX_OP_GEMM, ga);
    ampx_gemm_fp8_args f = {.size        = sizeof f,
                            .a_scale_inv = gx_fp8(x, g->values[va].fp8_slot, GX_FP8_SCALE_INV),
                            .b_scale_inv = gx_fp8(x, g->values[vb].fp8_slot, GX_FP8_SCALE_INV),
                            .gemm        = *ga};
    return gx_call(x, n, AMPX_OP_GEMM_FP8, &f);
}

/* y = x W of node n with x and W read from values vx and vw. */
static ampx_status matmul_product(g_exec *x, const g_graph *g, const g_node *n, int vx, int vw) {
    const g_value *w = &g->values[vw];
    uint64_t G = (uint64_t)groups_of(n), nn = (uint64_t)w_n(n, w) / G, k = (uint64_t)w_k(n, w);
    ampx_gemm_args ga = gemm2d_args(0, n->a.trans_b, gemm_rows(x, g, vx), nn, k, 0,
                                    gx_tensor(x, vx), gx_tensor(x, vw), gx_tensor(x, n->out[0]));
    group_gemm(&ga, G, k, nn, nn);
    return gemm_issue(x, g, n, &ga, vx, vw);
}

static ampx_status matmul_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return matmul_product(x, g, n, n->in[0], n->in[1]);
}

/* The gradient of a product's output y as the product reads it: y's own dtype. A bf16 or
 * f16 output whose gradient arrives in f32 (an add into the f32 residual stream hands its f32
 * dy to both inputs) gets one CAST named for the product, so both backward GEMMs run on
 * operands of the compute dtype, as a bf16 autocast framework rounds the gradient of a bf16
 * output. The parameter gradients stay f32: the GEMMs accumulate in f32. */
static int grad_as_output(g_graph *g, int self, int y, int dy) {
    ampx_dtype t = g->values[y].dtype;
    if (dy < 0 || g->values[dy].dtype != AMPX_F32 || (t != AMPX_BF16 && t != AMPX_F16)) return dy;
    int low = g_new_grad(g, y, t);
    if (low < 0 || g_emit(g, self, OP_CAST, &dy, 1, &low, 1, NULL) < 0) return -1;
    return low;
}

static int matmul_bwd(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int in = n->in[0], w = n->in[1], dy = g_grad_of(g, n->out[0]);
    if (dy < 0) return 0;
    if ((dy = grad_as_output(g, self, n->out[0], dy)) < 0) return -1;
    n = &g->nodes[self];
    if (g_needs_grad(g, w)) {
        g_attrs a = {.trans_b = n->a.trans_b, .groups = n->a.groups};
        int dw    = g_param_grad(g, w, &a.accumulate);
        int ins[] = {in, dy};
        if (dw < 0 || g_emit(g, self, OP_MATMUL_DW, ins, 2, &dw, 1, &a) < 0) return -1;
    }
    if (g_needs_grad(g, in)) {
        int dx    = g_new_grad(g, in, g->values[in].dtype);
        int ins[] = {dy, w};
        g_attrs a = {.trans_b = n->a.trans_b, .groups = n->a.groups};
        if (dx < 0 || g_emit(g, self, OP_MATMUL_DX, ins, 2, &dx, 1, &a) < 0) return -1;
        return g_contribute(g, in, dx, self);
    }
    return 0;
}

const g_rule g_rule_matmul = {
    "matmul", {AMPX_OP_GEMM, AMPX_OP_COUNT}, matmul_shape, matmul_fwd, matmul_bwd};

/* dW (+)= x^T dy (trans_b: dW (+)= dy^T x): in x, dy; out dW (f32), and with a second output
 * db (+)= sum over rows of dy (f32), the column sums of the product's B operand dy (GEMM's
 * bias_grad; a dense node's backward, never with trans_b) */
static ampx_status matmul_dw_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *dw = &g->values[n->out[0]];
    int a             = n->a.trans_b ? 1 : 0;
    uint64_t G = (uint64_t)groups_of(n), cols = (uint64_t)dw->dims[1] / G;
    ampx_gemm_args ga = gemm2d_args(1, 0, (uint64_t)dw->dims[0], cols, gemm_rows(x, g, n->in[0]),
                                    gx_accumulate(x, n), gx_tensor(x, n->in[a]),
                                    gx_tensor(x, n->in[1 - a]), gx_tensor(x, n->out[0]));
    group_gemm(&ga, G, (uint64_t)dw->dims[0], cols, cols);
    if (n->n_out > 1) {
        g_node as_bias          = *n; /* the bias gradient's own accumulate */
        as_bias.a.accumulate    = n->a.accumulate_bias;
        ga.bias_grad            = gx_tensor(x, n->out[1]);
        ga.bias_grad_accumulate = (uint32_t)gx_accumulate(x, &as_bias);
    }
    return gemm_issue(x, g, n, &ga, n->in[a], n->in[1 - a]);
}

const g_rule g_rule_matmul_dw = {
    "matmul_dw", {AMPX_OP_GEMM, AMPX_OP_COUNT}, NULL, matmul_dw_fwd, NULL};

/* dx = dy W^T (trans_b: dx = dy W): in dy, W; out dx */
static ampx_status matmul_dx_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *w = &g->values[n->in[1]];
    uint64_t G = (uint64_t)groups_of(n), nn = (uint64_t)w_n(n, w) / G, k = (uint64_t)w_k(n, w);
    ampx_gemm_args ga =
        gemm2d_args(0, !n->a.trans_b, gemm_rows(x, g, n->in[0]), k, nn, 0, gx_tensor(x, n->in[0]),
                    gx_tensor(x, n->in[1]), gx_tensor(x, n->out[0]));
    group_gemm(&ga, G, nn, nn, k);
    return gemm_issue(x, g, n, &ga, n->in[0], n->in[1]);
}

const g_rule g_rule_matmul_dx = {
    "matmul_dx", {AMPX_OP_GEMM, AMPX_OP_COUNT}, NULL, matmul_dx_fwd, NULL};

// ---------------------------------------------------------------------------------------
// bias: y = x + b, b over the trailing axes of x (the last one for a dense layer's bias, all
// of one example's for a learned position embedding [T, D]); f32, read as f32 by the add

static int bias_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x = &g->values[n->in[0]], *b = &g->values[n->in[1]];
    int fits = b->ndim >= 1 && b->ndim <= x->ndim - x->batched;
    for (int i = 0; fits && i < b->ndim; i++)
        fits = b->dims[b->ndim - 1 - i] == x->dims[x->ndim - 1 - i];
    if (!fits) {
        char sx[64], sb[64];
        g_shape_str(x, sx, sizeof sx);
        g_shape_str(b, sb, sizeof sb);
        snprintf(e->msg, sizeof e->msg, "\"%s\" of shape %s does not end in %s's shape %s", x->name,
                 sx, b->name, sb);
        e->input = 0;
        return -1;
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    return 0;
}

ampx_status g_row_add_fwd(g_exec *x, const g_graph *g, const g_node *n, uint64_t cols) {
    const g_value *v = &g->values[n->in[0]];
    uint64_t first, count = gx_positions(x, &first), at = 0;
    if (count && v->ndim >= 3 && cols > (uint64_t)g_last(v)) {
        uint64_t per = cols / (uint64_t)v->dims[1]; /* b's elements per position */
        at = first * per, cols = count * per;
    }
    ampx_add_args a = {.size        = sizeof a,
                       .broadcast_b = 1,
                       .rows        = gx_numel(x, n->in[0]) / cols,
                       .cols        = cols,
                       .alpha       = 1,
                       .beta        = 1,
                       .a           = gx_tensor(x, n->in[0]),
                       .b           = gx_tensor(x, n->in[1]),
                       .y           = gx_tensor(x, n->out[0])};
    a.b.offset += at * ampx_dtype_size(a.b.dtype);
    return gx_call(x, n, AMPX_OP_ADD, &a);
}

int g_row_add_bwd(g_graph *g, int self, int grad_op) {
    const g_node *n = &g->nodes[self];
    int in = n->in[0], b = n->in[1], dy = g_grad_of(g, n->out[0]);
    if (dy < 0) return 0;
    if (g_needs_grad(g, b)) {
        g_attrs a = {0};
        int db    = g_param_grad(g, b, &a.accumulate);
        if (db < 0 || g_emit(g, self, grad_op, &dy, 1, &db, 1, &a) < 0) return -1;
    }
    /* dx = dy: the same gradient, no op */
    return g_needs_grad(g, in) ? g_contribute(g, in, dy, self) : 0;
}

static ampx_status bias_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return g_row_add_fwd(x, g, n, (uint64_t)g_elems(&g->values[n->in[1]]));
}

static int bias_bwd(g_graph *g, int self) {
    return g_row_add_bwd(g, self, OP_BIAS_GRAD);
}

const g_rule g_rule_bias = {"bias", {AMPX_OP_ADD, AMPX_OP_COUNT}, bias_shape, bias_fwd, bias_bwd};

/* db (+)= sum over rows of dy: in dy; out db (f32) */
static ampx_status bias_grad_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    uint64_t cols         = (uint64_t)g_elems(&g->values[n->out[0]]);
    ampx_bias_grad_args a = {.size       = sizeof a,
                             .accumulate = (uint32_t)gx_accumulate(x, n),
                             .rows       = gx_numel(x, n->in[0]) / cols,
                             .cols       = cols,
                             .dy         = gx_tensor(x, n->in[0]),
                             .db         = gx_tensor(x, n->out[0])};
    return gx_call(x, n, AMPX_OP_BIAS_GRAD, &a);
}

const g_rule g_rule_bias_grad = {
    "bias_grad", {AMPX_OP_BIAS_GRAD, AMPX_OP_COUNT}, NULL, bias_grad_fwd, NULL};

// ---------------------------------------------------------------------------------------
// dense: y = f(x W + b) as one GEMM with an epilogue (passes/fuse.c), pre = x W + b kept for
// the activation's backward. The GEMM adds the bias in f32 and applies f in f32 before its
// one rounding to y's dtype (backend.h), so an f32 layer gives what matmul, bias and act give
// apart; a bf16 one rounds once where those round after each op. The backward is theirs:
// ACT_BWD from pre, then dW with the bias gradient summed by the same GEMM (the column sums
// of its B operand, the pre-activation gradient), then dx.

static ampx_status dense_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    const g_value *w  = &g->values[n->in[1]];
    ampx_gemm_args ga = gemm2d_args(0, n->a.trans_b, gemm_rows(x, g, n->in[0]), (uint64_t)w_n(n, w),
                                    (uint64_t)w_k(n, w), 0, gx_tensor(x, n->in[0]),
                                    gx_tensor(x, n->in[1]), gx_tensor(x, n->out[0]));
    ga.bias           = gx_tensor(x, n->in[2]);
    ga.act            = (uint32_t)n->a.epi_act; /* 1 + ampx_act: AMPX_GEMM_ACT */
    if (n->n_out > 1) ga.pre_act = gx_tensor(x, n->out[1]);
    return gx_call(x, n, AMPX_OP_GEMM, &ga);
}

/* The gradient of pre (of y itself without an activation): ACT_BWD named for the fused act
 * node (self + 2), summed with what pre's other readers gave. -1 on a full graph, -2 when
 * nothing needs it. */
static int dense_pre_grad(g_graph *g, int self) {
    const g_node *n = &g->nodes[self];
    int dy          = g_grad_of(g, n->out[0]);
    if (dy < 0) return -2;
    if (!n->a.epi_act) /* dense_fp8 quantizes the gradient as it comes */
        return n->op == OP_DENSE_FP8 ? dy : grad_as_output(g, self, n->out[0], dy);
    int pre = n->out[n->op == OP_DENSE_FP8 ? 3 : 1], ins[2] = {pre, dy};
    g_attrs a = {.act = n->a.epi_act - 1};
    int dpre  = g_new_grad(g, pre, g->values[pre].dtype);
    if (dpre < 0 || g_emit(g, self + 2, OP_ACT_BWD, ins, 2, &dpre, 1, &a) < 0 ||
        g_contribute(g, pre, dpre, self + 2))
        return -1;
    return g_grad_of(g, pre);
}

static int dense_bwd(g_graph *g, int self) {
    int dh = dense_pre_grad(g, self);
    if (dh == -2) return 0;
    if (dh < 0) return -1;
    const g_node *n = &g->nodes[self];
    int in = n->in[0], w = n->in[1], b = n->in[2];
    int fuse_db = n->a.fuse_bias_grad && g_needs_grad(g, w) && g_needs_grad(g, b);
    if (g_needs_grad(g, b) && !fuse_db) { /* the bias gradient as the bias node's BIAS_GRAD */
        g_attrs a = {0};
        int db    = g_param_grad(g, b, &a.accumulate);
        if (db < 0 || g_emit(g, self + 1, OP_BIAS_GRAD, &dh, 1, &db, 1, &a) < 0) return -1;
    }
    if (g_needs_grad(g, w)) {
        g_attrs a  = {.trans_b = n->a.trans_b};
        int out[2] = {-1, -1};
        if (fuse_db && (out[1] = g_param_grad(g, b, &a.accumulate_bias)) < 0) return -1;
        int ins[] = {in, dh};
        if ((out[0] = g_param_grad(g, w, &a.accumulate)) < 0 ||
            g_emit(g, self, OP_MATMUL_DW, ins, 2, out, fuse_db ? 2 : 1, &a) < 0)
            return -1;
    }
    if (g_needs_grad(g, in)) {
        int dx    = g_new_grad(g, in, g->values[in].dtype);
        int ins[] = {dh, w};
        g_attrs a = {.trans_b = n->a.trans_b};
        if (dx < 0 || g_emit(g, self, OP_MATMUL_DX, ins, 2, &dx, 1, &a) < 0) return -1;
        return g_contribute(g, in, dx, self);
    }
    return 0;
}

const g_rule g_rule_dense = {"dense", {AMPX_OP_GEMM, AMPX_OP_COUNT}, NULL, dense_fwd, dense_bwd};

/* The bias and act nodes a dense node took over: they keep their ids (dropout keys and
 * names stay where they were) and issue nothing. */
static ampx_status fused_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    (void)x, (void)g, (void)n;
    return AMPX_OK;
}

const g_rule g_rule_fused = {"fused", {AMPX_OP_COUNT}, NULL, fused_fwd, NULL};

// ---------------------------------------------------------------------------------------
// fp8 products (policy.fp8; passes/fp8.c turns the matmuls it names into matmul_fp8): the
// forward quantizes x and W to e4m3 with their slots' scales (raising the slots' amaxes as
// it goes) and multiplies the codes with GEMM_FP8; x_q and W_q stay for the backward, which
// quantizes dy once (e5m2 under "hybrid") and runs both of its products on fp8 operands:
// dW = x_q^T dy_q and dx = dy_q W_q^T, in f32 and in x's dtype. The quantizing casts
// saturate, as Transformer Engine's do.

/* Value in into fp8 value out, with out's slot. */
static ampx_status quantize_value(g_exec *x, const g_graph *g, const g_node *n, int in, int out) {
    int slot = g->values[out].fp8_slot;
    /* saturating, an infinite input kept: an overflow upstream still reaches the scaler */
    ampx_fp8_quantize_args q = {.size     = sizeof q,
                                .saturate = 2,
                                .n        = gx_numel(x, in),
                                .src      = gx_tensor(x, in),
                                .dst      = gx_tensor(x, out),
                                .scale    = gx_fp8(x, slot, GX_FP8_SCALE),
                                .amax     = gx_fp8(x, slot, GX_FP8_AMAX),
                                .counts   = gx_fp8(x, slot, GX_FP8_COUNTS)};
    return gx_call(x, n, AMPX_OP_FP8_QUANTIZE, &q);
}

/* x and W of an fp8 node (in[0], in[1]) into its codes x_q and W_q (out[1], out[2]). */
static ampx_status quantize_operands(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_status st = quantize_value(x, g, n, n->in[0], n->out[1]);
    return st ? st : quantize_value(x, g, n, n->in[1], n->out[2]);
}

static ampx_status matmul_fp8_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_status st = quantize_operands(x, g, n);
    return st ? st : matmul_product(x, g, n, n->out[1], n->out[2]);
}

/* The backward products of fp8 node self from dy, the gradient of its product's output
 * (h0, or a dense node's pre-activation): dy quantized once into the node's third slot, then
 * dW = x_q^T dy_q and dx = dy_q W_q^T on fp8 operands. */
static int fp8_products_bwd(g_graph *g, int self, int dy) {
    const g_node *n = &g->nodes[self];
    int in = n->in[0], w = n->in[1];
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.grad_q", n->name);
    g_attrs qa = {.fp8_slot = n->a.fp8_slot + 2};
    int dq     = g_add_value_like(g, name, ROLE_GRADIENT, (ampx_dtype)n->a.fp8_grad, dy);
    if (dq < 0 || g_emit(g, self, OP_QUANTIZE, &dy, 1, &dq, 1, &qa) < 0) return -1;
    g->values[dq].fp8_slot = qa.fp8_slot;
    n                      = &g->nodes[self];
    if (g_needs_grad(g, w)) {
        g_attrs a = {.trans_b = n->a.trans_b, .groups = n->a.groups};
        int dw    = g_param_grad(g, w, &a.accumulate);
        int ins[] = {n->out[1], dq};
        if (dw < 0 || g_emit(g, self, OP_MATMUL_DW_FP8, ins, 2, &dw, 1, &a) < 0) return -1;
        n = &g->nodes[self];
    }
    if (g_needs_grad(g, in)) {
        int dx    = g_new_grad(g, in, g->values[in].dtype);
        int ins[] = {dq, n->out[2]};
        g_attrs a = {.trans_b = n->a.trans_b, .groups = n->a.groups};
        if (dx < 0 || g_emit(g, self, OP_MATMUL_DX_FP8, ins, 2, &dx, 1, &a) < 0) return -1;
        return g_contribute(g, in, dx, self);
    }
    return 0;
}

static int matmul_fp8_bwd(g_graph *g, int self) {
    int dy = g_grad_of(g, g->nodes[self].out[0]);
    return dy < 0 ? 0 : fp8_products_bwd(g, self, dy);
}

const g_rule g_rule_matmul_fp8    = {"matmul_fp8",
                                     {AMPX_OP_FP8_QUANTIZE, AMPX_OP_GEMM_FP8, AMPX_OP_COUNT},
                                     NULL,
                                     matmul_fp8_fwd,
                                     matmul_fp8_bwd};
const g_rule g_rule_matmul_dw_fp8 = {
    "matmul_dw_fp8", {AMPX_OP_GEMM_FP8, AMPX_OP_COUNT}, NULL, matmul_dw_fwd, NULL};
const g_rule g_rule_matmul_dx_fp8 = {
    "matmul_dx_fp8", {AMPX_OP_GEMM_FP8, AMPX_OP_COUNT}, NULL, matmul_dx_fwd, NULL};

static ampx_status quantize_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return quantize_value(x, g, n, n->in[0], n->out[0]);
}

const g_rule g_rule_quantize = {
    "quantize", {AMPX_OP_FP8_QUANTIZE, AMPX_OP_COUNT}, NULL, quantize_fwd, NULL};

// ---------------------------------------------------------------------------------------
// dense_fp8: matmul_fp8, bias and act as one GEMM_FP8 whose epilogue adds the bias and
// applies the activation (passes/fuse.c, where the backend claims GEMM_FP8's epilogue); out
// y, x_q, W_q and, with an activation, pre = q(x) q(W) + b for its backward. The bias's
// gradient is BIAS_GRAD of the unquantized pre-activation gradient (GEMM_FP8 takes no
// bias_grad), as Transformer Engine sums it before the cast.

static ampx_status dense_fp8_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    ampx_status st = quantize_operands(x, g, n);
    if (st) return st;
    const g_value *w  = &g->values[n->out[2]];
    ampx_gemm_args ga = gemm2d_args(
        0, n->a.trans_b, gemm_rows(x, g, n->out[1]), (uint64_t)w_n(n, w), (uint64_t)w_k(n, w), 0,
        gx_tensor(x, n->out[1]), gx_tensor(x, n->out[2]), gx_tensor(x, n->out[0]));
    ga.bias = gx_tensor(x, n->in[2]);
    ga.act  = (uint32_t)n->a.epi_act;
    if (n->n_out > 3) ga.pre_act = gx_tensor(x, n->out[3]);
    return gemm_issue(x, g, n, &ga, n->out[1], n->out[2]);
}

static int dense_fp8_bwd(g_graph *g, int self) {
    int dh = dense_pre_grad(g, self);
    if (dh == -2) return 0;
    if (dh < 0) return -1;
    int b = g->nodes[self].in[2];
    if (g_needs_grad(g, b)) { /* the bias node's BIAS_GRAD */
        g_attrs a = {0};
        int db    = g_param_grad(g, b, &a.accumulate);
        if (db < 0 || g_emit(g, self + 1, OP_BIAS_GRAD, &dh, 1, &db, 1, &a) < 0) return -1;
    }
    return fp8_products_bwd(g, self, dh);
}

const g_rule g_rule_dense_fp8 = {"dense_fp8",
                                 {AMPX_OP_FP8_QUANTIZE, AMPX_OP_GEMM_FP8, AMPX_OP_COUNT},
                                 NULL,
                                 dense_fp8_fwd,
                                 dense_fp8_bwd};
