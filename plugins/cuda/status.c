/* status.c — what every file of the CUDA backend shares: CUDA errors as ampx statuses (one
 * ERROR line each), the context's device made current, and stream-ordered scratch memory.
 * A leaf: it calls no other file of the plugin, so no file that needs these is called back.
 */
#include "cuda.h"

ampx_status cu_check(ampx_context *ctx, const char *op, const char *what, cudaError_t e) {
    if (e == cudaSuccess) return AMPX_OK;
    ampx_status st = e == cudaErrorMemoryAllocation ? AMPX_ERR_NO_MEMORY : AMPX_ERR_DEVICE;
    return cu_fail(ctx, st, "%s: %s: %s: %s", op, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

ampx_status cu_enter(ampx_context *ctx, const char *op) {
    return cu_check(ctx, op, "cudaSetDevice", cudaSetDevice(ctx->device));
}

ampx_status cu_tmp_alloc(ampx_context *ctx, const char *op, uint64_t bytes, void **out) {
    *out          = NULL;
    cudaError_t e = cudaMallocAsync(out, (size_t)(bytes ? bytes : 16), ctx->stream);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return cu_fail(ctx, AMPX_ERR_NO_MEMORY,
                       "%s: out of device memory allocating %llu bytes of scratch", op,
                       (unsigned long long)bytes);
    }
    return cu_check(ctx, op, "cudaMallocAsync", e);
}

void cu_tmp_free(ampx_context *ctx, void *p) {
    if (p) (void)cudaFreeAsync(p, ctx->stream);
}
