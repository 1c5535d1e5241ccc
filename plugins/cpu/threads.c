/* threads.c — the CPU backend's thread pool and per-context workspaces.
 *
 * A persistent pool of n_threads - 1 workers; the calling thread is thread 0 and works
 * too. cpu_run hands out items one at a time from an atomic counter, so uneven
 * items (GEMM edge tiles, short tensors) balance themselves. Items never share output
 * elements, and every op reduces per-item partial results in item order afterwards, so
 * results do not depend on the number of threads or on scheduling.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

// ---------------------------------------------------------------------------------------
// Pool

_Thread_local const cpu_kernels *cpu_tls_kern = &cpu_kernels_portable;

static void run_items(cpu_pool *pool, unsigned tid) {
    cpu_tls_kern = pool->kern;
    for (;;) {
        uint64_t item = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (item >= pool->n_items) break;
        pool->fn(pool->arg, item, tid);
    }
}

typedef struct worker_start {
    cpu_pool *pool;
    unsigned tid;
} worker_start;

static void *worker_main(void *p) {
    worker_start ws = *(worker_start *)p;
    free(p);
    cpu_pool *pool = ws.pool;
    uint64_t seen  = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->quit && pool->generation == seen)
            pthread_cond_wait(&pool->cv_work, &pool->mu);
        if (pool->quit) break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->mu);
        run_items(pool, ws.tid);
        pthread_mutex_lock(&pool->mu);
        if (--pool->active == 0) pthread_cond_signal(&pool->cv_done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

ampx_status cpu_pool_start(cpu_pool *pool, unsigned n_workers) {
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_work, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    atomic_init(&pool->next, 0);
    if (n_workers == 0) return AMPX_OK;
    pool->threads = calloc(n_workers, sizeof *pool->threads);
    if (!pool->threads) goto fail;
    for (unsigned i = 0; i < n_workers; i++) {
        worker_start *ws = malloc(sizeof *ws);
        if (!ws) goto fail;
        ws->pool = pool;
        ws->tid  = i + 1;
        if (pthread_create(&pool->threads[i], NULL, worker_main, ws) != 0) {
            free(ws);
            goto fail;
        }
        pool->n_workers++;
    }
    return AMPX_OK;
fail:
    cpu_pool_stop(pool);
    return AMPX_ERR_NO_MEMORY;
}

void cpu_pool_stop(cpu_pool *pool) {
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    pthread_cond_broadcast(&pool->cv_work);
    pthread_mutex_unlock(&pool->mu);
    for (unsigned i = 0; i < pool->n_workers; i++)
        pthread_join(pool->threads[i], NULL);
    free(pool->threads);
    pool->threads   = NULL;
    pool->n_workers = 0;
    pthread_cond_destroy(&pool->cv_done);
    pthread_cond_destroy(&pool->cv_work);
    pthread_mutex_destroy(&pool->mu);
}

/* Spreads items over the pool's workers and this thread (tid 0). */
static void pool_for(cpu_pool *pool, uint64_t n_items, cpu_task_fn fn, void *job) {
    pthread_mutex_lock(&pool->mu);
    pool->fn      = fn;
    pool->arg     = job;
    pool->kern    = cpu_tls_kern;
    pool->n_items = n_items;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    pool->active = pool->n_workers;
    pool->generation++;
    pthread_cond_broadcast(&pool->cv_work);
    pthread_mutex_unlock(&pool->mu);

    run_items(pool, 0);

    pthread_mutex_lock(&pool->mu);
    while (pool->active > 0)
        pthread_cond_wait(&pool->cv_done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

void cpu_run(ampx_context *ctx, uint64_t work, uint64_t n_items, cpu_task_fn fn, void *job) {
    cpu_tls_kern = ctx->kern;
    if (ctx->pool.n_workers > 0 && n_items > 1 && work >= CPU_PAR_MIN) {
        pool_for(&ctx->pool, n_items, fn, job);
        return;
    }
    for (uint64_t i = 0; i < n_items; i++)
        fn(job, i, 0);
}

// ---------------------------------------------------------------------------------------
// Workspaces: grown on demand, never shrunk, freed with the context.

static int grow(cpu_scratch *s, size_t bytes) {
    if (s->bytes >= bytes) return 0;
    size_t want = bytes < 4096 ? 4096 : bytes;
    want        = (want + 63) & ~(size_t)63;
    void *p     = aligned_alloc(64, want);
    if (!p) return -1;
    free(s->p);
    s->p     = p;
    s->bytes = want;
    return 0;
}

ampx_status cpu_reserve_thread_ws(ampx_context *ctx, const char *opname, size_t bytes) {
    for (unsigned t = 0; t < ctx->n_threads; t++)
        if (grow(&ctx->thread_ws[t], bytes))
            return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of workspace",
                            opname, bytes);
    return AMPX_OK;
}

void *cpu_reserve_shared_ws(ampx_context *ctx, const char *opname, size_t bytes) {
    if (grow(&ctx->shared_ws, bytes)) {
        cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of workspace", opname,
                 bytes);
        return NULL;
    }
    return ctx->shared_ws.p;
}

void cpu_free_workspaces(ampx_context *ctx) {
    if (ctx->thread_ws)
        for (unsigned t = 0; t < ctx->n_threads; t++)
            free(ctx->thread_ws[t].p);
    free(ctx->thread_ws);
    ctx->thread_ws = NULL;
    free(ctx->shared_ws.p);
    ctx->shared_ws.p     = NULL;
    ctx->shared_ws.bytes = 0;
}
