/* kernel_math.h — the scalar numerics every backend computes the same way, written once:
 * the activations and their derivatives (ACT_FWD, ACT_BWD), the unscale factor
 * (UNSCALE_CHECK, AMP_PASS), the optimizers' clip coefficient (SGD, ADAMW) and one step of the loss
 * scaler's state machine (SCALER_UPDATE). The cpu plugin (its portable path and the scalar tails of
 * its vector paths), the cuda kernels, the example plugin and the OpenCL program all compile this
 * text; the conformance reference in the core does not, on purpose (it is the independent
 * implementation they are tested against).
 *
 * One text, three languages:
 *   C           AMPX_KM_FN is `static inline`; the working precision ampx_km_real is double.
 *   CUDA C++    `__host__ __device__ static inline`, double.
 *   OpenCL C    `inline`, float (a device need not have cl_khr_fp64). The OpenCL plugin
 *               embeds this file into its program at build time, after common.cl; there is
 *               no backend.h, so the header carries the few enum values it needs (checked
 *               against backend.h on the host) and the device's view of ampx_scalars.
 * So the activations are evaluated in double from the exactly widened f32 input on the CPU
 * and CUDA, and in f32 in OpenCL; each backend rounds the result to its output dtype.
 * The scalars of the AMP and optimizer ops are computed in ampx_km_wide: double, and in
 * OpenCL C double where the device has cl_khr_fp64 (the plugin then defines AMPX_FP64),
 * else float.
 * Constants with a fraction are written AMPX_KM_C(0.5): a float literal in OpenCL C (so no
 * expression is promoted to double there), a double one elsewhere.
 *
 * Everything here is a pure function of its arguments, so a vector path that evaluates the
 * same formula lane by lane (the cpu plugin's AVX2 and AVX-512 activations keep their own
 * vector code) can be read against it.
 */
#ifndef AMPX_KERNEL_MATH_H
#define AMPX_KERNEL_MATH_H

#if defined(__OPENCL_VERSION__)
#define AMPX_KM_FN inline
#define AMPX_KM_GLOBAL __global
#define AMPX_KM_C(c) c##f
typedef float ampx_km_real;
#ifdef AMPX_FP64 /* set by the plugin on a device with cl_khr_fp64 (common.cl enables it) */
typedef double ampx_km_wide;
#else
typedef float ampx_km_wide;
#endif
#else
#include <math.h>

#include "backend.h"
#if defined(__CUDACC__)
#define AMPX_KM_FN __host__ __device__ static inline
#else
#define AMPX_KM_FN static inline
#endif
#define AMPX_KM_GLOBAL
#define AMPX_KM_C(c) c
typedef double ampx_km_real;
typedef double ampx_km_wide;
#endif

// ---------------------------------------------------------------------------------------
// backend.h's numbers, for OpenCL C (the host checks them against backend.h below)

#define AMPX_KM_ACT_RELU 0
#define AMPX_KM_ACT_GELU 1
#define AMPX_KM_ACT_TANH 2
#define AMPX_KM_ACT_SIGMOID 3
#define AMPX_KM_ACT_SILU 4
#define AMPX_KM_SCALER_NONE 0
#define AMPX_KM_SCALER_DYNAMIC 2
#define AMPX_KM_STOP_MIN_SCALE 1
#define AMPX_KM_STOP_CONSECUTIVE_SKIPS 2
#define AMPX_KM_LR_WARMUP_COSINE 1

/* The fields of ampx_scalars in order, with their OpenCL C types (every one 4 bytes), then
 * `int reserved[7]`. OpenCL C builds its struct from this list; the OpenCL plugin checks
 * the offsets the device compiler gives them against backend.h's when the program loads. */
#define AMPX_KM_SCALARS_FIELDS(X)                                                                  \
    X(float, scale)                                                                                \
    X(int, found_inf)                                                                              \
    X(int, growth_tracker)                                                                         \
    X(int, hysteresis_left)                                                                        \
    X(int, applied_steps)                                                                          \
    X(int, skipped_steps)                                                                          \
    X(int, consecutive_skips)                                                                      \
    X(int, last_found_inf)                                                                         \
    X(int, stop_reason)                                                                            \
    X(float, lr)                                                                                   \
    X(int, mode)                                                                                   \
    X(float, growth_factor)                                                                        \
    X(float, backoff_factor)                                                                       \
    X(int, growth_interval)                                                                        \
    X(int, hysteresis)                                                                             \
    X(int, consecutive_hysteresis)                                                                 \
    X(float, min_scale)                                                                            \
    X(float, max_scale)                                                                            \
    X(int, on_min_scale_error)                                                                     \
    X(int, max_consecutive_skips)                                                                  \
    X(int, lr_schedule)                                                                            \
    X(float, lr_base)                                                                              \
    X(float, lr_min)                                                                               \
    X(int, warmup_steps)                                                                           \
    X(int, decay_steps)

