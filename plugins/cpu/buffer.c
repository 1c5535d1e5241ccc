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
    CPU_TRY(ampx_kit_check_alloc(AMPX_KIT(ctx), out));
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

ampx_status cpu_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes) {
    CPU_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 0, dst, offset, src, bytes));
    if (bytes == 0) return AMPX_OK;
    memcpy(dst->data + offset, src, (size_t)bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes) {
    CPU_TRY(ampx_kit_check_transfer(AMPX_KIT(ctx), 1, src, offset, dst, bytes));
    if (bytes == 0) return AMPX_OK;
    memcpy(dst, src->data + offset, (size_t)bytes);
    return AMPX_OK;
}

/* A copy from this many bytes on, between regions that do not overlap, is cut into
 * COPY_SLICE-byte slices spread over the pool: one core cannot saturate the memory bus. */
#define COPY_PAR_MIN (1u << 20)
#define COPY_SLICE (256u << 10)

typedef struct copy_job {
    unsigned char *dst;
    const unsigned char *src;
    uint64_t bytes;
} copy_job;

static void copy_slice_task(void *arg, uint64_t item, unsigned tid) {
    const copy_job *j = arg;
    (void)tid;
    uint64_t off = item * COPY_SLICE, n = j->bytes - off < COPY_SLICE ? j->bytes - off : COPY_SLICE;
    memcpy(j->dst + off, j->src + off, (size_t)n);
}

ampx_status cpu_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                            const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    CPU_TRY(ampx_kit_check_copy(AMPX_KIT(ctx), dst, dst_offset, src, src_offset, bytes));
    if (bytes == 0) return AMPX_OK;
    unsigned char *d       = dst->data + dst_offset;
    const unsigned char *s = src->data + src_offset;
    int overlap            = d < s + bytes && s < d + bytes;
    if (bytes >= COPY_PAR_MIN && !overlap) {
        copy_job j = {d, s, bytes};
        /* work in elements of 4 bytes, the unit cpu_run's threshold counts */
        cpu_run(ctx, bytes / 4, cpu_div_up(bytes, COPY_SLICE), copy_slice_task, &j);
        return AMPX_OK;
    }
    /* memmove: a copy within one buffer may overlap. */
    memmove(d, s, (size_t)bytes);
    return AMPX_OK;
}

ampx_status cpu_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                            uint32_t pattern, uint32_t pattern_bytes) {
    CPU_TRY(ampx_kit_check_fill(AMPX_KIT(ctx), dst, offset, bytes, pattern_bytes));
    ampx_kit_fill_host(dst->data + offset, bytes, pattern, pattern_bytes);
    return AMPX_OK;
}

uint64_t cpu_buffer_bytes(const ampx_buffer *buf) {
    return buf->bytes;
}
