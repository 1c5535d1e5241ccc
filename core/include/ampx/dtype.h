/* ampx/dtype.h — the data types of ampx and their conversions, header-only.
 *
 * Shared by the core and by every plugin (a plugin may include this header and backend.h
 * and nothing else of the core). All conversions are bit-exact and portable C11:
 *   - narrowing f32 -> bf16 and f32 -> f16 rounds to nearest, ties to even; NaN stays a
 *     quiet NaN with its sign; overflow becomes inf; subnormals are produced and kept;
 *   - widening bf16 -> f32 and f16 -> f32 is exact;
 *   - stochastic rounding (opt-in) picks one of the two neighbours with probability
 *     proportional to closeness, from a counter-based hash of (seed, index);
 *   - the 8-bit formats e4m3 and e5m2 (ABI 1.7, for fp8 GEMMs with per-tensor scales) narrow
 *     from f32 to nearest even, saturating or not, and widen exactly (ampx_f32_to_fp8 and
 *     ampx_fp8_to_f32 below). They are not "float" dtypes in the sense of
 *     ampx_dtype_is_float: only the ops that say so take them.
 */
#ifndef AMPX_DTYPE_H
#define AMPX_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Numbered once, never renumbered: these values cross the plugin boundary. */
typedef enum ampx_dtype {
    AMPX_F32  = 0, /* IEEE binary32 */
    AMPX_BF16 = 1, /* bfloat16: 1 sign, 8 exponent, 7 mantissa bits */
    AMPX_F16  = 2, /* IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits */
    AMPX_I32  = 3, /* two's complement int32 (labels, indices, counters) */
    AMPX_E4M3 = 4, /* fp8 (OCP E4M3, "e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits;
                      largest 448, no infinities, S.1111.111 is NaN (ABI 1.7) */
    AMPX_E5M2 = 5, /* fp8 (OCP E5M2): 1 sign, 5 exponent (bias 15), 2 mantissa bits; largest
                      57344, infinities and NaNs as IEEE (the top byte of an f16) (ABI 1.7) */
    AMPX_DTYPE_COUNT
} ampx_dtype;

static inline size_t ampx_dtype_size(ampx_dtype dt) {
    switch (dt) {
    case AMPX_F32: return 4;
    case AMPX_BF16: return 2;
    case AMPX_F16: return 2;
    case AMPX_I32: return 4;
    case AMPX_E4M3: return 1;
    case AMPX_E5M2: return 1;
    default: return 0;
    }
}

static inline const char *ampx_dtype_name(ampx_dtype dt) {
    switch (dt) {
    case AMPX_F32: return "f32";
    case AMPX_BF16: return "bf16";
    case AMPX_F16: return "f16";
    case AMPX_I32: return "i32";
    case AMPX_E4M3: return "e4m3";
    case AMPX_E5M2: return "e5m2";
    default: return "?";
    }
}

static inline int ampx_dtype_is_float(ampx_dtype dt) {
    return dt == AMPX_F32 || dt == AMPX_BF16 || dt == AMPX_F16;
}

static inline int ampx_dtype_is_fp8(ampx_dtype dt) {
    return dt == AMPX_E4M3 || dt == AMPX_E5M2;
}

/* Accepts "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16"/"half", "i32"/"int32",
 * "e4m3"/"float8_e4m3fn", "e5m2"/"float8_e5m2".
 * Returns 0 and sets *out on success, -1 otherwise. */
static inline int ampx_dtype_parse(const char *s, ampx_dtype *out) {
    static const struct {
        const char *name;
        ampx_dtype dt;
    } names[] = {
        {"f32", AMPX_F32},
        {"float32", AMPX_F32},
        {"bf16", AMPX_BF16},
        {"bfloat16", AMPX_BF16},
        {"f16", AMPX_F16},
        {"float16", AMPX_F16},
        {"half", AMPX_F16},
        {"i32", AMPX_I32},
        {"int32", AMPX_I32},
        {"e4m3", AMPX_E4M3},
        {"float8_e4m3fn", AMPX_E4M3},
        {"e5m2", AMPX_E5M2},
        {"float8_e5m2", AMPX_E5M2},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].dt;
            return 0;
        }
    return -1;
}

// ---------------------------------------------------------------------------------------
// Bit casts

static inline uint32_t ampx_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ampx_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---------------------------------------------------------------------------------------
// bf16: the upper half of an f32. Widening appends 16 zero bits, so it is exact.

