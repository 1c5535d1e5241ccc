/* comm_mpi.c — the communicator over Open MPI (any MPI-3 library): MPI_COMM_WORLD, host
 * buffers, non-blocking MPI_Iallreduce (MPI_SUM on MPI_FLOAT in place), MPI_Ibcast and
 * MPI_Ibarrier, each waited for under a watchdog. MPI is told to return errors
 * (MPI_ERRORS_RETURN) so each one becomes a status with MPI's words and the rank; the caller
 * prints it and aborts the job. Only the main thread calls MPI (MPI_THREAD_FUNNELED): the CPU
 * backend's worker threads never do. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "dist/comm.h"

#define HB_TAG 17 /* the heartbeats' tag, on a communicator of their own */

typedef struct mpi_impl {
    MPI_Comm comm, hb; /* the collectives', the heartbeats' */
    MPI_Request pending[DIST_MAX_PENDING];
    int n_pending;
    /* the watchdog: per peer, the heartbeat being received and sent, the last wait point it
     * reported and when it was last heard from; seq counts this rank's wait points (the same
     * sequence on every rank) */
    int64_t *hb_in, *hb_out, *seen, seq;
    double *heard;
    MPI_Request *hb_rreq, *hb_sreq;
    double deadline_s;
    int check; /* AMPX_DIST_CHECK=1: signatures compared before each collective */
    /* AMPX_INJECT_COLLECTIVE=STEP[@RANK] (tests only): the first gradient all-reduce of step
     * STEP is one value short on rank RANK (every rank without @RANK); -1: none */
    int64_t skew_step, skew_rank;
} mpi_impl;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static ampx_status mpi_fail(ampx_dist *d, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        err_set(ERR(msg, sizeof msg), "error %d", rc);
    err_set(dist_err(d), "%s: %s", what, msg);
    return AMPX_ERR_DEVICE;
}

// ---------------------------------------------------------------------------------------
// The watchdog. Every blocking wait (a collective, or the wait for the started all-reduces)
// is a numbered wait point, the same sequence on every rank. A rank arriving at one tells
// every peer its number (a heartbeat: one small non-blocking send each), polls its requests
// and reads the peers' heartbeats as they come; it beats again every quarter deadline while
// it waits. Past the deadline it names the ranks that never arrived (their last number is
// older) and those that arrived but fell silent for half the deadline (stopped or hung
// inside the collective).

