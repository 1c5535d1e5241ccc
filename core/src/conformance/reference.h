/* reference.h — the double-precision reference implementation behind the conformance suite.
 *
 * Every op of backend.h, written once more in the plainest possible way: dense loops over
 * host arrays of double, no blocking, no threads, no f32 shortcuts. Inputs are the values a
 * plugin saw (already rounded to their dtype and widened exactly to double), so the only
 * difference between a plugin and this file is the plugin's arithmetic. Shares no code with
 * any plugin and does not use dtype.h's conversions: rounding to f32/bf16/f16 and the bit
 * encodings are re-derived here from the formats' definitions.
 *
 * Exact ops (unscale, scaler update, learning-rate schedule) are modelled in f32 exactly as
 * backend.h states them, because there the promise is bit-exactness, not closeness.
 */
#ifndef AMPX_REFERENCE_H
#define AMPX_REFERENCE_H

#include <stdint.h>

#include "ampx/backend.h"

// ---------------------------------------------------------------------------------------
// Formats: rounding, neighbours, encodings

/* Unit roundoff u = 2^-p of a float dtype (p = significand bits incl. the implicit one):
 * f32 2^-24, bf16 2^-8, f16 2^-11. 0 for i32. */
double ref_unit_roundoff(ampx_dtype dt);
/* Largest finite value and smallest positive (subnormal) value of a float dtype. */
double ref_max_finite(ampx_dtype dt);
double ref_min_subnormal(ampx_dtype dt);
/* Round x to the nearest value of dt, ties to even; overflow gives inf; NaN stays NaN.
 * i32: round to nearest integer, saturating. */
double ref_round(ampx_dtype dt, double x);
/* The two values of dt around x (lo <= x <= hi); lo == hi == x when x is representable.
 * Beyond the largest finite value the outer neighbour is inf. */
void ref_neighbours(ampx_dtype dt, double x, double *lo, double *hi);
/* Encode an exactly representable x (or inf / NaN) as dt's bits (low 16 bits for 2-byte
 * dtypes); decode bits to the exact value. */
uint32_t ref_encode(ampx_dtype dt, double x);
double ref_decode(ampx_dtype dt, uint32_t bits);
/* The bits of an exactly representable x (or inf / NaN) in e4m3 or e5m2, and back. */
uint32_t ref_fp8_encode(ampx_dtype dt, double x);
double ref_fp8_decode(ampx_dtype dt, uint32_t code);
/* x (an f32 value, inf or NaN) rounded to e4m3 or e5m2, nearest even (ref_round); a
 * rounding past the largest finite, or an infinity, is an overflow (*overflow 1): the
 * largest finite with x's sign when saturating, else NaN (e4m3) or inf (e5m2). */
double ref_fp8_round(ampx_dtype dt, double x, int saturate, int *overflow);

// ---------------------------------------------------------------------------------------
// Stochastic rounding, exactly as backend.h and dtype.h specify it

/* The random stream: ampx_hash32(seed, index), re-implemented from its definition (seed
 * times the 64-bit golden ratio plus index, folded to 32 bits, then the lowbias32 mixer). */
uint32_t ref_hash32(uint64_t seed, uint64_t index);

/* x (an f32 value, or inf / NaN) rounded to bf16 or f16 stochastically with random word
 * rnd, by the rule of ampx_f32_to_{bf16,f16}_sr but computed from x's two neighbours:
 *   bf16: away from zero iff (rnd mod 2^16) / 2^16 >= 1 - d;
 *   f16:  away from zero iff rnd / 2^32 < d, when the f32 significand loses D <= 31 bits
 *         (|x| >= 2^-32); smaller |x|, f32 subnormals included, gives a signed zero;
 *         |x| >= 65504, inf and NaN round to nearest even;
 * d = (|x| - |truncated|) / ulp, the discarded fraction. f32: x itself. */
double ref_round_sr(ampx_dtype dt, double x, uint32_t rnd);

// ---------------------------------------------------------------------------------------
// GEMM and elementwise

/* sum x_p y_p over p < k in double (partial sums interleaved), *abs_sum the sum of
 * |x_p y_p|: the dot product of ref_gemm and the attention references. */
double ref_dot(const double *x, const double *y, uint64_t k, double *abs_sum);

