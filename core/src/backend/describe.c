/* describe.c — what the observer sees of an op (call_describe, call.h): its shapes, the
 * dtypes of its tensors, the bytes it moves (each tensor read or written once: a lower
 * bound) and its floating-point operations (GEMM 2mnk, elementwise about one per element).
 * One describe_<slot> per op of AMPX_OPS, in op-number order; call_describe picks it from
 * the list, so an op without one does not compile. */
#include <stdarg.h>
#include <stdio.h>

#include "ampx/dtype.h"
#include "backend/call.h"

typedef struct desc {
    call_event *e;
    size_t ns, nd; /* used lengths of e->shapes, e->dtypes */
} desc;

typedef unsigned long long ull;

static void shape(desc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void shape(desc *d, const char *fmt, ...) {
    if (d->ns >= sizeof d->e->shapes) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->e->shapes + d->ns, sizeof d->e->shapes - d->ns, fmt, ap);
    va_end(ap);
    if (n > 0) d->ns += (size_t)n;
}

/* A tensor of n elements read or written once; null tensors count nothing. */
static void tensor(desc *d, ampx_tensor t, uint64_t n) {
    if (!t.buf) return;
    d->e->bytes += n * ampx_dtype_size(t.dtype);
    if (d->nd < sizeof d->e->dtypes) {
        int k = snprintf(d->e->dtypes + d->nd, sizeof d->e->dtypes - d->nd, "%s%s",
                         d->nd ? "," : "", ampx_dtype_name(t.dtype));
        if (k > 0) d->nd += (size_t)k;
    }
}

/* The tensors of a list (and, with more, the list beside it); returns their elements. */
static uint64_t list(desc *d, ampx_tensor_list l, const ampx_tensor *more) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < l.count; i++) {
        tensor(d, l.tensors[i], l.n_elems[i]);
        if (more) tensor(d, more[i], l.n_elems[i]);
        total += l.n_elems[i];
    }
    return total;
}

static void rows_cols(desc *d, uint64_t rows, uint64_t cols) {
    shape(d, "%llux%llu", (ull)rows, (ull)cols);
}

// ---------------------------------------------------------------------------------------
// GEMM, CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD, ACT_BWD

static void describe_gemm(desc *d, const ampx_gemm_args *a) {
    if (a->batch > 1) shape(d, "%llux", (ull)a->batch);
    shape(d, "%llux%llu * %llux%llu", (ull)a->m, (ull)a->k, (ull)a->k, (ull)a->n);
    uint64_t b = a->batch ? a->batch : 1;
    tensor(d, a->a, a->m * a->k * b);
    tensor(d, a->b, a->k * a->n * b);
    tensor(d, a->c, a->m * a->n * b * (a->beta != 0 ? 2 : 1));
    d->e->flops = 2 * a->m * a->n * a->k * b;
}

static void describe_cast(desc *d, const ampx_cast_args *a) {
    shape(d, "%llu", (ull)a->n);
    tensor(d, a->src, a->n);
    tensor(d, a->dst, a->n);
}

/* ADD and MUL: a and y rows x cols, b one row (broadcast_b) or rows x cols. */
static void binary(desc *d, uint32_t broadcast_b, uint64_t rows, uint64_t cols, ampx_tensor ta,
                   ampx_tensor tb, ampx_tensor ty) {
    shape(d, "%llux%llu%s", (ull)rows, (ull)cols, broadcast_b ? " + row" : "");
    tensor(d, ta, rows * cols);
    tensor(d, tb, broadcast_b ? cols : rows * cols);
    tensor(d, ty, rows * cols);
}

static void describe_add(desc *d, const ampx_add_args *a) {
    binary(d, a->broadcast_b, a->rows, a->cols, a->a, a->b, a->y);
    d->e->flops = a->rows * a->cols * 3;
}

static void describe_mul(desc *d, const ampx_mul_args *a) {
    binary(d, a->broadcast_b, a->rows, a->cols, a->a, a->b, a->y);
    d->e->flops = a->rows * a->cols;
}

static void describe_scale(desc *d, const ampx_scale_args *a) {
    shape(d, "%llu", (ull)a->n);
    tensor(d, a->x, a->n);
    tensor(d, a->y, a->n);
    d->e->flops = a->n;
}

