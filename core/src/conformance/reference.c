/* reference.c — the double-precision reference of every backend op (see reference.h).
 *
 * Written for obviousness, not speed: each op is the formula of backend.h evaluated in
 * double, which has 29 more significand bits than the f32 accumulation a plugin is held
 * to, so the reference's own error is negligible next to every tolerance of the suite
 * (the table in harness.h).
 */
#include "conformance/reference.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Formats
//
// A float format is (p, emin, max): p significand bits including the implicit one, emin
// the exponent of the smallest normal. Rounding x to it: find the exponent of x's leading
// bit, clamp it at emin (subnormals share emin's quantum), and round x / quantum to an
// integer with nearbyint (ties to even in the default rounding mode). x / quantum is exact
// because quantum is a power of two and the quotient is far from double's limits.

typedef struct ref_format {
    int p, emin;
    double max;
} ref_format;

static int ref_format_of(ampx_dtype dt, ref_format *f) {
    switch (dt) {
    case AMPX_F32: *f = (ref_format){24, -126, 0x1.fffffep127}; return 1; /* (2 - 2^-23) 2^127 */
    case AMPX_BF16: *f = (ref_format){8, -126, 0x1.fep127}; return 1;     /* (2 - 2^-7) 2^127 */
    case AMPX_F16: *f = (ref_format){11, -14, 65504.0}; return 1;
    case AMPX_E4M3: *f = (ref_format){4, -6, 448.0}; return 1;
    case AMPX_E5M2: *f = (ref_format){3, -14, 57344.0}; return 1;
    default: return 0;
    }
}

/* 2^n for n in double's normal range [-1022, 1023], from its bits: ldexp was a tenth of
 * the suite's time through the per-element calls below. */
