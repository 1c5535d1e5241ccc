/* gemm_tune.c — the parameters of the tuned GEMM kernel (gemm_tuned.c) per device, and the
 * tuning run.
 *
 * Parameters, first match wins when a context is created:
 *   - tune=force: a tuning run now;
 *   - the parameter file <cache dir>/gemm-<key>.params, when it parses and its values pass
 *     this device's limits (gemm_params.c; the key hashes the platform, device, driver, build
 *     options and kernel source, so another driver or a changed kernel never reads it);
 *     a file that does not is named in one WARN line and ignored;
 *   - tune=on: a tuning run now (the first time a device is seen), stored in that file;
 *   - defaults from device queries (device type, local memory, work-group size, preferred
 *     float vector width).
 * A tuning run times every candidate of a small grid (tune_grid=tiny: two candidates on one
 * small shape, for tests) on representative shapes with bf16 operands and an f32 C,
 * alternately (round after round, so load bursts hit all alike), and keeps the fastest. Like the
 * typed kernels, each (A, B, parameters) program is built on first use; on GPUs and accelerators
 * through the disk cache (program.c), on CPU devices not (typed.c says why).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ocl.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------
// Defaults from device queries

/* CPU devices (PoCL): 4 x 4 items on a 64 x 64 tile, each a 16 x 16 block in float16
 * vectors (PoCL runs a work-group's items one after the other, vectorizing within each); the
 * staged slices are the packed panels a CPU BLAS would make. Others: CLBlast's xgemm
 * defaults, 16 x 16 items on a 64 x 64 tile. */
static ocl_gemm_params default_params(const ampx_context *ctx) {
    if (ctx->cpu_device) return (ocl_gemm_params){64, 64, 64, 4, 4, 16, 0, 0};
    cl_uint pref = 1;
    clGetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof pref, &pref, NULL);
    uint32_t vwn = pref >= 4 ? 4 : pref >= 2 ? 2 : 1;
    return (ocl_gemm_params){64, 64, 16, 16, 16, vwn, 0, 0};
}

// ---------------------------------------------------------------------------------------
// The tuning run

typedef struct tune_shape {
    uint64_t m, n, k;
} tune_shape;

/* Candidates: the default first, then a grid around it. */
static const ocl_gemm_params grid_cpu[] = {
    {64, 64, 64, 4, 4, 16, 0, 0},    {128, 128, 32, 8, 8, 16, 0, 0}, {64, 64, 32, 4, 4, 16, 0, 0},
    {128, 128, 64, 8, 8, 16, 0, 0},  {96, 64, 64, 6, 4, 16, 0, 0},   {64, 64, 64, 8, 4, 16, 0, 0},
    {128, 128, 64, 16, 4, 16, 0, 0}, {128, 64, 32, 8, 4, 16, 0, 0},  {64, 128, 32, 4, 8, 16, 0, 0},
    {32, 64, 64, 4, 2, 16, 0, 0},    {128, 128, 16, 8, 8, 16, 0, 0}, {64, 64, 32, 8, 2, 16, 0, 0},
};
static const ocl_gemm_params grid_gpu[] = {
    {64, 64, 16, 16, 16, 4, 0, 0},   {64, 64, 16, 16, 16, 2, 0, 0},  {64, 64, 32, 16, 16, 4, 0, 0},
    {128, 128, 16, 16, 16, 4, 0, 0}, {64, 128, 16, 16, 16, 4, 0, 0}, {128, 64, 16, 16, 16, 4, 0, 0},
    {32, 32, 16, 8, 8, 4, 0, 0},     {64, 64, 16, 8, 8, 4, 0, 0},    {128, 128, 8, 16, 16, 8, 0, 0},
    {32, 64, 32, 8, 16, 2, 0, 0},    {64, 64, 8, 16, 16, 1, 0, 0},   {32, 32, 32, 16, 16, 1, 0, 0},
};
static const tune_shape shapes_full[] = {{512, 512, 512}, {1024, 768, 768}};
static const tune_shape shapes_tiny[] = {{64, 64, 64}};

typedef struct tune_bufs {
    ampx_buffer a, b, c;
} tune_bufs;

