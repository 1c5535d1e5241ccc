/* peer_common.h — what the peer GEMM programs share with `ampx bench gemm`: the same data
 * (uniform [-1, 1)), the same timing (warm-up, then timed runs around the call until at
 * least 5 and 1 s, the median) and one JSON line on stdout. Peers are benchmarks only:
 * nothing in ampx links them. */
#ifndef AMPX_BENCH_PEER_COMMON_H
#define AMPX_BENCH_PEER_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEER_MAX_REPS 1000

static double peer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float peer_unit(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static int peer_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct peer_args {
    const char *dtype;
    long m, n, k, batch; /* batch: strided products of m x n x k, one after another */
    int ta, tb, reps;
} peer_args;

/* peer DTYPE M N K [ta] [tb] [reps=R] [batch=N] */
static int peer_parse(int argc, char **argv, peer_args *a) {
    memset(a, 0, sizeof *a);
    if (argc < 5) return -1;
    a->dtype = argv[1];
    a->m     = atol(argv[2]);
    a->n     = atol(argv[3]);
    a->k     = atol(argv[4]);
    a->batch = 1;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "ta"))
            a->ta = 1;
        else if (!strcmp(argv[i], "tb"))
            a->tb = 1;
        else if (!strncmp(argv[i], "reps=", 5))
            a->reps = atoi(argv[i] + 5);
        else if (!strncmp(argv[i], "batch=", 6))
            a->batch = atol(argv[i] + 6);
        else
            return -1;
    }
    return a->m > 0 && a->n > 0 && a->k > 0 && a->batch > 0 ? 0 : -1;
}

/* Times fn(ctx): 2 warm-up calls, then reps (0: at least 5 and 1 s); returns the median. */
static double peer_time(void (*fn)(void *), void *ctx, int reps, int *n_out) {
    static double t[PEER_MAX_REPS];
    fn(ctx);
    fn(ctx);
    int n        = 0;
    double start = peer_now();
    while (n < PEER_MAX_REPS && (reps > 0 ? n < reps : (n < 5 || peer_now() - start < 1.0))) {
        double t0 = peer_now();
        fn(ctx);
        t[n++] = peer_now() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], peer_cmp);
    *n_out = n;
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void peer_report(const char *peer, const char *impl, const peer_args *a, double s,
                        int reps) {
    double gflops = 2.0 * (double)a->m * (double)a->n * (double)a->k * (double)a->batch / s * 1e-9;
    printf("{\"peer\":\"%s\",\"impl\":\"%s\",\"dtype\":\"%s\",\"m\":%ld,\"n\":%ld,\"k\":%ld,"
           "\"batch\":%ld,\"trans_a\":%s,\"trans_b\":%s,\"ms\":%.4f,\"reps\":%d,\"gflops\":%.2f}\n",
           peer, impl, a->dtype, a->m, a->n, a->k, a->batch, a->ta ? "true" : "false",
           a->tb ? "true" : "false", s * 1e3, reps, gflops);
}

#endif
