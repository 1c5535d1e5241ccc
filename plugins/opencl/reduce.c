/* reduce.c — REDUCE (one work-group per row) and SUM_SQUARES (one launch per tensor of the
 * list, accumulating into out on the stream), kernels/opencl/reduce.cl and sum_squares.cl. */
#include "ocl.h"

ampx_status ocl_reduce(ampx_context *ctx, const ampx_reduce_args *args) {
    static const char *op = "reduce";
    ampx_reduce_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_REDUCE, (ampx_dtype[]){a.x.dtype, a.y.dtype}, 2));
    if (a.mode != AMPX_REDUCE_SUM && a.mode != AMPX_REDUCE_MEAN)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: unknown mode %u", op, a.mode);
    uint64_t n;
    if (ocl_mul_u64(a.rows, a.cols, &n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", op);
    OCL_TRY(ocl_check_tensor(ctx, op, "x", &a.x, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "y", &a.y, a.rows, 0));
    if (a.rows == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_REDUCE);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_u64(&k, a.cols);
    ocl_arg_i32(&k, a.mode == AMPX_REDUCE_MEAN);
    return ocl_launch_groups(&k, a.rows);
}

ampx_status ocl_sum_squares(ampx_context *ctx, const ampx_sum_squares_args *args) {
    static const char *op = "sum_squares";
    ampx_sum_squares_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    OCL_TRY(ocl_check_list(ctx, op, "x", &a.x));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "out", &a.out, AMPX_F32, 1, 0));
    if (a.x.count == 0) {
        if (a.accumulate) return AMPX_OK;
        float zero = 0.0f;
        return ocl_check(ctx,
                         clEnqueueWriteBuffer(ctx->queue, a.out.buf->mem, CL_TRUE,
                                              (size_t)a.out.offset, 4, &zero, 0, NULL, NULL),
                         op, "clEnqueueWriteBuffer");
    }
    for (uint32_t t = 0; t < a.x.count; t++) {
        ocl_args k = ocl_args_begin(ctx, K_SUM_SQUARES);
        ocl_arg_tensor(&k, &a.x.tensors[t]);
        ocl_arg_u64(&k, a.x.n_elems[t]);
        ocl_arg_fixed(&k, &a.out);
        ocl_arg_i32(&k, t == 0 && !a.accumulate);
        OCL_TRY(ocl_launch_groups(&k, 1));
    }
    return AMPX_OK;
}
