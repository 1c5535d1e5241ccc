/* ampx/dist.h — data-parallel training across processes (docs/DISTRIBUTED.md).
 *
 *   ampx_dist *d;  ampx_dist_init(&d, err, sizeof err);   // NULL: one process, as before
 *   ampx_trainer_create_dist(model, backend, d, &t, err, sizeof err);
 *   ...            // rank 0 alone writes metrics and checkpoints
 *   ampx_dist_finalize(d);
 *
 * `mpirun -np N ampx train MODEL.json` starts N ranks; each reads a disjoint shard of every
 * global batch (the model's batch is per rank: the global batch is N times it), gradients
 * are averaged in f32 before unscale-and-check, so every rank makes the same scaler
 * decision and applies the same update. */
#ifndef AMPX_DIST_H
#define AMPX_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "ampx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampx_dist ampx_dist;

/* Joins the job when this process was started by mpirun (or another PMI launcher) with more
 * than one rank; *out is NULL for a single process (a NULL ampx_dist is rank 0 of 1
 * everywhere below). Fails with one line when launched with several ranks by a build without
 * MPI, when MPI cannot start, or when the launcher's variables (RANK, WORLD_SIZE, LOCAL_RANK
 * as torchrun sets them; PMI_RANK, PMI_SIZE; OMPI_COMM_WORLD_*) disagree with what MPI
 * gives this process (every rank then fails). */
AMPX_API ampx_status ampx_dist_init(ampx_dist **out, char *err, size_t err_cap);
AMPX_API int ampx_dist_rank(const ampx_dist *d);
AMPX_API int ampx_dist_size(const ampx_dist *d);
/* This rank's place among the ranks on its node (0 for a NULL d): the one to pick a device by. */
AMPX_API int ampx_dist_local_rank(const ampx_dist *d);
/* "mpi", or "none" in a build without MPI. */
AMPX_API const char *ampx_dist_engine(void);
/* Host milliseconds spent in the communicator (all-reduces, broadcasts, waits) so far. */
AMPX_API double ampx_dist_comm_ms(const ampx_dist *d);
/* In place: the largest *value over all ranks (blocking; every rank calls it at the same
 * point). |*value| < 2^24. A NULL d leaves *value as it is. `ampx train` agrees on a stop
 * signal with it at the end of each interval, so every rank stops after the same step. */
AMPX_API ampx_status ampx_dist_max_int(ampx_dist *d, int *value);
/* Ends every rank of the job with exit status code (MPI_Abort); the caller prints its
 * message, naming its rank, first. Does not return; a NULL d returns at once. */
AMPX_API void ampx_dist_abort(ampx_dist *d, int code);
/* Waits for every rank (a barrier), then leaves MPI. NULL is a no-op. */
AMPX_API void ampx_dist_finalize(ampx_dist *d);

#ifdef __cplusplus
}
#endif
#endif
