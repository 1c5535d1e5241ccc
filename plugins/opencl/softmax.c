/* softmax.c — SOFTMAX_FWD, SOFTMAX_BWD and SOFTMAX_XENT (kernels/opencl/typed/softmax.cl
 * and softmax_xent.cl): the rows one work item per row on CPU devices and one work-group per
 * row elsewhere (ocl_launch_rows). The cross-entropy's count of valid rows, its per-row terms
 * (typed, per logits and dlogits dtype) and its mean are three kernels on the stream: the
 * loss scale is read from the scalars block on the device, so nothing waits for the host.
 */
#include "ocl.h"

/* SOFTMAX_FWD and SOFTMAX_BWD after ampx_kit_take_softmax_fwd / _bwd. */
static ampx_status softmax_run(ampx_context *ctx, const ampx_softmax_args *a, int bwd) {
    if (a->rows == 0 || a->cols == 0) return AMPX_OK;
    ocl_args k = bwd ? ocl_args_typed(ctx, TK_SOFTMAX_BWD, &a->x_or_y, &a->dy, &a->y_or_dx)
                     : ocl_args_typed(ctx, TK_SOFTMAX_FWD, &a->x_or_y, &a->y_or_dx, NULL);
    ocl_arg_fixed(&k, &a->x_or_y);
    if (bwd) ocl_arg_fixed(&k, &a->dy);
    ocl_arg_fixed(&k, &a->y_or_dx);
    ocl_arg_u64(&k, a->rows);
    ocl_arg_u64(&k, a->cols);
    ocl_arg_u64(&k, a->causal ? a->seq_q : 1);
    ocl_arg_i32(&k, a->causal != 0);
    ocl_arg_i32(&k, a->log != 0);
    ocl_arg_f32(&k, a->scale);
    return ocl_launch_rows(&k, a->rows);
}

ampx_status ocl_softmax_fwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    OCL_TRY(ampx_kit_take_softmax_fwd(AMPX_KIT(ctx), args, &a));
    return softmax_run(ctx, &a, 0);
}

ampx_status ocl_softmax_bwd(ampx_context *ctx, const ampx_softmax_args *args) {
    ampx_softmax_args a;
    OCL_TRY(ampx_kit_take_softmax_bwd(AMPX_KIT(ctx), args, &a));
    return softmax_run(ctx, &a, 1);
}

ampx_status ocl_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *args) {
    static const char *op = "softmax_xent";
    ampx_softmax_xent_args a;
    OCL_TRY(ampx_kit_take_softmax_xent(AMPX_KIT(ctx), args, &a));
    uint64_t work_bytes;
    if (ocl_mul_u64(a.rows + 1, 4, &work_bytes))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: rows x cols overflows", op);
    cl_mem work = ocl_scratch_get(ctx, op, 0, (size_t)work_bytes);
    if (!work) return AMPX_ERR_NO_MEMORY;

    ocl_args k = ocl_args_begin(ctx, K_XENT_COUNT);
    ocl_arg_fixed(&k, &a.labels);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_i32(&k, a.ignore_index);
    ocl_arg_mem(&k, work);
    OCL_TRY(ocl_launch_groups(&k, 1));
    if (a.rows > 0) {
        k = ocl_args_typed(ctx, TK_XENT_ROWS, &a.logits, &a.dlogits, NULL);
        ocl_arg_fixed(&k, &a.logits);
        ocl_arg_fixed(&k, &a.labels);
        ocl_arg_fixed(&k, &a.dlogits);
        ocl_arg_i32(&k, a.dlogits.buf != NULL);
        ocl_arg_fixed(&k, &a.scalars);
        ocl_arg_i32(&k, a.scalars.buf != NULL);
        ocl_arg_u64(&k, a.rows);
        ocl_arg_u64(&k, a.cols);
        ocl_arg_i32(&k, a.ignore_index);
        ocl_arg_f32(&k, a.grad_scale);
        ocl_arg_mem(&k, work);
        OCL_TRY(ocl_launch_rows(&k, a.rows));
    }
    k = ocl_args_begin(ctx, K_XENT_LOSS);
    ocl_arg_mem(&k, work);
    ocl_arg_u64(&k, a.rows);
    ocl_arg_fixed(&k, &a.loss);
    return ocl_launch_groups(&k, 1);
}
