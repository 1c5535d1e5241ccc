/* ampx/kit/take_train.h — part of plugin_kit.h (a plugin includes that): the takes of the
 * embeddings, the reductions over tensors and tensor lists, the AMP ops (UNSCALE_CHECK,
 * GRAD_STATS, AMP_PASS, SCALER_UPDATE) and the optimizers, and the scaler's arithmetic every
 * backend's SCALER_UPDATE shares.
 */
#ifndef AMPX_KIT_TAKE_TRAIN_H
#define AMPX_KIT_TAKE_TRAIN_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// EMBEDDING_FWD, EMBEDDING_BWD, REDUCE, SUM_SQUARES

/* Either direction; the tensors are named for it: table and y forward, dtable (f32) and dy
 * backward. */
static inline ampx_status ampx_kit_take_embedding(const ampx_kit *kit,
                                                  const ampx_embedding_args *args, int bwd,
                                                  ampx_embedding_args *a) {
    const char *op = bwd ? "embedding_bwd" : "embedding_fwd";
    uint64_t nt = 0, ny = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    if (bwd)
        AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_EMBEDDING_BWD, a->y_or_dy.dtype,
                                            a->table_or_dtable.dtype));
    else
        AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_EMBEDDING_FWD,
                                            a->table_or_dtable.dtype, a->y_or_dy.dtype));
    if (ampx_kit_mul_u64(a->vocab, a->dim, &nt) || ampx_kit_mul_u64(a->n, a->dim, &ny))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: shape overflows", op);
    AMPX_KIT_TRY(
        ampx_kit_check_tensor(kit, op, bwd ? "dtable" : "table", &a->table_or_dtable, nt, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "ids", &a->ids, AMPX_I32, a->n, 0));
    return ampx_kit_check_tensor(kit, op, bwd ? "dy" : "y", &a->y_or_dy, ny, 0);
}

static inline ampx_status ampx_kit_take_reduce(const ampx_kit *kit, const ampx_reduce_args *args,
                                               ampx_reduce_args *a) {
    static const char *op = "reduce";
    uint64_t n            = 0;
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_dtypes2(kit, op, AMPX_OP_REDUCE, a->x.dtype, a->y.dtype));
    if (a->mode != AMPX_REDUCE_SUM && a->mode != AMPX_REDUCE_MEAN)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown mode %u", op, a->mode);
    AMPX_KIT_TRY(ampx_kit_rows_cols(kit, op, a->rows, a->cols, &n));
    AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, "x", &a->x, n, 0));
    return ampx_kit_check_tensor(kit, op, "y", &a->y, a->rows, 0);
}

static inline ampx_status ampx_kit_take_sum_squares(const ampx_kit *kit,
                                                    const ampx_sum_squares_args *args,
                                                    ampx_sum_squares_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "sum_squares", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, "sum_squares", "x", &a->x));
    return ampx_kit_check_tensor_dt(kit, "sum_squares", "out", &a->out, AMPX_F32, 1, 0);
}

/* ABS_MAX (ABI 1.8): a list of float tensors and one f32 out per tensor. */
static inline ampx_status ampx_kit_take_abs_max(const ampx_kit *kit, const ampx_abs_max_args *args,
                                                ampx_abs_max_args *a) {
    AMPX_KIT_TRY(ampx_kit_take(kit, "abs_max", args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, "abs_max", "x", &a->x));
    return ampx_kit_check_tensor_dt(kit, "abs_max", "out", &a->out, AMPX_F32, a->x.count, 0);
}

// ---------------------------------------------------------------------------------------
// UNSCALE_CHECK, GRAD_STATS, SCALER_UPDATE

static inline ampx_status ampx_kit_take_unscale_check(const ampx_kit *kit,
                                                      const ampx_unscale_check_args *args,
                                                      ampx_unscale_check_args *a) {
    static const char *op = "unscale_check";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "flags", &a->flags, AMPX_I32,
                                          (uint64_t)a->flag_base + a->grads.count, 0));
    return ampx_kit_check_scalars(kit, op, &a->scalars, 0);
}

static inline ampx_status ampx_kit_take_grad_stats(const ampx_kit *kit,
                                                   const ampx_grad_stats_args *args,
                                                   ampx_grad_stats_args *a) {
    static const char *op = "grad_stats";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    if (!ampx_dtype_is_float(a->target))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: target dtype %s is not a float dtype", op,
                             ampx_dtype_name(a->target));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "stats", &a->stats, AMPX_F32, 4ull * a->grads.count, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "counts", &a->counts, AMPX_I32,
                                          3ull * a->grads.count, 0));
    /* (optional, ABI 1.2) NaN counts apart from the infinities */
    if (a->nan_counts.buf)
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "nan_counts", &a->nan_counts, AMPX_I32,
                                              a->grads.count, 0));
    return AMPX_OK;
}

