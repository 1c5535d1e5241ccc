/* plugin.c — the CPU backend's entry point: ampx_backend_entry, probe, create/destroy and
 * their options, device_info, supports() and the op table, plus the argument checks every
 * op shares (so an op and supports() read the same dtype table and cannot disagree).
 *
 * Ops run synchronously on the calling thread, helped by a small persistent thread pool;
 * the context's "stream" is therefore always drained and synchronize() only reports.
 */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN), _SC_PHYS_PAGES */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

#define CPU_PLUGIN_VERSION "0.1.0"

// ---------------------------------------------------------------------------------------
// Logging and argument checks

ampx_status cpu_fail(ampx_context *ctx, ampx_status st, const char *fmt, ...) {
    if (ctx && ctx->log) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        ctx->log(ctx->log_user, AMPX_LOG_ERROR, msg);
    }
    return st;
}

#define CHECKS_FN(name) cpu_##name
#define CHECKS_TRY CPU_TRY
#include "../common/arg_checks.inc"
#undef CHECKS_FN
#undef CHECKS_TRY

// ---------------------------------------------------------------------------------------
// Probe, create, destroy

static ampx_status cpu_probe(char *reason, size_t reason_cap) {
    if (reason && reason_cap > 0) snprintf(reason, reason_cap, "CPU backend is always usable");
    return AMPX_OK;
}

static unsigned online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    if (n > CPU_MAX_THREADS) return CPU_MAX_THREADS;
    return (unsigned)n;
}

/* Reads the host struct field by field, honouring its size (rule 2). */
static void read_host(const ampx_host *host, ampx_host *h) {
    memset(h, 0, sizeof *h);
    uint32_t size = host->size;
    memcpy(h, host, size < sizeof *h ? size : sizeof *h);
}

#define CPU_ISA_CHOICES "auto, portable, avx2, avx512, avx512bf16, amx"

/* Parses "threads=N" and "isa=auto|portable|avx2|avx512|avx512bf16|amx" (a cap on the ISA
 * path; the last isa= wins). Unknown keys and bad values are errors. */
static ampx_status parse_options(ampx_context *ctx, const ampx_host *h, unsigned *threads,
                                 cpu_isa *isa_cap) {
    if (h->n_options > 0 && !h->options)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "cpu: %u options but a NULL options array",
                        h->n_options);
    for (uint32_t i = 0; i < h->n_options; i++) {
        const char *opt = h->options[i];
        if (!opt) return cpu_fail(ctx, AMPX_ERR_INVALID, "cpu: option %u is NULL", i);
        const char *eq = strchr(opt, '=');
        if (!eq) return cpu_fail(ctx, AMPX_ERR_INVALID, "cpu: option '%s' is not key=value", opt);
        size_t klen     = (size_t)(eq - opt);
        const char *val = eq + 1;
        if (klen == 7 && strncmp(opt, "threads", 7) == 0) {
            char *end       = NULL;
            unsigned long v = 0;
            if (val[0] >= '0' && val[0] <= '9') v = strtoul(val, &end, 10);
            if (!end || *end != '\0' || v < 1 || v > CPU_MAX_THREADS)
                return cpu_fail(ctx, AMPX_ERR_INVALID,
                                "cpu: threads=%s: expected an integer in [1, %d]", val,
                                CPU_MAX_THREADS);
            *threads = (unsigned)v;
        } else if (klen == 3 && strncmp(opt, "isa", 3) == 0) {
            if (cpu_isa_parse(val, isa_cap) != 0)
                return cpu_fail(ctx, AMPX_ERR_INVALID, "cpu: isa=%s: expected one of %s", val,
                                CPU_ISA_CHOICES);
        } else {
            return cpu_fail(ctx, AMPX_ERR_INVALID,
                            "cpu: unknown option '%.*s' (known: threads, isa)", (int)klen, opt);
        }
    }
    return AMPX_OK;
}

static void cpu_destroy(ampx_context *ctx) {
    if (!ctx) return;
    cpu_pool_stop(&ctx->pool);
    cpu_free_workspaces(ctx);
    free(ctx);
}

