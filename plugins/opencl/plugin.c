/* plugin.c — the OpenCL backend's entry point: ampx_backend_entry, probe, device
 * enumeration and selection, create/destroy and their options, device_info, supports(),
 * synchronize and the op table. Argument checks, options and device_info's struct handling
 * are plugin_kit.h's, shared with every backend; OpenCL errors as statuses are status.c's.
 *
 * Links only the OpenCL ICD loader (libOpenCL) and CLBlast, never a vendor's library, so any
 * installed ICD (PoCL, a GPU driver) is found at run time. One context = one device, one
 * in-order command queue; ops enqueue kernels and return, synchronize() waits.
 */
#define _GNU_SOURCE /* strcasestr */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

#define OCL_PLUGIN_VERSION "0.1.0"
#define OCL_MAX_PLATFORMS 16
#define OCL_MAX_DEVICES 64

// ---------------------------------------------------------------------------------------
// Devices: every device of every platform, in platform then device order.

typedef struct dev_entry {
    cl_platform_id platform;
    cl_device_id device;
    unsigned p, d;
    cl_device_type type;
    char platform_name[128];
    char name[128];
    char unusable[160]; /* why the plugin cannot run on it, "" if it can */
} dev_entry;

/* A device string, truncated to fit out; "?" if the device cannot say. A string longer than
 * out is read whole first: clGetDeviceInfo refuses a short buffer (CL_INVALID_VALUE), and
 * PoCL's CL_DEVICE_VERSION names the host CPU, 65 bytes on an AVX-512 machine. */
static void dev_str(cl_device_id d, cl_device_info what, char *out, size_t cap) {
    size_t len = 0;
    char *s    = NULL;
    snprintf(out, cap, "?");
    if (clGetDeviceInfo(d, what, 0, NULL, &len) != CL_SUCCESS || len == 0 || !(s = malloc(len)))
        return;
    if (clGetDeviceInfo(d, what, len, s, NULL) == CL_SUCCESS) {
        s[len - 1] = '\0';
        snprintf(out, cap, "%s", s);
    }
    free(s);
}

/* What the plugin needs of a device: available, a compiler, OpenCL 1.2. */
static void dev_check(dev_entry *e) {
    cl_bool avail = CL_FALSE, compiler = CL_FALSE;
    char version[64];
    clGetDeviceInfo(e->device, CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
    clGetDeviceInfo(e->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
    dev_str(e->device, CL_DEVICE_VERSION, version, sizeof version);
    int major = 0, minor = 0;
    sscanf(version, "OpenCL %d.%d", &major, &minor);
    if (!avail)
        snprintf(e->unusable, sizeof e->unusable, "not available");
    else if (!compiler)
        snprintf(e->unusable, sizeof e->unusable, "no OpenCL C compiler");
    else if (major * 10 + minor < 12)
        snprintf(e->unusable, sizeof e->unusable, "%s, needs OpenCL 1.2", version);
    else
        e->unusable[0] = '\0';
}

/* Fills up to cap entries; returns the count, or -1 with *err set when there is no platform. */
static int enumerate_devices(dev_entry *out, int cap, cl_int *err) {
    cl_platform_id plats[OCL_MAX_PLATFORMS];
    cl_uint np = 0;
    *err       = clGetPlatformIDs(OCL_MAX_PLATFORMS, plats, &np);
    if (*err != CL_SUCCESS || np == 0) return -1;
    if (np > OCL_MAX_PLATFORMS) np = OCL_MAX_PLATFORMS;
    int n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[OCL_MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue;
        if (nd > OCL_MAX_DEVICES) nd = OCL_MAX_DEVICES;
        for (cl_uint d = 0; d < nd && n < cap; d++) {
            dev_entry *e = &out[n++];
            memset(e, 0, sizeof *e);
            e->platform = plats[p];
            e->device   = devs[d];
            e->p        = p;
            e->d        = d;
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof e->type, &e->type, NULL);
            if (clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof e->platform_name,
                                  e->platform_name, NULL) != CL_SUCCESS)
                snprintf(e->platform_name, sizeof e->platform_name, "?");
            e->platform_name[sizeof e->platform_name - 1] = '\0'; /* a driver may not end it */
            dev_str(devs[d], CL_DEVICE_NAME, e->name, sizeof e->name);
            dev_check(e);
        }
    }
    return n;
}

