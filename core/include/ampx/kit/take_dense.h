/* ampx/kit/take_dense.h — part of plugin_kit.h (a plugin includes that): the takes of the
 * dense ops, GEMM and its epilogue, the elementwise ops and activations, the softmaxes, the
 * norms, and the fp8 ops (ABI 1.7) that reuse GEMM's checks.
 */
#ifndef AMPX_KIT_TAKE_DENSE_H
#define AMPX_KIT_TAKE_DENSE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// GEMM

/* Elements spanned by `batch` matrices of rows x cols with leading dimension ld and batch
 * stride: the index of the last element + 1, 0 when nothing is touched, -1 on overflow. */
static inline int ampx_kit_gemm_extent(uint64_t batch, uint64_t stride, uint64_t rows,
                                       uint64_t cols, uint64_t ld, uint64_t *out) {
    *out = 0;
    if (batch == 0 || rows == 0 || cols == 0) return 0;
    uint64_t x, y, z;
    if (ampx_kit_mul_u64(batch - 1, stride, &x) || ampx_kit_mul_u64(rows - 1, ld, &y) ||
        __builtin_add_overflow(x, y, &z) || __builtin_add_overflow(z, cols, out))
        return -1;
    return 0;
}

static inline ampx_status ampx_kit_check_ld(const ampx_kit *kit, const char *on, const char *name,
                                            uint64_t ld, const char *dim, uint64_t need) {
    if (ld >= need) return AMPX_OK;
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s %llu < %s %llu", on, name,
                         (unsigned long long)ld, dim, (unsigned long long)need);
}

/* GEMM: dtypes, leading dimensions, and A, B, C within their buffers. extent (may be NULL)
 * receives the elements A, B and C span (A and B count 0 when m, n, k or batch is 0: they
 * are not read then). */
/* 1 when a GEMM asks for any part of the ABI 1.5 epilogue (bias, act, pre_act, bias_grad).
 * A plugin that does not answer AMPX_SHAPE_GEMM_EPILOGUE refuses such a GEMM. */
static inline int ampx_kit_gemm_epilogue(const ampx_gemm_args *g) {
    return g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf || g->bias_grad.buf;
}

/* The epilogue's fields: act a known activation, bias [n] and pre_act (C's extent) of a float
 * dtype, bias_grad f32 [n]. */
static inline ampx_status ampx_kit_check_gemm_epilogue(const ampx_kit *kit, const char *on,
                                                       const ampx_gemm_args *g, uint64_t ext_c) {
    if (g->act > AMPX_GEMM_ACT(AMPX_ACT_COUNT - 1))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown epilogue act %u", on, g->act);
    if ((g->bias.buf && !ampx_dtype_is_float(g->bias.dtype)) ||
        (g->pre_act.buf && !ampx_dtype_is_float(g->pre_act.dtype)))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias and pre_act must be float", on);
    if (g->bias_grad.buf && g->bias_grad.dtype != AMPX_F32)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias_grad must be f32, not %s", on,
                             ampx_dtype_name(g->bias_grad.dtype));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "bias", &g->bias, g->n, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "pre_act", &g->pre_act, ext_c, 1));
    return ampx_kit_check_tensor(kit, on, "bias_grad", &g->bias_grad, g->n, 1);
}

