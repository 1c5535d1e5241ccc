/* test_threads.c — trainers on threads (docs/C_API.md, "Threading"), a plain program: each
 * case runs in a child process many times over, because what it guards against (a record of
 * the plugin call in flight shared by all threads) showed at exit() and in some runs only.
 *   four_trainers   4 threads, each its own model, backend and trainer, train, evaluate,
 *                   free and return; the child exits 0 with nothing on stderr
 *   busy            a trainer inside ampx_trainer_run on one thread: run, evaluate, save and
 *                   load from another thread return AMPX_ERR_BUSY; from the callback's own
 *                   thread a save works (a record callback may save)
 * Usage: test_threads [RUNS] (default 100). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ampx/train.h"

#define MODEL AMPX_SOURCE_DIR "/docs/examples/memory/xor.json"

enum { N_THREADS = 4, NTR = 256, NTE = 64 };

static int fail(const char *what, const char *err) {
    fprintf(stderr, "FAIL: %s: %s\n", what, err);
    return 1;
}

/* n rows of the quadrant task: class 1 where x0 x1 > 0. */
static void xor_rows(float *x, int32_t *y, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++) {
        for (int c = 0; c < 2; c++) {
            seed         = seed * 1664525u + 1013904223u;
            x[2 * i + c] = (float)(seed >> 8) / 8388608.0f - 1.0f;
        }
        y[i] = x[2 * i] * x[2 * i + 1] > 0;
    }
}

typedef struct job {
    float xtr[2 * NTR], xte[2 * NTE];
    int32_t ytr[NTR], yte[NTE];
    ampx_model *m;
    ampx_backend *be;
    ampx_trainer *t;
    char err[512];
} job;

/* Model, backend (one cpu thread) and trainer of the job, on its rows. */
static int job_open(job *j, uint32_t seed, int64_t log_every) {
    xor_rows(j->xtr, j->ytr, NTR, seed);
    xor_rows(j->xte, j->yte, NTE, seed + 1);
    const char *opts[] = {"threads=1"};
    ampx_memory_data d = {NTR, NTE, 2, j->xtr, j->xte, j->ytr, j->yte};
    if (ampx_model_load(MODEL, NULL, &j->m, j->err, sizeof j->err)) return -1;
    ampx_model_train_config(j->m)->log_every = log_every;
    if (ampx_model_set_data(j->m, &d)) return snprintf(j->err, sizeof j->err, "set_data"), -1;
    if (ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 1, &j->be, j->err, sizeof j->err)) return -1;
    return ampx_trainer_create(j->m, j->be, &j->t, j->err, sizeof j->err) ? -1 : 0;
}

static void job_close(job *j) {
    ampx_trainer_free(j->t);
    ampx_backend_close(j->be);
    ampx_model_free(j->m);
}

// ---------------------------------------------------------------------------------------
// four_trainers

static void *train_one(void *arg) {
    job *j = arg;
    ampx_eval_result ev;
    if (!job_open(j, (uint32_t)(uintptr_t)j, 5)) {
        if (ampx_trainer_run(j->t, 60, NULL, NULL) || ampx_trainer_evaluate(j->t, &ev))
            snprintf(j->err, sizeof j->err, "%s", ampx_trainer_error(j->t));
    }
    job_close(j);
    return NULL;
}

static int four_trainers(void) {
    static job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        if (pthread_create(&th[i], NULL, train_one, &jobs[i])) return fail("pthread_create", "");
    int bad = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].err[0]) bad = fail("a trainer on its thread", jobs[i].err);
    }
    return bad;
}

// ---------------------------------------------------------------------------------------
// busy

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, done; /* the callback has been entered; the other thread has tried */
    job *j;
    int saved; /* the callback's own save: its status */
} gate;

static int hold(void *user, const ampx_step_record *r) {
    gate *g = user;
    if (r->step != 5) return 0;
    char err[256];
    g->saved = ampx_trainer_save(g->j->t, "/dev/null/not-a-dir/x.st", err, sizeof err);
    pthread_mutex_lock(&g->mu);
    g->inside = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->done)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static void *run_held(void *arg) {
    gate *g = arg;
    if (ampx_trainer_run(g->j->t, 20, hold, g))
        snprintf(g->j->err, sizeof g->j->err, "%s", ampx_trainer_error(g->j->t));
    return NULL;
}

static int busy(void) {
    static job j;
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, &j, -1};
    if (job_open(&j, 7, 5)) return fail("busy: open", j.err);
    pthread_t th;
    if (pthread_create(&th, NULL, run_held, &g)) return fail("pthread_create", "");
    pthread_mutex_lock(&g.mu);
    while (!g.inside)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    ampx_eval_result ev;
    char err[256] = "";
    int bad       = 0;
    if (ampx_trainer_run(j.t, 30, NULL, NULL) != AMPX_ERR_BUSY) bad = fail("busy: run", "not BUSY");
    if (ampx_trainer_evaluate(j.t, &ev) != AMPX_ERR_BUSY) bad = fail("busy: evaluate", "not BUSY");
    if (ampx_trainer_save(j.t, "x.st", err, sizeof err) != AMPX_ERR_BUSY ||
        !strstr(err, "in use by another thread"))
        bad = fail("busy: save", err);
    if (ampx_trainer_load(j.t, "x.st", err, sizeof err) != AMPX_ERR_BUSY)
        bad = fail("busy: load", err);
    pthread_mutex_lock(&g.mu);
    g.done = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(th, NULL);
    /* the callback's own save got past the claim: it failed on its path, not for BUSY */
    if (g.saved == AMPX_ERR_BUSY || g.saved == AMPX_OK) bad = fail("busy: nested save", "");
    if (j.err[0]) bad = fail("busy: the held run", j.err);
    if (ampx_trainer_step(j.t) != 20) bad = fail("busy: the held run's steps", "");
    /* free again: the trainer is usable from this thread */
    if (ampx_trainer_run(j.t, 25, NULL, NULL))
        bad = fail("busy: run after", ampx_trainer_error(j.t));
    job_close(&j);
    return bad;
}

// ---------------------------------------------------------------------------------------

/* Runs fn in a child `runs` times; each child must exit 0 with an empty stderr. */
static int repeat(const char *name, int (*fn)(void), int runs) {
    for (int r = 0; r < runs; r++) {
        int pipefd[2];
        if (pipe(pipefd)) return fail(name, "pipe");
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(pipefd[1], 2);
            close(pipefd[0]);
            exit(fn()); /* exit(), not _exit(): the atexit handlers are under test too */
        }
        close(pipefd[1]);
        char out[4096], rest[4096];
        size_t n = 0;
        ssize_t k;
        while ((k = read(pipefd[0], out + n, sizeof out - 1 - n)) > 0)
            n += (size_t)k;
        while (n == sizeof out - 1 && read(pipefd[0], rest, sizeof rest) > 0) {
            /* the child's further lines: drained, so it never meets a closed pipe */
        }
        out[n] = 0;
        close(pipefd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) || n) {
            fprintf(stderr, "FAIL: %s, run %d of %d: %s %d; stderr: %s\n", name, r + 1, runs,
                    WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
            return 1;
        }
    }
    printf("%s: %d of %d runs passed\n", name, runs, runs);
    return 0;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    int bad  = repeat("four_trainers", four_trainers, runs);
    bad |= repeat("busy", busy, runs / 4 > 0 ? runs / 4 : 1);
    return bad;
}
