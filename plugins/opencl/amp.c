/* amp.c — UNSCALE_CHECK, GRAD_STATS, AMP_PASS and SCALER_UPDATE (kernels/opencl/
 * unscale_check.cl and typed/amp.cl, grad_stats.cl, amp_pass.cl, scaler_update.cl). The
 * scale, found_inf and the rest of the scaler state are read and written by the kernels in the
 * scalars block: a training step enqueues these ops and never reads the block back. */
#include <string.h>

#include "ocl.h"

/* Vectors per work item of the typed unscale_check (grid-stride): each item ends with a
 * reduction of its flag lanes and starts by reading the scalars, which cost more than its one
 * vector when it had one. On PoCL (bf16, 2^24): 1 vector 0.12 of a copy, 4 and 8 vectors
 * 0.28-0.38, 16 vectors 0.16, 64 vectors 0.10 (strided further apart). */
#define UNSCALE_VECS 8

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
        ocl_arg_fixed(&k, &flag_t);
        ocl_arg_fixed(&k, &a.scalars);
        OCL_TRY(ocl_launch_1d(&k, (ocl_vec_items(ctx, a.grads.n_elems[t]) + UNSCALE_VECS - 1) /
                                      UNSCALE_VECS));
    }
    return AMPX_OK;
}

ampx_status ocl_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *args) {
    ampx_grad_stats_args a;
    OCL_TRY(ampx_kit_take_grad_stats(AMPX_KIT(ctx), args, &a));
    uint32_t tiny_bits = a.target == AMPX_F16 ? 0x38800000u /* 2^-14 */ : 0x00800000u /* 2^-126 */;
    for (uint32_t t = 0; t < a.grads.count; t++) {
        ampx_tensor stats = a.stats, counts = a.counts, nans = a.nan_counts;
        stats.offset += 16ull * t;
        counts.offset += 12ull * t;
        if (nans.buf)
            nans.offset += 4ull * t;
        else
            nans = counts; /* a placeholder the kernel does not write */
        ocl_args k = ocl_args_begin(ctx, K_GRAD_STATS);
        ocl_arg_tensor(&k, &a.grads.tensors[t]);
        ocl_arg_u64(&k, a.grads.n_elems[t]);
        ocl_arg_u32(&k, tiny_bits);
        ocl_arg_fixed(&k, &stats);
        ocl_arg_fixed(&k, &counts);
        ocl_arg_fixed(&k, &nans);
        ocl_arg_u32(&k, a.nan_counts.buf != NULL);
        OCL_TRY(ocl_launch_groups(&k, 1));
    }
    return AMPX_OK;
}

/* AMP_PASS: one work-group per tensor, as grad_stats and sum_squares, so it gives their bits
 * (and unscale_check's) in one read of each gradient. */
ampx_status ocl_amp_pass(ampx_context *ctx, const ampx_amp_pass_args *args) {
    static const char *op = "amp_pass";
    ampx_amp_pass_args a;
    OCL_TRY(ampx_kit_take_amp_pass(AMPX_KIT(ctx), args, &a));
    if (a.grads.count == 0) {
        if (!a.sq_sum.buf || a.sq_accumulate) return AMPX_OK;
        float zero = 0.0f;
        return ocl_check(ctx,
                         clEnqueueWriteBuffer(ctx->queue, a.sq_sum.buf->mem, CL_TRUE,
                                              (size_t)a.sq_sum.offset, 4, &zero, 0, NULL, NULL),
                         op, "clEnqueueWriteBuffer");
    }
    uint32_t want =
        (a.stats.buf ? 1u : 0u) | (a.counts.buf ? 2u : 0u) | (a.nan_counts.buf ? 4u : 0u);
    for (uint32_t t = 0; t < a.grads.count; t++) {
        /* outputs not asked for get the flags tensor as a placeholder the kernel never writes */
        ampx_tensor flag = a.flags, sq = a.sq_sum.buf ? a.sq_sum : a.flags;
        ampx_tensor stats  = a.stats.buf ? a.stats : a.flags,
                    counts = a.counts.buf ? a.counts : a.flags;
        ampx_tensor nans   = a.nan_counts.buf ? a.nan_counts : a.flags;
        flag.offset += 4ull * (a.flag_base + (uint64_t)t);
        if (a.stats.buf) stats.offset += 16ull * t;
        if (a.counts.buf) counts.offset += 12ull * t;
        if (a.nan_counts.buf) nans.offset += 4ull * t;
        ampx_dtype target = ampx_kit_amp_target(&a, t);
        ocl_args k        = ocl_args_begin(ctx, K_AMP_PASS);
        ocl_arg_tensor(&k, &a.grads.tensors[t]);
        ocl_arg_u64(&k, a.grads.n_elems[t]);
        ocl_arg_u32(&k, target == AMPX_F16 ? 0x38800000u : 0x00800000u);
        ocl_arg_fixed(&k, &flag);
        ocl_arg_fixed(&k, &a.scalars);
        ocl_arg_fixed(&k, &sq);
        ocl_arg_i32(&k, !a.sq_sum.buf ? 0 : t == 0 && !a.sq_accumulate ? 1 : 2);
        ocl_arg_fixed(&k, &stats);
        ocl_arg_fixed(&k, &counts);
        ocl_arg_fixed(&k, &nans);
        ocl_arg_u32(&k, want);
        OCL_TRY(ocl_launch_groups(&k, 1));
    }
    return AMPX_OK;
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