static double ref_pow2(int n) {
    uint64_t bits = (uint64_t)(n + 1023) << 52;
    double r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

double ref_unit_roundoff(ampx_dtype dt) {
    ref_format f;
    return ref_format_of(dt, &f) ? ref_pow2(-f.p) : 0.0;
}

double ref_max_finite(ampx_dtype dt) {
    ref_format f;
    return ref_format_of(dt, &f) ? f.max : 2147483647.0;
}

double ref_min_subnormal(ampx_dtype dt) {
    ref_format f;
    return ref_format_of(dt, &f) ? ref_pow2(f.emin - f.p + 1) : 1.0;
}

/* The exponent of the spacing of dt's values around |x| (x finite, non-zero): lead - (p - 1),
 * lead the exponent of x's leading bit (from the double's exponent field; a double
 * subnormal reads as -1023) clamped at emin. */
static int ref_quantum_exp(const ref_format *f, double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int lead = (int)((bits >> 52) & 0x7ff) - 1023;
    if (lead < f->emin) lead = f->emin;
    return lead - (f->p - 1);
}

/* The spacing itself. */
static double ref_quantum(const ref_format *f, double x) {
    return ref_pow2(ref_quantum_exp(f, x));
}

double ref_round(ampx_dtype dt, double x) {
    ref_format f;
    if (!ref_format_of(dt, &f)) { /* i32 */
        if (isnan(x)) return 0.0;
        double r = nearbyint(x);
        if (r > 2147483647.0) r = 2147483647.0;
        if (r < -2147483648.0) r = -2147483648.0;
        return r;
    }
    if (isnan(x) || isinf(x) || x == 0.0) return x;
    int qe   = ref_quantum_exp(&f, x);
    double r = nearbyint(x * ref_pow2(-qe)) * ref_pow2(qe); /* x / q exactly: q = 2^qe */
    /* A carry may move r to the next binade; it is still exact (a power of two). Beyond the
     * largest finite value, round-to-nearest overflows to inf (IEEE 754 7.4). */
    if (fabs(r) > f.max) return copysign(INFINITY, x);
    return r;
}

void ref_neighbours(ampx_dtype dt, double x, double *lo, double *hi) {
    ref_format f;
    if (!ref_format_of(dt, &f) || isnan(x) || isinf(x) || x == 0.0) {
        *lo = *hi = x;
        return;
    }
    double q = ref_quantum(&f, x);
    *lo      = floor(x / q) * q;
    *hi      = ceil(x / q) * q;
    if (*lo < -f.max) *lo = -INFINITY;
    if (*hi > f.max) *hi = INFINITY;
}

uint32_t ref_encode(ampx_dtype dt, double x) {
    switch (dt) {
    case AMPX_F32: {
        float v = (float)x; /* exact: x is representable */
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        return u;
    }
    case AMPX_BF16: { /* bf16 is the top half of an f32 whose low half is zero */
        if (isnan(x)) return signbit(x) ? 0xffc0u : 0x7fc0u;
        float v = (float)x;
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        return u >> 16;
    }
    case AMPX_F16: {
        uint32_t sign = signbit(x) ? 0x8000u : 0u;
        if (isnan(x)) return sign | 0x7e00u;
        double a = fabs(x);
        if (isinf(a)) return sign | 0x7c00u;
        if (a == 0.0) return sign;
        if (a < ldexp(1.0, -14)) return sign | (uint32_t)(a * ldexp(1.0, 24)); /* subnormal */
        int e;
        frexp(a, &e); /* leading bit exponent e - 1, biased e - 1 + 15 */
        uint32_t mant = (uint32_t)(ldexp(a, 11 - e) - 1024.0);
        return sign | ((uint32_t)(e - 1 + 15) << 10) | mant;
    }
    case AMPX_I32: {
        int32_t i = (int32_t)ref_round(AMPX_I32, x);
        return (uint32_t)i;
    }
    case AMPX_E4M3:
    case AMPX_E5M2: return ref_fp8_encode(dt, x);
    default: return 0;
    }
}

double ref_decode(ampx_dtype dt, uint32_t bits) {
    switch (dt) {
    case AMPX_F32: {
        float v;
        memcpy(&v, &bits, sizeof v);
        return (double)v;
    }
    case AMPX_BF16: {
        uint32_t u = (bits & 0xffffu) << 16;
        float v;
        memcpy(&v, &u, sizeof v);
        return (double)v;
    }
    case AMPX_F16: {
        double s      = (bits & 0x8000u) ? -1.0 : 1.0;
        uint32_t exp  = (bits >> 10) & 0x1fu;
        uint32_t mant = bits & 0x3ffu;
        if (exp == 0x1f) return mant ? s * NAN : s * INFINITY;
        if (exp == 0) return s * ldexp((double)mant, -24);
        return s * ldexp((double)(1024u + mant), (int)exp - 25);
    }
    case AMPX_I32: return (double)(int32_t)bits;
    case AMPX_E4M3:
    case AMPX_E5M2: return ref_fp8_decode(dt, bits & 0xffu);
    default: return NAN;
    }
}

// ---------------------------------------------------------------------------------------
// Stochastic rounding
//
// backend.h fixes the random word of every element (ampx_hash32 of the seed and the
// element's index) and dtype.h fixes how that word picks a neighbour, so a backend's SR
// output is as deterministic as its nearest-even output. The rule is re-derived here from
// values instead of bit manipulation: truncate x toward zero on dt's grid, take the
// discarded fraction d in [0, 1) of one ulp (exact in double: it is an integer multiple of
// 2^-D with D <= 31), and compare it with the random word scaled the way dtype.h does.

uint32_t ref_hash32(uint64_t seed, uint64_t index) {
    /* 1. A 64-bit counter: Weyl step of the seed plus the index (mod 2^64). */
    uint64_t z = seed * UINT64_C(0x9e3779b97f4a7c15) + index;
    /* 2. Fold to 32 bits: low half xor high half. */
    uint32_t h = (uint32_t)z ^ (uint32_t)(z >> 32);
    /* 3. lowbias32: xorshift 16, multiply, xorshift 15, multiply, xorshift 16. */
    static const struct {
        unsigned shift;
        uint32_t mul;
    } rounds[3] = {{16, 0x7feb352du}, {15, 0x846ca68bu}, {16, 1u}};
    for (int r = 0; r < 3; r++) {
        h ^= h >> rounds[r].shift;
        h *= rounds[r].mul;
    }
    return h;
}

double ref_round_sr(ampx_dtype dt, double x, uint32_t rnd) {
    ref_format f;
    if (dt == AMPX_F32 || !ref_format_of(dt, &f)) return ref_round(dt, x);
    if (isnan(x) || isinf(x)) return ref_round(dt, x);
    double a = fabs(x);
    if (dt == AMPX_F16 && a >= 65504.0) return ref_round(dt, x); /* nearest even up there */
    if (a == 0.0) return x;
    double q = ref_quantum(&f, a); /* dt's ulp at |x| */
    double t = floor(a / q) * q;   /* |x| truncated toward zero */
    double d = (a - t) / q;        /* discarded fraction of one ulp, exact */
    int away;
    if (dt == AMPX_BF16) {
        /* adding 16 random bits below the kept part carries into it iff they reach 1 - d */
        away = (double)(rnd & 0xffffu) * 0x1p-16 >= 1.0 - d;
    } else {
        away = (double)rnd * 0x1p-32 < d; /* exact: both sides are dyadic in double */
    }
    double r = away ? t + q : t;
    if (r > f.max) r = INFINITY; /* the bf16 step from the largest finite value */
    return copysign(r, x);
}

// ---------------------------------------------------------------------------------------
// GEMM and elementwise

/* sum x_p y_p over p < k, and in *abs_sum the sum of |x_p y_p|, in eight interleaved partial
 * sums (another order of double additions than one running sum: its error stays some 1e-16
 * relative, far below every tolerance, and the chains run in parallel). Cloned for AVX-512
 * and AVX2 (GCC with glibc's ifunc), picked when the library loads, where the eight lanes are one
 * or two vectors: the references of the GEMM and attention cases were most of the suite's time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define REF_CLONES
#endif
typedef double ref_v8 __attribute__((vector_size(64)));
typedef uint64_t ref_u8 __attribute__((vector_size(64)));

REF_CLONES double ref_dot(const double *x, const double *y, uint64_t k, double *abs_sum) {
    ref_v8 s = {0}, a = {0};
    const ref_u8 no_sign = ~(ref_u8){0} >> 1;
    uint64_t p           = 0;
    for (; p + 8 <= k; p += 8) {
        ref_v8 xv, yv;
        memcpy(&xv, x + p, sizeof xv);
        memcpy(&yv, y + p, sizeof yv);
        ref_v8 t = xv * yv;
        s += t;
        a += (ref_v8)((ref_u8)t & no_sign);
    }
    for (; p < k; p++) {
        double t = x[p] * y[p];
        s[0] += t;
        a[0] += fabs(t);
    }
    *abs_sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Row i of op(X) (m x k; X stored k x m when trans) into out[0 .. k). */
static void ref_gather(const double *x, uint64_t ld, int trans, uint64_t i, uint64_t k,
                       double *out) {
    for (uint64_t p = 0; p < k; p++)
        out[p] = trans ? x[p * ld + i] : x[i * ld + p];
}

void ref_gemm(int trans_a, int trans_b, uint64_t m, uint64_t n, uint64_t k, uint64_t batch,
              const double *a, uint64_t lda, uint64_t stride_a, const double *b, uint64_t ldb,
              uint64_t stride_b, double alpha, double beta, double *c, uint64_t ldc,
              uint64_t stride_c, double *mag) {
    /* op(A)'s row and all of op(B)^T contiguous, so each element's dot runs over two arrays
     * in order (the strided walk down op(B)'s columns was most of the suite's time) */
    double *arow = malloc((k + 1) * sizeof *arow), *bt = malloc((n * k + 1) * sizeof *bt);
    if (!arow || !bt) {
        free(arow);
        free(bt);
        for (uint64_t bi = 0; bi < batch; bi++) /* the case fails rather than passes */
            for (uint64_t i = 0; i < m; i++)
                for (uint64_t j = 0; j < n; j++) {
                    c[bi * stride_c + i * ldc + j] = NAN;
                    if (mag) mag[bi * stride_c + i * ldc + j] = NAN;
                }
        return;
    }
    for (uint64_t bi = 0; bi < batch; bi++) {
        const double *ab = a + bi * stride_a, *bb = b + bi * stride_b;
        double *cb = c + bi * stride_c;
        for (uint64_t j = 0; j < n; j++)
            ref_gather(bb, ldb, !trans_b, j, k, bt + j * k);
        for (uint64_t i = 0; i < m; i++) {
            ref_gather(ab, lda, trans_a, i, k, arow);
            for (uint64_t j = 0; j < n; j++) {
                double abs_acc, acc = ref_dot(arow, bt + j * k, k, &abs_acc);
                double old      = beta != 0.0 ? cb[i * ldc + j] : 0.0;
                cb[i * ldc + j] = alpha * acc + (beta != 0.0 ? beta * old : 0.0);
                if (mag)
                    mag[bi * stride_c + i * ldc + j] = fabs(alpha) * abs_acc + fabs(beta * old);
            }
        }
    }
    free(arow);
    free(bt);
}

void ref_gemm_epilogue(uint64_t m, uint64_t n, uint64_t batch, const double *bias, int act,
                       double *c, uint64_t ldc, uint64_t stride_c, double *pre, double *mag) {
    for (uint64_t bt = 0; bt < batch; bt++)
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                uint64_t e = bt * stride_c + i * ldc + j;
                double v   = c[e] + (bias ? bias[j] : 0.0);
                mag[e] += bias ? fabs(bias[j]) : 0.0;
                if (pre) pre[e] = v;
                if (act < 0) {
                    c[e] = v;
                    continue;
                }
                c[e]   = ref_act((uint32_t)act, v);
                mag[e] = 1.2 * mag[e] + fabs(c[e]);
            }
}

