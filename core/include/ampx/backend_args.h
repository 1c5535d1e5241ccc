/* ampx/backend_args.h — part of the backend plugin ABI (a plugin includes backend.h, which
 * includes this): the argument struct of every op, each under a heading that gives the op's
 * contract, the dtypes supports() receives in order, and what may be null or in place.
 */
#ifndef AMPX_BACKEND_ARGS_H
#define AMPX_BACKEND_ARGS_H

#include "backend_types.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// Op arguments. Each starts with its size; the host sets size = sizeof(the struct).
// "dtypes" in each heading is the order supports() receives them in.

/* GEMM  dtypes {A, B, C}
 * For b in [0, batch): C_b = alpha * op(A_b) * op(B_b) + beta * C_b, with
 *   op(A_b) m x k (A_b stored k x m when trans_a), op(B_b) k x n (B_b stored n x k when
 *   trans_b), C_b m x n; X_b starts stride_x elements after X_{b-1}. Products accumulate in
 *   f32; alpha and beta apply in f32; C is rounded once. beta == 0: C is not read.
 *   Leading dimensions are in elements: lda >= (trans_a ? m : k), ldb >= (trans_b ? k : n),
 *   ldc >= n. k == 0 gives C = beta * C.
 *
 * The epilogue (ABI 1.5; only when supports(GEMM, {A, B, C}, AMPX_SHAPE_GEMM_EPILOGUE) says
 * so; a host that leaves the fields zero, or an args size that ends before them, asks for
 * none), as cuBLASLt's bias/GELU epilogues and oneDNN's post-ops do it. For each element,
 * with acc the f32 sum of the k products:
 *   v   = alpha * acc + beta * C_old     (f32, as without the epilogue; C_old read first)
 *   v   = v + bias[j]                    (f32; bias given: one row of n, any float dtype,
 *                                         widened exactly, the same row for every batch)
 *   pre_act[i, j] = round(v)             (pre_act given: C's layout, ldc and stride_c, its
 *                                         own dtype; the input ACT_BWD needs later)
 *   C[i, j] = round(f(v))                (act != AMPX_GEMM_ACT_NONE: f the ACT_FWD function
 *                                         of ampx_act act - 1, evaluated in f32 as that
 *                                         backend's ACT_FWD does; else round(v))
 * round() is the one rounding to the destination's dtype (nearest even): nothing is rounded
 * to C's dtype before the bias and the activation. pre_act must not overlap A, B or C.
 * So C equals the separate ops GEMM (f32 C), ADD (broadcast bias), ACT_FWD up to the
 * activation's own f32 evaluation, and exactly when C is f32 on a backend whose ACT_FWD
 * evaluates f the same way on every element.
 *   bias_grad (given: f32 [n]) = (bias_grad_accumulate ? bias_grad : 0) + the sum over b and
 *   p of op(B_b)[p, j]: the column sums of op(B), in f32 (any order of the sum). In the
 *   weight-gradient product dW = X^T dY (A = X with trans_a, B = dY) these are the bias's
 *   gradient sum_r dY[r, j], BIAS_GRAD of dY, read while the product reads dY anyway.
 *   It is independent of bias and act (a backward GEMM gives it alone). bias_grad must not
 *   overlap A, B or C. With m == 0 nothing of C is written but bias_grad still is. */
#define AMPX_GEMM_ACT_NONE 0u
#define AMPX_GEMM_ACT(a) ((uint32_t)(a) + 1u) /* ampx_gemm_args.act of an ampx_act */
typedef struct ampx_gemm_args {
    uint32_t size;
    uint32_t trans_a, trans_b;
    uint64_t m, n, k, batch;
    uint64_t lda, ldb, ldc;
    uint64_t stride_a, stride_b, stride_c;
    float alpha, beta;
    ampx_tensor a, b, c;
    /* ---- ABI 1.5: the epilogue (all optional: zero / buf NULL is none) ---- */
    ampx_tensor bias;              /* (optional) [n], any float dtype, added in f32 */
    uint32_t act;                  /* AMPX_GEMM_ACT_NONE, or AMPX_GEMM_ACT(an ampx_act) */
    uint32_t bias_grad_accumulate; /* 1: bias_grad += instead of = */
    ampx_tensor pre_act;           /* (optional) C's shape and strides, any float dtype */
    ampx_tensor bias_grad;         /* (optional) f32 [n]: column sums of op(B) */
} ampx_gemm_args;

/* The size of ampx_gemm_args before ABI 1.5 (a plugin or host of 1.4 knows this much). */
#define AMPX_GEMM_ARGS_SIZE_V1_4 offsetof(ampx_gemm_args, bias)

typedef enum ampx_rounding {
    AMPX_ROUND_NEAREST_EVEN = 0,
    AMPX_ROUND_STOCHASTIC   = 1, /* narrowing only: ampx_f32_to_{bf16,f16}_sr with
                                    rnd = ampx_hash32(seed, i) for element i */
} ampx_rounding;

/* CAST  dtypes {src, dst}
 * dst[i] = src[i] converted, i in [0, n). Float<->float only. Narrowing rounds per
 * `rounding` (dtype.h has the exact functions); widening is exact. Any pair of float dtypes,
 * including src == dst (a copy). */
typedef struct ampx_cast_args {
    uint32_t size;
    uint32_t rounding; /* ampx_rounding */
    uint64_t n;
    uint64_t seed; /* stochastic rounding only */
    ampx_tensor src, dst;
} ampx_cast_args;

