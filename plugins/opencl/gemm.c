/* gemm.c — batched, strided GEMM: C_b = alpha * op(A_b) * op(B_b) + beta * C_b.
 *
 * Paths (kernels/opencl/gemm.cl), chosen by the `gemm` option:
 *   - f32 x f32 -> f32 (auto on GPUs and accelerators, convert): CLBlast SGEMM. With
 *     beta == 0, C's m x n elements are zeroed first by gemm_beta, so NaN poison in C never
 *     meets 0 * C.
 *   - rows: gemm_rows_<A>_<B>, 6 x 16 register blocks (twelve float8) per work item, loads
 *     specialised per dtype pair; only when asked (with the epilogue: convert).
 *   - packed (gemm_packed.c): op(A) and op(B) copied into f32 panels, one block of C per work
 *     item summed over all of k in registers, as a CPU BLAS does. auto uses it for every dtype
 *     mix on CPU devices (on PoCL 2x-3x tiled, which beats rows and CLBlast: docs/OPENCL.md);
 *     the epilogue runs in its store, as tiled's.
 *   - tiled: gemm_tuned (kernels/opencl/typed/gemm_tuned.cl, gemm_tuned.c), tiles staged in
 *     local memory as f32 with register blocking, its sizes per device (defaults from device
 *     queries or a tuning run). auto uses it for all but f32 on GPUs and accelerators; the
 *     epilogue runs in its store, from the f32 result, before C is rounded.
 *   - convert: A and B (and C when beta != 0) widened to f32 in scratch, in their own
 *     layout; CLBlast multiplies; gemm_store_c rounds the m x n result into C.
 *   - k == 0: C = beta * C (gemm_beta).
 *   - the ABI 1.5 epilogue (bias, activation, pre_act) on the convert path: gemm_epilogue
 *     in place of gemm_store_c reading the f32 result (C itself when C is f32), so nothing is
 *     rounded to C's dtype before the bias and the activation; the bias gradient (column sums
 *     of op(B)) is BIAS_GRAD's typed kernel when op(B) is one matrix of contiguous rows, else
 *     gemm_bias_grad, one work item per column.
 * GEMM_FP8 (ABI 1.7, ocl_gemm_fp8 at the end): packed, rows or tiled with e4m3/e5m2 loads and the
 * device's dequantization factors; with the epilogue, rows' f32 result goes through
 * gemm_epilogue as the convert path's does, tiled's through its store.
 * Every path multiplies and sums in f32, applies alpha and beta in f32 and rounds C once.
 * Batches whose C matrices overlap (stride_c smaller than one C) run one after the other,
 * as the definition's "for b in [0, batch)" orders them.
 */
#include <clblast_c.h>
#include <string.h>

#include "ocl.h"

static const char *clblast_name(CLBlastStatusCode s) {
    switch (s) {
    case CLBlastNotImplemented: return "CLBlastNotImplemented";
    case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
    case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
    case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
    case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
    case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
    case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
    case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
    case CLBlastNoHalfPrecision: return "CLBlastNoHalfPrecision";
    case CLBlastInvalidBatchCount: return "CLBlastInvalidBatchCount";
    case CLBlastInvalidOverrideKernel: return "CLBlastInvalidOverrideKernel";
    case CLBlastMissingOverrideParameter: return "CLBlastMissingOverrideParameter";
    case CLBlastInvalidLocalThreadsTotal: return "CLBlastInvalidLocalThreadsTotal";
    case CLBlastInvalidLocalThreadsDim: return "CLBlastInvalidLocalThreadsDim";
    case CLBlastInvalidGlobalOffset: return "CLBlastInvalidGlobalOffset";
    case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
    case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
    case CLBlastInvalidLeadDimA: return "CLBlastInvalidLeadDimA";
    case CLBlastInvalidLeadDimB: return "CLBlastInvalidLeadDimB";
    case CLBlastInvalidLeadDimC: return "CLBlastInvalidLeadDimC";
    case CLBlastInsufficientMemoryTemp: return "CLBlastInsufficientMemoryTemp";
    case CLBlastDatabaseError: return "CLBlastDatabaseError";
    case CLBlastUnknownError: return "CLBlastUnknownError";
    default: return ocl_err_name((cl_int)s); /* CLBlast passes OpenCL errors through */
    }
}

