/* health.c — the run-health rules (see health.h). */
#include "obs/health.h"

#include <math.h>
#include <stdio.h>

int health_step(health_state *h, const ampx_step_record *r, ampx_err e) {
    h->steps++;
    if (!r->skipped) h->applied++;
    long long s = (long long)r->step;
    /* a run that applies nothing */
    if (r->applied_steps == 0) {
        if (h->steps >= HEALTH_NO_APPLIED_STOP) {
            err_set(e,
                    "step %lld: none of the %lld steps so far was applied (every one had "
                    "non-finite gradients, latest in %s): the model cannot train like this; "
                    "lower the initial loss scale, keep the overflowing layers in f32, or check "
                    "the data for inf/NaN",
                    s, (long long)h->steps, r->overflow && r->overflow[0] ? r->overflow : "?");
            return 2;
        }
        if (h->steps >= HEALTH_NO_APPLIED_WARN && !h->warned_none) {
            h->warned_none = 1;
            err_set(e,
                    "warning: step %lld: no step applied yet, %lld skipped for non-finite "
                    "gradients; the run stops after %d",
                    s, (long long)h->steps, HEALTH_NO_APPLIED_STOP);
            return 1;
        }
    }
    /* a non-finite loss: the forward itself overflowed (the loss is unscaled) */
    if (!isfinite(r->loss)) {
        h->nonfinite_run++;
        if (h->nonfinite_run >= HEALTH_NONFINITE_STOP) {
            err_set(e,
                    "step %lld: the loss has been non-finite for %lld steps in a row: the forward "
                    "pass overflows (the loss is computed before scaling); check the inputs, "
                    "lower the learning rate or keep more layers in f32",
                    s, (long long)h->nonfinite_run);
            return 2;
        }
        if (!h->warned_nonfinite) {
            h->warned_nonfinite = 1;
            err_set(e,
                    "warning: step %lld: the loss is %s; the run stops after %d such "
                    "steps in a row",
                    s, isnan(r->loss) ? "NaN" : "inf", HEALTH_NONFINITE_STOP);
            return 1;
        }
        return 0;
    }
    h->nonfinite_run = 0;
    if (r->skipped) return 0;
    if (h->window > 0) { /* a resume without the reference: it is this window's largest loss */
        h->window--;
        if (r->loss > h->start_loss) h->start_loss = r->loss;
        return 0;
    }
    if (h->start_loss == 0) {
        h->start_loss = r->loss > 0 ? r->loss : 1e-30;
        return 0;
    }
    if (r->loss > HEALTH_DIVERGE_FACTOR * h->start_loss) {
        h->diverged_run++;
        if (h->diverged_run >= HEALTH_DIVERGE_STOP) {
            err_set(e,
                    "step %lld: the loss %.4g has stayed above %g times its start (%.4g) for "
                    "%lld applied steps: training diverges; lower the learning rate or clip "
                    "gradients (clip_grad_norm)",
                    s, r->loss, HEALTH_DIVERGE_FACTOR, h->start_loss, (long long)h->diverged_run);
            return 2;
        }
        if (!h->warned_diverged) {
            h->warned_diverged = 1;
            err_set(e,
                    "warning: step %lld: the loss %.4g is above %g times its start (%.4g); the "
                    "run stops when it stays there for %d applied steps",
                    s, r->loss, HEALTH_DIVERGE_FACTOR, h->start_loss, HEALTH_DIVERGE_STOP);
            return 1;
        }
        return 0;
    }
    h->diverged_run = 0;
    return 0;
}

void health_resume(health_state *h, double start_loss) {
    h->start_loss   = start_loss > 0 && isfinite(start_loss) ? start_loss : 0;
    h->window       = h->start_loss > 0 ? 0 : HEALTH_RESUME_WINDOW;
    h->diverged_run = 0;
}

int health_end(const health_state *h, double scale, double min_scale, ampx_err e) {
    int64_t skipped = h->steps - h->applied;
    if (h->steps == 0 || skipped == 0) return 0;
    double frac = (double)skipped / (double)h->steps;
    int at_min  = min_scale > 0 && scale <= min_scale;
    int many    = frac > HEALTH_SKIPPED_WARN;
    if (!many && !at_min) return 0;
    char why[160] = "", over[40] = "";
    if (many) snprintf(over, sizeof over, " (more than %.0f%%)", 100 * HEALTH_SKIPPED_WARN);
    if (at_min)
        snprintf(why, sizeof why,
                 ", and the loss scale ends at its min_scale %.9g, where it cannot back off "
                 "any further",
                 min_scale);
    err_set(e,
            "warning: %lld of this run's %lld steps (%.1f%%) were skipped for non-finite "
            "gradients%s%s: the gradients overflow%s; %skeep the overflowing layers in f32 "
            "(the policy) or lower the learning rate (scaler.on_min_scale \"error\" or "
            "scaler.max_consecutive_skips make such a run fail)",
            (long long)skipped, (long long)h->steps, 100 * frac, over, why,
            at_min ? " even at the smallest scale allowed" : "",
            at_min ? "lower scaler.min_scale (0: no bound), " : "lower scaler.init_scale, ");
    return 1;
}
