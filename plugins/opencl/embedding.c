/* embedding.c — EMBEDDING_FWD (gather) and EMBEDDING_BWD (scatter-add into an f32 table),
 * kernels/opencl/embedding.cl. */
#include "ocl.h"

static ampx_status emb_run(ampx_context *ctx, const ampx_embedding_args *args, int bwd) {
    ampx_embedding_args a;
    OCL_TRY(ampx_kit_take_embedding(AMPX_KIT(ctx), args, bwd, &a));
    uint64_t ny = a.n * a.dim;
    if (ny == 0) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, bwd ? K_EMBEDDING_BWD : K_EMBEDDING_FWD);
    if (bwd) {
        ocl_arg_fixed(&k, &a.table_or_dtable);
        ocl_arg_fixed(&k, &a.ids);
        ocl_arg_tensor(&k, &a.y_or_dy);
    } else {
        ocl_arg_tensor(&k, &a.table_or_dtable);
        ocl_arg_fixed(&k, &a.ids);
        ocl_arg_tensor(&k, &a.y_or_dy);
    }
    ocl_arg_u64(&k, a.n);
    ocl_arg_u64(&k, a.vocab);
    ocl_arg_u64(&k, a.dim);
    return ocl_launch_1d(&k, bwd ? a.dim : ny);
}

ampx_status ocl_embedding_fwd(ampx_context *ctx, const ampx_embedding_args *args) {
    return emb_run(ctx, args, 0);
}

ampx_status ocl_embedding_bwd(ampx_context *ctx, const ampx_embedding_args *args) {
    return emb_run(ctx, args, 1);
}
