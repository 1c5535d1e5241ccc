/* conv.c — the convolution family over images [.., C, H, W] (channels first). A convolution
 * lowers to im2col, which lays each window out as a row [C KH KW] so that the convolution is
 * one matmul of those rows by the [C/G KH KW, F] weight (dense.c's matmul, grouped when G >
 * 1), then a transpose back to channels first. im2col's backward is its adjoint, col2im,
 * which sums each pixel's window elements; pooling takes the max (with the winning pixel's
 * index, i32, which the backward routes the gradient to) or the mean of each window. concat
 * puts its inputs side by side along an axis with one PERMUTE each; its backward slices the
 * gradient apart the same way. */
#include <stdio.h>

#include "graph/ops.h"

/* Windows along one axis: (size + 2 pad - dil (k - 1) - 1) / stride + 1, or 0. */
static int64_t windows(int64_t size, int k, int stride, int pad, int dil) {
    int64_t span = (int64_t)dil * (k - 1) + 1, padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* Checks that x is [.., C, H, W] and holds a window; the window counts in *oh, *ow. */
static int window_shape(g_graph *g, const g_node *n, g_shape_error *e, int64_t *oh, int64_t *ow) {
    const g_value *x = &g->values[n->in[0]];
    char s[64];
    g_shape_str(x, s, sizeof s);
    e->input = 0;
    if (!x->batched || x->ndim != 4) {
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" has shape %s: convolutions and pooling read images [channels, height, "
                 "width]",
                 x->name, s);
        return -1;
    }
    const g_attrs *a = &n->a;
    *oh              = windows(x->dims[2], a->kh, a->stride_h, a->pad_h, a->dil_h);
    *ow              = windows(x->dims[3], a->kw, a->stride_w, a->pad_w, a->dil_w);
    if (*oh < 1 || *ow < 1) {
        snprintf(e->msg, sizeof e->msg,
                 "\"%s\" of shape %s padded by %dx%d holds no %dx%d window of dilation %dx%d",
                 x->name, s, a->pad_h, a->pad_w, a->kh, a->kw, a->dil_h, a->dil_w);
        return -1;
    }
    return 0;
}

/* The window op's arguments for the images of value img (x, or dx in a backward). */
static ampx_window_args window_args(g_exec *x, const g_graph *g, const g_node *n, int img) {
    const g_value *v = &g->values[img];
    uint64_t image   = (uint64_t)(v->dims[1] * v->dims[2] * v->dims[3]);
    const g_attrs *a = &n->a;
    return (ampx_window_args){.size      = sizeof(ampx_window_args),
                              .mode      = a->pool_avg ? AMPX_POOL_AVG : AMPX_POOL_MAX,
                              .n         = gx_numel(x, img) / image,
                              .channels  = (uint64_t)v->dims[1],
                              .height    = (uint64_t)v->dims[2],
                              .width     = (uint64_t)v->dims[3],
                              .x_batch   = image,
                              .kh        = (uint32_t)a->kh,
                              .kw        = (uint32_t)a->kw,
                              .stride_h  = (uint32_t)a->stride_h,
                              .stride_w  = (uint32_t)a->stride_w,
                              .pad_h     = (uint32_t)a->pad_h,
                              .pad_w     = (uint32_t)a->pad_w,
                              .dil_h     = (uint32_t)a->dil_h,
                              .dil_w     = (uint32_t)a->dil_w,
                              .count_pad = (uint32_t)a->count_pad};
}

/* Issues window op `op` over the images of value img (x, or dx in a backward): x = img,
 * y = win (cols, y or dy), the indices value idx (-1: none). */
static ampx_status window_call(g_exec *x, const g_graph *g, const g_node *n, uint32_t op, int img,
                               int win, int idx) {
    ampx_window_args a = window_args(x, g, n, img);
    a.x                = gx_tensor(x, img);
    a.y                = gx_tensor(x, win);
    a.indices          = idx >= 0 ? gx_tensor(x, idx) : gx_null(AMPX_I32);
    return gx_call(x, n, op, &a);
}