/* The checks of a GEMM's fields once taken, for GEMM and GEMM_FP8 (op, named on). */
static inline ampx_status ampx_kit_check_gemm_(const ampx_kit *kit, const char *on, uint32_t op,
                                               const ampx_gemm_args *g, uint64_t extent[3]) {
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, on, op, g->a.dtype, g->b.dtype, g->c.dtype));
    uint64_t need_lda = g->trans_a ? g->m : g->k, need_ldb = g->trans_b ? g->k : g->n;
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "lda", g->lda, g->trans_a ? "m" : "k", need_lda));
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "ldb", g->ldb, g->trans_b ? "k" : "n", need_ldb));
    AMPX_KIT_TRY(ampx_kit_check_ld(kit, on, "ldc", g->ldc, "n", g->n));
    int reads_ab   = g->m && g->n && g->k && g->batch;
    uint64_t ext_a = 0, ext_b = 0, ext_c = 0;
    if ((reads_ab && (ampx_kit_gemm_extent(g->batch, g->stride_a, g->trans_a ? g->k : g->m,
                                           g->trans_a ? g->m : g->k, g->lda, &ext_a) ||
                      ampx_kit_gemm_extent(g->batch, g->stride_b, g->trans_b ? g->n : g->k,
                                           g->trans_b ? g->k : g->n, g->ldb, &ext_b))) ||
        ampx_kit_gemm_extent(g->batch, g->stride_c, g->m, g->n, g->ldc, &ext_c))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: shape and strides overflow 64 bits", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "A", &g->a, ext_a, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "B", &g->b, ext_b, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "C", &g->c, ext_c, 0));
    AMPX_KIT_TRY(ampx_kit_check_gemm_epilogue(kit, on, g, ext_c));
    if (extent) extent[0] = ext_a, extent[1] = ext_b, extent[2] = ext_c;
    return AMPX_OK;
}

static inline ampx_status ampx_kit_take_gemm(const ampx_kit *kit, const ampx_gemm_args *args,
                                             ampx_gemm_args *g, uint64_t extent[3]) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "gemm", args, g, sizeof *g));
    return ampx_kit_check_gemm_(kit, "gemm", AMPX_OP_GEMM, g, extent);
}

// ---------------------------------------------------------------------------------------
// CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD, ACT_BWD

static inline ampx_status ampx_kit_take_cast(const ampx_kit *kit, const ampx_cast_args *args,
                                             ampx_cast_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "cast", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "cast", "src", &a->src, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "cast", "dst", &a->dst, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "cast", AMPX_OP_CAST, a->src.dtype, a->dst.dtype));
    if (a->rounding != AMPX_ROUND_NEAREST_EVEN && a->rounding != AMPX_ROUND_STOCHASTIC)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "cast: unknown rounding %u", a->rounding);
    return AMPX_OK;
}

/* ADD and MUL: y, a of rows x cols; b of cols (broadcast_b) or rows x cols. */
static inline ampx_status ampx_kit_check_binary(const ampx_kit *kit, const char *opname,
                                                uint32_t op, uint32_t broadcast_b, uint64_t rows,
                                                uint64_t cols, const ampx_tensor *a,
                                                const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, opname, op, a->dtype, b->dtype, y->dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, opname, rows, cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, "a", a, n, 0));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor(kit, opname, "b", b, broadcast_b ? (rows ? cols : 0) : n, 0));
    return ampx_kit_check_tensor(kit, opname, "y", y, n, 0);
}

static inline ampx_status ampx_kit_take_add(const ampx_kit *kit, const ampx_add_args *args,
                                            ampx_add_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "add", args, a, sizeof *a));
    return ampx_kit_check_binary(kit, "add", AMPX_OP_ADD, a->broadcast_b, a->rows, a->cols, &a->a,
                                 &a->b, &a->y);
}

static inline ampx_status ampx_kit_take_mul(const ampx_kit *kit, const ampx_mul_args *args,
                                            ampx_mul_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "mul", args, a, sizeof *a));
    return ampx_kit_check_binary(kit, "mul", AMPX_OP_MUL, a->broadcast_b, a->rows, a->cols, &a->a,
                                 &a->b, &a->y);
}

static inline ampx_status ampx_kit_take_scale(const ampx_kit *kit, const ampx_scale_args *args,
                                              ampx_scale_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "scale", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "scale", AMPX_OP_SCALE, a->x.dtype, a->y.dtype));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "scale", "x", &a->x, a->n, 0));
    return ampx_kit_check_tensor(kit, "scale", "y", &a->y, a->n, 0);
}

static inline ampx_status ampx_kit_take_bias_grad(const ampx_kit *kit,
                                                  const ampx_bias_grad_args *args,
                                                  ampx_bias_grad_args *a) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, "bias_grad", args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, "bias_grad", AMPX_OP_BIAS_GRAD, a->dy.dtype, a->db.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, "bias_grad", a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "bias_grad", "dy", &a->dy, n, 0));
    return ampx_kit_check_tensor(kit, "bias_grad", "db", &a->db, a->cols, 0);
}

