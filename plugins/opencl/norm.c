/* norm.c — LAYERNORM_FWD/BWD and BATCHNORM_FWD/BWD (kernels/opencl/typed/layernorm.cl
 * and batchnorm.cl): the CPU backend's checks, then layer norm per row (one work item per row
 * on CPU devices, one work-group elsewhere: ocl_launch_rows) and batch norm one work-group per
 * channel; layer norm's dgamma/dbeta are column sums in a second kernel.
 */
#include "ocl.h"

ampx_status ocl_layernorm_fwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    ampx_layernorm_args a;
    OCL_TRY(ampx_kit_take_layernorm_fwd(AMPX_KIT(ctx), args, &a));
    if (a.rows == 0) return AMPX_OK;
    ocl_args k = ocl_args_typed(ctx, TK_LAYERNORM_FWD, &a.x, &a.y_or_dx, NULL);
    ocl_arg_fixed(&k, &a.x);
    ocl_arg_fixed(&k, &a.y_or_dx);
    ocl_arg_fixed(&k, &a.gamma);
    ocl_arg_fixed(&k, &a.beta);
    ocl_arg_fixed(&k, &a.mean);
    ocl_arg_fixed(&k, &a.rstd);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_u64(&k, a.cols);
    ocl_arg_f32(&k, a.eps);
    return ocl_launch_rows(&k, a.rows);
}

ampx_status ocl_layernorm_bwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    ampx_layernorm_args a;
    OCL_TRY(ampx_kit_take_layernorm_bwd(AMPX_KIT(ctx), args, &a));
    if (a.rows > 0 && a.cols > 0) {
        ocl_args k = ocl_args_typed(ctx, TK_LAYERNORM_BWD, &a.x, &a.dy, &a.y_or_dx);
        ocl_arg_fixed(&k, &a.x);
        ocl_arg_fixed(&k, &a.dy);
        ocl_arg_fixed(&k, &a.y_or_dx);
        ocl_arg_fixed(&k, &a.gamma);
        ocl_arg_fixed(&k, &a.mean);
        ocl_arg_fixed(&k, &a.rstd);
        ocl_arg_u64(&k, a.rows);
        ocl_arg_u64(&k, a.cols);
        OCL_TRY(ocl_launch_rows(&k, a.rows));
    }
    /* dgamma/dbeta: with rows == 0 the sums are 0 (or unchanged when accumulating). */
    if ((a.dgamma.buf || a.dbeta.buf) && a.cols > 0) {
        ocl_args k = ocl_args_typed(ctx, TK_LAYERNORM_PARAMS, &a.x, &a.dy, NULL);
        ocl_arg_fixed(&k, &a.x);
        ocl_arg_fixed(&k, &a.dy);
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

ampx_status ocl_batchnorm_fwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    ampx_batchnorm_args a;
    OCL_TRY(ampx_kit_take_batchnorm_fwd(AMPX_KIT(ctx), args, &a));
    uint64_t C = a.channels;
    int tr     = a.training != 0;
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
    ampx_batchnorm_args a;
    OCL_TRY(ampx_kit_take_batchnorm_bwd(AMPX_KIT(ctx), args, &a));
    uint64_t C = a.channels;
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