/* Seconds for one GEMM of shape s with kernel, enqueue to completion; < 0 when it fails. */
/* The tuning GEMM of shape s: bf16 operands, an f32 C. */
static ampx_gemm_args tune_args(tune_bufs *bufs, const tune_shape *s) {
    ampx_gemm_args g = {.size = sizeof g, .m = s->m, .n = s->n, .k = s->k, .batch = 1};
    g.lda = s->k, g.ldb = s->n, g.ldc = s->n, g.alpha = 1.0f, g.beta = 0.0f;
    g.a = (ampx_tensor){&bufs->a, 0, AMPX_BF16};
    g.b = (ampx_tensor){&bufs->b, 0, AMPX_BF16};
    g.c = (ampx_tensor){&bufs->c, 0, AMPX_F32};
    return g;
}

/* Seconds for one GEMM of shape s with kernel (the tiled one; NULL: the packed one with the
 * block in ctx->gp), enqueue to completion; < 0 when it fails. */
static double time_once(ampx_context *ctx, cl_kernel kernel, const ocl_gemm_params *p,
                        tune_bufs *bufs, const tune_shape *s) {
    ampx_gemm_args g = tune_args(bufs, s);
    if (!kernel && !ocl_gemm_packed_fits(ctx, &g)) return -1.0; /* it would time tiled */
    double t0      = now_s();
    ampx_status st = kernel ? ocl_gemm_tuned_enqueue(ctx, kernel, p, &g, &g.c, NULL, NULL, 0, 1)
                            : ocl_gemm_packed_run(ctx, &g, NULL, NULL, 1);
    if (st != AMPX_OK || clFinish(ctx->queue) != CL_SUCCESS) return -1.0;
    return now_s() - t0;
}

static double median3(const double *t, int n) { /* n <= 3 */
    if (n < 3) return t[0];
    double lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
    return t[2] < lo ? lo : t[2] > hi ? hi : t[2];
}

static double shapes_flops(const tune_shape *shapes, size_t n_shapes) {
    double flops = 0.0;
    for (size_t s = 0; s < n_shapes; s++)
        flops += 2.0 * (double)shapes[s].m * (double)shapes[s].n * (double)shapes[s].k;
    return flops;
}

static ampx_status tune_buffers(ampx_context *ctx, tune_bufs *bufs, const tune_shape *s,
                                size_t n_shapes) {
    uint64_t ea = 0, eb = 0, ec = 0;
    for (size_t i = 0; i < n_shapes; i++) {
        ea = s[i].m * s[i].k > ea ? s[i].m * s[i].k : ea;
        eb = s[i].k * s[i].n > eb ? s[i].k * s[i].n : eb;
        ec = s[i].m * s[i].n > ec ? s[i].m * s[i].n : ec;
    }
    uint64_t bytes[3] = {ea * 2, eb * 2, ec * 4};
    ampx_buffer *b[3] = {&bufs->a, &bufs->b, &bufs->c};
    for (int i = 0; i < 3; i++) {
        cl_int err;
        b[i]->bytes = bytes[i];
        b[i]->mem   = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes[i], NULL, &err);
        if (err != CL_SUCCESS) return ocl_check(ctx, err, "gemm tuning", "clCreateBuffer");
        /* 0x3c00 in every 16-bit half: bf16 1.0078125, f32 ~0.0078; finite values */
        cl_ushort pattern = 0x3c00;
        err = clEnqueueFillBuffer(ctx->queue, b[i]->mem, &pattern, sizeof pattern, 0, bytes[i], 0,
                                  NULL, NULL);
        if (err != CL_SUCCESS) return ocl_check(ctx, err, "gemm tuning", "clEnqueueFillBuffer");
    }
    return AMPX_OK;
}

#define MAX_GRID 12
#define MAX_SHAPES 2
#define ROUNDS 3

/* The sum over the shapes of each shape's median over the rounds (a candidate's score). */
static double median_total(double t[][ROUNDS], size_t n_shapes, int rounds) {
    double total = 0.0;
    for (size_t s = 0; s < n_shapes; s++)
        total += median3(t[s], rounds);
    return total;
}
AMPX_STATIC_ASSERT(sizeof grid_cpu / sizeof grid_cpu[0] <= MAX_GRID, "grid_cpu fits MAX_GRID");
AMPX_STATIC_ASSERT(sizeof grid_gpu / sizeof grid_gpu[0] <= MAX_GRID, "grid_gpu fits MAX_GRID");
AMPX_STATIC_ASSERT(sizeof shapes_full / sizeof shapes_full[0] <= MAX_SHAPES, "shapes fit");