/* ADD  dtypes {a, b, y}
 * y[r,c] = alpha * a[r,c] + beta * b[r', c] over rows x cols, r' = (broadcast_b ? 0 : r):
 * add, axpby and bias-add in one. Computed in f32. In place: y may be a or b exactly. */
typedef struct ampx_add_args {
    uint32_t size;
    uint32_t broadcast_b; /* 1: b has one row of cols elements, added to every row */
    uint64_t rows, cols;
    float alpha, beta;
    ampx_tensor a, b, y;
} ampx_add_args;

/* MUL  dtypes {a, b, y}
 * y[r,c] = a[r,c] * b[r',c], r' as in ADD. Computed in f32. In place as in ADD. */
typedef struct ampx_mul_args {
    uint32_t size;
    uint32_t broadcast_b;
    uint64_t rows, cols;
    ampx_tensor a, b, y;
} ampx_mul_args;

/* SCALE  dtypes {x, y}
 * y[i] = alpha * x[i], i in [0, n), in f32. In place: y may be x. */
typedef struct ampx_scale_args {
    uint32_t size;
    uint64_t n;
    float alpha;
    ampx_tensor x, y;
} ampx_scale_args;

/* BIAS_GRAD  dtypes {dy, db}
 * db[c] = (accumulate ? db[c] : 0) + sum_r dy[r,c], summed in f32 (rows x cols). */
typedef struct ampx_bias_grad_args {
    uint32_t size;
    uint32_t accumulate;
    uint64_t rows, cols;
    ampx_tensor dy, db;
} ampx_bias_grad_args;

typedef enum ampx_act {
    AMPX_ACT_RELU    = 0, /* max(x, 0); derivative 0 at x <= 0 */
    AMPX_ACT_GELU    = 1, /* tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    AMPX_ACT_TANH    = 2,
    AMPX_ACT_SIGMOID = 3, /* 1 / (1 + exp(-x)) */
    AMPX_ACT_SILU    = 4, /* x * sigmoid(x) */
    AMPX_ACT_COUNT
} ampx_act;

/* ACT_FWD  dtypes {x, y}:   y[i] = f(x[i]), computed in f32. In place: y may be x.
 * ACT_BWD  dtypes {x, dy, dx}: dx[i] = dy[i] * f'(x[i]), computed in f32 (x is the forward
 * input). In place: dx may be dy. */
typedef struct ampx_act_args {
    uint32_t size;
    uint32_t act; /* ampx_act */
    uint64_t n;
    ampx_tensor x, dy, y_or_dx; /* fwd: x, (unused), y;  bwd: x, dy, dx */
} ampx_act_args;

/* SOFTMAX_FWD  dtypes {x, y}
 * Over each of `rows` rows of `cols`: z_j = scale * x_j, masked to -inf where causal and
 * j > (r mod seq_q) + (cols - seq_q) (query i of a seq_q x cols score block sees keys up to
 * its own position, aligned at the end); y = softmax(z), or log_softmax(z) when log.
 * Computed in f32 with the row max subtracted. A fully masked row cannot occur (cols >= seq_q).
 * SOFTMAX_BWD  dtypes {y, dy, dx}  (y = the forward output)
 *   softmax:     dx_j = scale * y_j * (dy_j - sum_k dy_k y_k)
 *   log_softmax: dx_j = scale * (dy_j - exp(y_j) * sum_k dy_k)
 *   With causal, the forward's mask applies: sums run over unmasked k only, and dx_j = 0
 *   at masked j (whatever dy holds there). */
typedef struct ampx_softmax_args {
    uint32_t size;
    uint32_t causal; /* 1: causal mask as above */
    uint32_t log;    /* 1: log-softmax */
    uint64_t rows, cols;
    uint64_t seq_q;                  /* rows per score block for the mask; ignored unless causal */
    float scale;                     /* pre-scale of the logits (1/sqrt(d) in attention) */
    ampx_tensor x_or_y, dy, y_or_dx; /* fwd: x, (unused), y;  bwd: y, dy, dx */
} ampx_softmax_args;

/* SOFTMAX_XENT  dtypes {logits, dlogits}  (labels i32, loss f32)
 * Fused softmax cross-entropy over rows x cols logits with integer labels:
 *   valid rows: label != ignore_index (a label outside [0, cols) otherwise is an error the
 *   op reports by writing NaN to loss; it does not read out of bounds);
 *   loss[0] = (1/n_valid) * sum over valid rows of (logsumexp(row) - row[label]);
 *   dlogits[r,j] = g * (softmax(row)_j - [j == label]) for valid rows, 0 for ignored rows,
 *   with g = grad_scale / n_valid, times scalars->scale when `scalars` is given (the loss
 *   gradient seeded with the loss scale). n_valid == 0 gives loss 0 and zero gradients.
 * dlogits may be a null tensor (buf NULL) to compute the loss only. */
typedef struct ampx_softmax_xent_args {
    uint32_t size;
    int32_t ignore_index;
    uint64_t rows, cols;
    float grad_scale;
    ampx_tensor logits, labels, loss, dlogits;
    ampx_tensor scalars; /* (optional) buf NULL: no loss-scale factor */
} ampx_softmax_xent_args;

/* LAYERNORM_FWD  dtypes {x, y}  (gamma, beta, mean, rstd f32)
 * Per row of cols: mean = sum x / cols, var = sum (x - mean)^2 / cols (biased),
 * rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * gamma + beta. Statistics in f32;
 * mean and rstd are saved for the backward. gamma/beta may be null (1 and 0).
 * LAYERNORM_BWD  dtypes {x, dy, dx}  (gamma, mean, rstd, dgamma, dbeta f32)
 *   xhat = (x - mean) * rstd, g = dy * gamma,
 *   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
 *   dgamma (+)= sum_r dy * xhat, dbeta (+)= sum_r dy (accumulate selects +=). */
