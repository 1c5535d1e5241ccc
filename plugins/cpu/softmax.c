/* softmax.c — SOFTMAX_FWD / SOFTMAX_BWD (optionally log-softmax, causal mask, pre-scale) and
 * the fused SOFTMAX_XENT loss.
 *
 * Rows are independent, so threads take blocks of whole rows. Within a row: z = scale * x
 * is formed in f32 as the ABI states; the row max is subtracted before exponentiating so
 * exp never overflows; exponentials, their sum and the logarithm are evaluated in double
 * (wider than f32, as the ABI allows), and each output is rounded once to its dtype.
 * Masked positions give probability 0 (log-probability -inf) in the forward and gradient 0
 * in the backward, whose sums run over the visible keys only.
 */
#include <math.h>
#include <string.h>

#include "avx2_math.h"
#include "cpu.h"

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD and SOFTMAX_BWD

typedef struct softmax_job {
    ampx_softmax_args a;
    const void *in, *dy;
    void *out;
    ampx_context *ctx;
} softmax_job;

#if CPU_HAVE_AVX2_TABLE
/* The AVX2 path of a softmax row (not log): e_c = exp(z_c - mx) for c <= lim into e
 * (doubles), 16 at a time with cpu_avx2_exp_pd4, summed in four-lane partial sums combined
 * in a fixed order (deterministic, a different order from the portable path); then
 * y_c = e_c / sum. Returns the sum. */
CPU_AVX2_FN static double softmax_exp_avx2(const float *z, uint64_t cnt, double mx, double *e) {
    __m256d acc = _mm256_setzero_pd(), m = _mm256_set1_pd(mx);
    uint64_t c = 0;
    for (; c + 4 * CPU_EXP_W <= cnt; c += 4 * CPU_EXP_W) {
        __m256d v[CPU_EXP_W];
        for (int w = 0; w < CPU_EXP_W; w++)
            v[w] = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(z + c + 4 * w)), m);
        cpu_avx2_exp_pd4(v);
        for (int w = 0; w < CPU_EXP_W; w++) {
            _mm256_storeu_pd(e + c + 4 * w, v[w]);
            acc = _mm256_add_pd(acc, v[w]);
        }
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; c < cnt; c++) {
        e[c] = exp((double)z[c] - mx);
        sum += e[c];
    }
    return sum;
}

CPU_AVX2_FN static void softmax_div_avx2(const double *e, uint64_t cnt, double sum, float *y) {
    __m256d s  = _mm256_set1_pd(sum);
    uint64_t c = 0;
    for (; c + 4 <= cnt; c += 4)
        _mm_storeu_ps(y + c, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_loadu_pd(e + c), s)));
    for (; c < cnt; c++)
        y[c] = (float)(e[c] / sum);
}
#endif

static void softmax_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    const softmax_job *j       = arg;
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, rpi = cpu_rows_per_item(cols);
    float *z = j->ctx->thread_ws[tid].p;
    for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++) {
        cpu_load_f32(z, j->in, a->x_or_y.dtype, r * cols, cols);
        /* keys visible to query (r mod seq_q): j <= lim, aligned at the end of the row */
        uint64_t lim = a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1;
        float mx     = -INFINITY;
        int nan      = 0;
        for (uint64_t c = 0; c < cols; c++) {
            z[c] = c > lim ? -INFINITY : a->scale * z[c];
            if (z[c] > mx) mx = z[c];
            if (z[c] != z[c]) nan = 1;
        }
        if (nan) mx = NAN; /* a NaN logit poisons its whole row */
#if CPU_HAVE_AVX2_TABLE
        if (!a->log && cpu_tls_kern->isa >= CPU_ISA_AVX2) {
            double *e  = (double *)(z + 2 * cols); /* 8-byte aligned: 2 cols floats in */
            double sum = softmax_exp_avx2(z, lim + 1, (double)mx, e);
            softmax_div_avx2(e, lim + 1, sum, z);
            for (uint64_t c = lim + 1; c < cols; c++)
                z[c] = 0.0f;
            cpu_store_f32(j->out, a->y_or_dx.dtype, r * cols, z, cols);
            continue;
        }
#endif
        double sum = 0.0;
        for (uint64_t c = 0; c <= lim; c++)
            sum += exp((double)z[c] - (double)mx);
        if (a->log) {
            double lse = log(sum);
            for (uint64_t c = 0; c < cols; c++)
                z[c] = c > lim ? -INFINITY : (float)(((double)z[c] - (double)mx) - lse);
        } else {
            for (uint64_t c = 0; c < cols; c++)
                z[c] = c > lim ? 0.0f : (float)(exp((double)z[c] - (double)mx) / sum);
        }
        cpu_store_f32(j->out, a->y_or_dx.dtype, r * cols, z, cols);
    }
}

