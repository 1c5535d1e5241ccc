/* permute.c — PERMUTE: the shared checks (plugin_kit.h), which also give the copy in its
 * loop form (4 dims, the last walking y with the smallest stride), then one grid-stride
 * kernel over the indices in that order (kernels/opencl/permute.cl).
 */
#include "ocl.h"

ampx_status ocl_permute(ampx_context *ctx, const ampx_permute_args *args) {
    ampx_permute_args a, loop;
    uint64_t n;
    OCL_TRY(ampx_kit_take_permute(AMPX_KIT(ctx), args, &a, &loop, &n));
    if (n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_PERMUTE);
    ocl_arg_tensor(&k, &loop.x);
    ocl_arg_tensor(&k, &loop.y);
    ocl_arg_u64(&k, n);
    for (int d = 1; d < 4; d++)
        ocl_arg_u64(&k, loop.dims[d]);
    for (int d = 0; d < 4; d++)
        ocl_arg_u64(&k, loop.x_strides[d]);
    for (int d = 0; d < 4; d++)
        ocl_arg_u64(&k, loop.y_strides[d]);
    return ocl_launch_1d(&k, n);
}
