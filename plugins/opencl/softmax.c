/* softmax.c — SOFTMAX_FWD, SOFTMAX_BWD and SOFTMAX_XENT (kernels/opencl/softmax.cl and
 * softmax_xent.cl), one work-group per row. The cross-entropy's count of valid rows, its
 * per-row terms and its mean are three kernels on the stream: the loss scale is read from
 * the scalars block on the device, so nothing waits for the host.
 */
#include "ocl.h"

static ampx_status softmax_run(ampx_context *ctx, const char *opname, const ampx_softmax_args *a,
                               int bwd) {
    uint64_t n;
    if (ocl_mul_u64(a->rows, a->cols, &n))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", opname);
    if (a->causal && (a->seq_q == 0 || a->seq_q > a->cols))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: causal seq_q %llu not in [1, cols %llu]",
                        opname, (unsigned long long)a->seq_q, (unsigned long long)a->cols);
    OCL_TRY(ocl_check_tensor(ctx, opname, bwd ? "y" : "x", &a->x_or_y, n, 0));
    if (bwd) OCL_TRY(ocl_check_tensor(ctx, opname, "dy", &a->dy, n, 0));
    OCL_TRY(ocl_check_tensor(ctx, opname, bwd ? "dx" : "y", &a->y_or_dx, n, 0));
    if (n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, bwd ? K_SOFTMAX_BWD : K_SOFTMAX_FWD);
    ocl_arg_tensor(&k, &a->x_or_y);
    if (bwd) ocl_arg_tensor(&k, &a->dy);
    ocl_arg_tensor(&k, &a->y_or_dx);
    ocl_arg_u64(&k, a->rows);
    ocl_arg_u64(&k, a->cols);
    ocl_arg_u64(&k, a->causal ? a->seq_q : 1);
    ocl_arg_i32(&k, a->causal != 0);
    ocl_arg_i32(&k, a->log != 0);
    ocl_arg_f32(&k, a->scale);
    return ocl_launch_groups(&k, a->rows);
}

ampx_status ocl_softmax_fwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    OCL_TAKE_ARGS(ctx, "softmax_fwd", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "softmax_fwd", AMPX_OP_SOFTMAX_FWD,
                             (ampx_dtype[]){a.x_or_y.dtype, a.y_or_dx.dtype}, 2));
    return softmax_run(ctx, "softmax_fwd", &a, 0);
}

ampx_status ocl_softmax_bwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    OCL_TAKE_ARGS(ctx, "softmax_bwd", args, a);
    OCL_TRY(ocl_check_dtypes(ctx, "softmax_bwd", AMPX_OP_SOFTMAX_BWD,
                             (ampx_dtype[]){a.x_or_y.dtype, a.dy.dtype, a.y_or_dx.dtype}, 3));
    return softmax_run(ctx, "softmax_bwd", &a, 1);
}

ampx_status ocl_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *args) {
    static const char *op = "softmax_xent";
    ampx_softmax_xent_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    ampx_dtype ddt = a.dlogits.buf ? a.dlogits.dtype : AMPX_F32;
    OCL_TRY(
        ocl_check_dtypes(ctx, op, AMPX_OP_SOFTMAX_XENT, (ampx_dtype[]){a.logits.dtype, ddt}, 2));
    uint64_t n, work_bytes;
    if (ocl_mul_u64(a.rows, a.cols, &n) || ocl_mul_u64(a.rows + 1, 4, &work_bytes))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", op);
    OCL_TRY(ocl_check_tensor(ctx, op, "logits", &a.logits, n, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "labels", &a.labels, AMPX_I32, a.rows, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "loss", &a.loss, AMPX_F32, 1, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, "dlogits", &a.dlogits, n, 1));
    OCL_TRY(ocl_check_scalars(ctx, op, &a.scalars, 1));
    cl_mem work = ocl_scratch_get(ctx, op, 0, (size_t)work_bytes);
    if (!work) return AMPX_ERR_NO_MEMORY;

    ocl_args k = ocl_args_begin(ctx, K_XENT_COUNT);
    ocl_arg_fixed(&k, &a.labels);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_i32(&k, a.ignore_index);
    ocl_arg_mem(&k, work);
    OCL_TRY(ocl_launch_groups(&k, 1));
    if (a.rows > 0) {
        k = ocl_args_begin(ctx, K_XENT_ROWS);
        ocl_arg_tensor(&k, &a.logits);
        ocl_arg_fixed(&k, &a.labels);
        ocl_arg_tensor(&k, &a.dlogits);
        ocl_arg_i32(&k, a.dlogits.buf != NULL);
        ocl_arg_fixed(&k, &a.scalars);
        ocl_arg_i32(&k, a.scalars.buf != NULL);
        ocl_arg_u64(&k, a.rows);
        ocl_arg_u64(&k, a.cols);
        ocl_arg_i32(&k, a.ignore_index);
        ocl_arg_f32(&k, a.grad_scale);
        ocl_arg_mem(&k, work);
        OCL_TRY(ocl_launch_groups(&k, a.rows));
    }
    k = ocl_args_begin(ctx, K_XENT_LOSS);
    ocl_arg_mem(&k, work);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_fixed(&k, &a.loss);
    return ocl_launch_groups(&k, 1);
}
