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

// ---------------------------------------------------------------------------------------
// What the launcher says: rank, size and local rank, from the first variable of each family
// that is set. Open MPI's mpirun sets OMPI_COMM_WORLD_* (and PMIX_RANK), MPICH's Hydra
// PMI_RANK/PMI_SIZE and MPI_LOCALRANKID/MPI_LOCALNRANKS, Slurm's srun PMI_* or PMIX_* and
// SLURM_LOCALID; torchrun-style scripts RANK/WORLD_SIZE/LOCAL_RANK.

static const char *const rank_vars[]  = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"};
static const char *const size_vars[]  = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
                                         "WORLD_SIZE"};
static const char *const local_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                         "SLURM_LOCALID", "LOCAL_RANK"};
#define N_VARS 4 /* each family's variables; the last is torchrun's */

/* The value of a set variable (-1: unset or empty; -2: not a number >= 0). */
static long env_count(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end = NULL;
    long n    = strtol(v, &end, 10);
    return *end || n < 0 || n > 1 << 24 ? -2 : n;
}

int dist_launched(int *size) {
    /* a process manager's size first (torchrun's WORLD_SIZE comes last: alone, it is refused
     * at ampx_dist_init), then MPICH's count of ranks on this node */
    for (int i = 0; i < N_VARS; i++) {
        long n = env_count(size_vars[i]);
        if (n >= 0 || n == -2) {
            *size = n < 0 ? 2 : (int)n; /* a malformed count is refused at init */
            return *size > 1;
        }
    }
    long local = env_count("MPI_LOCALNRANKS");
    *size      = local > 1 ? (int)local : 1;
    return *size > 1;
}

/* Whether only torchrun's variables say this is one of several processes: no MPI process
 * manager started it, so MPI would make a job of one. */
static int torchrun_alone(void) {
    for (int i = 0; i < N_VARS - 1; i++)
        if (env_count(size_vars[i]) != -1 || env_count(rank_vars[i]) != -1) return 0;
    return env_count("MPI_LOCALNRANKS") == -1;
}

#ifdef AMPX_HAVE_MPI
/* What the launcher says this process is, read before MPI_Init (which may set variables of
 * its own): of each family (rank, size, local rank) the process manager's variable (the first
 * set: under mpirun in a Slurm allocation the ranks inherit srun's PMI_RANK and the
 * SLURM_LOCALID of the daemon that started them, which are not this rank's) and torchrun's. */
typedef struct launch_claim {
    const char *name;
    long value;
    int family; /* 0 rank, 1 size, 2 local rank */
} launch_claim;

static int read_claims(launch_claim out[6]) {
    const char *const *fams[3] = {rank_vars, size_vars, local_vars};
    int n                      = 0;
    for (int f = 0; f < 3; f++)
        for (int i = 0, manager = 0; i < N_VARS; i++) {
            long v = env_count(fams[f][i]);
            if (v < 0 || (i < N_VARS - 1 && manager++)) continue;
            out[n++] = (launch_claim){fams[f][i], v, f};
        }
    return n;
}

/* After MPI_Init: the launcher's claims against the rank, size and local rank MPI gave this
 * process. Every rank learns whether any disagrees (an all-reduce), so all of them stop at
 * once, each with one line naming both. */
static ampx_status check_launch(ampx_dist *d, const launch_claim *c, int n_claims, ampx_err e) {
    char bad[384]     = "";
    size_t at         = 0;
    int n             = 0;
    const int want[3] = {d->rank, d->size, d->local_rank};
    for (int i = 0; i < n_claims; i++) {
        if (c[i].value == want[c[i].family] || at + 64 > sizeof bad) continue;
        at += (size_t)snprintf(bad + at, sizeof bad - at, "%s%s=%ld", at ? ", " : "", c[i].name,
                               c[i].value);
        n++;
    }
    float count    = n ? 1.0f : 0.0f;
    ampx_status st = dist_allreduce(d, &count, 1);
    if (st) {
        err_set(e, "%s", d->error);
        return st;
    }
    if (count == 0) return AMPX_OK;
    if (n)
        err_set(e,
                "rank %d of %d: the launcher's %s disagree%s with MPI, which made this process "
                "rank %d of %d (local rank %d): ampx's ranks are MPI's; start every rank with "
                "mpirun, mpiexec or srun and export RANK, WORLD_SIZE and LOCAL_RANK from the "
                "ones it gives, or not at all",
                d->rank, d->size, bad, n == 1 ? "s" : "", d->rank, d->size, d->local_rank);
    else
        err_set(e,
                "rank %d of %d: %d rank%s' launcher variables (RANK, WORLD_SIZE, LOCAL_RANK, "
                "PMI_*) disagree with MPI: refused on every rank",
                d->rank, d->size, (int)count, count == 1 ? "" : "s");
    return AMPX_ERR_INVALID;
}
#endif