/* AMP_PASS (ABI 1.4): the grads, flags and scalars as UNSCALE_CHECK; the optional outputs
 * as SUM_SQUARES and GRAD_STATS (each checked only when its buf is given), and the targets. */
static inline ampx_status
ampx_kit_take_amp_pass(const ampx_kit *kit, const ampx_amp_pass_args *args, ampx_amp_pass_args *a) {
    static const char *op = "amp_pass";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_list(kit, op, "grads", &a->grads));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "flags", &a->flags, AMPX_I32,
                                          (uint64_t)a->flag_base + a->grads.count, 0));
    AMPX_KIT_TRY(ampx_kit_check_scalars(kit, op, &a->scalars, 0));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "sq_sum", &a->sq_sum, AMPX_F32, 1, 1));
    int stats = a->stats.buf || a->counts.buf || a->nan_counts.buf;
    if (stats && !a->targets && !ampx_dtype_is_float(a->target))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: target dtype %s is not a float dtype", op,
                             ampx_dtype_name(a->target));
    if (stats && a->targets)
        for (uint32_t t = 0; t < a->grads.count; t++)
            if (!ampx_dtype_is_float(a->targets[t]))
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "%s: targets[%u] dtype %s is not a float dtype", op, t,
                                     ampx_dtype_name(a->targets[t]));
    AMPX_KIT_TRY(
        ampx_kit_check_tensor_dt(kit, op, "stats", &a->stats, AMPX_F32, 4ull * a->grads.count, 1));
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "counts", &a->counts, AMPX_I32,
                                          3ull * a->grads.count, 1));
    return ampx_kit_check_tensor_dt(kit, op, "nan_counts", &a->nan_counts, AMPX_I32, a->grads.count,
                                    1);
}

/* The smallest normal of a GRAD_STATS target: values below it (and not 0) count as tiny. */
static inline float ampx_kit_tiny_of(ampx_dtype target) {
    return target == AMPX_F16 ? 0x1p-14f : 0x1p-126f;
}

/* The target of tensor t of an AMP_PASS. */
static inline ampx_dtype ampx_kit_amp_target(const ampx_amp_pass_args *a, uint32_t t) {
    return a->targets ? a->targets[t] : a->target;
}

/* SCALER_UPDATE: the scalars block, and the double factors when the caller's struct holds
 * them (a non-finite or non-positive one is refused; 0, or a struct too short to hold them,
 * means "use the block's float factor", see ampx_scaler_update_args). */
static inline ampx_status ampx_kit_take_scaler_update(const ampx_kit *kit,
                                                      const ampx_scaler_update_args *args,
                                                      ampx_scaler_update_args *a) {
    static const char *op = "scaler_update";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    const char *bad = NULL;
    double f        = 0;
    if (!(a->growth_factor_f64 >= 0 && a->growth_factor_f64 <= 0x1.fffffep127))
        bad = "growth_factor_f64", f = a->growth_factor_f64;
    else if (!(a->backoff_factor_f64 >= 0 && a->backoff_factor_f64 <= 0x1.fffffep127))
        bad = "backoff_factor_f64", f = a->backoff_factor_f64;
    if (bad)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s %g is not a factor in [0, FLT_MAX]", op,
                             bad, f);
    return ampx_kit_check_scalars(kit, op, &a->scalars, 0);
}

// ---------------------------------------------------------------------------------------
// SGD, ADAMW

