/* scaler_update.cl — SCALER_UPDATE on the scalars block, one work item, exactly the
 * pseudo-code of backend.h in f32 arithmetic. */
__kernel void scaler_update(FARG(scalars)) {
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
                float backed       = s->scale * s->backoff_factor;
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
                float next = s->scale * s->growth_factor;
                if (is_finite_bits(next) && next <= s->max_scale) s->scale = next;
                s->growth_tracker = 0;
            }
        }
    }
}
