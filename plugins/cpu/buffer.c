/* buffer.c — device memory of the CPU backend: host memory from aligned_alloc (64-byte
 * aligned, so any tensor offset that is a multiple of its dtype size is naturally aligned),
 * with the requested size kept beside it so that every write, read, copy and fill, and
 * every op's tensor range, is checked against the buffer's end.
 *
 * Ops run synchronously, so write/read/copy/fill happen at once and are ordered after all
 * earlier work, as the ABI requires.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

ampx_status cpu_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!out) return cpu_fail(ctx, AMPX_ERR_INVALID, "buffer_alloc: out is NULL");
    *out = NULL;
    /* aligned_alloc wants a multiple of the alignment; 0 bytes still gets a real block. */
    if (bytes > (uint64_t)SIZE_MAX - 64)
        return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "buffer_alloc: %llu bytes is too large",
                        (unsigned long long)bytes);
    size_t rounded   = bytes == 0 ? 64 : (size_t)((bytes + 63) & ~(uint64_t)63);
    ampx_buffer *buf = malloc(sizeof *buf);
    void *data       = buf ? aligned_alloc(64, rounded) : NULL;
    if (!data) {
        free(buf);
        return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "buffer_alloc: cannot allocate %llu bytes",
                        (unsigned long long)bytes);
    }
    buf->data  = data;
    buf->bytes = bytes;
    *out       = buf;
    return AMPX_OK;
}

void cpu_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    (void)ctx;
    if (!buf) return;
    free(buf->data);
    free(buf);
}

/* offset + bytes within the buffer, without overflow. */
static ampx_status check_range(ampx_context *ctx, const char *opname, const char *what,
                               const ampx_buffer *buf, uint64_t offset, uint64_t bytes) {
    uint64_t end;
    if (!buf) return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: %s buffer is NULL", opname, what);
    if (__builtin_add_overflow(offset, bytes, &end) || end > buf->bytes)
        return cpu_fail(ctx, AMPX_ERR_INVALID,
                        "%s: %s range [%llu, +%llu) overruns its buffer of %llu bytes", opname,
                        what, (unsigned long long)offset, (unsigned long long)bytes,
                        (unsigned long long)buf->bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes) {
    if (!ctx) return AMPX_ERR_INVALID;
    CPU_TRY(check_range(ctx, "buffer_write", "dst", dst, offset, bytes));
    if (bytes == 0) return AMPX_OK;
    if (!src) return cpu_fail(ctx, AMPX_ERR_INVALID, "buffer_write: src is NULL");
    memcpy(dst->data + offset, src, (size_t)bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes) {
    if (!ctx) return AMPX_ERR_INVALID;
    CPU_TRY(check_range(ctx, "buffer_read", "src", src, offset, bytes));
    if (bytes == 0) return AMPX_OK;
    if (!dst) return cpu_fail(ctx, AMPX_ERR_INVALID, "buffer_read: dst is NULL");
    memcpy(dst, src->data + offset, (size_t)bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                            const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    if (!ctx) return AMPX_ERR_INVALID;
    CPU_TRY(check_range(ctx, "buffer_copy", "dst", dst, dst_offset, bytes));
    CPU_TRY(check_range(ctx, "buffer_copy", "src", src, src_offset, bytes));
    if (bytes == 0) return AMPX_OK;
    /* memmove: a copy within one buffer may overlap. */
    memmove(dst->data + dst_offset, src->data + src_offset, (size_t)bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                            uint32_t pattern, uint32_t pattern_bytes) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "buffer_fill: pattern_bytes %u is not 1, 2 or 4",
                        pattern_bytes);
    if (bytes % pattern_bytes != 0)
        return cpu_fail(ctx, AMPX_ERR_INVALID,
                        "buffer_fill: %llu bytes is not a multiple of pattern_bytes %u",
                        (unsigned long long)bytes, pattern_bytes);
    CPU_TRY(check_range(ctx, "buffer_fill", "dst", dst, offset, bytes));
    unsigned char *p = dst->data + offset;
    if (pattern_bytes == 1) {
        memset(p, (int)pattern, (size_t)bytes);
        return AMPX_OK;
    }
    /* The pattern's low pattern_bytes bytes are stored in the machine's (little-endian)
     * byte order, as an element of that width would be; dst need not be aligned. */
    unsigned char pat[4];
    if (pattern_bytes == 2) {
        uint16_t v = (uint16_t)pattern;
        memcpy(pat, &v, 2);
    } else {
        memcpy(pat, &pattern, 4);
    }
    for (uint64_t i = 0; i < bytes; i += pattern_bytes)
        memcpy(p + i, pat, pattern_bytes);
    return AMPX_OK;
}
