/* scalars.cl — the device-side view of ampx_scalars (backend.h): the same 4-byte fields
 * in the same order, so kernels read and write the block in place. */
typedef struct scalars_t {
    float scale;
    int found_inf, growth_tracker, hysteresis_left, applied_steps, skipped_steps;
    int consecutive_skips, last_found_inf, stop_reason;
    float lr;
    int mode;
    float growth_factor, backoff_factor;
    int growth_interval, hysteresis, consecutive_hysteresis;
    float min_scale, max_scale;
    int on_min_scale_error, max_consecutive_skips;
    int lr_schedule;
    float lr_base, lr_min;
    int warmup_steps, decay_steps;
    int reserved[7];
} scalars_t;

#define SCALER_NONE 0
#define SCALER_DYNAMIC 2
#define STOP_MIN_SCALE 1
#define STOP_CONSECUTIVE_SKIPS 2

#ifdef AMPX_FP64
#define PI_W M_PI
#else
#define PI_W M_PI_F
#endif

/* The learning rate at applied step t: ampx_scheduled_lr of backend.h. */
inline float scheduled_lr(__global const scalars_t *s, int t) {
    if (s->lr_schedule != 1) return s->lr_base;
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
    __global scalars_t *s = (__global scalars_t *)(scalars_p + scalars_o);
    __global int *iwork   = (__global int *)work;
    if (s->found_inf != 0) {
        iwork[0] = 0;
        return;
    }
    float lr = scheduled_lr(s, s->applied_steps);
    s->lr    = lr;
    wide_t c = (wide_t)1;
    if (max_grad_norm > 0.0f && grad_sq_sum) {
        wide_t norm = sqrt((wide_t)grad_sq_sum[0]);
        c           = (wide_t)max_grad_norm / (norm + (wide_t)1e-6);
        c           = c < (wide_t)1 ? c : (c == c ? (wide_t)1 : c);
    }
    wide_t step = (wide_t)s->applied_steps + (wide_t)1;
    iwork[0]    = 1;
    work[1]     = lr;
    work[2]     = (float)c;
    iwork[3]    = s->applied_steps;
    work[4]     = (float)((wide_t)1 - pow((wide_t)beta1, step));
    work[5]     = (float)((wide_t)1 - pow((wide_t)beta2, step));
}