static ampx_status cpu_create(const ampx_host *host, ampx_context **out) {
    if (out) *out = NULL;
    if (!host) return AMPX_ERR_INVALID; /* nowhere to log */
    ampx_host h;
    read_host(host, &h);

    ampx_context tmp = {.log = h.log, .log_user = h.log_user}; /* for logging until alloc */
    if (!out) return cpu_fail(&tmp, AMPX_ERR_INVALID, "cpu: create: out is NULL");
    if (h.abi_major != AMPX_ABI_MAJOR)
        return cpu_fail(&tmp, AMPX_ERR_UNSUPPORTED,
                        "cpu: host speaks ABI %u.%u, this plugin ABI %d.%d", h.abi_major,
                        h.abi_minor, AMPX_ABI_MAJOR, AMPX_ABI_MINOR);

    unsigned threads = online_cpus();
    cpu_isa env_cap = CPU_ISA_COUNT - 1, opt_cap = CPU_ISA_COUNT - 1;
    const char *env = getenv("AMPX_CPU_ISA");
    if (env && *env && cpu_isa_parse(env, &env_cap) != 0)
        return cpu_fail(&tmp, AMPX_ERR_INVALID, "cpu: AMPX_CPU_ISA=%s: expected one of %s", env,
                        CPU_ISA_CHOICES);
    CPU_TRY(parse_options(&tmp, &h, &threads, &opt_cap));
    /* Both caps apply: the environment can only lower what the options allow. */
    cpu_isa cap = env_cap < opt_cap ? env_cap : opt_cap;
    const cpu_kernels *kern;
    int amx_denied = 0;
    cpu_isa_select(cap, &kern, &amx_denied);

    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return cpu_fail(&tmp, AMPX_ERR_NO_MEMORY, "cpu: out of memory for the context");
    ctx->log        = h.log;
    ctx->log_user   = h.log_user;
    ctx->n_threads  = threads;
    ctx->kern       = kern;
    ctx->isa_cap    = cap;
    ctx->amx_denied = amx_denied;
    ctx->thread_ws  = calloc(threads, sizeof *ctx->thread_ws);
    if (!ctx->thread_ws) {
        free(ctx);
        return cpu_fail(&tmp, AMPX_ERR_NO_MEMORY, "cpu: out of memory for the context");
    }
    ampx_status st = cpu_pool_start(&ctx->pool, threads - 1);
    if (st != AMPX_OK) {
        free(ctx->thread_ws);
        free(ctx);
        return cpu_fail(&tmp, st, "cpu: cannot start %u worker threads", threads - 1);
    }
    *out = ctx;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Device info

/* The "model name" line of /proc/cpuinfo, or "CPU". */
static void cpu_model_name(char *out, size_t cap) {
    snprintf(out, cap, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *s = colon + 1;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t len = strlen(s);
        while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
            s[--len] = '\0';
        if (len > 0) snprintf(out, cap, "%s", s);
        break;
    }
    fclose(f);
}

static ampx_status cpu_device_info(ampx_context *ctx, ampx_device_info *info) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!info) return cpu_fail(ctx, AMPX_ERR_INVALID, "device_info: info is NULL");
    uint32_t size = info->size;
    if (size < sizeof(uint32_t))
        return cpu_fail(ctx, AMPX_ERR_INVALID, "device_info: info size %u too small", size);

    ampx_device_info d;
    memset(&d, 0, sizeof d);
    char model[96];
    cpu_model_name(model, sizeof model);
    snprintf(d.name, sizeof d.name, "%s (%u thread%s)", model, ctx->n_threads,
             ctx->n_threads == 1 ? "" : "s");
    char feats[128];
    cpu_features_str(cpu_detect(), feats, sizeof feats);
    snprintf(d.description, sizeof d.description,
             "ampx CPU backend %s, isa=%s (cap %s; cpu features %s%s), %u threads (%u pool "
             "workers), f32 accumulation, cache-blocked packed GEMM",
             CPU_PLUGIN_VERSION, ctx->kern->name,
             ctx->isa_cap == CPU_ISA_COUNT - 1 ? "auto" : cpu_isa_name(ctx->isa_cap), feats,
             ctx->amx_denied ? "; AMX tile state refused by the OS" : "", ctx->n_threads,
             ctx->pool.n_workers);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    d.memory_bytes = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : 0;
    d.n_threads    = ctx->n_threads;

    /* Write only what lies within the host's struct; keep its size field. */
    size_t n = size < sizeof d ? size : sizeof d;
    memcpy((char *)info + sizeof(uint32_t), (char *)&d + sizeof(uint32_t), n - sizeof(uint32_t));
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// supports, synchronize