static inline ampx_status ampx_kit_take_act_fwd(const ampx_kit *kit, const ampx_act_args *args,
                                                ampx_act_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "act_fwd", args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, "act_fwd", AMPX_OP_ACT_FWD, a->x.dtype, a->y_or_dx.dtype));
    if (a->act >= AMPX_ACT_COUNT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "act_fwd: unknown activation %u", a->act);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_fwd", "x", &a->x, a->n, 0));
    return ampx_kit_check_tensor(kit, "act_fwd", "y", &a->y_or_dx, a->n, 0);
}

static inline ampx_status ampx_kit_take_act_bwd(const ampx_kit *kit, const ampx_act_args *args,
                                                ampx_act_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "act_bwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, "act_bwd", AMPX_OP_ACT_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    if (a->act >= AMPX_ACT_COUNT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "act_bwd: unknown activation %u", a->act);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_bwd", "x", &a->x, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, "act_bwd", "dy", &a->dy, a->n, 0));
    return ampx_kit_check_tensor(kit, "act_bwd", "dx", &a->y_or_dx, a->n, 0);
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD, SOFTMAX_BWD, SOFTMAX_XENT

static inline ampx_status ampx_kit_check_softmax(const ampx_kit *kit, const char *opname,
                                                 const ampx_softmax_args *a, int bwd) {
    uint64_t n = 0;
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, opname, a->rows, a->cols, &n));
    if (a->causal && (a->seq_q == 0 || a->seq_q > a->cols))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: causal seq_q %llu not in [1, cols %llu]",
                             opname, (unsigned long long)a->seq_q, (unsigned long long)a->cols);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, bwd ? "y" : "x", &a->x_or_y, n, 0));
    if (bwd) AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, "dy", &a->dy, n, 0));
    return ampx_kit_check_tensor(kit, opname, bwd ? "dx" : "y", &a->y_or_dx, n, 0);
}

static inline ampx_status ampx_kit_take_softmax_fwd(const ampx_kit *kit,
                                                    const ampx_softmax_args *args,
                                                    ampx_softmax_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "softmax_fwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, "softmax_fwd", AMPX_OP_SOFTMAX_FWD, a->x_or_y.dtype,
                                        a->y_or_dx.dtype));
    return ampx_kit_check_softmax(kit, "softmax_fwd", a, 0);
}

static inline ampx_status ampx_kit_take_softmax_bwd(const ampx_kit *kit,
                                                    const ampx_softmax_args *args,
                                                    ampx_softmax_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "softmax_bwd", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, "softmax_bwd", AMPX_OP_SOFTMAX_BWD, a->x_or_y.dtype,
                                        a->dy.dtype, a->y_or_dx.dtype));
    return ampx_kit_check_softmax(kit, "softmax_bwd", a, 1);
}

/* The dtype of dlogits as supports() sees it: f32 when dlogits is absent (loss only). */
static inline ampx_dtype ampx_kit_xent_ddt(const ampx_softmax_xent_args *a) {
    return a->dlogits.buf ? a->dlogits.dtype : AMPX_F32;
}

static inline ampx_status ampx_kit_take_softmax_xent(const ampx_kit *kit,
                                                     const ampx_softmax_xent_args *args,
                                                     ampx_softmax_xent_args *a) {
    static const char *op = "softmax_xent";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_SOFTMAX_XENT, a->logits.dtype,
                                        ampx_kit_xent_ddt(a)));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "logits", &a->logits, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "labels", &a->labels, AMPX_I32, a->rows, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "loss", &a->loss, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dlogits", &a->dlogits, n, 1));
    return ampx_kit_check_scalars(kit, op, &a->scalars, 1);
}

// ---------------------------------------------------------------------------------------
// LAYERNORM_FWD, LAYERNORM_BWD, BATCHNORM_FWD, BATCHNORM_BWD

