/* softmax.c — SOFTMAX_FWD / SOFTMAX_BWD (optionally log-softmax, causal mask, pre-scale) and
 * the fused SOFTMAX_XENT loss.
 *
 * Rows are independent, so threads take blocks of whole rows. Within a row: z = scale * x
 * is formed in f32 as the ABI states; the row max is subtracted before exponentiating so
 * exp never overflows. The portable path (the reference) evaluates exponentials, their sum
 * and the logarithm in double (wider than f32, as the ABI allows); the AVX2 path works in
 * f32, eight lanes, with the sums that cancel (the backward's) in double lanes (see the
 * section below and docs/CPU.md for its measured errors). Each output is rounded once to
 * its dtype. Masked positions give probability 0 (log-probability -inf) in the forward and
 * gradient 0 in the backward, whose sums run over the visible keys only.
 */
#include <float.h>
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
// ---------------------------------------------------------------------------------------
// The AVX2 path: f32, eight lanes, cpu_avx2_exp_ps. A row is read twice: once for its
// online statistics (max and rescaled sum), once to write the outputs.

/* Online softmax statistics of z_c = scale * x_c, c < cnt (cnt >= 1): each lane keeps a
 * running max m (starting at -FLT_MAX, so exp(m_old - m_new) and exp(-inf - m) are never
 * inf - inf) and a sum s of exp(z - m), rescaled by exp(m_old - m_new) when a block of 32
 * raises some lane's max (exp(0) is exactly 1 here, so skipping the rescale when no lane
 * rises changes no bits). The lanes combine in a fixed order: mx = the largest m,
 * sum = sum_l s_l exp(m_l - mx). A NaN anywhere makes mx NaN (the row's outputs NaN, as on
 * the portable path); +inf makes the sum NaN, as exp(inf - inf) does there. */
CPU_AVX2_FN static void softmax_stats_avx2(const float *x, uint64_t cnt, float scale, float *mx,
                                           float *sum) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 m = _mm256_set1_ps(-FLT_MAX), s = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    uint64_t c = 0;
    for (; c + 32 <= cnt; c += 32) {
        __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(x + c), vs);
        __m256 v1 = _mm256_mul_ps(_mm256_loadu_ps(x + c + 8), vs);
        __m256 v2 = _mm256_mul_ps(_mm256_loadu_ps(x + c + 16), vs);
        __m256 v3 = _mm256_mul_ps(_mm256_loadu_ps(x + c + 24), vs);
        nan       = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                                   _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
        __m256 bm = _mm256_max_ps(_mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3)), m);
        if (_mm256_movemask_ps(_mm256_cmp_ps(bm, m, _CMP_GT_OQ))) {
            s = _mm256_mul_ps(s, cpu_avx2_exp_neg_ps(_mm256_sub_ps(m, bm)));
            m = bm;
        }
        __m256 e01 = _mm256_add_ps(cpu_avx2_exp_neg_ps(_mm256_sub_ps(v0, m)),
                                   cpu_avx2_exp_neg_ps(_mm256_sub_ps(v1, m)));
        __m256 e23 = _mm256_add_ps(cpu_avx2_exp_neg_ps(_mm256_sub_ps(v2, m)),
                                   cpu_avx2_exp_neg_ps(_mm256_sub_ps(v3, m)));
        s          = _mm256_add_ps(s, _mm256_add_ps(e01, e23));
    }
    for (; c < cnt; c += 8) { /* the rest, one vector at a time; the last one masked */
        __m256 v;
        if (c + 8 <= cnt) {
            v = _mm256_mul_ps(_mm256_loadu_ps(x + c), vs);
        } else {
            __m256i k = cpu_avx2_first_lanes(cnt - c);
            v         = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                         _mm256_mul_ps(_mm256_maskload_ps(x + c, k), vs),
                                         _mm256_castsi256_ps(k));
        }
        nan       = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        __m256 bm = _mm256_max_ps(v, m);
        if (_mm256_movemask_ps(_mm256_cmp_ps(bm, m, _CMP_GT_OQ))) {
            s = _mm256_mul_ps(s, cpu_avx2_exp_neg_ps(_mm256_sub_ps(m, bm)));
            m = bm;
        }
        s = _mm256_add_ps(s, cpu_avx2_exp_neg_ps(_mm256_sub_ps(v, m)));
    }
    float top = cpu_avx2_hmax_ps(m);
    *sum      = cpu_avx2_hsum_ps(
             _mm256_mul_ps(s, cpu_avx2_exp_neg_ps(_mm256_sub_ps(m, _mm256_set1_ps(top)))));
    *mx = _mm256_movemask_ps(nan) ? NAN : top;
}