typedef struct ampx_layernorm_args {
    uint32_t size;
    uint32_t accumulate; /* bwd: dgamma/dbeta += instead of = */
    uint64_t rows, cols;
    float eps;
    ampx_tensor x, gamma, beta, mean, rstd;
    ampx_tensor dy, y_or_dx, dgamma, dbeta; /* fwd: (unused), y, (unused), (unused) */
} ampx_layernorm_args;

/* BATCHNORM_FWD  dtypes {x, y}  (gamma, beta, running_mean, running_var, mean, rstd f32)
 * x is [outer, channels, inner]; statistics per channel over outer * inner = N values.
 * training: mean, var (biased) from the batch; rstd = 1/sqrt(var + eps); saved;
 *   running_mean = (1 - momentum) running_mean + momentum mean,
 *   running_var  = (1 - momentum) running_var + momentum var * N / (N - 1)
 *   (with N == 1 the biased variance, 0, is used).
 * eval: mean = running_mean, rstd = 1/sqrt(running_var + eps); nothing is written but y.
 * y = (x - mean) * rstd * gamma + beta (gamma/beta may be null: 1 and 0).
 * BATCHNORM_BWD  dtypes {x, dy, dx}  (training-mode statistics)
 *   xhat = (x - mean) rstd, dx = gamma rstd (dy - mean_N(dy) - xhat mean_N(dy xhat)),
 *   dgamma (+)= sum_N dy xhat, dbeta (+)= sum_N dy. */
typedef struct ampx_batchnorm_args {
    uint32_t size;
    uint32_t training;
    uint32_t accumulate;
    uint64_t outer, channels, inner;
    float eps, momentum;
    ampx_tensor x, gamma, beta, running_mean, running_var, mean, rstd;
    ampx_tensor dy, y_or_dx, dgamma, dbeta;
} ampx_batchnorm_args;

/* EMBEDDING_FWD  dtypes {table, y}  (ids i32)
 * y[i, :] = table[ids[i], :] for i in [0, n), table vocab x dim. An id outside
 * [0, vocab) gives a zero row.
 * EMBEDDING_BWD  dtypes {dy, dtable f32}
 * dtable[ids[i], :] += dy[i, :] in f32 (dtable must be f32; out-of-range ids are skipped).
 * Not zeroed first: the host fills dtable with 0 when it does not accumulate. */
typedef struct ampx_embedding_args {
    uint32_t size;
    uint64_t n, vocab, dim;
    ampx_tensor table_or_dtable, ids, y_or_dy;
} ampx_embedding_args;

typedef enum ampx_reduce_mode { AMPX_REDUCE_SUM = 0, AMPX_REDUCE_MEAN = 1 } ampx_reduce_mode;

/* REDUCE  dtypes {x, y}
 * y[r] = sum (or mean) of x[r, 0..cols) for r in [0, rows), in f32. A global reduction is
 * rows = 1. */
typedef struct ampx_reduce_args {
    uint32_t size;
    uint32_t mode; /* ampx_reduce_mode */
    uint64_t rows, cols;
    ampx_tensor x, y;
} ampx_reduce_args;

/* A list of tensors for the multi-tensor ops: tensor i has n_elems[i] elements. */
typedef struct ampx_tensor_list {
    uint32_t count;
    const ampx_tensor *tensors;
    const uint64_t *n_elems;
} ampx_tensor_list;

/* SUM_SQUARES  dtypes {x} (each distinct dtype in the list is checked)
 * out[0] (f32) = (accumulate ? out[0] : 0) + sum over all tensors of sum x^2, in f32 or wider.
 * Non-finite inputs give a non-finite result. */
typedef struct ampx_sum_squares_args {
    uint32_t size;
    uint32_t accumulate;
    ampx_tensor_list x;
    ampx_tensor out;
} ampx_sum_squares_args;

/* UNSCALE_CHECK  dtypes {g}
 * The fused pass of dynamic loss scaling, in place on every gradient tensor:
 *   inv_scale = (float)(1.0 / (double)scalars->scale);   (computed in double, as PyTorch)
 *   g[i] = round(g[i] * inv_scale)  (product in f32);
 *   flags[flag_base + t] = 1 if any result of tensor t is non-finite, else 0 (i32);
 *   scalars->found_inf |= OR of those flags.
 * When scalars->mode is AMPX_SCALER_NONE the multiply is skipped (a check only). */
typedef struct ampx_unscale_check_args {
    uint32_t size;
    uint32_t flag_base;
    ampx_tensor_list grads;
    ampx_tensor flags; /* i32, at least flag_base + grads.count elements */
    ampx_tensor scalars;
} ampx_unscale_check_args;

/* GRAD_STATS  dtypes {g}
 * Per tensor t, over its values as stored:
 *   stats[4t + 0] = max |g| over finite values (0 if none)
 *   stats[4t + 1] = mean of finite values (0 if none)
 *   stats[4t + 2] = root mean square of finite values (0 if none)
 *   stats[4t + 3] = number of elements, as f32
 *   counts[3t + 0] = count of exact zeros
 *   counts[3t + 1] = count of finite non-zero values with |g| < smallest normal of
 *                    `target` (2^-126 for f32 and bf16, 2^-14 for f16)
 *   counts[3t + 2] = count of non-finite values
 * stats f32, counts i32, sums in f32 or wider. */
