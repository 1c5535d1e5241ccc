/* dropout.c — DROPOUT: the shared checks (plugin_kit.h), then one grid-stride kernel
 * (kernels/opencl/dropout.cl) whose mask is dtype.h's ampx_hash32, bit for bit.
 */
#include "ocl.h"

ampx_status ocl_dropout(ampx_context *ctx, const ampx_dropout_args *args) {
    ampx_dropout_args a;
    OCL_TRY(ampx_kit_take_dropout(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_DROPOUT);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_u64(&k, a.n);
    ocl_arg_u64(&k, a.seed);
    ocl_arg_u64(&k, a.offset);
    ocl_arg_u32(&k, a.threshold);
    ocl_arg_f32(&k, a.scale);
    return ocl_launch_1d(&k, a.n);
}
