/* scaler_update.cl — SCALER_UPDATE on the scalars block, one work item, exactly the
 * pseudo-code of backend.h.
 *
 * scale * factor is PyTorch's: the f32 scale times the double factor in double, rounded to
 * f32. The factor is the args' double (its bits; 0 when the host gave none) or else the
 * block's float. A device without cl_khr_fp64 multiplies in f32 by the factor rounded to f32
 * (f32 below), which is the same for factors exact in f32 (2, 0.5, 3, 0.25) and may differ
 * in the last bit for others (1.1, 0.7): docs/OPENCL.md. */
inline float scale_times(float scale, ulong bits, float f32, float block) {
#ifdef AMPX_FP64
    double f = bits ? as_double(bits) : (double)block;
    return (float)((double)scale * f);
#else
    return scale * (bits ? f32 : block);
#endif
}

__kernel void scaler_update(FARG(scalars), ulong growth_bits, ulong backoff_bits,
                            float growth_f32, float backoff_f32) {
    if (get_global_id(0) != 0) return;
    __global scalars_t *s = (__global scalars_t *)(scalars_p + scalars_o);
    s->last_found_inf     = s->found_inf;
    s->found_inf          = 0;
    if (s->last_found_inf) {
        s->skipped_steps++;
        s->consecutive_skips++;
        s->growth_tracker = 0;
        if (s->mode == SCALER_DYNAMIC) {
            s->hysteresis_left--;
            if (s->hysteresis_left <= 0) {
                float backed = scale_times(s->scale, backoff_bits, backoff_f32, s->backoff_factor);
                s->scale           = backed > s->min_scale ? backed : s->min_scale;
                s->hysteresis_left = s->hysteresis;
            }
            if (s->scale <= s->min_scale && s->on_min_scale_error) s->stop_reason |= STOP_MIN_SCALE;
        }
        if (s->max_consecutive_skips > 0 && s->consecutive_skips > s->max_consecutive_skips)
            s->stop_reason |= STOP_CONSECUTIVE_SKIPS;
    } else {
        s->applied_steps++;
        s->consecutive_skips = 0;
        if (s->mode == SCALER_DYNAMIC) {
            if (s->consecutive_hysteresis) s->hysteresis_left = s->hysteresis;
            s->growth_tracker++;
            if (s->growth_tracker >= s->growth_interval) {
                float next = scale_times(s->scale, growth_bits, growth_f32, s->growth_factor);
                if (is_finite_bits(next) && next <= s->max_scale) s->scale = next;
                s->growth_tracker = 0;
            }
        }
    }
}
