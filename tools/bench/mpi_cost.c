/* mpi_cost.c — per-message costs of the collectives ampx's data parallelism calls, for the
 * ring model in docs/DISTRIBUTED.md. Built and run by tools/bench/dist_msgcost.sh:
 *
 *   mpirun -np N mpi_cost [REPS]
 *
 * prints one line per measurement, times in microseconds, each the median over REPS timed
 * repetitions (after 3 untimed) of the slowest rank's time (every repetition starts at a
 * barrier; the time is the MAX over ranks, as a step waits for the last rank):
 *
 *   pingpong S T      half a round trip of S bytes between ranks 0 and 1 (others idle)
 *   allreduce N S T   MPI_Allreduce, SUM of S/4 floats over N ranks (ampx's gradient buckets)
 *   rscatter N S T    MPI_Reduce_scatter_block of S bytes of floats (ZeRO-1's gradients)
 *
 * The buffers hold ordinary finite floats (0.5 + i mod 7), so no denormal or NaN slows the
 * reduction. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { PINGPONG, ALLREDUCE, RSCATTER };

/* One timed repetition of KIND on BYTES bytes; the slowest rank's seconds. */
static double once(int kind, size_t bytes, float *a, float *b, int rank, int size) {
    int count = (int)(bytes / sizeof(float));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (kind == PINGPONG) {
        if (rank == 0) {
            MPI_Send(a, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(b, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(b, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    } else if (kind == ALLREDUCE) {
        MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Reduce_scatter_block(a, b, count / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double dt = MPI_Wtime() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return kind == PINGPONG ? worst / 2 : worst;
}

static void fill(float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        a[i] = 0.5f + (float)(i % 7);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    if (reps < 1 || reps > 100000 || size < 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_cost: usage: mpirun -np N (N >= 2) mpi_cost [REPS 1-100000]\n");
        MPI_Finalize();
        return 2;
    }
    const size_t max_bytes = (size_t)16 << 20;
    float *a = malloc(max_bytes), *b = malloc(max_bytes);
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!a || !b || !t) {
        fprintf(stderr, "mpi_cost: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    static const char *names[] = {"pingpong", "allreduce", "rscatter"};
    for (int kind = PINGPONG; kind <= RSCATTER; kind++) {
        if (kind == PINGPONG && size != 2)
            continue; /* the point-to-point costs with nothing else running */
        /* 64 B to 16 MiB by factors of 4, each a multiple of 4 * size bytes */
        for (size_t bytes = 64; bytes <= max_bytes; bytes *= 4) {
            size_t n = bytes / sizeof(float) / (size_t)size * (size_t)size;
            size_t s = n * sizeof(float);
            for (int r = -3; r < reps; r++) {
                fill(a, n);
                double dt = once(kind, s, a, b, rank, size);
                if (r >= 0) t[r] = dt;
            }
            double us = median(t, reps) * 1e6;
            if (rank == 0) {
                if (kind == PINGPONG)
                    printf("%s %zu %.3f\n", names[kind], s, us);
                else
                    printf("%s %d %zu %.3f\n", names[kind], size, s, us);
            }
        }
    }
    free(a);
    free(b);
    free(t);
    MPI_Finalize();
    return 0;
}
