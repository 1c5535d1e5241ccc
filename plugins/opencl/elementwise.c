/* elementwise.c — CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD and ACT_BWD: the checks of the
 * CPU backend, then one grid-stride kernel each (kernels/opencl/cast.cl, add.cl,
 * bias_grad.cl, act.cl).
 */
#include "ocl.h"

ampx_status ocl_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    OCL_TRY(ampx_kit_take_cast(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_CAST);
    ocl_arg_tensor(&k, &a.src);
    ocl_arg_tensor(&k, &a.dst);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, a.rounding == AMPX_ROUND_STOCHASTIC);
    ocl_arg_u64(&k, a.seed);
    return ocl_launch_1d(&k, a.n);
}

/* ADD and MUL after ampx_kit_take_add / _mul. */
static ampx_status binary_run(ampx_context *ctx, int mul, float alpha, float beta,
                              uint32_t broadcast_b, uint64_t rows, uint64_t cols,
                              const ampx_tensor *a, const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = rows * cols;
    if (n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ADD);
    ocl_arg_tensor(&k, a);
    ocl_arg_tensor(&k, b);
    ocl_arg_tensor(&k, y);
    ocl_arg_u64(&k, n);
    ocl_arg_u64(&k, cols);
    ocl_arg_i32(&k, broadcast_b != 0);
    ocl_arg_f32(&k, alpha);
    ocl_arg_f32(&k, beta);
    ocl_arg_i32(&k, mul);
    return ocl_launch_1d(&k, n);
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
    ocl_args k = ocl_args_begin(ctx, K_SCALE);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_u64(&k, a.n);
    ocl_arg_f32(&k, a.alpha);
    return ocl_launch_1d(&k, a.n);
}

ampx_status ocl_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *args) {
    ampx_bias_grad_args a;
    OCL_TRY(ampx_kit_take_bias_grad(AMPX_KIT(ctx), args, &a));
    if (a.cols == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_BIAS_GRAD);
    ocl_arg_tensor(&k, &a.dy);
    ocl_arg_tensor(&k, &a.db);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_u64(&k, a.cols);
    ocl_arg_i32(&k, a.accumulate != 0);
    return ocl_launch_1d(&k, a.cols);
}

ampx_status ocl_act_fwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    OCL_TRY(ampx_kit_take_act_fwd(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ACT_FWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, (int32_t)a.act);
    return ocl_launch_1d(&k, a.n);
}

ampx_status ocl_act_bwd(ampx_context *ctx, const ampx_act_args *args) {
    ampx_act_args a;
    OCL_TRY(ampx_kit_take_act_bwd(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ACT_BWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.dy);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, (int32_t)a.act);
    return ocl_launch_1d(&k, a.n);
}