static void describe_bias_grad(desc *d, const ampx_bias_grad_args *a) {
    rows_cols(d, a->rows, a->cols);
    tensor(d, a->dy, a->rows * a->cols);
    tensor(d, a->db, a->cols);
    d->e->flops = a->rows * a->cols;
}

static void act(desc *d, const ampx_act_args *a, int bwd) {
    shape(d, "%llu", (ull)a->n);
    tensor(d, a->x, a->n);
    if (bwd) tensor(d, a->dy, a->n);
    tensor(d, a->y_or_dx, a->n);
    d->e->flops = a->n * (bwd ? 2 : 1);
}

static void describe_act_fwd(desc *d, const ampx_act_args *a) {
    act(d, a, 0);
}

static void describe_act_bwd(desc *d, const ampx_act_args *a) {
    act(d, a, 1);
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD, SOFTMAX_BWD, SOFTMAX_XENT, the norms, the embedding, REDUCE

static void softmax(desc *d, const ampx_softmax_args *a, int bwd) {
    uint64_t n = a->rows * a->cols;
    rows_cols(d, a->rows, a->cols);
    tensor(d, a->x_or_y, n);
    if (bwd) tensor(d, a->dy, n);
    tensor(d, a->y_or_dx, n);
    d->e->flops = 4 * n;
}

static void describe_softmax_fwd(desc *d, const ampx_softmax_args *a) {
    softmax(d, a, 0);
}

static void describe_softmax_bwd(desc *d, const ampx_softmax_args *a) {
    softmax(d, a, 1);
}

static void describe_softmax_xent(desc *d, const ampx_softmax_xent_args *a) {
    uint64_t n = a->rows * a->cols;
    rows_cols(d, a->rows, a->cols);
    tensor(d, a->logits, n);
    tensor(d, a->labels, a->rows);
    tensor(d, a->loss, 1);
    tensor(d, a->dlogits, n);
    d->e->flops = 5 * n;
}

static void layernorm(desc *d, const ampx_layernorm_args *a, int bwd) {
    uint64_t n = a->rows * a->cols;
    rows_cols(d, a->rows, a->cols);
    tensor(d, a->x, n);
    if (bwd) tensor(d, a->dy, n);
    tensor(d, a->y_or_dx, n);
    tensor(d, a->gamma, a->cols);
    d->e->flops = (bwd ? 10 : 6) * n;
}

static void describe_layernorm_fwd(desc *d, const ampx_layernorm_args *a) {
    layernorm(d, a, 0);
}

static void describe_layernorm_bwd(desc *d, const ampx_layernorm_args *a) {
    layernorm(d, a, 1);
}

static void batchnorm(desc *d, const ampx_batchnorm_args *a, int bwd) {
    uint64_t n = a->outer * a->channels * a->inner;
    shape(d, "%llux%llux%llu", (ull)a->outer, (ull)a->channels, (ull)a->inner);
    tensor(d, a->x, n);
    if (bwd) tensor(d, a->dy, n);
    tensor(d, a->y_or_dx, n);
    tensor(d, a->gamma, a->channels);
    d->e->flops = (bwd ? 10 : 6) * n;
}

static void describe_batchnorm_fwd(desc *d, const ampx_batchnorm_args *a) {
    batchnorm(d, a, 0);
}

static void describe_batchnorm_bwd(desc *d, const ampx_batchnorm_args *a) {
    batchnorm(d, a, 1);
}

static void embedding(desc *d, const ampx_embedding_args *a) {
    shape(d, "%llu of %llux%llu", (ull)a->n, (ull)a->vocab, (ull)a->dim);
    tensor(d, a->table_or_dtable, a->n * a->dim);
    tensor(d, a->ids, a->n);
    tensor(d, a->y_or_dy, a->n * a->dim);
}

static void describe_embedding_fwd(desc *d, const ampx_embedding_args *a) {
    embedding(d, a);
}

static void describe_embedding_bwd(desc *d, const ampx_embedding_args *a) {
    embedding(d, a);
    d->e->flops = a->n * a->dim;
}

static void describe_reduce(desc *d, const ampx_reduce_args *a) {
    rows_cols(d, a->rows, a->cols);
    tensor(d, a->x, a->rows * a->cols);
    tensor(d, a->y, a->rows);
    d->e->flops = a->rows * a->cols;
}

// ---------------------------------------------------------------------------------------
// The multi-tensor ops: SUM_SQUARES, UNSCALE_CHECK, GRAD_STATS, SCALER_UPDATE, SGD, ADAMW

static void tensors(desc *d, uint32_t count, uint64_t n) {
    shape(d, "%u tensors, %llu", count, (ull)n);
}

static void describe_sum_squares(desc *d, const ampx_sum_squares_args *a) {
    uint64_t n = list(d, a->x, NULL);
    tensors(d, a->x.count, n);
    d->e->flops = 2 * n;
}

static void describe_unscale_check(desc *d, const ampx_unscale_check_args *a) {
    uint64_t n = list(d, a->grads, NULL);
    d->e->bytes *= 2; /* in place: read and written */
    tensors(d, a->grads.count, n);
    d->e->flops = n;
}

static void describe_grad_stats(desc *d, const ampx_grad_stats_args *a) {
    uint64_t n = list(d, a->grads, NULL);
    tensors(d, a->grads.count, n);
    d->e->flops = 4 * n;
}

static void describe_abs_max(desc *d, const ampx_abs_max_args *a) {
    uint64_t n = list(d, a->x, NULL);
    tensors(d, a->x.count, n);
    d->e->flops = n;
}

static void describe_scaler_update(desc *d, const ampx_scaler_update_args *a) {
    (void)a;
    shape(d, "scalars");
}

static void describe_sgd(desc *d, const ampx_sgd_args *a) {
    uint64_t n = list(d, a->params, a->grads);
    d->e->bytes += n * 4 * (a->momentum_buf ? 3 : 1); /* params written, momentum r/w */
    tensors(d, a->params.count, n);
    d->e->flops = 5 * n;
}

static void describe_adamw(desc *d, const ampx_adamw_args *a) {
    uint64_t n = list(d, a->params, a->grads);
    d->e->bytes += n * 4 * 5; /* params written, m and v read and written */
    tensors(d, a->params.count, n);
    d->e->flops = 15 * n;
}

// ---------------------------------------------------------------------------------------
// ABI 1.1: DROPOUT, PERMUTE; ABI 1.4: AMP_PASS

static void describe_dropout(desc *d, const ampx_dropout_args *a) {
    shape(d, "%llu", (ull)a->n);
    tensor(d, a->x, a->n);
    tensor(d, a->y, a->n);
    d->e->flops = a->n;
}

static void describe_permute(desc *d, const ampx_permute_args *a) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < a->ndim && i < AMPX_PERMUTE_MAX_DIMS; i++) {
        shape(d, "%s%llu", i ? "x" : "", (ull)a->dims[i]);
        n *= a->dims[i];
    }
    tensor(d, a->x, n);
    tensor(d, a->y, n);
}