/* Builds every candidate that fits the device, times them alternately (one GEMM of each
 * shape per candidate per round, after one warm-up round), so that a burst of other load
 * hits them alike, and keeps the least sum over the shapes of the per-shape medians. */
static ampx_status tune_grid(ampx_context *ctx, const ocl_gemm_params *grid, size_t n_grid,
                             const tune_shape *shapes, size_t n_shapes, int rounds, tune_bufs *bufs,
                             double *best) {
    ocl_typed_slot slot[MAX_GRID];
    double t[MAX_GRID][MAX_SHAPES][ROUNDS];
    int ok[MAX_GRID];
    memset(slot, 0, sizeof slot);
    /* candidates are built once per tuning run: on CPU devices never stored (a second run,
     * tune=force, would pay PoCL's binary for every one, "Program cache") */
    ocl_cache_use use = ctx->cpu_device ? OCL_CACHE_NONE : OCL_CACHE_ONE;
    for (size_t i = 0; i < n_grid; i++) /* a candidate that does not build is skipped */
        ok[i] = !ocl_gemm_params_check(&grid[i], &ctx->gt.lim, NULL, 0) &&
                ocl_gemm_tuned_build(ctx, &grid[i], 1, 1, use, &slot[i]) == AMPX_OK;
    for (int r = -1; r < rounds; r++)
        for (size_t i = 0; i < n_grid; i++)
            for (size_t s = 0; s < n_shapes && ok[i]; s++) {
                double x = time_once(ctx, slot[i].kernel, &grid[i], bufs, &shapes[s]);
                ok[i]    = x >= 0.0;
                if (r >= 0) t[i][s][r] = x;
            }
    double flops = shapes_flops(shapes, n_shapes);
    for (size_t i = 0; i < n_grid; i++) {
        ocl_slot_release(&slot[i]);
        if (!ok[i]) continue;
        double total = median_total(t[i], n_shapes, rounds);
        char ps[96];
        ocl_gemm_params_str(&grid[i], ps, sizeof ps);
        ocl_log(ctx, AMPX_LOG_INFO, "opencl: gemm tuning: %s: %.1f GFLOP/s", ps,
                flops / total * 1e-9);
        if (total > 0.0 && (*best < 0.0 || total < *best)) {
            *best          = total;
            ctx->gt.p      = grid[i];
            ctx->gt.gflops = flops / total * 1e-9;
        }
    }
    return AMPX_OK;
}

/* The packed kernel's blocks, the device's default first: for 16-float vectors (AVX-512's
 * 32 registers) and for narrower ones (AVX2's 16). */
#define N_BLOCKS 6
static const uint32_t blocks_16[N_BLOCKS][2] = {{6, 32}, {4, 64}, {8, 32},
                                                {6, 16}, {4, 32}, {12, 16}};
static const uint32_t blocks_8[N_BLOCKS][2]  = {{6, 16}, {4, 16}, {8, 16},
                                                {4, 32}, {3, 32}, {2, 64}};

/* Times the packed kernel with each block as tune_grid does the tiled one (alternately, the
 * least sum of per-shape medians wins) and leaves the winner in ctx->gp. Each candidate
 * keeps its own programs (ctx->gp swapped in and out), built without the disk cache. */
