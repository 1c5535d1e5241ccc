/* optimizer.c — multi-tensor SGD and AdamW on f32 master weights (kernels/opencl/
 * typed/optim.cl). opt_begin (scalars.cl) runs first on the stream: it reads found_inf, and
 * for an applied step evaluates the learning-rate schedule, writes scalars->lr and the clip
 * coefficient to scratch; the per-tensor kernels then return at once on a skipped step. So
 * the skip decision is made on the device and the host never reads the scalars block.
 */
#include <stdio.h>

#include "ocl.h"

/* Enqueues opt_begin; returns the scratch it writes (NULL after logging). */
static cl_mem step_begin(ampx_context *ctx, const char *op, const ampx_tensor *scalars,
                         const ampx_tensor *grad_sq_sum, float max_grad_norm, float beta1,
                         float beta2) {
    cl_mem work = ocl_scratch_get(ctx, op, 1, 8 * sizeof(float));
    if (!work) return NULL;
    ocl_args k = ocl_args_begin(ctx, K_OPT_BEGIN);
    ocl_arg_fixed(&k, scalars);
    ocl_arg_fixed(&k, grad_sq_sum);
    ocl_arg_f32(&k, max_grad_norm);
    ocl_arg_f32(&k, beta1);
    ocl_arg_f32(&k, beta2);
    ocl_arg_mem(&k, work);
    return ocl_launch_single(&k) == AMPX_OK ? work : NULL;
}

static const ampx_tensor *copy_of(const ampx_tensor *copies, uint32_t t) {
    return copies && copies[t].buf ? &copies[t] : NULL;
}

ampx_status ocl_sgd(ampx_context *ctx, const ampx_sgd_args *args) {
    static const char *op = "sgd";
    ampx_sgd_args a;
    OCL_TRY(ampx_kit_take_sgd(AMPX_KIT(ctx), args, &a));
    cl_mem work = step_begin(ctx, op, &a.scalars, &a.grad_sq_sum, a.max_grad_norm, 0.0f, 0.0f);
    if (!work) return AMPX_ERR_DEVICE;
    for (uint32_t t = 0; t < a.params.count; t++) {
        if (a.params.n_elems[t] == 0) continue;
        const ampx_tensor *copy = copy_of(a.copies, t);
        ocl_args k              = ocl_args_typed(ctx, TK_SGD, &a.grads[t], copy, NULL);
        ocl_arg_fixed(&k, &a.params.tensors[t]);
        ocl_arg_fixed(&k, &a.grads[t]);
        ocl_arg_fixed(&k, a.momentum != 0.0f ? &a.momentum_buf[t] : NULL);
        ocl_arg_fixed(&k, copy);
        ocl_arg_i32(&k, copy != NULL);
        ocl_arg_u64(&k, a.params.n_elems[t]);
        ocl_arg_f32(&k, a.wd ? a.wd[t] : a.weight_decay);
        ocl_arg_f32(&k, a.momentum);
        ocl_arg_f32(&k, a.dampening);
        ocl_arg_i32(&k, a.nesterov != 0);
        ocl_arg_i32(&k, a.stochastic_copy != 0);
        ocl_arg_u64(&k, a.seed + t); /* tensor t draws its own stream */
        ocl_arg_mem(&k, work);
        OCL_TRY(ocl_launch_1d(&k, ocl_vec_items(ctx, a.params.n_elems[t])));
    }
    return AMPX_OK;
}

ampx_status ocl_adamw(ampx_context *ctx, const ampx_adamw_args *args) {
    static const char *op = "adamw";
    ampx_adamw_args a;
    OCL_TRY(ampx_kit_take_adamw(AMPX_KIT(ctx), args, &a));
    cl_mem work =
        step_begin(ctx, op, &a.scalars, &a.grad_sq_sum, a.max_grad_norm, a.beta1, a.beta2);
    if (!work) return AMPX_ERR_DEVICE;
    for (uint32_t t = 0; t < a.params.count; t++) {
        if (a.params.n_elems[t] == 0) continue;
        const ampx_tensor *copy = copy_of(a.copies, t);
        ocl_args k              = ocl_args_typed(ctx, TK_ADAMW, &a.grads[t], copy, NULL);
        ocl_arg_fixed(&k, &a.params.tensors[t]);
        ocl_arg_fixed(&k, &a.grads[t]);
        ocl_arg_fixed(&k, &a.m[t]);
        ocl_arg_fixed(&k, &a.v[t]);
        ocl_arg_fixed(&k, copy);
        ocl_arg_i32(&k, copy != NULL);
        ocl_arg_u64(&k, a.params.n_elems[t]);
        ocl_arg_f32(&k, a.wd ? a.wd[t] : a.weight_decay);
        ocl_arg_f32(&k, a.beta1);
        ocl_arg_f32(&k, a.beta2);
        ocl_arg_f32(&k, a.eps);
        ocl_arg_i32(&k, a.stochastic_copy != 0);
        ocl_arg_u64(&k, a.seed + t);
        ocl_arg_mem(&k, work);
        OCL_TRY(ocl_launch_1d(&k, ocl_vec_items(ctx, a.params.n_elems[t])));
    }
    return AMPX_OK;
}