typedef struct gemm_call {
    const ampx_gemm_args *g;
    cl_mem a, b, c;               /* the buffers CLBlast reads (f32) */
    uint64_t a_off, b_off, c_off; /* in f32 elements */
} gemm_call;

static ampx_status clblast_fail(ampx_context *ctx, const ampx_gemm_args *g, const char *call,
                                uint64_t nb, CLBlastStatusCode st) {
    int oom = st == CLBlastInsufficientMemoryA || st == CLBlastInsufficientMemoryB ||
              st == CLBlastInsufficientMemoryC || st == CLBlastInsufficientMemoryTemp ||
              st == CL_MEM_OBJECT_ALLOCATION_FAILURE || st == CL_OUT_OF_HOST_MEMORY;
    return ocl_fail(ctx, oom ? AMPX_ERR_NO_MEMORY : AMPX_ERR_DEVICE,
                    "gemm: %s(m=%llu n=%llu k=%llu batch=%llu): %s (%d)", call,
                    (unsigned long long)g->m, (unsigned long long)g->n, (unsigned long long)g->k,
                    (unsigned long long)nb, clblast_name(st), (int)st);
}

/* One CLBlast SGEMM of batch b. */
static ampx_status sgemm_one(ampx_context *ctx, const gemm_call *s, uint64_t b, float beta) {
    const ampx_gemm_args *g = s->g;
    cl_command_queue q      = ctx->queue;
    CLBlastStatusCode st    = CLBlastSgemm(
           CLBlastLayoutRowMajor, g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)g->m, (size_t)g->n,
           (size_t)g->k, g->alpha, s->a, (size_t)(s->a_off + b * g->stride_a), (size_t)g->lda, s->b,
           (size_t)(s->b_off + b * g->stride_b), (size_t)g->ldb, beta, s->c,
           (size_t)(s->c_off + b * g->stride_c), (size_t)g->ldc, &q, NULL);
    return st == CLBlastSuccess ? AMPX_OK : clblast_fail(ctx, g, "CLBlastSgemm", 1, st);
}

/* Batches [b0, b0 + nb): one strided-batched call when CLBlast accepts the strides (each at
 * least its matrix's span), else one SGEMM per batch (e.g. stride 0: a shared weight). */
static ampx_status sgemm(ampx_context *ctx, const gemm_call *s, uint64_t b0, uint64_t nb,
                         float beta) {
    const ampx_gemm_args *g = s->g;
    uint64_t span_a = (g->trans_a ? g->k - 1 : g->m - 1) * g->lda + (g->trans_a ? g->m : g->k);
    uint64_t span_b = (g->trans_b ? g->n - 1 : g->k - 1) * g->ldb + (g->trans_b ? g->k : g->n);
    uint64_t span_c = (g->m - 1) * g->ldc + g->n;
    if (nb == 1 || g->stride_a < span_a || g->stride_b < span_b || g->stride_c < span_c) {
        for (uint64_t b = b0; b < b0 + nb; b++)
            OCL_TRY(sgemm_one(ctx, s, b, beta));
        return AMPX_OK;
    }
    cl_command_queue q   = ctx->queue;
    CLBlastStatusCode st = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)g->m, (size_t)g->n,
        (size_t)g->k, g->alpha, s->a, (size_t)(s->a_off + b0 * g->stride_a), (size_t)g->lda,
        (size_t)g->stride_a, s->b, (size_t)(s->b_off + b0 * g->stride_b), (size_t)g->ldb,
        (size_t)g->stride_b, beta, s->c, (size_t)(s->c_off + b0 * g->stride_c), (size_t)g->ldc,
        (size_t)g->stride_c, (size_t)nb, &q, NULL);
    return st == CLBlastSuccess ? AMPX_OK
                                : clblast_fail(ctx, g, "CLBlastSgemmStridedBatched", nb, st);
}