static inline ampx_status ampx_kit_take_layernorm_fwd(const ampx_kit *kit,
                                                      const ampx_layernorm_args *args,
                                                      ampx_layernorm_args *a) {
    static const char *op = "layernorm_fwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, op, AMPX_OP_LAYERNORM_FWD, a->x.dtype, a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "y", &a->y_or_dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", &a->gamma, AMPX_F32, a->cols, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "beta", &a->beta, AMPX_F32, a->cols, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", &a->mean, AMPX_F32, a->rows, 0));
    return ampx_kit_check_tensor_dt(kit, op, "rstd", &a->rstd, AMPX_F32, a->rows, 0);
}

/* The backward's tensors, shared by layer and batch norm: x, dy, dx of n elements, the
 * statistics of `stats` and the parameter gradients of `params` elements. */
static inline ampx_status ampx_kit_check_norm_bwd(const ampx_kit *kit, const char *op, uint64_t n,
                                                  uint64_t params, uint64_t stats,
                                                  const ampx_tensor *x, const ampx_tensor *dy,
                                                  const ampx_tensor *dx, const ampx_tensor *gamma,
                                                  const ampx_tensor *mean, const ampx_tensor *rstd,
                                                  const ampx_tensor *dgamma,
                                                  const ampx_tensor *dbeta) {
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dy", dy, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "dx", dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", gamma, AMPX_F32, params, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", mean, AMPX_F32, stats, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "rstd", rstd, AMPX_F32, stats, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "dgamma", dgamma, AMPX_F32, params, 1));
    return ampx_kit_check_tensor_dt(kit, op, "dbeta", dbeta, AMPX_F32, params, 1);
}

static inline ampx_status ampx_kit_take_layernorm_bwd(const ampx_kit *kit,
                                                      const ampx_layernorm_args *args,
                                                      ampx_layernorm_args *a) {
    static const char *op = "layernorm_bwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, op, AMPX_OP_LAYERNORM_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    return ampx_kit_check_norm_bwd(kit, op, n, a->cols, a->rows, &a->x, &a->dy, &a->y_or_dx,
                                   &a->gamma, &a->mean, &a->rstd, &a->dgamma, &a->dbeta);
}

static inline ampx_status ampx_kit_bn_shape(const ampx_kit *kit, const char *op,
                                            const ampx_batchnorm_args *a, uint64_t *n) {
    uint64_t oc;
    if (ampx_kit_mul_u64(a->outer, a->channels, &oc) || ampx_kit_mul_u64(oc, a->inner, n))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: outer x channels x inner overflows", op);
    return AMPX_OK;
}

/* training: mean and rstd are saved (required), running statistics updated when given;
 * eval: the running statistics are required and nothing else is written. */
static inline ampx_status ampx_kit_take_batchnorm_fwd(const ampx_kit *kit,
                                                      const ampx_batchnorm_args *args,
                                                      ampx_batchnorm_args *a) {
    static const char *op = "batchnorm_fwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(
        ampx_kit_check_dtypes2(kit, op, AMPX_OP_BATCHNORM_FWD, a->x.dtype, a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_bn_shape(kit, op, a, &n));
    uint64_t C = a->channels;
    int tr     = a->training != 0;
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "y", &a->y_or_dx, n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "gamma", &a->gamma, AMPX_F32, C, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "beta", &a->beta, AMPX_F32, C, 1));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "running_mean", &a->running_mean, AMPX_F32, C, tr));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "running_var", &a->running_var, AMPX_F32, C, tr));
    if (!tr) return AMPX_OK;
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "mean", &a->mean, AMPX_F32, C, 0));
    return ampx_kit_check_tensor_dt(kit, op, "rstd", &a->rstd, AMPX_F32, C, 0);
}

static inline ampx_status ampx_kit_take_batchnorm_bwd(const ampx_kit *kit,
                                                      const ampx_batchnorm_args *args,
                                                      ampx_batchnorm_args *a) {
    static const char *op = "batchnorm_bwd";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes3(kit, op, AMPX_OP_BATCHNORM_BWD, a->x.dtype, a->dy.dtype,
                                        a->y_or_dx.dtype));
    AMPX_KIT_TRY(ampx_kit_bn_shape(kit, op, a, &n));
    return ampx_kit_check_norm_bwd(kit, op, n, a->channels, a->channels, &a->x, &a->dy, &a->y_or_dx,
                                   &a->gamma, &a->mean, &a->rstd, &a->dgamma, &a->dbeta);
}

