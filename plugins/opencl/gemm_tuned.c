/* gemm_tuned.c — the tuned GEMM kernel (kernels/opencl/typed/gemm_tuned.cl): its programs per
 * (A, B) dtype pair and parameters, and its launch. gemm_tune.c picks the parameters (and
 * times candidates through the same build and enqueue); gemm.c and gemm_packed.c launch it.
 * Like the typed kernels, each (A, B, parameters) program is built on first use; on GPUs and
 * accelerators through the disk cache (program.c), on CPU devices not (typed.c says why).
 */
#include <stdio.h>
#include <string.h>

#include "ocl.h"

const char *const ocl_gemm_dt_names[5] = {"f32", "bf16", "f16", "e4m3", "e5m2"};
#define dt_macro ocl_gemm_dt_names

unsigned ocl_gemm_dt_index(ampx_dtype d) {
    return d == AMPX_E4M3 ? 3 : d == AMPX_E5M2 ? 4 : d <= AMPX_F16 ? (unsigned)d : 5;
}

ocl_source ocl_gemm_tuned_source(void) {
    unsigned f = 0;
    while (f < ampx_ocl_typed_count && strcmp(ampx_ocl_typed_names[f], "gemm_tuned.cl") != 0)
        f++;
    ocl_source src = {2, {ampx_ocl_prelude, NULL}, {ampx_ocl_prelude_size, 0}};
    if (f < ampx_ocl_typed_count) {
        src.text[1] = ampx_ocl_typed_sources[f];
        src.size[1] = ampx_ocl_typed_sizes[f];
    } else {
        src.n = 1; /* not embedded: the build fails and says so */
    }
    return src;
}

/* Builds `kernel` of gemm_tuned.cl with the typed kernels' options and `defs` into slot,
 * using the disk cache as `use` says (`what` names it in messages). */
ampx_status ocl_gemm_build(ampx_context *ctx, const char *defs, const char *what,
                           const char *kernel, ocl_cache_use use, ocl_typed_slot *slot) {
    char opts[768];
    snprintf(opts, sizeof opts, "%s -DAMPX_TYPED=1 -DVW=%d %s", ctx->build_opts, ctx->vw, defs);
    ocl_source src = ocl_gemm_tuned_source();
    int hit        = 0;
    OCL_TRY(ocl_program_get(ctx, &src, opts, what, use, &slot->program, &hit));
    cl_int err;
    slot->kernel = clCreateKernel(slot->program, kernel, &err);
    if (err == CL_SUCCESS) return AMPX_OK;
    ocl_slot_release(slot);
    return ocl_fail(ctx, ocl_status_of(err), "opencl: %s (%s): %s", kernel, what,
                    ocl_err_name(err));
}

/* Builds gemm_tuned for p and dtypes a, b into slot, using the disk cache as `use` says;
 * the kernel must run work-groups of MDIMC x NDIMC items (a GPU may allow fewer for a kernel
 * with many registers). */
ampx_status ocl_gemm_tuned_build(ampx_context *ctx, const ocl_gemm_params *p, unsigned a,
                                 unsigned b, ocl_cache_use use, ocl_typed_slot *slot) {
    char defs[256], what[96];
    snprintf(defs, sizeof defs,
             "-DK_gemm_tuned -DT_a=%s -DT_b=%s -DMWG=%u -DNWG=%u -DKWG=%u -DMDIMC=%u -DNDIMC=%u "
             "-DVWN=%u",
             dt_macro[a], dt_macro[b], p->mwg, p->nwg, p->kwg, p->mdimc, p->ndimc, p->vwn);
    snprintf(what, sizeof what, "typed/gemm_tuned.cl a=%s,b=%s", dt_macro[a], dt_macro[b]);
    OCL_TRY(ocl_gemm_build(ctx, defs, what, "gemm_tuned", use, slot));
    size_t wg  = 0;
    cl_int err = clGetKernelWorkGroupInfo(slot->kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof wg, &wg, NULL);
    if (err == CL_SUCCESS && wg < (size_t)p->mdimc * p->ndimc) err = CL_INVALID_WORK_GROUP_SIZE;
    if (err == CL_SUCCESS) return AMPX_OK;
    ocl_slot_release(slot);
    return ocl_fail(ctx, ocl_status_of(err), "opencl: gemm_tuned (%s): %s", what,
                    ocl_err_name(err));
}

