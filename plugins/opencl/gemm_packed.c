/* gemm_packed.c — GEMM and GEMM_FP8 on CPU devices from packed panels: gemm_pack copies op(A)
 * into panels of MR rows and op(B) into panels of NR columns, each interleaved along k and
 * widened to f32 once; gemm_packed gives each work item one MR x NR block of C, summed over the
 * whole k from the two panels in registers (kernels/opencl/typed/gemm_tuned.cl). This is what
 * a CPU BLAS does, and on PoCL it is 2x-3x the tiled kernel, whose local memory and barriers
 * PoCL turns into loops over a work-group's items with what lives across them in memory
 * (docs/OPENCL.md). `auto` uses it on CPU devices; gemm=packed asks for it anywhere.
 *
 * The block: MR x NR = 6 x 32 (twelve 16-float accumulators, AVX-512's 32 registers hold them
 * and the two vectors of B) on devices whose native float vector is 16 wide, else 6 x 16
 * (twelve 8-float halves in AVX2's 16); option gemm_block=MRxNR overrides it.
 * The panels live in device scratch (slots 0 and 1, as the convert path's copies), one set per
 * batch unless the operand's batch stride is 0 (then one for all); batches go in runs whose
 * panels fit PACK_CAP bytes. A GEMM with k == 0, or whose single batch's panels would not fit
 * one allocation, runs the tiled kernel instead. Products and sums are f32 in k order with
 * fma (mad where the device has no fused multiply-add), alpha (times GEMM_FP8's factors) and
 * beta in f32 at the end, the epilogue and the one rounding in store_block, as the tiled
 * kernel does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

#define PACK_CAP ((uint64_t)256 << 20)
#define PACK_RUN 8 /* vectors of k per gemm_pack item (its -DPACK_RUN) */

/* The cap on one run's panels: PACK_CAP and the device's largest allocation, or (for tests:
 * runs of a few batches, and GEMMs too large for it on the tiled kernel)
 * AMPX_OPENCL_PACK_CAP bytes. Read once, when the context is made. */
static uint64_t pack_cap(const ampx_context *ctx) {
    const char *e        = getenv("AMPX_OPENCL_PACK_CAP");
    char *end            = NULL;
    unsigned long long v = e ? strtoull(e, &end, 10) : 0;
    if (e && end != e && *end == 0 && v > 0) return v;
    return ctx->max_alloc < PACK_CAP ? ctx->max_alloc : PACK_CAP;
}

void ocl_gemm_packed_init(ampx_context *ctx, uint32_t mr, uint32_t nr) {
    if (mr == 0) {
        cl_uint native = 0;
        clGetDeviceInfo(ctx->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof native, &native,
                        NULL);
        mr = 6;
        nr = native >= 16 ? 32 : 16;
    }
    ctx->gp.mr              = mr;
    ctx->gp.nr              = nr;
    cl_device_fp_config fpc = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fpc, &fpc, NULL);
    ctx->gp.fma = (fpc & CL_FP_FMA) != 0;
    ctx->gp.cap = pack_cap(ctx);
}

void ocl_packed_release(ocl_packed *gp) {
    ocl_slot_release(&gp->mk);
    for (int i = 0; i < 10; i++)
        ocl_slot_release(&gp->pack[i / 2][i % 2]);
}

void ocl_gemm_packed_free(ampx_context *ctx) {
    ocl_packed_release(&ctx->gp);
}

static ocl_cache_use packed_cache_use(const ampx_context *ctx) {
    return ctx->gp.no_cache ? OCL_CACHE_NONE : ocl_typed_cache_use(ctx);
}

/* Floats of one batch's panels of a rows x k operand in panels of pw. */
static uint64_t panel_floats(uint64_t rows, uint64_t k, uint32_t pw) {
    return (rows + pw - 1) / pw * pw * k;
}

/* The panels of X' (rows x k: op(A), or op(B)^T) of batches [b0, b0 + nz) into dst. */
static ampx_status pack(ampx_context *ctx, const ampx_tensor *x, cl_mem dst, uint64_t rows,
                        uint64_t k, uint64_t ld, uint64_t sx, int along_k, int of_b, uint64_t b0,
                        uint64_t nz) {
    unsigned dt = ocl_gemm_dt_index(x->dtype);
    if (dt > 4)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "gemm: operand dtype %u", (unsigned)x->dtype);
    uint32_t pw          = of_b ? ctx->gp.nr : ctx->gp.mr;
    ocl_typed_slot *slot = &ctx->gp.pack[dt][of_b];
    if (!slot->kernel) {
        char defs[96], what[96];
        snprintf(defs, sizeof defs, "-DK_gemm_pack -DT_x=%s -DPW=%u -DPACK_RUN=%d",
                 ocl_gemm_dt_names[dt], pw, PACK_RUN);
        snprintf(what, sizeof what, "typed/gemm_tuned.cl x=%s,pw=%u", ocl_gemm_dt_names[dt], pw);
        OCL_TRY(ocl_gemm_build(ctx, defs, what, "gemm_pack", packed_cache_use(ctx), slot));
    }
    ocl_args a = {ctx, slot->kernel, "gemm_pack", 0, CL_SUCCESS, AMPX_OK, 0};
    ocl_arg_fixed(&a, x);
    ocl_arg_mem(&a, dst);
    ocl_arg_u64(&a, rows);
    ocl_arg_u64(&a, k);
    ocl_arg_u64(&a, ld);
    ocl_arg_u64(&a, sx);
    ocl_arg_i32(&a, along_k);
    ocl_arg_u64(&a, b0);
    uint64_t run     = (uint64_t)ctx->vw * PACK_RUN; /* k per item: gemm_pack's KC */
    size_t global[3] = {(size_t)((k + run - 1) / run), (size_t)((rows + pw - 1) / pw), (size_t)nz};
    size_t local[3]  = {1, 1, 1};
    return ocl_launch_nd(&a, 3, global, local);
}