/* y_c = exp(scale x_c - mx) * (1 / sum) (softmax) or (scale x_c - mx) - log(sum) (log), c <
 * cnt; y_c = fill (0 or -inf) for cnt <= c < cols. y may be x (in place). */
CPU_AVX2_FN static void softmax_out_avx2(const void *x, ampx_dtype xdt, void *y, ampx_dtype ydt,
                                         uint64_t off, uint64_t cnt, uint64_t cols, float scale,
                                         float mx, float sum, int log_) {
    const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(mx);
    const __m256 k = _mm256_set1_ps(log_ ? (float)log((double)sum) : 1.0f / sum);
    for (uint64_t c = 0; c < cnt; c += 8) {
        __m256 z = _mm256_sub_ps(_mm256_mul_ps(cpu_avx2_ld_n(x, xdt, off + c, cnt - c), vs), vm);
        cpu_avx2_st_n(y, ydt, off + c, cnt - c,
                      log_ ? _mm256_sub_ps(z, k) : _mm256_mul_ps(cpu_avx2_exp_neg_ps(z), k));
    }
    const __m256 fill = _mm256_set1_ps(log_ ? -INFINITY : 0.0f);
    for (uint64_t c = cnt; c < cols; c += 8)
        cpu_avx2_st_n(y, ydt, off + c, cols - c, fill);
}

/* Rows of up to this many visible elements are swept three times from cache (max; exp,
 * stored, and its sum; the division), one exp per element; longer ones get the online
 * statistics and two sweeps, two exps per element. Either way a row comes from memory once
 * when it fits in L2 (64 KiB of f32 in, as much out). */
#define SOFTMAX_CACHED_COLS 16384u

/* max_c scale x_c over c < cnt, NaN when any is NaN (the row's outputs then NaN). */
CPU_AVX2_FN static float softmax_max_avx2(const void *x, ampx_dtype dt, uint64_t off, uint64_t cnt,
                                          float scale) {
    const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, nan = _mm256_setzero_ps();
    uint64_t c = 0;
    for (; c + 16 <= cnt; c += 16) {
        __m256 v0 = _mm256_mul_ps(cpu_avx2_ld8(x, dt, off + c), vs);
        __m256 v1 = _mm256_mul_ps(cpu_avx2_ld8(x, dt, off + c + 8), vs);
        nan       = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        m0 = _mm256_max_ps(m0, v0), m1 = _mm256_max_ps(m1, v1);
    }
    for (; c < cnt; c += 8) {
        __m256i k = cpu_avx2_first_lanes(cnt - c < 8 ? cnt - c : 8);
        __m256 v = _mm256_blendv_ps(ninf, _mm256_mul_ps(cpu_avx2_ld_n(x, dt, off + c, cnt - c), vs),
                                    _mm256_castsi256_ps(k));
        nan      = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m0       = _mm256_max_ps(m0, v);
    }
    return _mm256_movemask_ps(nan) ? NAN : cpu_avx2_hmax_ps(_mm256_max_ps(m0, m1));
}

/* sum_c exp(scale x_c - mx) over c < cnt, in two eight-lane partial sums combined in a fixed
 * order; e_c stored to e when e is not NULL (e may be x). */