typedef struct ampx_grad_stats_args {
    uint32_t size;
    ampx_dtype target;
    ampx_tensor_list grads;
    ampx_tensor stats;  /* f32, 4 per tensor */
    ampx_tensor counts; /* i32, 3 per tensor */
    /* ABI 1.2: (optional) i32, 1 per tensor: how many of the non-finite values are NaN (the
     * rest are inf). buf NULL: not written. A plugin that does not count NaNs (and any of an
     * older minor) leaves it as it was: the host fills it with -1 first to tell. */
    ampx_tensor nan_counts;
} ampx_grad_stats_args;

/* SCALER_UPDATE  (no dtypes: pass n_dtypes 0)
 * Consumes found_inf and advances the scaler, exactly (on the block, with G and B the growth
 * and backoff factors below):
 *   last_found_inf = found_inf; found_inf = 0;
 *   if last_found_inf:
 *     skipped_steps++, consecutive_skips++, growth_tracker = 0;
 *     if mode == DYNAMIC:
 *       hysteresis_left--;
 *       if hysteresis_left <= 0:
 *         scale = max(scale * B, min_scale); hysteresis_left = hysteresis;
 *       if scale <= min_scale and on_min_scale_error: stop_reason |= AMPX_STOP_MIN_SCALE;
 *     if max_consecutive_skips > 0 and consecutive_skips > max_consecutive_skips:
 *       stop_reason |= AMPX_STOP_CONSECUTIVE_SKIPS;
 *   else:
 *     applied_steps++, consecutive_skips = 0;
 *     if mode == DYNAMIC:
 *       if consecutive_hysteresis: hysteresis_left = hysteresis;
 *       growth_tracker++;
 *       if growth_tracker >= growth_interval:
 *         next = scale * G;
 *         if next is finite and next <= max_scale: scale = next;
 *         growth_tracker = 0;
 * scale * G and scale * B are PyTorch's _amp_update_scale arithmetic: the f32 scale times a
 * double factor, computed in double and rounded to f32 once, (float)((double)scale * G).
 * G is growth_factor_f64 when it is > 0, else the block's (float) growth_factor; B likewise.
 * A factor that is not exact in f32 (1.1, 0.7) therefore travels in the args: rounding it to
 * f32 first gives another sequence of scales. The two doubles were appended within ABI 1.1
 * (rule 2): a host that predates them passes a smaller size and the block's floats apply; a
 * plugin that predates them ignores them and multiplies by the floats in f32.
 * With hysteresis 1, min_scale 0 and max_scale inf this is PyTorch GradScaler.update(). */
typedef struct ampx_scaler_update_args {
    uint32_t size;
    ampx_tensor scalars;
    double growth_factor_f64;  /* (optional) 0: the block's growth_factor */
    double backoff_factor_f64; /* (optional) 0: the block's backoff_factor */
} ampx_scaler_update_args;

/* The learning rate at applied step t (0-based), as every backend must compute it. */
static inline float ampx_scheduled_lr(const ampx_scalars *s, int32_t t) {
    if (s->lr_schedule != AMPX_LR_WARMUP_COSINE) return s->lr_base;
    if (t < s->warmup_steps) return s->lr_base * (float)(t + 1) / (float)s->warmup_steps;
    int32_t span = s->decay_steps - s->warmup_steps;
    double p     = span > 0 ? (double)(t - s->warmup_steps) / (double)span : 1.0;
    if (p > 1.0) p = 1.0;
    double c = 0.5 * (1.0 + __builtin_cos(3.14159265358979323846 * p));
    return (float)(s->lr_min + (s->lr_base - s->lr_min) * c);
}

/* SGD  dtypes {grad}  (params, momentum f32; copies bf16 or f16)
 * Multi-tensor SGD with momentum, PyTorch's formulation, skipped entirely (every tensor
 * bitwise unchanged) when scalars->found_inf != 0. Otherwise, with
 *   lr = ampx_scheduled_lr(scalars, scalars->applied_steps), written to scalars->lr,
 *   c  = clip coefficient: min(1, max_grad_norm / (sqrt(*grad_sq_sum) + 1e-6)) when
 *        max_grad_norm > 0 and grad_sq_sum is given, else 1,
 * for each element: g = c * grad + weight_decay * p;
 *   if momentum != 0: buf = (applied_steps == 0 ? g : momentum * buf + (1 - dampening) g);
 *                     g = nesterov ? g + momentum * buf : buf;
 *   p -= lr * g;  copy = round(p) to the copy's dtype (when copies is given): to nearest
 *   even, or with stochastic_copy ampx_f32_to_{bf16,f16}_sr with
 *   rnd = ampx_hash32(seed + t, i) for element i of tensor t.
 * A skipped step writes nothing at all, the scalars block included.
 * weight_decay per tensor from wd[t] when wd is given, else weight_decay. */
typedef struct ampx_sgd_args {
    uint32_t size;
    uint32_t nesterov;
    float momentum, dampening, weight_decay;
    float max_grad_norm;
    const float *wd;                 /* (optional) per-tensor weight decay, host memory */
    ampx_tensor_list params;         /* f32 master weights, updated in place */
    const ampx_tensor *grads;        /* params.count of them, n_elems as params */
    const ampx_tensor *momentum_buf; /* f32; may be NULL when momentum == 0 */
    const ampx_tensor *copies;       /* (optional) low-precision working copies; an entry with
                                        buf NULL has no copy */
    ampx_tensor grad_sq_sum;         /* (optional) f32 [1] from SUM_SQUARES */
    ampx_tensor scalars;
    uint32_t stochastic_copy; /* 1: copies use stochastic rounding, seed below */
    uint64_t seed;
} ampx_sgd_args;

