/* plugin.c — the CUDA backend's entry point: ampx_backend_entry, the probe, create/destroy
 * and their options, device_info, supports() and the op table (argument checks are
 * plugin_kit.h's; the status helpers every op shares are status.c's).
 *
 * The probe loads the NVIDIA driver library itself (dlopen of libcuda.so.1) and asks it for
 * its version and device count, so a machine with no driver, an old driver or no device gets
 * one line saying which, and nothing of the CUDA runtime is initialised. create() makes the
 * device current, creates one non-blocking stream and loads cuBLAS (libcublas.so.<major> of
 * the toolkit the plugin was built with) for GEMM; without cuBLAS GEMM runs on the native
 * kernel. Every op validates its arguments on the host exactly as the CPU backend does, then
 * enqueues kernels on the stream and returns without waiting.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define CUDA_PLUGIN_VERSION "0.1.0"

// ---------------------------------------------------------------------------------------
// Probe: the driver, its version, the device count, without the CUDA runtime

typedef int (*drv_init_fn)(unsigned);
typedef int (*drv_int_fn)(int *);
typedef int (*drv_err_fn)(int, const char **);
typedef int (*drv_dev_fn)(int *, int);
typedef int (*drv_attr_fn)(int *, int, int);
typedef int (*drv_name_fn)(char *, int, int);

#ifndef AMPX_CUDA_MIN_CC
#define AMPX_CUDA_MIN_CC 0 /* e.g. 80 for sm_80: set by the build from the architectures */
#endif

/* "<name>: <description>" of a driver error code. */
static void drv_error(void *lib, int code, char *out, size_t cap) {
    drv_err_fn name = (drv_err_fn)dlsym(lib, "cuGetErrorName");
    drv_err_fn str  = (drv_err_fn)dlsym(lib, "cuGetErrorString");
    const char *n = NULL, *s = NULL;
    if (name) name(code, &n);
    if (str) str(code, &s);
    snprintf(out, cap, "%s: %s", n ? n : "CUDA_ERROR", s ? s : "unknown error");
}

/* Returns AMPX_OK with the device count, or UNAVAILABLE with the reason in `reason`. */
static ampx_status drv_probe(char *reason, size_t cap, int *n_devices, int *driver_version) {
    char buf[256];
    *n_devices = 0, *driver_version = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(reason, cap, "no NVIDIA driver (%s)", err ? err : "libcuda.so.1 not found");
        return AMPX_ERR_UNAVAILABLE;
    }
    /* The driver stays loaded: the CUDA runtime would load it again at once. */
    drv_init_fn init = (drv_init_fn)dlsym(lib, "cuInit");
    drv_int_fn ver   = (drv_int_fn)dlsym(lib, "cuDriverGetVersion");
    drv_int_fn count = (drv_int_fn)dlsym(lib, "cuDeviceGetCount");
    if (!init || !ver || !count) {
        snprintf(reason, cap, "NVIDIA driver library libcuda.so.1 lacks cuInit/cuDeviceGetCount");
        return AMPX_ERR_UNAVAILABLE;
    }
    int r = ver(driver_version);
    if (r == 0 && *driver_version / 1000 < CUDART_VERSION / 1000) {
        snprintf(reason, cap,
                 "NVIDIA driver too old: it supports CUDA %d.%d, this plugin needs CUDA %d.x "
                 "(built with runtime %d.%d)",
                 *driver_version / 1000, *driver_version % 1000 / 10, CUDART_VERSION / 1000,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        return AMPX_ERR_UNAVAILABLE;
    }
    if ((r = init(0)) != 0) {
        drv_error(lib, r, buf, sizeof buf);
        snprintf(reason, cap, "cuInit failed: %s", buf);
        return AMPX_ERR_UNAVAILABLE;
    }
    if ((r = count(n_devices)) != 0) {
        drv_error(lib, r, buf, sizeof buf);
        snprintf(reason, cap, "cuDeviceGetCount failed: %s", buf);
        return AMPX_ERR_UNAVAILABLE;
    }
    if (*n_devices < 1) {
        snprintf(reason, cap, "no CUDA device (driver supports CUDA %d.%d)", *driver_version / 1000,
                 *driver_version % 1000 / 10);
        return AMPX_ERR_UNAVAILABLE;
    }
    /* Devices older than the oldest architecture compiled for cannot run a kernel. */
    drv_dev_fn dev_get   = (drv_dev_fn)dlsym(lib, "cuDeviceGet");
    drv_attr_fn attr     = (drv_attr_fn)dlsym(lib, "cuDeviceGetAttribute");
    drv_name_fn dev_name = (drv_name_fn)dlsym(lib, "cuDeviceGetName");
    if (AMPX_CUDA_MIN_CC > 0 && dev_get && attr && dev_name) {
        int usable = 0, major0 = 0, minor0 = 0;
        char name0[128] = "?";
        for (int i = 0; i < *n_devices; i++) {
            int dev = 0, major = 0, minor = 0;
            /* 75, 76: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR */
            if (dev_get(&dev, i) != 0 || attr(&major, 75, dev) != 0 || attr(&minor, 76, dev) != 0)
                continue;
            if (major * 10 + minor >= AMPX_CUDA_MIN_CC) usable++;
            if (i == 0) {
                major0 = major, minor0 = minor;
                dev_name(name0, (int)sizeof name0, dev);
            }
        }
        if (usable == 0) {
            snprintf(reason, cap,
                     "no CUDA device of compute capability %d.%d or newer (device 0: %s, %d.%d)",
                     AMPX_CUDA_MIN_CC / 10, AMPX_CUDA_MIN_CC % 10, name0, major0, minor0);
            return AMPX_ERR_UNAVAILABLE;
        }
    }
    snprintf(reason, cap, "%d CUDA device%s, driver supports CUDA %d.%d", *n_devices,
             *n_devices == 1 ? "" : "s", *driver_version / 1000, *driver_version % 1000 / 10);
    return AMPX_OK;
}