CPU_AVX2_FN static float softmax_expsum_avx2(const void *x, ampx_dtype dt, uint64_t off, float *e,
                                             uint64_t cnt, float scale, float mx) {
    const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    uint64_t c = 0;
    for (; c + 16 <= cnt; c += 16) {
        __m256 e0 =
            cpu_avx2_exp_neg_ps(_mm256_sub_ps(_mm256_mul_ps(cpu_avx2_ld8(x, dt, off + c), vs), vm));
        __m256 e1 = cpu_avx2_exp_neg_ps(
            _mm256_sub_ps(_mm256_mul_ps(cpu_avx2_ld8(x, dt, off + c + 8), vs), vm));
        if (e) _mm256_storeu_ps(e + c, e0), _mm256_storeu_ps(e + c + 8, e1);
        s0 = _mm256_add_ps(s0, e0), s1 = _mm256_add_ps(s1, e1);
    }
    for (; c < cnt; c += 8) {
        __m256i k = cpu_avx2_first_lanes(cnt - c < 8 ? cnt - c : 8);
        __m256 e0 =
            _mm256_and_ps(cpu_avx2_exp_neg_ps(_mm256_sub_ps(
                              _mm256_mul_ps(cpu_avx2_ld_n(x, dt, off + c, cnt - c), vs), vm)),
                          _mm256_castsi256_ps(k));
        if (e) _mm256_maskstore_ps(e + c, k, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    return cpu_avx2_hsum_ps(_mm256_add_ps(s0, s1));
}

/* Elements off + c of y (dtype dt) = e_c * k for c < cnt, = 0 for cnt <= c < cols. */
CPU_AVX2_FN static void softmax_mul_out_avx2(const float *e, void *y, ampx_dtype dt, uint64_t off,
                                             uint64_t cnt, uint64_t cols, float k) {
    const __m256 vk = _mm256_set1_ps(k);
    for (uint64_t c = 0; c < cnt; c += 8)
        cpu_avx2_st_n(y, dt, off + c, cnt - c, _mm256_mul_ps(cpu_avx2_load_n(e + c, cnt - c), vk));
    for (uint64_t c = cnt; c < cols; c += 8)
        cpu_avx2_st_n(y, dt, off + c, cols - c, _mm256_setzero_ps());
}

/* y_c *= k, c < cnt. */
CPU_AVX2_FN static void softmax_mul_avx2(float *y, uint64_t cnt, float k) {
    const __m256 vk = _mm256_set1_ps(k);
    for (uint64_t c = 0; c < cnt; c += 8) {
        cpu_avx2_store_n(y + c, cnt - c, _mm256_mul_ps(cpu_avx2_load_n(y + c, cnt - c), vk));
    }
}

/* One row from x (dtype xdt) to y (dtype ydt), both at element off of their bases, y may be
 * x; ws (f32, cols) holds the exponentials of a non-f32 y and the widened copy of a long
 * row. */
CPU_AVX2_FN static void softmax_fwd_core_avx2(const softmax_job *j, uint64_t r, const void *xb,
                                              ampx_dtype xdt, void *yb, ampx_dtype ydt,
                                              uint64_t off, float *ws) {
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, cnt = (a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1) + 1;
    float mx, sum;
    if (cnt > SOFTMAX_CACHED_COLS) { /* the online statistics, on a widened copy */
        const float *x = cpu_in_f32(ws, xb, xdt, off, cols);
        softmax_stats_avx2(x, cnt, a->scale, &mx, &sum);
        softmax_out_avx2(xb, xdt, yb, ydt, off, cnt, cols, a->scale, mx, sum, (int)a->log);
        return;
    }
    /* rows read and written where they lie; the exponentials in y itself when it is f32,
     * else in ws */
    mx = softmax_max_avx2(xb, xdt, off, cnt, a->scale);
    if (!a->log) {
        float *e = ydt == AMPX_F32 ? (float *)yb + off : ws;
        sum      = softmax_expsum_avx2(xb, xdt, off, e, cnt, a->scale, mx);
        if (ydt == AMPX_F32) {
            softmax_mul_avx2(e, cnt, 1.0f / sum);
            for (uint64_t c = cnt; c < cols; c++)
                e[c] = 0.0f;
        } else {
            softmax_mul_out_avx2(e, yb, ydt, off, cnt, cols, 1.0f / sum);
        }
    } else {
        sum = softmax_expsum_avx2(xb, xdt, off, NULL, cnt, a->scale, mx);
        softmax_out_avx2(xb, xdt, yb, ydt, off, cnt, cols, a->scale, mx, sum, 1);
    }
}

/* The AVX2 path's row: f32 rows are read and written where they lie; bf16/f16 rows are
 * widened into ws, computed in f32 and rounded once (with eight lanes, converting in the
 * inner loops costs more than these two passes over a row in cache). */
CPU_AVX2_FN static void softmax_fwd_row_avx2(const softmax_job *j, uint64_t r, float *ws) {
    const ampx_softmax_args *a = &j->a;
    ampx_dtype xdt = a->x_or_y.dtype, ydt = a->y_or_dx.dtype;
    uint64_t cols = a->cols, off = r * cols;
    if (xdt == AMPX_F32 && ydt == AMPX_F32) {
        softmax_fwd_core_avx2(j, r, j->in, xdt, j->out, ydt, off, ws);
        return;
    }
    const float *x = cpu_in_f32(ws, j->in, xdt, off, cols);
    float *y       = cpu_out_f32(ws, j->out, ydt, off);
    softmax_fwd_core_avx2(j, r, x, AMPX_F32, y, AMPX_F32, 0, ws);
    cpu_out_f32_done(j->out, ydt, off, y, cols);
}

/* dx_c = scale y_c (dy_c - sum_k dy_k y_k), or for log-softmax scale (dy_c - exp(y_c)
 * sum_k dy_k), over the visible c < cnt (dx = 0 beyond). The sum is accumulated in double
 * (its terms have both signs, and dy_c - sum cancels). dx may be y or dy (in place). */
/* One row: y (dtype ydt), dy and dx at element off of their bases; dx may be y or dy. */
CPU_AVX2_FN static void softmax_bwd_core_avx2(const softmax_job *j, uint64_t r, const void *yb,
                                              ampx_dtype ydt, const void *dyb, ampx_dtype dydt,
                                              void *ob, ampx_dtype odt, uint64_t off) {
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, cnt = (a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1) + 1;
    int log_ = (int)a->log;
    __m256d lo[2], hi[2]; /* CPU_SETS2: two independent chains */
    for (int k = 0; k < 2; k++)
        lo[k] = hi[k] = _mm256_setzero_pd();
    CPU_SETS2(cnt, {
        __m256 vd = cpu_avx2_ld_n(dyb, dydt, off + c, m);
        if (log_) {
            cpu_avx2_acc_pd(&lo[k], &hi[k], vd);
        } else {
            __m256 vy = cpu_avx2_ld_n(yb, ydt, off + c, m);
            lo[k]     = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(vd)),
                                        _mm256_cvtps_pd(_mm256_castps256_ps128(vy)), lo[k]);
            hi[k]     = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(vd, 1)),
                                        _mm256_cvtps_pd(_mm256_extractf128_ps(vy, 1)), hi[k]);
        }
    });
    const __m256 s  = _mm256_set1_ps((float)cpu_avx2_sets2_pd(lo, hi));
    const __m256 vs = _mm256_set1_ps(a->scale);
    for (uint64_t c = 0; c < cnt; c += 8) {
        __m256 vd = cpu_avx2_ld_n(dyb, dydt, off + c, cnt - c);
        __m256 vy = cpu_avx2_ld_n(yb, ydt, off + c, cnt - c);
        __m256 v  = log_ ? _mm256_mul_ps(vs, _mm256_fnmadd_ps(cpu_avx2_exp_ps(vy), s, vd))
                         : _mm256_mul_ps(_mm256_mul_ps(vs, vy), _mm256_sub_ps(vd, s));
        cpu_avx2_st_n(ob, odt, off + c, cnt - c, v);
    }
    for (uint64_t c = cnt; c < cols; c += 8)
        cpu_avx2_st_n(ob, odt, off + c, cols - c, _mm256_setzero_ps());
}

