/* amp.c — UNSCALE_CHECK, GRAD_STATS, AMP_PASS, SUM_SQUARES' sums and SCALER_UPDATE
 * (kernels/opencl/unscale_check.cl and typed/amp.cl, typed/amp_reduce.cl and amp_finish.cl,
 * scaler_update.cl). The scale, found_inf and the rest of the scaler state are read and
 * written by the kernels in the scalars block: a training step enqueues these ops and never
 * reads the block back. */
#include <string.h>

#include "ocl.h"

/* Elements per chunk of the partial sums (typed/amp_reduce.cl), and per work item of
 * unscale_check on CPU devices (typed/amp.cl): a multiple of every VW, large enough that a
 * chunk's launch and record cost little against its reads (on PoCL each chunk is one
 * work-group of one item), small enough that a 2^20-element gradient still spreads over the
 * cores. The partition, and so every sum's order, depends on n and this alone. */
#define AMP_CHUNK 65536u
#define AMP_PART_BYTES (4u * 10u) /* PART_WORDS words (common.cl) */
#define AMP_SCRATCH_SLOT 3        /* this file's scratch buffer (ocl_scratch_get) */

/* Vectors per work item of the typed unscale_check's grid-stride form (GPUs): each item ends
 * with a reduction of its flag lanes and starts by reading the scalars, which cost more than
 * its one vector when it had one. On PoCL (bf16, 2^24): 1 vector 0.12 of a copy, 4 and 8
 * vectors 0.28-0.38, 16 vectors 0.16, 64 vectors 0.10 (strided further apart). CPU devices
 * take one work item per AMP_CHUNK elements instead, a contiguous run each. */
#define UNSCALE_VECS 8

/* The grid-stride layout's vectors of n elements (the tail elements one item each): its
 * kernel takes no VEC_RUN runs, so not ocl_vec_items. */
static uint64_t unscale_vecs(const ampx_context *ctx, uint64_t n) {
    uint64_t vecs = n / (uint64_t)ctx->vw, tail = n % (uint64_t)ctx->vw;
    return vecs > tail ? vecs : tail;
}

