/* wrapper.c — test plugins built around the real CPU plugin, one per failure the loader and
 * the host must survive. The inner plugin's path comes from $AMPX_TEST_INNER_PLUGIN.
 *
 *   WRAP_WRONG_MAJOR   the table claims ABI major 2
 *   WRAP_UNAVAILABLE   the probe says the device is unavailable, with a reason
 *   WRAP_FAILING       ops succeed for a while, then return AMPX_ERR_DEVICE; buffers are
 *                      counted and device_info reports how many are still live
 *   WRAP_OLD_MINOR     an op table from an older minor version: only gemm and cast
 *   WRAP_CRASH         gemm stores through a wild pointer (the host must name the plugin and op);
 *                      device_info fills its strings with no terminating NUL
 *   WRAP_HANG          the probe never returns
 *   WRAP_ALLOC_LIMIT   buffer_alloc fails after $AMPX_TEST_ALLOC_LIMIT allocations; buffers
 *                      are counted and device_info reports how many are still live
 *   WRAP_NOOP          every op returns OK and computes nothing (training must refuse it)
 *   WRAP_NO_NORMS      no layernorm, batchnorm, embedding, dropout or permute ops (a backend
 *                      that still trains every model that needs none of them)
 *   WRAP_MISBEHAVE     $AMPX_TEST_MISBEHAVE="CALL:HOW" makes one call misbehave: CALL is create,
 *                      buffer_alloc, buffer_write, buffer_read or gemm; HOW is crash (a store
 *                      through a wild pointer), hang, exit (exit(0), as if all were well) or
 *                      abort; every other call is the inner plugin's
 *   WRAP_MINOR_1_3     the inner plugin as if built for ABI 1.3: an op table that ends before
 *                      the 1.4 amp_pass slot (set past the declared size, so a host that reads
 *                      beyond it would call it), so the host runs unscale_check, grad_stats
 *                      and sum_squares; $AMPX_TEST_AMP_PASS_LOG names a file each amp_pass call
 *                      appends a line to, to show the host never calls it; the same file
 *                      gets a line for every GEMM handed more than the 1.4 args or asking
 *                      for the ABI 1.5 epilogue (which its supports() would claim)
 *   WRAP_FORWARD       nothing changed but the name, "forward": beside the real plugin in a
 *                      backend list, with the loader's ops= option hiding all but a few
 *                      ops, the same code runs on both sides of every copy placement plans
 *   WRAP_PERTURB       layernorm_fwd's output moved by 1000 units in its last place (every
 *                      element's bits plus 1000), so `ampx diff` against the plain plugin
 *                      must name the first layer norm and nothing before it
 */
#include <dlfcn.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/backend.h"

static const ampx_backend_iface *inner;
static ampx_backend_iface table;
static ampx_backend_ops ops;
static long live_buffers, op_calls, alloc_calls;
static ampx_log_fn host_log;
static void *host_log_user;

#ifdef WRAP_OLD_MINOR
static ampx_status old_profile_begin(ampx_context *ctx, uint32_t cap) {
    (void)ctx, (void)cap;
    return AMPX_ERR_INTERNAL;
}
static ampx_status old_profile_end(ampx_context *ctx, uint64_t *ns, uint32_t cap, uint32_t *n) {
    (void)ctx, (void)ns, (void)cap, (void)n;
    return AMPX_ERR_INTERNAL;
}
#endif

#ifdef WRAP_MISBEHAVE
static int *volatile wild_pointer = (int *)16;
/* Misbehaves as $AMPX_TEST_MISBEHAVE says when it names this call. */
static void misbehave(const char *call) {
    const char *spec = getenv("AMPX_TEST_MISBEHAVE");
    size_t n         = strlen(call);
    if (!spec || strncmp(spec, call, n) || spec[n] != ':') return;
    const char *how = spec + n + 1;
    if (!strcmp(how, "crash")) *wild_pointer = 1;
    if (!strcmp(how, "exit")) exit(0);
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "hang"))
        for (;;)
            pause();
}
#define MISBEHAVE(call) misbehave(call)
#else
#define MISBEHAVE(call) (void)0
#endif

static const ampx_backend_iface *load_inner(void) {
    if (inner) return inner;
    const char *path = getenv("AMPX_TEST_INNER_PLUGIN");
    void *dl         = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    void *sym        = dl ? dlsym(dl, AMPX_BACKEND_ENTRY_SYMBOL) : NULL;
    ampx_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    inner = sym ? entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR) : NULL;
    return inner;
}