/* gemm_packed over batches [b0, b0 + nb), panels in pa and pb (pa_s, pb_s floats apart). */
static ampx_status multiply(ampx_context *ctx, const ampx_gemm_args *g, cl_mem pa, uint64_t pa_s,
                            cl_mem pb, uint64_t pb_s, const ampx_tensor *dq_a,
                            const ampx_tensor *dq_b, uint64_t b0, uint64_t nb) {
    ocl_typed_slot *slot = &ctx->gp.mk;
    if (!slot->kernel) {
        char defs[96], what[64];
        snprintf(defs, sizeof defs, "-DK_gemm_packed -DMR=%u -DNR=%u -DGP_FMA=%s", ctx->gp.mr,
                 ctx->gp.nr, ctx->gp.fma ? "fma" : "mad");
        snprintf(what, sizeof what, "typed/gemm_tuned.cl %ux%u", ctx->gp.mr, ctx->gp.nr);
        OCL_TRY(ocl_gemm_build(ctx, defs, what, "gemm_packed", packed_cache_use(ctx), slot));
    }
    ocl_args a = {ctx, slot->kernel, "gemm_packed", 0, CL_SUCCESS, AMPX_OK, 0};
    ocl_arg_mem(&a, pa);
    ocl_arg_u64(&a, pa_s);
    ocl_arg_mem(&a, pb);
    ocl_arg_u64(&a, pb_s);
    ocl_arg_tensor(&a, &g->c);
    ocl_arg_tensor(&a, &g->c); /* out: C */
    ocl_arg_u64(&a, g->m);
    ocl_arg_u64(&a, g->n);
    ocl_arg_u64(&a, g->k);
    ocl_arg_u64(&a, g->ldc);
    ocl_arg_u64(&a, g->stride_c);
    ocl_arg_f32(&a, g->alpha);
    ocl_arg_f32(&a, g->beta);
    ocl_arg_u64(&a, b0);
    ocl_arg_fixed(&a, dq_a);
    ocl_arg_fixed(&a, dq_b);
    ocl_arg_tensor(&a, &g->bias);
    ocl_arg_tensor(&a, &g->pre_act);
    ocl_arg_u32(&a, (uint32_t)g->act);
    size_t global[3] = {(size_t)((g->m + ctx->gp.mr - 1) / ctx->gp.mr),
                        (size_t)((g->n + ctx->gp.nr - 1) / ctx->gp.nr), (size_t)nb};
    size_t local[3]  = {1, 1, 1};
    return ocl_launch_nd(&a, 3, global, local);
}

/* One batch's panels of A and B in floats; 1 when they fit the cap (and k > 0). */
static int panels(const ampx_context *ctx, const ampx_gemm_args *g, uint64_t *fa, uint64_t *fb) {
    *fa = panel_floats(g->m, g->k, ctx->gp.mr), *fb = panel_floats(g->n, g->k, ctx->gp.nr);
    return g->k != 0 && *fa * 4 <= ctx->gp.cap && *fb * 4 <= ctx->gp.cap;
}

int ocl_gemm_packed_fits(const ampx_context *ctx, const ampx_gemm_args *g) {
    uint64_t fa, fb;
    return panels(ctx, g, &fa, &fb);
}

ampx_status ocl_gemm_packed_run(ampx_context *ctx, const ampx_gemm_args *g, const ampx_tensor *dq_a,
                                const ampx_tensor *dq_b, uint64_t step) {
    uint64_t fa, fb, cap = ctx->gp.cap;
    int shared_a = g->stride_a == 0, shared_b = g->stride_b == 0;
    if (!panels(ctx, g, &fa, &fb)) { /* the tiled kernel: see the top */
        for (uint64_t b0 = 0; b0 < g->batch; b0 += step)
            OCL_TRY(ocl_gemm_tuned_launch(ctx, g, &g->c, dq_a, dq_b, b0, step));
        return AMPX_OK;
    }
    /* batches per run: as many as the panels of both operands fit the cap, a multiple of step
     * (1 when C matrices overlap: one batch after the other) */
    uint64_t per = (shared_a ? 0 : fa) + (shared_b ? 0 : fb), run = g->batch;
    if (per && run > cap / 4 / per) run = cap / 4 / per;
    if (run < 1) run = 1;
    if (step < run) run = step;
    cl_mem pa = ocl_scratch_get(ctx, "gemm", 0, (size_t)((shared_a ? 1 : run) * fa * 4));
    cl_mem pb =
        pa ? ocl_scratch_get(ctx, "gemm", 1, (size_t)((shared_b ? 1 : run) * fb * 4)) : NULL;
    if (!pb) return AMPX_ERR_NO_MEMORY;
    for (uint64_t b0 = 0; b0 < g->batch; b0 += run) {
        uint64_t nb = g->batch - b0 < run ? g->batch - b0 : run;
        if (!shared_a || b0 == 0)
            OCL_TRY(pack(ctx, &g->a, pa, g->m, g->k, g->lda, g->stride_a, !g->trans_a, 0,
                         shared_a ? 0 : b0, shared_a ? 1 : nb));
        if (!shared_b || b0 == 0)
            OCL_TRY(pack(ctx, &g->b, pb, g->n, g->k, g->ldb, g->stride_b, g->trans_b, 1,
                         shared_b ? 0 : b0, shared_b ? 1 : nb));
        OCL_TRY(multiply(ctx, g, pa, shared_a ? 0 : fa, pb, shared_b ? 0 : fb, dq_a, dq_b, b0, nb));
    }
    return AMPX_OK;
}