/* What both optimizers check: everything but their state tensors. */
static inline ampx_status ampx_kit_check_optimizer(const ampx_kit *kit, const char *op,
                                                   uint32_t opnum, const ampx_tensor_list *params,
                                                   const ampx_tensor *grads,
                                                   const ampx_tensor *copies,
                                                   const ampx_tensor *grad_sq_sum,
                                                   const ampx_tensor *scalars) {
    if (params->count > 0 && (!params->tensors || !params->n_elems))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %u params but a NULL %s", op,
                             params->count, params->tensors ? "n_elems" : "tensors array");
    if (params->count > 0 && !grads)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: grads is NULL", op);
    for (uint32_t t = 0; t < params->count; t++) {
        char what[48];
        uint64_t n = params->n_elems[t];
        AMPX_KIT_TRY(ampx_kit_check_dtypes(kit, op, opnum, &grads[t].dtype, 1));
        snprintf(what, sizeof what, "grads[%u]", t);
        AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, what, &grads[t], n, 0));
        snprintf(what, sizeof what, "params[%u]", t);
        AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, what, &params->tensors[t], AMPX_F32, n, 0));
        if (copies && copies[t].buf) {
            snprintf(what, sizeof what, "copies[%u]", t);
            if (copies[t].dtype != AMPX_BF16 && copies[t].dtype != AMPX_F16)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s must be bf16 or f16, not %s",
                                     op, what, ampx_dtype_name(copies[t].dtype));
            AMPX_KIT_TRY(ampx_kit_check_tensor(kit, op, what, &copies[t], n, 0));
        }
    }
    AMPX_KIT_TRY(ampx_kit_check_tensor_dt(kit, op, "grad_sq_sum", grad_sq_sum, AMPX_F32, 1, 1));
    return ampx_kit_check_scalars(kit, op, scalars, 0);
}

/* State tensor name[t] (momentum_buf, m, v): f32 with n elements. */
static inline ampx_status ampx_kit_check_state(const ampx_kit *kit, const char *op,
                                               const char *name, const ampx_tensor *state,
                                               uint32_t t, uint64_t n) {
    char what[48];
    snprintf(what, sizeof what, "%s[%u]", name, t);
    return ampx_kit_check_tensor_dt(kit, op, what, &state[t], AMPX_F32, n, 0);
}

static inline ampx_status ampx_kit_take_sgd(const ampx_kit *kit, const ampx_sgd_args *args,
                                            ampx_sgd_args *a) {
    static const char *op = "sgd";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_optimizer(kit, op, AMPX_OP_SGD, &a->params, a->grads, a->copies,
                                          &a->grad_sq_sum, &a->scalars));
    if (a->momentum == 0.0f) return AMPX_OK;
    if (a->params.count > 0 && !a->momentum_buf)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: momentum %g needs momentum_buf", op,
                             (double)a->momentum);
    for (uint32_t t = 0; t < a->params.count; t++)
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "momentum_buf", a->momentum_buf, t,
                                          a->params.n_elems[t]));
    return AMPX_OK;
}

static inline ampx_status ampx_kit_take_adamw(const ampx_kit *kit, const ampx_adamw_args *args,
                                              ampx_adamw_args *a) {
    static const char *op = "adamw";
    AMPX_KIT_TRY(ampx_kit_take(kit, op, args, a, sizeof *a));
    AMPX_KIT_TRY(ampx_kit_check_optimizer(kit, op, AMPX_OP_ADAMW, &a->params, a->grads, a->copies,
                                          &a->grad_sq_sum, &a->scalars));
    if (a->params.count > 0 && (!a->m || !a->v))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is NULL", op, !a->m ? "m" : "v");
    for (uint32_t t = 0; t < a->params.count; t++) {
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "m", a->m, t, a->params.n_elems[t]));
        AMPX_KIT_TRY(ampx_kit_check_state(kit, op, "v", a->v, t, a->params.n_elems[t]));
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// The scaler's arithmetic, as PyTorch's _amp_update_scale kernels do it

/* The growth or backoff factor SCALER_UPDATE applies: the args' double when given (> 0),
 * else the block's float. */
static inline double ampx_kit_scaler_factor(double from_args, float from_block) {
    return from_args > 0 ? from_args : (double)from_block;
}

/* scale * factor as PyTorch computes it: the f32 scale times the double factor in double,
 * then rounded to f32 (static_cast<float>(scale * factor) in _amp_update_scale_cpu_kernel
 * and _amp_update_scale_cuda_kernel, whose factors are C++ doubles). */
static inline float ampx_kit_scale_times(float scale, double factor) {
    return (float)((double)scale * factor);
}

/* SCALER_UPDATE of backend.h on a block in host memory (a backend that keeps the block on
 * the host): exactly the pseudo-code there, ampx_km_scaler_step of kernel_math.h with
 * PyTorch's products. */
static inline void ampx_kit_scaler_update(ampx_scalars *s, double growth_factor,
                                          double backoff_factor) {
    ampx_km_scaler_step(s, ampx_kit_scale_times(s->scale, growth_factor),
                        ampx_kit_scale_times(s->scale, backoff_factor));
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_TAKE_TRAIN_H */
