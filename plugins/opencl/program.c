/* program.c — the OpenCL programs: the main one, built once per context from the kernels
 * embedded at build time (kernels/opencl/, one .cl file per op group), and the typed ones
 * (typed.c), their compiled binaries cached on disk so that later processes on the same
 * device skip the compiler: the main program's at once; on CPU devices a typed or tiled
 * GEMM program's only the second time a process compiles it (a `.once` marker records the
 * first), since asking PoCL for a binary generates the code again.
 *
 * Cache key: FNV-1a 64 over platform name, device name, device version, driver version,
 * build options and every source string, so a new driver or a changed kernel never loads a
 * stale binary. The file is <cache dir>/<key>.bin, written to a temporary name and renamed,
 * so concurrent processes never see half a file. A cache file that fails to load or build
 * is ignored and compiled from source (and overwritten when this build stores its binary: at
 * once for the main program, on the second compile for the others): the cache can only make
 * creation faster, never fail it.
 *
 * Once loaded, the program's view of the scalars block is checked against backend.h's
 * (check_scalars_layout), so a layout mismatch is one clear error at create().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ocl.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t ocl_cache_key(const ampx_context *ctx, const char *options, const ocl_source *src) {
    uint64_t h          = 0xcbf29ce484222325ull;
    const char *parts[] = {ctx->platform_name, ctx->device_name, ctx->device_version,
                           ctx->driver_version, options};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = fnv1a(h, parts[i], strlen(parts[i]) + 1);
    for (unsigned i = 0; i < src->n; i++)
        h = fnv1a(h, src->text[i], src->size[i]);
    return h;
}

int ocl_make_dirs(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

void *ocl_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *data = NULL;
    long n     = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    *size = data ? (size_t)n : 0;
    return data;
}

/* Builds prog; on failure logs the device's build log. */
static ampx_status build(ampx_context *ctx, cl_program prog, const char *options,
                         const char *what) {
    cl_int err = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
    size_t len = 0;
    clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
    char *log = malloc(len + 1);
    if (log) {
        log[0] = '\0';
        clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, len, log, NULL);
        log[len] = '\0';
    }
    if (err == CL_SUCCESS) { /* warnings, if any, are for kernel authors: DEBUG */
        if (log && log[strspn(log, " \t\r\n")])
            ocl_log(ctx, AMPX_LOG_DEBUG, "opencl: build log: %s", log);
        free(log);
        return AMPX_OK;
    }
    ampx_status st = ocl_fail(
        ctx, ocl_status_of(err) == AMPX_ERR_NO_MEMORY ? AMPX_ERR_NO_MEMORY : AMPX_ERR_DEVICE,
        "opencl: clBuildProgram(%s) on %s: %s; build log: %s", what, ctx->device_name,
        ocl_err_name(err), log && log[0] ? log : "(empty)");
    free(log);
    return st;
}

static cl_program load_from_cache(ampx_context *ctx, const char *path, const char *options) {
    size_t size        = 0;
    unsigned char *bin = ocl_read_file(path, &size);
    if (!bin) return NULL;
    const unsigned char *bins[1] = {bin};
    cl_int status                = CL_SUCCESS, err;
    cl_program prog =
        clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &size, bins, &status, &err);
    free(bin);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
        ocl_log(ctx, AMPX_LOG_WARN, "opencl: cache file %s unusable (%s); rebuilding", path,
                ocl_err_name(err != CL_SUCCESS ? err : status));
        if (prog) clReleaseProgram(prog);
        return NULL;
    }
    if (clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
        ocl_log(ctx, AMPX_LOG_WARN, "opencl: cache file %s does not build; rebuilding", path);
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

static void store_to_cache(ampx_context *ctx, cl_program prog, const char *path) {
    if (ocl_make_dirs(ctx->cache_dir) != 0) {
        ocl_log(ctx, AMPX_LOG_WARN, "opencl: cannot create cache directory %s: %s", ctx->cache_dir,
                strerror(errno));
        return;
    }
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
        size == 0)
        return;
    unsigned char *bin = malloc(size);
    if (!bin) return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        int ok  = f && fwrite(bin, 1, size, f) == size;
        if (f && fclose(f) != 0) ok = 0;
        if (ok && rename(tmp, path) == 0)
            ocl_log(ctx, AMPX_LOG_DEBUG, "opencl: wrote program cache %s (%zu bytes)", path, size);
        else {
            ocl_log(ctx, AMPX_LOG_WARN, "opencl: cannot write program cache %s", path);
            unlink(tmp);
        }
    }
    free(bin);
}

