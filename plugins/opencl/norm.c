/* norm.c — LAYERNORM_FWD/BWD and BATCHNORM_FWD/BWD (kernels/opencl/layernorm.cl and
 * batchnorm.cl): the CPU backend's checks, then one work-group per row (layer norm) or per
 * channel (batch norm); layer norm's dgamma/dbeta are column sums in a second kernel.
 */
#include "ocl.h"

static ampx_status ln_shape(ampx_context *ctx, const char *op, const ampx_layernorm_args *a,
                            uint64_t *n) {
    if (ocl_mul_u64(a->rows, a->cols, n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", op);
    return AMPX_OK;
}

ampx_status ocl_layernorm_fwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_fwd";
    ampx_layernorm_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_LAYERNORM_FWD,
                             (ampx_dtype[]){a.x.dtype, a.y_or_dx.dtype}, 2));
    uint64_t n = 0;
    OCL_TRY(ln_shape(ctx, op, &a, &n));
    OCL_TRY(ocl_check_tensor(ctx, op, "x", &a.x, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "y", &a.y_or_dx, n, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "gamma", &a.gamma, AMPX_F32, a.cols, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "beta", &a.beta, AMPX_F32, a.cols, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "mean", &a.mean, AMPX_F32, a.rows, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "rstd", &a.rstd, AMPX_F32, a.rows, 0));
    if (a.rows == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_LAYERNORM_FWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_fixed(&k, &a.gamma);
    ocl_arg_fixed(&k, &a.beta);
    ocl_arg_fixed(&k, &a.mean);
    ocl_arg_fixed(&k, &a.rstd);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_u64(&k, a.cols);
    ocl_arg_f32(&k, a.eps);
    return ocl_launch_groups(&k, a.rows);
}

ampx_status ocl_layernorm_bwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_bwd";
    ampx_layernorm_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_LAYERNORM_BWD,
                             (ampx_dtype[]){a.x.dtype, a.dy.dtype, a.y_or_dx.dtype}, 3));
    uint64_t n = 0;
    OCL_TRY(ln_shape(ctx, op, &a, &n));
    OCL_TRY(ocl_check_tensor(ctx, op, "x", &a.x, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "dy", &a.dy, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "dx", &a.y_or_dx, n, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "gamma", &a.gamma, AMPX_F32, a.cols, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "mean", &a.mean, AMPX_F32, a.rows, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "rstd", &a.rstd, AMPX_F32, a.rows, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "dgamma", &a.dgamma, AMPX_F32, a.cols, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "dbeta", &a.dbeta, AMPX_F32, a.cols, 1));
    if (a.rows > 0 && a.cols > 0) {
        ocl_args k = ocl_args_begin(ctx, K_LAYERNORM_BWD);
        ocl_arg_tensor(&k, &a.x);
        ocl_arg_tensor(&k, &a.dy);
        ocl_arg_tensor(&k, &a.y_or_dx);
        ocl_arg_fixed(&k, &a.gamma);
        ocl_arg_fixed(&k, &a.mean);
        ocl_arg_fixed(&k, &a.rstd);
        ocl_arg_u64(&k, a.rows);
        ocl_arg_u64(&k, a.cols);
        OCL_TRY(ocl_launch_groups(&k, a.rows));
    }
    /* dgamma/dbeta: with rows == 0 the sums are 0 (or unchanged when accumulating). */
    if ((a.dgamma.buf || a.dbeta.buf) && a.cols > 0) {
        ocl_args k = ocl_args_begin(ctx, K_LAYERNORM_PARAMS);
        ocl_arg_tensor(&k, &a.x);
        ocl_arg_tensor(&k, &a.dy);
        ocl_arg_fixed(&k, &a.mean);
        ocl_arg_fixed(&k, &a.rstd);
        ocl_arg_fixed(&k, &a.dgamma);
        ocl_arg_fixed(&k, &a.dbeta);
        ocl_arg_u64(&k, a.rows);
        ocl_arg_u64(&k, a.cols);
        ocl_arg_i32(&k, a.accumulate != 0);
        OCL_TRY(ocl_launch_1d(&k, a.cols));
    }
    return AMPX_OK;
}