void ref_gemm_bias_grad(int trans_b, uint64_t n, uint64_t k, uint64_t batch, const double *b,
                        uint64_t ldb, uint64_t stride_b, int accumulate, double *db, double *mag) {
    for (uint64_t j = 0; j < n; j++) {
        double s = accumulate ? db[j] : 0.0, sa = fabs(s);
        for (uint64_t bt = 0; bt < batch; bt++)
            for (uint64_t p = 0; p < k; p++) {
                double v = b[bt * stride_b + (trans_b ? j * ldb + p : p * ldb + j)];
                s += v;
                sa += fabs(v);
            }
        db[j]  = s;
        mag[j] = sa;
    }
}

void ref_add(uint64_t rows, uint64_t cols, int broadcast_b, double alpha, double beta,
             const double *a, const double *b, double *y, double *mag) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            double av = a[r * cols + c], bv = b[(broadcast_b ? 0 : r) * cols + c];
            y[r * cols + c] = alpha * av + beta * bv;
            if (mag) mag[r * cols + c] = fabs(alpha * av) + fabs(beta * bv);
        }
}

void ref_mul(uint64_t rows, uint64_t cols, int broadcast_b, const double *a, const double *b,
             double *y) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            y[r * cols + c] = a[r * cols + c] * b[(broadcast_b ? 0 : r) * cols + c];
}

