/* reference_fp8.c — the double-precision reference of ABI 1.7's fp8 ops (reference.h): the
 * formats' fields from their definitions, the quantizing cast, and the scale update written
 * from backend.h's formula with every f32 division correctly rounded. Shares no code with
 * any plugin and does not use dtype.h's conversions. */
#include <math.h>

#include "conformance/reference.h"

double ref_fp8_round(ampx_dtype dt, double x, int saturate, int *overflow) {
    *overflow = 0;
    if (isnan(x)) return x;
    double r = isinf(x) ? x : ref_round(dt, x); /* ref_round overflows to inf */
    if (!isinf(r)) return r;
    *overflow = 1;
    if (saturate) return copysign(ref_max_finite(dt), x);
    return dt == AMPX_E4M3 ? copysign(NAN, x) : r;
}

// ---------------------------------------------------------------------------------------
// ABI 1.7: FP8_QUANTIZE and FP8_SCALE_UPDATE (GEMM_FP8 is ref_gemm with its factors)

/* The f32 the op rounds the product x s to: exact in double (24 + 24 bits), then once. */
static double ref_f32_product(double x, double s) {
    return ref_round(AMPX_F32, x * s);
}

void ref_fp8_quantize(ampx_dtype sdt, ampx_dtype ddt, uint64_t n, const double *x, double s,
                      int saturate, double *y, double *amax, int64_t counts[2]) {
    (void)sdt;
    for (uint64_t i = 0; i < n; i++) {
        if (ddt == AMPX_E4M3 || ddt == AMPX_E5M2) {
            int overflow;
            y[i] = ref_fp8_round(ddt, ref_f32_product(x[i], s), saturate, &overflow);
            if (saturate == 2 && isinf(x[i])) /* an infinite input stays non-finite */
                y[i] = ddt == AMPX_E4M3 ? copysign(NAN, x[i]) : x[i];
            if (!isnan(x[i]) && fabs(x[i]) > *amax) *amax = fabs(x[i]);
            counts[0] += overflow;
            counts[1] += isfinite(x[i]) && x[i] != 0.0 && y[i] == 0.0;
        } else {
            y[i] = ref_round(ddt, ref_f32_product(x[i], s));
        }
    }
}

/* An f32 division as IEEE 754 rounds it: the double quotient rounded to f32 is the correctly
 * rounded f32 quotient (double has more than 2 x 24 + 2 bits: no double-rounding error). */
static double ref_f32_div(double a, double b) {
    return ref_round(AMPX_F32, a / b);
}

void ref_fp8_scale_update(uint64_t n, uint32_t h_len, int algo, int margin, int skip,
                          const double *fp8_max, double *state) {
    double *scale = state, *scale_inv = state + n, *hist = state + 2 * n;
    for (uint64_t i = 0; i < n; i++) {
        if (skip) {
            hist[i] = 0.0;
            continue;
        }
        double amax = hist[i];
        if (algo == AMPX_FP8_AMAX_MAX)
            for (uint32_t h = 1; h < h_len; h++) {
                double v = hist[h * n + i];
                if (isnan(v) || isnan(amax))
                    amax = NAN;
                else if (v > amax)
                    amax = v;
            }
        double sf    = ref_f32_div(ref_f32_div(fp8_max[i], amax), ldexp(1.0, margin));
        double s     = amax > 0.0 && isfinite(amax) ? sf : scale[i];
        scale[i]     = isinf(s) ? ref_max_finite(AMPX_F32) : s;
        scale_inv[i] = ref_f32_div(1.0, scale[i]);
        double first = hist[i]; /* roll: row h takes row h + 1, the last row takes row 0 */
        for (uint32_t h = 0; h + 1 < h_len; h++)
            hist[h * n + i] = hist[(h + 1) * n + i];
        hist[(h_len - 1) * n + i] = first;
        hist[i]                   = 0.0;
    }
}