ampx_status ocl_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *args) {
    ampx_unscale_check_args a;
    OCL_TRY(ampx_kit_take_unscale_check(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) return AMPX_OK;
    ampx_tensor flags = a.flags;
    flags.offset += 4ull * a.flag_base;
    ocl_args k = ocl_args_begin(ctx, K_UNSCALE_CLEAR_FLAGS);
    ocl_arg_fixed(&k, &flags);
    ocl_arg_u32(&k, a.grads.count);
    OCL_TRY(ocl_launch_1d(&k, a.grads.count));
    for (uint32_t t = 0; t < a.grads.count; t++) {
        ampx_tensor flag_t = flags;
        flag_t.offset += 4ull * t;
        k = ocl_args_typed(ctx, TK_UNSCALE_CHECK, &a.grads.tensors[t], NULL, NULL);
        ocl_arg_fixed(&k, &a.grads.tensors[t]);
        ocl_arg_u64(&k, a.grads.n_elems[t]);
        ocl_arg_u64(&k, AMP_CHUNK);
        ocl_arg_fixed(&k, &flag_t);
        ocl_arg_fixed(&k, &a.scalars);
        uint64_t n = a.grads.n_elems[t];
        if (k.row_items)
            OCL_TRY(ocl_launch_rows(&k, (n + AMP_CHUNK - 1) / AMP_CHUNK));
        else
            OCL_TRY(ocl_launch_1d(&k, (unscale_vecs(ctx, n) + UNSCALE_VECS - 1) / UNSCALE_VECS));
    }
    return AMPX_OK;
}

static uint32_t tiny_bits_of(ampx_dtype target) {
    return target == AMPX_F16 ? 0x38800000u /* 2^-14 */ : 0x00800000u /* 2^-126 */;
}

static uint64_t chunks_of(uint64_t n) {
    return n ? (n + AMP_CHUNK - 1) / AMP_CHUNK : 1;
}

/* The partial kernel of tensor t: its records at byte `at` of the scratch, its n at 8 t. */
static ampx_status enqueue_part(ampx_context *ctx, const ocl_amp_reduce *r, uint32_t t,
                                cl_mem scratch, uint64_t at) {
    const ampx_tensor *g = &r->grads.tensors[t];
    uint64_t n           = r->grads.n_elems[t];
    ampx_buffer sb       = {scratch, 0};
    ampx_tensor part = {&sb, at, AMPX_I32}, hdr = {&sb, 8ull * t, AMPX_I32};
    ampx_dtype target = r->pass ? ampx_kit_amp_target(r->pass, t) : r->target;
    ocl_args k        = ocl_args_typed(ctx, r->kernel, g, NULL, NULL);
    ocl_arg_fixed(&k, g);
    ocl_arg_u64(&k, n);
    ocl_arg_u64(&k, AMP_CHUNK);
    if (r->kernel != TK_SUM_SQUARES_PART) ocl_arg_u32(&k, tiny_bits_of(target));
    if (r->kernel == TK_AMP_PASS_PART) {
        ocl_arg_fixed(&k, &r->scalars);
        ocl_arg_i32(&k, (r->want & 7) != 0);
    }
    ocl_arg_fixed(&k, &part);
    ocl_arg_fixed(&k, &hdr);
    return ocl_launch_rows(&k, chunks_of(n));
}

/* One launch of the partial kernel per tensor (in list order, on the in-order queue), then
 * amp_finish over all of them: count + 1 launches, no host wait. The scratch is reused by the
 * next call only after this call's amp_finish has run. */
ampx_status ocl_amp_reduce_run(ampx_context *ctx, const char *op, const ocl_amp_reduce *r) {
    uint32_t count = r->grads.count;
    uint64_t bytes = 8ull * count;
    for (uint32_t t = 0; t < count; t++)
        bytes += AMP_PART_BYTES * chunks_of(r->grads.n_elems[t]);
    cl_mem scratch = ocl_scratch_get(ctx, op, AMP_SCRATCH_SLOT, (size_t)bytes);
    if (!scratch) return AMPX_ERR_NO_MEMORY;
    uint64_t at = 8ull * count;
    for (uint32_t t = 0; t < count; t++) {
        OCL_TRY(enqueue_part(ctx, r, t, scratch, at));
        at += AMP_PART_BYTES * chunks_of(r->grads.n_elems[t]);
    }
    ampx_buffer sb   = {scratch, bytes};
    ampx_tensor part = {&sb, 0, AMPX_I32};
    ocl_args k       = ocl_args_begin(ctx, K_AMP_FINISH);
    ocl_arg_fixed(&k, &part);
    ocl_arg_u32(&k, count);
    ocl_arg_u64(&k, AMP_CHUNK);
    ocl_arg_u32(&k, r->want);
    ocl_arg_fixed(&k, &r->stats);
    ocl_arg_fixed(&k, &r->counts);
    ocl_arg_fixed(&k, &r->nans);
    ocl_arg_fixed(&k, &r->sq);
    ocl_arg_i32(&k, r->sq_accumulate);
    ocl_arg_fixed(&k, &r->flags);
    ocl_arg_fixed(&k, &r->scalars);
    return ocl_launch_single(&k);
}

ampx_status ocl_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *args) {
    ampx_grad_stats_args a;
    OCL_TRY(ampx_kit_take_grad_stats(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) return AMPX_OK;
    ocl_amp_reduce r = {.kernel = TK_GRAD_STATS_PART,
                        .grads  = a.grads,
                        .target = a.target,
                        .want   = 3u | (a.nan_counts.buf ? 4u : 0u),
                        .stats  = a.stats,
                        .counts = a.counts,
                        .nans   = a.nan_counts};
    return ocl_amp_reduce_run(ctx, "grad_stats", &r);
}

/* AMP_PASS: the partition and the order of every sum are those of GRAD_STATS and SUM_SQUARES
 * (typed/amp_reduce.cl), so it gives their bits, and UNSCALE_CHECK's, in one read of each
 * gradient. */
ampx_status ocl_amp_pass(ampx_context *ctx, const ampx_amp_pass_args *args) {
    static const char *op = "amp_pass";
    ampx_amp_pass_args a;
    OCL_TRY(ampx_kit_take_amp_pass(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) {
        if (!a.sq_sum.buf || a.sq_accumulate) return AMPX_OK;
        float zero = 0.0f;
        ocl_thread_enter(ctx);
        return ocl_check(ctx,
                         clEnqueueWriteBuffer(ctx->queue, a.sq_sum.buf->mem, CL_TRUE,
                                              (size_t)a.sq_sum.offset, 4, &zero, 0, NULL, NULL),
                         op, "clEnqueueWriteBuffer");
    }
    ampx_tensor flags = a.flags;
    flags.offset += 4ull * a.flag_base;
    ocl_amp_reduce r = {.kernel = TK_AMP_PASS_PART,
                        .grads  = a.grads,
                        .pass   = &a,
                        .want   = (a.stats.buf ? 1u : 0u) | (a.counts.buf ? 2u : 0u) |
                                (a.nan_counts.buf ? 4u : 0u) | (a.sq_sum.buf ? 8u : 0u) | 16u,
                        .stats         = a.stats,
                        .counts        = a.counts,
                        .nans          = a.nan_counts,
                        .sq            = a.sq_sum,
                        .flags         = flags,
                        .scalars       = a.scalars,
                        .sq_accumulate = a.sq_accumulate};
    return ocl_amp_reduce_run(ctx, op, &r);
}

ampx_status ocl_scaler_update(ampx_context *ctx, const ampx_scaler_update_args *args) {
    ampx_scaler_update_args a;
    OCL_TRY(ampx_kit_take_scaler_update(AMPX_KIT(ctx), args, &a));
    /* the double factors travel as their bits (0: none, the block's float applies) */
    uint64_t gbits = 0, bbits = 0;
    if (a.growth_factor_f64 > 0) memcpy(&gbits, &a.growth_factor_f64, 8);
    if (a.backoff_factor_f64 > 0) memcpy(&bbits, &a.backoff_factor_f64, 8);
    ocl_args k = ocl_args_begin(ctx, K_SCALER_UPDATE);
    ocl_arg_fixed(&k, &a.scalars);
    ocl_arg_u64(&k, gbits);
    ocl_arg_u64(&k, bbits);
    ocl_arg_f32(&k, (float)a.growth_factor_f64);
    ocl_arg_f32(&k, (float)a.backoff_factor_f64);
    return ocl_launch_single(&k);
}