// ---------------------------------------------------------------------------------------
// The scalars layout: the kernels read and write the block through kernel_math.h's
// ampx_scalars, laid out by the device's compiler; scalars_layout (scalars.cl) reports the
// offsets it gave each field, which must be backend.h's.

#define SCALARS_OFFSET(type, name) offsetof(ampx_scalars, name),
#define SCALARS_NAME(type, name) "offsetof(" #name ")",
static const size_t scalars_offsets[] = {
    AMPX_KM_SCALARS_FIELDS(SCALARS_OFFSET) offsetof(ampx_scalars, reserved), sizeof(ampx_scalars)};
static const char *const scalars_names[] = {
    AMPX_KM_SCALARS_FIELDS(SCALARS_NAME) "offsetof(reserved)", "sizeof"};
#define SCALARS_TYPE(type, name)                                                                   \
    AMPX_STATIC_ASSERT(_Generic(((ampx_scalars *)0)->name, type : 1, default : 0),                 \
                       "AMPX_KM_SCALARS_FIELDS gives " #name " backend.h's type");
AMPX_KM_SCALARS_FIELDS(SCALARS_TYPE)
#undef SCALARS_OFFSET
#undef SCALARS_NAME
#undef SCALARS_TYPE
#define N_SCALARS_OFFSETS (sizeof scalars_offsets / sizeof scalars_offsets[0])

/* Runs scalars_layout once and compares; a difference is one ERROR naming the first field
 * that moved. */
static ampx_status check_scalars_layout(ampx_context *ctx) {
    cl_int err, dev[N_SCALARS_OFFSETS];
    cl_mem blk = NULL, out = NULL;
    cl_kernel k = clCreateKernel(ctx->program, "scalars_layout", &err);
    if (err == CL_SUCCESS)
        blk = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, sizeof(ampx_scalars), NULL, &err);
    if (err == CL_SUCCESS) out = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, sizeof dev, NULL, &err);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof blk, &blk);
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof out, &out);
    size_t one = 1;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &one, &one, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, out, CL_TRUE, 0, sizeof dev, dev, 0, NULL, NULL);
    if (out) clReleaseMemObject(out);
    if (blk) clReleaseMemObject(blk);
    if (k) clReleaseKernel(k);
    if (err != CL_SUCCESS) return ocl_check(ctx, err, "opencl: create", "scalars_layout");
    for (size_t i = 0; i < N_SCALARS_OFFSETS; i++)
        if ((size_t)dev[i] != scalars_offsets[i])
            return ocl_fail(ctx, AMPX_ERR_DEVICE,
                            "opencl: the program's ampx_scalars (kernel_math.h) does not match "
                            "backend.h's on %s: %s is %d there, %zu in backend.h",
                            ctx->device_name, scalars_names[i], (int)dev[i], scalars_offsets[i]);
    return AMPX_OK;
}

/* OCL_CACHE_TWO, for a program just compiled: 1 when an earlier process compiled it too
 * (its <key>.once file is there, and is removed), so the binary is worth storing; else
 * leaves that file for the next one and returns 0. The file's content is never read. */