static ampx_status launch_beta(ampx_context *ctx, const ampx_gemm_args *g, const ampx_tensor *c,
                               uint64_t b0, uint64_t nb, float beta) {
    ocl_args k = ocl_args_begin(ctx, K_GEMM_BETA);
    ocl_arg_tensor(&k, c);
    ocl_arg_u64(&k, g->m);
    ocl_arg_u64(&k, g->n);
    ocl_arg_u64(&k, g->ldc);
    ocl_arg_u64(&k, g->stride_c);
    ocl_arg_u64(&k, b0);
    ocl_arg_u64(&k, nb);
    ocl_arg_f32(&k, beta);
    return ocl_launch_1d(&k, g->m * g->n * nb);
}

/* The arguments of gemm_rows_<A>_<B> from m to batch0. */
static void gemm_shape_args(ocl_args *k, const ampx_gemm_args *g, uint64_t b0) {
    ocl_arg_u64(k, g->m);
    ocl_arg_u64(k, g->n);
    ocl_arg_u64(k, g->k);
    ocl_arg_u64(k, g->lda);
    ocl_arg_u64(k, g->ldb);
    ocl_arg_u64(k, g->ldc);
    ocl_arg_u64(k, g->stride_a);
    ocl_arg_u64(k, g->stride_b);
    ocl_arg_u64(k, g->stride_c);
    ocl_arg_i32(k, g->trans_a != 0);
    ocl_arg_i32(k, g->trans_b != 0);
    ocl_arg_f32(k, g->alpha);
    ocl_arg_f32(k, g->beta);
    ocl_arg_u64(k, b0);
}

/* The ND range of gemm_rows_<A>_<B>: dimension 0 blocks of 6 rows, 4 per group; dimension
 * 1 blocks of 16 columns. */
static ampx_status launch_rows_range(ocl_args *k, const ampx_gemm_args *g, uint64_t nb) {
    size_t rows = (size_t)((g->m + 5) / 6), lx = 4;
    size_t global[3] = {(rows + lx - 1) / lx * lx, (size_t)((g->n + 15) / 16), (size_t)nb};
    size_t local[3]  = {lx, 1, 1};
    return ocl_launch_nd(k, 3, global, local);
}

static ampx_status launch_rows(ampx_context *ctx, const ampx_gemm_args *g, uint64_t b0,
                               uint64_t nb) {
    ocl_args k = ocl_args_begin(ctx, K_GEMM_ROWS + 3 * g->a.dtype + g->b.dtype);
    ocl_arg_tensor(&k, &g->a);
    ocl_arg_tensor(&k, &g->b);
    ocl_arg_tensor(&k, &g->c);
    gemm_shape_args(&k, g, b0);
    return launch_rows_range(&k, g, nb);
}

/* GEMM_FP8's gemm_rows_<A>_<B> (A and B fp8): C_old read from C, the result stored to out
 * (C, or an f32 copy for the epilogue); dq_a and dq_b the dequantization factors. */
static ampx_status launch_rows_fp8(ampx_context *ctx, const ampx_gemm_args *g,
                                   const ampx_tensor *out, const ampx_tensor *dq_a,
                                   const ampx_tensor *dq_b, uint64_t b0, uint64_t nb) {
    ocl_args k = ocl_args_begin(ctx, K_GEMM_ROWS_FP8 + 2 * (g->a.dtype == AMPX_E5M2) +
                                         (g->b.dtype == AMPX_E5M2));
    ocl_arg_tensor(&k, &g->a);
    ocl_arg_tensor(&k, &g->b);
    ocl_arg_tensor(&k, &g->c);
    ocl_arg_tensor(&k, out);
    gemm_shape_args(&k, g, b0);
    ocl_arg_fixed(&k, dq_a);
    ocl_arg_fixed(&k, dq_b);
    return launch_rows_range(&k, g, nb);
}

