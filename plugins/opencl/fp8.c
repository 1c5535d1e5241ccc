/* fp8.c — FP8_QUANTIZE and FP8_SCALE_UPDATE (ABI 1.7; GEMM_FP8 is gemm.c's): the checks of
 * plugin_kit.h, then the kernels of kernels/opencl/fp8.cl. The scale, amax, counts and the
 * FP8 STATE block stay on the device: the ops enqueue and never read them back.
 */
#include "ocl.h"

ampx_status ocl_fp8_quantize(ampx_context *ctx, const ampx_fp8_quantize_args *args) {
    ampx_fp8_quantize_args a;
    OCL_TRY(ampx_kit_take_fp8_quantize(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    if (ampx_dtype_is_fp8(a.src.dtype)) { /* from fp8: elementwise */
        ocl_args k = ocl_args_begin(ctx, K_FP8_DEQUANTIZE);
        ocl_arg_fixed(&k, &a.src);
        ocl_arg_i32(&k, (int32_t)a.src.dtype);
        ocl_arg_tensor(&k, &a.dst);
        ocl_arg_u64(&k, a.n);
        ocl_arg_fixed(&k, &a.scale);
        return ocl_launch_1d(&k, a.n);
    }
    /* to fp8: work-groups that reduce amax and the counts, one atomic each per group */
    uint64_t groups = (a.n + ctx->wg - 1) / ctx->wg, cap = ctx->max_items / ctx->wg;
    if (groups > cap) groups = cap ? cap : 1;
    ocl_args k = ocl_args_begin(ctx, K_FP8_QUANTIZE);
    ocl_arg_tensor(&k, &a.src);
    ocl_arg_fixed(&k, &a.dst);
    ocl_arg_i32(&k, (int32_t)a.dst.dtype);
    ocl_arg_i32(&k, (int32_t)a.saturate);
    ocl_arg_u64(&k, a.n);
    ocl_arg_fixed(&k, &a.scale);
    ocl_arg_fixed(&k, &a.amax);
    ocl_arg_fixed(&k, &a.counts);
    return ocl_launch_groups(&k, groups);
}

ampx_status ocl_fp8_scale_update(ampx_context *ctx, const ampx_fp8_scale_update_args *args) {
    ampx_fp8_scale_update_args a;
    OCL_TRY(ampx_kit_take_fp8_scale_update(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_FP8_SCALE_UPDATE);
    ocl_arg_fixed(&k, &a.state);
    ocl_arg_fixed(&k, &a.fp8_max);
    ocl_arg_fixed(&k, a.skip_on_found_inf ? &a.scalars : NULL);
    ocl_arg_u64(&k, a.n);
    ocl_arg_u32(&k, a.history);
    ocl_arg_i32(&k, a.margin);
    ocl_arg_u32(&k, a.algo);
    ocl_arg_i32(&k, a.skip_on_found_inf != 0);
    return ocl_launch_1d(&k, a.n);
}