// ---------------------------------------------------------------------------------------
// FP8_QUANTIZE, GEMM_FP8, FP8_SCALE_UPDATE (ABI 1.7)

/* FP8_QUANTIZE: one side fp8 and the other float, saturate 0, 1 or 2, src and dst of n
 * elements, scale f32 [1]; amax f32 [1] and counts i32 [2] optional, quantizing only. */
static inline ampx_status ampx_kit_take_fp8_quantize(const ampx_kit *kit,
                                                     const ampx_fp8_quantize_args *args,
                                                     ampx_fp8_quantize_args *a) {
    const char *on = "fp8_quantize";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, on, AMPX_OP_FP8_QUANTIZE, a->src.dtype, a->dst.dtype));
    if (a->saturate > 2)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: saturate %u is not 0, 1 or 2", on,
                             a->saturate);
    if (ampx_dtype_is_fp8(a->src.dtype) && (a->amax.buf || a->counts.buf))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: amax and counts are for quantizing to fp8, not from it", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "src", &a->src, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, on, "dst", &a->dst, a->n, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "scale", &a->scale, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "amax", &a->amax, AMPX_F32, 1, 1));
    return ampx_kit_check_tensor_dt(kit, on, "counts", &a->counts, AMPX_I32, 2, 1);
}

/* GEMM_FP8: the gemm as GEMM checks it (fp8 A and B, a float C), and the two f32 [1]
 * dequantization factors. */
static inline ampx_status ampx_kit_take_gemm_fp8(const ampx_kit *kit,
                                                 const ampx_gemm_fp8_args *args,
                                                 ampx_gemm_fp8_args *g, uint64_t extent[3]) {
    const char *on = "gemm_fp8";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, g, sizeof *g));
    if (g->size < offsetof(ampx_gemm_fp8_args, gemm) + AMPX_GEMM_ARGS_SIZE_V1_4)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args size %u ends inside the gemm", on,
                             g->size);
    g->gemm.size = (uint32_t)(g->size - offsetof(ampx_gemm_fp8_args, gemm) < sizeof g->gemm
                                  ? g->size - offsetof(ampx_gemm_fp8_args, gemm)
                                  : sizeof g->gemm);
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "a_scale_inv", &g->a_scale_inv, AMPX_F32, 1, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "b_scale_inv", &g->b_scale_inv, AMPX_F32, 1, 0));
    if (g->gemm.bias_grad.buf)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: bias_grad must be null", on);
    return ampx_kit_check_gemm_(kit, on, AMPX_OP_GEMM_FP8, &g->gemm, extent);
}

/* FP8_SCALE_UPDATE: a known algo, H >= 1, |margin| <= 64, skip_on_found_inf 0 or 1 (1 needs
 * the scalars block), the state f32 (2 + H) n and fp8_max f32 [n] in their buffers. */
static inline ampx_status ampx_kit_take_fp8_scale_update(const ampx_kit *kit,
                                                         const ampx_fp8_scale_update_args *args,
                                                         ampx_fp8_scale_update_args *a) {
    const char *on = "fp8_scale_update";
    AMPX_KIT_TRY(ampx_kit_take(kit, on, args, a, sizeof *a));
    if (a->algo > AMPX_FP8_AMAX_MOST_RECENT)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown amax algo %u", on, a->algo);
    if (a->history < 1) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: history must be >= 1", on);
    if (a->margin < -64 || a->margin > 64)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: margin %d is outside [-64, 64]", on,
                             (int)a->margin);
    if (a->skip_on_found_inf > 1)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: skip_on_found_inf %u is not 0 or 1", on,
                             a->skip_on_found_inf);
    uint64_t rows = 2 + (uint64_t)a->history, n_state;
    if (ampx_kit_mul_u64(rows, a->n, &n_state))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: (2 + history) x n overflows", on);
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "state", &a->state, AMPX_F32, n_state, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, on, "fp8_max", &a->fp8_max, AMPX_F32, a->n, 0));
    return ampx_kit_check_scalars(kit, on, &a->scalars, !a->skip_on_found_inf);
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_TAKE_DENSE_H */
