/* norm.c — LAYERNORM_FWD/BWD (per row) and BATCHNORM_FWD/BWD (per channel).
 *
 * Portable path (the reference): statistics two-pass in double (mean first, then the mean
 * of squared deviations), which avoids the cancellation of E[x^2] - E[x]^2 on data with a
 * large mean; normalised outputs and gradients formed in double. The AVX2 path: statistics
 * in one sweep about the row's first element in double lanes, outputs and gradients in f32
 * (its section below). Either way the statistics are saved as f32 (mean, rstd) for the
 * backward, which reads those f32 values back, and each output is rounded once to its dtype.
 * Sums over rows (dgamma, dbeta) run over rows in order inside disjoint column blocks, and
 * per-channel work is disjoint per channel, so nothing depends on the thread count.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"

#define NORM_COLS 256 /* column block of the dgamma/dbeta pass */

// ---------------------------------------------------------------------------------------
// LAYERNORM: per row of cols, mean and biased variance; y = (x - mean) rstd gamma + beta.

typedef struct ln_job {
    ampx_layernorm_args a;
    const void *x, *dy;
    void *out;
    const float *gamma, *beta;
    float *mean, *rstd, *dgamma, *dbeta;
    ampx_context *ctx;
} ln_job;

#if CPU_HAVE_AVX2_TABLE
// ---------------------------------------------------------------------------------------
// The AVX2 path of the layer-norm rows, f32 eight lanes, two sweeps of a row each way.
//
// Forward statistics in one sweep, exactly enough: with K = x_0, d_c = x_c - K is exact in
// double, S1 = sum d and S2 = sum d^2 are accumulated in double lanes (combined in a fixed
// order), mean = K + S1/n, var = (S2 - S1^2/n)/n. The cancellation in S2 - S1^2/n costs a
// factor 1 + (mean - K)^2 / var <= 1 + n in relative error (x_0 is a sample of the row,
// so (x_0 - mean)^2 <= n var), on top of double rounding: below 2^-53 n^2, far below f32
// for any row that fits in memory. The normalised output in f32: x - mean as (x - mh) - ml
// with mean = mh + ml split into two floats (so a large mean costs nothing), times rstd,
// then one fused multiply-add with gamma and beta.

#include "avx2_math.h"

/* The double sums of a row take its eight-element groups in two interleaved sets
 * (CPU_SETS2 in avx2_math.h): two independent chains of additions instead of one, the same
 * order on the AVX2 and AVX-512 paths (so the same bits). */
CPU_AVX2_FN static void ln_stats_avx2(const void *x, ampx_dtype dt, uint64_t off, uint64_t n,
                                      double *mean_out, double *var_out) {
    const float k0   = cpu_ld(x, dt, off);
    const __m256 vk  = _mm256_set1_ps(k0);
    const __m256d kd = _mm256_set1_pd((double)k0);
    __m256d s1a[2], s1b[2], s2a[2], s2b[2];
    for (int k = 0; k < 2; k++)
        s1a[k] = s1b[k] = s2a[k] = s2b[k] = _mm256_setzero_pd();
    CPU_SETS2(n, {
        __m256 v;
        if (m == 8) {
            v = cpu_avx2_ld8(x, dt, off + c);
        } else { /* masked lanes read as K: d = 0 */
            __m256i msk = cpu_avx2_first_lanes(m);
            v = _mm256_blendv_ps(vk, cpu_avx2_ld_n(x, dt, off + c, m), _mm256_castsi256_ps(msk));
        }
        __m256d da = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), kd);
        __m256d db = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), kd);
        s1a[k] = _mm256_add_pd(s1a[k], da), s1b[k] = _mm256_add_pd(s1b[k], db);
        s2a[k] = _mm256_fmadd_pd(da, da, s2a[k]), s2b[k] = _mm256_fmadd_pd(db, db, s2b[k]);
    });
    double s1  = cpu_avx2_sets2_pd(s1a, s1b);
    double s2  = cpu_avx2_sets2_pd(s2a, s2b);
    double var = (s2 - s1 * (s1 / (double)n)) / (double)n;
    *mean_out  = (double)k0 + s1 / (double)n;
    *var_out   = var > 0.0 ? var : (var == var ? 0.0 : var); /* NaN stays NaN */
}