#if defined(__OPENCL_VERSION__)
#define AMPX_KM_FIELD(type, name) type name;
typedef struct ampx_scalars {
    AMPX_KM_SCALARS_FIELDS(AMPX_KM_FIELD)
    int reserved[7];
} ampx_scalars;
#undef AMPX_KM_FIELD
#else
AMPX_STATIC_ASSERT(AMPX_KM_ACT_RELU == AMPX_ACT_RELU && AMPX_KM_ACT_GELU == AMPX_ACT_GELU &&
                       AMPX_KM_ACT_TANH == AMPX_ACT_TANH &&
                       AMPX_KM_ACT_SIGMOID == AMPX_ACT_SIGMOID &&
                       AMPX_KM_ACT_SILU == AMPX_ACT_SILU && AMPX_ACT_COUNT == 5,
                   "kernel_math.h's activation numbers are backend.h's");
AMPX_STATIC_ASSERT(AMPX_KM_SCALER_NONE == AMPX_SCALER_NONE &&
                       AMPX_KM_SCALER_DYNAMIC == AMPX_SCALER_DYNAMIC &&
                       AMPX_KM_STOP_MIN_SCALE == AMPX_STOP_MIN_SCALE &&
                       AMPX_KM_STOP_CONSECUTIVE_SKIPS == AMPX_STOP_CONSECUTIVE_SKIPS,
                   "kernel_math.h's scaler numbers are backend.h's");
AMPX_STATIC_ASSERT(AMPX_KM_LR_WARMUP_COSINE == AMPX_LR_WARMUP_COSINE,
                   "kernel_math.h's schedule number is backend.h's");
/* The field list is backend.h's struct: each field 4 bytes at 4 times its place in the list,
 * and the list ends where reserved begins, so none is missing or out of order. */
enum {
#define AMPX_KM_AT(type, name) AMPX_KM_AT_##name,
    AMPX_KM_SCALARS_FIELDS(AMPX_KM_AT) AMPX_KM_SCALARS_N_FIELDS
#undef AMPX_KM_AT
};
#define AMPX_KM_AT(type, name)                                                                     \
    AMPX_STATIC_ASSERT(offsetof(ampx_scalars, name) == 4 * AMPX_KM_AT_##name &&                    \
                           sizeof(((ampx_scalars *)0)->name) == 4,                                 \
                       "AMPX_KM_SCALARS_FIELDS has " #name                                         \
                       " where backend.h's ampx_scalars has it");
AMPX_KM_SCALARS_FIELDS(AMPX_KM_AT)
#undef AMPX_KM_AT
AMPX_STATIC_ASSERT(offsetof(ampx_scalars, reserved) == 4 * AMPX_KM_SCALARS_N_FIELDS &&
                       sizeof(ampx_scalars) == 4 * AMPX_KM_SCALARS_N_FIELDS + 4 * 7,
                   "AMPX_KM_SCALARS_FIELDS lists every field of backend.h's ampx_scalars");
#endif

// ---------------------------------------------------------------------------------------
// Activations: f(x) and f'(x) side by side, in ampx_km_real

#define AMPX_KM_GELU_K AMPX_KM_C(0.7978845608028654) /* sqrt(2 / pi) */
#define AMPX_KM_GELU_C AMPX_KM_C(0.044715)

/* max(x, 0); a NaN propagates. The derivative is 0 at x <= 0 and NaN at NaN. */
AMPX_KM_FN ampx_km_real ampx_km_relu(ampx_km_real x) {
    return x > 0 ? x : (x != x ? x : 0);
}
AMPX_KM_FN ampx_km_real ampx_km_relu_df(ampx_km_real x) {
    return x > 0 ? 1 : (x != x ? x : 0);
}

