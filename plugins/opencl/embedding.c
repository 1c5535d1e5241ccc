/* embedding.c — EMBEDDING_FWD (gather) and EMBEDDING_BWD (scatter-add into an f32 table),
 * kernels/opencl/embedding.cl. */
#include "ocl.h"

static ampx_status emb_run(ampx_context *ctx, const ampx_embedding_args *args, int bwd) {
    const char *op = bwd ? "embedding_bwd" : "embedding_fwd";
    ampx_embedding_args a;
    OCL_TAKE_ARGS(ctx, op, args, a);
    if (bwd)
        OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_EMBEDDING_BWD,
                                 (ampx_dtype[]){a.y_or_dy.dtype, a.table_or_dtable.dtype}, 2));
    else
        OCL_TRY(ocl_check_dtypes(ctx, op, AMPX_OP_EMBEDDING_FWD,
                                 (ampx_dtype[]){a.table_or_dtable.dtype, a.y_or_dy.dtype}, 2));
    uint64_t nt, ny;
    if (ocl_mul_u64(a.vocab, a.dim, &nt) || ocl_mul_u64(a.n, a.dim, &ny))
        return ocl_fail(ctx, AMPX_ERR_INVALID, "%s: shape overflows", op);
    OCL_TRY(ocl_check_tensor(ctx, op, bwd ? "dtable" : "table", &a.table_or_dtable, nt, 0));
    OCL_TRY(ocl_check_tensor_dt(ctx, op, "ids", &a.ids, AMPX_I32, a.n, 0));
    OCL_TRY(ocl_check_tensor(ctx, op, bwd ? "dy" : "y", &a.y_or_dy, ny, 0));
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