/* y = ((x - mh) - ml) rstd gamma + beta; y may be x. */
CPU_AVX2_FN static void ln_norm_avx2(const void *x, ampx_dtype xdt, void *y, ampx_dtype ydt,
                                     uint64_t off, uint64_t n, double mean, double rstd,
                                     const float *gamma, const float *beta) {
    float mh = (float)mean, ml = (float)(mean - (double)mh);
    const __m256 vmh = _mm256_set1_ps(mh), vml = _mm256_set1_ps(ml),
                 rs  = _mm256_set1_ps((float)rstd);
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (uint64_t c = 0; c < n; c += 8) {
        __m256 v  = cpu_avx2_ld_n(x, xdt, off + c, n - c);
        __m256 g  = gamma ? cpu_avx2_load_n(gamma + c, n - c) : one;
        __m256 b  = beta ? cpu_avx2_load_n(beta + c, n - c) : zero;
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(v, vmh), vml), rs);
        cpu_avx2_st_n(y, ydt, off + c, n - c, _mm256_fmadd_ps(xh, g, b));
    }
}

/* From the saved f32 mean and rstd: xhat = (x - mean) rstd, g = dy gamma, sums of g and
 * g xhat in double lanes; then dx = rstd ((g - mean(g)) - xhat mean(g xhat)). dx may be x
 * or dy. */
CPU_AVX2_FN static void ln_bwd_avx2(const void *x, ampx_dtype xdt, const void *dy, ampx_dtype dydt,
                                    void *dx, ampx_dtype odt, const float *gamma, uint64_t off,
                                    uint64_t n, float mean, float rstd) {
    const __m256 vm = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd), one = _mm256_set1_ps(1.0f);
    __m256d ga[2], gb[2], gxa[2], gxb[2];
    for (int k = 0; k < 2; k++)
        ga[k] = gb[k] = gxa[k] = gxb[k] = _mm256_setzero_pd();
    CPU_SETS2(n, {
        __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(cpu_avx2_ld_n(x, xdt, off + c, m), vm), rs);
        __m256 g    = _mm256_mul_ps(cpu_avx2_ld_n(dy, dydt, off + c, m),
                                 gamma ? cpu_avx2_load_n(gamma + c, m) : one);
        cpu_avx2_acc_pd(&ga[k], &gb[k], g); /* masked lanes are 0 */
        cpu_avx2_acc_pd(&gxa[k], &gxb[k], _mm256_mul_ps(g, xhat));
    });
    const __m256 mg  = _mm256_set1_ps((float)(cpu_avx2_sets2_pd(ga, gb) / (double)n));
    const __m256 mgx = _mm256_set1_ps((float)(cpu_avx2_sets2_pd(gxa, gxb) / (double)n));
    for (uint64_t c = 0; c < n; c += 8) {
        __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(cpu_avx2_ld_n(x, xdt, off + c, n - c), vm), rs);
        __m256 g    = _mm256_mul_ps(cpu_avx2_ld_n(dy, dydt, off + c, n - c),
                                 gamma ? cpu_avx2_load_n(gamma + c, n - c) : one);
        cpu_avx2_st_n(dx, odt, off + c, n - c,
                      _mm256_mul_ps(rs, _mm256_fnmadd_ps(xhat, mgx, _mm256_sub_ps(g, mg))));
    }
}

// ---------------------------------------------------------------------------------------
// The AVX-512 paths: the AVX2 path's operations lane for lane, rows read and written where
// they lie (bf16 and f16 converted in registers). The double sums take eight elements a
// step in one zmm of eight doubles (the AVX2 path's two vectors of four), sixteen-element
// vectors as two such steps in order and a row's last partial vectors with AVX-512VL masks,
// so the statistics, outputs and gradients are the AVX2 path's bits (tested in
// tests/cpu_isa).

