/* ops.c — every op but GEMM: plugin_kit.h's argument checks (the same rules and one-line
 * messages as every backend), then the device descriptors of kernels.h filled
 * and the kernels enqueued on the context's stream. Nothing here waits for the device: the
 * scalars block, found_inf, the learning rate and the loss scale are read by the kernels.
 *
 * Multi-tensor ops pass their lists in groups of CUK_MT_MAX tensors (CUK_OPT_MAX for the
 * optimizers) as kernel parameters, copied at launch; per-call scratch (partial sums, the
 * staged broadcast row of an in-place ADD/MUL) is stream-ordered memory freed after use.
 */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* Logs a failed launch or async call: "<op>: <what>: <cudaErrorName>: <string>". */
#define CU_LAUNCH(ctx, op, expr) CU_TRY(cu_check(ctx, op, "kernel launch", (expr)))

// ---------------------------------------------------------------------------------------
// CAST

ampx_status cu_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    CU_TAKE(ctx, "cast", ampx_kit_take_cast(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    if (a.src.dtype == a.dst.dtype) /* a copy: bit-exact, NaN payloads included */
        return cu_check(ctx, "cast", "cudaMemcpyAsync",
                        cudaMemcpyAsync(cu_ptr(&a.dst), cu_ptr(&a.src),
                                        (size_t)(a.n * ampx_dtype_size(a.src.dtype)),
                                        cudaMemcpyDeviceToDevice, ctx->stream));
    cuk_cast c = {cu_ptr(&a.src),
                  cu_ptr(&a.dst),
                  a.src.dtype,
                  a.dst.dtype,
                  a.rounding == AMPX_ROUND_STOCHASTIC,
                  a.n,
                  a.seed};
    CU_LAUNCH(ctx, "cast", cuk_cast_run(ctx->stream, &c));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ADD, MUL, SCALE, BIAS_GRAD

/* 1 if the byte ranges of two tensors of n1 and n2 elements share a byte. */
static int overlaps(const ampx_tensor *x, uint64_t nx, const ampx_tensor *y, uint64_t ny) {
    if (x->buf != y->buf || nx == 0 || ny == 0) return 0;
    uint64_t x0 = x->offset, x1 = x0 + nx * ampx_dtype_size(x->dtype);
    uint64_t y0 = y->offset, y1 = y0 + ny * ampx_dtype_size(y->dtype);
    return x0 < y1 && y0 < x1;
}

/* ADD and MUL after ampx_kit_take_add / _mul. */
static ampx_status binary_run(ampx_context *ctx, const char *opname, cuk_binary *k,
                              uint32_t broadcast_b, uint64_t rows, uint64_t cols,
                              const ampx_tensor *a, const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = rows * cols;
    if (n == 0) return AMPX_OK;
    k->a = cu_ptr(a), k->b = cu_ptr(b), k->y = cu_ptr(y);
    k->adt = a->dtype, k->bdt = b->dtype, k->ydt = y->dtype;
    k->broadcast_b = broadcast_b != 0;
    k->n = n, k->cols = cols;
    void *row = NULL;
    if (broadcast_b && rows > 1 && overlaps(b, cols, y, n)) {
        /* y overwrites the broadcast row other rows still read: stage the row first */
        uint64_t bytes = cols * ampx_dtype_size(b->dtype);
        CU_TRY(cu_tmp_alloc(ctx, opname, bytes, &row));
        ampx_status st = cu_check(
            ctx, opname, "cudaMemcpyAsync",
            cudaMemcpyAsync(row, k->b, (size_t)bytes, cudaMemcpyDeviceToDevice, ctx->stream));
        if (st != AMPX_OK) {
            cu_tmp_free(ctx, row);
            return st;
        }
        k->b = row;
    }
    ampx_status st = cu_check(ctx, opname, "kernel launch", cuk_binary_run(ctx->stream, k));
    cu_tmp_free(ctx, row);
    return st;
}

ampx_status cu_add(ampx_context *ctx, const ampx_add_args *args) {
    ampx_add_args a;
    CU_TAKE(ctx, "add", ampx_kit_take_add(AMPX_KIT(ctx), args, &a));
    cuk_binary k = {.mul = 0, .alpha = a.alpha, .beta = a.beta};
    return binary_run(ctx, "add", &k, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

ampx_status cu_mul(ampx_context *ctx, const ampx_mul_args *args) {
    ampx_mul_args a;
    CU_TAKE(ctx, "mul", ampx_kit_take_mul(AMPX_KIT(ctx), args, &a));
    cuk_binary k = {.mul = 1};
    return binary_run(ctx, "mul", &k, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

ampx_status cu_scale(ampx_context *ctx, const ampx_scale_args *args) {
    ampx_scale_args a;
    CU_TAKE(ctx, "scale", ampx_kit_take_scale(AMPX_KIT(ctx), args, &a));
    cuk_scale k = {cu_ptr(&a.x), cu_ptr(&a.y), a.x.dtype, a.y.dtype, a.n, a.alpha};
    CU_LAUNCH(ctx, "scale", cuk_scale_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *args) {
    ampx_bias_grad_args a;
    CU_TAKE(ctx, "bias_grad", ampx_kit_take_bias_grad(AMPX_KIT(ctx), args, &a));
    cuk_bias_grad k = {cu_ptr(&a.dy),     cu_ptr(&a.db), a.dy.dtype, a.db.dtype,
                       a.accumulate != 0, a.rows,        a.cols};
    CU_LAUNCH(ctx, "bias_grad", cuk_bias_grad_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ACT_FWD, ACT_BWD

ampx_status cu_act_fwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    CU_TAKE(ctx, "act_fwd", ampx_kit_take_act_fwd(AMPX_KIT(ctx), args, &a));
    cuk_act k = {.x   = cu_ptr(&a.x),
                 .out = cu_ptr(&a.y_or_dx),
                 .xdt = a.x.dtype,
                 .odt = a.y_or_dx.dtype,
                 .act = (int32_t)a.act,
                 .n   = a.n};
    CU_LAUNCH(ctx, "act_fwd", cuk_act_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_act_bwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    CU_TAKE(ctx, "act_bwd", ampx_kit_take_act_bwd(AMPX_KIT(ctx), args, &a));
    cuk_act k = {.x    = cu_ptr(&a.x),
                 .dy   = cu_ptr(&a.dy),
                 .out  = cu_ptr(&a.y_or_dx),
                 .xdt  = a.x.dtype,
                 .dydt = a.dy.dtype,
                 .odt  = a.y_or_dx.dtype,
                 .act  = (int32_t)a.act,
                 .bwd  = 1,
                 .n    = a.n};
    CU_LAUNCH(ctx, "act_bwd", cuk_act_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD, SOFTMAX_BWD, SOFTMAX_XENT

/* SOFTMAX_FWD and SOFTMAX_BWD after ampx_kit_take_softmax_fwd / _bwd. */
static ampx_status softmax_common(ampx_context *ctx, const char *opname, const ampx_softmax_args *a,
                                  int bwd) {
    cuk_softmax k = {.in     = cu_ptr(&a->x_or_y),
                     .dy     = bwd ? cu_ptr(&a->dy) : NULL,
                     .out    = cu_ptr(&a->y_or_dx),
                     .idt    = a->x_or_y.dtype,
                     .dydt   = bwd ? a->dy.dtype : AMPX_F32,
                     .odt    = a->y_or_dx.dtype,
                     .causal = a->causal != 0,
                     .log    = a->log != 0,
                     .bwd    = bwd,
                     .rows   = a->rows,
                     .cols   = a->cols,
                     .seq_q  = a->seq_q,
                     .scale  = a->scale};
    CU_LAUNCH(ctx, opname, cuk_softmax_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_softmax_fwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    CU_TAKE(ctx, "softmax_fwd", ampx_kit_take_softmax_fwd(AMPX_KIT(ctx), args, &a));
    return softmax_common(ctx, "softmax_fwd", &a, 0);
}

ampx_status cu_softmax_bwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    CU_TAKE(ctx, "softmax_bwd", ampx_kit_take_softmax_bwd(AMPX_KIT(ctx), args, &a));
    return softmax_common(ctx, "softmax_bwd", &a, 1);
}

ampx_status cu_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *args) {
    static const char *op = "softmax_xent";
    ampx_softmax_xent_args a;
    CU_TAKE(ctx, op, ampx_kit_take_softmax_xent(AMPX_KIT(ctx), args, &a));
    ampx_dtype ddt = ampx_kit_xent_ddt(&a);
    /* scratch: the valid-row count, then one double term per row */
    void *tmp = NULL;
    CU_TRY(cu_tmp_alloc(ctx, op, 8 + 8 * a.rows, &tmp));
    cuk_xent k     = {.logits       = cu_ptr(&a.logits),
                      .labels       = cu_ptr(&a.labels),
                      .loss         = cu_ptr(&a.loss),
                      .dlogits      = cu_ptr(&a.dlogits),
                      .scalars      = cu_ptr(&a.scalars),
                      .ldt          = a.logits.dtype,
                      .ddt          = ddt,
                      .ignore_index = a.ignore_index,
                      .rows         = a.rows,
                      .cols         = a.cols,
                      .grad_scale   = a.grad_scale,
                      .terms        = (double *)tmp + 1,
                      .n_valid      = (unsigned long long *)tmp};
    ampx_status st = cu_check(ctx, op, "kernel launch", cuk_xent_run(ctx->stream, &k));
    cu_tmp_free(ctx, tmp);
    return st;
}

// ---------------------------------------------------------------------------------------
// LAYERNORM_FWD, LAYERNORM_BWD

ampx_status cu_layernorm_fwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_fwd";
    ampx_layernorm_args a;
    CU_TAKE(ctx, op, ampx_kit_take_layernorm_fwd(AMPX_KIT(ctx), args, &a));
    cuk_layernorm k = {.x     = cu_ptr(&a.x),
                       .out   = cu_ptr(&a.y_or_dx),
                       .gamma = cu_ptr(&a.gamma),
                       .beta  = cu_ptr(&a.beta),
                       .mean  = cu_ptr(&a.mean),
                       .rstd  = cu_ptr(&a.rstd),
                       .xdt   = a.x.dtype,
                       .odt   = a.y_or_dx.dtype,
                       .rows  = a.rows,
                       .cols  = a.cols,
                       .eps   = a.eps};
    CU_LAUNCH(ctx, op, cuk_layernorm_fwd_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_layernorm_bwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_bwd";
    ampx_layernorm_args a;
    CU_TAKE(ctx, op, ampx_kit_take_layernorm_bwd(AMPX_KIT(ctx), args, &a));
    cuk_layernorm k = {.x          = cu_ptr(&a.x),
                       .dy         = cu_ptr(&a.dy),
                       .out        = cu_ptr(&a.y_or_dx),
                       .gamma      = cu_ptr(&a.gamma),
                       .mean_in    = cu_ptr(&a.mean),
                       .rstd_in    = cu_ptr(&a.rstd),
                       .dgamma     = cu_ptr(&a.dgamma),
                       .dbeta      = cu_ptr(&a.dbeta),
                       .xdt        = a.x.dtype,
                       .dydt       = a.dy.dtype,
                       .odt        = a.y_or_dx.dtype,
                       .accumulate = a.accumulate != 0,
                       .rows       = a.rows,
                       .cols       = a.cols,
                       .eps        = a.eps};
    CU_LAUNCH(ctx, op, cuk_layernorm_bwd_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// BATCHNORM_FWD, BATCHNORM_BWD

ampx_status cu_batchnorm_fwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    static const char *op = "batchnorm_fwd";
    ampx_batchnorm_args a;
    CU_TAKE(ctx, op, ampx_kit_take_batchnorm_fwd(AMPX_KIT(ctx), args, &a));
    uint64_t C      = a.channels;
    int tr          = a.training != 0;
    cuk_batchnorm k = {.x        = cu_ptr(&a.x),
                       .out      = cu_ptr(&a.y_or_dx),
                       .gamma    = cu_ptr(&a.gamma),
                       .beta     = cu_ptr(&a.beta),
                       .run_mean = cu_ptr(&a.running_mean),
                       .run_var  = cu_ptr(&a.running_var),
                       .mean     = tr ? cu_ptr(&a.mean) : NULL,
                       .rstd     = tr ? cu_ptr(&a.rstd) : NULL,
                       .xdt      = a.x.dtype,
                       .odt      = a.y_or_dx.dtype,
                       .training = tr,
                       .outer    = a.outer,
                       .channels = C,
                       .inner    = a.inner,
                       .eps      = a.eps,
                       .momentum = a.momentum};
    CU_LAUNCH(ctx, op, cuk_batchnorm_fwd_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_batchnorm_bwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    static const char *op = "batchnorm_bwd";
    ampx_batchnorm_args a;
    CU_TAKE(ctx, op, ampx_kit_take_batchnorm_bwd(AMPX_KIT(ctx), args, &a));
    uint64_t C      = a.channels;
    cuk_batchnorm k = {.x          = cu_ptr(&a.x),
                       .dy         = cu_ptr(&a.dy),
                       .out        = cu_ptr(&a.y_or_dx),
                       .gamma      = cu_ptr(&a.gamma),
                       .mean       = cu_ptr(&a.mean),
                       .rstd       = cu_ptr(&a.rstd),
                       .dgamma     = cu_ptr(&a.dgamma),
                       .dbeta      = cu_ptr(&a.dbeta),
                       .xdt        = a.x.dtype,
                       .dydt       = a.dy.dtype,
                       .odt        = a.y_or_dx.dtype,
                       .accumulate = a.accumulate != 0,
                       .outer      = a.outer,
                       .channels   = C,
                       .inner      = a.inner};
    CU_LAUNCH(ctx, op, cuk_batchnorm_bwd_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// EMBEDDING_FWD, EMBEDDING_BWD

static ampx_status emb_prepare(ampx_context *ctx, const ampx_embedding_args *args, int bwd,
                               cuk_embedding *k) {
    const char *op = bwd ? "embedding_bwd" : "embedding_fwd";
    ampx_embedding_args a;
    CU_TAKE(ctx, op, ampx_kit_take_embedding(AMPX_KIT(ctx), args, bwd, &a));
    *k = (cuk_embedding){cu_ptr(&a.table_or_dtable),
                         cu_ptr(&a.ids),
                         cu_ptr(&a.y_or_dy),
                         bwd ? AMPX_F32 : a.table_or_dtable.dtype,
                         a.y_or_dy.dtype,
                         a.n,
                         a.vocab,
                         a.dim};
    return AMPX_OK;
}

ampx_status cu_embedding_fwd(ampx_context *ctx, const ampx_embedding_args *args) {
    cuk_embedding k;
    CU_TRY(emb_prepare(ctx, args, 0, &k));
    CU_LAUNCH(ctx, "embedding_fwd", cuk_embedding_fwd_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_embedding_bwd(ampx_context *ctx, const ampx_embedding_args *args) {
    cuk_embedding k;
    CU_TRY(emb_prepare(ctx, args, 1, &k));
    CU_LAUNCH(ctx, "embedding_bwd", cuk_embedding_bwd_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// REDUCE

ampx_status cu_reduce(ampx_context *ctx, const ampx_reduce_args *args) {
    static const char *op = "reduce";
    ampx_reduce_args a;
    CU_TAKE(ctx, op, ampx_kit_take_reduce(AMPX_KIT(ctx), args, &a));
    cuk_reduce k = {cu_ptr(&a.x), cu_ptr(&a.y), a.x.dtype, a.y.dtype, a.mode == AMPX_REDUCE_MEAN,
                    a.rows,       a.cols};
    CU_LAUNCH(ctx, op, cuk_reduce_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Multi-tensor lists

/* Tensors [first, first + count) of l as one launch group. */
static void mt_group(const ampx_tensor_list *l, uint32_t first, cuk_mt_group *g) {
    memset(g, 0, sizeof *g);
    g->first = first;
    g->count = l->count - first < CUK_MT_MAX ? l->count - first : CUK_MT_MAX;
    for (uint32_t i = 0; i < g->count; i++) {
        const ampx_tensor *t = &l->tensors[first + i];
        g->t[i]              = (cuk_mt_tensor){cu_ptr(t), l->n_elems[first + i], t->dtype};
        if (g->t[i].n > g->max_n) g->max_n = g->t[i].n;
    }
}

static uint64_t list_max_n(const ampx_tensor_list *l) {
    uint64_t m = 0;
    for (uint32_t t = 0; t < l->count; t++)
        if (l->n_elems[t] > m) m = l->n_elems[t];
    return m;
}

// ---------------------------------------------------------------------------------------
// SUM_SQUARES

ampx_status cu_sum_squares(ampx_context *ctx, const ampx_sum_squares_args *args) {
    static const char *op = "sum_squares";
    ampx_sum_squares_args a;
    CU_TAKE(ctx, op, ampx_kit_take_sum_squares(AMPX_KIT(ctx), args, &a));
    uint32_t bx     = cuk_mt_blocks(list_max_n(&a.x));
    uint64_t n_part = (uint64_t)a.x.count * bx;
    void *partial   = NULL;
    CU_TRY(cu_tmp_alloc(ctx, op, n_part * sizeof(double), &partial));
    ampx_status st = AMPX_OK;
    cuk_mt_group g;
    for (uint32_t first = 0; first < a.x.count && st == AMPX_OK; first += CUK_MT_MAX) {
        mt_group(&a.x, first, &g);
        st = cu_check(ctx, op, "kernel launch",
                      cuk_sum_squares_part(ctx->stream, &g, bx, (double *)partial));
    }
    if (st == AMPX_OK)
        st = cu_check(ctx, op, "kernel launch",
                      cuk_sum_squares_finish(ctx->stream, (const double *)partial, n_part,
                                             (float *)cu_ptr(&a.out), a.accumulate != 0));
    cu_tmp_free(ctx, partial);
    return st;
}

// ---------------------------------------------------------------------------------------
// ABS_MAX

ampx_status cu_abs_max(ampx_context *ctx, const ampx_abs_max_args *args) {
    static const char *op = "abs_max";
    ampx_abs_max_args a;
    CU_TAKE(ctx, op, ampx_kit_take_abs_max(AMPX_KIT(ctx), args, &a));
    if (a.x.count == 0) return AMPX_OK;
    ampx_status st =
        cu_check(ctx, op, "cudaMemsetAsync",
                 cudaMemsetAsync(cu_ptr(&a.out), 0, 4 * (size_t)a.x.count, ctx->stream));
    uint32_t bx = cuk_mt_blocks(list_max_n(&a.x));
    cuk_mt_group g;
    for (uint32_t first = 0; first < a.x.count && st == AMPX_OK; first += CUK_MT_MAX) {
        mt_group(&a.x, first, &g);
        st = cu_check(ctx, op, "kernel launch",
                      cuk_abs_max_run(ctx->stream, &g, bx, (float *)cu_ptr(&a.out)));
    }
    return st;
}

// ---------------------------------------------------------------------------------------
// UNSCALE_CHECK, GRAD_STATS, SCALER_UPDATE

ampx_status cu_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *args) {
    static const char *op = "unscale_check";
    ampx_unscale_check_args a;
    CU_TAKE(ctx, op, ampx_kit_take_unscale_check(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) return AMPX_OK;
    int32_t *flags = (int32_t *)cu_ptr(&a.flags) + a.flag_base;
    CU_TRY(
        cu_check(ctx, op, "cudaMemsetAsync",
                 cudaMemsetAsync(flags, 0, (size_t)a.grads.count * sizeof(int32_t), ctx->stream)));
    cuk_mt_group g;
    for (uint32_t first = 0; first < a.grads.count; first += CUK_MT_MAX) {
        mt_group(&a.grads, first, &g);
        CU_LAUNCH(ctx, op, cuk_unscale_check_run(ctx->stream, &g, flags, cu_ptr(&a.scalars)));
    }
    return AMPX_OK;
}

ampx_status cu_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *args) {
    static const char *op = "grad_stats";
    ampx_grad_stats_args a;
    CU_TAKE(ctx, op, ampx_kit_take_grad_stats(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) return AMPX_OK;
    float tiny  = a.target == AMPX_F16 ? 0x1p-14f : 0x1p-126f;
    uint32_t bx = cuk_mt_blocks(list_max_n(&a.grads));
    void *part  = NULL;
    CU_TRY(cu_tmp_alloc(ctx, op, (uint64_t)a.grads.count * bx * sizeof(cuk_stats_part), &part));
    ampx_status st = AMPX_OK;
    cuk_mt_group g;
    for (uint32_t first = 0; first < a.grads.count && st == AMPX_OK; first += CUK_MT_MAX) {
        mt_group(&a.grads, first, &g);
        st = cu_check(
            ctx, op, "kernel launch",
            cuk_grad_stats_run(ctx->stream, &g, bx, tiny, (cuk_stats_part *)part,
                               (float *)cu_ptr(&a.stats), (int32_t *)cu_ptr(&a.counts),
                               a.nan_counts.buf ? (int32_t *)cu_ptr(&a.nan_counts) : NULL));
    }
    cu_tmp_free(ctx, part);
    return st;
}

/* AMP_PASS: one launch per group of the fused kernel, then the finishes of GRAD_STATS and
 * SUM_SQUARES over its partials (the same partials those ops leave, so the same bits). */
ampx_status cu_amp_pass(ampx_context *ctx, const ampx_amp_pass_args *args) {
    static const char *op = "amp_pass";
    ampx_amp_pass_args a;
    CU_TAKE(ctx, op, ampx_kit_take_amp_pass(AMPX_KIT(ctx), args, &a));
    int stats   = a.stats.buf || a.counts.buf || a.nan_counts.buf;
    int sq      = a.sq_sum.buf != NULL;
    uint32_t bx = cuk_mt_blocks(list_max_n(&a.grads));
    uint64_t np = (uint64_t)a.grads.count * bx;
    if (a.grads.count) {
        int32_t *flags = (int32_t *)cu_ptr(&a.flags) + a.flag_base;
        CU_TRY(cu_check(
            ctx, op, "cudaMemsetAsync",
            cudaMemsetAsync(flags, 0, (size_t)a.grads.count * sizeof(int32_t), ctx->stream)));
    }
    /* one temporary: the statistics' partials, then the squares' */
    uint64_t sp_bytes = stats ? np * sizeof(cuk_stats_part) : 0;
    void *tmp         = NULL;
    if (stats || sq) CU_TRY(cu_tmp_alloc(ctx, op, sp_bytes + (sq ? np : 1) * sizeof(double), &tmp));
    cuk_stats_part *sp = stats ? (cuk_stats_part *)tmp : NULL;
    double *qp         = sq ? (double *)((char *)tmp + sp_bytes) : NULL;
    ampx_status st     = AMPX_OK;
    cuk_mt_group g;
    float tiny[CUK_MT_MAX];
    for (uint32_t first = 0; first < a.grads.count && st == AMPX_OK; first += CUK_MT_MAX) {
        mt_group(&a.grads, first, &g);
        for (uint32_t i = 0; i < g.count; i++)
            tiny[i] = ampx_kit_tiny_of(ampx_kit_amp_target(&a, first + i));
        st = cu_check(ctx, op, "kernel launch",
                      cuk_amp_pass_run(ctx->stream, &g, tiny, bx,
                                       (int32_t *)cu_ptr(&a.flags) + a.flag_base,
                                       cu_ptr(&a.scalars), sp, qp));
        if (st == AMPX_OK && stats)
            st = cu_check(
                ctx, op, "kernel launch",
                cuk_grad_stats_finish(ctx->stream, &g, bx, sp,
                                      a.stats.buf ? (float *)cu_ptr(&a.stats) : NULL,
                                      a.counts.buf ? (int32_t *)cu_ptr(&a.counts) : NULL,
                                      a.nan_counts.buf ? (int32_t *)cu_ptr(&a.nan_counts) : NULL));
    }
    if (st == AMPX_OK && sq)
        st = cu_check(ctx, op, "kernel launch",
                      cuk_sum_squares_finish(ctx->stream, qp, np, (float *)cu_ptr(&a.sq_sum),
                                             a.sq_accumulate != 0));
    if (tmp) cu_tmp_free(ctx, tmp);
    return st;
}

ampx_status cu_scaler_update(ampx_context *ctx, const ampx_scaler_update_args *args) {
    static const char *op = "scaler_update";
    ampx_scaler_update_args a;
    CU_TAKE(ctx, op, ampx_kit_take_scaler_update(AMPX_KIT(ctx), args, &a));
    /* the args' double factors, 0 when absent: the kernel then uses the block's floats */
    CU_LAUNCH(ctx, op,
              cuk_scaler_update_run(ctx->stream, cu_ptr(&a.scalars), a.growth_factor_f64,
                                    a.backoff_factor_f64));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// SGD, ADAMW

/* Enqueues the optimizer over all tensors, CUK_OPT_MAX per launch; base carries the
 * hyper-parameters, s1/s2 the state arrays (NULL where absent). */
static ampx_status opt_run(ampx_context *ctx, const char *op, cuk_opt_group *base,
                           const ampx_tensor_list *params, const ampx_tensor *grads,
                           const ampx_tensor *s1, const ampx_tensor *s2, const ampx_tensor *copies,
                           const float *wd, float weight_decay) {
    /* an empty list is one launch too: a step that is not skipped writes scalars->lr */
    uint32_t first = 0;
    do {
        cuk_opt_group g = *base;
        g.first         = first;
        g.count         = params->count - first < CUK_OPT_MAX ? params->count - first : CUK_OPT_MAX;
        g.write_lr      = first == 0;
        g.max_n         = 0;
        for (uint32_t i = 0; i < g.count; i++) {
            uint32_t t = first + i;
            g.t[i]     = (cuk_opt_tensor){
                    .p    = (float *)cu_ptr(&params->tensors[t]),
                    .g    = cu_ptr(&grads[t]),
                    .s1   = s1 ? (float *)cu_ptr(&s1[t]) : NULL,
                    .s2   = s2 ? (float *)cu_ptr(&s2[t]) : NULL,
                    .copy = copies ? cu_ptr(&copies[t]) : NULL,
                    .n    = params->n_elems[t],
                    .gdt  = grads[t].dtype,
                    .cdt  = copies && copies[t].buf ? copies[t].dtype : AMPX_F32,
                    .wd   = wd ? wd[t] : weight_decay,
            };
            if (g.t[i].n > g.max_n) g.max_n = g.t[i].n;
        }
        CU_LAUNCH(ctx, op, cuk_optimizer_run(ctx->stream, &g));
        first += CUK_OPT_MAX;
    } while (first < params->count);
    return AMPX_OK;
}

ampx_status cu_sgd(ampx_context *ctx, const ampx_sgd_args *args) {
    static const char *op = "sgd";
    ampx_sgd_args a;
    CU_TAKE(ctx, op, ampx_kit_take_sgd(AMPX_KIT(ctx), args, &a));
    cuk_opt_group base;
    memset(&base, 0, sizeof base);
    base.nesterov        = a.nesterov != 0;
    base.stochastic_copy = a.stochastic_copy != 0;
    base.momentum        = a.momentum;
    base.dampening       = a.dampening;
    base.max_grad_norm   = a.max_grad_norm;
    base.grad_sq_sum     = (const float *)cu_ptr(&a.grad_sq_sum);
    base.scalars         = cu_ptr(&a.scalars);
    base.seed            = a.seed;
    return opt_run(ctx, op, &base, &a.params, a.grads, a.momentum != 0.0f ? a.momentum_buf : NULL,
                   NULL, a.copies, a.wd, a.weight_decay);
}

ampx_status cu_adamw(ampx_context *ctx, const ampx_adamw_args *args) {
    static const char *op = "adamw";
    ampx_adamw_args a;
    CU_TAKE(ctx, op, ampx_kit_take_adamw(AMPX_KIT(ctx), args, &a));
    cuk_opt_group base;
    memset(&base, 0, sizeof base);
    base.adamw           = 1;
    base.stochastic_copy = a.stochastic_copy != 0;
    base.beta1           = a.beta1;
    base.beta2           = a.beta2;
    base.eps             = a.eps;
    base.max_grad_norm   = a.max_grad_norm;
    base.grad_sq_sum     = (const float *)cu_ptr(&a.grad_sq_sum);
    base.scalars         = cu_ptr(&a.scalars);
    base.seed            = a.seed;
    return opt_run(ctx, op, &base, &a.params, a.grads, a.m, a.v, a.copies, a.wd, a.weight_decay);
}

// ---------------------------------------------------------------------------------------
// ABI 1.1: DROPOUT, PERMUTE

ampx_status cu_dropout(ampx_context *ctx, const ampx_dropout_args *args) {
    ampx_dropout_args a;
    CU_TAKE(ctx, "dropout", ampx_kit_take_dropout(AMPX_KIT(ctx), args, &a));
    cuk_dropout k = {cu_ptr(&a.x), cu_ptr(&a.y), a.x.dtype,   a.y.dtype, a.n,
                     a.seed,       a.offset,     a.threshold, a.scale};
    CU_LAUNCH(ctx, "dropout", cuk_dropout_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_permute(ampx_context *ctx, const ampx_permute_args *args) {
    ampx_permute_args a, loop;
    uint64_t n;
    CU_TAKE(ctx, "permute", ampx_kit_take_permute(AMPX_KIT(ctx), args, &a, &loop, &n));
    if (n == 0) return AMPX_OK;
    cuk_permute k = {.x   = cu_ptr(&loop.x),
                     .y   = cu_ptr(&loop.y),
                     .xdt = loop.x.dtype,
                     .ydt = loop.y.dtype,
                     .n   = n};
    memcpy(k.dims, loop.dims, sizeof k.dims);
    memcpy(k.xs, loop.x_strides, sizeof k.xs);
    memcpy(k.ys, loop.y_strides, sizeof k.ys);
    CU_LAUNCH(ctx, "permute", cuk_permute_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ABI 1.5: ATTN_FWD, ATTN_BWD

static cuk_attn cu_attn_of(const ampx_attn_args *a) {
    cuk_attn k = {.q         = cu_ptr(&a->q),
                  .k         = cu_ptr(&a->k),
                  .v         = cu_ptr(&a->v),
                  .o         = cu_ptr(&a->o),
                  .d_o       = cu_ptr(&a->d_o),
                  .out       = cu_ptr(&a->o),
                  .dq        = cu_ptr(&a->dq),
                  .dk        = cu_ptr(&a->dk),
                  .dv        = cu_ptr(&a->dv),
                  .lse       = (float *)cu_ptr(&a->lse),
                  .delta     = (float *)cu_ptr(&a->delta),
                  .qdt       = a->q.dtype,
                  .odt       = a->o.dtype,
                  .ddt       = a->d_o.dtype,
                  .gdt       = a->dq.dtype,
                  .causal    = a->causal,
                  .threshold = a->dropout_threshold,
                  .scale     = a->scale,
                  .dscale    = a->dropout_scale,
                  .batch     = a->batch,
                  .heads     = a->heads,
                  .seq       = a->seq,
                  .hd        = a->head_dim,
                  .ld_q      = a->ld_q,
                  .ld_k      = a->ld_k,
                  .ld_v      = a->ld_v,
                  .ld_o      = a->ld_o,
                  .ld_dq     = a->ld_dq,
                  .ld_dk     = a->ld_dk,
                  .ld_dv     = a->ld_dv,
                  .seed      = a->seed,
                  .offset    = a->offset};
    return k;
}

ampx_status cu_attn_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    CU_TAKE(ctx, "attn_fwd", ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 0));
    cuk_attn k = cu_attn_of(&a);
    CU_LAUNCH(ctx, "attn_fwd", cuk_attn_fwd_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_attn_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    CU_TAKE(ctx, "attn_bwd", ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 1));
    cuk_attn k = cu_attn_of(&a);
    CU_LAUNCH(ctx, "attn_bwd", cuk_attn_bwd_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ABI 1.6: IM2COL, COL2IM, POOL2D_FWD, POOL2D_BWD

/* The window op's descriptor after ampx_kit_take_window; 0 when n == 0 (nothing to do). */
static int cu_window_of(const ampx_window_args *a, uint64_t out_h, uint64_t out_w, cuk_window *k) {
    *k = (cuk_window){.x          = cu_ptr(&a->x),
                      .y          = cu_ptr(&a->y),
                      .idx        = a->mode == AMPX_POOL_MAX ? cu_ptr(&a->indices) : NULL,
                      .xdt        = a->x.dtype,
                      .ydt        = a->y.dtype,
                      .mode       = a->mode,
                      .count_pad  = a->count_pad,
                      .accumulate = a->accumulate,
                      .kh         = a->kh,
                      .kw         = a->kw,
                      .sh         = a->stride_h,
                      .sw         = a->stride_w,
                      .ph         = a->pad_h,
                      .pw         = a->pad_w,
                      .dh         = a->dil_h,
                      .dw         = a->dil_w,
                      .n          = a->n,
                      .channels   = a->channels,
                      .height     = a->height,
                      .width      = a->width,
                      .x_batch    = a->x_batch,
                      .out_h      = out_h,
                      .out_w      = out_w};
    return a->n != 0;
}

ampx_status cu_im2col(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    cuk_window k;
    CU_TAKE(ctx, "im2col", ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_IM2COL, args, &a, &oh, &ow));
    if (!cu_window_of(&a, oh, ow, &k)) return AMPX_OK;
    CU_LAUNCH(ctx, "im2col", cuk_im2col_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_col2im(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    cuk_window k;
    CU_TAKE(ctx, "col2im", ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_COL2IM, args, &a, &oh, &ow));
    if (!cu_window_of(&a, oh, ow, &k)) return AMPX_OK;
    CU_LAUNCH(ctx, "col2im", cuk_col2im_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_pool2d_fwd(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    cuk_window k;
    CU_TAKE(ctx, "pool2d_fwd",
            ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_POOL2D_FWD, args, &a, &oh, &ow));
    if (!cu_window_of(&a, oh, ow, &k)) return AMPX_OK;
    CU_LAUNCH(ctx, "pool2d_fwd", cuk_pool2d_fwd_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_pool2d_bwd(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    cuk_window k;
    CU_TAKE(ctx, "pool2d_bwd",
            ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_POOL2D_BWD, args, &a, &oh, &ow));
    if (!cu_window_of(&a, oh, ow, &k)) return AMPX_OK;
    CU_LAUNCH(ctx, "pool2d_bwd", cuk_pool2d_bwd_run(ctx->stream, &k));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// ABI 1.7: FP8_QUANTIZE, FP8_SCALE_UPDATE (GEMM_FP8 is in gemm.c)

ampx_status cu_fp8_quantize(ampx_context *ctx, const ampx_fp8_quantize_args *args) {
    ampx_fp8_quantize_args a;
    CU_TAKE(ctx, "fp8_quantize", ampx_kit_take_fp8_quantize(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    cuk_fp8_quantize k = {
        .src      = cu_ptr(&a.src),
        .dst      = cu_ptr(&a.dst),
        .scale    = (const float *)cu_ptr(&a.scale),
        .amax     = (float *)cu_ptr(&a.amax),
        .counts   = (int32_t *)cu_ptr(&a.counts),
        .sdt      = a.src.dtype,
        .ddt      = a.dst.dtype,
        .saturate = (int32_t)a.saturate,
        .n        = a.n,
    };
    CU_LAUNCH(ctx, "fp8_quantize", cuk_fp8_quantize_run(ctx->stream, &k));
    return AMPX_OK;
}

ampx_status cu_fp8_scale_update(ampx_context *ctx, const ampx_fp8_scale_update_args *args) {
    ampx_fp8_scale_update_args a;
    CU_TAKE(ctx, "fp8_scale_update", ampx_kit_take_fp8_scale_update(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    cuk_fp8_scale_update k = {
        .state             = (float *)cu_ptr(&a.state),
        .fp8_max           = (const float *)cu_ptr(&a.fp8_max),
        .scalars           = cu_ptr(&a.scalars),
        .algo              = a.algo,
        .history           = a.history,
        .margin            = a.margin,
        .skip_on_found_inf = a.skip_on_found_inf,
        .n                 = a.n,
    };
    CU_LAUNCH(ctx, "fp8_scale_update", cuk_fp8_scale_update_run(ctx->stream, &k));
    return AMPX_OK;
}
