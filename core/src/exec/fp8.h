/* fp8.h — the fp8 scaling state (fp8.c; its step's update is fp8_hook). */
#ifndef AMPX_EXEC_FP8_H
#define AMPX_EXEC_FP8_H

#include "exec/trainer.h"

/* The state of a graph with fp8 products (none: nothing), fresh (every scale 1, the history
 * 0). */
ampx_status fp8_setup(ampx_trainer *t);
/* A digest of the slots (each tensor's name and format) and the history length: a checkpoint's
 * state is this model's only when its digest is the same. */
uint64_t fp8_layout(const ampx_trainer *t);
uint64_t fp8_state_floats(const ampx_trainer *t);

#endif