static const char *type_name(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return "GPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    if (t & CL_DEVICE_TYPE_CPU) return "CPU";
    return "other";
}

/* Default order: GPU, then accelerator, then CPU, then anything else; first usable wins. */
static int default_device(const dev_entry *e, int n) {
    static const cl_device_type order[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR,
                                           CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_ALL};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++)
        for (int i = 0; i < n; i++)
            if ((e[i].type & order[o]) && !e[i].unusable[0]) return i;
    return -1;
}

// ---------------------------------------------------------------------------------------
// Probe: is there an ICD, a platform, a device the plugin can use? One line either way.

static ampx_status ocl_probe(char *reason, size_t reason_cap) {
    dev_entry devs[OCL_MAX_DEVICES];
    cl_int err = CL_SUCCESS;
    int n      = enumerate_devices(devs, OCL_MAX_DEVICES, &err);
    char tmp[512];
    ampx_status st = AMPX_ERR_UNAVAILABLE;
    if (n < 0) {
        snprintf(tmp, sizeof tmp,
                 "no OpenCL platform (%s; is an ICD such as pocl-opencl-icd installed in "
                 "/etc/OpenCL/vendors?)",
                 err == CL_SUCCESS ? "0 platforms" : ocl_err_name(err));
    } else if (n == 0) {
        snprintf(tmp, sizeof tmp, "no OpenCL device on any platform");
    } else {
        int pick = default_device(devs, n);
        if (pick >= 0) {
            snprintf(tmp, sizeof tmp, "%d OpenCL device%s; default %u:%u %s (%s)", n,
                     n == 1 ? "" : "s", devs[pick].p, devs[pick].d, devs[pick].name,
                     type_name(devs[pick].type));
            st = AMPX_OK;
        } else {
            snprintf(tmp, sizeof tmp, "no usable OpenCL device: %u:%u %s: %s%s", devs[0].p,
                     devs[0].d, devs[0].name, devs[0].unusable, n > 1 ? " (and the others)" : "");
        }
    }
    if (reason && reason_cap > 0) snprintf(reason, reason_cap, "%s", tmp);
    return st;
}

// ---------------------------------------------------------------------------------------
// Options

typedef struct ocl_opts {
    char device[128]; /* "" = default; "P:D"; or a name substring */
    char cache[512];  /* "" = default location; "off"; or a directory */
    ocl_gemm_path gemm;
    int no_epilogue;             /* gemm_epilogue=0: supports() does not claim GEMM's epilogue */
    int tune;                    /* OCL_TUNE_NO, _ON, _FORCE (tune=no|yes|force) */
    int tune_tiny;               /* tune_grid=tiny */
    ocl_gemm_params gemm_params; /* gemm_params=MWG,NWG,KWG,MDIMC,NDIMC,VWN (mwg 0: none) */
    uint32_t block_m, block_n;   /* gemm_block=MRxNR (0: from the device) */
    int paths;                   /* paths=auto|workgroup|item: OCL_PATHS_* */
} ocl_opts;

/* gemm_block=MRxNR: the packed GEMM's block of C per work item (ocl_gemm_block_check). */
static ampx_status parse_block(const ampx_kit *kit, const char *val, ocl_opts *o) {
    unsigned mr = 0, nr = 0;
    char tail = 0;
    if (sscanf(val, "%ux%u%c", &mr, &nr, &tail) != 2 || !strchr("0123456789", val[0]) ||
        ocl_gemm_block_check(mr, nr))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "opencl: gemm_block=%s: expected MRxNR, MR 1-16 rows, NR 16, 32, 48 "
                             "or 64 columns, MR * NR / 16 at most 32 (e.g. 6x32)",
                             val);
    o->block_m = mr;
    o->block_n = nr;
    return AMPX_OK;
}

