/* scalars.cl — the scalars block on the device: the learning-rate schedule, the start of an
 * optimizer step, and the layout check. The struct itself, ampx_scalars, is built from
 * kernel_math.h's field list (AMPX_KM_SCALARS_FIELDS), embedded just before this file. */

/* The byte offset of every field of ampx_scalars as this device's compiler lays the struct
 * out, in AMPX_KM_SCALARS_FIELDS order, then reserved's and the struct's size. The plugin
 * runs it once when the program loads (program.c) and compares with backend.h's offsetof:
 * a kernel that reads the block through a different layout never runs. */
__kernel void scalars_layout(__global ampx_scalars *s, __global int *out) {
    if (get_global_id(0) != 0) return;
    int i = 0;
#define AMPX_KM_OFFSET(type, name) out[i++] = (int)((__global char *)&s->name - (__global char *)s);
    AMPX_KM_SCALARS_FIELDS(AMPX_KM_OFFSET)
#undef AMPX_KM_OFFSET
    out[i++] = (int)((__global char *)s->reserved - (__global char *)s);
    out[i]   = (int)sizeof(ampx_scalars);
}

#ifdef AMPX_FP64
#define PI_W M_PI
#else
#define PI_W M_PI_F
#endif

/* The learning rate at applied step t: ampx_scheduled_lr of backend.h. */
inline float scheduled_lr(__global const ampx_scalars *s, int t) {
    if (s->lr_schedule != AMPX_KM_LR_WARMUP_COSINE) return s->lr_base;
    if (t < s->warmup_steps) return s->lr_base * (float)(t + 1) / (float)s->warmup_steps;
    int span = s->decay_steps - s->warmup_steps;
    wide_t p = span > 0 ? (wide_t)(t - s->warmup_steps) / (wide_t)span : (wide_t)1;
    if (p > (wide_t)1) p = (wide_t)1;
    wide_t c = (wide_t)0.5 * ((wide_t)1 + cos(PI_W * p));
    return (float)((wide_t)s->lr_min + ((wide_t)s->lr_base - (wide_t)s->lr_min) * c);
}

/* The start of an optimizer step, one work item, before the per-tensor launches:
 * found_inf set: work[0] = 0 and nothing else is written (the step is skipped).
 * Otherwise work[0] = 1, scalars->lr and work[1] = the scheduled lr, work[2] = the clip
 * coefficient min(1, max_grad_norm / (sqrt(grad_sq_sum) + 1e-6)) rounded to f32 (1 when
 * clipping is off), work[3] = applied_steps, work[4..5] = 1 - beta1^t, 1 - beta2^t for AdamW
 * with t = applied_steps + 1. */
__kernel void opt_begin(FARG(scalars), FARG(grad_sq_sum), float max_grad_norm, float beta1,
                        float beta2, __global float *work) {
    if (get_global_id(0) != 0) return;
    FPTR(grad_sq_sum);
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    __global int *iwork      = (__global int *)work;
    if (s->found_inf != 0) {
        iwork[0] = 0;
        return;
    }
    float lr    = scheduled_lr(s, s->applied_steps);
    s->lr       = lr;
    wide_t c    = ampx_km_clip_coef(max_grad_norm, grad_sq_sum);
    wide_t step = (wide_t)s->applied_steps + (wide_t)1;
    iwork[0]    = 1;
    work[1]     = lr;
    work[2]     = (float)c;
    iwork[3]    = s->applied_steps;
    work[4]     = (float)((wide_t)1 - pow((wide_t)beta1, step));
    work[5]     = (float)((wide_t)1 - pow((wide_t)beta2, step));
}