static ampx_status cu_probe(char *reason, size_t reason_cap) {
    char buf[512];
    int n, ver;
    ampx_status st = drv_probe(buf, sizeof buf, &n, &ver);
    if (reason && reason_cap > 0) snprintf(reason, reason_cap, "%s", buf);
    return st;
}

// ---------------------------------------------------------------------------------------
// Create, destroy

/* Parses "device=N" and "gemm=auto|cublas|native". Unknown keys and bad values are errors. */
static ampx_status parse_options(ampx_context *ctx, const ampx_host *h, int n_devices) {
    static const char *const paths[]    = {"auto", "cublas", "native", NULL};
    static const cu_gemm_path path_of[] = {CU_GEMM_AUTO, CU_GEMM_CUBLAS, CU_GEMM_NATIVE};
    for (uint32_t i = 0; i < h->n_options; i++) {
        ampx_kit_option o = {NULL, 0, NULL};
        unsigned long v   = 0;
        int pick          = 0;
        CU_TRY(ampx_kit_option_at(&ctx->kit, h, i, &o));
        if (ampx_kit_option_is(&o, "device")) {
            CU_TRY(ampx_kit_option_uint(&ctx->kit, &o, 0, (unsigned long)n_devices - 1, &v));
            ctx->device = (int)v;
        } else if (ampx_kit_option_is(&o, "gemm")) {
            CU_TRY(ampx_kit_option_choice(&ctx->kit, &o, paths, &pick));
            ctx->gemm_path = path_of[pick];
        } else {
            return ampx_kit_option_unknown(&ctx->kit, &o, "device, gemm");
        }
    }
    return AMPX_OK;
}

static void prof_destroy(ampx_context *ctx);

static void cu_destroy(ampx_context *ctx) {
    if (!ctx) return;
    if (cudaSetDevice(ctx->device) == cudaSuccess && ctx->stream) {
        (void)cudaStreamSynchronize(ctx->stream);
        prof_destroy(ctx);
        cu_blas_unload(ctx);
        (void)cudaStreamDestroy(ctx->stream);
    }
    free(ctx);
}

