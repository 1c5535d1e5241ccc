/* monitor.c — the gradient-health monitor's warnings in words (the statistics come from the
 * grad_stats op; trainer.c issues it and reads it back with the step records). Each warning
 * names the tensor and its layer and says what to do. The limits are documented in
 * docs/OBSERVABILITY.md. */
#include <math.h>
#include <stdio.h>

#include "ampx/train.h"

void ampx_health_defaults(ampx_health_limits *lim) {
    lim->underflow_frac   = 0.01;
    lim->vanish_max_abs   = 1e-12;
    lim->vanish_zero_frac = 0.999;
}

/* The smallest normal of a compute dtype: what the scaled gradient must stay above. */
static double smallest_normal(ampx_dtype d) {
    return d == AMPX_F16 ? 0x1p-14 : 0x1p-126;
}

int ampx_health_warnings(const ampx_tensor_health *h, int n, const ampx_health_limits *lim,
                         double scale, double min_scale, ampx_line_fn line, void *user) {
    int count = 0;
    char msg[768];
    /* "at the minimum": the scaler's floor, or 1 when it has none (a scale below 1 no longer
     * scales anything up) */
    int at_min = min_scale > 0 ? scale <= min_scale : scale <= 1;
    for (int i = 0; i < n; i++) {
        const ampx_tensor_health *t = &h[i];
        const char *dt              = ampx_dtype_name(t->compute);
        int64_t bad                 = t->inf + (t->nan > 0 ? t->nan : 0);
        if (bad > 0 && at_min) {
            snprintf(msg, sizeof msg,
                     "warning: %s (layer %s): %lld non-finite gradient values at the minimum loss "
                     "scale %g: lowering the scale cannot help; keep layer %s in f32 (a policy "
                     "override) or lower the learning rate",
                     t->name, t->layer, (long long)bad, scale, t->layer);
            line(user, msg), count++;
        }
        if (t->underflow_frac >= lim->underflow_frac && t->underflow_frac > 0) {
            snprintf(msg, sizeof msg,
                     "warning: %s (layer %s, %s): %.2f%% of the gradient values are below %s's "
                     "smallest normal %.3g at loss scale %g and lose precision or flush to zero: "
                     "raise the loss scale (init_scale, min_scale) or keep layer %s in f32",
                     t->name, t->layer, dt, 100 * t->underflow_frac, dt,
                     smallest_normal(t->compute), scale, t->layer);
            line(user, msg), count++;
        }
        if (bad == 0 && t->n > 0 &&
            (t->max_abs <= lim->vanish_max_abs || t->zero_frac >= lim->vanish_zero_frac)) {
            snprintf(msg, sizeof msg,
                     "warning: %s (layer %s): the gradients vanish (max |g| %.3g, %.2f%% zeros): "
                     "the layer no longer learns; check for dead activations, the "
                     "initialization or the learning rate",
                     t->name, t->layer, t->max_abs, 100 * t->zero_frac);
            line(user, msg), count++;
        }
    }
    return count;
}