/* ln_stats_avx2 of elements off .. off + n - 1 of x (dtype dt), n >= 1: a group of eight is
 * one zmm of doubles (the AVX2 path's two vectors of four). */
CPU_AVX512_FN static void ln_stats_avx512(const void *x, ampx_dtype dt, uint64_t off, uint64_t n,
                                          double *mean_out, double *var_out) {
    const float k0   = cpu_ld(x, dt, off);
    const __m256 vk  = _mm256_set1_ps(k0);
    const __m512d kd = _mm512_set1_pd((double)k0);
    __m512d s1[2], s2[2];
    for (int k = 0; k < 2; k++)
        s1[k] = s2[k] = _mm512_setzero_pd();
    CPU_SETS2(n, { /* masked lanes read as K: d = 0 */
                   __mmask8 msk = cpu_avx512_mask8(m);
                   __m512d d    = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_mask_blend_ps(
                                                    msk, vk, cpu_avx512_ld8(x, dt, off + c, msk))),
                                                kd);
                   s1[k] = _mm512_add_pd(s1[k], d), s2[k] = _mm512_fmadd_pd(d, d, s2[k]);
    });
    double t1  = cpu_avx512_sets2_pd(s1);
    double t2  = cpu_avx512_sets2_pd(s2);
    double var = (t2 - t1 * (t1 / (double)n)) / (double)n;
    *mean_out  = (double)k0 + t1 / (double)n;
    *var_out   = var > 0.0 ? var : (var == var ? 0.0 : var); /* NaN stays NaN */
}

/* ln_norm_avx2 from x (dtype xdt) to y (dtype ydt), both at element off; y may be x. */
CPU_AVX512_FN static void ln_norm_avx512(const void *x, ampx_dtype xdt, void *y, ampx_dtype ydt,
                                         uint64_t off, uint64_t n, double mean, double rstd,
                                         const float *gamma, const float *beta, uint64_t pf) {
    const int ne = cpu_bf16_ne();
    float mh = (float)mean, ml = (float)(mean - (double)mh);
    const __m512 vmh = _mm512_set1_ps(mh), vml = _mm512_set1_ps(ml),
                 rs  = _mm512_set1_ps((float)rstd);
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (uint64_t c = 0; c < n; c += 16) {
        __mmask16 m = cpu_avx512_mask16(n - c);
        __m512 v    = cpu_avx512_ld16(x, xdt, off + c, m);
        __m512 g    = gamma ? _mm512_maskz_loadu_ps(m, gamma + c) : one;
        __m512 b    = beta ? _mm512_maskz_loadu_ps(m, beta + c) : zero;
        __m512 xh   = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(v, vmh), vml), rs);
        if (pf) cpu_prefetch_el(x, xdt, off + pf + c); /* the next row */
        cpu_avx512_st16_ne(y, ydt, off + c, _mm512_fmadd_ps(xh, g, b), m, ne);
    }
}