static ampx_status cu_create(const ampx_host *host, ampx_context **out) {
    ampx_host h;
    ampx_context tmp; /* for logging until the context is allocated */
    memset(&tmp, 0, sizeof tmp);
    CU_TRY(ampx_kit_begin_create(host, out, "cuda", cu_buffer_bytes, &h, &tmp.kit));
    char reason[512];
    int n_devices, driver_version;
    if (drv_probe(reason, sizeof reason, &n_devices, &driver_version) != AMPX_OK)
        return ampx_kit_fail(&tmp.kit, AMPX_ERR_UNAVAILABLE, "cuda: %s", reason);
    CU_TRY(parse_options(&tmp, &h, n_devices));

    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ampx_kit_fail(&tmp.kit, AMPX_ERR_NO_MEMORY, "cuda: out of memory for the context");
    *ctx      = tmp;
    int pools = 0;
    ampx_status st;
    if ((st = cu_check(ctx, "cuda: create", "cudaSetDevice", cudaSetDevice(ctx->device))) ||
        (st = cu_check(
             ctx, "cuda: create", "cudaDeviceGetAttribute",
             cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ctx->device))))
        goto fail;
    int cc_major = 0, cc_minor = 0;
    (void)cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, ctx->device);
    (void)cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, ctx->device);
    if (cc_major * 10 + cc_minor < AMPX_CUDA_MIN_CC) {
        st = cu_fail(ctx, AMPX_ERR_UNAVAILABLE,
                     "cuda: device %d has compute capability %d.%d; this plugin has code for "
                     "%d.%d and newer",
                     ctx->device, cc_major, cc_minor, AMPX_CUDA_MIN_CC / 10, AMPX_CUDA_MIN_CC % 10);
        goto fail;
    }
    if (!pools) {
        st = cu_fail(ctx, AMPX_ERR_UNAVAILABLE,
                     "cuda: device %d has no stream-ordered memory pools (needed for scratch)",
                     ctx->device);
        goto fail;
    }
    /* Scratch comes from the device's default pool; keep what it has grown to across
     * synchronisations rather than returning it to the driver at each one. */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if ((st = cu_check(ctx, "cuda: create", "cudaDeviceGetDefaultMemPool",
                       cudaDeviceGetDefaultMemPool(&pool, ctx->device))) ||
        (st = cu_check(ctx, "cuda: create", "cudaMemPoolSetAttribute",
                       cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep))))
        goto fail;
    if ((st = cu_check(ctx, "cuda: create", "cudaStreamCreateWithFlags",
                       cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking))))
        goto fail;
    if (ctx->gemm_path != CU_GEMM_NATIVE && cu_blas_load(ctx) != AMPX_OK) {
        if (ctx->gemm_path == CU_GEMM_CUBLAS) {
            st = cu_fail(ctx, AMPX_ERR_UNAVAILABLE, "cuda: gemm=cublas: %s", ctx->blas_note);
            goto fail;
        }
        cu_log(ctx, AMPX_LOG_WARN, "cuda: %s; GEMM uses the native kernel", ctx->blas_note);
    }
    *out = ctx;
    return AMPX_OK;
fail:
    if (ctx->stream) (void)cudaStreamDestroy(ctx->stream);
    free(ctx);
    return st;
}

// ---------------------------------------------------------------------------------------
// Device info

static ampx_status cu_device_info(ampx_context *ctx, ampx_device_info *info) {
    ampx_device_info d;
    CU_TRY(ampx_kit_begin_device_info(AMPX_KIT(ctx), info, &d));
    CU_TRY(cu_enter(ctx, "device_info"));
    struct cudaDeviceProp prop;
    CU_TRY(cu_check(ctx, "device_info", "cudaGetDeviceProperties",
                    cudaGetDeviceProperties(&prop, ctx->device)));
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);

    snprintf(d.name, sizeof d.name, "%.127s", prop.name);
    snprintf(d.description, sizeof d.description,
             "ampx CUDA backend %s, device %d, compute capability %d.%d, %d SMs, %.1f GiB, "
             "driver CUDA %d.%d, runtime %d.%d, gemm=%s (%s)",
             CUDA_PLUGIN_VERSION, ctx->device, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), drv / 1000, drv % 1000 / 10,
             rt / 1000, rt % 1000 / 10,
             ctx->gemm_path == CU_GEMM_NATIVE ? "native"
             : ctx->blas                      ? "cublas"
                                              : "native",
             cu_blas_describe(ctx));
    d.memory_bytes = (uint64_t)prop.totalGlobalMem;
    d.n_threads    = 0;
    return ampx_kit_end_device_info(info, &d);
}

// ---------------------------------------------------------------------------------------
// supports, synchronize

static int cu_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes, uint32_t n_dtypes,
                       uint32_t shape_class) {
    (void)ctx;
    /* GEMM's epilogue runs in the native kernel (gemm.c) with every dtype GEMM takes, and
     * GEMM_FP8's in the same kernel with every fp8 pair and C it takes */
    if ((op == AMPX_OP_GEMM || op == AMPX_OP_GEMM_FP8) && shape_class == AMPX_SHAPE_GEMM_EPILOGUE)
        shape_class = AMPX_SHAPE_ANY;
    return ampx_kit_supports(op, dtypes, n_dtypes, shape_class);
}

/* Waits for the stream; a fault of any earlier kernel surfaces here with its name. */
static ampx_status cu_synchronize(ampx_context *ctx) {
    if (!ctx) return AMPX_ERR_INVALID;
    CU_TRY(cu_enter(ctx, "synchronize"));
    return cu_check(ctx, "synchronize", "cudaStreamSynchronize",
                    cudaStreamSynchronize(ctx->stream));
}

// ---------------------------------------------------------------------------------------
// Device timestamps (ABI 1.2): a pair of CUDA events recorded on the stream around each op,
// read against one recorded by profile_begin.

static void prof_destroy(ampx_context *ctx) {
    for (uint32_t i = 0; ctx->prof.ev && i < 2 * ctx->prof.cap; i++)
        if (ctx->prof.ev[i]) (void)cudaEventDestroy(ctx->prof.ev[i]);
    if (ctx->prof.base) (void)cudaEventDestroy(ctx->prof.base);
    free(ctx->prof.ev);
    ctx->prof.ev   = NULL;
    ctx->prof.base = NULL;
    ctx->prof.cap = ctx->prof.n = 0;
    ctx->prof.on                = 0;
}