/* The epilogue over the f32 result tmp (from element tmp_o, C's layout) into C (gemm.cl). */
static ampx_status launch_epilogue(ampx_context *ctx, const ampx_gemm_args *g, cl_mem tmp,
                                   uint64_t tmp_o, uint64_t b0, uint64_t nb) {
    ocl_args k = ocl_args_begin(ctx, K_GEMM_EPILOGUE);
    ocl_arg_mem(&k, tmp);
    ocl_arg_u64(&k, tmp_o);
    ocl_arg_tensor(&k, &g->c);
    ocl_arg_tensor(&k, &g->bias);
    ocl_arg_i32(&k, g->bias.buf != NULL);
    ocl_arg_tensor(&k, &g->pre_act);
    ocl_arg_i32(&k, g->pre_act.buf != NULL);
    ocl_arg_u32(&k, g->act);
    ocl_arg_u64(&k, g->m);
    ocl_arg_u64(&k, g->n);
    ocl_arg_u64(&k, g->ldc);
    ocl_arg_u64(&k, g->stride_c);
    ocl_arg_u64(&k, b0);
    ocl_arg_u64(&k, nb);
    return ocl_launch_1d(&k, g->m * g->n * nb);
}

static ampx_status launch_bias_grad(ampx_context *ctx, const ampx_gemm_args *g) {
    /* op(B) one k x n matrix with contiguous rows (the weight gradient of a dense layer):
     * BIAS_GRAD's typed kernel, VW columns per item, the same sums in the same order */
    int fits = g->b.dtype <= AMPX_F16 && g->bias_grad.dtype <= AMPX_F16;
    if (fits && !g->trans_b && g->batch == 1 && g->ldb == g->n)
        return ocl_bias_grad_run(ctx, &g->b, &g->bias_grad, g->k, g->n,
                                 g->bias_grad_accumulate != 0);
    ocl_args k = ocl_args_begin(ctx, K_GEMM_BIAS_GRAD);
    ocl_arg_tensor(&k, &g->b);
    ocl_arg_tensor(&k, &g->bias_grad);
    ocl_arg_i32(&k, g->bias_grad_accumulate != 0);
    ocl_arg_u64(&k, g->n);
    ocl_arg_u64(&k, g->k);
    ocl_arg_u64(&k, g->ldb);
    ocl_arg_u64(&k, g->stride_b);
    ocl_arg_u64(&k, g->batch);
    ocl_arg_i32(&k, g->trans_b != 0);
    return ocl_launch_1d(&k, g->n);
}

/* Widens `n` elements of t into scratch `slot` as f32 (exact); NULL after logging. */
static cl_mem widen(ampx_context *ctx, const ampx_tensor *t, uint64_t n, unsigned slot) {
    cl_mem tmp = ocl_scratch_get(ctx, "gemm", slot, (size_t)(n ? n : 1) * 4);
    if (!tmp || n == 0) return tmp;
    ampx_buffer tb  = {tmp, n * 4};
    ampx_tensor dst = {&tb, 0, AMPX_F32};
    return ocl_cast_run(ctx, t, &dst, n, 0, 0) == AMPX_OK ? tmp : NULL;
}

/* Batches [b0, b0 + nb) of the convert path: the f32 result in s->c (cf32 names it), then
 * the epilogue, or the rounding into a C that is not f32. */
static ampx_status convert_batches(ampx_context *ctx, const gemm_call *s, const ampx_tensor *cf32,
                                   int c_f32, int epi, uint64_t b0, uint64_t nb) {
    const ampx_gemm_args *g = s->g;
    /* k == 0 (epilogue only): the f32 result is beta * C */
    if (g->beta == 0.0f || g->k == 0)
        OCL_TRY(launch_beta(ctx, g, cf32, b0, nb, g->k == 0 ? g->beta : 0.0f));
    if (g->k) OCL_TRY(sgemm(ctx, s, b0, nb, g->beta));
    if (epi) return launch_epilogue(ctx, g, s->c, s->c_off, b0, nb);
    if (c_f32) return AMPX_OK;
    ocl_args k = ocl_args_begin(ctx, K_GEMM_STORE_C);
    ocl_arg_mem(&k, s->c);
    ocl_arg_tensor(&k, &g->c);
    ocl_arg_u64(&k, g->m);
    ocl_arg_u64(&k, g->n);
    ocl_arg_u64(&k, g->ldc);
    ocl_arg_u64(&k, g->stride_c);
    ocl_arg_u64(&k, b0);
    ocl_arg_u64(&k, nb);
    return ocl_launch_1d(&k, g->m * g->n * nb);
}