static void tune_blocks(ampx_context *ctx, size_t n_cand, const tune_shape *shapes, size_t n_shapes,
                        int rounds, tune_bufs *bufs) {
    const uint32_t(*blocks)[2] = ctx->gp.nr >= 32 ? blocks_16 : blocks_8;
    ocl_packed cand[N_BLOCKS], keep = ctx->gp;
    double t[N_BLOCKS][MAX_SHAPES][ROUNDS];
    int ok[N_BLOCKS];
    for (size_t i = 0; i < n_cand; i++) {
        memset(&cand[i], 0, sizeof cand[i]);
        cand[i].mr = blocks[i][0], cand[i].nr = blocks[i][1], cand[i].fma = keep.fma;
        cand[i].cap      = keep.cap;
        cand[i].no_cache = 1;
        ok[i]            = 1;
    }
    for (int r = -1; r < rounds; r++)
        for (size_t i = 0; i < n_cand; i++) {
            ctx->gp = cand[i];
            for (size_t s = 0; s < n_shapes && ok[i]; s++) {
                double x = time_once(ctx, NULL, NULL, bufs, &shapes[s]);
                ok[i]    = x >= 0.0;
                if (r >= 0) t[i][s][r] = x;
            }
            cand[i] = ctx->gp;
        }
    ctx->gp     = keep;
    double best = -1.0, flops = shapes_flops(shapes, n_shapes);
    for (size_t i = 0; i < n_cand; i++) {
        ocl_packed_release(&cand[i]);
        if (!ok[i]) continue;
        double total = median_total(t[i], n_shapes, rounds);
        ocl_log(ctx, AMPX_LOG_INFO, "opencl: gemm tuning: packed block %ux%u: %.1f GFLOP/s",
                cand[i].mr, cand[i].nr, flops / total * 1e-9);
        if (total > 0.0 && (best < 0.0 || total < best)) {
            best = total;
            ocl_packed_release(&ctx->gp); /* built for another block, if any */
            ctx->gp.mr = cand[i].mr, ctx->gp.nr = cand[i].nr;
        }
    }
    if (best >= 0.0) ctx->gt.p.mr = ctx->gp.mr, ctx->gt.p.nr = ctx->gp.nr;
}

/* The tuning run: the device type's grid (tiny: its first two candidates on one 64^3 shape,
 * one round); the winner into ctx->gt. On CPU devices also the packed kernel's block (unless
 * block_given), whose winner goes into ctx->gp and the parameter file. */
static ampx_status tune(ampx_context *ctx, int tiny, int block_given) {
    const ocl_gemm_params *grid = grid_gpu;
    size_t n_grid               = sizeof grid_gpu / sizeof grid_gpu[0];
    if (ctx->cpu_device) {
        grid   = grid_cpu;
        n_grid = sizeof grid_cpu / sizeof grid_cpu[0];
    }
    const tune_shape *shapes = tiny ? shapes_tiny : shapes_full;
    size_t n_shapes          = tiny ? 1 : sizeof shapes_full / sizeof shapes_full[0];
    if (tiny) n_grid = 2;
    tune_bufs bufs;
    memset(&bufs, 0, sizeof bufs);
    double best = -1.0, t_start = now_s();
    ampx_status st = tune_buffers(ctx, &bufs, shapes, n_shapes);
    if (st == AMPX_OK)
        st = tune_grid(ctx, grid, n_grid, shapes, n_shapes, tiny ? 1 : ROUNDS, &bufs, &best);
    if (st == AMPX_OK && best >= 0.0 && ctx->cpu_device && !block_given)
        tune_blocks(ctx, tiny ? 2 : N_BLOCKS, shapes, n_shapes, tiny ? 1 : ROUNDS, &bufs);
    for (int i = 0; i < 3; i++) {
        ampx_buffer *b = i == 0 ? &bufs.a : i == 1 ? &bufs.b : &bufs.c;
        if (b->mem) clReleaseMemObject(b->mem);
    }
    if (st == AMPX_OK && best < 0.0)
        st = ocl_fail(ctx, AMPX_ERR_DEVICE, "opencl: gemm tuning: no candidate ran on %s",
                      ctx->device_name);
    if (st == AMPX_OK)
        ocl_log(ctx, AMPX_LOG_INFO, "opencl: gemm tuning took %.1f s", now_s() - t_start);
    return st;
}

// ---------------------------------------------------------------------------------------
// The parameter file

static void params_path(const ampx_context *ctx, char *out, size_t cap) {
    snprintf(out, cap, "%s/gemm-%016llx.params", ctx->cache_dir, (unsigned long long)ctx->gt.key);
}

/* 1 when the file exists, parses and fits this device (then in *p and *gflops); a file that
 * does not is named in one WARN line unless quiet. */
