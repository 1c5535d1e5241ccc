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

ampx_status cpu_take_args(ampx_context *ctx, const char *opname, const void *args, void *local,
                          size_t local_size) {
    if (!ctx) return AMPX_ERR_INVALID; /* nowhere to log */
    if (!args) return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: args is NULL", opname);
    uint32_t size;
    memcpy(&size, args, sizeof size);
    if (size < sizeof(uint32_t))
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: args size %u too small", opname, size);
    memset(local, 0, local_size);
    memcpy(local, args, size < local_size ? size : local_size);
    return AMPX_OK;
}

static int is_float(ampx_dtype dt) {
    return ampx_dtype_is_float(dt);
}

static int all_float(const ampx_dtype *dt, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!is_float(dt[i])) return 0;
    return 1;
}

/* The dtype table, per op heading in backend.h. */
int cpu_dtypes_ok(uint32_t op, const ampx_dtype *dt, uint32_t n) {
    if (n > 0 && !dt) return 0;
    switch (op) {
    case AMPX_OP_GEMM: return n == 3 && all_float(dt, 3); /* {A, B, C} */
    case AMPX_OP_CAST: return n == 2 && all_float(dt, 2); /* {src, dst} */
    case AMPX_OP_ADD:                                     /* {a, b, y} */
    case AMPX_OP_MUL: return n == 3 && all_float(dt, 3);
    case AMPX_OP_SCALE: return n == 2 && all_float(dt, 2);         /* {x, y} */
    case AMPX_OP_BIAS_GRAD: return n == 2 && all_float(dt, 2);     /* {dy, db} */
    case AMPX_OP_ACT_FWD: return n == 2 && all_float(dt, 2);       /* {x, y} */
    case AMPX_OP_ACT_BWD: return n == 3 && all_float(dt, 3);       /* {x, dy, dx} */
    case AMPX_OP_SOFTMAX_FWD: return n == 2 && all_float(dt, 2);   /* {x, y} */
    case AMPX_OP_SOFTMAX_BWD: return n == 3 && all_float(dt, 3);   /* {y, dy, dx} */
    case AMPX_OP_SOFTMAX_XENT: return n == 2 && all_float(dt, 2);  /* {logits, dlogits} */
    case AMPX_OP_LAYERNORM_FWD: return n == 2 && all_float(dt, 2); /* {x, y} */
    case AMPX_OP_LAYERNORM_BWD: return n == 3 && all_float(dt, 3); /* {x, dy, dx} */
    case AMPX_OP_BATCHNORM_FWD: return n == 2 && all_float(dt, 2); /* {x, y} */
    case AMPX_OP_BATCHNORM_BWD: return n == 3 && all_float(dt, 3); /* {x, dy, dx} */
    case AMPX_OP_EMBEDDING_FWD: return n == 2 && all_float(dt, 2); /* {table, y} */
    case AMPX_OP_EMBEDDING_BWD:                                    /* {dy, dtable f32} */
        return n == 2 && is_float(dt[0]) && dt[1] == AMPX_F32;
    case AMPX_OP_REDUCE: return n == 2 && all_float(dt, 2);    /* {x, y} */
    case AMPX_OP_SUM_SQUARES:                                  /* {x} */
    case AMPX_OP_UNSCALE_CHECK:                                /* {g} */
    case AMPX_OP_GRAD_STATS: return n == 1 && is_float(dt[0]); /* {g} */
    case AMPX_OP_SCALER_UPDATE: return n == 0;                 /* no dtypes */
    case AMPX_OP_SGD:                                          /* {grad} */
    case AMPX_OP_ADAMW: return n == 1 && is_float(dt[0]);
    default: return 0;
    }
}

