/* reduce.c — REDUCE (one work-group per row), SUM_SQUARES (amp.c's partial sums per chunk of
 * each tensor of the list, combined in a fixed order into out) and ABS_MAX (out cleared, then one
 * launch of a grid of work-groups per tensor, each group folding its maximum into out with
 * atomic_max): kernels/opencl/reduce.cl, typed/amp_reduce.cl, amp_finish.cl and abs_max.cl. */
#include "ocl.h"

ampx_status ocl_reduce(ampx_context *ctx, const ampx_reduce_args *args) {
    ampx_reduce_args a;
    OCL_TRY(ampx_kit_take_reduce(AMPX_KIT(ctx), args, &a));
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
    OCL_TRY(ampx_kit_take_sum_squares(AMPX_KIT(ctx), args, &a));
    if (a.x.count == 0) {
        if (a.accumulate) return AMPX_OK;
        float zero = 0.0f;
        ocl_thread_enter(ctx);
        return ocl_check(ctx,
                         clEnqueueWriteBuffer(ctx->queue, a.out.buf->mem, CL_TRUE,
                                              (size_t)a.out.offset, 4, &zero, 0, NULL, NULL),
                         op, "clEnqueueWriteBuffer");
    }
    ocl_amp_reduce r = {.kernel        = TK_SUM_SQUARES_PART,
                        .grads         = a.x,
                        .want          = 8u,
                        .sq            = a.out,
                        .sq_accumulate = a.accumulate};
    return ocl_amp_reduce_run(ctx, op, &r);
}

ampx_status ocl_abs_max(ampx_context *ctx, const ampx_abs_max_args *args) {
    ampx_abs_max_args a;
    OCL_TRY(ampx_kit_take_abs_max(AMPX_KIT(ctx), args, &a));
    if (a.x.count == 0) return AMPX_OK;
    OCL_TRY(ocl_buffer_fill(ctx, a.out.buf, a.out.offset, 4 * (uint64_t)a.x.count, 0, 4));
    for (uint32_t t = 0; t < a.x.count; t++) {
        if (a.x.n_elems[t] == 0) continue;
        uint64_t groups = (a.x.n_elems[t] + ctx->wg - 1) / ctx->wg, cap = ctx->max_items / ctx->wg;
        if (groups > cap) groups = cap ? cap : 1;
        ampx_tensor out = a.out;
        out.offset += 4 * (uint64_t)t;
        ocl_args k = ocl_args_begin(ctx, K_ABS_MAX);
        ocl_arg_tensor(&k, &a.x.tensors[t]);
        ocl_arg_u64(&k, a.x.n_elems[t]);
        ocl_arg_fixed(&k, &out);
        OCL_TRY(ocl_launch_groups(&k, groups));
    }
    return AMPX_OK;
}