void ref_scale(uint64_t n, double alpha, const double *x, double *y) {
    for (uint64_t i = 0; i < n; i++)
        y[i] = alpha * x[i];
}

void ref_bias_grad(uint64_t rows, uint64_t cols, int accumulate, const double *dy, double *db,
                   double *mag) {
    for (uint64_t c = 0; c < cols; c++) {
        double s = accumulate ? db[c] : 0.0, sa = fabs(s);
        for (uint64_t r = 0; r < rows; r++) {
            s += dy[r * cols + c];
            sa += fabs(dy[r * cols + c]);
        }
        db[c] = s;
        if (mag) mag[c] = sa;
    }
}

/* GELU, tanh form: 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3). */
#define REF_GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define REF_GELU_A 0.044715

double ref_act(uint32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? x : 0.0;
    case AMPX_ACT_GELU: return 0.5 * x * (1.0 + tanh(REF_GELU_C * (x + REF_GELU_A * x * x * x)));
    case AMPX_ACT_TANH: return tanh(x);
    case AMPX_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case AMPX_ACT_SILU: return x / (1.0 + exp(-x));
    default: return NAN;
    }
}

double ref_act_deriv(uint32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? 1.0 : 0.0;
    case AMPX_ACT_GELU: {
        double t = tanh(REF_GELU_C * (x + REF_GELU_A * x * x * x));
        return 0.5 * (1.0 + t) +
               0.5 * x * (1.0 - t * t) * REF_GELU_C * (1.0 + 3.0 * REF_GELU_A * x * x);
    }
    case AMPX_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case AMPX_ACT_SIGMOID: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 - s);
    }
    case AMPX_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s + x * s * (1.0 - s);
    }
    default: return NAN;
    }
}

// ---------------------------------------------------------------------------------------
// Softmax and cross-entropy

void ref_softmax_fwd(uint64_t rows, uint64_t cols, int causal, uint64_t seq_q, int log_,
                     double scale, const double *x, double *y) {
    for (uint64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double *yr       = y + r * cols;
        uint64_t limit   = cols; /* keys [0, limit) are visible */
        if (causal && seq_q > 0) limit = (r % seq_q) + (cols - seq_q) + 1;
        double mx = -INFINITY;
        for (uint64_t j = 0; j < limit; j++)
            if (scale * xr[j] > mx) mx = scale * xr[j];
        double sum = 0.0;
        for (uint64_t j = 0; j < limit; j++)
            sum += exp(scale * xr[j] - mx);
        for (uint64_t j = 0; j < cols; j++) {
            if (j >= limit)
                yr[j] = log_ ? -INFINITY : 0.0;
            else if (log_)
                yr[j] = scale * xr[j] - mx - log(sum);
            else
                yr[j] = exp(scale * xr[j] - mx) / sum;
        }
    }
}