/* Emits backward node `op` (ins from dy) writing a gradient of x in x's dtype. */
static int window_bwd(g_graph *g, int self, int op, int n_in) {
    const g_node *n = &g->nodes[self];
    int in = n->in[0], dy = g_grad_of(g, n->out[0]);
    if (dy < 0 || !g_needs_grad(g, in)) return 0;
    int ins[2] = {dy, n_in > 1 ? n->out[1] : -1};
    g_attrs a  = n->a;
    int dx     = g_new_grad(g, in, g->values[in].dtype);
    if (dx < 0 || g_emit(g, self, op, ins, n_in, &dx, 1, &a) < 0) return -1;
    return g_contribute(g, in, dx, self);
}

// ---------------------------------------------------------------------------------------
// im2col: x [.., C, H, W] -> cols [.., OH OW, C KH KW]

static int im2col_shape(g_graph *g, g_node *n, g_shape_error *e) {
    int64_t oh, ow;
    if (window_shape(g, n, e, &oh, &ow)) return -1;
    const g_value *x = &g->values[n->in[0]];
    g_value *y       = &g->values[n->out[0]];
    y->batched       = 1;
    y->ndim          = 3;
    y->dims[1]       = oh * ow;
    y->dims[2]       = x->dims[1] * n->a.kh * n->a.kw;
    return 0;
}

static ampx_status im2col_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return window_call(x, g, n, AMPX_OP_IM2COL, n->in[0], n->out[0], -1);
}

static int im2col_bwd(g_graph *g, int self) {
    return window_bwd(g, self, OP_COL2IM, 1);
}

const g_rule g_rule_im2col = {
    "im2col", {AMPX_OP_IM2COL, AMPX_OP_COUNT}, im2col_shape, im2col_fwd, im2col_bwd};

/* dx = col2im(dcols): in dcols; out dx */
static ampx_status col2im_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return window_call(x, g, n, AMPX_OP_COL2IM, n->out[0], n->in[0], -1);
}

const g_rule g_rule_col2im = {"col2im", {AMPX_OP_COL2IM, AMPX_OP_COUNT}, NULL, col2im_fwd, NULL};

// ---------------------------------------------------------------------------------------
// pool: x [.., C, H, W] -> y [.., C, OH, OW] (and a max pool's indices, i32, y's shape)

static int pool_shape(g_graph *g, g_node *n, g_shape_error *e) {
    int64_t oh, ow;
    if (window_shape(g, n, e, &oh, &ow)) return -1;
    for (int k = 0; k < n->n_out; k++) {
        g_set_shape_like(g, n->out[k], n->in[0]);
        g->values[n->out[k]].dims[2] = oh;
        g->values[n->out[k]].dims[3] = ow;
    }
    return 0;
}

static ampx_status pool_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return window_call(x, g, n, AMPX_OP_POOL2D_FWD, n->in[0], n->out[0],
                       n->n_out > 1 ? n->out[1] : -1);
}

static int pool_bwd(g_graph *g, int self) {
    return window_bwd(g, self, OP_POOL_BWD, g->nodes[self].n_out > 1 ? 2 : 1);
}

const g_rule g_rule_pool = {
    "pool", {AMPX_OP_POOL2D_FWD, AMPX_OP_COUNT}, pool_shape, pool_fwd, pool_bwd};

/* dx from dy: in dy (, indices); out dx */
static ampx_status pool_bwd_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return window_call(x, g, n, AMPX_OP_POOL2D_BWD, n->out[0], n->in[0],
                       n->n_in > 1 ? n->in[1] : -1);
}

const g_rule g_rule_pool_bwd = {
    "pool_bwd", {AMPX_OP_POOL2D_BWD, AMPX_OP_COUNT}, NULL, pool_bwd_fwd, NULL};

// ---------------------------------------------------------------------------------------
// concat along a.axis (batch = 0), and slice, its backward