/* The forward's mask applies: sums run over the visible keys c <= lim only, and dx is 0 at
 * masked positions whatever y and dy hold there (a garbage dy must not leak into dx). */
static void softmax_bwd_rows(void *arg, uint64_t item, unsigned tid) {
    const softmax_job *j       = arg;
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, rpi = cpu_rows_per_item(cols);
    float *y  = j->ctx->thread_ws[tid].p;
    float *dy = y + cols;
    for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++) {
        cpu_load_f32(y, j->in, a->x_or_y.dtype, r * cols, cols);
        cpu_load_f32(dy, j->dy, a->dy.dtype, r * cols, cols);
        uint64_t lim = a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1;
        if (a->log) { /* dx_j = scale (dy_j - exp(y_j) sum_k dy_k) */
            double s = 0.0;
            for (uint64_t c = 0; c <= lim; c++)
                s += dy[c];
            for (uint64_t c = 0; c <= lim; c++)
                y[c] = (float)((double)a->scale * ((double)dy[c] - exp((double)y[c]) * s));
        } else { /* dx_j = scale y_j (dy_j - sum_k dy_k y_k) */
            double dot = 0.0;
            for (uint64_t c = 0; c <= lim; c++)
                dot += (double)dy[c] * (double)y[c];
            for (uint64_t c = 0; c <= lim; c++)
                y[c] = (float)((double)a->scale * (double)y[c] * ((double)dy[c] - dot));
        }
        for (uint64_t c = lim + 1; c < cols; c++)
            y[c] = 0.0f;
        cpu_store_f32(j->out, a->y_or_dx.dtype, r * cols, y, cols);
    }
}

/* SOFTMAX_FWD and SOFTMAX_BWD after ampx_kit_take_softmax_fwd / _bwd. */
static ampx_status softmax_common(ampx_context *ctx, const char *opname, softmax_job *j, int bwd) {
    const ampx_softmax_args *a = &j->a;
    uint64_t n                 = a->rows * a->cols;
    if (n == 0) return AMPX_OK;
    /* fwd: z (cols floats), then up to cols doubles of exponentials on the AVX2 path;
     * bwd: y and dy */
    CPU_TRY(cpu_reserve_thread_ws(ctx, opname, ((size_t)a->cols * 4 + 2) * sizeof(float)));
    j->in  = cpu_ptr(&a->x_or_y);
    j->dy  = cpu_ptr(&a->dy);
    j->out = cpu_ptr(&a->y_or_dx);
    j->ctx = ctx;
    cpu_run_rows(ctx, a->rows, a->cols, bwd ? softmax_bwd_rows : softmax_fwd_rows, j);
    return AMPX_OK;
}

ampx_status cpu_softmax_fwd(ampx_context *ctx, const ampx_softmax_args *args) {
    softmax_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_softmax_fwd(AMPX_KIT(ctx), args, &j.a));
    return softmax_common(ctx, "softmax_fwd", &j, 0);
}