void ref_softmax_bwd(uint64_t rows, uint64_t cols, int causal, uint64_t seq_q, int log_,
                     double scale, const double *y, const double *dy, double *dx) {
    for (uint64_t r = 0; r < rows; r++) {
        const double *yr = y + r * cols, *dyr = dy + r * cols;
        double *dxr    = dx + r * cols;
        uint64_t limit = cols; /* the forward's visible keys; masked ones get no gradient */
        if (causal && seq_q > 0) limit = (r % seq_q) + (cols - seq_q) + 1;
        double s = 0.0;
        for (uint64_t j = 0; j < limit; j++)
            s += log_ ? dyr[j] : dyr[j] * yr[j];
        for (uint64_t j = 0; j < cols; j++)
            dxr[j] = j >= limit ? 0.0
                     : log_     ? scale * (dyr[j] - exp(yr[j]) * s)
                                : scale * yr[j] * (dyr[j] - s);
    }
}

int64_t ref_softmax_xent(uint64_t rows, uint64_t cols, const int32_t *labels, int32_t ignore_index,
                         double grad_scale, double loss_scale, const double *logits, double *loss,
                         double *dlogits) {
    int64_t n_valid = 0;
    for (uint64_t r = 0; r < rows; r++) {
        if (labels[r] == ignore_index) continue;
        if (labels[r] < 0 || (uint64_t)labels[r] >= cols) {
            *loss = NAN;
            return -1;
        }
        n_valid++;
    }
    double total = 0.0;
    double g     = n_valid > 0 ? grad_scale * loss_scale / (double)n_valid : 0.0;
    for (uint64_t r = 0; r < rows; r++) {
        const double *xr = logits + r * cols;
        int ok           = labels[r] != ignore_index;
        double mx = -INFINITY, sum = 0.0;
        for (uint64_t j = 0; j < cols; j++)
            if (xr[j] > mx) mx = xr[j];
        for (uint64_t j = 0; j < cols; j++)
            sum += exp(xr[j] - mx);
        if (ok) total += mx + log(sum) - xr[labels[r]];
        if (dlogits)
            for (uint64_t j = 0; j < cols; j++)
                dlogits[r * cols + j] =
                    ok ? g * (exp(xr[j] - mx) / sum - ((int64_t)j == labels[r] ? 1.0 : 0.0)) : 0.0;
    }
    *loss = n_valid > 0 ? total / (double)n_valid : 0.0;
    return n_valid;
}

// ---------------------------------------------------------------------------------------
// Normalization (statistics in double; the biased variance)

void ref_layernorm_fwd(uint64_t rows, uint64_t cols, double eps, const double *x,
                       const double *gamma, const double *beta, double *y, double *mean,
                       double *rstd) {
    for (uint64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double mu = 0.0, var = 0.0;
        for (uint64_t j = 0; j < cols; j++)
            mu += xr[j];
        mu /= (double)cols;
        for (uint64_t j = 0; j < cols; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)cols;
        double rs = 1.0 / sqrt(var + eps);
        for (uint64_t j = 0; j < cols; j++)
            y[r * cols + j] = (xr[j] - mu) * rs * (gamma ? gamma[j] : 1.0) + (beta ? beta[j] : 0.0);
        mean[r] = mu;
        rstd[r] = rs;
    }
}

void ref_layernorm_bwd(uint64_t rows, uint64_t cols, int accumulate, const double *x,
                       const double *gamma, const double *mean, const double *rstd,
                       const double *dy, double *dx, double *dgamma, double *dbeta) {
    if (!accumulate)
        for (uint64_t j = 0; j < cols; j++)
            dgamma[j] = dbeta[j] = 0.0;
    for (uint64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols, *dyr = dy + r * cols;
        double mg = 0.0, mgx = 0.0;
        for (uint64_t j = 0; j < cols; j++) {
            double xhat = (xr[j] - mean[r]) * rstd[r], g = dyr[j] * (gamma ? gamma[j] : 1.0);
            mg += g;
            mgx += g * xhat;
            dgamma[j] += dyr[j] * xhat;
            dbeta[j] += dyr[j];
        }
        mg /= (double)cols;
        mgx /= (double)cols;
        for (uint64_t j = 0; j < cols; j++) {
            double xhat = (xr[j] - mean[r]) * rstd[r], g = dyr[j] * (gamma ? gamma[j] : 1.0);
            dx[r * cols + j] = rstd[r] * (g - mg - xhat * mgx);
        }
    }
}