static int compiled_before(ampx_context *ctx, const char *bin_path) {
    char once[620];
    size_t n = strlen(bin_path);
    snprintf(once, sizeof once, "%.*s.once", (int)(n > 4 ? n - 4 : n), bin_path);
    if (unlink(once) == 0) return 1;
    if (ocl_make_dirs(ctx->cache_dir) != 0) return 0;
    int fd = open(once, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
    return 0;
}

ampx_status ocl_program_get(ampx_context *ctx, const ocl_source *src, const char *options,
                            const char *what, ocl_cache_use use, cl_program *out, int *cache_hit) {
    char path[600]  = "";
    cl_program prog = NULL;
    *cache_hit      = 0;
    if (use != OCL_CACHE_NONE && ctx->cache_dir[0]) {
        snprintf(path, sizeof path, "%s/%016llx.bin", ctx->cache_dir,
                 (unsigned long long)ocl_cache_key(ctx, options, src));
        prog       = load_from_cache(ctx, path, options);
        *cache_hit = prog != NULL;
    }
    if (!prog) {
        cl_int err;
        const char *text[2] = {src->text[0], src->text[1]};
        prog                = clCreateProgramWithSource(ctx->cl, src->n, text, src->size, &err);
        if (err != CL_SUCCESS)
            return ocl_check(ctx, err, "opencl: create", "clCreateProgramWithSource");
        ampx_status st = build(ctx, prog, options, what);
        if (st != AMPX_OK) {
            clReleaseProgram(prog);
            return st;
        }
        if (path[0] && (use == OCL_CACHE_ONE || compiled_before(ctx, path)))
            store_to_cache(ctx, prog, path);
    }
    *out = prog;
    return AMPX_OK;
}

ocl_cache_use ocl_typed_cache_use(const ampx_context *ctx) {
    /* On CPU devices (PoCL) the OpenCL C front end takes 25-35 ms a program and loading the
     * binary 3-5 ms, but asking for the binary makes PoCL generate every kernel's code once
     * more (~0.3 s for a layernorm kernel): worth it for a program every run needs, not for
     * one compiled once (a conformance case, a tuning candidate). docs/OPENCL.md. */
    return ctx->cpu_device ? OCL_CACHE_TWO : OCL_CACHE_ONE;
}

/* The main program's kernels by ocl_kernel, named as in the .cl files of kernels/opencl. */
const char *const ocl_kernel_names[K_COUNT] = {
    [K_BUFFER_FILL]         = "buffer_fill",
    [K_XENT_COUNT]          = "xent_count",
    [K_XENT_LOSS]           = "xent_loss",
    [K_BATCHNORM_FWD]       = "batchnorm_fwd",
    [K_BATCHNORM_BWD]       = "batchnorm_bwd",
    [K_EMBEDDING_FWD]       = "embedding_fwd",
    [K_EMBEDDING_BWD]       = "embedding_bwd",
    [K_REDUCE]              = "reduce",
    [K_ABS_MAX]             = "abs_max",
    [K_UNSCALE_CLEAR_FLAGS] = "unscale_clear_flags",
    [K_AMP_FINISH]          = "amp_finish",
    [K_SCALER_UPDATE]       = "scaler_update",
    [K_OPT_BEGIN]           = "opt_begin",
    [K_DROPOUT]             = "dropout",
    [K_PERMUTE]             = "permute",
    [K_ATTN_FWD]            = "attn_fwd",
    [K_ATTN_BWD_DQ]         = "attn_bwd_dq",
    [K_ATTN_BWD_DKV]        = "attn_bwd_dkv",
    [K_ATTN_FWD_TILED]      = "attn_fwd_tiled",
    [K_ATTN_BWD_DQ_TILED]   = "attn_bwd_dq_tiled",
    [K_ATTN_BWD_DKV_TILED]  = "attn_bwd_dkv_tiled",
    [K_ATTN_FWD_ITEMS]      = "attn_fwd_items",
    [K_ATTN_BWD_DQ_ITEMS]   = "attn_bwd_dq_items",
    [K_ATTN_BWD_DKV_ITEMS]  = "attn_bwd_dkv_items",
    [K_IM2COL]              = "im2col",
    [K_COL2IM]              = "col2im",
    [K_POOL2D_FWD]          = "pool2d_fwd",
    [K_POOL2D_BWD]          = "pool2d_bwd",
    [K_GEMM_BETA]           = "gemm_beta",
    [K_GEMM_STORE_C]        = "gemm_store_c",
    [K_GEMM_EPILOGUE]       = "gemm_epilogue",
    [K_GEMM_BIAS_GRAD]      = "gemm_bias_grad",
    [K_GEMM_ROWS + 0]       = "gemm_rows_f32_f32",
    [K_GEMM_ROWS + 1]       = "gemm_rows_f32_bf16",
    [K_GEMM_ROWS + 2]       = "gemm_rows_f32_f16",
    [K_GEMM_ROWS + 3]       = "gemm_rows_bf16_f32",
    [K_GEMM_ROWS + 4]       = "gemm_rows_bf16_bf16",
    [K_GEMM_ROWS + 5]       = "gemm_rows_bf16_f16",
    [K_GEMM_ROWS + 6]       = "gemm_rows_f16_f32",
    [K_GEMM_ROWS + 7]       = "gemm_rows_f16_bf16",
    [K_GEMM_ROWS + 8]       = "gemm_rows_f16_f16",
    [K_GEMM_ROWS_FP8 + 0]   = "gemm_rows_e4m3_e4m3",
    [K_GEMM_ROWS_FP8 + 1]   = "gemm_rows_e4m3_e5m2",
    [K_GEMM_ROWS_FP8 + 2]   = "gemm_rows_e5m2_e4m3",
    [K_GEMM_ROWS_FP8 + 3]   = "gemm_rows_e5m2_e5m2",
    [K_FP8_QUANTIZE]        = "fp8_quantize",
    [K_FP8_DEQUANTIZE]      = "fp8_dequantize",
    [K_FP8_SCALE_UPDATE]    = "fp8_scale_update",
};

ampx_status ocl_program_ready(ampx_context *ctx) {
    if (ctx->program_state > 0) return AMPX_OK;
    if (ctx->program_state < 0)
        return ocl_fail(ctx, AMPX_ERR_DEVICE,
                        "opencl: the kernels of kernels/opencl/*.cl did not build (the first "
                        "error says why)");
    ocl_thread_enter(ctx); /* check_scalars_layout runs a kernel */
    ampx_status st     = ocl_program_load(ctx, ctx->build_opts);
    ctx->program_state = st == AMPX_OK ? 1 : -1;
    if (st == AMPX_OK)
        ocl_log(ctx, AMPX_LOG_INFO, "opencl: device %u:%u %s (%s), program %s in %.0f ms",
                ctx->plat_index, ctx->dev_index, ctx->device_name, ctx->platform_name,
                ctx->cache_hit ? "loaded from the disk cache" : "built", ctx->build_ms);
    return st;
}

ampx_status ocl_program_load(ampx_context *ctx, const char *options) {
    double t0      = now_ms();
    ocl_source src = {1, {ampx_ocl_source}, {ampx_ocl_source_size}};
    OCL_TRY(ocl_program_get(ctx, &src, options, "kernels/opencl/*.cl", OCL_CACHE_ONE, &ctx->program,
                            &ctx->cache_hit));
    for (int k = 0; k < K_COUNT; k++) {
        cl_int err;
        ctx->kernels[k] = clCreateKernel(ctx->program, ocl_kernel_names[k], &err);
        if (err != CL_SUCCESS)
            return ocl_fail(ctx, ocl_status_of(err), "opencl: clCreateKernel(%s): %s",
                            ocl_kernel_names[k], ocl_err_name(err));
    }
    OCL_TRY(check_scalars_layout(ctx));
    ctx->build_ms = now_ms() - t0;
    ocl_log(ctx, AMPX_LOG_DEBUG, "opencl: program %s in %.0f ms",
            ctx->cache_hit ? "loaded from the disk cache" : "built from source", ctx->build_ms);
    return AMPX_OK;
}