static int load_params(ampx_context *ctx, ocl_gemm_params *p, double *gflops, int quiet) {
    char path[600], why[160];
    params_path(ctx, path, sizeof path);
    size_t size = 0;
    char *text  = ocl_read_file(path, &size);
    if (!text) {
        if (!quiet && access(path, F_OK) == 0)
            ocl_log(ctx, AMPX_LOG_WARN,
                    "opencl: gemm parameter file %s is empty or unreadable; "
                    "ignored",
                    path);
        return 0;
    }
    int ok = ocl_gemm_params_parse(text, size, ctx->gt.key, &ctx->gt.lim, p, gflops, why,
                                   sizeof why) == 0;
    free(text);
    if (!ok && !quiet)
        ocl_log(ctx, AMPX_LOG_WARN, "opencl: gemm parameter file %s ignored: %s", path, why);
    return ok;
}

static void store_params(ampx_context *ctx) {
    char path[600], tmp[640], text[256];
    if (ocl_make_dirs(ctx->cache_dir) != 0) {
        ocl_log(ctx, AMPX_LOG_WARN, "opencl: cannot create cache directory %s", ctx->cache_dir);
        return;
    }
    params_path(ctx, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int n   = ocl_gemm_params_format(&ctx->gt.p, ctx->gt.key, ctx->gt.gflops, text, sizeof text);
    FILE *f = n > 0 ? fopen(tmp, "wb") : NULL;
    int ok  = f && fwrite(text, 1, (size_t)n, f) == (size_t)n;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) == 0) {
        ocl_log(ctx, AMPX_LOG_INFO, "opencl: wrote gemm parameters %s", path);
        return;
    }
    ocl_log(ctx, AMPX_LOG_WARN, "opencl: cannot write gemm parameters %s", path);
    unlink(tmp);
}

ampx_status ocl_gemm_tune_init(ampx_context *ctx, int tune_mode, int tiny,
                               const ocl_gemm_params *given, int block_given) {
    cl_ulong local = 0;
    size_t max_wg  = 1;
    clGetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    ctx->gt.lim  = (ocl_gemm_limits){local, max_wg};
    ocl_source s = ocl_gemm_tuned_source();
    /* the key covers the kernel source and the options every program of it shares */
    ctx->gt.key  = ocl_cache_key(ctx, ctx->build_opts, &s);
    ctx->gt.p    = default_params(ctx);
    ctx->gt.from = "defaults";
    if (ocl_gemm_params_check(&ctx->gt.p, &ctx->gt.lim, NULL, 0))
        ctx->gt.p = (ocl_gemm_params){16, 16, 8, 4, 4, 1, 0, 0}; /* 1 KB, 16 items */
    if (given) {
        char why[160];
        if (ocl_gemm_params_check(given, &ctx->gt.lim, why, sizeof why))
            return ocl_fail(ctx, AMPX_ERR_INVALID, "opencl: gemm_params: %s on %s", why,
                            ctx->device_name);
        ctx->gt.p    = *given;
        ctx->gt.from = "option";
    }
    /* the file (read without a WARN when tune=force replaces it anyway): its tiles unless
     * gemm_params= gave some, its block unless gemm_block= did */
    ocl_gemm_params fp;
    double fg = 0.0;
    int force = tune_mode == OCL_TUNE_FORCE;
    int have  = ctx->cache_dir[0] && (!given || !block_given) && load_params(ctx, &fp, &fg, force);
    if (have && !block_given && fp.mr && (given || !force)) ctx->gp.mr = fp.mr, ctx->gp.nr = fp.nr;
    if (given) return AMPX_OK;
    if (have && !force) {
        ctx->gt.p = fp, ctx->gt.gflops = fg, ctx->gt.from = "file";
        return AMPX_OK;
    }
    if (tune_mode == OCL_TUNE_NO) return AMPX_OK;
    OCL_TRY(tune(ctx, tiny, block_given));
    /* a block given as an option is not the tuning's: the file keeps the block it had */
    if (block_given) ctx->gt.p.mr = have ? fp.mr : 0, ctx->gt.p.nr = have ? fp.nr : 0;
    ctx->gt.from = "tuned";
    if (ctx->cache_dir[0]) store_params(ctx);
    return AMPX_OK;
}