static inline float ampx_bf16_to_f32(uint16_t h) {
    return ampx_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even on the 16 discarded bits: adding 0x7fff plus the lowest kept bit
 * carries into the kept bits exactly when the discarded part is above one half, or equal
 * to one half with an odd kept part. A carry out of the mantissa bumps the exponent, which
 * is the correct result, and from the largest finite value it lands on inf. */
static inline uint16_t ampx_f32_to_bf16(float f) {
    uint32_t x = ampx_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---------------------------------------------------------------------------------------
// f16 (IEEE binary16). Bias 15, smallest normal 2^-14, smallest subnormal 2^-24,
// largest finite 65504.

static inline float ampx_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: payload moves to the top of the f32 mantissa */
        return ampx_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return ampx_f32_from_bits(sign);
        /* subnormal: value = mant * 2^-24; normalise into an f32 normal */
        int e = -1;
        do {
            mant <<= 1;
            e++;
        } while ((mant & 0x400u) == 0);
        return ampx_f32_from_bits(sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13));
    }
    return ampx_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t ampx_f32_to_f16(float f) {
    uint32_t x    = ampx_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax   = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (the tie above 65504) rounds to inf; inf stays inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                 /* below 2^-14: f16 subnormal or zero */
        if (ax <= 0x33000000u) return sign; /* <= 2^-25: the tie at 2^-25 goes to even 0 */
        uint32_t e     = ax >> 23;
        uint32_t m     = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* f16 subnormal unit 2^-24 vs f32 unit 2^(e-150) */
        uint32_t r     = m >> shift;
        uint32_t rem   = m & ((1u << shift) - 1u);
        uint32_t half  = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++; /* may carry into the smallest normal */
        return (uint16_t)(sign | r);
    }
    uint32_t r   = (ax >> 13) - (112u << 10); /* rebias exponent 127 -> 15 */
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

// ---------------------------------------------------------------------------------------
// fp8: e4m3 and e5m2 (OCP 8-bit floating point, as NVIDIA's, Transformer Engine's and
// PyTorch's float8_e4m3fn and float8_e5m2). Every code widens exactly to f32 (and to bf16).
//
// Narrowing f32 -> fp8 rounds to nearest, ties to even, with subnormals (e4m3: 2^-9 up to
// 2^-6; e5m2: 2^-16 up to 2^-14) and signed zeros kept. A NaN becomes the format's NaN with
// the input's sign (e4m3 S.1111.111; e5m2 S.11111.1x, quiet, x the f32 payload's second
// bit). A value whose rounding lies past the largest finite (e4m3: |x| > 464, the tie at 464
// going to even 448; e5m2: |x| >= 61440) and an infinity are an overflow:
//   saturate 1: +-largest finite (448, 57344), as __NV_SATFINITE and Transformer Engine's
//               casts do;
//   saturate 0: e4m3 NaN (it has no infinity), e5m2 +-inf.

#define AMPX_E4M3_MAX 448.0f
#define AMPX_E5M2_MAX 57344.0f

/* The largest finite value of an fp8 dtype, 0 for another dtype. */
static inline float ampx_fp8_max(ampx_dtype dt) {
    return dt == AMPX_E4M3 ? AMPX_E4M3_MAX : dt == AMPX_E5M2 ? AMPX_E5M2_MAX : 0.0f;
}

static inline float ampx_e4m3_to_f32(uint8_t c) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t exp  = (c >> 3) & 0xfu;
    uint32_t mant = c & 0x7u;
    if (exp == 0xf && mant == 0x7) return ampx_f32_from_bits(sign | 0x7fc00000u);
    if (exp == 0) { /* subnormal: mant * 2^-9, exact in f32 */
        float v = (float)mant * (1.0f / 512.0f);
        return sign ? -v : v;
    }
    return ampx_f32_from_bits(sign | ((exp + 120u) << 23) | (mant << 20));
}

static inline float ampx_e5m2_to_f32(uint8_t c) {
    return ampx_f16_to_f32((uint16_t)((uint16_t)c << 8));
}

/* The narrowing without branches on the value, so that a loop of it vectorises: |x|, clamped
 * above every value that can round to a finite code, plus m = 1.5 x 2^(q + 23) for the
 * quantum 2^q of the fp8 grid at |x| (its binade's, or the subnormals' below the smallest
 * normal) is rounded by the FPU to a multiple of 2^q, to nearest even (m / 2^q is even), and
 * subtracting m is exact. The code is then the rounded value's bits (normal: exponent and
 * mantissa rebiased) or its count of smallest subnormals. emin_b: the smallest normal's
 * biased f32 exponent; mshift: 23 - mantissa bits; sub: (127 - bias) << mantissa bits;
 * norm_bits: the smallest normal's f32 bits; clamp_bits: 2^(emax + 2); units: 1 / the
 * smallest subnormal. Returns the code without its sign, past maxcode on overflow. */
static inline uint32_t ampx_fp8_round_(uint32_t ax, uint32_t emin_b, uint32_t mshift, uint32_t sub,
                                       uint32_t norm_bits, uint32_t clamp_bits, float units) {
    uint32_t ac = ax > clamp_bits ? clamp_bits : ax;
    uint32_t e  = ac >> 23 < emin_b ? emin_b : ac >> 23;
    float m     = ampx_f32_from_bits(((e + mshift) << 23) | 0x400000u);
    float r     = (ampx_f32_from_bits(ac) + m) - m;
    uint32_t rb = ampx_f32_bits(r);
    return rb >= norm_bits ? (rb >> mshift) - sub : (uint32_t)(int32_t)(r * units);
}

