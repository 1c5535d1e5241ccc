/* buffer.c — device memory of the CUDA backend: cudaMalloc'd blocks (256-byte aligned, so any
 * tensor offset that is a multiple of its dtype size is naturally aligned) with the
 * requested size kept on the host, so every write, read, copy and fill, and every op's
 * tensor range, is checked before anything reaches the device.
 *
 * write copies from host memory before it returns and read waits for earlier work, as the
 * ABI says (both synchronise the stream: they are the host's uploads and downloads, not part
 * of a training step). copy and fill are enqueued. An out-of-memory names the size asked for.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

ampx_status cu_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    CU_TRY(ampx_kit_check_alloc(AMPX_KIT(ctx), out));
    CU_TRY(cu_enter(ctx, "buffer_alloc"));
    if (bytes > (uint64_t)SIZE_MAX - 256)
        return cu_fail(ctx, AMPX_ERR_NO_MEMORY, "buffer_alloc: %llu bytes is too large",
                       (unsigned long long)bytes);
    ampx_buffer *buf = malloc(sizeof *buf);
    if (!buf)
        return cu_fail(ctx, AMPX_ERR_NO_MEMORY, "buffer_alloc: out of host memory for a handle");
    void *data    = NULL;
    cudaError_t e = cudaMalloc(&data, (size_t)(bytes ? bytes : 256)); /* 0 bytes: a real block */
    if (e != cudaSuccess) {
        free(buf);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError(); /* not sticky: clear it */
            size_t free_b = 0, total_b = 0;
            (void)cudaMemGetInfo(&free_b, &total_b);
            return cu_fail(ctx, AMPX_ERR_NO_MEMORY,
                           "buffer_alloc: out of device memory allocating %llu bytes (%llu of "
                           "%llu bytes free)",
                           (unsigned long long)bytes, (unsigned long long)free_b,
                           (unsigned long long)total_b);
        }
        return cu_check(ctx, "buffer_alloc", "cudaMalloc", e);
    }
    buf->data  = data;
    buf->bytes = bytes;
    *out       = buf;
    return AMPX_OK;
}

void cu_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    if (!buf) return;
    /* cudaFree waits for work that may still use the block */
    if (ctx) (void)cudaSetDevice(ctx->device);
    (void)cudaFree(buf->data);
    free(buf);
}

uint64_t cu_buffer_bytes(const ampx_buffer *buf) {
    return buf->bytes;
}

ampx_status cu_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                            uint64_t bytes) {
    static const char *op = "buffer_write";
    CU_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 0, dst, offset, src, bytes));
    if (bytes == 0) return AMPX_OK;
    CU_TRY(cu_enter(ctx, op));
    CU_TRY(cu_check(ctx, op, "cudaMemcpyAsync",
                    cudaMemcpyAsync(dst->data + offset, src, (size_t)bytes, cudaMemcpyHostToDevice,
                                    ctx->stream)));
    return cu_check(ctx, op, "cudaStreamSynchronize", cudaStreamSynchronize(ctx->stream));
}

ampx_status cu_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                           uint64_t bytes) {
    static const char *op = "buffer_read";
    CU_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 1, src, offset, dst, bytes));
    if (bytes == 0) return AMPX_OK;
    CU_TRY(cu_enter(ctx, op));
    CU_TRY(cu_check(ctx, op, "cudaMemcpyAsync",
                    cudaMemcpyAsync(dst, src->data + offset, (size_t)bytes, cudaMemcpyDeviceToHost,
                                    ctx->stream)));
    return cu_check(ctx, op, "cudaStreamSynchronize", cudaStreamSynchronize(ctx->stream));
}

ampx_status cu_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                           const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    static const char *op = "buffer_copy";
    CU_TRY(ampx_kit_check_copy(AMPX_KIT(ctx), dst, dst_offset, src, src_offset, bytes));
    if (bytes == 0) return AMPX_OK;
    CU_TRY(cu_enter(ctx, op));
    unsigned char *d       = dst->data + dst_offset;
    const unsigned char *s = src->data + src_offset;
    if (dst == src && d < s + bytes && s < d + bytes && d != s) {
        /* overlapping ranges of one buffer: memmove semantics through a scratch copy */
        void *tmp = NULL;
        CU_TRY(cu_tmp_alloc(ctx, op, bytes, &tmp));
        ampx_status st =
            cu_check(ctx, op, "cudaMemcpyAsync",
                     cudaMemcpyAsync(tmp, s, (size_t)bytes, cudaMemcpyDeviceToDevice, ctx->stream));
        if (st == AMPX_OK)
            st = cu_check(
                ctx, op, "cudaMemcpyAsync",
                cudaMemcpyAsync(d, tmp, (size_t)bytes, cudaMemcpyDeviceToDevice, ctx->stream));
        cu_tmp_free(ctx, tmp);
        return st;
    }
    if (d == s) return AMPX_OK;
    return cu_check(ctx, op, "cudaMemcpyAsync",
                    cudaMemcpyAsync(d, s, (size_t)bytes, cudaMemcpyDeviceToDevice, ctx->stream));
}

ampx_status cu_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                           uint32_t pattern, uint32_t pattern_bytes) {
    static const char *op = "buffer_fill";
    CU_TRY(ampx_kit_check_fill(AMPX_KIT(ctx), dst, offset, bytes, pattern_bytes));
    if (bytes == 0) return AMPX_OK;
    CU_TRY(cu_enter(ctx, op));
    return cu_check(ctx, op, "fill kernel",
                    cuk_fill_run(ctx->stream, dst->data + offset, bytes, pattern, pattern_bytes));
}