void ocl_slot_release(ocl_typed_slot *s) {
    if (s->kernel) clReleaseKernel(s->kernel);
    if (s->program) clReleaseProgram(s->program);
    s->kernel  = NULL;
    s->program = NULL;
}

/* Sets the arguments and enqueues kernel for batches [b0, b0 + nb). */
ampx_status ocl_gemm_tuned_enqueue(ampx_context *ctx, cl_kernel kernel, const ocl_gemm_params *p,
                                   const ampx_gemm_args *g, const ampx_tensor *out,
                                   const ampx_tensor *dq_a, const ampx_tensor *dq_b, uint64_t b0,
                                   uint64_t nb) {
    ocl_args k = {ctx, kernel, "gemm_tuned", 0, CL_SUCCESS, AMPX_OK, 0};
    ocl_arg_fixed(&k, &g->a);
    ocl_arg_fixed(&k, &g->b);
    ocl_arg_tensor(&k, &g->c);
    ocl_arg_tensor(&k, out);
    ocl_arg_u64(&k, g->m);
    ocl_arg_u64(&k, g->n);
    ocl_arg_u64(&k, g->k);
    ocl_arg_u64(&k, g->lda);
    ocl_arg_u64(&k, g->ldb);
    ocl_arg_u64(&k, g->ldc);
    ocl_arg_u64(&k, g->stride_a);
    ocl_arg_u64(&k, g->stride_b);
    ocl_arg_u64(&k, g->stride_c);
    ocl_arg_i32(&k, g->trans_a != 0);
    ocl_arg_i32(&k, g->trans_b != 0);
    ocl_arg_f32(&k, g->alpha);
    ocl_arg_f32(&k, g->beta);
    ocl_arg_u64(&k, b0);
    ocl_arg_fixed(&k, dq_a);
    ocl_arg_fixed(&k, dq_b);
    ocl_arg_tensor(&k, &g->bias); /* the epilogue (none while tuning) */
    ocl_arg_tensor(&k, &g->pre_act);
    ocl_arg_u32(&k, (uint32_t)g->act);
    size_t global[3] = {(size_t)((g->n + p->nwg - 1) / p->nwg) * p->ndimc,
                        (size_t)((g->m + p->mwg - 1) / p->mwg) * p->mdimc, (size_t)nb};
    size_t local[3]  = {p->ndimc, p->mdimc, 1};
    return ocl_launch_nd(&k, 3, global, local);
}

ampx_status ocl_gemm_tuned_launch(ampx_context *ctx, const ampx_gemm_args *g,
                                  const ampx_tensor *out, const ampx_tensor *dq_a,
                                  const ampx_tensor *dq_b, uint64_t b0, uint64_t nb) {
    unsigned a = ocl_gemm_dt_index(g->a.dtype), b = ocl_gemm_dt_index(g->b.dtype);
    if (a > 4 || b > 4)
        return ocl_fail(ctx, AMPX_ERR_INVALID, "gemm: operand dtypes %u, %u", (unsigned)g->a.dtype,
                        (unsigned)g->b.dtype);
    ocl_typed_slot *slot = &ctx->gt.slot[a][b];
    if (!slot->kernel)
        OCL_TRY(ocl_gemm_tuned_build(ctx, &ctx->gt.p, a, b, ocl_typed_cache_use(ctx), slot));
    return ocl_gemm_tuned_enqueue(ctx, slot->kernel, &ctx->gt.p, g, out, dq_a, dq_b, b0, nb);
}

void ocl_gemm_tuned_free(ampx_context *ctx) {
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            ocl_slot_release(&ctx->gt.slot[a][b]);
}
