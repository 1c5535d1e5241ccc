/* shell_partial.c — a plugin whose op prototypes, timed wrappers, tables and entry point are
 * the kit's (ampx/kit/shell.h), from a list of two ops: the op table has SCALE and ABS_MAX and
 * NULL in every other slot; the backend table has the profile slots and not the native ones.
 * Its ops check nothing and do nothing, so tests/test_loader.c can count what the timed
 * wrappers record.
 */
#include <stdlib.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "ampx/plugin_kit.h"

struct ampx_context {
    ampx_kit kit;
    int on;
    uint32_t cap, n;
};

struct ampx_buffer {
    uint64_t bytes;
};

#define PART_OPS(X, p) X(p, scale) X(p, abs_max)
AMPX_KIT_OP_PROTOTYPES(part, PART_OPS)

ampx_status part_scale(ampx_context *ctx, const ampx_scale_args *args) {
    return ctx && args ? AMPX_OK : AMPX_ERR_INVALID;
}

ampx_status part_abs_max(ampx_context *ctx, const ampx_abs_max_args *args) {
    return ctx && args ? AMPX_OK : AMPX_ERR_INVALID;
}

static uint64_t part_buffer_bytes(const ampx_buffer *buf) {
    return buf ? buf->bytes : 0;
}

static ampx_status part_probe(char *reason, size_t reason_cap) {
    (void)reason, (void)reason_cap;
    return AMPX_OK;
}

static ampx_status part_create(const ampx_host *host, ampx_context **out) {
    ampx_host h;
    ampx_kit kit;
    AMPX_KIT_TRY(ampx_kit_begin_create(host, out, "shell_partial", part_buffer_bytes, &h, &kit));
    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return AMPX_ERR_NO_MEMORY;
    ctx->kit = kit;
    *out     = ctx;
    return AMPX_OK;
}

static void part_destroy(ampx_context *ctx) {
    free(ctx);
}

static ampx_status part_device_info(ampx_context *ctx, ampx_device_info *info) {
    (void)ctx, (void)info;
    return AMPX_ERR_UNSUPPORTED;
}

static int part_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes,
                         uint32_t n_dtypes, uint32_t shape_class) {
    (void)ctx, (void)dtypes, (void)n_dtypes, (void)shape_class;
    return op == AMPX_OP_SCALE || op == AMPX_OP_ABS_MAX;
}

static ampx_status part_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    (void)ctx, (void)bytes, (void)out;
    return AMPX_ERR_NO_MEMORY;
}

static void part_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    (void)ctx, (void)buf;
}

static ampx_status part_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                     const void *src, uint64_t bytes) {
    (void)ctx, (void)dst, (void)offset, (void)src, (void)bytes;
    return AMPX_ERR_INVALID;
}

static ampx_status part_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset,
                                    void *dst, uint64_t bytes) {
    (void)ctx, (void)src, (void)offset, (void)dst, (void)bytes;
    return AMPX_ERR_INVALID;
}

static ampx_status part_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                                    const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    (void)ctx, (void)dst, (void)dst_offset, (void)src, (void)src_offset, (void)bytes;
    return AMPX_ERR_INVALID;
}

static ampx_status part_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                    uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes) {
    (void)ctx, (void)dst, (void)offset, (void)bytes, (void)pattern, (void)pattern_bytes;
    return AMPX_ERR_INVALID;
}

static ampx_status part_synchronize(ampx_context *ctx) {
    return ctx ? AMPX_OK : AMPX_ERR_INVALID;
}

/* Profiling counts the ops that returned AMPX_OK, up to the capacity; the marks are unused. */
static ampx_status part_profile_begin(ampx_context *ctx, uint32_t capacity) {
    if (!ctx) return AMPX_ERR_INVALID;
    ctx->on = 1, ctx->cap = capacity, ctx->n = 0;
    return AMPX_OK;
}

static ampx_status part_profile_end(ampx_context *ctx, uint64_t *ns, uint32_t cap,
                                    uint32_t *n_ops) {
    (void)ns, (void)cap;
    if (!ctx || !n_ops) return AMPX_ERR_INVALID;
    *n_ops  = ctx->on ? ctx->n : 0;
    ctx->on = 0;
    return AMPX_OK;
}

static inline int part_prof_op_start(ampx_context *ctx, uint64_t *mark) {
    *mark = 0;
    return ctx && ctx->on && ctx->n < ctx->cap;
}

static inline void part_prof_op_end(ampx_context *ctx, uint64_t mark) {
    (void)mark;
    ctx->n++;
}

AMPX_KIT_TIMED_OPS(part, PART_OPS)
AMPX_KIT_OP_TABLE(part_ops, part_timed, PART_OPS);
static const ampx_backend_iface part_iface = {AMPX_KIT_IFACE(part, "shell_partial", "0", part_ops),
                                              AMPX_KIT_IFACE_PROFILE(part)};
AMPX_KIT_ENTRY(part_iface)