static ampx_status parse_options(const ampx_kit *kit, const ampx_host *h, ocl_opts *o) {
    static const char *const gemm_paths[] = {"auto", "rows", "tiled", "convert", "packed", NULL};
    static const ocl_gemm_path gemm_of[]  = {GEMM_AUTO, GEMM_ROWS, GEMM_TILED, GEMM_CONVERT,
                                             GEMM_PACKED};
    static const char *const tunes[]      = {"no", "yes", "force", NULL};
    static const char *const grids[]      = {"full", "tiny", NULL};
    static const char *const paths[]      = {"auto", "workgroup", "item", NULL};
    for (uint32_t i = 0; i < h->n_options; i++) {
        ampx_kit_option opt = {NULL, 0, NULL};
        int pick            = 0;
        OCL_TRY(ampx_kit_option_at(kit, h, i, &opt));
        const char *val = opt.value;
        if (ampx_kit_option_is(&opt, "device")) {
            if (!val[0] || strlen(val) >= sizeof o->device)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "opencl: device=%s: expected P:D (platform:device index) or "
                                     "a part of the device name",
                                     val);
            snprintf(o->device, sizeof o->device, "%s", val);
        } else if (ampx_kit_option_is(&opt, "cache")) {
            if (!val[0] || strlen(val) >= sizeof o->cache)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "opencl: cache=%s: expected a directory or 'off'", val);
            snprintf(o->cache, sizeof o->cache, "%s", val);
        } else if (ampx_kit_option_is(&opt, "gemm")) {
            OCL_TRY(ampx_kit_option_choice(kit, &opt, gemm_paths, &pick));
            o->gemm = gemm_of[pick];
        } else if (ampx_kit_option_is(&opt, "gemm_epilogue")) {
            unsigned long v = 0;
            OCL_TRY(ampx_kit_option_uint(kit, &opt, 0, 1, &v));
            o->no_epilogue = v == 0;
        } else if (ampx_kit_option_is(&opt, "tune")) {
            OCL_TRY(ampx_kit_option_choice(kit, &opt, tunes, &pick));
            o->tune = pick;
        } else if (ampx_kit_option_is(&opt, "gemm_params")) {
            ocl_gemm_params *p = &o->gemm_params;
            char tail          = 0;
            if (sscanf(val, "%u,%u,%u,%u,%u,%u%c", &p->mwg, &p->nwg, &p->kwg, &p->mdimc, &p->ndimc,
                       &p->vwn, &tail) != 6 ||
                !strchr("0123456789", val[0]) || p->mwg == 0)
                return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                                     "opencl: gemm_params=%s: expected six numbers "
                                     "MWG,NWG,KWG,MDIMC,NDIMC,VWN",
                                     val);
        } else if (ampx_kit_option_is(&opt, "tune_grid")) {
            OCL_TRY(ampx_kit_option_choice(kit, &opt, grids, &pick));
            o->tune_tiny = pick;
        } else if (ampx_kit_option_is(&opt, "gemm_block")) {
            OCL_TRY(parse_block(kit, val, o));
        } else if (ampx_kit_option_is(&opt, "paths")) {
            OCL_TRY(ampx_kit_option_choice(kit, &opt, paths, &pick));
            o->paths = pick; /* the order of OCL_PATHS_* */
        } else {
            return ampx_kit_option_unknown(kit, &opt,
                                           "device, cache, gemm, gemm_block, gemm_epilogue, "
                                           "gemm_params, paths, tune, tune_grid");
        }
    }
    return AMPX_OK;
}

/* Resolves device=: "P:D" exactly, else a case-insensitive substring of "platform device". */
static ampx_status select_device(ampx_context *ctx, const dev_entry *devs, int n, const char *want,
                                 int *pick) {
    *pick = -1;
    if (!want[0]) {
        *pick = default_device(devs, n);
        if (*pick < 0)
            return ocl_fail(ctx, AMPX_ERR_UNAVAILABLE,
                            "opencl: no usable OpenCL device: %u:%u %s: %s", devs[0].p, devs[0].d,
                            devs[0].name, devs[0].unusable);
        return AMPX_OK;
    }
    unsigned p, d;
    char tail;
    if (sscanf(want, "%u:%u%c", &p, &d, &tail) == 2) {
        for (int i = 0; i < n; i++)
            if (devs[i].p == p && devs[i].d == d) *pick = i;
    } else {
        for (int i = 0; i < n && *pick < 0; i++) {
            char full[260];
            snprintf(full, sizeof full, "%s %s", devs[i].platform_name, devs[i].name);
            if (strcasestr(full, want)) *pick = i;
        }
    }
    if (*pick < 0) {
        char list[512] = "";
        for (int i = 0; i < n; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%u:%u %s", i ? ", " : "", devs[i].p, devs[i].d,
                     devs[i].name);
        }
        return ocl_fail(ctx, AMPX_ERR_INVALID, "opencl: device=%s matches no device (have: %s)",
                        want, list);
    }
    if (devs[*pick].unusable[0])
        return ocl_fail(ctx, AMPX_ERR_UNAVAILABLE, "opencl: device %u:%u %s: %s", devs[*pick].p,
                        devs[*pick].d, devs[*pick].name, devs[*pick].unusable);
    return AMPX_OK;
}