/* tanh(u), u = k (x + c x^3), of the tanh-form gelu. In f32 the cubic overflows for |x| >
 * ~7e12; past |x| = 20, u > 301 and tanh(u) is +-1 in f32 and in double alike, so it is
 * taken as that (the same value), and the derivative's 0 * inf cannot turn into NaN on a
 * device whose tanh falls short of 1 there. */
AMPX_KM_FN ampx_km_real ampx_km_gelu_tanh(ampx_km_real x) {
    if (fabs(x) > 20) return x > 0 ? 1 : -1;
    return tanh(AMPX_KM_GELU_K * (x + AMPX_KM_GELU_C * x * x * x));
}
/* 0.5 x (1 + tanh u) */
AMPX_KM_FN ampx_km_real ampx_km_gelu(ampx_km_real x) {
    return AMPX_KM_C(0.5) * x * (1 + ampx_km_gelu_tanh(x));
}
/* d/dx 0.5 x (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2); the
 * second term is 0 where 1 - tanh^2 u is (x^2 may have overflowed there). */
AMPX_KM_FN ampx_km_real ampx_km_gelu_df(ampx_km_real x) {
    ampx_km_real t = ampx_km_gelu_tanh(x);
    ampx_km_real s = 1 - t * t;
    ampx_km_real d =
        s == 0 ? 0 : AMPX_KM_C(0.5) * x * s * AMPX_KM_GELU_K * (1 + 3 * AMPX_KM_GELU_C * x * x);
    return AMPX_KM_C(0.5) * (1 + t) + d;
}

AMPX_KM_FN ampx_km_real ampx_km_tanh_df(ampx_km_real x) {
    ampx_km_real t = tanh(x);
    return 1 - t * t;
}

/* 1 / (1 + exp(-x)) */
AMPX_KM_FN ampx_km_real ampx_km_sigmoid(ampx_km_real x) {
    return 1 / (1 + exp(-x));
}
AMPX_KM_FN ampx_km_real ampx_km_sigmoid_df(ampx_km_real x) {
    ampx_km_real s = ampx_km_sigmoid(x);
    return s * (1 - s);
}

/* x sigma(x); derivative sigma(x) (1 + x (1 - sigma(x))) */
AMPX_KM_FN ampx_km_real ampx_km_silu(ampx_km_real x) {
    return x * ampx_km_sigmoid(x);
}
AMPX_KM_FN ampx_km_real ampx_km_silu_df(ampx_km_real x) {
    ampx_km_real s = ampx_km_sigmoid(x);
    return s * (1 + x * (1 - s));
}

/* f(x) of activation `act` (ampx_act); 0 for an unknown one (the kit's checks refuse it). */
AMPX_KM_FN ampx_km_real ampx_km_act_f(int act, ampx_km_real x) {
    switch (act) {
    case AMPX_KM_ACT_RELU: return ampx_km_relu(x);
    case AMPX_KM_ACT_GELU: return ampx_km_gelu(x);
    case AMPX_KM_ACT_TANH: return tanh(x);
    case AMPX_KM_ACT_SIGMOID: return ampx_km_sigmoid(x);
    case AMPX_KM_ACT_SILU: return ampx_km_silu(x);
    default: return 0;
    }
}

/* f'(x) of activation `act`; 0 for an unknown one. */
AMPX_KM_FN ampx_km_real ampx_km_act_df(int act, ampx_km_real x) {
    switch (act) {
    case AMPX_KM_ACT_RELU: return ampx_km_relu_df(x);
    case AMPX_KM_ACT_GELU: return ampx_km_gelu_df(x);
    case AMPX_KM_ACT_TANH: return ampx_km_tanh_df(x);
    case AMPX_KM_ACT_SIGMOID: return ampx_km_sigmoid_df(x);
    case AMPX_KM_ACT_SILU: return ampx_km_silu_df(x);
    default: return 0;
    }
}

// ---------------------------------------------------------------------------------------
// The AMP ops' unscale factor and the optimizers' clip coefficient, in ampx_km_wide

/* UNSCALE_CHECK, AMP_PASS: 1 / scale computed wide and rounded to f32, as PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_ does with a double reciprocal. */
AMPX_KM_FN float ampx_km_inv_scale(float scale) {
    return (float)((ampx_km_wide)1 / (ampx_km_wide)scale);
}

