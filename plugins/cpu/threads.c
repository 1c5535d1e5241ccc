/* threads.c — the CPU backend's thread pool and per-context workspaces.
 *
 * A persistent pool of n_threads - 1 workers; the calling thread is thread 0 and works
 * too. cpu_run hands out items one at a time from an atomic counter, so uneven
 * items (GEMM edge tiles, short tensors) balance themselves. Items never share output
 * elements, and every op reduces per-item partial results in item order afterwards, so
 * results do not depend on the number of threads or on scheduling.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

// ---------------------------------------------------------------------------------------
// Pool
//
// Memory orders. The caller writes the job (fn, arg, kern, n_items, grain, next), then bumps
// `generation` with release; a worker that reads the new generation with acquire sees the
// whole job. A worker's results (the items' outputs) are released by its fetch_sub on
// `active`; the caller's acquire load of active == 0 makes them visible before cpu_run
// returns. The caller never rewrites the job while active > 0, so no worker reads a job
// being replaced.
//
// Sleeping without lost wake-ups (the Dekker pattern on seq_cst operations): a worker about
// to sleep increments `sleepers` and then re-reads `generation` under the mutex; the caller
// stores `generation` and then reads `sleepers`. In the single total order of seq_cst
// operations one of them comes first, so either the worker sees the new generation and
// does not sleep, or the caller sees the sleeper and broadcasts under the mutex (which the
// worker holds from its check until it is inside pthread_cond_wait). The same holds for
// the caller's `caller_waits` against the last worker's fetch_sub of `active`.

CPU_TLS const cpu_kernels *cpu_tls_kern = &cpu_kernels_portable;

/* How long a worker waits for the next op, and the caller for the workers, before sleeping:
 * long enough to cover the gap between the ops of a training step, short enough that an
 * idle context gives its cores back almost at once. */
#define CPU_SPIN_NS 200000u
#define CPU_SPIN_YIELD_NS 10000u

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spin-wait bookkeeping: the clock is read once per 64 pauses; past CPU_SPIN_YIELD_NS each
 * check also yields the core (sched_yield), so on an oversubscribed machine a spinning
 * thread lets the thread it waits for (or anyone else) run instead of burning its slice. */
typedef struct spin {
    uint64_t t0;
    unsigned i;
} spin;

/* 0 once the thread has spun CPU_SPIN_NS. */
static int spin_step(spin *s) {
    cpu_pause();
    if ((++s->i & 63) != 0) return 1;
    uint64_t t = mono_ns();
    if (s->t0 == 0) s->t0 = t;
    if (t - s->t0 > CPU_SPIN_NS) return 0;
    if (t - s->t0 > CPU_SPIN_YIELD_NS) sched_yield();
    return 1;
}

/* Spins until *v != old (returns 1) or CPU_SPIN_NS pass (returns 0). */
static int spin_while_eq_u64(_Atomic uint64_t *v, uint64_t old) {
    spin s = {0, 0};
    do {
        if (atomic_load_explicit(v, memory_order_acquire) != old) return 1;
    } while (spin_step(&s));
    return 0;
}

/* Spins until *v == 0 (returns 1) or CPU_SPIN_NS pass (returns 0). */
static int spin_while_active(_Atomic unsigned *v) {
    spin s = {0, 0};
    do {
        if (atomic_load_explicit(v, memory_order_acquire) == 0) return 1;
    } while (spin_step(&s));
    return 0;
}

void cpu_spin_until(_Atomic int *flag, int value) {
    spin s = {0, 0};
    while (atomic_load_explicit(flag, memory_order_acquire) != value)
        if (!spin_step(&s)) sched_yield();
}

/* Items are claimed pool->grain at a time: one shared counter bumped per item would pass its
 * cache line between the cores thousands of times per op (a 2^20-element op is 256 chunks). */
static void run_items(cpu_pool *pool, unsigned tid) {
    cpu_tls_kern     = pool->kern;
    const uint64_t n = pool->n_items, grain = pool->grain;
    for (;;) {
        uint64_t i0 = atomic_fetch_add_explicit(&pool->next, grain, memory_order_relaxed);
        if (i0 >= n) break;
        uint64_t i1 = n - i0 < grain ? n : i0 + grain;
        for (uint64_t item = i0; item < i1; item++)
            pool->fn(pool->arg, item, tid);
    }
}

/* Items per claim: about CPU_CLAIMS_PER_THREAD claims per thread, so the last claims still
 * even out the threads' shares on a machine where one of them is slowed down. */
#define CPU_CLAIMS_PER_THREAD 8u

typedef struct worker_start {
    cpu_pool *pool;
    unsigned tid;
} worker_start;

static void *worker_main(void *p) {
    worker_start ws = *(worker_start *)p;
    free(p);
    cpu_pool *pool = ws.pool;
    uint64_t seen  = 0;
    for (;;) {
        if (!spin_while_eq_u64(&pool->generation, seen)) {
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->generation) == seen)
                pthread_cond_wait(&pool->cv_work, &pool->mu);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mu);
        }
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (atomic_load_explicit(&pool->quit, memory_order_acquire)) break;
        run_items(pool, ws.tid);
        if (atomic_fetch_sub(&pool->active, 1) == 1 && atomic_load(&pool->caller_waits)) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->cv_done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
    return NULL;
}

ampx_status cpu_pool_start(cpu_pool *pool, unsigned n_workers) {
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_work, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    atomic_init(&pool->active, 0);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->caller_waits, 0);
    atomic_init(&pool->quit, 0);
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

/* Wakes every worker for a new generation: the job (or quit) is already published. */
static void publish(cpu_pool *pool) {
    atomic_fetch_add(&pool->generation, 1); /* seq_cst: ordered before the read of sleepers */
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv_work);
        pthread_mutex_unlock(&pool->mu);
    }
}

void cpu_pool_stop(cpu_pool *pool) {
    atomic_store_explicit(&pool->quit, 1, memory_order_relaxed); /* released by publish */
    publish(pool);
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
    pool->fn      = fn;
    pool->arg     = job;
    pool->kern    = cpu_tls_kern;
    pool->n_items = n_items;
    pool->grain   = n_items / ((uint64_t)(pool->n_workers + 1) * CPU_CLAIMS_PER_THREAD);
    if (pool->grain == 0) pool->grain = 1;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->active, pool->n_workers, memory_order_relaxed);
    publish(pool);

    run_items(pool, 0);

    if (!spin_while_active(&pool->active)) {
        pthread_mutex_lock(&pool->mu);
        atomic_store(&pool->caller_waits, 1); /* seq_cst: ordered before the read of active */
        while (atomic_load(&pool->active) > 0)
            pthread_cond_wait(&pool->cv_done, &pool->mu);
        atomic_store(&pool->caller_waits, 0);
        pthread_mutex_unlock(&pool->mu);
    }
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
