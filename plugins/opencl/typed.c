/* typed.c — the kernels of kernels/opencl/typed/, each built once per dtype combination of
 * its tensors, on first use, and kept in the context.
 *
 * A kernel of the main program gets each tensor's dtype as an argument and switches on it
 * per element (common.cl's ld_elem / st_elem), which keeps the compiler from vectorizing
 * the loads and stores. A typed kernel is compiled with -DT_<tensor>=f32|bf16|f16 instead
 * (and -DK_<kernel>, which selects it in its file), so each load and store is one fixed
 * conversion, VW elements at a time where the kernel is a plain elementwise map. The
 * conversions are the same integer code, so results are bit-identical to the switching
 * kernels'.
 *
 * On GPUs and accelerators each (kernel, dtypes) program goes through the disk cache like
 * the main program (program.c), so only the first process on a device compiles it. On CPU
 * devices (PoCL) it is stored the second time a process compiles it (OCL_CACHE_TWO): there
 * the OpenCL C front end takes 25-35 ms per program and loading its binary 3-5 ms, but
 * asking PoCL for the binary makes it generate every kernel's code once more (~0.3 s), so a
 * program only one process ever needs (most conformance cases) is not worth storing, while
 * one every training run needs is. A context is used by one thread at a time (backend.h),
 * so the table needs no lock.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ocl.h"

typedef struct typed_def {
    const char *kernel;
    const char *file; /* in kernels/opencl/typed/ */
    unsigned n_tensors;
    const char *tensors[3];
    int rows; /* a row kernel: built with -DROW_ITEMS on CPU devices (ocl_launch_rows) */
} typed_def;

static const typed_def typed_defs[TK_COUNT] = {
    [TK_CAST]             = {"cast", "cast.cl", 2, {"src", "dst"}},
    [TK_ADD]              = {"add", "add.cl", 3, {"a", "b", "y"}},
    [TK_SCALE]            = {"scale", "scale.cl", 2, {"x", "y"}},
    [TK_BIAS_GRAD]        = {"bias_grad", "bias_grad.cl", 2, {"dy", "db"}},
    [TK_ACT_FWD]          = {"act_fwd", "act.cl", 2, {"x", "y"}},
    [TK_ACT_BWD]          = {"act_bwd", "act.cl", 3, {"x", "dy", "dx"}},
    [TK_SOFTMAX_FWD]      = {"softmax_fwd", "softmax.cl", 2, {"x", "y"}, 1},
    [TK_SOFTMAX_BWD]      = {"softmax_bwd", "softmax.cl", 3, {"y", "dy", "dx"}, 1},
    [TK_XENT_ROWS]        = {"xent_rows", "softmax.cl", 2, {"logits", "dlogits"}, 1},
    [TK_LAYERNORM_FWD]    = {"layernorm_fwd", "layernorm.cl", 2, {"x", "y"}, 1},
    [TK_LAYERNORM_BWD]    = {"layernorm_bwd", "layernorm.cl", 3, {"x", "dy", "dx"}, 1},
    [TK_LAYERNORM_PARAMS] = {"layernorm_params", "layernorm.cl", 2, {"x", "dy"}},
    [TK_UNSCALE_CHECK]    = {"unscale_check", "amp.cl", 1, {"g"}, 1},
    [TK_SGD]              = {"sgd", "optim.cl", 2, {"g", "copy"}},
    [TK_ADAMW]            = {"adamw", "optim.cl", 2, {"g", "copy"}},
    [TK_GRAD_STATS_PART]  = {"grad_stats_part", "amp_reduce.cl", 1, {"g"}, 1},
    [TK_SUM_SQUARES_PART] = {"sum_squares_part", "amp_reduce.cl", 1, {"g"}, 1},
    [TK_AMP_PASS_PART]    = {"amp_pass_part", "amp_reduce.cl", 1, {"g"}, 1},
};

static const char *const dtype_macro[3] = {"f32", "bf16", "f16"}; /* by ampx_dtype */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The kernels' layout: the CPU one (one work item per row or chunk, runs of vectors per work
 * item, the packed GEMM for gemm=auto) on CPU devices, the work-group one (one work-group per
 * row or chunk, grid-stride loops, the tiled GEMM) elsewhere; paths=item or paths=workgroup
 * takes one on any device, so both are tested on every implementation. */
int ocl_item_paths(const ampx_context *ctx) {
    if (ctx->paths == OCL_PATHS_ITEM) return 1;
    if (ctx->paths == OCL_PATHS_WORKGROUP) return 0;
    return ctx->cpu_device;
}

/* The row kernels' layout (softmax, the cross-entropy's rows, layer norm, unscale_check, the
 * chunks of amp_reduce.cl; the tiled attention's block of rows, attention.c): one work item
 * per row in the CPU layout (no barriers, vector loads; PoCL runs a work-group's items one
 * after the other), one work-group per row otherwise. AMPX_OPENCL_ROWS=group or =item
 * overrides the device's choice (not a paths= option). */
int ocl_row_items(const ampx_context *ctx) {
    const char *e = getenv("AMPX_OPENCL_ROWS");
    if (ctx->paths == OCL_PATHS_AUTO && e && strcmp(e, "group") == 0) return 0;
    if (ctx->paths == OCL_PATHS_AUTO && e && strcmp(e, "item") == 0) return 1;
    return ocl_item_paths(ctx);
}