/* The tiled kernel over every batch, `step` at a time, the epilogue in its store.
 * dq_a, dq_b: GEMM_FP8's factors (NULL for GEMM). */
static ampx_status tiled_batches(ampx_context *ctx, const ampx_gemm_args *g,
                                 const ampx_tensor *dq_a, const ampx_tensor *dq_b, uint64_t step) {
    for (uint64_t b0 = 0; b0 < g->batch; b0 += step)
        OCL_TRY(ocl_gemm_tuned_launch(ctx, g, &g->c, dq_a, dq_b, b0, step));
    return AMPX_OK;
}

ampx_status ocl_gemm(ampx_context *ctx, const ampx_gemm_args *args) {
    ampx_gemm_args ga;
    uint64_t ext[3] = {0, 0, 0};
    OCL_TRY(ampx_kit_take_gemm(AMPX_KIT(ctx), args, &ga, ext));
    if (ctx->no_epilogue && ampx_kit_gemm_epilogue(&ga))
        return ocl_fail(ctx, AMPX_ERR_UNSUPPORTED, "gemm: epilogue off (gemm_epilogue=0)");
    const ampx_gemm_args *g = &ga;
    uint64_t ext_a = ext[0], ext_b = ext[1], ext_c = ext[2];
    if (g->bias_grad.buf && g->n) OCL_TRY(launch_bias_grad(ctx, g));
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;
    int epi = g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf;

    /* Overlapping C matrices: one batch at a time. */
    uint64_t c_span = (g->m - 1) * g->ldc + g->n;
    uint64_t step   = (g->batch == 1 || g->stride_c >= c_span) ? g->batch : 1;

    if (g->k == 0 && !epi) {
        for (uint64_t b0 = 0; b0 < g->batch; b0 += step)
            OCL_TRY(launch_beta(ctx, g, &g->c, b0, step, g->beta));
        return AMPX_OK;
    }
    int all_f32 = g->a.dtype == AMPX_F32 && g->b.dtype == AMPX_F32 && g->c.dtype == AMPX_F32;
    /* auto: packed panels for every dtype mix in the CPU layout (ocl_item_paths; on PoCL 2x-3x
     * the tiled kernel, itself 4x CLBlast SGEMM in f32, docs/OPENCL.md), the tuned tiled kernel
     * for all but f32 on GPUs and accelerators (f32 there: CLBlast, tuned for them; not measured
     * here). */
    ocl_gemm_path path = ctx->gemm;
    if (path == GEMM_AUTO && ocl_item_paths(ctx)) path = GEMM_PACKED;
    if (path == GEMM_AUTO && !all_f32) path = GEMM_TILED;
    if (epi && path == GEMM_ROWS) path = GEMM_CONVERT;
    if (path == GEMM_ROWS) {
        for (uint64_t b0 = 0; b0 < g->batch; b0 += step)
            OCL_TRY(launch_rows(ctx, g, b0, step));
        return AMPX_OK;
    }
    if (path == GEMM_TILED) return tiled_batches(ctx, g, NULL, NULL, step);
    if (path == GEMM_PACKED) return ocl_gemm_packed_run(ctx, g, NULL, NULL, step);

    /* CLBlast: f32 operands as they are, others widened to f32 scratch in their layout. */
    gemm_call s = {g,
                   g->a.buf->mem,
                   g->b.buf->mem,
                   g->c.buf->mem,
                   g->a.offset / 4,
                   g->b.offset / 4,
                   g->c.offset / 4};
    if (g->a.dtype != AMPX_F32) {
        if (!(s.a = widen(ctx, &g->a, ext_a, 0))) return AMPX_ERR_NO_MEMORY;
        s.a_off = 0;
    }
    if (g->b.dtype != AMPX_F32) {
        if (!(s.b = widen(ctx, &g->b, ext_b, 1))) return AMPX_ERR_NO_MEMORY;
        s.b_off = 0;
    }
    int c_f32 = g->c.dtype == AMPX_F32;
    if (!c_f32) {
        /* beta == 0: C is not read; scratch gets zeros through gemm_beta below. */
        s.c = g->beta != 0.0f ? widen(ctx, &g->c, ext_c, 2)
                              : ocl_scratch_get(ctx, "gemm", 2, (size_t)ext_c * 4);
        if (!s.c) return AMPX_ERR_NO_MEMORY;
        s.c_off = 0;
    }
    ampx_buffer cb   = {s.c, c_f32 ? g->c.buf->bytes : ext_c * 4};
    ampx_tensor cf32 = {&cb, c_f32 ? g->c.offset : 0, AMPX_F32};
    for (uint64_t b0 = 0; b0 < g->batch; b0 += step)
        OCL_TRY(convert_batches(ctx, &s, &cf32, c_f32, epi, b0, step));
    return AMPX_OK;
}