static int cpu_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes, uint32_t n_dtypes,
                        uint32_t shape_class) {
    (void)ctx;
    if (op >= AMPX_OP_COUNT || shape_class != AMPX_SHAPE_ANY) return 0;
    return cpu_dtypes_ok(op, dtypes, n_dtypes);
}

static ampx_status cpu_synchronize(ampx_context *ctx) {
    /* Every op ran to completion before it returned; there is no deferred error. */
    return ctx ? AMPX_OK : AMPX_ERR_INVALID;
}

// ---------------------------------------------------------------------------------------
// The tables

static const ampx_backend_ops cpu_ops = {
    .size          = sizeof(ampx_backend_ops),
    .gemm          = cpu_gemm,
    .cast          = cpu_cast,
    .add           = cpu_add,
    .mul           = cpu_mul,
    .scale         = cpu_scale,
    .bias_grad     = cpu_bias_grad,
    .act_fwd       = cpu_act_fwd,
    .act_bwd       = cpu_act_bwd,
    .softmax_fwd   = cpu_softmax_fwd,
    .softmax_bwd   = cpu_softmax_bwd,
    .softmax_xent  = cpu_softmax_xent,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .batchnorm_fwd = cpu_batchnorm_fwd,
    .batchnorm_bwd = cpu_batchnorm_bwd,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .reduce        = cpu_reduce,
    .sum_squares   = cpu_sum_squares,
    .unscale_check = cpu_unscale_check,
    .grad_stats    = cpu_grad_stats,
    .scaler_update = cpu_scaler_update,
    .sgd           = cpu_sgd,
    .adamw         = cpu_adamw,
    .dropout       = cpu_dropout,
    .permute       = cpu_permute,
};

/* ABI 1.3: buffers are host memory, and every op has completed when its slot returns. */
static ampx_status cpu_buffer_native(ampx_context *ctx, const ampx_buffer *buf, uint32_t *kind,
                                     void **handle) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!buf || !kind || !handle)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "buffer_native: buf, kind or handle is NULL");
    *kind   = AMPX_NATIVE_HOST;
    *handle = buf->data;
    return AMPX_OK;
}

static ampx_status cpu_stream_native(ampx_context *ctx, uint32_t *kind, void **handle) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!kind || !handle)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "stream_native: kind or handle is NULL");
    *kind   = AMPX_NATIVE_HOST;
    *handle = NULL;
    return AMPX_OK;
}

static const ampx_backend_iface cpu_iface = {
    .size         = sizeof(ampx_backend_iface),
    .abi_major    = AMPX_ABI_MAJOR,
    .abi_minor    = AMPX_ABI_MINOR,
    .name         = "cpu",
    .version      = CPU_PLUGIN_VERSION,
    .probe        = cpu_probe,
    .create       = cpu_create,
    .destroy      = cpu_destroy,
    .device_info  = cpu_device_info,
    .supports     = cpu_supports,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free  = cpu_buffer_free,
    .buffer_write = cpu_buffer_write,
    .buffer_read  = cpu_buffer_read,
    .buffer_copy  = cpu_buffer_copy,
    .buffer_fill  = cpu_buffer_fill,
    .synchronize  = cpu_synchronize,
    .ops          = &cpu_ops,

    /* ABI 1.3 */
    .buffer_native = cpu_buffer_native,
    .stream_native = cpu_stream_native,
};

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor);

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor) {
    (void)host_abi_minor; /* minors are append-only: a newer host reads what we have */
    if (host_abi_major != AMPX_ABI_MAJOR) return NULL;
    return &cpu_iface;
}