/* C_b = alpha op(A_b) op(B_b) + beta C_b over the strided layout of backend.h; arrays hold
 * every element of the region (padding included) and only the m x n positions of C change.
 * mag (optional, same layout as C) receives |alpha| sum |a||b| + |beta c|, the scale of the
 * terms, for elementwise error bounds. beta == 0 ignores C's old contents. */
void ref_gemm(int trans_a, int trans_b, uint64_t m, uint64_t n, uint64_t k, uint64_t batch,
              const double *a, uint64_t lda, uint64_t stride_a, const double *b, uint64_t ldb,
              uint64_t stride_b, double alpha, double beta, double *c, uint64_t ldc,
              uint64_t stride_c, double *mag);

void ref_add(uint64_t rows, uint64_t cols, int broadcast_b, double alpha, double beta,
             const double *a, const double *b, double *y, double *mag);
void ref_mul(uint64_t rows, uint64_t cols, int broadcast_b, const double *a, const double *b,
             double *y);
void ref_scale(uint64_t n, double alpha, const double *x, double *y);
/* db = (accumulate ? db : 0) + column sums of dy; mag gets |db0| + sum |dy|. */
/* GEMM's epilogue (ABI 1.5) over c as ref_gemm left it (alpha acc + beta C_old, its term
 * sizes in mag), elements [i, j] of each batch: v = c + bias[j] (bias NULL: none), pre = v
 * (pre NULL: not kept), c = f(v) with act an ampx_act (-1: none); mag grows by |bias| and,
 * with an activation, becomes the bound of the error of f(v) that an error of v within mag
 * allows (|f'| <= 1.2 for these functions) plus |f(v)|. */
void ref_gemm_epilogue(uint64_t m, uint64_t n, uint64_t batch, const double *bias, int act,
                       double *c, uint64_t ldc, uint64_t stride_c, double *pre, double *mag);
/* GEMM's bias gradient: db[j] = (accumulate ? db[j] : 0) + sum over b and p of op(B_b)[p, j];
 * mag[j] the sum of the magnitudes. */
void ref_gemm_bias_grad(int trans_b, uint64_t n, uint64_t k, uint64_t batch, const double *b,
                        uint64_t ldb, uint64_t stride_b, int accumulate, double *db, double *mag);
void ref_bias_grad(uint64_t rows, uint64_t cols, int accumulate, const double *dy, double *db,
                   double *mag);

double ref_act(uint32_t act, double x);       /* f(x) */
double ref_act_deriv(uint32_t act, double x); /* f'(x) */

// ---------------------------------------------------------------------------------------
// Softmax and cross-entropy

/* y = softmax or log_softmax of scale * x per row, causal mask as in backend.h (masked
 * entries give 0, or -inf for log). */
void ref_softmax_fwd(uint64_t rows, uint64_t cols, int causal, uint64_t seq_q, int log_,
                     double scale, const double *x, double *y);
void ref_softmax_bwd(uint64_t rows, uint64_t cols, int causal, uint64_t seq_q, int log_,
                     double scale, const double *y, const double *dy, double *dx);
/* Returns n_valid, or -1 when a non-ignored label is out of range (loss is then NaN and
 * dlogits is left alone). dlogits may be NULL. loss_scale is 1 without a scalars block. */
int64_t ref_softmax_xent(uint64_t rows, uint64_t cols, const int32_t *labels, int32_t ignore_index,
                         double grad_scale, double loss_scale, const double *logits, double *loss,
                         double *dlogits);

// ---------------------------------------------------------------------------------------
// Normalization

/* gamma/beta may be NULL (1 and 0). mean/rstd receive the statistics. */
void ref_layernorm_fwd(uint64_t rows, uint64_t cols, double eps, const double *x,
                       const double *gamma, const double *beta, double *y, double *mean,
                       double *rstd);
/* dgamma/dbeta hold the old values when accumulate. */
void ref_layernorm_bwd(uint64_t rows, uint64_t cols, int accumulate, const double *x,
                       const double *gamma, const double *mean, const double *rstd,
                       const double *dy, double *dx, double *dgamma, double *dbeta);
/* training: mean/rstd written, running stats updated in place; eval: they are read. */
void ref_batchnorm_fwd(uint64_t outer, uint64_t channels, uint64_t inner, int training, double eps,
                       double momentum, const double *x, const double *gamma, const double *beta,
                       double *running_mean, double *running_var, double *mean, double *rstd,
                       double *y);