/* GEMM_FP8: gemm_rows_<A>_<B> (gemm=rows), packed panels (packed; auto on CPU devices) or the
 * tiled kernel (tiled; auto elsewhere; gemm=convert has no fp8 form and picks as auto does)
 * with fp8 loads and the
 * device's dequantization factors. k == 0 runs the kernel too: v = (alpha * (a_scale_inv *
 * b_scale_inv)) * 0 + beta * C_old, backend.h's formula as written. The epilogue: tiled
 * applies it in its store; rows stores v to an f32 copy of C's layout (C itself when C is
 * f32, each element read before it is written) and gemm_epilogue finishes from it, as GEMM's
 * convert path does. */
ampx_status ocl_gemm_fp8(ampx_context *ctx, const ampx_gemm_fp8_args *args) {
    ampx_gemm_fp8_args fa;
    uint64_t ext[3] = {0, 0, 0};
    OCL_TRY(ampx_kit_take_gemm_fp8(AMPX_KIT(ctx), args, &fa, ext));
    const ampx_gemm_args *g = &fa.gemm;
    if (ctx->no_epilogue && ampx_kit_gemm_epilogue(g))
        return ocl_fail(ctx, AMPX_ERR_UNSUPPORTED, "gemm_fp8: epilogue off (gemm_epilogue=0)");
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;
    int epi = g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf;

    uint64_t c_span = (g->m - 1) * g->ldc + g->n;
    uint64_t step   = (g->batch == 1 || g->stride_c >= c_span) ? g->batch : 1;
    /* rows only when asked: tiled is 3-4x faster with e4m3 on PoCL (docs/OPENCL.md) */
    int rows = ctx->gemm == GEMM_ROWS;

    if (ctx->gemm == GEMM_PACKED || (ctx->gemm != GEMM_TILED && !rows && ocl_item_paths(ctx)))
        return ocl_gemm_packed_run(ctx, g, &fa.a_scale_inv, &fa.b_scale_inv, step);
    if (!rows) return tiled_batches(ctx, g, &fa.a_scale_inv, &fa.b_scale_inv, step);
    ampx_tensor out = g->c;
    cl_mem tmp      = g->c.buf->mem;
    uint64_t tmp_o  = g->c.offset / 4;
    ampx_buffer tb;
    if (epi && g->c.dtype != AMPX_F32) {
        if (!(tmp = ocl_scratch_get(ctx, "gemm_fp8", 2, (size_t)ext[2] * 4)))
            return AMPX_ERR_NO_MEMORY;
        tb    = (ampx_buffer){tmp, ext[2] * 4};
        out   = (ampx_tensor){&tb, 0, AMPX_F32};
        tmp_o = 0;
    }
    for (uint64_t b0 = 0; b0 < g->batch; b0 += step) {
        OCL_TRY(launch_rows_fp8(ctx, g, &out, &fa.a_scale_inv, &fa.b_scale_inv, b0, step));
        if (epi) OCL_TRY(launch_epilogue(ctx, g, tmp, tmp_o, b0, step));
    }
    return AMPX_OK;
}
