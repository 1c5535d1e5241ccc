/* buffer.c — device memory of the OpenCL backend: one cl_mem per buffer (at least one byte,
 * since OpenCL has no empty buffers) with the requested size kept on the host, so every
 * write, read, copy, fill and every op's tensor range is checked before anything is
 * enqueued. write and read block (the ABI: host memory is copied before they return);
 * copy and fill are enqueued on the context's in-order queue.
 */
#include <stdlib.h>

#include "ocl.h"

ampx_status ocl_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    OCL_TRY(ampx_kit_check_alloc(AMPX_KIT(ctx), out));
    if (bytes > ctx->max_alloc)
        return ocl_fail(ctx, AMPX_ERR_NO_MEMORY,
                        "buffer_alloc: %llu bytes exceeds the device's largest allocation "
                        "(CL_DEVICE_MAX_MEM_ALLOC_SIZE %llu bytes)",
                        (unsigned long long)bytes, (unsigned long long)ctx->max_alloc);
    ampx_buffer *buf = malloc(sizeof *buf);
    if (!buf) return ocl_fail(ctx, AMPX_ERR_NO_MEMORY, "buffer_alloc: out of host memory");
    cl_int err;
    buf->mem = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes ? (size_t)bytes : 1, NULL, &err);
    if (err != CL_SUCCESS) {
        free(buf);
        return ocl_fail(
            ctx, ocl_status_of(err) == AMPX_ERR_DEVICE ? AMPX_ERR_DEVICE : AMPX_ERR_NO_MEMORY,
            "buffer_alloc: clCreateBuffer(%llu bytes): %s", (unsigned long long)bytes,
            ocl_err_name(err));
    }
    buf->bytes = bytes;
    *out       = buf;
    return AMPX_OK;
}

void ocl_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    (void)ctx;
    if (!buf) return;
    clReleaseMemObject(buf->mem); /* OpenCL frees it once enqueued work using it is done */
    free(buf);
}

uint64_t ocl_buffer_bytes(const ampx_buffer *buf) {
    return buf->bytes;
}

ampx_status ocl_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes) {
    OCL_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 0, dst, offset, src, bytes));
    if (bytes == 0) return AMPX_OK;
    ocl_thread_enter(ctx);
    return ocl_check(ctx,
                     clEnqueueWriteBuffer(ctx->queue, dst->mem, CL_TRUE, (size_t)offset,
                                          (size_t)bytes, src, 0, NULL, NULL),
                     "buffer_write", "clEnqueueWriteBuffer");
}

ampx_status ocl_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes) {
    OCL_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 1, src, offset, dst, bytes));
    if (bytes == 0) return AMPX_OK;
    ocl_thread_enter(ctx);
    return ocl_check(ctx,
                     clEnqueueReadBuffer(ctx->queue, src->mem, CL_TRUE, (size_t)offset,
                                         (size_t)bytes, dst, 0, NULL, NULL),
                     "buffer_read", "clEnqueueReadBuffer");
}

ampx_status ocl_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                            const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    OCL_TRY(ampx_kit_check_copy(AMPX_KIT(ctx), dst, dst_offset, src, src_offset, bytes));
    if (bytes == 0) return AMPX_OK;
    int overlap = src == dst && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes;
    if (!overlap)
        return ocl_check(ctx,
                         clEnqueueCopyBuffer(ctx->queue, src->mem, dst->mem, (size_t)src_offset,
                                             (size_t)dst_offset, (size_t)bytes, 0, NULL, NULL),
                         "buffer_copy", "clEnqueueCopyBuffer");
    /* OpenCL refuses overlapping copies (CL_MEM_COPY_OVERLAP): go through scratch, which
     * gives memmove's result. */
    cl_mem tmp = ocl_scratch_get(ctx, "buffer_copy", 0, (size_t)bytes);
    if (!tmp) return AMPX_ERR_NO_MEMORY;
    OCL_TRY(ocl_check(ctx,
                      clEnqueueCopyBuffer(ctx->queue, src->mem, tmp, (size_t)src_offset, 0,
                                          (size_t)bytes, 0, NULL, NULL),
                      "buffer_copy", "clEnqueueCopyBuffer"));
    return ocl_check(ctx,
                     clEnqueueCopyBuffer(ctx->queue, tmp, dst->mem, 0, (size_t)dst_offset,
                                         (size_t)bytes, 0, NULL, NULL),
                     "buffer_copy", "clEnqueueCopyBuffer");
}

ampx_status ocl_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                            uint32_t pattern, uint32_t pattern_bytes) {
    OCL_TRY(ampx_kit_check_fill(AMPX_KIT(ctx), dst, offset, bytes, pattern_bytes));
    if (bytes == 0) return AMPX_OK;
    ocl_args a = ocl_args_begin(ctx, K_BUFFER_FILL);
    ocl_arg_mem(&a, dst->mem);
    ocl_arg_u64(&a, offset);
    ocl_arg_u64(&a, bytes);
    ocl_arg_u32(&a, pattern);
    ocl_arg_u32(&a, pattern_bytes);
    return ocl_launch_1d(&a, bytes);
}