/* The AVX2 path's row, f32 in place, bf16/f16 through ws as softmax_fwd_row_avx2. */
CPU_AVX2_FN static void softmax_bwd_row_avx2(const softmax_job *j, uint64_t r, float *ws) {
    const ampx_softmax_args *a = &j->a;
    ampx_dtype ydt = a->x_or_y.dtype, dydt = a->dy.dtype, odt = a->y_or_dx.dtype;
    uint64_t cols = a->cols, off = r * cols;
    if (ydt == AMPX_F32 && dydt == AMPX_F32 && odt == AMPX_F32) {
        softmax_bwd_core_avx2(j, r, j->in, ydt, j->dy, dydt, j->out, odt, off);
        return;
    }
    const float *y  = cpu_in_f32(ws, j->in, ydt, off, cols);
    const float *dy = cpu_in_f32(ws + cols, j->dy, dydt, off, cols);
    float *dx       = cpu_out_f32(ws, j->out, odt, off);
    softmax_bwd_core_avx2(j, r, y, AMPX_F32, dy, AMPX_F32, dx, AMPX_F32, 0);
    cpu_out_f32_done(j->out, odt, off, dx, cols);
}

// ---------------------------------------------------------------------------------------
// The AVX-512 paths: the AVX2 path's operations lane for lane, sixteen at a time, rows read
// and written where they lie (bf16 and f16 converted in registers). A zmm register holds
// the AVX2 path's two vectors of sixteen consecutive elements (lanes 0-7 and 8-15) and a
// row's last, partial vectors go eight lanes at a time with AVX-512VL masks into the first
// of them, as there; the lanes are combined in the same order, so the results are the AVX2
// path's bits (tested in tests/cpu_isa). Rows longer than SOFTMAX_CACHED_COLS take the
// AVX2 path's online statistics on a widened copy.