static void describe_amp_pass(desc *d, const ampx_amp_pass_args *a) {
    uint64_t n = list(d, a->grads, NULL);
    d->e->bytes *= 2; /* in place: read and written */
    tensors(d, a->grads.count, n);
    d->e->flops = (a->sq_sum.buf ? 3 : 1) * n + (a->stats.buf ? 4 * n : 0);
}

// ---------------------------------------------------------------------------------------
// ABI 1.5: ATTN_FWD, ATTN_BWD

/* Flops of the products (q k^T and p v forward; the backward recomputes q k^T and adds
 * do v^T, p^T do, ds k and ds^T q), halved when causal. */
static uint64_t attn_flops(const ampx_attn_args *a, int products) {
    uint64_t f = 2 * a->batch * a->heads * a->seq * a->seq * a->head_dim * (uint64_t)products;
    return a->causal ? f / 2 : f;
}

static void describe_attn_fwd(desc *d, const ampx_attn_args *a) {
    uint64_t n = a->batch * a->seq * a->heads * a->head_dim;
    shape(d, "b%llu h%llu t%llu d%llu%s", (ull)a->batch, (ull)a->heads, (ull)a->seq,
          (ull)a->head_dim, a->causal ? " causal" : "");
    tensor(d, a->q, n);
    tensor(d, a->k, n);
    tensor(d, a->v, n);
    tensor(d, a->o, n);
    tensor(d, a->lse, a->batch * a->heads * a->seq);
    d->e->flops = attn_flops(a, 2);
}

