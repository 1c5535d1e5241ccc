/* kernels.h — the C interface between libampx-cuda.so's host code (plugins/cuda, C) and its
 * device code (kernels/cuda, CUDA C++).
 *
 * The host code validates every argument, resolves tensors to device pointers and fills one
 * of the plain descriptors below; a launcher (cuk_<op>) enqueues the kernels on the given
 * stream and returns the launch status (cudaGetLastError()). Descriptors travel to the
 * device as kernel parameters, copied at launch, so no host memory has to outlive a call and
 * nothing waits for the device. Multi-tensor ops take their list in groups of CUK_MT_MAX
 * tensors per launch (the parameter space is 4 KiB). Temporary device memory a launcher
 * needs is allocated by the caller (stream-ordered) and passed in.
 *
 * Dtypes are ampx_dtype values; every kernel loads any float dtype to f32 exactly and stores
 * with dtype.h's rounding (the same functions, compiled for the device). The fp8 dtypes
 * (e4m3, e5m2) reach only the GEMM (A and B) and the fp8 kernels.
 */
#ifndef AMPX_KERNELS_CUDA_H
#define AMPX_KERNELS_CUDA_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUK_MT_MAX 32 /* tensors per multi-tensor launch */

// ---------------------------------------------------------------------------------------
// GEMM (the native path; cuBLAS is called from plugins/cuda/gemm.c)

typedef struct cuk_gemm {
    const void *a, *b;
    void *c;
    int32_t adt, bdt, cdt;
    int32_t trans_a, trans_b;
    uint64_t m, n, k, batch;
    uint64_t lda, ldb, ldc;
    uint64_t stride_a, stride_b, stride_c; /* elements */
    float alpha, beta;
    /* ABI 1.5 epilogue (each NULL / 0: none): v += bias[j]; pre = v; C = f(v) */
    const void *bias;
    void *pre;
    int32_t biasdt, predt;
    uint32_t act; /* 1 + ampx_act, 0 none */
    /* ABI 1.7 GEMM_FP8 (A and B e4m3/e5m2, widened exactly on load): f32 [1] each on the
     * device, read by the kernel; alpha becomes alpha * (scale_a[0] * scale_b[0]). NULL for
     * GEMM. */
    const float *scale_a, *scale_b;
} cuk_gemm;
/* All batches in one launch, or (sequential != 0) one launch per batch in order, for batches
 * whose C matrices overlap. */
cudaError_t cuk_gemm_native(cudaStream_t s, const cuk_gemm *g, int sequential);
/* GEMM's bias gradient: db[j] = (accumulate ? db[j] : 0) + sum over batches and k of op(B)[p, j]
 * (f32 db), one thread per column. */
cudaError_t cuk_gemm_bias_grad(cudaStream_t s, const cuk_gemm *g, float *db, int accumulate);

// ---------------------------------------------------------------------------------------
// CAST, elementwise, activations

typedef struct cuk_cast {
    const void *src;
    void *dst;
    int32_t sdt, ddt;
    int32_t stochastic;
    uint64_t n, seed;
} cuk_cast;
cudaError_t cuk_cast_run(cudaStream_t s, const cuk_cast *c);

typedef struct cuk_binary {
    const void *a, *b;
    void *y;
    int32_t adt, bdt, ydt;
    int32_t mul;         /* 0: y = alpha a + beta b;  1: y = a * b */
    int32_t broadcast_b; /* b is one row of cols */
    uint64_t n, cols;
    float alpha, beta;
} cuk_binary;
cudaError_t cuk_binary_run(cudaStream_t s, const cuk_binary *b);

typedef struct cuk_scale {
    const void *x;
    void *y;
    int32_t xdt, ydt;
    uint64_t n;
    float alpha;
} cuk_scale;
cudaError_t cuk_scale_run(cudaStream_t s, const cuk_scale *c);

typedef struct cuk_bias_grad {
    const void *dy;
    void *db;
    int32_t dydt, dbdt;
    int32_t accumulate;
    uint64_t rows, cols;
} cuk_bias_grad;
cudaError_t cuk_bias_grad_run(cudaStream_t s, const cuk_bias_grad *b);