/* The disk cache directory: cache= option, else $AMPX_OPENCL_CACHE_DIR, else
 * $XDG_CACHE_HOME/ampx/opencl, else $HOME/.cache/ampx/opencl; "off" (either way) disables. */
static void resolve_cache_dir(const char *opt, char *out, size_t cap) {
    const char *env = getenv("AMPX_OPENCL_CACHE_DIR");
    const char *dir = opt[0] ? opt : (env && env[0] ? env : NULL);
    out[0]          = '\0';
    if (dir) {
        if (strcmp(dir, "off") != 0) snprintf(out, cap, "%s", dir);
        return;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0])
        snprintf(out, cap, "%s/ampx/opencl", xdg);
    else if (home && home[0])
        snprintf(out, cap, "%s/.cache/ampx/opencl", home);
}

// ---------------------------------------------------------------------------------------
// Create, destroy

static void ocl_destroy(ampx_context *ctx) {
    if (!ctx) return;
    ocl_thread_enter(ctx);
    if (ctx->queue) clFinish(ctx->queue);
    for (uint32_t i = 0; i < ctx->prof.n_events; i++)
        clReleaseEvent(ctx->prof.events[i]);
    if (ctx->prof.base) clReleaseEvent(ctx->prof.base);
    free(ctx->prof.events), free(ctx->prof.first), free(ctx->prof.last);
    for (int k = 0; k < K_COUNT; k++)
        if (ctx->kernels[k]) clReleaseKernel(ctx->kernels[k]);
    ocl_typed_free(ctx);
    ocl_gemm_tuned_free(ctx);
    ocl_gemm_packed_free(ctx);
    ocl_scratch_free(ctx);
    if (ctx->program) clReleaseProgram(ctx->program);
    if (ctx->queue) clReleaseCommandQueue(ctx->queue);
    ocl_release_context(ctx);
    free(ctx);
}

static int has_extension(cl_device_id d, const char *ext) {
    size_t len = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0) return 0;
    char *s = malloc(len + 1);
    if (!s) return 0;
    int found = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, s, NULL) == CL_SUCCESS) {
        s[len]     = '\0';
        char *save = NULL;
        for (char *tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
            if (strcmp(tok, ext) == 0) found = 1;
    }
    free(s);
    return found;
}