/* ADAMW  dtypes {grad}  (params, m, v f32; copies bf16 or f16)
 * Multi-tensor AdamW (decoupled weight decay, PyTorch's formulation), skipped entirely when
 * scalars->found_inf != 0. Otherwise with lr and c as in SGD and t = applied_steps + 1:
 *   g = c * grad; p *= (1 - lr * weight_decay);
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
 *   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps);
 *   copy = round(p) as in SGD. */
typedef struct ampx_adamw_args {
    uint32_t size;
    float beta1, beta2, eps, weight_decay;
    float max_grad_norm;
    const float *wd;
    ampx_tensor_list params;
    const ampx_tensor *grads;
    const ampx_tensor *m;
    const ampx_tensor *v;
    const ampx_tensor *copies;
    ampx_tensor grad_sq_sum;
    ampx_tensor scalars;
    uint32_t stochastic_copy;
    uint64_t seed;
} ampx_adamw_args;

// ---------------------------------------------------------------------------------------
// ABI 1.1

/* DROPOUT  dtypes {x, y}
 * Inverted dropout with a counter-based mask, the same bits on every backend:
 *   keep(i) = ampx_hash32(seed, offset + i) >= threshold   (dtype.h has ampx_hash32)
 *   y[i]    = keep(i) ? x[i] * scale : 0,  i in [0, n), the product in f32, rounded once.
 * The host chooses threshold = rate * 2^32 (rounded down) and scale = 1 / (1 - rate); the
 * mask is a function of (seed, offset + i) alone, so the backward is the same op on dy with
 * the same seed and offset, and a tensor split in pieces gets the mask of the whole when each
 * piece passes its element offset. threshold 0 keeps everything (y = scale * x).
 * In place: y may be x. */
typedef struct ampx_dropout_args {
    uint32_t size;
    uint32_t threshold; /* an element is kept when its hash is >= threshold */
    uint64_t n;
    uint64_t seed;   /* the mask's key: the host derives it from run seed, step and node */
    uint64_t offset; /* element index of x[0] in the mask's counter space */
    float scale;     /* multiplier of the kept elements, 1 / (1 - rate) */
    ampx_tensor x, y;
} ampx_dropout_args;

#define AMPX_PERMUTE_MAX_DIMS 4

/* PERMUTE  dtypes {x, y}
 * A strided N-D copy with dtype conversion (transposes, head split and merge): for every
 * index (i_0, ..., i_{ndim-1}) with i_d < dims[d],
 *   y[sum_d i_d * y_strides[d]] = convert(x[sum_d i_d * x_strides[d]])
 * Strides are in elements and may be 0 on x (a broadcast read); the y strides must map
 * distinct indices to distinct elements. Conversion as CAST with round to nearest even;
 * src == dst dtype is an exact copy. Elements of y that no index reaches are not written.
 * ndim in [1, AMPX_PERMUTE_MAX_DIMS]; dims of 0 give an empty copy. x and y must not
 * overlap. */
typedef struct ampx_permute_args {
    uint32_t size;
    uint32_t ndim;
    uint64_t dims[AMPX_PERMUTE_MAX_DIMS];
    uint64_t x_strides[AMPX_PERMUTE_MAX_DIMS];
    uint64_t y_strides[AMPX_PERMUTE_MAX_DIMS];
    ampx_tensor x, y;
} ampx_permute_args;

// ---------------------------------------------------------------------------------------
// ABI 1.4

/* AMP_PASS  dtypes {g}
 * UNSCALE_CHECK, GRAD_STATS and SUM_SQUARES over one read of each gradient: what a step of
 * mixed-precision training does with its gradients between the backward and the optimizer,
 * enqueued as one op with no host wait. For tensor t of grads, in place:
 *   inv_scale = (float)(1.0 / (double)scalars->scale), g[i] = round(g[i] * inv_scale) and
 *   flags[flag_base + t], scalars->found_inf |= ... exactly as UNSCALE_CHECK (the multiply
 *   skipped in AMPX_SCALER_NONE mode);
 *   sq_sum (optional, buf NULL: not computed): (sq_accumulate ? sq_sum[0] : 0) + the sum
 *     over all tensors of the squares of the values as stored after the unscale, exactly as
 *     SUM_SQUARES over grads run after UNSCALE_CHECK (the clipping norm's square);
 *   stats, counts, nan_counts (optional, each buf NULL: not computed): GRAD_STATS of the
 *     values as read, before the unscale (the monitor's figures of the scaled gradients,
 *     which the host divides by the scale it copied), with per-tensor targets: the smallest
 *     normal of targets[t] (host memory, grads.count of them; NULL: `target` for every
 *     tensor) bounds the underflow count of tensor t.
 * A backend's AMP_PASS gives the same bits as its three ops run in that order (grad_stats,
 * unscale_check, sum_squares), so a step trains identically with or without it. */
typedef struct ampx_amp_pass_args {
    uint32_t size;
    uint32_t flag_base;
    ampx_tensor_list grads;
    ampx_tensor flags;   /* i32, at least flag_base + grads.count elements */
    ampx_tensor scalars; /* the scalars block: scale read, found_inf ORed */
    /* sum of squares for clipping */
    uint32_t sq_accumulate; /* 1: sq_sum += instead of = */
    ampx_tensor sq_sum;     /* (optional) f32 [1] */
    /* gradient statistics, as GRAD_STATS: stats f32 4 per tensor, counts i32 3 per tensor,
     * nan_counts i32 1 per tensor; each optional on its own */
    ampx_dtype target;         /* underflow threshold when targets is NULL */
    const ampx_dtype *targets; /* (optional) per tensor, host memory */
    ampx_tensor stats, counts, nan_counts;
} ampx_amp_pass_args;

