/* attention.c — ATTN_FWD / ATTN_BWD: the shared checks (plugin_kit.h), then the kernels of
 * kernels/opencl/attention.cl: the forward, then for the backward delta and dq, then dk and
 * dv (the queue orders them, so dkv reads the delta dq wrote). Heads of up to AT_HMAX columns
 * run the tiled kernels (work-groups of AT_B rows sharing tiles of the other operand in
 * local memory) when the device has the local memory, on CPU devices in their form of one
 * work item per AT_B rows (attention_items.cl: no barriers, rows blocked in registers);
 * wider heads, or a device without the local memory, the kernels of one work item per row.
 */
#include "ocl.h"

/* The shape, the strides and the options every attention kernel takes after its tensors. */
static void attn_args_shape(ocl_args *k, const ampx_attn_args *a, int bwd) {
    ocl_arg_u64(k, a->batch);
    ocl_arg_u64(k, a->heads);
    ocl_arg_u64(k, a->seq);
    ocl_arg_u64(k, a->head_dim);
    ocl_arg_u64(k, a->ld_q);
    ocl_arg_u64(k, a->ld_k);
    ocl_arg_u64(k, a->ld_v);
    ocl_arg_u64(k, a->ld_o);
    if (bwd == 1) ocl_arg_u64(k, a->ld_dq);
    if (bwd == 2) {
        ocl_arg_u64(k, a->ld_dk);
        ocl_arg_u64(k, a->ld_dv);
    }
    ocl_arg_u32(k, a->causal);
    ocl_arg_f32(k, a->scale);
    ocl_arg_u32(k, a->dropout_threshold);
    ocl_arg_f32(k, a->dropout_scale);
    ocl_arg_u64(k, a->seed);
    ocl_arg_u64(k, a->offset);
}

enum { AT_B = 32, AT_HMAX = 128 }; /* as attention.cl */

/* The bytes of one staged tile of a's heads, or 0 when the tiled kernels cannot take a
 * (a head wider than AT_HMAX, or TILES tiles beyond the device's local memory). */
static size_t attn_tile_bytes(ampx_context *ctx, const ampx_attn_args *a, int tiles) {
    if (a->head_dim > AT_HMAX || a->seq >= ((uint64_t)1 << 31)) return 0;
    size_t bytes   = (size_t)AT_B * (size_t)((a->head_dim + 15) / 16 * 16) * sizeof(float);
    uint64_t local = ctx->gt.lim.local_mem; /* CL_DEVICE_LOCAL_MEM_SIZE, read at create */
    /* and what the dk/dv kernel declares itself: two rows of AT_B floats */
    return (uint64_t)tiles * bytes + 2 * AT_B * sizeof(float) <= local ? bytes : 0;
}

/* The tiled kernel, or its form for CPU devices (attention_items.cl), by ocl_row_items. */
static ocl_kernel attn_tiled_kernel(ampx_context *ctx, ocl_kernel tiled) {
    if (!ocl_row_items(ctx)) return tiled;
    return tiled == K_ATTN_FWD_TILED      ? K_ATTN_FWD_ITEMS
           : tiled == K_ATTN_BWD_DQ_TILED ? K_ATTN_BWD_DQ_ITEMS
                                          : K_ATTN_BWD_DKV_ITEMS;
}

/* One work-group per AT_B rows of each (batch, head): of AT_B items (tiled), or of one item
 * (the form for CPU devices, which the same tiles serve). */
static ampx_status attn_launch_tiled(ocl_args *k, const ampx_attn_args *a, int tiles, size_t tile) {
    for (int t = 0; t < tiles; t++)
        ocl_arg_local(k, tile);
    size_t items = ocl_row_items(k->ctx) ? 1 : AT_B;
    return ocl_launch_groups_of(k, a->batch * a->heads * ((a->seq + AT_B - 1) / AT_B), items);
}

ampx_status ocl_attn_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    OCL_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 0));
    if (a.batch == 0) return AMPX_OK;
    size_t tile = attn_tile_bytes(ctx, &a, 2);
    ocl_args k  = ocl_args_begin(ctx, tile ? attn_tiled_kernel(ctx, K_ATTN_FWD_TILED) : K_ATTN_FWD);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.o);
    ocl_arg_fixed(&k, &a.lse);
    attn_args_shape(&k, &a, 0);
    if (tile) return attn_launch_tiled(&k, &a, 2, tile);
    return ocl_launch_1d(&k, a.batch * a.heads * a.seq);
}

ampx_status ocl_attn_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    OCL_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 1));
    if (a.batch == 0) return AMPX_OK;
    size_t tile = attn_tile_bytes(ctx, &a, 3); /* dq stages three tiles, dk and dv four */
    ocl_args k =
        ocl_args_begin(ctx, tile ? attn_tiled_kernel(ctx, K_ATTN_BWD_DQ_TILED) : K_ATTN_BWD_DQ);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.o);
    ocl_arg_tensor(&k, &a.d_o);
    ocl_arg_fixed(&k, &a.lse);
    ocl_arg_fixed(&k, &a.delta);
    ocl_arg_tensor(&k, &a.dq);
    attn_args_shape(&k, &a, 1);
    if (tile)
        OCL_TRY(attn_launch_tiled(&k, &a, 3, tile));
    else
        OCL_TRY(ocl_launch_1d(&k, a.batch * a.heads * a.seq));
    tile = attn_tile_bytes(ctx, &a, 4);
    k = ocl_args_begin(ctx, tile ? attn_tiled_kernel(ctx, K_ATTN_BWD_DKV_TILED) : K_ATTN_BWD_DKV);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.d_o);
    ocl_arg_fixed(&k, &a.lse);
    ocl_arg_fixed(&k, &a.delta);
    ocl_arg_tensor(&k, &a.dk);
    ocl_arg_tensor(&k, &a.dv);
    attn_args_shape(&k, &a, 2);
    if (tile) return attn_launch_tiled(&k, &a, 4, tile);
    return ocl_launch_1d(&k, a.batch * a.heads * a.seq);
}
