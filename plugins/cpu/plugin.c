/* plugin.c — the CPU backend's entry point: ampx_backend_entry, probe, create/destroy and
 * their options, device_info, supports() and the op table. Every op's argument checks and
 * the dtype table supports() answers from are plugin_kit.h's, shared with every backend.
 *
 * Ops run synchronously on the calling thread, helped by a small persistent thread pool;
 * the context's "stream" is therefore always drained and synchronize() only reports.
 */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN), _SC_PHYS_PAGES */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"

#define CPU_PLUGIN_VERSION "0.1.0"

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

#define CPU_ISA_CHOICES "auto, portable, avx2, avx512, avx512bf16, amx"

/* Parses "threads=N", "isa=auto|portable|avx2|avx512|avx512bf16|amx" (a cap on the ISA
 * path; the last isa= wins), "gemm_epilogue=0|1" (0: supports() does not claim GEMM's
 * epilogue, so the host runs ADD, ACT_FWD and BIAS_GRAD apart) and "attention=auto|0|1"
 * (whether supports() claims ATTN_FWD and ATTN_BWD; auto: on the AVX2 and AVX-512 paths,
 * where the fused kernel beats the composite; on the portable path it is correct but slower).
 * Unknown keys and bad values are errors. */
static ampx_status parse_options(const ampx_kit *kit, const ampx_host *h, unsigned *threads,
                                 cpu_isa *isa_cap, int *epilogue, int *attention) {
    for (uint32_t i = 0; i < h->n_options; i++) {
        ampx_kit_option o = {NULL, 0, NULL};
        unsigned long v   = 0;
        CPU_TRY(ampx_kit_option_at(kit, h, i, &o));
        if (ampx_kit_option_is(&o, "threads")) {
            CPU_TRY(ampx_kit_option_uint(kit, &o, 1, CPU_MAX_THREADS, &v));
            *threads = (unsigned)v;
        } else if (ampx_kit_option_is(&o, "isa")) {
            if (cpu_isa_parse(o.value, isa_cap) != 0)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID, "cpu: isa=%s: expected one of %s",
                                     o.value, CPU_ISA_CHOICES);
        } else if (ampx_kit_option_is(&o, "gemm_epilogue")) {
            CPU_TRY(ampx_kit_option_uint(kit, &o, 0, 1, &v));
            *epilogue = (int)v;
        } else if (ampx_kit_option_is(&o, "attention")) {
            if (strcmp(o.value, "auto") && strcmp(o.value, "0") && strcmp(o.value, "1"))
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "cpu: attention=%s: expected auto, 0 or 1", o.value);
            *attention = !strcmp(o.value, "auto") ? -1 : o.value[0] - '0';
        } else {
            return ampx_kit_option_unknown(kit, &o, "threads, isa, gemm_epilogue, attention");
        }
    }
    return AMPX_OK;
}

static void cpu_destroy(ampx_context *ctx) {
    if (!ctx) return;
    cpu_pool_stop(&ctx->pool);
    cpu_free_workspaces(ctx);
    free(ctx->prof.ns);
    free(ctx);
}

static ampx_status cpu_create(const ampx_host *host, ampx_context **out) {
    ampx_host h;
    ampx_kit kit;
    CPU_TRY(ampx_kit_begin_create(host, out, "cpu", cpu_buffer_bytes, &h, &kit));

    unsigned threads = online_cpus();
    cpu_isa env_cap = CPU_ISA_COUNT - 1, opt_cap = CPU_ISA_COUNT - 1;
    const char *env = getenv("AMPX_CPU_ISA");
    if (env && *env && cpu_isa_parse(env, &env_cap) != 0)
        return ampx_kit_fail(&kit, AMPX_ERR_INVALID, "cpu: AMPX_CPU_ISA=%s: expected one of %s",
                             env, CPU_ISA_CHOICES);
    int epilogue = 1, attention = -1;
    CPU_TRY(parse_options(&kit, &h, &threads, &opt_cap, &epilogue, &attention));
    /* Both caps apply: the environment can only lower what the options allow. */
    cpu_isa cap = env_cap < opt_cap ? env_cap : opt_cap;
    const cpu_kernels *kern;
    int amx_denied = 0;
    cpu_isa_select(cap, &kern, &amx_denied);

    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ampx_kit_fail(&kit, AMPX_ERR_NO_MEMORY, "cpu: out of memory for the context");
    ctx->kit        = kit;
    ctx->n_threads  = threads;
    ctx->kern       = kern;
    ctx->isa_cap    = cap;
    ctx->amx_denied = amx_denied;
    ctx->epilogue   = epilogue;
    ctx->attention  = attention < 0 ? kern->isa >= CPU_ISA_AVX2 : attention;
    ctx->thread_ws  = calloc(threads, sizeof *ctx->thread_ws);
    if (!ctx->thread_ws) {
        free(ctx);
        return ampx_kit_fail(&kit, AMPX_ERR_NO_MEMORY, "cpu: out of memory for the context");
    }
    ampx_status st = cpu_pool_start(&ctx->pool, threads - 1);
    if (st != AMPX_OK) {
        free(ctx->thread_ws);
        free(ctx);
        return ampx_kit_fail(&kit, st, "cpu: cannot start %u worker threads", threads - 1);
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
    ampx_device_info d;
    CPU_TRY(ampx_kit_begin_device_info(AMPX_KIT(ctx), info, &d));
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
    return ampx_kit_end_device_info(info, &d);
}

// ---------------------------------------------------------------------------------------
// supports, synchronize

static int cpu_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes, uint32_t n_dtypes,
                        uint32_t shape_class) {
    /* GEMM's epilogue (gemm_epilogue.c) runs with every dtype GEMM takes, unless
     * gemm_epilogue=0 */
    if ((op == AMPX_OP_GEMM || op == AMPX_OP_GEMM_FP8) && shape_class == AMPX_SHAPE_GEMM_EPILOGUE) {
        if (ctx && !ctx->epilogue) return 0;
        shape_class = AMPX_SHAPE_ANY;
    }
    /* the fused attention where it pays (option attention; auto: the AVX2 and AVX-512 paths) */
    if ((op == AMPX_OP_ATTN_FWD || op == AMPX_OP_ATTN_BWD) && ctx && !ctx->attention) return 0;
    return ampx_kit_supports(op, dtypes, n_dtypes, shape_class);
}