typedef struct cuk_act {
    const void *x, *dy;
    void *out;
    int32_t xdt, dydt, odt;
    int32_t act; /* ampx_act */
    int32_t bwd;
    uint64_t n;
} cuk_act;
cudaError_t cuk_act_run(cudaStream_t s, const cuk_act *a);

// ---------------------------------------------------------------------------------------
// Row-wise: softmax, cross-entropy, layer norm, reduce

typedef struct cuk_softmax {
    const void *in, *dy; /* fwd: x;  bwd: y, dy */
    void *out;           /* fwd: y;  bwd: dx */
    int32_t idt, dydt, odt;
    int32_t causal, log, bwd;
    uint64_t rows, cols, seq_q;
    float scale;
} cuk_softmax;
cudaError_t cuk_softmax_run(cudaStream_t s, const cuk_softmax *a);

typedef struct cuk_xent {
    const void *logits;
    const int32_t *labels;
    float *loss;
    void *dlogits;       /* NULL: loss only */
    const void *scalars; /* NULL: no loss-scale factor */
    int32_t ldt, ddt;
    int32_t ignore_index;
    uint64_t rows, cols;
    float grad_scale;
    double *terms;               /* temporary, rows of them */
    unsigned long long *n_valid; /* temporary, one */
} cuk_xent;
cudaError_t cuk_xent_run(cudaStream_t s, const cuk_xent *a);

typedef struct cuk_layernorm {
    const void *x, *dy;
    void *out;
    const float *gamma, *beta, *mean_in, *rstd_in;
    float *mean, *rstd, *dgamma, *dbeta;
    int32_t xdt, dydt, odt;
    int32_t accumulate;
    uint64_t rows, cols;
    float eps;
} cuk_layernorm;
cudaError_t cuk_layernorm_fwd_run(cudaStream_t s, const cuk_layernorm *a);
cudaError_t cuk_layernorm_bwd_run(cudaStream_t s, const cuk_layernorm *a);

typedef struct cuk_batchnorm {
    const void *x, *dy;
    void *out;
    const float *gamma, *beta;
    float *run_mean, *run_var, *mean, *rstd, *dgamma, *dbeta;
    int32_t xdt, dydt, odt;
    int32_t training, accumulate;
    uint64_t outer, channels, inner;
    float eps, momentum;
} cuk_batchnorm;
cudaError_t cuk_batchnorm_fwd_run(cudaStream_t s, const cuk_batchnorm *a);
cudaError_t cuk_batchnorm_bwd_run(cudaStream_t s, const cuk_batchnorm *a);

typedef struct cuk_embedding {
    void *table; /* fwd: table (any float);  bwd: dtable (f32) */
    const int32_t *ids;
    void *y; /* fwd: y;  bwd: dy */
    int32_t tdt, ydt;
    uint64_t n, vocab, dim;
} cuk_embedding;
cudaError_t cuk_embedding_fwd_run(cudaStream_t s, const cuk_embedding *a);
cudaError_t cuk_embedding_bwd_run(cudaStream_t s, const cuk_embedding *a);

typedef struct cuk_reduce {
    const void *x;
    void *y;
    int32_t xdt, ydt;
    int32_t mean;
    uint64_t rows, cols;
} cuk_reduce;
cudaError_t cuk_reduce_run(cudaStream_t s, const cuk_reduce *a);

// ---------------------------------------------------------------------------------------
// Multi-tensor ops

typedef struct cuk_mt_tensor {
    void *p;
    uint64_t n;
    int32_t dt;
} cuk_mt_tensor;

/* One group of at most CUK_MT_MAX tensors; `first` is the index of t[0] in the whole list. */
typedef struct cuk_mt_group {
    uint32_t count, first;
    uint64_t max_n;
    cuk_mt_tensor t[CUK_MT_MAX];
} cuk_mt_group;

/* Blocks per tensor the partial-sum ops use for a list whose longest tensor has max_n
 * elements (at least 1, at most 256); partial arrays hold this many per tensor. */
uint32_t cuk_mt_blocks(uint64_t max_n);

/* SUM_SQUARES: each group writes partial[(first + t) * bx + block]; the finish kernel sums
 * all count * bx partials in order and stores out (+ out when accumulating). */
cudaError_t cuk_sum_squares_part(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                 double *partial);
cudaError_t cuk_sum_squares_finish(cudaStream_t s, const double *partial, uint64_t n_partial,
                                   float *out, int accumulate);

