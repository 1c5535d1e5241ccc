/* reduce.c — REDUCE (row sum / mean) and SUM_SQUARES (global sum of squares for clipping).
 *
 * Both accumulate in double (the ABI asks for f32 or wider) and round once to the output.
 * Partial sums are kept per chunk and added in chunk order, so results do not depend on the
 * number of threads. SUM_SQUARES is the AMP pass of amp.c with only its square sum. Non-finite
 * inputs propagate: inf^2 = inf, NaN stays NaN.
 */
#include <string.h>

#include "cpu.h"

// ---------------------------------------------------------------------------------------
// REDUCE: y[r] = sum (or mean) of x[r, 0..cols)

typedef struct reduce_job {
    const void *x;
    void *y;
    ampx_dtype xdt, ydt;
    uint64_t rows, cols;
    int mean;
} reduce_job;

static void reduce_rows(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const reduce_job *j = arg;
    uint64_t rpi        = cpu_rows_per_item(j->cols);
    float t[CPU_CHUNK];
    for (uint64_t r = item * rpi; r < j->rows && r < (item + 1) * rpi; r++) {
        double s = 0.0;
        for (uint64_t c0 = 0; c0 < j->cols; c0 += CPU_CHUNK) {
            uint64_t n = j->cols - c0 < CPU_CHUNK ? j->cols - c0 : CPU_CHUNK;
            cpu_load_f32(t, j->x, j->xdt, r * j->cols + c0, n);
            for (uint64_t k = 0; k < n; k++)
                s += t[k];
        }
        if (j->mean) s /= (double)j->cols; /* cols == 0: 0/0 = NaN, the mean of nothing */
        cpu_st(j->y, j->ydt, r, (float)s);
    }
}

ampx_status cpu_reduce(ampx_context *ctx, const ampx_reduce_args *args) {
    ampx_reduce_args a;
    CPU_TRY(ampx_kit_take_reduce(AMPX_KIT(ctx), args, &a));
    reduce_job j = {cpu_ptr(&a.x),
                    cpu_ptr(&a.y),
                    a.x.dtype,
                    a.y.dtype,
                    a.rows,
                    a.cols,
                    a.mode == AMPX_REDUCE_MEAN};
    /* One long row (a global reduction) stays on one thread: its sum is sequential. */
    cpu_run_rows(ctx, a.rows, a.cols, reduce_rows, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// SUM_SQUARES: out[0] = (accumulate ? out[0] : 0) + sum_t sum_i x_t[i]^2

/* The squares of the values as stored, in the chunk order of the AMP pass (amp.c), so that
 * AMP_PASS gives this op's bits. */
ampx_status cpu_sum_squares(ampx_context *ctx, const ampx_sum_squares_args *args) {
    ampx_sum_squares_args a;
    CPU_TRY(ampx_kit_take_sum_squares(AMPX_KIT(ctx), args, &a));
    float *out    = cpu_ptr(&a.out);
    double total  = a.accumulate ? (double)*out : 0.0;
    cpu_amp_out o = {.sq = &total};
    CPU_TRY(cpu_amp_run(ctx, "sum_squares", &a.x, CPU_AMP_SQ, &o));
    *out = (float)total;
    return AMPX_OK;
}