#define REF_BN(x, o, c, i, C, I) ((x)[((o) * (C) + (c)) * (I) + (i)])

void ref_batchnorm_fwd(uint64_t outer, uint64_t channels, uint64_t inner, int training, double eps,
                       double momentum, const double *x, const double *gamma, const double *beta,
                       double *running_mean, double *running_var, double *mean, double *rstd,
                       double *y) {
    double nn = (double)(outer * inner);
    for (uint64_t c = 0; c < channels; c++) {
        double mu, rs;
        if (training) {
            double s = 0.0, var = 0.0;
            for (uint64_t o = 0; o < outer; o++)
                for (uint64_t i = 0; i < inner; i++)
                    s += REF_BN(x, o, c, i, channels, inner);
            mu = s / nn;
            for (uint64_t o = 0; o < outer; o++)
                for (uint64_t i = 0; i < inner; i++) {
                    double d = REF_BN(x, o, c, i, channels, inner) - mu;
                    var += d * d;
                }
            var /= nn;
            rs              = 1.0 / sqrt(var + eps);
            mean[c]         = mu;
            rstd[c]         = rs;
            running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * mu;
            if (nn > 1.0)
                running_var[c] =
                    (1.0 - momentum) * running_var[c] + momentum * var * nn / (nn - 1.0);
        } else {
            mu = running_mean[c];
            rs = 1.0 / sqrt(running_var[c] + eps);
        }
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t i = 0; i < inner; i++)
                REF_BN(y, o, c, i, channels, inner) =
                    (REF_BN(x, o, c, i, channels, inner) - mu) * rs * (gamma ? gamma[c] : 1.0) +
                    (beta ? beta[c] : 0.0);
    }
}

void ref_batchnorm_bwd(uint64_t outer, uint64_t channels, uint64_t inner, int accumulate,
                       const double *x, const double *gamma, const double *mean, const double *rstd,
                       const double *dy, double *dx, double *dgamma, double *dbeta) {
    double nn = (double)(outer * inner);
    for (uint64_t c = 0; c < channels; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t i = 0; i < inner; i++) {
                double xhat = (REF_BN(x, o, c, i, channels, inner) - mean[c]) * rstd[c];
                sdy += REF_BN(dy, o, c, i, channels, inner);
                sdyx += REF_BN(dy, o, c, i, channels, inner) * xhat;
            }
        double gm = gamma ? gamma[c] : 1.0;
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t i = 0; i < inner; i++) {
                double xhat = (REF_BN(x, o, c, i, channels, inner) - mean[c]) * rstd[c];
                REF_BN(dx, o, c, i, channels, inner) =
                    gm * rstd[c] *
                    (REF_BN(dy, o, c, i, channels, inner) - sdy / nn - xhat * sdyx / nn);
            }
        dgamma[c] = (accumulate ? dgamma[c] : 0.0) + sdyx;
        dbeta[c]  = (accumulate ? dbeta[c] : 0.0) + sdy;
    }
}

// ---------------------------------------------------------------------------------------
// Embedding, reductions

void ref_embedding_fwd(uint64_t n, uint64_t vocab, uint64_t dim, const double *table,
                       const int32_t *ids, double *y) {
    for (uint64_t i = 0; i < n; i++) {
        int in = ids[i] >= 0 && (uint64_t)ids[i] < vocab;
        for (uint64_t d = 0; d < dim; d++)
            y[i * dim + d] = in ? table[(uint64_t)ids[i] * dim + d] : 0.0;
    }
}

void ref_embedding_bwd(uint64_t n, uint64_t vocab, uint64_t dim, const double *dy,
                       const int32_t *ids, double *dtable, double *mag) {
    if (mag)
        for (uint64_t e = 0; e < vocab * dim; e++)
            mag[e] = fabs(dtable[e]);
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint64_t)ids[i] >= vocab) continue;
        for (uint64_t d = 0; d < dim; d++) {
            dtable[(uint64_t)ids[i] * dim + d] += dy[i * dim + d];
            if (mag) mag[(uint64_t)ids[i] * dim + d] += fabs(dy[i * dim + d]);
        }
    }
}