ampx_status cpu_check_dtypes(ampx_context *ctx, const char *opname, uint32_t op,
                             const ampx_dtype *dt, uint32_t n) {
    if (cpu_dtypes_ok(op, dt, n)) return AMPX_OK;
    char list[128] = "";
    for (uint32_t i = 0; i < n && strlen(list) + 12 < sizeof list; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, ampx_dtype_name(dt[i]));
    }
    return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "%s: unsupported dtypes {%s}", opname, list);
}

ampx_status cpu_check_tensor(ampx_context *ctx, const char *opname, const char *name,
                             const ampx_tensor *t, uint64_t n_elems, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: %s is a null buffer", opname, name);
    }
    size_t es = ampx_dtype_size(t->dtype);
    if (es == 0)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: %s has unknown dtype %d", opname, name,
                        (int)t->dtype);
    if (t->offset % es != 0)
        return cpu_fail(ctx, AMPX_ERR_INVALID,
                        "%s: %s offset %llu is not a multiple of the %s size %zu", opname, name,
                        (unsigned long long)t->offset, ampx_dtype_name(t->dtype), es);
    uint64_t bytes, end;
    if (cpu_mul_u64(n_elems, es, &bytes) || __builtin_add_overflow(t->offset, bytes, &end) ||
        end > t->buf->bytes)
        return cpu_fail(ctx, AMPX_ERR_INVALID,
                        "%s: %s of %llu %s elements at offset %llu overruns its buffer of %llu "
                        "bytes",
                        opname, name, (unsigned long long)n_elems, ampx_dtype_name(t->dtype),
                        (unsigned long long)t->offset, (unsigned long long)t->buf->bytes);
    return AMPX_OK;
}

ampx_status cpu_check_tensor_dt(ampx_context *ctx, const char *opname, const char *name,
                                const ampx_tensor *t, ampx_dtype want, uint64_t n_elems,
                                int optional) {
    if (t->buf && t->dtype != want)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: %s must be %s, not %s", opname, name,
                        ampx_dtype_name(want), ampx_dtype_name(t->dtype));
    return cpu_check_tensor(ctx, opname, name, t, n_elems, optional);
}

ampx_status cpu_check_scalars(ampx_context *ctx, const char *opname, const ampx_tensor *t,
                              int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: scalars is a null buffer", opname);
    }
    uint64_t end;
    if (t->offset % 4 != 0)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: scalars offset %llu is not 4-byte aligned",
                        opname, (unsigned long long)t->offset);
    if (__builtin_add_overflow(t->offset, (uint64_t)sizeof(ampx_scalars), &end) ||
        end > t->buf->bytes)
        return cpu_fail(ctx, AMPX_ERR_INVALID,
                        "%s: scalars block (%zu bytes) at offset %llu overruns its buffer of "
                        "%llu bytes",
                        opname, sizeof(ampx_scalars), (unsigned long long)t->offset,
                        (unsigned long long)t->buf->bytes);
    return AMPX_OK;
}

ampx_status cpu_check_list(ampx_context *ctx, const char *opname, const char *name,
                           const ampx_tensor_list *l) {
    if (l->count == 0) return AMPX_OK;
    if (!l->tensors || !l->n_elems)
        return cpu_fail(ctx, AMPX_ERR_INVALID, "%s: %s has %u tensors but a NULL %s", opname, name,
                        l->count, l->tensors ? "n_elems" : "tensors array");
    for (uint32_t t = 0; t < l->count; t++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%u]", name, t);
        if (l->tensors[t].buf && !is_float(l->tensors[t].dtype))
            return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "%s: %s has unsupported dtype %s", opname,
                            what, ampx_dtype_name(l->tensors[t].dtype));
        CPU_TRY(cpu_check_tensor(ctx, opname, what, &l->tensors[t], l->n_elems[t], 0));
    }
    return AMPX_OK;
}

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
};

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
};

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor);

AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,
                                                                uint32_t host_abi_minor) {
    (void)host_abi_minor; /* minors are append-only: a newer host reads what we have */
    if (host_abi_major != AMPX_ABI_MAJOR) return NULL;
    return &cpu_iface;
}