static int concat_shape(g_graph *g, g_node *n, g_shape_error *e) {
    const g_value *x0 = &g->values[n->in[0]];
    int axis          = n->a.axis;
    int64_t total     = 0;
    for (int i = 0; i < n->n_in; i++) {
        const g_value *x = &g->values[n->in[i]];
        int fits         = x->ndim == x0->ndim && x->batched == x0->batched;
        for (int d = 0; fits && d < x->ndim; d++)
            fits = d == axis || d == 0 || x->dims[d] == x0->dims[d];
        if (!fits) {
            char s0[64], s[64];
            g_shape_str(x0, s0, sizeof s0);
            g_shape_str(x, s, sizeof s);
            snprintf(e->msg, sizeof e->msg,
                     "\"%s\" of shape %s does not fit beside \"%s\" of shape %s along axis %d",
                     x->name, s, x0->name, s0, axis - (x0->batched ? 1 : 0));
            e->input = i;
            return -1;
        }
        total += x->dims[axis];
    }
    g_set_shape_like(g, n->out[0], n->in[0]);
    g->values[n->out[0]].dims[axis] = total;
    return 0;
}

/* Elements after one index of `axis` (the product of the later axes). */
static uint64_t inner_of(const g_value *v, int axis) {
    uint64_t inner = 1;
    for (int d = axis + 1; d < v->ndim; d++)
        inner *= (uint64_t)v->dims[d];
    return inner;
}

/* Copies part (len indices of `axis`) between value part and value whole, where whole's
 * indices [at, at + len) hold it: into whole (concat) or out of it (slice). */
static ampx_status copy_part(g_exec *x, const g_graph *g, const g_node *n, int part, int whole,
                             int64_t at, int into_whole) {
    const g_value *pv = &g->values[part], *wv = &g->values[whole];
    int axis       = n->a.axis;
    uint64_t inner = inner_of(wv, axis), len = (uint64_t)pv->dims[axis],
             all   = (uint64_t)wv->dims[axis];
    uint64_t outer = gx_numel(x, part) / (len * inner);
    ampx_tensor pt = gx_tensor(x, part), wt = gx_tensor(x, whole);
    uint64_t ps[3] = {len * inner, inner, 1}, ws[3] = {all * inner, inner, 1};
    ampx_permute_args a = {.size = sizeof a, .ndim = 3, .dims = {outer, len, inner}};
    wt.offset += (uint64_t)at * inner * ampx_dtype_size(wt.dtype);
    for (int d = 0; d < 3; d++) {
        a.x_strides[d] = into_whole ? ps[d] : ws[d];
        a.y_strides[d] = into_whole ? ws[d] : ps[d];
    }
    a.x = into_whole ? pt : wt;
    a.y = into_whole ? wt : pt;
    return gx_call(x, n, AMPX_OP_PERMUTE, &a);
}

static ampx_status concat_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    int64_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
        ampx_status st = copy_part(x, g, n, n->in[i], n->out[0], at, 1);
        if (st) return st;
        at += g->values[n->in[i]].dims[n->a.axis];
    }
    return AMPX_OK;
}

static int concat_bwd(g_graph *g, int self) {
    int dy = g_grad_of(g, g->nodes[self].out[0]);
    if (dy < 0) return 0;
    int64_t at = 0;
    for (int i = 0; i < g->nodes[self].n_in; i++) {
        const g_node *n = &g->nodes[self];
        int in          = n->in[i];
        g_attrs a       = {.alpha = 1, .axis = n->a.axis, .at = at};
        at += g->values[in].dims[n->a.axis];
        if (!g_needs_grad(g, in)) continue;
        int dx = g_new_grad(g, in, g->values[dy].dtype);
        if (dx < 0 || g_emit(g, self, OP_SLICE, &dy, 1, &dx, 1, &a) < 0 ||
            g_contribute(g, in, dx, self))
            return -1;
    }
    return 0;
}

const g_rule g_rule_concat = {
    "concat", {AMPX_OP_PERMUTE, AMPX_OP_COUNT}, concat_shape, concat_fwd, concat_bwd};

static ampx_status slice_fwd(g_exec *x, const g_graph *g, const g_node *n) {
    return copy_part(x, g, n, n->out[0], n->in[0], n->a.at, 0);
}

const g_rule g_rule_slice = {"slice", {AMPX_OP_PERMUTE, AMPX_OP_COUNT}, NULL, slice_fwd, NULL};