void ref_reduce(uint64_t rows, uint64_t cols, int mean, const double *x, double *y, double *mag) {
    for (uint64_t r = 0; r < rows; r++) {
        double s = 0.0, sa = 0.0;
        for (uint64_t c = 0; c < cols; c++) {
            s += x[r * cols + c];
            sa += fabs(x[r * cols + c]);
        }
        y[r] = mean ? s / (double)cols : s;
        if (mag) mag[r] = mean ? sa / (double)cols : sa;
    }
}

double ref_sum_squares(uint64_t n, const double *x) {
    double s = 0.0;
    for (uint64_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}

/* ABS_MAX's value of one tensor: the largest |x|, NaN above inf, 0 for none. */
double ref_abs_max(uint64_t n, const double *x) {
    double m = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(x[i])) return NAN;
        if (fabs(x[i]) > m) m = fabs(x[i]);
    }
    return m;
}

// ---------------------------------------------------------------------------------------
// AMP

double ref_unscale(ampx_dtype dt, double g, float scale, int32_t mode) {
    if (mode == AMPX_SCALER_NONE) return g;
    /* inv_scale is 1/scale in double, rounded once to f32; the product of two values with
     * 24-bit significands is exact in double, so rounding it to f32 and then to dt is the
     * "product in f32, rounded to the gradient's dtype" of backend.h. */
    double inv = ref_round(AMPX_F32, 1.0 / (double)scale);
    return ref_round(dt, ref_round(AMPX_F32, g * inv));
}

void ref_grad_stats(uint64_t n, const double *g, ampx_dtype target, double stats[4],
                    int32_t counts[3], double *mag_mean) {
    double tiny = target == AMPX_F16 ? ldexp(1.0, -14) : ldexp(1.0, -126);
    double mx = 0.0, s = 0.0, sa = 0.0, s2 = 0.0;
    uint64_t nf = 0;
    counts[0] = counts[1] = counts[2] = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = g[i];
        if (!isfinite(v)) {
            counts[2]++;
            continue;
        }
        nf++;
        if (v == 0.0)
            counts[0]++;
        else if (fabs(v) < tiny)
            counts[1]++;
        if (fabs(v) > mx) mx = fabs(v);
        s += v;
        sa += fabs(v);
        s2 += v * v;
    }
    stats[0] = mx;
    stats[1] = nf ? s / (double)nf : 0.0;
    stats[2] = nf ? sqrt(s2 / (double)nf) : 0.0;
    stats[3] = (double)n;
    if (mag_mean) *mag_mean = nf ? sa / (double)nf : 0.0;
}

/* scale * factor as PyTorch's _amp_update_scale kernels compute it: the f32 scale widened to
 * double, times the double factor, the product rounded to f32. */
static float ref_scale_times(float scale, double factor) {
    return (float)((double)scale * factor);
}

void ref_scaler_update(ampx_scalars *s, double growth, double backoff) {
    s->last_found_inf = s->found_inf;
    s->found_inf      = 0;
    if (s->last_found_inf) {
        s->skipped_steps++;
        s->consecutive_skips++;
        s->growth_tracker = 0;
        if (s->mode == AMPX_SCALER_DYNAMIC) {
            s->hysteresis_left--;
            if (s->hysteresis_left <= 0) {
                float backed       = ref_scale_times(s->scale, backoff);
                s->scale           = backed > s->min_scale ? backed : s->min_scale;
                s->hysteresis_left = s->hysteresis;
            }
            if (s->scale <= s->min_scale && s->on_min_scale_error)
                s->stop_reason |= AMPX_STOP_MIN_SCALE;
        }
        if (s->max_consecutive_skips > 0 && s->consecutive_skips > s->max_consecutive_skips)
            s->stop_reason |= AMPX_STOP_CONSECUTIVE_SKIPS;
    } else {
        s->applied_steps++;
        s->consecutive_skips = 0;
        if (s->mode == AMPX_SCALER_DYNAMIC) {
            if (s->consecutive_hysteresis) s->hysteresis_left = s->hysteresis;
            s->growth_tracker++;
            if (s->growth_tracker >= s->growth_interval) {
                float next = ref_scale_times(s->scale, growth);
                if (isfinite(next) && next <= s->max_scale) s->scale = next;
                s->growth_tracker = 0;
            }
        }
    }
}

