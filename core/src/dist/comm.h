/* comm.h — the communicator of data-parallel training: one small interface (init,
 * all-reduce sum of f32, broadcast, barrier, abort) with two implementations, Open MPI for
 * host buffers (comm_mpi.c) and NCCL for CUDA device buffers (comm_nccl.c, bootstrapped over
 * the MPI one: rank 0 makes the NCCL id and MPI_Bcast hands it out). Nothing here is
 * home-made transport: both are thin layers over the engines.
 *
 * The trainer holds one host communicator (ampx_dist) for everything the host does with
 * other ranks, and hands gradient buckets to it. Builds without MPI have only the
 * single-process communicator, and a run launched by mpirun is refused there in one line
 * rather than training N copies that overwrite each other's checkpoints. */
#ifndef AMPX_DIST_COMM_H
#define AMPX_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"
#include "ampx/dist.h"
#include "base/error.h"

#define DIST_MAX_PENDING 1024 /* non-blocking all-reduces in flight at once */

// clang-format off
typedef struct dist_ops {
    /* In-place sum of n f32 values of buf over all ranks (blocking). */
    ampx_status (*allreduce_sum_f32)(ampx_dist *d, float *buf, uint64_t n);
    /* Starts an in-place sum of buf over all ranks; dist_wait completes every one started. */
    ampx_status (*iallreduce_sum_f32)(ampx_dist *d, float *buf, uint64_t n);
    /* Gives the started all-reduces a chance to progress (returns at once). */
    ampx_status (*progress)         (ampx_dist *d);
    /* Waits for every started all-reduce. */
    ampx_status (*wait)             (ampx_dist *d);
    /* Rank root's bytes of buf into every rank's buf. */
    ampx_status (*broadcast)        (ampx_dist *d, void *buf, uint64_t bytes, int root);
    ampx_status (*barrier)          (ampx_dist *d);
    /* Ends every rank of the job with exit status code; does not return. */
    void        (*abort)            (ampx_dist *d, int code);
    void        (*finalize)         (ampx_dist *d);
    /* In-place largest of n f32 values of buf over all ranks (blocking): the fp8 amaxes. */
    ampx_status (*allreduce_max_f32)(ampx_dist *d, float *buf, uint64_t n);
    /* In place: rank r's counts[r] f32 values at buf + displs[r] into every rank's buf
     * (blocking; ZeRO-1's updated shards). */
    ampx_status (*allgather_f32)    (ampx_dist *d, float *buf, const int *counts,
                                     const int *displs);
    /* to_root 1: every rank's counts[r] f32 values at mine into rank 0's full + displs[r]
     * (a gather); 0: rank 0's full + displs[r] into rank r's mine (a scatter). full is read
     * or written on rank 0 only. Blocking. */
    ampx_status (*shards_f32)       (ampx_dist *d, float *full, float *mine, const int *counts,
                                     const int *displs, int to_root);
    /* Starts, in place, the sum over all ranks of buf (the ranks' counts, rank-major), rank
     * r's counts[r] values of it into the first counts[r] of rank r's buf; dist_wait
     * completes it (ZeRO-1's gradients). */
    ampx_status (*ireduce_scatter_f32)(ampx_dist *d, float *buf, const int *counts);
    /* As allgather_f32, of 16-bit values (ZeRO-1's bf16/f16 working copies). */
    ampx_status (*allgather_u16)    (ampx_dist *d, uint16_t *buf, const int *counts,
                                     const int *displs);
} dist_ops;
// clang-format on

struct ampx_dist {
    const char *name; /* "mpi" */
    int rank, size;
    int local_rank; /* among the ranks on this node (MPI_COMM_TYPE_SHARED) */
    const dist_ops *ops;
    void *impl;
    double comm_ms; /* host time spent inside the communicator's calls */
    int64_t step;   /* the training step under way (0: none yet), for the watchdog's words */
    double step_s;  /* the last step's host time: the watchdog waits at least twice that */
    char error[512];
};

/* The MPI communicator (comm_mpi.c, built when CMake finds MPI): joins MPI_COMM_WORLD. */
ampx_status dist_mpi_init(ampx_dist *d, ampx_err e);
/* 1 when this process was started by mpirun or another PMI launcher with more than one rank
 * (environment variables only: no MPI call is made; torchrun's WORLD_SIZE counts too, and is
 * refused at init without an MPI process manager). *size gets the launcher's count. */
int dist_launched(int *size);

/* The communicator's message buffer, d->error, as an ampx_err. */
static inline ampx_err dist_err(ampx_dist *d) {
    return ERR(d->error, sizeof d->error);
}

/* Helpers over ops: each times itself into d->comm_ms and names the rank in d->error. */
ampx_status dist_allreduce(ampx_dist *d, float *buf, uint64_t n);
ampx_status dist_allreduce_max(ampx_dist *d, float *buf, uint64_t n);
ampx_status dist_iallreduce(ampx_dist *d, float *buf, uint64_t n);
ampx_status dist_progress(ampx_dist *d);
ampx_status dist_wait(ampx_dist *d);
ampx_status dist_broadcast(ampx_dist *d, void *buf, uint64_t bytes, int root);
ampx_status dist_allgather(ampx_dist *d, float *buf, const int *counts, const int *displs);
ampx_status dist_shards(ampx_dist *d, float *full, float *mine, const int *counts,
                        const int *displs, int to_root);
ampx_status dist_ireduce_scatter(ampx_dist *d, float *buf, const int *counts);
ampx_status dist_allgather16(ampx_dist *d, uint16_t *buf, const int *counts, const int *displs);

// ---------------------------------------------------------------------------------------
// NCCL (comm_nccl.c, built when nccl.h is found next to the CUDA toolkit): device buffers.
// NCCL is loaded at run time (dlopen "libnccl.so.2"), so libampx has no link dependency on
// CUDA and loads on machines without it.

typedef struct dist_nccl dist_nccl;
/* 1 when this build has the NCCL implementation. */
int dist_nccl_built(void);
/* Creates an NCCL communicator over the ranks of the host communicator d (rank 0 makes the
 * id, d broadcasts it). The CUDA device is the one the backend's context uses. */
ampx_status dist_nccl_init(ampx_dist *d, dist_nccl **out, ampx_err e);
/* In-place sum (mean: the sum over the ranks divided by their count, ncclAvg) of n f32 at
 * device pointer dev over all ranks, enqueued on CUDA stream `stream`. */
ampx_status dist_nccl_allreduce_f32(dist_nccl *c, void *dev, uint64_t n, int mean, void *stream,
                                    ampx_err e);
ampx_status dist_nccl_broadcast(dist_nccl *c, void *dev, uint64_t bytes, int root, void *stream,
                                ampx_err e);
void dist_nccl_free(dist_nccl *c);

#endif