/* ln_bwd_avx2 with x, dy and dx at element off of their tensors; dx may be x or dy. */
CPU_AVX512_FN static void ln_bwd_avx512(const ln_job *j, uint64_t off, uint64_t n, float mean,
                                        float rstd, uint64_t pf) {
    const int ne         = cpu_bf16_ne();
    const ampx_dtype xdt = j->a.x.dtype, dydt = j->a.dy.dtype, odt = j->a.y_or_dx.dtype;
    const float *gamma = j->gamma;
    const __m512 vm = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd), one = _mm512_set1_ps(1.0f);
    __m512d sg[2], sgx[2];
    for (int k = 0; k < 2; k++)
        sg[k] = sgx[k] = _mm512_setzero_pd();
    const __m256 vm8 = _mm256_set1_ps(mean), rs8 = _mm256_set1_ps(rstd),
                 one8 = _mm256_set1_ps(1.0f);
    CPU_SETS2(n, { /* masked lanes: g = 0 */
                   __mmask8 msk = cpu_avx512_mask8(m);
                   __m256 xhat  = _mm256_mul_ps(
                        _mm256_sub_ps(cpu_avx512_ld8(j->x, xdt, off + c, msk), vm8), rs8);
                   __m256 g = _mm256_mul_ps(cpu_avx512_ld8(j->dy, dydt, off + c, msk),
                                            gamma ? _mm256_maskz_loadu_ps(msk, gamma + c) : one8);
                   sg[k]    = _mm512_add_pd(sg[k], _mm512_cvtps_pd(g));
                   sgx[k]   = _mm512_add_pd(sgx[k], _mm512_cvtps_pd(_mm256_mul_ps(g, xhat)));
    });
    const __m512 mg  = _mm512_set1_ps((float)(cpu_avx512_sets2_pd(sg) / (double)n));
    const __m512 mgx = _mm512_set1_ps((float)(cpu_avx512_sets2_pd(sgx) / (double)n));
    for (uint64_t c = 0; c < n; c += 16) {
        __mmask16 m = cpu_avx512_mask16(n - c);
        __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(cpu_avx512_ld16(j->x, xdt, off + c, m), vm), rs);
        __m512 g    = _mm512_mul_ps(cpu_avx512_ld16(j->dy, dydt, off + c, m),
                                 gamma ? _mm512_maskz_loadu_ps(m, gamma + c) : one);
        if (pf) { /* the next row's x and dy */
            cpu_prefetch_el(j->x, xdt, off + pf + c);
            cpu_prefetch_el(j->dy, dydt, off + pf + c);
        }
        cpu_avx512_st16_ne(j->out, odt, off + c,
                           _mm512_mul_ps(rs, _mm512_fnmadd_ps(xhat, mgx, _mm512_sub_ps(g, mg))), m,
                           ne);
    }
}

CPU_AVX512_FN static void ln_fwd_row_avx512(const ln_job *j, uint64_t r) {
    uint64_t cols = j->a.cols;
    double mean, var;
    ln_stats_avx512(j->x, j->a.x.dtype, r * cols, cols, &mean, &var);
    double rstd = 1.0 / sqrt(var + (double)j->a.eps);
    j->mean[r]  = (float)mean;
    j->rstd[r]  = (float)rstd;
    ln_norm_avx512(j->x, j->a.x.dtype, j->out, j->a.y_or_dx.dtype, r * cols, cols, mean, rstd,
                   j->gamma, j->beta, r + 1 < j->a.rows ? cols : 0);
}
#endif

static void ln_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    const ln_job *j = arg;
    uint64_t cols = j->a.cols, rpi = cpu_rows_per_item(cols);
    float *x = j->ctx->thread_ws[tid].p;
    for (uint64_t r = item * rpi; r < j->a.rows && r < (item + 1) * rpi; r++) {
#if CPU_HAVE_AVX2_TABLE
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512 && cols > 0) {
            ln_fwd_row_avx512(j, r);
            continue;
        }
        if (cpu_tls_kern->isa >= CPU_ISA_AVX2 && cols > 0) {
            /* f32 in place; bf16/f16 widened into ws and rounded once (with eight lanes,
             * converting in the inner loops costs more than these passes in cache) */
            ampx_dtype xdt = j->a.x.dtype, ydt = j->a.y_or_dx.dtype;
            int f32        = xdt == AMPX_F32 && ydt == AMPX_F32;
            const void *xb = f32 ? j->x : cpu_in_f32(x, j->x, xdt, r * cols, cols);
            void *yb       = f32 ? j->out : cpu_out_f32(x, j->out, ydt, r * cols);
            uint64_t off   = f32 ? r * cols : 0;
            double mean, var;
            ln_stats_avx2(xb, AMPX_F32, off, cols, &mean, &var);
            double rstd = 1.0 / sqrt(var + (double)j->a.eps);
            j->mean[r]  = (float)mean;
            j->rstd[r]  = (float)rstd;
            ln_norm_avx2(xb, AMPX_F32, yb, AMPX_F32, off, cols, mean, rstd, j->gamma, j->beta);
            if (!f32) cpu_out_f32_done(j->out, ydt, r * cols, yb, cols);
            continue;
        }