// ---------------------------------------------------------------------------------------
// ABI 1.5

/* ATTN_FWD  dtypes {q, o}  (k and v of q's dtype; lse f32)
 * Multi-head scaled dot-product attention in one op, reading q, k, v where a fused QKV
 * projection writes them and writing the context where the output projection reads it:
 * for batch b < batch, head h < heads, positions i, j < seq and feature c < head_dim,
 *   q(b,h,i,c) = q[(b seq + i) ld_q + h head_dim + c]      (k, v, o alike with ld_k, ld_v,
 *                                                            ld_o; the [B, T, 3D] layout of a
 *                                                            fused projection: ld 3D, k and v
 *                                                            tensors at element offsets D, 2D)
 *   s_ij  = scale * sum_c q(i,c) k(j,c), masked (-inf) where causal and j > i,
 *   lse_i = log sum_j exp(s_ij)       (f32 [batch, heads, seq], saved for the backward),
 *   p_ij  = exp(s_ij - lse_i),
 *   p'_ij = keep(e) ? p_ij * dropout_scale : 0,  keep(e) = ampx_hash32(seed, offset + e)
 *           >= dropout_threshold, e = ((b heads + h) seq + i) seq + j: the element index of
 *           the [batch, heads, seq, seq] probabilities, so the mask is DROPOUT's on the
 *           probabilities tensor of the unfused composite (threshold 0: no dropout),
 *   o(i,c) = sum_j p'_ij v(j,c), rounded once to o's dtype.
 * Products and sums in f32; the softmax is taken online over key tiles in f32 (running max
 * and sum), so no seq x seq tensor exists. With bf16 q, k, v (and do) a plugin may round
 * p'_ij to bf16 before the product with v, and p'_ij and ds_ij to bf16 before theirs in
 * ATTN_BWD, as a composite attention of bf16 tensors rounds its probabilities and score
 * gradients (lse, the sums and the accumulators stay f32); conformance allows u(bf16) of
 * each such term. seq, heads, head_dim >= 1 (batch 0 does nothing);
 * ld_x >= heads head_dim for every tensor. o must not overlap q, k or v.
 *   q_first <= seq (the field was reserved, 0, before): the rows i < q_first of o and lse
 *   may be left as they are, an incremental forward's earlier positions, which an earlier
 *   call over the same rows of q, k and v wrote (with causal, rows i read only keys j <= i,
 *   so a call that ends at a shorter seq computes them alike). A plugin that ignores the
 *   field computes those rows again and writes the same values. ATTN_BWD ignores it.
 * ATTN_BWD  dtypes {q, o, do, dq}  (k, v of q's dtype; dk, dv of dq's; lse, delta f32)
 *   Given the forward's q, k, v, o, lse and do (ld_o), with p and p' recomputed tile by tile
 *   from lse and the same mask:
 *   delta_i = sum_c do(i,c) o(i,c)       (written to delta, f32 [batch, heads, seq]),
 *   dv(j,c) = sum_i p'_ij do(i,c),
 *   dp_ij   = keep ? dropout_scale sum_c do(i,c) v(j,c) : 0,
 *   ds_ij   = p_ij (dp_ij - delta_i),
 *   dq(i,c) = scale sum_j ds_ij k(j,c),  dk(j,c) = scale sum_i ds_ij q(i,c),
 *   each written (not accumulated) with ld_dq, ld_dk, ld_dv: dq, dk, dv may be the three
 *   parts of one [B, T, 3D] gradient. Outputs must not overlap the inputs or each other. */
typedef struct ampx_attn_args {
    uint32_t size;
    uint32_t causal; /* 1: query i sees keys j <= i */
    uint64_t batch, heads, seq, head_dim;
    float scale;                        /* of the logits, 1 / sqrt(head_dim) in attention */
    uint32_t dropout_threshold;         /* keep when the hash is >= it; 0: no dropout */
    float dropout_scale;                /* multiplier of the kept probabilities, 1 / (1 - rate) */
    uint32_t q_first;                   /* fwd: rows before it may be left as they are (0: none) */
    uint64_t seed, offset;              /* the mask's key and counter of element 0 */
    uint64_t ld_q, ld_k, ld_v, ld_o;    /* elements between positions t and t + 1 */
    ampx_tensor q, k, v, o, lse;        /* fwd: o, lse written; bwd: read */
    ampx_tensor d_o, dq, dk, dv, delta; /* bwd only: do (ld_o) read; dq, dk, dv, delta written */
    uint64_t ld_dq, ld_dk, ld_dv;
} ampx_attn_args;

// ---------------------------------------------------------------------------------------
// ABI 1.6