/* softmax_max_avx2 of elements off .. off + cnt - 1 of x (dtype dt). */
CPU_AVX512_FN static float softmax_max_avx512(const void *x, ampx_dtype dt, uint64_t off,
                                              uint64_t cnt, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 m        = _mm512_set1_ps(-INFINITY);
    __mmask16 nan   = 0;
    uint64_t c      = 0;
    for (; c + 16 <= cnt; c += 16) {
        __m512 v = _mm512_mul_ps(cpu_avx512_ld16(x, dt, off + c, 0xffff), vs);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        m = _mm512_max_ps(m, v);
    }
    const __m256 vs8 = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = cpu_avx512_lo8(m), m1 = cpu_avx512_hi8(m);
    for (; c < cnt; c += 8) {
        __mmask8 k = cpu_avx512_mask8(cnt - c);
        __m256 v =
            _mm256_mask_blend_ps(k, ninf, _mm256_mul_ps(cpu_avx512_ld8(x, dt, off + c, k), vs8));
        nan |= _mm256_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        m0 = _mm256_max_ps(m0, v);
    }
    return nan ? NAN : cpu_avx2_hmax_ps(_mm256_max_ps(m0, m1));
}

/* softmax_expsum_avx2 of elements off .. off + cnt - 1 of x; e (f32, may be x when x is f32)
 * gets the exponentials when not NULL. */
CPU_AVX512_FN static float softmax_expsum_avx512(const void *x, ampx_dtype dt, uint64_t off,
                                                 float *e, uint64_t cnt, float scale, float mx) {
    const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(mx);
    __m512 s   = _mm512_setzero_ps();
    uint64_t c = 0;
    for (; c + 16 <= cnt; c += 16) {
        __m512 e16 = cpu_avx512_exp_neg_ps(
            _mm512_sub_ps(_mm512_mul_ps(cpu_avx512_ld16(x, dt, off + c, 0xffff), vs), vm));
        if (e) _mm512_storeu_ps(e + c, e16);
        s = _mm512_add_ps(s, e16);
    }
    const __m256 vs8 = _mm256_set1_ps(scale), vm8 = _mm256_set1_ps(mx);
    __m256 s0 = cpu_avx512_lo8(s), s1 = cpu_avx512_hi8(s);
    for (; c < cnt; c += 8) {
        __mmask8 k = cpu_avx512_mask8(cnt - c);
        __m256 e0  = _mm256_maskz_mov_ps(
             k, cpu_avx2_exp_neg_ps(
                    _mm256_sub_ps(_mm256_mul_ps(cpu_avx512_ld8(x, dt, off + c, k), vs8), vm8)));
        if (e) _mm256_mask_storeu_ps(e + c, k, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    return cpu_avx2_hsum_ps(_mm256_add_ps(s0, s1));
}

/* Elements off + c of y (dtype dt) = e_c * k for c < cnt, = fill for cnt <= c < cols; e may
 * be y's own f32 elements. */
CPU_AVX512_FN static void softmax_mul_avx512(const float *e, void *y, ampx_dtype dt, uint64_t off,
                                             uint64_t cnt, uint64_t cols, float k, float fill,
                                             const void *pf, ampx_dtype pfdt) {
    const __m512 vk = _mm512_set1_ps(k);
    const int ne    = cpu_bf16_ne();
    uint64_t c      = 0;
    for (; c < cnt; c += 16) {
        __mmask16 m = cpu_avx512_mask16(cnt - c);
        if (pf) cpu_prefetch_el(pf, pfdt, off + cols + c); /* the next row's x */
        cpu_avx512_st16_ne(y, dt, off + c, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + c), vk), m,
                           ne);
    }
    for (c = cnt; c < cols; c += 16)
        cpu_avx512_st16_ne(y, dt, off + c, _mm512_set1_ps(fill), cpu_avx512_mask16(cols - c), ne);
}