/* ABS_MAX on one group: out[first + t] (cleared to 0 by the caller) gets tensor t's largest
 * |x| (NaN above inf, as the quiet NaN). */
cudaError_t cuk_abs_max_run(cudaStream_t s, const cuk_mt_group *g, uint32_t bx, float *out);

/* UNSCALE_CHECK on one group; flags (already zeroed by the caller) + first is the group's
 * first flag. */
cudaError_t cuk_unscale_check_run(cudaStream_t s, const cuk_mt_group *g, int32_t *flags,
                                  void *scalars);

/* GRAD_STATS partials per group, then per-group finish into stats/counts. */
typedef struct cuk_stats_part {
    double sum, sumsq;
    unsigned long long finite, zeros, tiny, nonfinite, nan;
    float max_abs;
    float pad;
} cuk_stats_part;
/* nans (optional, ABI 1.2): NULL, or one count per tensor of the NaNs among the non-finite */
cudaError_t cuk_grad_stats_run(cudaStream_t s, const cuk_mt_group *g, uint32_t bx, float tiny,
                               cuk_stats_part *partial, float *stats, int32_t *counts,
                               int32_t *nans);

/* AMP_PASS (ABI 1.4) on one group, over one read of each value: GRAD_STATS partials of the
 * values as read (stats_part, or NULL), the unscale and check of UNSCALE_CHECK (flags zeroed
 * by the caller), and SUM_SQUARES partials of the values as stored (sq_part, or NULL), each
 * thread visiting the elements it visits in those ops (the same bx), so that the finishes
 * below give their bits. tiny[i]: the smallest normal of tensor i's target. */
cudaError_t cuk_amp_pass_run(cudaStream_t s, const cuk_mt_group *g, const float *tiny, uint32_t bx,
                             int32_t *flags, void *scalars, cuk_stats_part *stats_part,
                             double *sq_part);
/* GRAD_STATS' finish alone (stats, counts and nans each optional). */
cudaError_t cuk_grad_stats_finish(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                  const cuk_stats_part *partial, float *stats, int32_t *counts,
                                  int32_t *nans);

/* SCALER_UPDATE; growth and backoff are the args' double factors (0: the block's floats). */
cudaError_t cuk_scaler_update_run(cudaStream_t s, void *scalars, double growth, double backoff);

/* Optimizers: one group of tensors, each with its f32 params, gradient, state and copy. */
typedef struct cuk_opt_tensor {
    float *p;
    const void *g;
    float *s1, *s2; /* SGD: momentum buffer (or NULL);  AdamW: m, v */
    void *copy;     /* NULL: no copy */
    uint64_t n;
    int32_t gdt, cdt;
    float wd;
} cuk_opt_tensor;

typedef struct cuk_opt_group {
    uint32_t count, first;
    uint64_t max_n;
    int32_t adamw;
    int32_t nesterov;
    int32_t stochastic_copy;
    int32_t write_lr; /* 1 for the first group: it writes scalars->lr */
    float momentum, dampening;
    float beta1, beta2, eps;
    float max_grad_norm;
    const float *grad_sq_sum; /* NULL: no clipping */
    void *scalars;
    uint64_t seed;
    cuk_opt_tensor t[CUK_MT_MAX / 2];
} cuk_opt_group;
#define CUK_OPT_MAX (CUK_MT_MAX / 2)
cudaError_t cuk_optimizer_run(cudaStream_t s, const cuk_opt_group *g);

// ---------------------------------------------------------------------------------------
// ABI 1.1: DROPOUT, PERMUTE

typedef struct cuk_dropout {
    const void *x;
    void *y;
    int32_t xdt, ydt;
    uint64_t n, seed, offset;
    uint32_t threshold; /* kept: ampx_hash32(seed, offset + i) >= threshold */
    float scale;
} cuk_dropout;
cudaError_t cuk_dropout_run(cudaStream_t s, const cuk_dropout *d);

/* PERMUTE in the loop form of the shared checks: 4 dims (unit dims in front), dim 3 walking y
 * with the smallest stride; strides in elements. */
