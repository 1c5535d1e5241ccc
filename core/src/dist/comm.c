/* comm.c — joining a data-parallel job, and the timed helpers over the communicator's ops.
 * Which launcher started the process is read from its environment alone, so a plain
 * `ampx train` never touches MPI, and a build without MPI can still refuse an mpirun launch
 * in one line. */
#include "dist/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/ampx.h"
#include "base/error.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int dist_launched(int *size) {
    /* Open MPI's mpirun, then the PMI/PMIx variables MPICH, Slurm's srun and PRRTE set */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
                                       "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *size = atoi(v);
            return *size > 1;
        }
    }
    *size = 1;
    return 0;
}

ampx_status ampx_dist_init(ampx_dist **out, char *err, size_t err_cap) {
    *out = NULL;
    int n;
    if (!dist_launched(&n)) return AMPX_OK;
#ifdef AMPX_HAVE_MPI
    ampx_dist *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(ERR(err, err_cap), "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    ampx_status st = dist_mpi_init(d, err, err_cap);
    if (st) {
        free(d);
        return st;
    }
    *out = d;
    return AMPX_OK;
#else
    err_set(ERR(err, err_cap),
            "started as one of %d ranks, but this ampx was built without MPI (install "
            "libopenmpi-dev and rebuild): refusing to train %d independent copies",
            n, n);
    return AMPX_ERR_UNAVAILABLE;
#endif
}

int ampx_dist_rank(const ampx_dist *d) {
    return d ? d->rank : 0;
}
int ampx_dist_size(const ampx_dist *d) {
    return d ? d->size : 1;
}
const char *ampx_dist_engine(void) {
#ifdef AMPX_HAVE_MPI
    return "mpi";
#else
    return "none";
#endif
}
double ampx_dist_comm_ms(const ampx_dist *d) {
    return d ? d->comm_ms : 0;
}

void ampx_dist_abort(ampx_dist *d, int code) {
    if (d) d->ops->abort(d, code);
}

void ampx_dist_finalize(ampx_dist *d) {
    if (!d) return;
    d->ops->finalize(d);
    free(d);
}

// ---------------------------------------------------------------------------------------
// Timed helpers

#define TIMED(call)                                                                                \
    do {                                                                                           \
        double t0_     = now_ms();                                                                 \
        ampx_status st = (call);                                                                   \
        d->comm_ms += now_ms() - t0_;                                                              \
        return st;                                                                                 \
    } while (0)

ampx_status dist_allreduce(ampx_dist *d, float *buf, uint64_t n) {
    TIMED(d->ops->allreduce_sum_f32(d, buf, n));
}
ampx_status dist_allreduce_max(ampx_dist *d, float *buf, uint64_t n) {
    TIMED(d->ops->allreduce_max_f32(d, buf, n));
}
ampx_status dist_iallreduce(ampx_dist *d, float *buf, uint64_t n) {
    TIMED(d->ops->iallreduce_sum_f32(d, buf, n));
}
ampx_status dist_progress(ampx_dist *d) {
    TIMED(d->ops->progress(d));
}
ampx_status dist_wait(ampx_dist *d) {
    TIMED(d->ops->wait(d));
}
ampx_status dist_broadcast(ampx_dist *d, void *buf, uint64_t bytes, int root) {
    TIMED(d->ops->broadcast(d, buf, bytes, root));
}

#ifndef AMPX_HAVE_NCCL
/* Without nccl.h at build time: CUDA gradients take the host path. */
int dist_nccl_built(void) {
    return 0;
}
ampx_status dist_nccl_init(ampx_dist *d, dist_nccl **out, char *err, size_t cap) {
    *out = NULL;
    err_set(ERR(err, cap), "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
ampx_status dist_nccl_allreduce_f32(dist_nccl *c, void *dev, uint64_t n, int mean, void *stream,
                                    char *err, size_t cap) {
    err_set(ERR(err, cap), "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
ampx_status dist_nccl_broadcast(dist_nccl *c, void *dev, uint64_t bytes, int root, void *stream,
                                char *err, size_t cap) {
    err_set(ERR(err, cap), "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
void dist_nccl_free(dist_nccl *c) {}
#endif