static void describe_attn_bwd(desc *d, const ampx_attn_args *a) {
    uint64_t n = a->batch * a->seq * a->heads * a->head_dim;
    describe_attn_fwd(d, a);
    tensor(d, a->d_o, n);
    tensor(d, a->dq, n);
    tensor(d, a->dk, n);
    tensor(d, a->dv, n);
    d->e->flops = attn_flops(a, 5);
}

// ---------------------------------------------------------------------------------------
// ABI 1.6: IM2COL, COL2IM, POOL2D_FWD, POOL2D_BWD

/* Windows along an axis (0 when none fits), as backend.h defines them. */
static uint64_t window_out(uint64_t size, uint32_t k, uint32_t stride, uint32_t pad, uint32_t dil) {
    uint64_t span = (uint64_t)dil * (k - 1) + 1, padded = size + 2 * (uint64_t)pad;
    return padded < span || !stride ? 0 : (padded - span) / stride + 1;
}

/* "n2 c3 7x9 k3x3 s1 p1": the images and the window; x's and the window side's tensors. */
static void describe_window(desc *d, const ampx_window_args *a, int cols) {
    uint64_t oh = window_out(a->height, a->kh, a->stride_h, a->pad_h, a->dil_h);
    uint64_t ow = window_out(a->width, a->kw, a->stride_w, a->pad_w, a->dil_w);
    uint64_t nx = a->n * a->channels * a->height * a->width;
    uint64_t ny = a->n * a->channels * oh * ow * (cols ? (uint64_t)a->kh * a->kw : 1);
    shape(d, "n%llu c%llu %llux%llu k%ux%u s%ux%u p%ux%u", (ull)a->n, (ull)a->channels,
          (ull)a->height, (ull)a->width, a->kh, a->kw, a->stride_h, a->stride_w, a->pad_h,
          a->pad_w);
    tensor(d, a->x, nx);
    tensor(d, a->y, ny);
    d->e->flops = cols ? 0 : ny * a->kh * a->kw;
}

static void describe_im2col(desc *d, const ampx_window_args *a) {
    describe_window(d, a, 1);
}

static void describe_col2im(desc *d, const ampx_window_args *a) {
    describe_window(d, a, 1);
}

static void describe_pool2d_fwd(desc *d, const ampx_window_args *a) {
    describe_window(d, a, 0);
}

static void describe_pool2d_bwd(desc *d, const ampx_window_args *a) {
    describe_window(d, a, 0);
}

// ---------------------------------------------------------------------------------------
// ABI 1.7: FP8_QUANTIZE, GEMM_FP8, FP8_SCALE_UPDATE

static void describe_fp8_quantize(desc *d, const ampx_fp8_quantize_args *a) {
    shape(d, "%llu", (ull)a->n);
    tensor(d, a->src, a->n);
    tensor(d, a->dst, a->n);
    d->e->flops = a->n;
}

static void describe_gemm_fp8(desc *d, const ampx_gemm_fp8_args *a) {
    describe_gemm(d, &a->gemm);
}

static void describe_fp8_scale_update(desc *d, const ampx_fp8_scale_update_args *a) {
    shape(d, "%llu tensors, history %u", (ull)a->n, a->history);
    tensor(d, a->state, (2 + (uint64_t)a->history) * a->n);
    d->e->flops = (uint64_t)a->history * a->n;
}

// ---------------------------------------------------------------------------------------

#define DESCRIBE(index, slot, OP, type, n_dtypes, f32)                                             \
    case AMPX_OP_##OP: describe_##slot(&d, (const type *)args); break;

void call_describe(uint32_t op, const void *args, call_event *e) {
    desc d       = {.e = e};
    e->shapes[0] = 0;
    e->dtypes[0] = 0;
    e->bytes     = 0;
    e->flops     = 0;
    switch (op) {
        AMPX_OPS(DESCRIBE)
    default: break;
    }
}