#endif
        cpu_load_f32(x, j->x, j->a.x.dtype, r * cols, cols);
        double s = 0.0, ss = 0.0;
        for (uint64_t c = 0; c < cols; c++)
            s += x[c];
        double mean = s / (double)cols;
        for (uint64_t c = 0; c < cols; c++)
            ss += ((double)x[c] - mean) * ((double)x[c] - mean);
        double rstd = 1.0 / sqrt(ss / (double)cols + (double)j->a.eps);
        j->mean[r]  = (float)mean;
        j->rstd[r]  = (float)rstd;
        for (uint64_t c = 0; c < cols; c++) {
            double v = ((double)x[c] - mean) * rstd;
            if (j->gamma) v *= (double)j->gamma[c];
            if (j->beta) v += (double)j->beta[c];
            x[c] = (float)v;
        }
        cpu_store_f32(j->out, j->a.y_or_dx.dtype, r * cols, x, cols);
    }
}

/* dx = rstd (g - mean_j(g) - xhat mean_j(g xhat)), g = dy gamma, from the saved f32 stats. */
static void ln_bwd_rows(void *arg, uint64_t item, unsigned tid) {
    const ln_job *j = arg;
    uint64_t cols = j->a.cols, rpi = cpu_rows_per_item(cols);
    float *x  = j->ctx->thread_ws[tid].p;
    float *dy = x + cols;
    for (uint64_t r = item * rpi; r < j->a.rows && r < (item + 1) * rpi; r++) {
#if CPU_HAVE_AVX2_TABLE
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512 && cols > 0) {
            ln_bwd_avx512(j, r * cols, cols, j->mean[r], j->rstd[r], r + 1 < j->a.rows ? cols : 0);
            continue;
        }
        if (cpu_tls_kern->isa >= CPU_ISA_AVX2 && cols > 0) { /* as the forward */
            ampx_dtype xdt = j->a.x.dtype, dydt = j->a.dy.dtype, odt = j->a.y_or_dx.dtype;
            int f32        = xdt == AMPX_F32 && dydt == AMPX_F32 && odt == AMPX_F32;
            const void *xb = f32 ? j->x : cpu_in_f32(x, j->x, xdt, r * cols, cols);
            const void *db = f32 ? j->dy : cpu_in_f32(dy, j->dy, dydt, r * cols, cols);
            void *ob       = f32 ? j->out : cpu_out_f32(x, j->out, odt, r * cols);
            ln_bwd_avx2(xb, AMPX_F32, db, AMPX_F32, ob, AMPX_F32, j->gamma, f32 ? r * cols : 0,
                        cols, j->mean[r], j->rstd[r]);
            if (!f32) cpu_out_f32_done(j->out, odt, r * cols, ob, cols);
            continue;
        }
#endif
        cpu_load_f32(x, j->x, j->a.x.dtype, r * cols, cols);
        cpu_load_f32(dy, j->dy, j->a.dy.dtype, r * cols, cols);
        double mean = j->mean[r], rstd = j->rstd[r], sg = 0.0, sgx = 0.0;
        for (uint64_t c = 0; c < cols; c++) {
            double xhat = ((double)x[c] - mean) * rstd;
            double g    = (double)dy[c] * (j->gamma ? (double)j->gamma[c] : 1.0);
            sg += g;
            sgx += g * xhat;
        }
        double mg = sg / (double)cols, mgx = sgx / (double)cols;
        for (uint64_t c = 0; c < cols; c++) {
            double xhat = ((double)x[c] - mean) * rstd;
            double g    = (double)dy[c] * (j->gamma ? (double)j->gamma[c] : 1.0);
            x[c]        = (float)(rstd * (g - mg - xhat * mgx));
        }
        cpu_store_f32(j->out, j->a.y_or_dx.dtype, r * cols, x, cols);
    }
}

