/* health.h — run-health rules over the step records (docs/OBSERVABILITY.md): a run that
 * applies no step, a loss that turns non-finite or grows tenfold above its start. Each rule
 * warns the first time it fires and stops the run past its limit. At the run's end, one
 * that skipped many of its steps or ends pinned at min_scale gets a warning. (Weights made
 * non-finite by an applied update are checked by the trainer on the device at each log interval.)
 */
#ifndef AMPX_OBS_HEALTH_H
#define AMPX_OBS_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/train.h"
#include "base/error.h"

#define HEALTH_NO_APPLIED_WARN 20  /* steps from the start with none applied: warn */
#define HEALTH_NO_APPLIED_STOP 200 /* ... stop */
#define HEALTH_NONFINITE_STOP 10   /* consecutive steps with a non-finite loss: stop */
#define HEALTH_DIVERGE_FACTOR 10.0 /* loss above this times the first applied step's: warn */
#define HEALTH_DIVERGE_STOP 50     /* ... consecutive steps above it: stop */
#define HEALTH_SKIPPED_WARN 0.10   /* fraction of a run's steps skipped: warn at its end */
#define HEALTH_RESUME_WINDOW                                                                       \
    50 /* a resume whose checkpoint has no start loss: applied                                     \
          steps whose largest loss becomes the reference */

typedef struct health_state {
    int64_t steps, applied; /* records seen, applied among them */
    int64_t nonfinite_run;  /* consecutive records with a non-finite loss */
    int64_t diverged_run;   /* consecutive applied records above the factor */
    double start_loss;      /* the loss of the run's first applied step, carried over a resume
                               in the checkpoint; 0 until then */
    int64_t window;         /* applied steps still taken as the reference (health_resume) */
    int warned_none, warned_nonfinite, warned_diverged;
} health_state;

/* Feeds one record. Returns 0, 1 with a warning in e, or 2 with the diagnosis of a stop. */
int health_step(health_state *h, const ampx_step_record *r, ampx_err e);

/* A trainer resumed from a checkpoint: start_loss is the one the checkpoint carries, so the
 * divergence rule judges the resumed run as the straight run (0: none, a checkpoint written
 * before it was saved; the largest loss of the next HEALTH_RESUME_WINDOW applied steps is
 * then the reference, and none of them is judged). */
void health_resume(health_state *h, double start_loss);

/* The run's end, given the loss scale it ends at and the scaler's min_scale (0: none):
 * 1 with a warning in e when more than HEALTH_SKIPPED_WARN of its steps were skipped, or
 * when it skipped steps and the scale ends at min_scale; else 0. A warning, not a stop:
 * the applied steps trained the weights (scaler.on_min_scale "error" and
 * max_consecutive_skips are the settings that fail such a run). */
int health_end(const health_state *h, double scale, double min_scale, ampx_err e);

#endif