/* softmax_out_avx2 from x (dtype xdt) to y (dtype ydt), both at element off; y may be x. */
CPU_AVX512_FN static void softmax_out_avx512(const void *x, ampx_dtype xdt, void *y, ampx_dtype ydt,
                                             uint64_t off, uint64_t cnt, uint64_t cols, float scale,
                                             float mx, float sum, int log_, int pf) {
    const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(mx);
    const __m512 k = _mm512_set1_ps(log_ ? (float)log((double)sum) : 1.0f / sum);
    const int ne   = cpu_bf16_ne();
    for (uint64_t c = 0; c < cnt; c += 16) {
        __mmask16 m = cpu_avx512_mask16(cnt - c);
        __m512 z    = _mm512_sub_ps(_mm512_mul_ps(cpu_avx512_ld16(x, xdt, off + c, m), vs), vm);
        if (pf) cpu_prefetch_el(x, xdt, off + cols + c); /* the next row */
        cpu_avx512_st16_ne(y, ydt, off + c,
                           log_ ? _mm512_sub_ps(z, k) : _mm512_mul_ps(cpu_avx512_exp_neg_ps(z), k),
                           m, ne);
    }
    const __m512 fill = _mm512_set1_ps(log_ ? -INFINITY : 0.0f);
    for (uint64_t c = cnt; c < cols; c += 16)
        cpu_avx512_st16_ne(y, ydt, off + c, fill, cpu_avx512_mask16(cols - c), ne);
}

CPU_AVX512_FN static void softmax_fwd_row_avx512(const softmax_job *j, uint64_t r, float *ws) {
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, cnt = (a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1) + 1;
    ampx_dtype xdt = a->x_or_y.dtype, ydt = a->y_or_dx.dtype;
    uint64_t off = r * cols;
    if (cnt > SOFTMAX_CACHED_COLS) { /* in place but for the widened copy of the statistics */
        softmax_fwd_core_avx2(j, r, j->in, xdt, j->out, ydt, off, ws);
        return;
    }
    float mx = softmax_max_avx512(j->in, xdt, off, cnt, a->scale);
    if (!a->log) { /* the exponentials in y itself when it is f32, else in ws */
        float *e  = ydt == AMPX_F32 ? (float *)j->out + off : ws;
        float sum = softmax_expsum_avx512(j->in, xdt, off, e, cnt, a->scale, mx);
        softmax_mul_avx512(e, j->out, ydt, off, cnt, cols, 1.0f / sum, 0.0f,
                           r + 1 < a->rows ? j->in : NULL, xdt);
    } else {
        float sum = softmax_expsum_avx512(j->in, xdt, off, NULL, cnt, a->scale, mx);
        softmax_out_avx512(j->in, xdt, j->out, ydt, off, cnt, cols, a->scale, mx, sum, 1,
                           r + 1 < a->rows);
    }
}

/* softmax_bwd_row_avx2: the sum in double lanes (a zmm of eight doubles is the AVX2 path's
 * lo and hi), eight elements at a time in the same order. */
CPU_AVX512_FN static void softmax_bwd_row_avx512(const softmax_job *j, uint64_t r) {
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, cnt = (a->causal ? (r % a->seq_q) + (cols - a->seq_q) : cols - 1) + 1;
    ampx_dtype ydt = a->x_or_y.dtype, dydt = a->dy.dtype, odt = a->y_or_dx.dtype;
    uint64_t off = r * cols;
    int log_     = (int)a->log;
    __m512d acc[2]; /* CPU_SETS2: the AVX2 path's lo and hi of a set in one zmm */
    for (int k = 0; k < 2; k++)
        acc[k] = _mm512_setzero_pd();
    CPU_SETS2(cnt, {
        __mmask8 msk = cpu_avx512_mask8(m);
        __m256 vd    = cpu_avx512_ld8(j->dy, dydt, off + c, msk);
        if (log_)
            acc[k] = _mm512_add_pd(acc[k], _mm512_cvtps_pd(vd));
        else
            acc[k] =
                _mm512_fmadd_pd(_mm512_cvtps_pd(vd),
                                _mm512_cvtps_pd(cpu_avx512_ld8(j->in, ydt, off + c, msk)), acc[k]);
    });
    const __m512 s  = _mm512_set1_ps((float)cpu_avx512_sets2_pd(acc));
    const __m512 vs = _mm512_set1_ps(a->scale);
    const int ne = cpu_bf16_ne(), pf = r + 1 < a->rows;
    uint64_t c;
    for (c = 0; c < cnt; c += 16) {
        __mmask16 m = cpu_avx512_mask16(cnt - c);
        __m512 vd   = cpu_avx512_ld16(j->dy, dydt, off + c, m),
               vy   = cpu_avx512_ld16(j->in, ydt, off + c, m);
        __m512 v    = log_ ? _mm512_mul_ps(vs, _mm512_fnmadd_ps(cpu_avx512_exp_ps(vy), s, vd))
                           : _mm512_mul_ps(_mm512_mul_ps(vs, vy), _mm512_sub_ps(vd, s));
        if (pf) { /* the next row's y and dy */
            cpu_prefetch_el(j->in, ydt, off + cols + c);
            cpu_prefetch_el(j->dy, dydt, off + cols + c);
        }
        cpu_avx512_st16_ne(j->out, odt, off + c, v, m, ne);
    }
    for (c = cnt; c < cols; c += 16)
        cpu_avx512_st16_ne(j->out, odt, off + c, _mm512_setzero_ps(), cpu_avx512_mask16(cols - c),
                           ne);
}
#endif