static ampx_status probe(char *reason, size_t cap) {
#ifdef WRAP_HANG
    for (;;)
        pause();
#endif
#ifdef WRAP_UNAVAILABLE
    snprintf(reason, cap, "test device is switched off");
    return AMPX_ERR_UNAVAILABLE;
#else
    if (!load_inner()) {
        snprintf(reason, cap, "AMPX_TEST_INNER_PLUGIN not set or not loadable");
        return AMPX_ERR_UNAVAILABLE;
    }
    return inner->probe(reason, cap);
#endif
}

static ampx_status create(const ampx_host *host, ampx_context **out) {
    host_log      = host->log;
    host_log_user = host->log_user;
    live_buffers = op_calls = alloc_calls = 0;
    MISBEHAVE("create");
    return inner->create(host, out);
}

static ampx_status alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
#ifdef WRAP_ALLOC_LIMIT
    const char *limit = getenv("AMPX_TEST_ALLOC_LIMIT");
    if (limit && ++alloc_calls > atol(limit)) {
        if (host_log) host_log(host_log_user, AMPX_LOG_ERROR, "buffer_alloc: injected failure");
        return AMPX_ERR_NO_MEMORY;
    }
#endif
    MISBEHAVE("buffer_alloc");
    ampx_status st = inner->buffer_alloc(ctx, bytes, out);
    if (st == AMPX_OK) live_buffers++;
    return st;
}

static void release(ampx_context *ctx, ampx_buffer *buf) {
    if (buf) live_buffers--;
    inner->buffer_free(ctx, buf);
}

static ampx_status info(ampx_context *ctx, ampx_device_info *di) {
    ampx_status st = inner->device_info(ctx, di);
    snprintf(di->description, sizeof di->description, "live_buffers=%ld op_calls=%ld", live_buffers,
             op_calls);
#ifdef WRAP_CRASH
    /* strings that fill their fields with no terminating NUL */
    memset(di->name, 'X', sizeof di->name);
    memset(di->description, 'Y', sizeof di->description);
#endif
    return st;
}

#ifdef WRAP_CRASH
/* An unmapped address that is not NULL, so a sanitizer's null check lets the store through
 * to the fault; volatile: the compiler cannot see where it points. */
static int *volatile bad_pointer = (int *)16;
static ampx_status crash_gemm(ampx_context *ctx, const ampx_gemm_args *a) {
    (void)ctx, (void)a;
    *bad_pointer = 1;
    return AMPX_OK;
}
#endif

#ifdef WRAP_MISBEHAVE
static ampx_status bad_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes) {
    MISBEHAVE("buffer_write");
    return inner->buffer_write(ctx, dst, offset, src, bytes);
}
static ampx_status bad_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes) {
    MISBEHAVE("buffer_read");
    return inner->buffer_read(ctx, src, offset, dst, bytes);
}
static ampx_status bad_gemm(ampx_context *ctx, const ampx_gemm_args *a) {
    MISBEHAVE("gemm");
    return inner->ops->gemm(ctx, a);
}
#endif

#ifdef WRAP_NOOP
/* Every op: OK, and nothing computed. */
#define WRAP_OP(name, argt)                                                                        \
    static ampx_status wrap_##name(ampx_context *ctx, const argt *a) {                             \
        (void)ctx, (void)a;                                                                        \
        return AMPX_OK;                                                                            \
    }
#endif

#ifdef WRAP_FAILING
/* Every op: forward the first 40 calls, then fail like a device that fell over. */
#define FAIL_AFTER 40
#define WRAP_OP(name, argt)                                                                        \
    static ampx_status wrap_##name(ampx_context *ctx, const argt *a) {                             \
        if (++op_calls > FAIL_AFTER) {                                                             \
            if (host_log)                                                                          \
                host_log(host_log_user, AMPX_LOG_ERROR, #name ": injected device fault");          \
            return AMPX_ERR_DEVICE;                                                                \
        }                                                                                          \
        return inner->ops->name(ctx, a);                                                           \
    }
#endif
#if defined(WRAP_FAILING) || defined(WRAP_NOOP)
#define WRAP_EACH(index, slot, OP, type, ...) WRAP_OP(slot, type)
AMPX_OPS(WRAP_EACH)
#undef WRAP_EACH
#endif

#ifdef WRAP_MINOR_1_3
static ampx_status logged_amp_pass(ampx_context *ctx, const ampx_amp_pass_args *a) {
    const char *path = getenv("AMPX_TEST_AMP_PASS_LOG");
    FILE *f          = path ? fopen(path, "a") : NULL;
    if (f) {
        fputs("amp_pass called past the table's size\n", f);
        fclose(f);
    }
    return inner->ops->amp_pass(ctx, a);
}