/* dgamma (+)= sum_r dy xhat, dbeta (+)= sum_r dy over a block of columns, in double, rows in
 * order. f32 rows are read in place; compiled for AVX2 too (CPU_ISA_CHUNK: the same IEEE
 * operations, so the same bits). */
CPU_INLINE void ln_bwd_params_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const ln_job *j = arg;
    uint64_t c0 = item * NORM_COLS, cols = j->a.cols;
    uint64_t nc = cols - c0 < NORM_COLS ? cols - c0 : NORM_COLS;
    double sgx[NORM_COLS], sg[NORM_COLS];
    float tx[NORM_COLS], tdy[NORM_COLS];
    memset(sgx, 0, sizeof sgx);
    memset(sg, 0, sizeof sg);
    for (uint64_t r = 0; r < j->a.rows; r++) {
        const float *x  = cpu_in_f32(tx, j->x, j->a.x.dtype, r * cols + c0, nc);
        const float *dy = cpu_in_f32(tdy, j->dy, j->a.dy.dtype, r * cols + c0, nc);
        double mean = j->mean[r], rstd = j->rstd[r];
        for (uint64_t c = 0; c < nc; c++) {
            sgx[c] += (double)dy[c] * (((double)x[c] - mean) * rstd);
            sg[c] += dy[c];
        }
    }
    for (uint64_t c = 0; c < nc; c++) {
        if (j->dgamma)
            j->dgamma[c0 + c] =
                (float)((j->a.accumulate ? (double)j->dgamma[c0 + c] : 0.0) + sgx[c]);
        if (j->dbeta)
            j->dbeta[c0 + c] = (float)((j->a.accumulate ? (double)j->dbeta[c0 + c] : 0.0) + sg[c]);
    }
}
CPU_ISA_CHUNK(ln_bwd_params, ln_bwd_params_body)

ampx_status cpu_layernorm_fwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_fwd";
    ln_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_layernorm_fwd(AMPX_KIT(ctx), args, &j.a));
    const ampx_layernorm_args *a = &j.a;
    if (a->rows == 0) return AMPX_OK;
    CPU_TRY(cpu_reserve_thread_ws(ctx, op, (size_t)(a->cols ? a->cols : 1) * sizeof(float)));
    j.x     = cpu_ptr(&a->x);
    j.out   = cpu_ptr(&a->y_or_dx);
    j.gamma = cpu_ptr(&a->gamma);
    j.beta  = cpu_ptr(&a->beta);
    j.mean  = cpu_ptr(&a->mean);
    j.rstd  = cpu_ptr(&a->rstd);
    j.ctx   = ctx;
    cpu_run_rows(ctx, a->rows, a->cols, ln_fwd_rows, &j);
    return AMPX_OK;
}