static void hb_poll(mpi_impl *m, int rank, int size, double now) {
    for (int p = 0; p < size; p++) {
        int done = 0;
        if (p == rank || MPI_Test(&m->hb_rreq[p], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
            continue;
        if (m->hb_in[p] > m->seen[p]) m->seen[p] = m->hb_in[p];
        m->heard[p] = now;
        MPI_Irecv(&m->hb_in[p], 1, MPI_INT64_T, p, HB_TAG, m->hb, &m->hb_rreq[p]);
    }
}

static void hb_send(mpi_impl *m, int rank, int size) {
    for (int p = 0; p < size; p++) {
        int done = 1;
        if (p == rank) continue;
        if (m->hb_sreq[p] != MPI_REQUEST_NULL) MPI_Test(&m->hb_sreq[p], &done, MPI_STATUS_IGNORE);
        if (!done) continue; /* the last one is still on its way: that peer is not reading */
        m->hb_out[p] = m->seq;
        MPI_Isend(&m->hb_out[p], 1, MPI_INT64_T, p, HB_TAG, m->hb, &m->hb_sreq[p]);
    }
}

/* The deadline of this wait: AMPX_DIST_TIMEOUT, or twice the last step's time when that is
 * longer; ten times that before the first step (loading and the first broadcasts). */
static double deadline_of(const ampx_dist *d, const mpi_impl *m) {
    double t = m->deadline_s > 2.0 * d->step_s ? m->deadline_s : 2.0 * d->step_s;
    return d->step > 0 ? t : 10.0 * t;
}

/* "1, 3" into out: the peers that never reached wait point seq (absent: 1), or that reached
 * it and were not heard from since time `quiet` (absent: 0). */
static int peers(const ampx_dist *d, const mpi_impl *m, int absent, double quiet, char *out,
                 size_t cap) {
    size_t at = 0;
    int n     = 0;
    out[0]    = 0;
    for (int p = 0; p < d->size && at + 16 < cap; p++) {
        int away = m->seen[p] < m->seq;
        if (p == d->rank || (absent ? !away : away || m->heard[p] > quiet)) continue;
        at += (size_t)snprintf(out + at, cap - at, "%s%d", n ? ", " : "", p);
        n++;
    }
    return n;
}

static ampx_status stalled(ampx_dist *d, mpi_impl *m, const char *what, double waited,
                           double limit) {
    char away[96], mute[96], head[192];
    int na = peers(d, m, 1, 0, away, sizeof away);
    int nm = peers(d, m, 0, now_s() - limit / 2, mute, sizeof mute);
    snprintf(head, sizeof head, "step %lld: %s (wait point %lld) waited %.1f s", (long long)d->step,
             what, (long long)m->seq, waited);
    if (!na && !nm) {
        err_set(dist_err(d),
                "%s although every rank reached it and answers: the transport is stuck "
                "(deadline AMPX_DIST_TIMEOUT=%g s); stopping the job",
                head, m->deadline_s);
        return AMPX_ERR_DEVICE;
    }
    err_set(dist_err(d),
            "%s for rank%s %s%s%s%s%s: stalled or hung (deadline AMPX_DIST_TIMEOUT=%g s, or "
            "twice the step time); stopping the job",
            head, na + nm > 1 ? "s" : "", away,
            na ? (na > 1 ? ", which have not reached it" : ", which has not reached it") : "",
            na && nm ? "; and " : "", mute, nm ? ", which reached it and fell silent" : "",
            m->deadline_s);
    return AMPX_ERR_DEVICE;
}

/* Waits for n requests under the watchdog: spins for a millisecond, then polls every 50 us
 * (an oversubscribed job gets its cores back). */
static ampx_status watch(ampx_dist *d, int n, MPI_Request *req, const char *what) {
    mpi_impl *m = d->impl;
    m->seq++;
    hb_send(m, d->rank, d->size);
    double t0 = now_s(), limit = deadline_of(d, m), beat = t0;
    for (;;) {
        int done = 0, rc = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, what);
        if (done) return AMPX_OK;
        double now = now_s(), waited = now - t0;
        hb_poll(m, d->rank, d->size, now);
        if (now - beat > limit / 4) beat = now, hb_send(m, d->rank, d->size);
        if (waited > limit) return stalled(d, m, what, waited, limit);
        if (waited > 1e-3) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* AMPX_DIST_CHECK=1: every rank's signature of the collective it is about to start (kind,
 * count, step) against every other's, so ranks that call different collectives stop with
 * both sides named instead of waiting on each other. */
static ampx_status check_signature(ampx_dist *d, int kind, uint64_t count) {
    static const char *const kinds[] = {"an all-reduce",    "a broadcast",     "a barrier",
                                        "a MAX all-reduce", "an all-gather",   "a gather",
                                        "a scatter",        "a reduce-scatter"};
    mpi_impl *m                      = d->impl;
    if (!m->check) return AMPX_OK;
    int64_t mine[3] = {kind, (int64_t)count, d->step};
    int64_t *all    = malloc(sizeof mine * (size_t)d->size);
    if (!all) {
        err_set(dist_err(d), "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    MPI_Request r;
    int rc         = MPI_Iallgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, m->comm, &r);
    ampx_status st = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Iallgather")
                                       : watch(d, 1, &r, "the collectives' signature check");
    for (int p = 0; !st && p < d->size; p++) {
        const int64_t *o = all + 3 * p;
        if (o[0] == mine[0] && o[1] == mine[1] && o[2] == mine[2]) continue;
        int ok = o[0] >= 0 && o[0] < 8;
        err_set(dist_err(d),
                "the ranks call different collectives: rank %d %s of %lld at step %lld, rank %d "
                "%s of %lld at step %lld",
                d->rank, kinds[kind], (long long)count, (long long)d->step, p,
                ok ? kinds[o[0]] : "?", (long long)o[1], (long long)o[2]);
        st = AMPX_ERR_INVALID;
    }
    free(all);
    return st;
}

// ---------------------------------------------------------------------------------------
// The collectives. MPI counts are int: more than 2^30 values go in pieces.

static ampx_status mpi_iallreduce(ampx_dist *d, float *buf, uint64_t n) {
    mpi_impl *m = d->impl;
    /* the test hook: this rank's collective made another size than its peers' (once) */
    if (m->skew_step >= 0 && d->step == m->skew_step && n > 1 &&
        (m->skew_rank < 0 || m->skew_rank == d->rank))
        n--, m->skew_step = -1;
    ampx_status st = check_signature(d, 0, n);
    if (st) return st;
    for (uint64_t at = 0; at < n;) {
        if (m->n_pending == DIST_MAX_PENDING) {
            err_set(dist_err(d), "more than %d all-reduces in flight", DIST_MAX_PENDING);
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

/* ZeRO-1's gradients: a bucket, packed rank-major, summed and scattered in place (MPI_SUM on
 * MPI_FLOAT, as the all-reduce; the rank's sums land at buf's start), waited for with the
 * all-reduces by mpi_wait. */
static ampx_status mpi_ireduce_scatter(ampx_dist *d, float *buf, const int *counts) {
    mpi_impl *m    = d->impl;
    uint64_t total = 0;
    for (int p = 0; p < d->size; p++)
        total += (uint64_t)counts[p];
    ampx_status st = check_signature(d, 7, total);
    if (st) return st;
    if (m->n_pending == DIST_MAX_PENDING) {
        err_set(dist_err(d), "more than %d all-reduces in flight", DIST_MAX_PENDING);
        return AMPX_ERR_INVALID;
    }
    int rc = MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, m->comm,
                                 &m->pending[m->n_pending++]);
    return rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Ireduce_scatter") : AMPX_OK;
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
    ampx_status st = watch(d, m->n_pending, m->pending, "the gradient all-reduce");
    m->n_pending   = 0;
    return st;
}

/* A blocking all-reduce (op MPI_SUM or MPI_MAX) under the watchdog. */
static ampx_status mpi_allreduce_op(ampx_dist *d, float *buf, uint64_t n, MPI_Op op) {
    mpi_impl *m    = d->impl;
    ampx_status st = check_signature(d, op == MPI_MAX ? 3 : 0, n);
    for (uint64_t at = 0; !st && at < n;) {
        int c = n - at > (uint64_t)1 << 30 ? 1 << 30 : (int)(n - at);
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + at, c, MPI_FLOAT, op, m->comm, &r);
        st     = rc != MPI_SUCCESS
                     ? mpi_fail(d, rc, "MPI_Iallreduce")
                     : watch(d, 1, &r, op == MPI_MAX ? "a MAX all-reduce" : "an all-reduce");
        at += (uint64_t)c;
    }
    return st;
}

static ampx_status mpi_allreduce(ampx_dist *d, float *buf, uint64_t n) {
    return mpi_allreduce_op(d, buf, n, MPI_SUM);
}

static ampx_status mpi_allreduce_max(ampx_dist *d, float *buf, uint64_t n) {
    return mpi_allreduce_op(d, buf, n, MPI_MAX);
}

static ampx_status mpi_broadcast(ampx_dist *d, void *buf, uint64_t bytes, int root) {
    mpi_impl *m    = d->impl;
    ampx_status st = check_signature(d, 1, bytes);
    for (uint64_t at = 0; !st && at < bytes;) {
        int c = bytes - at > (uint64_t)1 << 30 ? 1 << 30 : (int)(bytes - at);
        MPI_Request r;
        int rc = MPI_Ibcast((char *)buf + at, c, MPI_BYTE, root, m->comm, &r);
        st     = rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Ibcast") : watch(d, 1, &r, "a broadcast");
        at += (uint64_t)c;
    }
    return st;
}

/* The all-gather of every rank's shard, in place, under the watchdog; the signature's size
 * is the total. */
static ampx_status allgather_of(ampx_dist *d, void *buf, const int *counts, const int *displs,
                                MPI_Datatype type) {
    mpi_impl *m    = d->impl;
    uint64_t total = 0;
    for (int p = 0; p < d->size; p++)
        total += (uint64_t)counts[p];
    ampx_status st = check_signature(d, 4, total);
    if (st) return st;
    MPI_Request r;
    int rc =
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, type, m->comm, &r);
    return rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Iallgatherv")
                             : watch(d, 1, &r, "the ZeRO-1 all-gather");
}

static ampx_status mpi_allgather(ampx_dist *d, float *buf, const int *counts, const int *displs) {
    return allgather_of(d, buf, counts, displs, MPI_FLOAT);
}

static ampx_status mpi_allgather16(ampx_dist *d, uint16_t *buf, const int *counts,
                                   const int *displs) {
    return allgather_of(d, buf, counts, displs, MPI_UINT16_T);
}

/* ZeRO-1's checkpoints: the shards to rank 0 (a gather) or from it (a scatter). Rank 0's
 * own shard is copied, not sent. */
static ampx_status mpi_shards(ampx_dist *d, float *full, float *mine, const int *counts,
                              const int *displs, int to_root) {
    mpi_impl *m    = d->impl;
    uint64_t total = 0;
    for (int p = 0; p < d->size; p++)
        total += (uint64_t)counts[p];
    ampx_status st = check_signature(d, to_root ? 5 : 6, total);
    if (st) return st;
    MPI_Request r;
    int root = d->rank == 0, rc;
    if (to_root) {
        if (root) memcpy(full + displs[0], mine, sizeof *mine * (size_t)counts[0]);
        rc = MPI_Igatherv(root ? MPI_IN_PLACE : mine, counts[d->rank], MPI_FLOAT, full, counts,
                          displs, MPI_FLOAT, 0, m->comm, &r);
    } else {
        if (root) memcpy(mine, full + displs[0], sizeof *mine * (size_t)counts[0]);
        rc = MPI_Iscatterv(full, counts, displs, MPI_FLOAT, root ? MPI_IN_PLACE : mine,
                           counts[d->rank], MPI_FLOAT, 0, m->comm, &r);
    }
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, to_root ? "MPI_Igatherv" : "MPI_Iscatterv");
    return watch(d, 1, &r, to_root ? "the ZeRO-1 gather" : "the ZeRO-1 scatter");
}

static ampx_status mpi_barrier(ampx_dist *d) {
    mpi_impl *m    = d->impl;
    ampx_status st = check_signature(d, 2, 0);
    if (st) return st;
    MPI_Request r;
    int rc = MPI_Ibarrier(m->comm, &r);
    return rc != MPI_SUCCESS ? mpi_fail(d, rc, "MPI_Ibarrier") : watch(d, 1, &r, "a barrier");
}

static void mpi_abort(ampx_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(((mpi_impl *)d->impl)->comm, code);
    exit(code); /* MPI_Abort does not return; this only keeps the contract visible */
}

static void hb_free(mpi_impl *m, int rank, int size) {
    if (m->hb != MPI_COMM_NULL) { /* the requests exist once the communicator does */
        for (int p = 0; p < size; p++) {
            if (p == rank) continue;
            if (m->hb_rreq[p] != MPI_REQUEST_NULL) {
                MPI_Cancel(&m->hb_rreq[p]);
                MPI_Wait(&m->hb_rreq[p], MPI_STATUS_IGNORE);
            }
            if (m->hb_sreq[p] != MPI_REQUEST_NULL) MPI_Request_free(&m->hb_sreq[p]);
        }
        MPI_Comm_free(&m->hb);
    }
    free(m->hb_in), free(m->hb_out), free(m->seen), free(m->heard), free(m->hb_rreq);
    free(m->hb_sreq);
}

static void mpi_finalize(ampx_dist *d) {
    mpi_impl *m = d->impl;
    mpi_wait(d);
    mpi_barrier(d); /* every heartbeat sent before it has been read or is buffered */
    hb_free(m, d->rank, d->size);
    MPI_Comm_free(&m->comm);
    MPI_Finalize();
    free(m);
    d->impl = NULL;
}

static const dist_ops mpi_ops = {.allreduce_sum_f32   = mpi_allreduce,
                                 .iallreduce_sum_f32  = mpi_iallreduce,
                                 .progress            = mpi_progress,
                                 .wait                = mpi_wait,
                                 .broadcast           = mpi_broadcast,
                                 .barrier             = mpi_barrier,
                                 .abort               = mpi_abort,
                                 .finalize            = mpi_finalize,
                                 .allreduce_max_f32   = mpi_allreduce_max,
                                 .allgather_f32       = mpi_allgather,
                                 .shards_f32          = mpi_shards,
                                 .ireduce_scatter_f32 = mpi_ireduce_scatter,
                                 .allgather_u16       = mpi_allgather16};

/* The watchdog's state: AMPX_DIST_TIMEOUT (seconds, default 30), AMPX_DIST_CHECK, the
 * heartbeats' communicator and one receive posted per peer. */
static int watchdog_init(mpi_impl *m, int rank, int size, ampx_err e) {
    const char *t = getenv("AMPX_DIST_TIMEOUT"), *c = getenv("AMPX_DIST_CHECK");
    char *end     = NULL;
    m->deadline_s = t && *t ? strtod(t, &end) : 30.0;
    m->hb         = MPI_COMM_NULL;
    if (t && *t && (*end || !(m->deadline_s > 0.0) || m->deadline_s > 1e6)) {
        err_set(e, "AMPX_DIST_TIMEOUT=%.40s: expected seconds, more than 0", t);
        return -1;
    }
    m->check      = c && !strcmp(c, "1");
    const char *k = getenv("AMPX_INJECT_COLLECTIVE");
    long long ks = -1, kr = -1;
    if (k && *k && (sscanf(k, "%lld@%lld", &ks, &kr) < 1 || ks < 1)) {
        err_set(e, "AMPX_INJECT_COLLECTIVE=%.40s: expected STEP or STEP@RANK, STEP >= 1", k);
        return -1;
    }
    m->skew_step = k && *k ? ks : -1;
    m->skew_rank = kr;
    m->hb_in     = calloc((size_t)size, sizeof *m->hb_in);
    m->hb_out    = calloc((size_t)size, sizeof *m->hb_out);
    m->seen      = calloc((size_t)size, sizeof *m->seen);
    m->heard     = calloc((size_t)size, sizeof *m->heard);
    m->hb_rreq   = malloc((size_t)size * sizeof *m->hb_rreq);
    m->hb_sreq   = malloc((size_t)size * sizeof *m->hb_sreq);
    if (!m->hb_in || !m->hb_out || !m->seen || !m->heard || !m->hb_rreq || !m->hb_sreq) {
        err_set(e, "out of memory");
        return -1;
    }
    MPI_Comm_dup(m->comm, &m->hb);
    for (int p = 0; p < size; p++) {
        m->heard[p]   = now_s();
        m->hb_rreq[p] = m->hb_sreq[p] = MPI_REQUEST_NULL;
        if (p != rank) MPI_Irecv(&m->hb_in[p], 1, MPI_INT64_T, p, HB_TAG, m->hb, &m->hb_rreq[p]);
    }
    return 0;
}

ampx_status dist_mpi_init(ampx_dist *d, ampx_err e) {
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        err_set(e, "MPI_Init_thread failed");
        return AMPX_ERR_UNAVAILABLE;
    }
    mpi_impl *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(e, "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    /* a communicator of our own, so an application's other MPI traffic never interleaves */
    MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &d->rank);
    MPI_Comm_size(m->comm, &d->size);
    /* the local rank: this rank's place among those sharing its node's memory */
    MPI_Comm node;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_free(&node);
    }
    if (watchdog_init(m, d->rank, d->size, e)) {
        hb_free(m, d->rank, d->size);
        MPI_Comm_free(&m->comm);
        free(m);
        return AMPX_ERR_INVALID;
    }
    d->name = "mpi";
    d->ops  = &mpi_ops;
    d->impl = m;
    return AMPX_OK;
}