static ampx_status ocl_create(const ampx_host *host, ampx_context **out) {
    ampx_host h;
    ampx_context tmp; /* for logging until the context is allocated */
    memset(&tmp, 0, sizeof tmp);
    OCL_TRY(ampx_kit_begin_create(host, out, "opencl", ocl_buffer_bytes, &h, &tmp.kit));
    ocl_opts o;
    memset(&o, 0, sizeof o);
    OCL_TRY(parse_options(&tmp.kit, &h, &o));

    dev_entry devs[OCL_MAX_DEVICES];
    cl_int err = CL_SUCCESS;
    int n      = enumerate_devices(devs, OCL_MAX_DEVICES, &err);
    if (n < 0)
        return ampx_kit_fail(&tmp.kit, AMPX_ERR_UNAVAILABLE, "opencl: no OpenCL platform (%s)",
                             err == CL_SUCCESS ? "0 platforms" : ocl_err_name(err));
    if (n == 0) return ampx_kit_fail(&tmp.kit, AMPX_ERR_UNAVAILABLE, "opencl: no OpenCL device");
    int pick = -1;
    OCL_TRY(select_device(&tmp, devs, n, o.device, &pick));

    ampx_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ampx_kit_fail(&tmp.kit, AMPX_ERR_NO_MEMORY, "opencl: out of memory for the context");
    ctx->kit         = tmp.kit;
    ctx->platform    = devs[pick].platform;
    ctx->oclgrind    = ocl_quirks_oclgrind(devs[pick].platform_name);
    ctx->device      = devs[pick].device;
    ctx->plat_index  = devs[pick].p;
    ctx->dev_index   = devs[pick].d;
    ctx->gemm        = o.gemm;
    ctx->no_epilogue = o.no_epilogue;
    snprintf(ctx->platform_name, sizeof ctx->platform_name, "%s", devs[pick].platform_name);
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", devs[pick].name);
    dev_str(ctx->device, CL_DRIVER_VERSION, ctx->driver_version, sizeof ctx->driver_version);
    dev_str(ctx->device, CL_DEVICE_VERSION, ctx->device_version, sizeof ctx->device_version);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(ctx->devices_list);
        snprintf(ctx->devices_list + l, sizeof ctx->devices_list - l, "%s%u:%u %s (%s)%s",
                 i ? "; " : "", devs[i].p, devs[i].d, devs[i].name, type_name(devs[i].type),
                 i == pick ? " [selected]" : (devs[i].unusable[0] ? " [unusable]" : ""));
    }
    resolve_cache_dir(o.cache, ctx->cache_dir, sizeof ctx->cache_dir);

    cl_ulong max_alloc = 0, gmem = 0;
    size_t max_wg = 1;
    clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    clGetDeviceInfo(ctx->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    ctx->max_alloc  = max_alloc;
    ctx->global_mem = gmem;
    ctx->fp64       = has_extension(ctx->device, "cl_khr_fp64");
    /* A device of several types takes the layout of the type it lists as (type_name): Oclgrind
     * 21.10 reports CPU | GPU | ACCELERATOR | DEFAULT, and runs the GPU layout. */
    ctx->cpu_device = strcmp(type_name(devs[pick].type), "CPU") == 0;
    ctx->paths      = o.paths;
    ctx->wg         = 1;
    while (ctx->wg * 2 <= max_wg && ctx->wg < 256)
        ctx->wg *= 2;
    cl_uint cus = 1;
    clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    /* grid-stride kernels: enough items that each runs a short loop. PoCL vectorizes across
     * a work-group and runs each item's loop in order, so a cap of 4096 per compute unit
     * (hundreds of iterations each) ran elementwise ops at 0.02 of a copy; 2^21 per unit
     * gives adamw 8x, scale 6x (ampx bench op, 2^22 elements) */
    ctx->max_items = (size_t)(cus ? cus : 1) * 2097152;
    if (ctx->wg < 16 * 16 || max_wg < 256) {
        ampx_status st =
            ampx_kit_fail(&tmp.kit, AMPX_ERR_UNAVAILABLE,
                          "opencl: device %s: work-groups of %zu items, the kernels need 256",
                          ctx->device_name, max_wg);
        ocl_destroy(ctx);
        return st;
    }

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->cl                       = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        ampx_status st = ocl_check(&tmp, err, "opencl: create", "clCreateContext");
        ocl_destroy(ctx);
        return st;
    }
    /* profiling on: the ABI 1.2 timestamps read the queue's events (only while tracing) */
    ctx->queue = clCreateCommandQueue(ctx->cl, ctx->device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        ampx_status st = ocl_check(&tmp, err, "opencl: create", "clCreateCommandQueue");
        ocl_destroy(ctx);
        return st;
    }

    cl_device_fp_config fpc = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fpc, &fpc, NULL);
    snprintf(ctx->build_opts, sizeof ctx->build_opts, "-cl-std=CL1.2 -DWG=%zu%s%s%s", ctx->wg,
             ctx->fp64 ? " -DAMPX_FP64=1" : "", ocl_row_items(ctx) ? " -DAMPX_ITEM_KERNELS=1" : "",
             (fpc & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ? " -cl-fp32-correctly-rounded-divide-sqrt"
                                                         : "");
    /* the typed kernels' vector width: the device's preferred float width, 4 to 8. PoCL on
     * AVX-512 prefers 16, which ran cast and add no faster than 8 (ampx bench op, bf16, 2^24)
     * and doubled the time PoCL takes to generate each typed kernel's code. */
    cl_uint pref = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof pref, &pref, NULL);
    ctx->vw = pref > 4 ? 8 : 4;
    ocl_gemm_packed_init(ctx, o.block_m, o.block_n);
    /* the main program is built on first use (ocl_program_ready), so that describing the
     * backend (`ampx backends`, the loader's probe under its deadline) compiles nothing: the
     * program takes 13-19 s to compile on a cold PoCL, over 10 s on Intel's CPU runtime */
    ampx_status st = ocl_gemm_tune_init(ctx, o.tune, o.tune_tiny,
                                        o.gemm_params.mwg ? &o.gemm_params : NULL, o.block_m != 0);
    if (st != AMPX_OK) {
        ocl_destroy(ctx);
        return st;
    }
    *out = ctx;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Device info, supports, synchronize