/* The window geometry of IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD. x holds n images of
 * `channels` row-major planes of height x width, an image's planes contiguous and images
 * x_batch elements apart (x_batch >= channels height width: a larger one reads a group of
 * the channels of wider images). Windows of kh x kw taps, dilation dil_h, dil_w, are placed
 * every stride_h, stride_w rows and columns starting at -pad_h, -pad_w:
 *   out_h = (height + 2 pad_h - dil_h (kh - 1) - 1) / stride_h + 1, likewise out_w;
 *   tap (p, q) of window (i, j) lies at row h = i stride_h - pad_h + p dil_h and column
 *   w = j stride_w - pad_w + q dil_w of its plane; a tap outside the plane is padding.
 * channels, height, width, kh, kw, stride_h, stride_w, dil_h, dil_w >= 1; out_h, out_w >= 1
 * (the padded plane holds one window); n == 0 does nothing. The outputs must not overlap
 * the inputs. Element (b, c, h, w) of x (or dx) is x[b x_batch + (c height + h) width + w].
 *
 * IM2COL  dtypes {x, cols}
 *   cols is row-major [n, out_h, out_w, channels, kh, kw]: one row per window, so that a
 *   convolution is the GEMM cols W (W [channels kh kw, filters]; with G groups, group g's
 *   channels are columns [g channels kh kw / G, (g + 1) channels kh kw / G) of each row):
 *     cols[((b out_h + i) out_w + j) channels kh kw + (c kh + p) kw + q] = x(b, c, h, w)
 *   converted as CAST (a copy when the dtypes match), 0 for a padding tap.
 * COL2IM  dtypes {cols, dx}
 *   The adjoint of IM2COL, for its backward: dx(b, c, h, w) = (accumulate ? dx(b, c, h, w) :
 *   0) + the sum, in f32, of the cols elements IM2COL fills from (b, c, h, w) (none: 0),
 *   rounded once to dx's dtype. Every dx element of the n images' channels x height x width
 *   is written; elements between them (x_batch larger) are not touched.
 * POOL2D_FWD  dtypes {x, y}
 *   y row-major [n, channels, out_h, out_w]; dil_h = dil_w = 1, pad_h < kh, pad_w < kw (so
 *   every window has a tap in its plane). mode AMPX_POOL_MAX: y is the largest tap in the
 *   plane (padding never wins), NaN when a tap is NaN; indices (i32, y's layout; optional,
 *   buf NULL: not written) is h width + w of that tap: the first NaN tap, else the first
 *   largest in row-major (p, q) order. mode AMPX_POOL_AVG: the sum in f32 of the taps in the
 *   plane divided by kh kw (count_pad 1) or by the number of those taps (count_pad 0),
 *   rounded once to y's dtype; indices is not read.
 * POOL2D_BWD  dtypes {dy, dx}
 *   dy as y. dx(b, c, h, w) = (accumulate ? dx(b, c, h, w) : 0) + the sum in f32 over the
 *   windows (i, j) of plane (b, c) of: MAX, dy(b, c, i, j) where indices(b, c, i, j) ==
 *   h width + w (indices as the forward wrote them); AVG, dy(b, c, i, j) / the forward's
 *   divisor where (h, w) is a tap of window (i, j); rounded once to dx's dtype. Every dx
 *   element of the planes is written, as in COL2IM. */
typedef enum ampx_pool_mode { AMPX_POOL_MAX = 0, AMPX_POOL_AVG = 1 } ampx_pool_mode;

typedef struct ampx_window_args {
    uint32_t size;
    uint32_t mode; /* POOL2D: ampx_pool_mode */
    uint64_t n, channels, height, width;
    uint64_t x_batch; /* elements between images of x (dx) */
    uint32_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    uint32_t count_pad;  /* POOL2D AVG: 1 divide by kh kw, 0 by the taps inside the plane */
    uint32_t accumulate; /* COL2IM, POOL2D_BWD: 1 add to dx */
    ampx_tensor x;       /* IM2COL, POOL2D_FWD: read; COL2IM, POOL2D_BWD: dx, written */
    ampx_tensor y;       /* IM2COL: cols, written; COL2IM: cols, read; POOL2D: y or dy */
    ampx_tensor indices; /* POOL2D MAX: i32 [n, channels, out_h, out_w] */
} ampx_window_args;

// ---------------------------------------------------------------------------------------
// ABI 1.7: fp8 with per-tensor delayed scaling
//
// An fp8 tensor (e4m3 or e5m2, dtype.h) holds q = fp8(x * scale): its values times scale_inv
// = 1 / scale are the real ones. Each such tensor has a scale, a scale_inv and an amax
// history on the device, in an FP8 STATE block of f32 for n tensors and a history of H:
//   scale[n], scale_inv[n], history[H][n]    (element i of row h at (2 + h) n + i)
// Row 0 of the history is the current step's: FP8_QUANTIZE raises it to the amax of each
// tensor it quantizes, and FP8_SCALE_UPDATE turns the history into new scales, rolls it and
// clears row 0, as Transformer Engine's DelayedScaling recipe does.

/* FP8_QUANTIZE  dtypes {src, dst}; exactly one of them e4m3 or e5m2, the other f32, bf16 or f16
 * To fp8 (dst fp8): for i in [0, n), with s = scale[0] (f32):
 *   dst[i] = fp8(f32(src[i] * s)), rounded to nearest even and saturating or not (dtype.h's
 *            ampx_f32_to_fp8; the product rounded to f32 first); saturate 2 saturates as 1
 *            except where src[i] itself is infinite: that stays non-finite (e5m2 inf with
 *            its sign, e4m3 NaN), so an overflow upstream still reaches the loss scaler's
 *            check through the products that read the codes;
 *   amax (optional, f32 [1]) = max(amax, max_i |src[i]|): of the input before scaling,
 *            NaNs ignored (fmaxf), infinities kept; accumulating, so a tensor quantized in
 *            parts (micro-batches) or several tensors share one slot;
 *   counts (optional, i32 [2]) += {elements that overflowed (finite or infinite, not NaN:
 *            their rounding lay past the largest finite), elements flushed to zero (src
 *            non-zero and finite, dst a zero)}.
 * From fp8 (src fp8): dst[i] = round(f32(fp8 value of src[i]) * s), to dst's dtype (nearest
 *   even); amax and counts must be null; saturate is ignored.
 * scale: f32 [1] (a slot of an FP8 STATE block: scale[i] to fp8, scale_inv[i] from it).
 * n == 0 does nothing. dst must not overlap src, scale, amax or counts. */
