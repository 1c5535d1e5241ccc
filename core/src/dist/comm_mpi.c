/* comm_mpi.c — the communicator over Open MPI (any MPI-3 library): MPI_COMM_WORLD, host
 * buffers, MPI_Allreduce/MPI_Iallreduce with MPI_SUM on MPI_FLOAT in place. MPI is told to
 * return errors (MPI_ERRORS_RETURN) so each one becomes a status with MPI's words and the
 * rank; the caller prints it and aborts the job. Only the main thread calls MPI
 * (MPI_THREAD_FUNNELED): the CPU backend's worker threads never do. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "dist/comm.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    MPI_Request pending[DIST_MAX_PENDING];
    int n_pending;
} mpi_impl;

static ampx_status mpi_fail(ampx_dist *d, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        err_set(ERR(msg, sizeof msg), "error %d", rc);
    err_set(ERR(d->error, sizeof d->error), "%s: %s", what, msg);
    return AMPX_ERR_DEVICE;
}

static ampx_status mpi_allreduce(ampx_dist *d, float *buf, uint64_t n) {
    mpi_impl *m = d->impl;
    /* MPI counts are int: sums of more than 2^31-1 values go in pieces */
    for (uint64_t at = 0; at < n;) {
        int c  = n - at > (uint64_t)1 << 30 ? 1 << 30 : (int)(n - at);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, c, MPI_FLOAT, MPI_SUM, m->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Allreduce");
        at += (uint64_t)c;
    }
    return AMPX_OK;
}

static ampx_status mpi_iallreduce(ampx_dist *d, float *buf, uint64_t n) {
    mpi_impl *m = d->impl;
    for (uint64_t at = 0; at < n;) {
        if (m->n_pending == DIST_MAX_PENDING) {
            err_set(ERR(d->error, sizeof d->error), "more than %d all-reduces in flight",
                    DIST_MAX_PENDING);
            return AMPX_ERR_INVALID;
        }
        int c  = n - at > (uint64_t)1 << 30 ? 1 << 30 : (int)(n - at);
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + at, c, MPI_FLOAT, MPI_SUM, m->comm,
                                &m->pending[m->n_pending++]);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Iallreduce");
        at += (uint64_t)c;
    }
    return AMPX_OK;
}

static ampx_status mpi_progress(ampx_dist *d) {
    mpi_impl *m = d->impl;
    int done;
    if (!m->n_pending) return AMPX_OK;
    int rc = MPI_Testall(m->n_pending, m->pending, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Testall");
    if (done) m->n_pending = 0;
    return AMPX_OK;
}

static ampx_status mpi_wait(ampx_dist *d) {
    mpi_impl *m = d->impl;
    if (!m->n_pending) return AMPX_OK;
    int rc       = MPI_Waitall(m->n_pending, m->pending, MPI_STATUSES_IGNORE);
    m->n_pending = 0;
    return rc == MPI_SUCCESS ? AMPX_OK : mpi_fail(d, rc, "MPI_Waitall");
}

static ampx_status mpi_broadcast(ampx_dist *d, void *buf, uint64_t bytes, int root) {
    mpi_impl *m = d->impl;
    for (uint64_t at = 0; at < bytes;) {
        int c  = bytes - at > (uint64_t)1 << 30 ? 1 << 30 : (int)(bytes - at);
        int rc = MPI_Bcast((char *)buf + at, c, MPI_BYTE, root, m->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Bcast");
        at += (uint64_t)c;
    }
    return AMPX_OK;
}

static ampx_status mpi_barrier(ampx_dist *d) {
    int rc = MPI_Barrier(((mpi_impl *)d->impl)->comm);
    return rc == MPI_SUCCESS ? AMPX_OK : mpi_fail(d, rc, "MPI_Barrier");
}

static void mpi_abort(ampx_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(((mpi_impl *)d->impl)->comm, code);
    exit(code); /* MPI_Abort does not return; this only keeps the contract visible */
}

static void mpi_finalize(ampx_dist *d) {
    mpi_impl *m = d->impl;
    mpi_wait(d);
    MPI_Barrier(m->comm);
    MPI_Comm_free(&m->comm);
    MPI_Finalize();
    free(m);
    d->impl = NULL;
}

static const dist_ops mpi_ops = {.allreduce_sum_f32  = mpi_allreduce,
                                 .iallreduce_sum_f32 = mpi_iallreduce,
                                 .progress           = mpi_progress,
                                 .wait               = mpi_wait,
                                 .broadcast          = mpi_broadcast,
                                 .barrier            = mpi_barrier,
                                 .abort              = mpi_abort,
                                 .finalize           = mpi_finalize};

ampx_status dist_mpi_init(ampx_dist *d, char *err, size_t cap) {
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        err_set(ERR(err, cap), "MPI_Init_thread failed");
        return AMPX_ERR_UNAVAILABLE;
    }
    mpi_impl *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(ERR(err, cap), "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    /* a communicator of our own, so an application's other MPI traffic never interleaves */
    MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &d->rank);
    MPI_Comm_size(m->comm, &d->size);
    d->name = "mpi";
    d->ops  = &mpi_ops;
    d->impl = m;
    return AMPX_OK;
}
