/* window.c — IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD: the shared checks (plugin_kit.h's
 * ampx_kit_take_window, which also gives the window counts), then one grid-stride kernel of
 * kernels/opencl/window.cl over the op's output (the dx elements for the two gathers).
 */
#include "ocl.h"

/* The kernels' WIN_GEOM arguments. */
static void win_geom(ocl_args *k, const ampx_window_args *a, uint64_t out_h, uint64_t out_w) {
    ocl_arg_u64(k, a->n);
    ocl_arg_u64(k, a->channels);
    ocl_arg_u64(k, a->height);
    ocl_arg_u64(k, a->width);
    ocl_arg_u64(k, a->x_batch);
    ocl_arg_u64(k, out_h);
    ocl_arg_u64(k, out_w);
    ocl_arg_u32(k, a->kh);
    ocl_arg_u32(k, a->kw);
    ocl_arg_u32(k, a->stride_h);
    ocl_arg_u32(k, a->stride_w);
    ocl_arg_u32(k, a->pad_h);
    ocl_arg_u32(k, a->pad_w);
    ocl_arg_u32(k, a->dil_h);
    ocl_arg_u32(k, a->dil_w);
}

/* dx elements of the n images (the work of the gathers). */
static uint64_t win_image_elems(const ampx_window_args *a) {
    return a->n * a->channels * a->height * a->width;
}

ampx_status ocl_im2col(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    OCL_TRY(ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_IM2COL, args, &a, &oh, &ow));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_IM2COL);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y);
    win_geom(&k, &a, oh, ow);
    return ocl_launch_1d(&k, a.n * oh * ow * a.channels * a.kh * a.kw);
}

ampx_status ocl_col2im(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    OCL_TRY(ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_COL2IM, args, &a, &oh, &ow));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_COL2IM);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_tensor(&k, &a.x);
    win_geom(&k, &a, oh, ow);
    ocl_arg_u32(&k, a.accumulate);
    return ocl_launch_1d(&k, win_image_elems(&a));
}

ampx_status ocl_pool2d_fwd(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    OCL_TRY(ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_POOL2D_FWD, args, &a, &oh, &ow));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_POOL2D_FWD);
    ocl_arg_tensor(&k, &a.x);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_fixed(&k, a.mode == AMPX_POOL_MAX ? &a.indices : NULL);
    win_geom(&k, &a, oh, ow);
    ocl_arg_u32(&k, a.mode);
    ocl_arg_u32(&k, a.count_pad);
    return ocl_launch_1d(&k, a.n * a.channels * oh * ow);
}

ampx_status ocl_pool2d_bwd(ampx_context *ctx, const ampx_window_args *args) {
    ampx_window_args a;
    uint64_t oh, ow;
    OCL_TRY(ampx_kit_take_window(AMPX_KIT(ctx), AMPX_OP_POOL2D_BWD, args, &a, &oh, &ow));
    if (a.n == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_POOL2D_BWD);
    ocl_arg_tensor(&k, &a.y);
    ocl_arg_fixed(&k, a.mode == AMPX_POOL_MAX ? &a.indices : NULL);
    ocl_arg_tensor(&k, &a.x);
    win_geom(&k, &a, oh, ow);
    ocl_arg_u32(&k, a.mode);
    ocl_arg_u32(&k, a.count_pad);
    ocl_arg_u32(&k, a.accumulate);
    return ocl_launch_1d(&k, win_image_elems(&a));
}
