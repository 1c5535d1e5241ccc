/* attention.c — ATTN_FWD / ATTN_BWD: the shared checks (plugin_kit.h), then the kernels of
 * kernels/opencl/attention.cl: one work item per query row for the forward and for delta and
 * dq, then one per key row for dk and dv (the queue orders them, so dkv reads the delta dq
 * wrote).
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

ampx_status ocl_attn_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    OCL_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 0));
    if (a.batch == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ATTN_FWD);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.o);
    ocl_arg_fixed(&k, &a.lse);
    attn_args_shape(&k, &a, 0);
    return ocl_launch_1d(&k, a.batch * a.heads * a.seq);
}

ampx_status ocl_attn_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    ampx_attn_args a;
    OCL_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &a, 1));
    if (a.batch == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_ATTN_BWD_DQ);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.o);
    ocl_arg_tensor(&k, &a.d_o);
    ocl_arg_fixed(&k, &a.lse);
    ocl_arg_fixed(&k, &a.delta);
    ocl_arg_tensor(&k, &a.dq);
    attn_args_shape(&k, &a, 1);
    OCL_TRY(ocl_launch_1d(&k, a.batch * a.heads * a.seq));
    k = ocl_args_begin(ctx, K_ATTN_BWD_DKV);
    ocl_arg_tensor(&k, &a.q);
    ocl_arg_tensor(&k, &a.k);
    ocl_arg_tensor(&k, &a.v);
    ocl_arg_tensor(&k, &a.d_o);
    ocl_arg_fixed(&k, &a.lse);
    ocl_arg_fixed(&k, &a.delta);
    ocl_arg_tensor(&k, &a.dk);
    ocl_arg_tensor(&k, &a.dv);
    attn_args_shape(&k, &a, 2);
    return ocl_launch_1d(&k, a.batch * a.heads * a.seq);
}