/* SGD, ADAMW: min(1, max_grad_norm / (sqrt(*sq_sum) + 1e-6)), then rounded to f32 as the
 * scalar it is (1 stays exact); a NaN stays NaN, so a non-finite sum poisons the step rather
 * than silently disabling the clip. 1 when clipping is off: max_grad_norm <= 0 or no sum. */
AMPX_KM_FN ampx_km_wide ampx_km_clip_coef(float max_grad_norm, AMPX_KM_GLOBAL const float *sq_sum) {
    if (!(max_grad_norm > 0) || !sq_sum) return 1;
    ampx_km_wide norm = sqrt((ampx_km_wide)*sq_sum);
    ampx_km_wide c    = (ampx_km_wide)max_grad_norm / (norm + (ampx_km_wide)1e-6);
    c                 = c < 1 ? c : (c == c ? 1 : c);
    return c != 1 ? (ampx_km_wide)(float)c : c;
}

// ---------------------------------------------------------------------------------------
// SCALER_UPDATE: one step of backend.h's pseudo-code on the scalars block

/* Consumes found_inf: a skipped step counts and (dynamic mode) backs off after `hysteresis`
 * overflows, an applied step counts and (dynamic mode) grows the scale every
 * growth_interval applied steps. grown and backed are scale * growth factor and scale *
 * backoff factor, each rounded to f32 by the caller the way its backend multiplies (on the
 * host and CUDA: the f32 scale times the double factor in double, rounded once, as
 * PyTorch); the step takes the one it needs. A grown scale that is not finite, or above
 * max_scale, is not taken. */
AMPX_KM_FN void ampx_km_scaler_step(AMPX_KM_GLOBAL ampx_scalars *s, float grown, float backed) {
    s->last_found_inf = s->found_inf;
    s->found_inf      = 0;
    if (s->last_found_inf) {
        s->skipped_steps++;
        s->consecutive_skips++;
        s->growth_tracker = 0;
        if (s->mode == AMPX_KM_SCALER_DYNAMIC) {
            s->hysteresis_left--;
            if (s->hysteresis_left <= 0) {
                s->scale           = backed > s->min_scale ? backed : s->min_scale; /* max() */
                s->hysteresis_left = s->hysteresis;
            }
            if (s->scale <= s->min_scale && s->on_min_scale_error)
                s->stop_reason |= AMPX_KM_STOP_MIN_SCALE;
        }
        if (s->max_consecutive_skips > 0 && s->consecutive_skips > s->max_consecutive_skips)
            s->stop_reason |= AMPX_KM_STOP_CONSECUTIVE_SKIPS;
        return;
    }
    s->applied_steps++;
    s->consecutive_skips = 0;
    if (s->mode != AMPX_KM_SCALER_DYNAMIC) return;
    if (s->consecutive_hysteresis) s->hysteresis_left = s->hysteresis;
    s->growth_tracker++;
    if (s->growth_tracker >= s->growth_interval) {
        if (grown - grown == 0 && grown <= s->max_scale) s->scale = grown; /* finite */
        s->growth_tracker = 0;
    }
}

// ---------------------------------------------------------------------------------------
// FP8_SCALE_UPDATE's scale (backend.h): Transformer Engine's _default_sf_compute in f32.
// Every operation is one correctly rounded f32 operation (the OpenCL plugin builds with
// -cl-fp32-correctly-rounded-divide-sqrt), so every backend gets the same bits.

#if defined(__OPENCL_VERSION__)
#define AMPX_KM_LDEXPF ldexp
#else
#define AMPX_KM_LDEXPF ldexpf
#endif
#define AMPX_KM_FLT_MAX 3.40282347e+38f

/* The new scale of one tensor from its amax (the history's, by the algo), its scale now, the
 * largest finite of its format and the margin. */
AMPX_KM_FN float ampx_km_fp8_scale(float amax, float scale, float fp8_max, int margin) {
    float sf = (fp8_max / amax) / AMPX_KM_LDEXPF(1.0f, margin);
    float s  = (amax > 0.0f && isfinite(amax)) ? sf : scale;
    return isinf(s) ? AMPX_KM_FLT_MAX : s;
}

/* The amax of one tensor's history under the MAX algo: its largest, NaN if one is NaN. */
AMPX_KM_FN float ampx_km_fp8_max_step(float acc, float h) {
    return (isnan(acc) || isnan(h)) ? acc + h : (h > acc ? h : acc);
}

#endif
