/* elementwise.c — CAST, ADD, MUL, SCALE, BIAS_GRAD, ACT_FWD and ACT_BWD: the checks of the
 * CPU backend, then one grid-stride kernel each (kernels/opencl/cast.cl, add.cl,
 * bias_grad.cl, act.cl).
 */
#include "ocl.h"

ampx_status ocl_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    OCL_TAKE_ARGS(ctx, "cast", args, a);
    OCL_TRY(ocl_check_tensor(ctx, "cast", "src", &a.src, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "cast", "dst", &a.dst, a.n, 0));
    OCL_TRY(
        ocl_check_dtypes(ctx, "cast", AMPX_OP_CAST, (ampx_dtype[]){a.src.dtype, a.dst.dtype}, 2));
    if (a.rounding != AMPX_ROUND_NEAREST_EVEN && a.rounding != AMPX_ROUND_STOCHASTIC)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "cast: unknown rounding %u", a.rounding);
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_CAST);
    ocl_arg_tensor(&k, &a.src);
    ocl_arg_tensor(&k, &a.dst);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, a.rounding == AMPX_ROUND_STOCHASTIC);
    ocl_arg_u64(&k, a.seed);
    return ocl_launch_1d(&k, a.n);
}

static ampx_status binary_run(ampx_context *ctx, const char *opname, uint32_t op, int mul,
                              float alpha, float beta, uint32_t broadcast_b, uint64_t rows,
                              uint64_t cols, const ampx_tensor *a, const ampx_tensor *b,
                              const ampx_tensor *y) {
    OCL_TRY(ocl_check_dtypes(ctx, opname, op, (ampx_dtype[]){a->dtype, b->dtype, y->dtype}, 3));
    uint64_t n;
    if (ocl_mul_u64(rows, cols, &n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", opname);
    OCL_TRY(ocl_check_tensor(ctx, opname, "a", a, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, opname, "b", b, broadcast_b ? (rows ? cols : 0) : n, 0));
    OCL_TRY(ocl_check_tensor(ctx, opname, "y", y, n, 0));
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
    OCL_TAKE_ARGS(ctx, "add", args, a);
    return binary_run(ctx, "add", AMPX_OP_ADD, 0, a.alpha, a.beta, a.broadcast_b, a.rows, a.cols,
                      &a.a, &a.b, &a.y);
}

ampx_status ocl_mul(ampx_context *ctx, const ampx_mul_args *args) {
    ampx_mul_args a;
    OCL_TAKE_ARGS(ctx, "mul", args, a);
    return binary_run(ctx, "mul", AMPX_OP_MUL, 1, 1.0f, 0.0f, a.broadcast_b, a.rows, a.cols, &a.a,
                      &a.b, &a.y);
}

ampx_status ocl_scale(ampx_context *ctx, const ampx_scale_args *args) {
    ampx_scale_args a;
    OCL_TAKE_ARGS(ctx, "scale", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "scale", AMPX_OP_SCALE, (ampx_dtype[]){a.x.dtype, a.y.dtype}, 2));
    OCL_TRY(ocl_check_tensor(ctx, "scale", "x", &a.x, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "scale", "y", &a.y, a.n, 0));
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
    OCL_TAKE_ARGS(ctx, "bias_grad", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "bias_grad", AMPX_OP_BIAS_GRAD,
                             (ampx_dtype[]){a.dy.dtype, a.db.dtype}, 2));
    uint64_t n;
    if (ocl_mul_u64(a.rows, a.cols, &n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "bias_grad: rows x cols overflows");
    OCL_TRY(ocl_check_tensor(ctx, "bias_grad", "dy", &a.dy, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "bias_grad", "db", &a.db, a.cols, 0));
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
    OCL_TAKE_ARGS(ctx, "act_fwd", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "act_fwd", AMPX_OP_ACT_FWD,
                             (ampx_dtype[]){a.x.dtype, a.y_or_dx.dtype}, 2));
    if (a.act >= AMPX_ACT_COUNT)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "act_fwd: unknown activation %u", a.act);
    OCL_TRY(ocl_check_tensor(ctx, "act_fwd", "x", &a.x, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "act_fwd", "y", &a.y_or_dx, a.n, 0));
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
    OCL_TAKE_ARGS(ctx, "act_bwd", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "act_bwd", AMPX_OP_ACT_BWD,
                             (ampx_dtype[]){a.x.dtype, a.dy.dtype, a.y_or_dx.dtype}, 3));
    if (a.act >= AMPX_ACT_COUNT)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "act_bwd: unknown activation %u", a.act);
    OCL_TRY(ocl_check_tensor(ctx, "act_bwd", "x", &a.x, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "act_bwd", "dy", &a.dy, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, "act_bwd", "dx", &a.y_or_dx, a.n, 0));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ACT_BWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.dy);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_u64(&k, a.n);
    ocl_arg_i32(&k, (int32_t)a.act);
    return ocl_launch_1d(&k, a.n);
}