static ampx_status bn_shape(ampx_context *ctx, const char *op, const ampx_batchnorm_args *a,
                            uint64_t *n) {
    uint64_t oc;
    if (ocl_mul_u64(a->outer, a->channels, &oc) || ocl_mul_u64(oc, a->inner, n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: outer x channels x inner overflows", op);
    return AMPX_OK;
}

ampx_status ocl_batchnorm_fwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    static const char *op = "batchnorm_fwd";
    ampx_batchnorm_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_BATCHNORM_FWD,
                             (ampx_dtype[]){a.x.dtype, a.y_or_dx.dtype}, 2));
    uint64_t n = 0, C = a.channels;
    OCL_TRY(bn_shape(ctx, op, &a, &n));
    OCL_TRY(ocl_check_tensor(ctx, op, "x", &a.x, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "y", &a.y_or_dx, n, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "gamma", &a.gamma, AMPX_F32, C, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "beta", &a.beta, AMPX_F32, C, 1));
    int tr = a.training != 0;
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "running_mean", &a.running_mean, AMPX_F32, C, tr));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "running_var", &a.running_var, AMPX_F32, C, tr));
    if (tr) {
        OCL_TRY(ocl_check_tensor_dt(ctx, op, "mean", &a.mean, AMPX_F32, C, 0));
        OCL_TRY(ocl_check_tensor_dt(ctx, op, "rstd", &a.rstd, AMPX_F32, C, 0));
    }
    if (a.outer == 0 || a.inner == 0 || C == 0) return AMPX_OK; /* N == 0: no statistics */
    ocl_args k = ocl_args_begin(ctx, K_BATCHNORM_FWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_fixed(&k, &a.gamma);
    ocl_arg_fixed(&k, &a.beta);
    ocl_arg_fixed(&k, &a.running_mean);
    ocl_arg_fixed(&k, &a.running_var);
    ocl_arg_fixed(&k, tr ? &a.mean : NULL);
    ocl_arg_fixed(&k, tr ? &a.rstd : NULL);
    ocl_arg_u64(&k, a.outer);
    ocl_arg_u64(&k, C);
    ocl_arg_u64(&k, a.inner);
    ocl_arg_f32(&k, a.eps);
    ocl_arg_f32(&k, a.momentum);
    ocl_arg_i32(&k, tr);
    return ocl_launch_groups(&k, C);
}

ampx_status ocl_batchnorm_bwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    static const char *op = "batchnorm_bwd";
    ampx_batchnorm_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_BATCHNORM_BWD,
                             (ampx_dtype[]){a.x.dtype, a.dy.dtype, a.y_or_dx.dtype}, 3));
    uint64_t n = 0, C = a.channels;
    OCL_TRY(bn_shape(ctx, op, &a, &n));
    OCL_TRY(ocl_check_tensor(ctx, op, "x", &a.x, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "dy", &a.dy, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "dx", &a.y_or_dx, n, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "gamma", &a.gamma, AMPX_F32, C, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "mean", &a.mean, AMPX_F32, C, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "rstd", &a.rstd, AMPX_F32, C, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "dgamma", &a.dgamma, AMPX_F32, C, 1));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "dbeta", &a.dbeta, AMPX_F32, C, 1));
    if (a.outer == 0 || a.inner == 0 || C == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_BATCHNORM_BWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.dy);
    ocl_arg_tensor(&k, &a.y_or_dx);
    ocl_arg_fixed(&k, &a.gamma);
    ocl_arg_fixed(&k, &a.mean);
    ocl_arg_fixed(&k, &a.rstd);
    ocl_arg_fixed(&k, &a.dgamma);
    ocl_arg_fixed(&k, &a.dbeta);
    ocl_arg_u64(&k, a.outer);
    ocl_arg_u64(&k, C);
    ocl_arg_u64(&k, a.inner);
    ocl_arg_i32(&k, a.accumulate != 0);
    return ocl_launch_groups(&k, C);
}