static ampx_status cpu_synchronize(ampx_context *ctx) {
    /* Every op ran to completion before it returned; there is no deferred error. */
    return ctx ? AMPX_OK : AMPX_ERR_INVALID;
}

// ---------------------------------------------------------------------------------------
// Device timestamps (ABI 1.2): every op runs to completion before it returns, so its start
// and end on the host's monotonic clock are the device's.

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static ampx_status cpu_profile_begin(ampx_context *ctx, uint32_t capacity) {
    if (!ctx) return AMPX_ERR_INVALID;
    uint64_t *ns = realloc(ctx->prof.ns, 2 * sizeof *ns * ((size_t)capacity + 1));
    if (!ns) return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "profile_begin: %u ops", capacity);
    ctx->prof.ns  = ns;
    ctx->prof.cap = capacity;
    ctx->prof.n   = 0;
    ctx->prof.t0  = now_ns();
    ctx->prof.on  = 1;
    return AMPX_OK;
}

static ampx_status cpu_profile_end(ampx_context *ctx, uint64_t *ns, uint32_t cap, uint32_t *n_ops) {
    if (!ctx || !n_ops || (cap && !ns)) return AMPX_ERR_INVALID;
    uint32_t n = ctx->prof.on ? ctx->prof.n : 0;
    for (uint32_t i = 0; i < n && i < cap; i++)
        ns[2 * i] = ctx->prof.ns[2 * i], ns[2 * i + 1] = ctx->prof.ns[2 * i + 1];
    *n_ops       = n;
    ctx->prof.on = 0;
    return AMPX_OK;
}

/* An op's span while profiling (the kit's timed wrappers, AMPX_KIT_TIMED_OPS): its start on
 * the way in, its end once it returned AMPX_OK; ops past the capacity are not recorded. */
static inline int cpu_prof_op_start(ampx_context *ctx, uint64_t *t0) {
    if (!ctx || !ctx->prof.on) return 0;
    *t0 = now_ns();
    return 1;
}

static inline void cpu_prof_op_end(ampx_context *ctx, uint64_t t0) {
    if (ctx->prof.n < ctx->prof.cap) {
        ctx->prof.ns[2 * ctx->prof.n]     = t0 - ctx->prof.t0;
        ctx->prof.ns[2 * ctx->prof.n + 1] = now_ns() - ctx->prof.t0;
        ctx->prof.n++;
    }
}

// ---------------------------------------------------------------------------------------
// Native handles (ABI 1.3): buffers are host memory, and every op has completed when its
// slot returns.

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

// ---------------------------------------------------------------------------------------
// The tables and the entry point (plugin_kit.h's kit/shell.h, from CPU_OPS in cpu.h)

AMPX_KIT_TIMED_OPS(cpu, CPU_OPS)
AMPX_KIT_OP_TABLE(cpu_ops, cpu_timed, CPU_OPS);
static const ampx_backend_iface cpu_iface = {
    AMPX_KIT_IFACE(cpu, "cpu", CPU_PLUGIN_VERSION, cpu_ops), AMPX_KIT_IFACE_PROFILE(cpu),
    AMPX_KIT_IFACE_NATIVE(cpu)};
AMPX_KIT_ENTRY(cpu_iface)