void ref_batchnorm_bwd(uint64_t outer, uint64_t channels, uint64_t inner, int accumulate,
                       const double *x, const double *gamma, const double *mean, const double *rstd,
                       const double *dy, double *dx, double *dgamma, double *dbeta);

// ---------------------------------------------------------------------------------------
// Embedding, reductions

void ref_embedding_fwd(uint64_t n, uint64_t vocab, uint64_t dim, const double *table,
                       const int32_t *ids, double *y);
/* dtable += scatter of dy; mag gets |dtable0| + sum |dy| per element. */
void ref_embedding_bwd(uint64_t n, uint64_t vocab, uint64_t dim, const double *dy,
                       const int32_t *ids, double *dtable, double *mag);
void ref_reduce(uint64_t rows, uint64_t cols, int mean, const double *x, double *y, double *mag);
double ref_sum_squares(uint64_t n, const double *x);
double ref_abs_max(uint64_t n, const double *x);

// ---------------------------------------------------------------------------------------
// AMP

/* One element of UNSCALE_CHECK, exactly: (float)(1/(double)scale) times g in f32, rounded
 * to dt; mode NONE returns g. */
double ref_unscale(ampx_dtype dt, double g, float scale, int32_t mode);
/* GRAD_STATS of one tensor: stats[4], counts[3]; mag_mean gets mean |g| over finite. */
void ref_grad_stats(uint64_t n, const double *g, ampx_dtype target, double stats[4],
                    int32_t counts[3], double *mag_mean);
/* SCALER_UPDATE on the block, exactly as backend.h's pseudo-code: the scale times the growth
 * or backoff factor (double) in double, rounded to f32. */
void ref_scaler_update(ampx_scalars *s, double growth, double backoff);
/* The learning rate at applied step t, evaluated independently of ampx_scheduled_lr. */
float ref_scheduled_lr(const ampx_scalars *s, int32_t t);

// ---------------------------------------------------------------------------------------
// Optimizers (one tensor; the host loops over the list)

typedef struct ref_sgd_hparams {
    double lr, clip, weight_decay, momentum, dampening;
    int nesterov, first_step;
} ref_sgd_hparams;

/* p, buf updated in place (buf may be NULL when momentum == 0); mag_p / mag_buf receive the
 * scale of the terms for elementwise bounds. */
void ref_sgd(uint64_t n, const ref_sgd_hparams *h, double *p, const double *grad, double *buf,
             double *mag_p, double *mag_buf);

typedef struct ref_adamw_hparams {
    double lr, clip, weight_decay, beta1, beta2, eps;
    int t; /* 1-based step */
} ref_adamw_hparams;

void ref_adamw(uint64_t n, const ref_adamw_hparams *h, double *p, const double *grad, double *m,
               double *v, double *mag_p, double *mag_m);

// ---------------------------------------------------------------------------------------
// ABI 1.1: dropout, permute

/* DROPOUT: element i is kept when ref_hash32(seed, offset + i) >= threshold (keep[i] = 1,
 * y[i] = x[i] * scale, exact in double since both factors have at most 24 significand
 * bits), else dropped (keep[i] = 0, y[i] = +0). keep may be NULL. */
void ref_dropout(uint64_t n, uint32_t threshold, uint64_t seed, uint64_t offset, double scale,
                 const double *x, double *y, uint8_t *keep);
/* PERMUTE's index map: for every index (i_0, ..., i_{ndim-1}) with i_d < dims[d], the y
 * element sum_d i_d y_strides[d] takes the x element sum_d i_d x_strides[d]: y[that] =
 * x[this] (the value; the caller rounds to y's dtype) and src[that] = this. Elements no
 * index reaches are left alone; y or src may be NULL, src must start at -1. Returns 0, or
 * -1 when two indices reach one y element (arguments backend.h does not allow). */
int ref_permute(uint32_t ndim, const uint64_t *dims, const uint64_t *x_strides,
                const uint64_t *y_strides, const double *x, double *y, int64_t *src);

// ---------------------------------------------------------------------------------------
// ABI 1.5: attention

/* The shape and options of ATTN_FWD / ATTN_BWD. Arrays are compact [batch, seq, heads *
 * head_dim] (head h at column h head_dim); lse and delta [batch, heads, seq]. */
