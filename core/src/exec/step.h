/* step.h — the step and its ring of records (step.c), for the trainer's creation and for
 * `ampx diff`, which runs a step's parts one at a time. */
#ifndef AMPX_EXEC_STEP_H
#define AMPX_EXEC_STEP_H

#include "exec/trainer.h"

/* The scalars block of a fresh run: scaler and schedule configuration. */
void init_scalars(const ampx_model *m, ampx_scalars *s);
/* The ring of step records: K slots. */
ampx_status ring_setup(ampx_trainer *t);
/* The start of the next step's first micro-batch (its rows bound, its loss in the ring slot)
 * without running a node; exec_run then runs what the caller picks. */
ampx_status tr_step_begin(ampx_trainer *t);
/* The part of a step after the gradients (the AMP pass, the optimizer, the scaler's update) on
 * the gradients as they are, in the ring slot of the step to come; the step count does not
 * move (ampx diff compares it op by op). */
ampx_status tr_step_update(ampx_trainer *t);

#endif
