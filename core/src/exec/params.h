/* params.h — the parameters (params.c): created with their state and working copies, ZeRO-1's
 * staging on rank 0, a working copy cast from host values. */
#ifndef AMPX_EXEC_PARAMS_H
#define AMPX_EXEC_PARAMS_H

#include "exec/trainer.h"

/* Parameters in the order the model declares them (drawn unless a file will fill them),
 * non-trainable state, constants. */
ampx_status params_create(ampx_trainer *t);
/* ZeRO-1, rank 0: host memory for the whole optimizer state (checkpoints are written from it
 * and read into it). */
ampx_status params_stage_zero(ampx_trainer *t);
/* p's working copy cast from the n f32 values at full (host): a sharded master's copy. */
ampx_status tr_copy_from_host(ampx_trainer *t, const param *p, const float *full);

#endif
