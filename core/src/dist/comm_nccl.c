/* comm_nccl.c — the communicator of CUDA device buffers over NCCL, bootstrapped over the MPI
 * communicator as llm.c does: rank 0 makes the unique id, MPI_Bcast (dist_broadcast) hands
 * it to every rank, each joins with ncclCommInitRank. Debian's Open MPI is not CUDA-aware,
 * so device memory never goes through MPI. NCCL is opened with dlopen at first use (from the
 * toolkit's folder CMake found it in, then by soname), so libampx loads, and every other
 * path works, on a machine without CUDA; nccl.h gives the types only. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "dist/comm.h"

typedef struct nccl_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int n, ncclUniqueId id, int rank);
    ncclResult_t (*all_reduce)(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o,
                               ncclComm_t c, cudaStream_t st);
    ncclResult_t (*broadcast)(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                              ncclComm_t c, cudaStream_t st);
    ncclResult_t (*comm_destroy)(ncclComm_t c);
    const char *(*error_string)(ncclResult_t r);
} nccl_api;

struct dist_nccl {
    void *lib;
    nccl_api api;
    ncclComm_t comm;
    int rank, size;
};

int dist_nccl_built(void) {
    return 1;
}

static void *open_nccl(ampx_err e) {
    static const char *const names[] = {AMPX_NCCL_DIR "/libnccl.so.2", "libnccl.so.2",
                                        "libnccl.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    err_set(e, "NCCL: cannot load libnccl.so.2 (%s)", dlerror());
    return NULL;
}

static ampx_status nccl_fail(dist_nccl *c, ncclResult_t r, const char *what, ampx_err e) {
    err_set(e, "rank %d: %s: %s", c->rank, what,
            c->api.error_string ? c->api.error_string(r) : "NCCL error");
    return AMPX_ERR_DEVICE;
}

ampx_status dist_nccl_init(ampx_dist *d, dist_nccl **out, ampx_err e) {
    *out           = NULL;
    dist_nccl *c   = calloc(1, sizeof *c);
    ampx_status st = AMPX_ERR_UNAVAILABLE;
    if (!c) {
        err_set(e, "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    c->rank = d->rank;
    c->size = d->size;
    if (!(c->lib = open_nccl(e))) goto fail;
    struct {
        void **slot;
        const char *name;
    } syms[] = {{(void **)&c->api.get_unique_id, "ncclGetUniqueId"},
                {(void **)&c->api.comm_init_rank, "ncclCommInitRank"},
                {(void **)&c->api.all_reduce, "ncclAllReduce"},
                {(void **)&c->api.broadcast, "ncclBroadcast"},
                {(void **)&c->api.comm_destroy, "ncclCommDestroy"},
                {(void **)&c->api.error_string, "ncclGetErrorString"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(c->lib, syms[i].name))) {
            err_set(e, "NCCL: libnccl.so.2 has no %s", syms[i].name);
            goto fail;
        }
    /* every rank takes part in the broadcast, so a failure on rank 0 does not strand them */
    struct {
        int32_t ok;
        ncclUniqueId id;
    } boot;
    memset(&boot, 0, sizeof boot);
    ncclResult_t r = ncclSuccess;
    if (d->rank == 0) boot.ok = (r = c->api.get_unique_id(&boot.id)) == ncclSuccess;
    if ((st = dist_broadcast(d, &boot, sizeof boot, 0))) {
        err_set(e, "%s", d->error);
        goto fail;
    }
    if (!boot.ok) {
        st = d->rank == 0 ? nccl_fail(c, r, "ncclGetUniqueId", e) : AMPX_ERR_UNAVAILABLE;
        if (d->rank) err_set(e, "rank %d: rank 0 could not make the NCCL id", d->rank);
        goto fail;
    }
    if ((r = c->api.comm_init_rank(&c->comm, d->size, boot.id, d->rank)) != ncclSuccess) {
        st = nccl_fail(c, r, "ncclCommInitRank", e);
        goto fail;
    }
    *out = c;
    return AMPX_OK;
fail:
    dist_nccl_free(c);
    return st;
}

ampx_status dist_nccl_allreduce_f32(dist_nccl *c, void *dev, uint64_t n, int mean, void *stream,
                                    ampx_err e) {
    ncclResult_t r = c->api.all_reduce(dev, dev, (size_t)n, ncclFloat32, mean ? ncclAvg : ncclSum,
                                       c->comm, (cudaStream_t)stream);
    return r == ncclSuccess ? AMPX_OK : nccl_fail(c, r, "ncclAllReduce", e);
}

ampx_status dist_nccl_broadcast(dist_nccl *c, void *dev, uint64_t bytes, int root, void *stream,
                                ampx_err e) {
    ncclResult_t r =
        c->api.broadcast(dev, dev, (size_t)bytes, ncclUint8, root, c->comm, (cudaStream_t)stream);
    return r == ncclSuccess ? AMPX_OK : nccl_fail(c, r, "ncclBroadcast", e);
}

void dist_nccl_free(dist_nccl *c) {
    if (!c) return;
    if (c->comm && c->api.comm_destroy) c->api.comm_destroy(c->comm);
    if (c->lib) dlclose(c->lib);
    free(c);
}