static void softmax_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    const softmax_job *j       = arg;
    const ampx_softmax_args *a = &j->a;
    uint64_t cols = a->cols, rpi = cpu_rows_per_item(cols);
    float *z = j->ctx->thread_ws[tid].p;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++)
            softmax_fwd_row_avx512(j, r, z);
        return;
    }
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++)
            softmax_fwd_row_avx2(j, r, z);
        return;
    }
#endif
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
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++)
            softmax_bwd_row_avx512(j, r);
        return;
    }
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        for (uint64_t r = item * rpi; r < a->rows && r < (item + 1) * rpi; r++)
            softmax_bwd_row_avx2(j, r, y);
        return;
    }
#endif
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

#if CPU_HAVE_AVX2_TABLE
/* The AVX2 path of a valid row: the online statistics (softmax_stats_avx2) give mx and sum
 * in f32, lse = mx + log(sum) in double; dlogits_c = exp(x_c - mx) * (g / sum) in f32, and at
 * the label g (p - 1) with p = exp(x - mx) / sum in double (p - 1 cancels). */
/* A row of up to SOFTMAX_CACHED_COLS logits (dtype xdt) at element off of xb, dlogits (dtype
 * ddt, NULL: loss only) at off of db; ws (f32) holds the exponentials when ddt is not f32. */
CPU_AVX2_FN static void xent_cached_avx2(const xent_job *j, uint64_t r, int32_t label,
                                         const void *xb, ampx_dtype xdt, void *db, ampx_dtype ddt,
                                         uint64_t off, float *ws) {
    uint64_t cols = j->a.cols;
    int bad       = label < 0 || (uint64_t)label >= cols;
    double xl     = bad ? 0.0 : (double)cpu_ld(xb, xdt, off + (uint64_t)label);
    float *e      = !db ? NULL : ddt == AMPX_F32 ? (float *)db + off : ws;
    float mx      = softmax_max_avx2(xb, xdt, off, cols, 1.0f);
    float sum     = softmax_expsum_avx2(xb, xdt, off, e, cols, 1.0f, mx);
    j->terms[r]   = bad ? NAN : (double)mx + log((double)sum) - xl;
    if (!e) return;
    double p_at = bad ? 0.0 : exp(xl - (double)mx) / (double)sum;
    float gs    = (float)(j->g / (double)sum);
    if (ddt == AMPX_F32)
        softmax_mul_avx2(e, cols, gs);
    else
        softmax_mul_out_avx2(e, db, ddt, off, cols, cols, gs);
    if (!bad) cpu_st(db, ddt, off + (uint64_t)label, (float)(j->g * (p_at - 1.0)));
}

