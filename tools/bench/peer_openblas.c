/* peer_openblas.c — OpenBLAS sgemm, timed like `ampx bench gemm` (peer_common.h).
 *   peer_openblas f32 M N K [ta] [tb] [reps=R] [batch=N]
 * Row-major C = op(A) op(B), alpha 1, beta 0, OpenBLAS's own threading; a batch is a loop of
 * sgemm calls over strided matrices (OpenBLAS 0.3.21 has no batched interface). */
#include <cblas.h>

#include "peer_common.h"

typedef struct job {
    peer_args a;
    float *A, *B, *C;
} job;

static void run(void *p) {
    job *j    = p;
    size_t sa = (size_t)j->a.m * j->a.k, sb = (size_t)j->a.k * j->a.n, sc = (size_t)j->a.m * j->a.n;
    for (long b = 0; b < j->a.batch; b++)
        cblas_sgemm(CblasRowMajor, j->a.ta ? CblasTrans : CblasNoTrans,
                    j->a.tb ? CblasTrans : CblasNoTrans, (int)j->a.m, (int)j->a.n, (int)j->a.k,
                    1.0f, j->A + b * sa, j->a.ta ? (int)j->a.m : (int)j->a.k, j->B + b * sb,
                    j->a.tb ? (int)j->a.k : (int)j->a.n, 0.0f, j->C + b * sc, (int)j->a.n);
}

int main(int argc, char **argv) {
    job j;
    if (peer_parse(argc, argv, &j.a) || strcmp(j.a.dtype, "f32") != 0) {
        fprintf(stderr, "usage: peer_openblas f32 M N K [ta] [tb] [reps=R] [batch=N]\n");
        return 2;
    }
    size_t na = (size_t)j.a.m * j.a.k * j.a.batch, nb = (size_t)j.a.k * j.a.n * j.a.batch,
           nc = (size_t)j.a.m * j.a.n * j.a.batch;
    j.A = malloc(na * 4), j.B = malloc(nb * 4), j.C = calloc(nc, 4);
    if (!j.A || !j.B || !j.C) return 1;
    uint64_t s = 1;
    for (size_t i = 0; i < na; i++)
        j.A[i] = peer_unit(&s);
    for (size_t i = 0; i < nb; i++)
        j.B[i] = peer_unit(&s);
    int reps;
    double t = peer_time(run, &j, j.a.reps, &reps);
    char impl[128];
    snprintf(impl, sizeof impl, "%s, %d threads", openblas_get_config(),
             openblas_get_num_threads());
    peer_report("openblas", impl, &j.a, t, reps);
    free(j.A), free(j.B), free(j.C);
    return 0;
}