ampx_status cpu_softmax_bwd(ampx_context *ctx, const ampx_softmax_args *args) {
    softmax_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_softmax_bwd(AMPX_KIT(ctx), args, &j.a));
    return softmax_common(ctx, "softmax_bwd", &j, 1);
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_XENT
//
// Per valid row: term = logsumexp(row) - row[label], with logsumexp = max + log(sum exp(x -
// max)); the gradient is g * (softmax_j - [j == label]). Terms land in a per-row double
// array and are summed in row order afterwards, so the loss does not depend on threading.
// A label outside [0, cols) (and not ignore_index) makes its term NaN, hence loss NaN; that
// row's logits are never indexed by the label.

typedef struct xent_job {
    ampx_softmax_xent_args a;
    const void *logits;
    const int32_t *labels;
    void *dlogits; /* NULL: loss only */
    double g;      /* grad_scale / n_valid (* loss scale) */
    double *terms; /* rows */
    ampx_context *ctx;
} xent_job;

static void xent_rows(void *arg, uint64_t item, unsigned tid) {
    const xent_job *j               = arg;
    const ampx_softmax_xent_args *a = &j->a;
    uint64_t cols = a->cols, rpi = cpu_rows_per_item(cols);
    float *x = j->ctx->thread_ws[tid].p;
    for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++) {
        int32_t label = j->labels[r];
        if (label == a->ignore_index) {
            j->terms[r] = 0.0;
            if (j->dlogits) {
                memset(x, 0, (size_t)cols * sizeof(float));
                cpu_store_f32(j->dlogits, a->dlogits.dtype, r * cols, x, cols);
            }
            continue;
        }
        int bad = label < 0 || (uint64_t)label >= cols;
        cpu_load_f32(x, j->logits, a->logits.dtype, r * cols, cols);
        float mx = -INFINITY;
        int nan  = 0;
        for (uint64_t c = 0; c < cols; c++) {
            if (x[c] > mx) mx = x[c];
            if (x[c] != x[c]) nan = 1;
        }
        if (nan) mx = NAN;
        double sum = 0.0;
        for (uint64_t c = 0; c < cols; c++)
            sum += exp((double)x[c] - (double)mx);
        double lse  = (double)mx + log(sum);
        j->terms[r] = bad ? NAN : lse - (double)x[label];
        if (j->dlogits) {
            for (uint64_t c = 0; c < cols; c++) {
                double p = exp((double)x[c] - (double)mx) / sum;
                if (!bad && c == (uint64_t)label) p -= 1.0;
                x[c] = (float)(j->g * p);
            }
            cpu_store_f32(j->dlogits, a->dlogits.dtype, r * cols, x, cols);
        }
    }
}

ampx_status cpu_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *args) {
    xent_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_softmax_xent(AMPX_KIT(ctx), args, &j.a));
    const ampx_softmax_xent_args *a = &j.a;

    j.logits         = cpu_ptr(&a->logits);
    j.labels         = cpu_ptr(&a->labels);
    j.dlogits        = cpu_ptr(&a->dlogits);
    j.ctx            = ctx;
    uint64_t n_valid = 0;
    for (uint64_t r = 0; r < a->rows; r++)
        n_valid += j.labels[r] != a->ignore_index;
    double loss_scale =
        a->scalars.buf ? (double)((ampx_scalars *)cpu_ptr(&a->scalars))->scale : 1.0;
    j.g = n_valid ? (double)a->grad_scale / (double)n_valid * loss_scale : 0.0;

    double loss = 0.0;
    if (a->rows > 0) {
        CPU_TRY(cpu_reserve_thread_ws(ctx, "softmax_xent",
                                      (size_t)(a->cols ? a->cols : 1) * sizeof(float)));
        j.terms = cpu_reserve_shared_ws(ctx, "softmax_xent", (size_t)a->rows * sizeof(double));
        if (!j.terms) return AMPX_ERR_NO_MEMORY;
        cpu_run_rows(ctx, a->rows, a->cols ? a->cols : 1, xent_rows, &j);
        for (uint64_t r = 0; r < a->rows; r++)
            loss += j.terms[r];
        loss = n_valid ? loss / (double)n_valid : 0.0;
    }
    *(float *)cpu_ptr(&a->loss) = (float)loss;
    return AMPX_OK;
}