static ampx_status logged_gemm(ampx_context *ctx, const ampx_gemm_args *a) {
    const char *path = getenv("AMPX_TEST_AMP_PASS_LOG");
    int epi          = a->size > AMPX_GEMM_ARGS_SIZE_V1_4 &&
              (a->bias.buf || a->act || a->pre_act.buf || a->bias_grad.buf);
    FILE *f = path && (a->size > AMPX_GEMM_ARGS_SIZE_V1_4 || epi) ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "gemm handed %u bytes of args%s\n", a->size, epi ? " with an epilogue" : "");
        fclose(f);
    }
    return inner->ops->gemm(ctx, a);
}
#endif

#ifdef WRAP_PERTURB
static ampx_status perturbed_layernorm(ampx_context *ctx, const ampx_layernorm_args *a) {
    ampx_status st = inner->ops->layernorm_fwd(ctx, a);
    size_t es      = a->y_or_dx.dtype == AMPX_F32 ? 4 : 2;
    uint64_t n = a->rows * a->cols, bytes = n * es;
    unsigned char *y = st ? NULL : malloc(bytes + 1);
    if (st || !y) return st ? st : AMPX_ERR_NO_MEMORY;
    st = inner->buffer_read(ctx, a->y_or_dx.buf, a->y_or_dx.offset, y, bytes);
    for (uint64_t i = 0; i < n && !st; i++) {
        if (es == 4) {
            uint32_t u;
            memcpy(&u, y + 4 * i, 4);
            u += 1000;
            memcpy(y + 4 * i, &u, 4);
        } else {
            uint16_t u;
            memcpy(&u, y + 2 * i, 2);
            u += 1000;
            memcpy(y + 2 * i, &u, 2);
        }
    }
    if (!st) st = inner->buffer_write(ctx, a->y_or_dx.buf, a->y_or_dx.offset, y, bytes);
    free(y);
    return st;
}
#endif

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t major, uint32_t minor) {
    (void)minor;
    if (major != AMPX_ABI_MAJOR) return NULL;
    if (!load_inner()) {
        /* still hand out a table: the probe explains what is missing */
        static ampx_backend_iface empty;
        empty       = (ampx_backend_iface){.size = sizeof empty, .abi_major = AMPX_ABI_MAJOR};
        empty.name  = "wrapper";
        empty.probe = probe;
        return &empty;
    }
    table              = *inner;
    ops                = *inner->ops;
    table.name         = "wrapper";
    table.probe        = probe;
    table.create       = create;
    table.buffer_alloc = alloc;
    table.buffer_free  = release;
    table.device_info  = info;
    table.ops          = &ops;
#ifdef WRAP_FORWARD
    table.name = "forward";
#endif
#ifdef WRAP_WRONG_MAJOR
    table.abi_major = 2;
    table.abi_minor = 7;
#endif
#ifdef WRAP_OLD_MINOR
    /* As if built against a minor version that had only the first two ops, and a backend
     * table that ends before the ABI 1.2 profile slots (set here, past the declared size,
     * so a loader that reads beyond it would see them). */
    ops.size            = (uint32_t)offsetof(ampx_backend_ops, add);
    table.abi_minor     = 1;
    table.size          = (uint32_t)offsetof(ampx_backend_iface, profile_begin);
    table.profile_begin = old_profile_begin;
    table.profile_end   = old_profile_end;
#endif
#ifdef WRAP_NO_NORMS
    ops.layernorm_fwd = NULL, ops.layernorm_bwd = NULL;
    ops.batchnorm_fwd = NULL, ops.batchnorm_bwd = NULL;
    ops.embedding_fwd = NULL, ops.embedding_bwd = NULL;
    ops.dropout = NULL, ops.permute = NULL;
#endif
#ifdef WRAP_CRASH
    ops.gemm = crash_gemm;
#endif
#ifdef WRAP_MISBEHAVE
    table.buffer_write = bad_write;
    table.buffer_read  = bad_read;
    ops.gemm           = bad_gemm;
#endif
#if defined(WRAP_FAILING) || defined(WRAP_NOOP)
#define SET(index, slot, ...) ops.slot = wrap_##slot;
    AMPX_OPS(SET)
#undef SET
#endif
#ifdef WRAP_PERTURB
    ops.layernorm_fwd = perturbed_layernorm;
#endif
#ifdef WRAP_MINOR_1_3
    table.abi_minor = 3;
    ops.size        = (uint32_t)offsetof(ampx_backend_ops, amp_pass);
    ops.amp_pass    = logged_amp_pass;
    ops.gemm        = logged_gemm;
#endif
    return &table;
}