static ampx_status build_slot(ampx_context *ctx, ocl_typed k, const unsigned *dt,
                              ocl_typed_slot *slot) {
    const typed_def *d = &typed_defs[k];
    unsigned file      = 0;
    while (file < ampx_ocl_typed_count && strcmp(ampx_ocl_typed_names[file], d->file) != 0)
        file++;
    if (file == ampx_ocl_typed_count)
        return ocl_fail(ctx, AMPX_ERR_DEVICE, "opencl: kernels/opencl/typed/%s is not embedded",
                        d->file);
    char opts[512], what[128];
    slot->row_items = d->rows && ocl_row_items(ctx);
    int len         = snprintf(opts, sizeof opts, "%s -DAMPX_TYPED=1 -DVW=%d -DVEC_RUN=%d -DK_%s%s",
                               ctx->build_opts, ctx->vw, ocl_vec_run(ctx), d->kernel,
                       slot->row_items ? " -DROW_ITEMS=1" : "");
    int wl          = snprintf(what, sizeof what, "typed/%s %s", d->file, d->kernel);
    for (unsigned i = 0; i < d->n_tensors; i++) {
        len += snprintf(opts + len, sizeof opts - (size_t)len, " -DT_%s=%s", d->tensors[i],
                        dtype_macro[dt[i]]);
        wl += snprintf(what + wl, sizeof what - (size_t)wl, "%s%s=%s", i ? "," : " ", d->tensors[i],
                       dtype_macro[dt[i]]);
    }
    double t0      = now_ms();
    ocl_source src = {2,
                      {ampx_ocl_prelude, ampx_ocl_typed_sources[file]},
                      {ampx_ocl_prelude_size, ampx_ocl_typed_sizes[file]}};
    int hit        = 0;
    OCL_TRY(ocl_program_get(ctx, &src, opts, what, ocl_typed_cache_use(ctx), &slot->program, &hit));
    cl_int err;
    slot->kernel = clCreateKernel(slot->program, d->kernel, &err);
    if (err != CL_SUCCESS) {
        clReleaseProgram(slot->program);
        slot->program = NULL;
        slot->kernel  = NULL;
        return ocl_fail(ctx, ocl_status_of(err), "opencl: clCreateKernel(%s): %s", what,
                        ocl_err_name(err));
    }
    double ms = now_ms() - t0;
    ctx->typed_ms += ms;
    if (hit)
        ctx->typed_cached++;
    else
        ctx->typed_built++;
    ocl_log(ctx, AMPX_LOG_DEBUG, "opencl: %s %s in %.0f ms", what,
            hit ? "loaded from the disk cache" : "built", ms);
    return AMPX_OK;
}

ocl_args ocl_args_typed(ampx_context *ctx, ocl_typed k, const ampx_tensor *t0,
                        const ampx_tensor *t1, const ampx_tensor *t2) {
    const typed_def *d           = &typed_defs[k];
    ocl_args a                   = {ctx, NULL, d->kernel, 0, CL_SUCCESS, AMPX_OK, 0};
    const ampx_tensor *const t[] = {t0, t1, t2};
    unsigned dt[3] = {0, 0, 0}, combo = 0;
    for (unsigned i = 0; i < d->n_tensors; i++) {
        /* an absent tensor builds as f32 (its kernel does not touch it) */
        dt[i] = t[i] && t[i]->buf ? (unsigned)t[i]->dtype : 0u;
        if (dt[i] > 2) {
            a.st = ocl_fail(ctx, AMPX_ERR_INVALID, "%s: %s has dtype %u", d->kernel, d->tensors[i],
                            dt[i]);
            return a;
        }
        combo = combo * 3 + dt[i];
    }
    ocl_typed_slot *slot = &ctx->typed[k][combo];
    if (!slot->kernel) a.st = build_slot(ctx, k, dt, slot);
    a.kernel    = slot->kernel;
    a.row_items = slot->row_items;
    return a;
}

int ocl_vec_run(const ampx_context *ctx) {
    const char *e = getenv("AMPX_OPENCL_VEC_RUN");
    int r         = e ? atoi(e) : 0;
    if (r >= 1 && r <= 1024) return r;
    return ocl_item_paths(ctx) ? 16 : 1;
}

uint64_t ocl_vec_items(const ampx_context *ctx, uint64_t n) {
    uint64_t run  = (uint64_t)ocl_vec_run(ctx);
    uint64_t vecs = (n / (uint64_t)ctx->vw + run - 1) / run, tail = n % (uint64_t)ctx->vw;
    return vecs > tail ? vecs : tail;
}

void ocl_typed_free(ampx_context *ctx) {
    for (int k = 0; k < TK_COUNT; k++)
        for (int c = 0; c < OCL_TYPED_COMBOS; c++) {
            if (ctx->typed[k][c].kernel) clReleaseKernel(ctx->typed[k][c].kernel);
            if (ctx->typed[k][c].program) clReleaseProgram(ctx->typed[k][c].program);
        }
    memset(ctx->typed, 0, sizeof ctx->typed);
}