typedef struct ampx_fp8_quantize_args {
    uint32_t size;
    uint32_t saturate; /* 1: overflow becomes the largest finite; 0: NaN (e4m3) or inf (e5m2);
                          2: as 1, an infinite src as 0 */
    uint64_t n;
    ampx_tensor src, dst;
    ampx_tensor scale;  /* f32 [1] */
    ampx_tensor amax;   /* (optional) f32 [1], max-accumulated; to fp8 only */
    ampx_tensor counts; /* (optional) i32 [2], accumulated; to fp8 only */
} ampx_fp8_quantize_args;

/* GEMM_FP8  dtypes {A, B, C}; A and B e4m3 or e5m2 (any mix), C f32, bf16 or f16
 * The GEMM of ampx_gemm_args `gemm` (every field as GEMM says, the epilogue's bias, act and
 * pre_act included when supports(GEMM_FP8, {A, B, C}, AMPX_SHAPE_GEMM_EPILOGUE) says so; its
 * bias_grad must be null: a bias's gradient is summed from the unquantized gradient), with the fp8
 * operands' values widened exactly and their dequantization factors: with acc the f32 sum of the k
 * products of the codes' values,
 *   v = (alpha * (a_scale_inv[0] * b_scale_inv[0])) * acc + beta * C_old      (f32)
 * then the epilogue and the one rounding to C as GEMM. a_scale_inv and b_scale_inv are f32
 * [1] on the device (scale_inv slots of an FP8 STATE block), read when the op runs. */
typedef struct ampx_gemm_fp8_args {
    uint32_t size;
    uint32_t reserved;                    /* 0 */
    ampx_tensor a_scale_inv, b_scale_inv; /* f32 [1] each */
    ampx_gemm_args gemm; /* last, so that it may grow: A, B fp8; its own size field is not
                            read (the outer size bounds it) */
} ampx_gemm_fp8_args;

typedef enum ampx_fp8_amax_algo {
    AMPX_FP8_AMAX_MAX         = 0, /* the largest of the H history rows */
    AMPX_FP8_AMAX_MOST_RECENT = 1, /* row 0, this step's */
} ampx_fp8_amax_algo;

/* FP8_SCALE_UPDATE  (no dtypes: pass n_dtypes 0)
 * Once per step, for each tensor i in [0, n) of the FP8 STATE block `state` (f32, (2 + H) n):
 *   amax  = algo MAX: the largest of history[h][i], h in [0, H), NaN if one is NaN (as
 *           torch.max); MOST_RECENT: history[0][i];
 *   sf    = (fp8_max[i] / amax) / 2^margin          (f32 divisions, in that order)
 *   s     = amax > 0 and amax finite ? sf : scale[i]
 *   scale[i] = s == inf ? FLT_MAX : s;  scale_inv[i] = 1 / scale[i]   (f32 division)
 *   the history rolled: history'[h] = history[h + 1] for h < H - 1, history'[H - 1] =
 *   history[0], then history'[0] = 0; this is Transformer Engine's _default_sf_compute and
 *   _update_amax_history, bit for bit.
 * skip_on_found_inf 1 (scalars given): when scalars.found_inf is non-zero (the step
 *   overflowed and its optimizer update was skipped; SCALER_UPDATE has not yet consumed the
 *   flag) row 0 is cleared and nothing else changes: a skipped step's amaxes, often
 *   infinite, neither enter the history nor move a scale. (Transformer Engine has no loss
 *   scaler and records every step.)
 * fp8_max: f32 [n], the largest finite value of each tensor's format (448 or 57344).
 * H >= 1; n == 0 does nothing; margin any integer with |margin| <= 64. */
typedef struct ampx_fp8_scale_update_args {
    uint32_t size;
    uint32_t algo;    /* ampx_fp8_amax_algo */
    uint64_t n;       /* tensors */
    uint32_t history; /* H, rows of the amax history */
    int32_t margin;
    uint32_t skip_on_found_inf; /* 1: a step with scalars.found_inf set only clears row 0 */
    uint32_t reserved;          /* 0 */
    ampx_tensor state;          /* f32 FP8 STATE block, (2 + H) n, updated in place */
    ampx_tensor fp8_max;        /* f32 [n] */
    ampx_tensor scalars;        /* (optional unless skip_on_found_inf) the scalars block */
} ampx_fp8_scale_update_args;

// ---------------------------------------------------------------------------------------
// ABI 1.8

/* ABS_MAX  dtypes {x} (each distinct dtype in the list is checked)
 * Per tensor t of the list, its largest magnitude as an f32 (bf16 and f16 widen exactly):
 *   out[t] = max over i of |x_t[i]|, with NaN ordered above +inf:
 *            the quiet NaN 0x7FC00000 when any element is NaN, else +inf when any is +inf
 *            or -inf, else the largest |x| exactly; 0 for a tensor of no elements.
 * It is the cheapest per-tensor check there is (one read, no sums), so a training step can
 * run it over every op's outputs: the trainer's armed overflow forensics do. */
typedef struct ampx_abs_max_args {
    uint32_t size;
    ampx_tensor_list x;
    ampx_tensor out; /* f32, at least x.count elements */
} ampx_abs_max_args;

#ifdef __cplusplus
}
#endif
#endif /* AMPX_BACKEND_ARGS_H */