typedef struct cuk_permute {
    const void *x;
    void *y;
    int32_t xdt, ydt;
    uint64_t n; /* dims[0] * dims[1] * dims[2] * dims[3], > 0 */
    uint64_t dims[4], xs[4], ys[4];
} cuk_permute;
cudaError_t cuk_permute_run(cudaStream_t s, const cuk_permute *p);

/* ATTN_FWD / ATTN_BWD (attention.cu): the checked args of backend.h, as pointers. */
typedef struct cuk_attn {
    const void *q, *k, *v, *o, *d_o;
    void *out, *dq, *dk, *dv; /* out: the forward's o */
    float *lse, *delta;
    int32_t qdt, odt, ddt, gdt; /* q, k, v; o; do; dq, dk, dv */
    uint32_t causal, threshold;
    float scale, dscale;
    uint64_t batch, heads, seq, hd, ld_q, ld_k, ld_v, ld_o, ld_dq, ld_dk, ld_dv, seed, offset;
} cuk_attn;
cudaError_t cuk_attn_fwd_run(cudaStream_t s, const cuk_attn *a);
cudaError_t cuk_attn_bwd_run(cudaStream_t s, const cuk_attn *a);

// ---------------------------------------------------------------------------------------
// ABI 1.6: IM2COL, COL2IM, POOL2D_FWD, POOL2D_BWD (window.cu)

/* The checked ampx_window_args as pointers, with the window counts out_h x out_w; x is x or
 * dx, y is cols, y or dy. n > 0. */
typedef struct cuk_window {
    void *x, *y;
    int32_t *idx; /* POOL2D MAX indices; NULL: not written (forward) */
    int32_t xdt, ydt;
    uint32_t mode, count_pad, accumulate;
    uint32_t kh, kw, sh, sw, ph, pw, dh, dw;
    uint64_t n, channels, height, width, x_batch, out_h, out_w;
} cuk_window;
cudaError_t cuk_im2col_run(cudaStream_t s, const cuk_window *w);
cudaError_t cuk_col2im_run(cudaStream_t s, const cuk_window *w);
cudaError_t cuk_pool2d_fwd_run(cudaStream_t s, const cuk_window *w);
cudaError_t cuk_pool2d_bwd_run(cudaStream_t s, const cuk_window *w);

// ---------------------------------------------------------------------------------------
// ABI 1.7: FP8_QUANTIZE, FP8_SCALE_UPDATE (fp8.cu); GEMM_FP8 is cuk_gemm_native with the
// scale pointers of cuk_gemm

/* FP8_QUANTIZE, checked: exactly one of sdt and ddt e4m3/e5m2, the other f32/bf16/f16; scale
 * f32 [1]; amax (f32 [1], max-accumulated) and counts (i32 [2], added to) optional and only
 * with an fp8 ddt. n > 0. */
typedef struct cuk_fp8_quantize {
    const void *src;
    void *dst;
    const float *scale;
    float *amax;     /* NULL: not raised */
    int32_t *counts; /* NULL: not counted */
    int32_t sdt, ddt;
    int32_t saturate;
    uint64_t n;
} cuk_fp8_quantize;
cudaError_t cuk_fp8_quantize_run(cudaStream_t s, const cuk_fp8_quantize *q);

/* FP8_SCALE_UPDATE, checked: state the f32 FP8 STATE block (2 + history) n, fp8_max f32 [n],
 * scalars the scalars block or NULL (then found_inf is not read). n > 0, history >= 1. */
typedef struct cuk_fp8_scale_update {
    float *state;
    const float *fp8_max;
    const void *scalars;
    uint32_t algo; /* ampx_fp8_amax_algo */
    uint32_t history;
    int32_t margin;
    uint32_t skip_on_found_inf;
    uint64_t n;
} cuk_fp8_scale_update;
cudaError_t cuk_fp8_scale_update_run(cudaStream_t s, const cuk_fp8_scale_update *u);

// ---------------------------------------------------------------------------------------
// Buffers

/* Fills `bytes` bytes at dst with the low pattern_bytes bytes of pattern, repeated
 * (little-endian), whatever dst's alignment. */
cudaError_t cuk_fill_run(cudaStream_t s, void *dst, uint64_t bytes, uint32_t pattern,
                         uint32_t pattern_bytes);

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KERNELS_CUDA_H */