static ampx_status cu_profile_begin(ampx_context *ctx, uint32_t capacity) {
    if (!ctx) return AMPX_ERR_INVALID;
    CU_TRY(cu_enter(ctx, "profile_begin"));
    prof_destroy(ctx);
    ctx->prof.ev = calloc(2 * (size_t)capacity + 1, sizeof *ctx->prof.ev);
    if (!ctx->prof.ev) return cu_fail(ctx, AMPX_ERR_NO_MEMORY, "profile_begin: %u ops", capacity);
    ctx->prof.cap = capacity;
    ampx_status st =
        cu_check(ctx, "profile_begin", "cudaEventCreate", cudaEventCreate(&ctx->prof.base));
    for (uint32_t i = 0; !st && i < 2 * capacity; i++)
        st = cu_check(ctx, "profile_begin", "cudaEventCreate", cudaEventCreate(&ctx->prof.ev[i]));
    if (!st)
        st = cu_check(ctx, "profile_begin", "cudaEventRecord",
                      cudaEventRecord(ctx->prof.base, ctx->stream));
    if (st) {
        prof_destroy(ctx);
        return st;
    }
    ctx->prof.on = 1;
    return AMPX_OK;
}

static ampx_status cu_profile_end(ampx_context *ctx, uint64_t *ns, uint32_t cap, uint32_t *n_ops) {
    if (!ctx || !n_ops || (cap && !ns)) return AMPX_ERR_INVALID;
    *n_ops = 0;
    if (!ctx->prof.on) return AMPX_OK;
    CU_TRY(cu_enter(ctx, "profile_end"));
    ampx_status st =
        cu_check(ctx, "profile_end", "cudaStreamSynchronize", cudaStreamSynchronize(ctx->stream));
    for (uint32_t i = 0; !st && i < ctx->prof.n && i < cap; i++)
        for (int k = 0; k < 2 && !st; k++) {
            float ms      = 0;
            st            = cu_check(ctx, "profile_end", "cudaEventElapsedTime",
                                     cudaEventElapsedTime(&ms, ctx->prof.base, ctx->prof.ev[2 * i + k]));
            ns[2 * i + k] = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
        }
    if (!st) *n_ops = ctx->prof.n;
    prof_destroy(ctx);
    return st;
}

/* An op between two events while profiling (the kit's timed wrappers, AMPX_KIT_TIMED_OPS):
 * the first recorded on the way in, the second once it returned AMPX_OK; ops past the
 * capacity are not recorded. */
static inline int cu_prof_op_start(ampx_context *ctx, uint64_t *mark) {
    (void)mark;
    if (!ctx || !ctx->prof.on || ctx->prof.n >= ctx->prof.cap) return 0;
    (void)cudaEventRecord(ctx->prof.ev[2 * ctx->prof.n], ctx->stream);
    return 1;
}

static inline void cu_prof_op_end(ampx_context *ctx, uint64_t mark) {
    (void)mark;
    if (cudaEventRecord(ctx->prof.ev[2 * ctx->prof.n + 1], ctx->stream) == cudaSuccess)
        ctx->prof.n++;
}

// ---------------------------------------------------------------------------------------
// Native handles (ABI 1.3)

/* The device pointer and the context's stream, for NCCL. */
static ampx_status cu_buffer_native(ampx_context *ctx, const ampx_buffer *buf, uint32_t *kind,
                                    void **handle) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!buf || !kind || !handle)
        return cu_fail(ctx, AMPX_ERR_INVALID, "buffer_native: buf, kind or handle is NULL");
    *kind   = AMPX_NATIVE_CUDA;
    *handle = buf->data;
    return AMPX_OK;
}

static ampx_status cu_stream_native(ampx_context *ctx, uint32_t *kind, void **handle) {
    if (!ctx) return AMPX_ERR_INVALID;
    if (!kind || !handle)
        return cu_fail(ctx, AMPX_ERR_INVALID, "stream_native: kind or handle is NULL");
    *kind   = AMPX_NATIVE_CUDA;
    *handle = (void *)ctx->stream;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// The tables and the entry point (plugin_kit.h's kit/shell.h, from CU_OPS in cuda.h)

AMPX_KIT_TIMED_OPS(cu, CU_OPS)
AMPX_KIT_OP_TABLE(cu_ops, cu_timed, CU_OPS);
static const ampx_backend_iface cu_iface = {AMPX_KIT_IFACE(cu, "cuda", CUDA_PLUGIN_VERSION, cu_ops),
                                            AMPX_KIT_IFACE_PROFILE(cu), AMPX_KIT_IFACE_NATIVE(cu)};
AMPX_KIT_ENTRY(cu_iface)