ampx_status ampx_dist_init(ampx_dist **out, char *err, size_t err_cap) {
    *out = NULL;
    int n;
    if (!dist_launched(&n)) return AMPX_OK;
    for (int i = 0; i < N_VARS; i++)
        if (env_count(size_vars[i]) == -2 || env_count(rank_vars[i]) == -2 ||
            env_count(local_vars[i]) == -2) {
            const char *bad = env_count(size_vars[i]) == -2   ? size_vars[i]
                              : env_count(rank_vars[i]) == -2 ? rank_vars[i]
                                                              : local_vars[i];
            err_set(ERR(err, err_cap), "%s=%.32s: expected a count, 0 or more", bad, getenv(bad));
            return AMPX_ERR_INVALID;
        }
    if (torchrun_alone()) {
        err_set(ERR(err, err_cap),
                "WORLD_SIZE=%d, but no MPI process manager started this process (no "
                "OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK): ampx's ranks join over MPI; "
                "start them with mpirun, mpiexec or srun",
                n);
        return AMPX_ERR_UNAVAILABLE;
    }
#ifdef AMPX_HAVE_MPI
    ampx_dist *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(ERR(err, err_cap), "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    launch_claim claims[6];
    int n_claims   = read_claims(claims);
    ampx_status st = dist_mpi_init(d, ERR(err, err_cap));
    if (st) {
        free(d);
        return st;
    }
    if ((st = check_launch(d, claims, n_claims, ERR(err, err_cap)))) {
        ampx_dist_finalize(d);
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
int ampx_dist_local_rank(const ampx_dist *d) {
    return d ? d->local_rank : 0;
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

ampx_status ampx_dist_max_int(ampx_dist *d, int *value) {
    if (!d) return AMPX_OK;
    float v        = (float)*value; /* exact below 2^24 */
    ampx_status st = d->ops->allreduce_max_f32(d, &v, 1);
    if (!st) *value = (int)v;
    return st;
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
ampx_status dist_allgather(ampx_dist *d, float *buf, const int *counts, const int *displs) {
    TIMED(d->ops->allgather_f32(d, buf, counts, displs));
}
ampx_status dist_shards(ampx_dist *d, float *full, float *mine, const int *counts,
                        const int *displs, int to_root) {
    TIMED(d->ops->shards_f32(d, full, mine, counts, displs, to_root));
}
ampx_status dist_allgather16(ampx_dist *d, uint16_t *buf, const int *counts, const int *displs) {
    TIMED(d->ops->allgather_u16(d, buf, counts, displs));
}
ampx_status dist_ireduce_scatter(ampx_dist *d, float *buf, const int *counts) {
    TIMED(d->ops->ireduce_scatter_f32(d, buf, counts));
}

#ifndef AMPX_HAVE_NCCL
/* Without nccl.h at build time: CUDA gradients take the host path. */
int dist_nccl_built(void) {
    return 0;
}
ampx_status dist_nccl_init(ampx_dist *d, dist_nccl **out, ampx_err e) {
    *out = NULL;
    err_set(e, "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
ampx_status dist_nccl_allreduce_f32(dist_nccl *c, void *dev, uint64_t n, int mean, void *stream,
                                    ampx_err e) {
    err_set(e, "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
ampx_status dist_nccl_broadcast(dist_nccl *c, void *dev, uint64_t bytes, int root, void *stream,
                                ampx_err e) {
    err_set(e, "this ampx was built without NCCL");
    return AMPX_ERR_UNAVAILABLE;
}
void dist_nccl_free(dist_nccl *c) {}
#endif