CPU_AVX2_FN static void xent_row_avx2(const xent_job *j, uint64_t r, int32_t label, float *ws) {
    const ampx_softmax_xent_args *a = &j->a;
    uint64_t cols                   = a->cols;
    int bad                         = label < 0 || (uint64_t)label >= cols;
    ampx_dtype xdt = a->logits.dtype, ddt = a->dlogits.dtype;
    if (cols <= SOFTMAX_CACHED_COLS) { /* f32 in place; bf16/f16 widened into ws (see above) */
        if (xdt == AMPX_F32 && (!j->dlogits || ddt == AMPX_F32)) {
            xent_cached_avx2(j, r, label, j->logits, xdt, j->dlogits, ddt, r * cols, ws);
            return;
        }
        const float *x = cpu_in_f32(ws, j->logits, xdt, r * cols, cols);
        float *d       = j->dlogits ? cpu_out_f32(ws, j->dlogits, ddt, r * cols) : NULL;
        xent_cached_avx2(j, r, label, x, AMPX_F32, d, AMPX_F32, 0, NULL);
        if (d) cpu_out_f32_done(j->dlogits, ddt, r * cols, d, cols);
        return;
    }
    const float *x = cpu_in_f32(ws, j->logits, a->logits.dtype, r * cols, cols);
    float *d       = j->dlogits ? cpu_out_f32(ws, j->dlogits, a->dlogits.dtype, r * cols) : NULL;
    double xl = bad ? 0.0 : (double)x[label]; /* before d (which may be x's scratch) is written */
    float mx, sum; /* longer rows: the online statistics on a widened copy */
    softmax_stats_avx2(x, cols, 1.0f, &mx, &sum);
    double lse  = (double)mx + log((double)sum);
    j->terms[r] = bad ? NAN : lse - xl;
    if (!d) return;
    double p_at     = bad ? 0.0 : exp(xl - (double)mx) / (double)sum;
    float gs        = (float)(j->g / (double)sum);
    const __m256 vm = _mm256_set1_ps(mx), vg = _mm256_set1_ps(gs);
    for (uint64_t c = 0; c < cols; c += 8) {
        __m256 e = cpu_avx2_exp_neg_ps(_mm256_sub_ps(cpu_avx2_load_n(x + c, cols - c), vm));
        cpu_avx2_store_n(d + c, cols - c, _mm256_mul_ps(e, vg));
    }
    if (!bad) d[label] = (float)(j->g * (p_at - 1.0));
    cpu_out_f32_done(j->dlogits, a->dlogits.dtype, r * cols, d, cols);
}

/* xent_row_avx2 on the AVX-512 paths (rows up to SOFTMAX_CACHED_COLS; longer ones take
 * xent_row_avx2): the logits read where they lie, the exponentials in dlogits itself when
 * it is f32, else in ws, the label's element rounded from the same f32 value. */
CPU_AVX512_FN static void xent_row_avx512(const xent_job *j, uint64_t r, int32_t label, float *ws) {
    const ampx_softmax_xent_args *a = &j->a;
    uint64_t cols = a->cols, off = r * cols;
    if (cols > SOFTMAX_CACHED_COLS) {
        xent_row_avx2(j, r, label, ws);
        return;
    }
    ampx_dtype xdt = a->logits.dtype, ddt = a->dlogits.dtype;
    int bad     = label < 0 || (uint64_t)label >= cols;
    double xl   = bad ? 0.0 : (double)cpu_ld(j->logits, xdt, off + (uint64_t)label);
    float *e    = !j->dlogits ? NULL : ddt == AMPX_F32 ? (float *)j->dlogits + off : ws;
    float mx    = softmax_max_avx512(j->logits, xdt, off, cols, 1.0f);
    float sum   = softmax_expsum_avx512(j->logits, xdt, off, e, cols, 1.0f, mx);
    double lse  = (double)mx + log((double)sum);
    j->terms[r] = bad ? NAN : lse - xl;
    if (!e) return;
    double p_at = bad ? 0.0 : exp(xl - (double)mx) / (double)sum;
    softmax_mul_avx512(e, j->dlogits, ddt, off, cols, cols, (float)(j->g / (double)sum), 0.0f,
                       r + 1 < a->rows ? j->logits : NULL, xdt);
    if (!bad) cpu_st(j->dlogits, ddt, off + (uint64_t)label, (float)(j->g * (p_at - 1.0)));
}
#endif

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
                float *d = cpu_out_f32(x, j->dlogits, a->dlogits.dtype, r * cols);
                memset(d, 0, (size_t)cols * sizeof(float));
                cpu_out_f32_done(j->dlogits, a->dlogits.dtype, r * cols, d, cols);
            }
            continue;
        }
#if CPU_HAVE_AVX2_TABLE
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512 && cols > 0) {
            xent_row_avx512(j, r, label, x);
            continue;
        }
        if (cpu_tls_kern->isa >= CPU_ISA_AVX2 && cols > 0) {
            xent_row_avx2(j, r, label, x);
            continue;
        }
#endif
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