static inline uint8_t ampx_f32_to_e4m3(float f, int saturate) {
    uint32_t x    = ampx_f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
    uint32_t c = ampx_fp8_round_(ax, 121, 20, 960, 0x3c800000u, 0x44800000u, 512.0f);
    c          = c > 0x7eu ? (saturate ? 0x7eu : 0x7fu) : c;
    return (uint8_t)(sign | (ax > 0x7f800000u ? 0x7fu : c));
}

static inline uint8_t ampx_f32_to_e5m2(float f, int saturate) {
    uint32_t x    = ampx_f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
    uint32_t c = ampx_fp8_round_(ax, 113, 21, 448, 0x38800000u, 0x48000000u, 65536.0f);
    c          = c > 0x7bu ? (saturate ? 0x7bu : 0x7cu) : c;
    return (uint8_t)(sign | (ax > 0x7f800000u ? 0x7eu | ((ax >> 21) & 1u) : c));
}

/* The code of f in an fp8 dtype (0 for another dtype). */
static inline uint8_t ampx_f32_to_fp8(float f, ampx_dtype dt, int saturate) {
    return dt == AMPX_E4M3   ? ampx_f32_to_e4m3(f, saturate)
           : dt == AMPX_E5M2 ? ampx_f32_to_e5m2(f, saturate)
                             : 0;
}

/* The value of code c of an fp8 dtype (0 for another dtype). */
static inline float ampx_fp8_to_f32(uint8_t c, ampx_dtype dt) {
    return dt == AMPX_E4M3 ? ampx_e4m3_to_f32(c) : dt == AMPX_E5M2 ? ampx_e5m2_to_f32(c) : 0.0f;
}

/* 1 when code c is finite and its magnitude the format's largest (a saturated value). */
static inline int ampx_fp8_is_max(uint8_t c, ampx_dtype dt) {
    return (c & 0x7fu) == (dt == AMPX_E4M3 ? 0x7eu : 0x7bu);
}

// ---------------------------------------------------------------------------------------
// Stochastic rounding

/* Counter-based hash (a lowbias32-style integer mixer over seed and index). Stateless, so
 * every element of a tensor draws its own number whatever the thread layout. */
static inline uint32_t ampx_hash32(uint64_t seed, uint64_t index) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + index;
    uint32_t x = (uint32_t)(z ^ (z >> 32));
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* bf16 with stochastic rounding: add 16 random bits below the kept part and truncate. The
 * result rounds away from zero with probability (discarded bits) / 2^16. */
static inline uint16_t ampx_f32_to_bf16_sr(float f, uint32_t rnd) {
    uint32_t x = ampx_f32_bits(f);
    if ((x & 0x7fffffffu) >= 0x7f800000u) return ampx_f32_to_bf16(f); /* inf, NaN */
    return (uint16_t)((x + (rnd & 0xffffu)) >> 16);
}

/* f16 with stochastic rounding: truncate toward zero, then step away from zero iff
 * rnd / 2^32 < (discarded part) / (one f16 ulp), exactly; so a value rounds away with
 * probability equal to its distance from the truncated value, in steps of 2^-32, down to the
 * smallest f32 subnormal. Values past the largest finite f16 follow round-to-nearest (inf
 * from 65520 on). */
static inline uint16_t ampx_f32_to_f16_sr(float f, uint32_t rnd) {
    uint32_t x    = ampx_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax   = x & 0x7fffffffu;
    if (ax >= 0x477fe000u) return ampx_f32_to_f16(f); /* >= 65504, inf, NaN */
    if (ax >= 0x38800000u) {                          /* f16 normal: 13 bits discarded */
        uint32_t trunc = (ax >> 13) - (112u << 10);
        if ((rnd >> 19) < (ax & 0x1fffu)) trunc++;
        return (uint16_t)(sign | trunc);
    }
    /* f16 subnormal range: value = m * 2^-(shift + 24) in units of the f16 ulp 2^-24 */
    uint32_t e     = ax >> 23;
    uint32_t m     = e ? (ax & 0x7fffffu) | 0x800000u : ax; /* f32 subnormals: no hidden bit */
    uint32_t shift = 126u - (e ? e : 1u);                   /* 14 .. 125 discarded bits */
    if (shift < 32u) {
        uint32_t trunc = m >> shift, frac = m & ((1u << shift) - 1u);
        if ((rnd >> (32u - shift)) < frac) trunc++;
        return (uint16_t)(sign | trunc);
    }
    /* m < 2^24 <= 2^shift: truncation gives 0; step up iff rnd * 2^(shift-32) < m */
    int up = shift - 32u >= 24u ? (rnd == 0 && m != 0) : (((uint64_t)rnd << (shift - 32u)) < m);
    return (uint16_t)(sign | (up ? 1u : 0u));
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_DTYPE_H */
