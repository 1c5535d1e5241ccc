/* elementwise.c — CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD and ACT_BWD: the checks of the
 * CPU backend, then one grid-stride kernel each, built for the op's dtypes
 * (kernels/opencl/typed/cast.cl, add.cl, scale.cl, bias_grad.cl, act.cl; typed.c).
 */
#include "ocl.h"

ampx_status ocl_cast_run(ampx_context *ctx, const ampx_tensor *src, const ampx_tensor *dst,
                         uint64_t n, int stochastic, uint64_t seed) {
    if (n == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_CAST, src, dst, NULL);
    ocl_arg_fixed(&k, src);
    ocl_arg_fixed(&k, dst);
    ocl_arg_u64(&k, n);
    ocl_arg_i32(&k, stochastic);
    ocl_arg_u64(&k, seed);
    return ocl_launch_1d(&k, stochastic ? n : ocl_vec_items(ctx, n));
}

ampx_status ocl_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    OCL_TRY(ampx_kit_take_cast(AMPX_KIT(ctx), args, &a));
    return ocl_cast_run(ctx, &a.src, &a.dst, a.n, a.rounding == AMPX_ROUND_STOCHASTIC, a.seed);
}

/* ADD and MUL after ampx_kit_take_add / _mul. */
static ampx_status binary_run(ampx_context *ctx, int mul, float alpha, float beta,
                              uint32_t broadcast_b, uint64_t rows, uint64_t cols,
                              const ampx_tensor *a, const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = rows * cols;
    if (n == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_ADD, a, b, y);
    ocl_arg_fixed(&k, a);
    ocl_arg_fixed(&k, b);
    ocl_arg_fixed(&k, y);
    ocl_arg_u64(&k, n);
    ocl_arg_u64(&k, cols);
    ocl_arg_i32(&k, broadcast_b != 0);
    ocl_arg_f32(&k, alpha);
    ocl_arg_f32(&k, beta);
    ocl_arg_i32(&k, mul);
    return ocl_launch_1d(&k, ocl_vec_items(ctx, n));
}

ampx_status ocl_add(ampx_context *ctx, const ampx_add_args *args) {
    ampx_add_args a;
    OCL_TRY(ampx_kit_take_add(AMPX_KIT(ctx), args, &a));
    return binary_run(ctx, 0, a.alpha, a.beta, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

ampx_status ocl_mul(ampx_context *ctx, const ampx_mul_args *args) {
    ampx_mul_args a;
    OCL_TRY(ampx_kit_take_mul(AMPX_KIT(ctx), args, &a));
    return binary_run(ctx, 1, 1.0f, 0.0f, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

ampx_status ocl_scale(ampx_context *ctx, const ampx_scale_args *args) {
    ampx_scale_args a;
    OCL_TRY(ampx_kit_take_scale(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_SCALE, &a.x, &a.y, NULL);
    ocl_arg_fixed(&k, &a.x);
    ocl_arg_fixed(&k, &a.y);
    ocl_arg_u64(&k, a.n);
    ocl_arg_f32(&k, a.alpha);
    return ocl_launch_1d(&k, ocl_vec_items(ctx, a.n));
}

ampx_status ocl_bias_grad_run(ampx_context *ctx, const ampx_tensor *dy, const ampx_tensor *db,
                              uint64_t rows, uint64_t cols, int accumulate) {
    ocl_args k = ocl_args_typed(ctx, TK_BIAS_GRAD, dy, db, NULL);
    ocl_arg_fixed(&k, dy);
    ocl_arg_fixed(&k, db);
    ocl_arg_u64(&k, rows);
    ocl_arg_u64(&k, cols);
    ocl_arg_i32(&k, accumulate != 0);
    /* one item per VW columns, then per column of the rest (bias_grad.cl) */
    return ocl_launch_1d(&k, cols / (uint64_t)ctx->vw + cols % (uint64_t)ctx->vw);
}

ampx_status ocl_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *args) {
    ampx_bias_grad_args a;
    OCL_TRY(ampx_kit_take_bias_grad(AMPX_KIT(ctx), args, &a));
    if (a.cols == 0) return AMPX_OK;
    return ocl_bias_grad_run(ctx, &a.dy, &a.db, a.rows, a.cols, a.accumulate);
}

ampx_status ocl_act_fwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    OCL_TRY(ampx_kit_take_act_fwd(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_ACT_FWD, &a.x, &a.y_or_dx, NULL);
    ocl_arg_fixed(&k, &a.x);
    ocl_arg_fixed(&k, &a.y_or_dx);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, (int32_t)a.act);
    return ocl_launch_1d(&k, ocl_vec_items(ctx, a.n));
}

ampx_status ocl_act_bwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    OCL_TRY(ampx_kit_take_act_bwd(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_ACT_BWD, &a.x, &a.dy, &a.y_or_dx);
    ocl_arg_fixed(&k, &a.x);
    ocl_arg_fixed(&k, &a.dy);
    ocl_arg_fixed(&k, &a.y_or_dx);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, (int32_t)a.act);
    return ocl_launch_1d(&k, ocl_vec_items(ctx, a.n));
}