static ampx_status ocl_device_info(ampx_context *ctx, ampx_device_info *info) {
    ampx_device_info d;
    OCL_TRY(ampx_kit_begin_device_info(AMPX_KIT(ctx), info, &d));
    snprintf(d.name, sizeof d.name, "%s", ctx->device_name);
    char desc[2048], gp[96];
    ocl_gemm_params_str(&ctx->gt.p, gp, sizeof gp);
    snprintf(desc, sizeof desc,
             "ampx OpenCL backend %s on %u:%u, %s, %s, driver %s; gemm %s; tiled %s (%s); "
             "packed %ux%u; paths %s (%s); cache %s; devices: %s",
             OCL_PLUGIN_VERSION, ctx->plat_index, ctx->dev_index, ctx->platform_name,
             ctx->device_version, ctx->driver_version,
             ctx->gemm == GEMM_TILED     ? "tiled"
             : ctx->gemm == GEMM_ROWS    ? "rows"
             : ctx->gemm == GEMM_CONVERT ? "convert+CLBlast"
             : ctx->gemm == GEMM_PACKED  ? "packed"
                                         : "auto",
             gp, ctx->gt.from, ctx->gp.mr, ctx->gp.nr, ocl_item_paths(ctx) ? "item" : "workgroup",
             ctx->paths != OCL_PATHS_AUTO ? "option"
             : ctx->cpu_device            ? "CPU device"
                                          : "not a CPU device",
             ctx->cache_dir[0] ? ctx->cache_dir : "off", ctx->devices_list);
    size_t dlen = strlen(desc);
    if (dlen >= sizeof d.description) dlen = sizeof d.description - 1;
    memcpy(d.description, desc, dlen); /* truncated to fit, d is zeroed */
    d.memory_bytes = ctx->global_mem;
    d.n_threads    = 0;
    return ampx_kit_end_device_info(info, &d);
}

static int ocl_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes, uint32_t n_dtypes,
                        uint32_t shape_class) {
    /* GEMM's and GEMM_FP8's epilogue (gemm.c) with every dtype they take, unless
     * gemm_epilogue=0 */
    if ((op == AMPX_OP_GEMM || op == AMPX_OP_GEMM_FP8) && shape_class == AMPX_SHAPE_GEMM_EPILOGUE) {
        if (ctx && ctx->no_epilogue) return 0;
        shape_class = AMPX_SHAPE_ANY;
    }
    return ampx_kit_supports(op, dtypes, n_dtypes, shape_class);
}

static ampx_status ocl_synchronize(ampx_context *ctx) {
    if (!ctx) return AMPX_ERR_INVALID;
    ocl_thread_enter(ctx);
    return ocl_check(ctx, clFinish(ctx->queue), "synchronize", "clFinish");
}

// ---------------------------------------------------------------------------------------
// Device timestamps (ABI 1.2): the queue's profiling events. Every kernel launched while
// profiling keeps its event; an op spans its first kernel's start to its last's end, in ns
// since a marker profile_begin enqueues.

static void prof_release(ampx_context *ctx) {
    for (uint32_t i = 0; i < ctx->prof.n_events; i++)
        clReleaseEvent(ctx->prof.events[i]);
    if (ctx->prof.base) clReleaseEvent(ctx->prof.base);
    ctx->prof.base     = NULL;
    ctx->prof.n_events = 0;
    ctx->prof.n_ops    = 0;
    ctx->prof.on       = 0;
}