float ref_scheduled_lr(const ampx_scalars *s, int32_t t) {
    if (s->lr_schedule != AMPX_LR_WARMUP_COSINE) return s->lr_base;
    if (t < s->warmup_steps) /* linear warmup: step t reaches (t + 1) / warmup of the peak */
        return s->lr_base * ((float)(t + 1) / (float)s->warmup_steps);
    int32_t span    = s->decay_steps - s->warmup_steps;
    double progress = span > 0 ? (double)(t - s->warmup_steps) / (double)span : 1.0;
    progress        = fmin(progress, 1.0);
    double cosine   = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    return (float)((double)s->lr_min + ((double)s->lr_base - (double)s->lr_min) * cosine);
}

// ---------------------------------------------------------------------------------------
// Optimizers

void ref_sgd(uint64_t n, const ref_sgd_hparams *h, double *p, const double *grad, double *buf,
             double *mag_p, double *mag_buf) {
    for (uint64_t i = 0; i < n; i++) {
        double g  = h->clip * grad[i] + h->weight_decay * p[i];
        double gm = fabs(h->clip * grad[i]) + fabs(h->weight_decay * p[i]);
        if (h->momentum != 0.0) {
            double old = buf[i];
            buf[i]     = h->first_step ? g : h->momentum * old + (1.0 - h->dampening) * g;
            double bm =
                h->first_step ? gm : fabs(h->momentum * old) + fabs((1.0 - h->dampening)) * gm;
            if (mag_buf) mag_buf[i] = bm;
            if (h->nesterov) {
                gm = gm + fabs(h->momentum) * bm;
                g  = g + h->momentum * buf[i];
            } else {
                gm = bm;
                g  = buf[i];
            }
        }
        if (mag_p) mag_p[i] = fabs(p[i]) + fabs(h->lr) * gm;
        p[i] -= h->lr * g;
        if (mag_p) mag_p[i] += fabs(p[i]);
    }
}

void ref_adamw(uint64_t n, const ref_adamw_hparams *h, double *p, const double *grad, double *m,
               double *v, double *mag_p, double *mag_m) {
    double bc1 = 1.0 - pow(h->beta1, h->t), bc2 = 1.0 - pow(h->beta2, h->t);
    for (uint64_t i = 0; i < n; i++) {
        double g  = h->clip * grad[i];
        double p0 = p[i];
        p[i] *= 1.0 - h->lr * h->weight_decay;
        if (mag_m) mag_m[i] = fabs(h->beta1 * m[i]) + fabs((1.0 - h->beta1) * g);
        m[i]       = h->beta1 * m[i] + (1.0 - h->beta1) * g;
        v[i]       = h->beta2 * v[i] + (1.0 - h->beta2) * g * g;
        double upd = h->lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + h->eps);
        p[i] -= upd;
        if (mag_p) mag_p[i] = fabs(p0) + fabs(p[i]) + fabs(upd);
    }
}

// ---------------------------------------------------------------------------------------
// ABI 1.1: dropout, permute

void ref_dropout(uint64_t n, uint32_t threshold, uint64_t seed, uint64_t offset, double scale,
                 const double *x, double *y, uint8_t *keep) {
    for (uint64_t i = 0; i < n; i++) {
        int k = ref_hash32(seed, offset + i) >= threshold;
        if (keep) keep[i] = (uint8_t)k;
        y[i] = k ? x[i] * scale : 0.0;
    }
}

/* An odometer over the index tuple: the last index runs fastest, every carry resets it and
 * advances the one before, until the first index runs out. */
int ref_permute(uint32_t ndim, const uint64_t *dims, const uint64_t *x_strides,
                const uint64_t *y_strides, const double *x, double *y, int64_t *src) {
    uint64_t idx[8] = {0};
    if (ndim == 0 || ndim > 8) return -1;
    for (uint32_t d = 0; d < ndim; d++)
        if (dims[d] == 0) return 0; /* an empty copy */
    for (;;) {
        uint64_t xo = 0, yo = 0;
        for (uint32_t d = 0; d < ndim; d++) {
            xo += idx[d] * x_strides[d];
            yo += idx[d] * y_strides[d];
        }
        if (src) {
            if (src[yo] >= 0) return -1;
            src[yo] = (int64_t)xo;
        }
        if (y) y[yo] = x[xo];
        uint32_t d = ndim;
        while (d > 0 && ++idx[d - 1] == dims[d - 1])
            idx[--d] = 0;
        if (d == 0) return 0;
    }
}