typedef struct ref_attn_shape {
    uint64_t batch, heads, seq, head_dim;
    int causal;
    double scale;
    uint32_t threshold; /* 0: no dropout */
    double dropout_scale;
    uint64_t seed, offset;
} ref_attn_shape;

/* keep(b, h, i, j) of backend.h's mask: 1 when ref_hash32(seed, offset + e) >= threshold for
 * e = ((b heads + h) seq + i) seq + j. */
int ref_attn_keep(const ref_attn_shape *s, uint64_t b, uint64_t h, uint64_t i, uint64_t j);
/* The full softmax in double, row by row: o, lse; mag (optional, like o) receives
 * sum_j p'_ij |v_jc| (1 + sum_c |scale q_c k_c| + |lse_i|), the size of o's terms with the
 * error that exp's argument carries into p. */
void ref_attn_fwd(const ref_attn_shape *s, const double *q, const double *k, const double *v,
                  double *o, double *lse, double *mag);
/* The backward as backend.h states it, from the given o (as stored) and lse: delta, dq, dk,
 * dv; mag_dq and mag_dk (optional) receive the size of their terms, sum over the other index
 * of |ds| bounds times |k| or |q|, where ds's bound carries the errors of exp's argument, of
 * dp and of delta (ds = p (dp - delta) cancels when o is close to the v it averages). */
void ref_attn_bwd(const ref_attn_shape *s, const double *q, const double *k, const double *v,
                  const double *o, const double *lse, const double *d_o, double *dq, double *dk,
                  double *dv, double *delta, double *mag_dq, double *mag_dk);

// ---------------------------------------------------------------------------------------
// ABI 1.6: windows (reference_window.c)

/* The geometry of ampx_window_args, out_h and out_w computed again from backend.h's formula
 * by ref_window_init (0 when no window fits). */
typedef struct ref_window {
    uint64_t n, channels, height, width, x_batch, out_h, out_w;
    int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int max, count_pad;
} ref_window;

void ref_window_init(ref_window *w, const ampx_window_args *a);

// ---------------------------------------------------------------------------------------
// ABI 1.7: fp8

/* FP8_QUANTIZE over n values x of src dtype sdt into ddt with factor s (backend.h): to fp8,
 * y = ref_fp8_round(f32(x s)), amax raised to the largest |x| (NaNs ignored), counts[0] +=
 * overflows, counts[1] += non-zero finite x that became zero; from fp8, y = round(f32(x s))
 * to ddt (amax and counts untouched). */
void ref_fp8_quantize(ampx_dtype sdt, ampx_dtype ddt, uint64_t n, const double *x, double s,
                      int saturate, double *y, double *amax, int64_t counts[2]);
/* FP8_SCALE_UPDATE on an FP8 STATE block of n tensors and h_len history rows held as
 * doubles (f32 values), in place: backend.h's formula with every f32 division correctly
 * rounded; skip: only row 0 cleared (a step with found_inf under skip_on_found_inf). */
void ref_fp8_scale_update(uint64_t n, uint32_t h_len, int algo, int margin, int skip,
                          const double *fp8_max, double *state);
/* IM2COL: cols[] (n out_h out_w channels kh kw) = the x value of each tap, 0 for padding;
 * src (optional) the x index or -1. */
void ref_im2col(const ref_window *w, const double *x, double *cols, int64_t *src);
/* COL2IM, scattering every cols element onto its x element: dx (x's layout) += the sum;
 * mag (optional, dx's layout) += the sum of the magnitudes. dx and mag hold the starting
 * values (0, or dx's own for accumulate). */
void ref_col2im(const ref_window *w, const double *cols, double *dx, double *mag);
/* POOL2D_FWD: y and idx (the winning tap's h width + w for max; may be NULL) per window,
 * mag (optional) the sum of |taps| / divisor for avg. */
void ref_pool_fwd(const ref_window *w, const double *x, double *y, int32_t *idx, double *mag);
/* POOL2D_BWD by scattering each dy onto its taps: max onto the tap idx names, avg onto every
 * tap in the plane, divided by the forward's divisor; dx and mag as in ref_col2im. */
void ref_pool_bwd(const ref_window *w, const double *dy, const int32_t *idx, double *dx,
                  double *mag);

#endif /* AMPX_REFERENCE_H */