static ampx_status ocl_profile_begin(ampx_context *ctx, uint32_t capacity) {
    if (!ctx) return AMPX_ERR_INVALID;
    prof_release(ctx);
    uint32_t *f = realloc(ctx->prof.first, sizeof *f * ((size_t)capacity + 1));
    if (f) ctx->prof.first = f;
    uint32_t *l = f ? realloc(ctx->prof.last, sizeof *l * ((size_t)capacity + 1)) : NULL;
    if (l) ctx->prof.last = l;
    if (!f || !l) return ocl_fail(ctx, AMPX_ERR_NO_MEMORY, "profile_begin: %u ops", capacity);
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &ctx->prof.base);
    if (err != CL_SUCCESS) return ocl_check(ctx, err, "profile_begin", "clEnqueueMarker");
    ctx->prof.cap = capacity;
    ctx->prof.on  = 1;
    return AMPX_OK;
}

static cl_ulong event_time(cl_event e, cl_profiling_info what) {
    cl_ulong t = 0;
    clGetEventProfilingInfo(e, what, sizeof t, &t, NULL);
    return t;
}

static ampx_status ocl_profile_end(ampx_context *ctx, uint64_t *ns, uint32_t cap, uint32_t *n_ops) {
    if (!ctx || !n_ops || (cap && !ns)) return AMPX_ERR_INVALID;
    *n_ops = 0;
    if (!ctx->prof.on) return AMPX_OK;
    ocl_thread_enter(ctx);
    ampx_status st = ocl_check(ctx, clFinish(ctx->queue), "profile_end", "clFinish");
    if (st) {
        prof_release(ctx);
        return st;
    }
    cl_ulong t0 = event_time(ctx->prof.base, CL_PROFILING_COMMAND_END), prev = t0;
    for (uint32_t i = 0; i < ctx->prof.n_ops && i < cap; i++) {
        uint32_t a = ctx->prof.first[i], b = ctx->prof.last[i];
        cl_ulong s = prev, e = prev; /* an op that launched no kernel: no time, at the last end */
        if (a < b) {
            s    = event_time(ctx->prof.events[a], CL_PROFILING_COMMAND_START);
            e    = event_time(ctx->prof.events[b - 1], CL_PROFILING_COMMAND_END);
            prev = e;
        }
        ns[2 * i]     = s > t0 ? s - t0 : 0;
        ns[2 * i + 1] = e > t0 ? e - t0 : 0;
    }
    *n_ops = ctx->prof.n_ops;
    prof_release(ctx);
    return AMPX_OK;
}

/* An op's span while profiling (the kit's timed wrappers, AMPX_KIT_TIMED_OPS): the range of
 * the events of the kernels it launched, from the first on the way in to the last once it
 * returned AMPX_OK; ops past the capacity are not recorded. */
static inline int ocl_prof_op_start(ampx_context *ctx, uint64_t *first) {
    if (!ctx || !ctx->prof.on) return 0;
    *first = ctx->prof.n_events;
    return 1;
}

static inline void ocl_prof_op_end(ampx_context *ctx, uint64_t first) {
    if (ctx->prof.n_ops < ctx->prof.cap) {
        ctx->prof.first[ctx->prof.n_ops] = (uint32_t)first;
        ctx->prof.last[ctx->prof.n_ops]  = ctx->prof.n_events;
        ctx->prof.n_ops++;
    }
}

// ---------------------------------------------------------------------------------------
// The tables and the entry point (plugin_kit.h's kit/shell.h, from OCL_OPS in ocl.h)

AMPX_KIT_TIMED_OPS(ocl, OCL_OPS)
AMPX_KIT_OP_TABLE(ocl_ops, ocl_timed, OCL_OPS);
static const ampx_backend_iface ocl_iface = {
    AMPX_KIT_IFACE(ocl, "opencl", OCL_PLUGIN_VERSION, ocl_ops), AMPX_KIT_IFACE_PROFILE(ocl)};
AMPX_KIT_ENTRY(ocl_iface)