ampx_status cpu_layernorm_bwd(ampx_context *ctx, const ampx_layernorm_args *args) {
    static const char *op = "layernorm_bwd";
    ln_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_layernorm_bwd(AMPX_KIT(ctx), args, &j.a));
    const ampx_layernorm_args *a = &j.a;
    uint64_t n                   = a->rows * a->cols;
    j.x                          = cpu_ptr(&a->x);
    j.dy                         = cpu_ptr(&a->dy);
    j.out                        = cpu_ptr(&a->y_or_dx);
    j.gamma                      = cpu_ptr(&a->gamma);
    j.mean                       = cpu_ptr(&a->mean);
    j.rstd                       = cpu_ptr(&a->rstd);
    j.dgamma                     = cpu_ptr(&a->dgamma);
    j.dbeta                      = cpu_ptr(&a->dbeta);
    j.ctx                        = ctx;
    if (a->rows > 0 && a->cols > 0) {
        CPU_TRY(cpu_reserve_thread_ws(ctx, op, (size_t)a->cols * 2 * sizeof(float)));
        cpu_run_rows(ctx, a->rows, a->cols, ln_bwd_rows, &j);
    }
    /* dgamma/dbeta: with rows == 0 the sums are 0 (or unchanged when accumulating). */
    if ((j.dgamma || j.dbeta) && a->cols > 0)
        cpu_run(ctx, n, cpu_div_up(a->cols, NORM_COLS), ln_bwd_params, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// BATCHNORM: x is [outer, channels, inner]; channel c's N = outer * inner values lie in
// `outer` contiguous runs of `inner` elements. One parallel item per channel.

typedef struct bn_job {
    ampx_batchnorm_args a;
    const void *x, *dy;
    void *out;
    const float *gamma, *beta;
    float *run_mean, *run_var, *mean, *rstd, *dgamma, *dbeta;
} bn_job;

/* Calls body(t, n, base) over channel c in chunks: t holds x[base .. base + n) in f32. */
#define BN_FOR_CHUNKS(j, c, base, n, BODY)                                                         \
    for (uint64_t o_ = 0; o_ < (j)->a.outer; o_++)                                                 \
        for (uint64_t i_ = 0; i_ < (j)->a.inner; i_ += CPU_CHUNK) {                                \
            uint64_t n    = (j)->a.inner - i_ < CPU_CHUNK ? (j)->a.inner - i_ : CPU_CHUNK;         \
            uint64_t base = (o_ * (j)->a.channels + (c)) * (j)->a.inner + i_;                      \
            BODY                                                                                   \
        }

static void bn_fwd_channel(void *arg, uint64_t c, unsigned tid) {
    (void)tid;
    const bn_job *j = arg;
    double N        = (double)j->a.outer * (double)j->a.inner;
    float t[CPU_CHUNK];
    double mean, rstd;
    if (j->a.training) {
        double s = 0.0, ss = 0.0;
        BN_FOR_CHUNKS(j, c, base, n, {
            cpu_load_f32(t, j->x, j->a.x.dtype, base, n);
            for (uint64_t k = 0; k < n; k++)
                s += t[k];
        })
        mean = s / N;
        BN_FOR_CHUNKS(j, c, base, n, {
            cpu_load_f32(t, j->x, j->a.x.dtype, base, n);
            for (uint64_t k = 0; k < n; k++)
                ss += ((double)t[k] - mean) * ((double)t[k] - mean);
        })
        double var = ss / N;
        rstd       = 1.0 / sqrt(var + (double)j->a.eps);
        j->mean[c] = (float)mean;
        j->rstd[c] = (float)rstd;
        /* Running statistics use the unbiased variance, var * N / (N - 1); with N == 1 there
         * is no unbiased estimate and the biased one (0) is used. */
        double m = j->a.momentum, unbiased = N > 1.0 ? var * N / (N - 1.0) : var;
        if (j->run_mean) j->run_mean[c] = (float)((1.0 - m) * (double)j->run_mean[c] + m * mean);
        if (j->run_var) j->run_var[c] = (float)((1.0 - m) * (double)j->run_var[c] + m * unbiased);
    } else {
        mean = j->run_mean[c];
        rstd = 1.0 / sqrt((double)j->run_var[c] + (double)j->a.eps);
    }
    double gm = j->gamma ? (double)j->gamma[c] : 1.0, bt = j->beta ? (double)j->beta[c] : 0.0;
    BN_FOR_CHUNKS(j, c, base, n, {
        cpu_load_f32(t, j->x, j->a.x.dtype, base, n);
        for (uint64_t k = 0; k < n; k++)
            t[k] = (float)(((double)t[k] - mean) * rstd * gm + bt);
        cpu_store_f32(j->out, j->a.y_or_dx.dtype, base, t, n);
    })
}

/* dx = gamma rstd (dy - mean_N(dy) - xhat mean_N(dy xhat)) from the saved f32 statistics. */
static void bn_bwd_channel(void *arg, uint64_t c, unsigned tid) {
    (void)tid;
    const bn_job *j = arg;
    double N        = (double)j->a.outer * (double)j->a.inner;
    float t[CPU_CHUNK], d[CPU_CHUNK];
    double mean = j->mean[c], rstd = j->rstd[c], sdy = 0.0, sdyx = 0.0;
    BN_FOR_CHUNKS(j, c, base, n, {
        cpu_load_f32(t, j->x, j->a.x.dtype, base, n);
        cpu_load_f32(d, j->dy, j->a.dy.dtype, base, n);
        for (uint64_t k = 0; k < n; k++) {
            sdy += d[k];
            sdyx += (double)d[k] * (((double)t[k] - mean) * rstd);
        }
    })
    double gm  = j->gamma ? (double)j->gamma[c] : 1.0;
    double mdy = sdy / N, mdyx = sdyx / N;
    BN_FOR_CHUNKS(j, c, base, n, {
        cpu_load_f32(t, j->x, j->a.x.dtype, base, n);
        cpu_load_f32(d, j->dy, j->a.dy.dtype, base, n);
        for (uint64_t k = 0; k < n; k++) {
            double xhat = ((double)t[k] - mean) * rstd;
            t[k]        = (float)(gm * rstd * ((double)d[k] - mdy - xhat * mdyx));
        }
        cpu_store_f32(j->out, j->a.y_or_dx.dtype, base, t, n);
    })
    if (j->dgamma) j->dgamma[c] = (float)((j->a.accumulate ? (double)j->dgamma[c] : 0.0) + sdyx);
    if (j->dbeta) j->dbeta[c] = (float)((j->a.accumulate ? (double)j->dbeta[c] : 0.0) + sdy);
}

ampx_status cpu_batchnorm_fwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    bn_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_batchnorm_fwd(AMPX_KIT(ctx), args, &j.a));
    const ampx_batchnorm_args *a = &j.a;
    uint64_t C = a->channels, n = a->outer * C * a->inner;
    int tr = a->training != 0;
    if (a->outer == 0 || a->inner == 0 || C == 0) return AMPX_OK; /* N == 0: no statistics */
    j.x        = cpu_ptr(&a->x);
    j.out      = cpu_ptr(&a->y_or_dx);
    j.gamma    = cpu_ptr(&a->gamma);
    j.beta     = cpu_ptr(&a->beta);
    j.run_mean = cpu_ptr(&a->running_mean);
    j.run_var  = cpu_ptr(&a->running_var);
    j.mean     = tr ? cpu_ptr(&a->mean) : NULL;
    j.rstd     = tr ? cpu_ptr(&a->rstd) : NULL;
    cpu_run(ctx, n, C, bn_fwd_channel, &j);
    return AMPX_OK;
}

ampx_status cpu_batchnorm_bwd(ampx_context *ctx, const ampx_batchnorm_args *args) {
    bn_job j;
    memset(&j, 0, sizeof j);
    CPU_TRY(ampx_kit_take_batchnorm_bwd(AMPX_KIT(ctx), args, &j.a));
    const ampx_batchnorm_args *a = &j.a;
    uint64_t C = a->channels, n = a->outer * C * a->inner;
    if (a->outer == 0 || a->inner == 0 || C == 0) return AMPX_OK;
    j.x      = cpu_ptr(&a->x);
    j.dy     = cpu_ptr(&a->dy);
    j.out    = cpu_ptr(&a->y_or_dx);
    j.gamma  = cpu_ptr(&a->gamma);
    j.mean   = cpu_ptr(&a->mean);
    j.rstd   = cpu_ptr(&a->rstd);
    j.dgamma = cpu_ptr(&a->dgamma);
    j.dbeta  = cpu_ptr(&a->dbeta);
    cpu_run(ctx, n, C, bn_bwd_channel, &j);
    return AMPX_OK;
}
