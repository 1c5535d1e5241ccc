/* peer_peak.c — the machine's own limits, measured in the benchmark's run: the f32 FMA peak
 * of 2 threads with 256-bit (AVX2) and, where the CPU has it, 512-bit (AVX-512F) vectors, and
 * the bandwidth of a 2-thread memcpy of 64 MiB (read + write counted). Prints one JSON line:
 *   {"threads":2,"fma256_gflops":G,"fma512_gflops":G|null,"copy_gbs":B}
 * Each figure is the best of 5 runs. `peer_peak probe` is the quick check the benchmark runs
 * between rounds (about 0.1 s): the widest FMA rate of 2 threads, best of 3, as
 *   {"probe_gflops":G}
 * Benchmarks only: nothing in ampx links it. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 2
#define FMA_ITERS 20000000L /* per thread; 12 independent chains of FMAs */
#define COPY_BYTES (64u << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

__attribute__((target("avx2,fma"))) static float fma256(void) {
    __m256 c[12], a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++)
        c[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < FMA_ITERS; k++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++)
            c[i] = _mm256_fmadd_ps(a, c[i], b);
    float s = 0;
    for (int i = 0; i < 12; i++)
        s += _mm256_cvtss_f32(c[i]);
    return s;
}

__attribute__((target("avx512f"))) static float fma512(void) {
    __m512 c[12], a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++)
        c[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < FMA_ITERS; k++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++)
            c[i] = _mm512_fmadd_ps(a, c[i], b);
    float s = 0;
    for (int i = 0; i < 12; i++)
        s += _mm512_reduce_add_ps(c[i]);
    return s;
}

typedef struct job {
    int kind; /* 0: fma256, 1: fma512, 2: copy */
    char *dst, *src;
    size_t bytes;
    volatile float sink;
} job;

static void *work(void *p) {
    job *j = p;
    if (j->kind == 0) j->sink = fma256();
    if (j->kind == 1) j->sink = fma512();
    if (j->kind == 2) memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

/* Seconds for THREADS threads doing kind at once (copy: each a slice of the buffers). */
static double run(int kind, char *dst, char *src) {
    pthread_t t[THREADS];
    job j[THREADS];
    double t0 = now();
    for (int i = 0; i < THREADS; i++) {
        size_t slice = COPY_BYTES / THREADS;
        j[i]         = (job){.kind = kind, .bytes = slice};
        if (kind == 2) j[i].dst = dst + i * slice, j[i].src = src + i * slice;
        pthread_create(&t[i], NULL, work, &j[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    return now() - t0;
}

static double best(int kind, char *dst, char *src, int runs) {
    double b = 1e30;
    for (int r = 0; r < runs; r++) {
        double s = run(kind, dst, src);
        if (s < b) b = s;
    }
    return b;
}

int main(int argc, char **argv) {
    double flops = 2.0 * 12 * FMA_ITERS * THREADS;
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f");
    if (argc > 1 && strcmp(argv[1], "probe") == 0) {
        double g =
            has512 ? flops * 16 / best(1, NULL, NULL, 3) : flops * 8 / best(0, NULL, NULL, 3);
        printf("{\"probe_gflops\":%.1f}\n", g * 1e-9);
        return 0;
    }
    char *src = aligned_alloc(64, COPY_BYTES), *dst = aligned_alloc(64, COPY_BYTES);
    if (!src || !dst) return 1;
    memset(src, 1, COPY_BYTES), memset(dst, 0, COPY_BYTES);
    double f256 = flops * 8 / best(0, dst, src, 5) * 1e-9;
    double f512 = has512 ? flops * 16 / best(1, dst, src, 5) * 1e-9 : 0;
    double copy = 2.0 * COPY_BYTES / best(2, dst, src, 5) * 1e-9;
    printf("{\"threads\":%d,\"fma256_gflops\":%.1f,\"fma512_gflops\":", THREADS, f256);
    if (has512)
        printf("%.1f", f512);
    else
        printf("null");
    printf(",\"copy_gbs\":%.2f}\n", copy);
    free(src), free(dst);
    return 0;
}
