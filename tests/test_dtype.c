/* test_dtype.c — exhaustive checks of the conversions in ampx/dtype.h.
 *
 * Every one of the 2^32 f32 bit patterns goes through f32->bf16 and f32->f16 and is compared
 * with a second, independent formulation: the value is scaled by a power of two so that its
 * rounding quantum becomes 1, rounded to an integer by the FPU in double (round to nearest
 * even, the default mode, via the 1.5*2^52 trick), scaled back, and encoded from the double's
 * fields. Every 16-bit pattern goes through the widening (checked against the value decoded
 * field by field in double) and the round trip.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ampx/dtype.h"

// ---------------------------------------------------------------------------------------
// The independent formulation

/* 2^e for e in [-160, 160], built by repeated exact doubling rather than from bits. */
static double pow2_table[321];
__attribute__((constructor)) static void pow2_init(void) {
    pow2_table[160] = 1.0;
    for (int i = 1; i <= 160; i++) {
        pow2_table[160 + i] = pow2_table[159 + i] * 2.0;
        pow2_table[160 - i] = pow2_table[161 - i] * 0.5;
    }
}
static inline double pow2(int e) {
    return pow2_table[160 + e];
}

/* Round to an integer, ties to even, for |y| < 2^51, by the FPU's own rounding. */
static double rint_fpu(double y) {
    double t = y + 0x1.8p52; /* no -ffast-math here: the compiler keeps both operations */
    return t - 0x1.8p52;
}

static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* Rounds |v| (finite) to a binary format with `mant` stored mantissa bits and smallest
 * normal exponent emin. v's exponent comes from the f32 fields (for the scale only). */
static double round_to_format(double v, uint32_t f32bits, int mant, int emin) {
    int e = (int)((f32bits >> 23) & 0xff) - 127;
    if (e < emin) e = emin;
    int qe = e - mant; /* exponent of the quantum (one unit in the last place) */
    return rint_fpu(v * pow2(-qe)) * pow2(qe);
}

static uint16_t ref_f32_to_f16(uint32_t x) {
    uint16_t sign = (uint16_t)((x >> 31) << 15);
    float f;
    memcpy(&f, &x, sizeof f);
    double v = fabs((double)f);
    if (isinf(v) || v >= 65520.0) return sign | 0x7c00;
    double r = round_to_format(v, x, 10, -14);
    if (r == 0) return sign;
    if (r < pow2(-14)) return sign | (uint16_t)(r * pow2(24)); /* subnormal: units of 2^-24 */
    if (r >= 65536.0) return sign | 0x7c00;
    uint64_t b    = dbits(r);
    int exp       = (int)((b >> 52) & 0x7ff) - 1023;
    uint16_t frac = (uint16_t)((b >> 42) & 0x3ff);
    return sign | (uint16_t)((exp + 15) << 10) | frac;
}

static uint16_t ref_f32_to_bf16(uint32_t x) {
    uint16_t sign = (uint16_t)((x >> 31) << 15);
    float f;
    memcpy(&f, &x, sizeof f);
    double v = fabs((double)f);
    if (isinf(v)) return sign | 0x7f80;
    double r = round_to_format(v, x, 7, -126);
    if (r >= pow2(128)) return sign | 0x7f80; /* rounded past the largest finite: inf */
    float rf = (float)r;                      /* exact: r has at most 8 significant bits */
    uint32_t rb;
    memcpy(&rb, &rf, sizeof rb);
    if (rb & 0xffff) return 0xdead; /* cannot happen: r has at most 8 significant bits */
    return sign | (uint16_t)(rb >> 16);
}

/* Value of a 16-bit pattern decoded field by field. */
static double decode16(uint16_t h, int exp_bits, int mant_bits) {
    int bias   = (1 << (exp_bits - 1)) - 1;
    int sign   = h >> 15;
    int e      = (h >> mant_bits) & ((1 << exp_bits) - 1);
    uint32_t m = h & ((1u << mant_bits) - 1);
    double v;
    if (e == (1 << exp_bits) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mant_bits);
    else
        v = ldexp(1.0 + ldexp((double)m, -mant_bits), e - bias);
    return sign ? -v : v;
}

// ---------------------------------------------------------------------------------------
// Narrowing: all 2^32 patterns

static void check_nan_narrowing(uint32_t x, uint16_t got, uint16_t exp_mask, uint16_t quiet,
                                const char *what) {
    uint16_t sign = (uint16_t)((x >> 31) << 15);
    cr_assert((got & exp_mask) == exp_mask && (got & (uint16_t) ~(exp_mask | 0x8000)) != 0,
              "%s(%08x) = %04x is not a NaN", what, x, got);
    cr_assert((got & quiet) != 0, "%s(%08x) = %04x is not a quiet NaN", what, x, got);
    cr_assert_eq(got & 0x8000, sign, "%s(%08x) = %04x lost the sign", what, x, got);
}

Test(dtype, f32_to_bf16_exhaustive, .timeout = 600) {
    uint64_t mismatches = 0;
    for (uint64_t i = 0; i <= 0xffffffffull; i++) {
        uint32_t x   = (uint32_t)i;
        uint16_t got = ampx_f32_to_bf16(ampx_f32_from_bits(x));
        if ((x & 0x7fffffffu) > 0x7f800000u) {
            check_nan_narrowing(x, got, 0x7f80, 0x0040, "f32_to_bf16");
            continue;
        }
        uint16_t want = ref_f32_to_bf16(x);
        if (got != want && mismatches++ < 5)
            cr_log_error("f32_to_bf16(%08x) = %04x, reference %04x", x, got, want);
    }
    cr_assert_eq(mismatches, 0, "%llu f32 patterns round to the wrong bf16",
                 (unsigned long long)mismatches);
}

Test(dtype, f32_to_f16_exhaustive, .timeout = 600) {
    uint64_t mismatches = 0;
    for (uint64_t i = 0; i <= 0xffffffffull; i++) {
        uint32_t x   = (uint32_t)i;
        uint16_t got = ampx_f32_to_f16(ampx_f32_from_bits(x));
        if ((x & 0x7fffffffu) > 0x7f800000u) {
            check_nan_narrowing(x, got, 0x7c00, 0x0200, "f32_to_f16");
            continue;
        }
        uint16_t want = ref_f32_to_f16(x);
        if (got != want && mismatches++ < 5)
            cr_log_error("f32_to_f16(%08x) = %04x, reference %04x", x, got, want);
    }
    cr_assert_eq(mismatches, 0, "%llu f32 patterns round to the wrong f16",
                 (unsigned long long)mismatches);
}

/* A few landmarks, so a reader sees the rules without reading the loops. */
Test(dtype, landmarks) {
    cr_assert_eq(ampx_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(ampx_f32_to_f16(65519.99f), 0x7bff);
    cr_assert_eq(ampx_f32_to_f16(65520.0f), 0x7c00); /* the tie goes to even: inf */
    cr_assert_eq(ampx_f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal */
    cr_assert_eq(ampx_f32_to_f16(0x1p-25f), 0x0000); /* tie to even: zero */
    cr_assert_eq(ampx_f32_to_f16(0x1.000002p-25f), 0x0001);
    cr_assert_eq(ampx_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(ampx_f32_to_bf16(1.00390625f), 0x3f80); /* 1 + 2^-8: tie, even stays 1 */
    cr_assert_eq(ampx_f32_to_bf16(1.01171875f), 0x3f82); /* 1 + 3*2^-8: tie, up to even */
    cr_assert_eq(ampx_f32_to_bf16(ampx_f32_from_bits(0x7f7fffffu)), 0x7f80); /* max -> inf */
    cr_assert_eq(ampx_f32_to_bf16(ampx_f32_from_bits(0x00000001u)), 0x0000);
    cr_assert_eq(ampx_f32_to_bf16(ampx_f32_from_bits(0x00008000u)), 0x0000); /* tie to even */
    cr_assert_eq(ampx_f32_to_bf16(ampx_f32_from_bits(0x00018000u)), 0x0002); /* tie, up */
}

// ---------------------------------------------------------------------------------------
// Widening and round trips: all 2^16 patterns

Test(dtype, widening_and_round_trip_exhaustive) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float fb = ampx_bf16_to_f32((uint16_t)h), fh = ampx_f16_to_f32((uint16_t)h);
        double vb = decode16((uint16_t)h, 8, 7), vh = decode16((uint16_t)h, 5, 10);
        if (isnan(vb)) {
            cr_assert(isnan(fb), "bf16 %04x widened to %g, not NaN", h, fb);
            cr_assert_eq(signbit(fb) != 0, (h >> 15) != 0, "bf16 NaN %04x lost its sign", h);
            cr_assert_eq(ampx_f32_to_bf16(fb), h | 0x0040, "bf16 NaN %04x round trip", h);
        } else {
            cr_assert((double)fb == vb && !!signbit(fb) == !!signbit(vb),
                      "bf16 %04x -> %a, want %a", h, fb, vb);
            cr_assert_eq(ampx_f32_to_bf16(fb), h, "bf16 %04x does not round-trip", h);
        }
        if (isnan(vh)) {
            cr_assert(isnan(fh), "f16 %04x widened to %g, not NaN", h, fh);
            cr_assert_eq(signbit(fh) != 0, (h >> 15) != 0, "f16 NaN %04x lost its sign", h);
            cr_assert_eq(ampx_f32_to_f16(fh), h | 0x0200, "f16 NaN %04x round trip", h);
        } else {
            cr_assert((double)fh == vh && !!signbit(fh) == !!signbit(vh), "f16 %04x -> %a, want %a",
                      h, fh, vh);
            cr_assert_eq(ampx_f32_to_f16(fh), h, "f16 %04x does not round-trip", h);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Stochastic rounding: a neighbour always, and unbiased on average

static void check_sr(float x, int to_f16) {
    uint16_t lo    = to_f16 ? ampx_f32_to_f16(x) : ampx_f32_to_bf16(x);
    double nearest = to_f16 ? ampx_f16_to_f32(lo) : ampx_bf16_to_f32(lo);
    double sum     = 0;
    int n          = 1 << 16;
    /* one quantum (ulp) of the target near x, at least its smallest subnormal */
    double q = fabs(nearest) * (to_f16 ? 0x1p-10 : 0x1p-7) + (to_f16 ? 0x1p-24 : 0x1p-133);
    for (int i = 0; i < n; i++) {
        uint32_t r = ampx_hash32(42, (uint64_t)i);
        uint16_t h = to_f16 ? ampx_f32_to_f16_sr(x, r) : ampx_f32_to_bf16_sr(x, r);
        double v   = to_f16 ? ampx_f16_to_f32(h) : ampx_bf16_to_f32(h);
        /* one of the two neighbours: within one quantum of x */
        cr_assert(fabs(v - (double)x) <= q, "SR(%a) = %a is not a neighbour", x, v);
        sum += v;
    }
    /* Unbiased: x rounds away from zero with probability p (its distance from the value
     * truncated toward zero, in quanta), so the mean of n draws lies within 6 standard
     * errors, q sqrt(p (1 - p) / n), of x. */
    double mean = sum / n, a = fabs((double)x);
    double p  = (a - floor(a / q) * q) / q;
    double se = q * sqrt(p * (1 - p) / n);
    cr_assert(fabs(mean - (double)x) <= 6 * se + 0x1p-60 * q, "SR(%a) mean %a is biased", x, mean);
}

Test(dtype, stochastic_rounding) {
    /* normals, f16 subnormals (6e-6), far below the f16 range (2^-30, 2^-33, 2^-40), and
     * an f32 subnormal */
    const float xs[] = {1.0f + 0x1p-9f, 3.14159f,   -2.71828f, 1e-3f,     0.3f,  -1000.1f,
                        6e-6f,          0x1.8p-30f, 0x1p-33f,  -0x1p-40f, 1e-40f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        check_sr(xs[i], 0);
        check_sr(xs[i], 1);
    }
    cr_assert_eq(ampx_f32_to_f16_sr(1.0f, 0xffffffffu), 0x3c00, "exact values never move");
    cr_assert_eq(ampx_f32_to_bf16_sr(1.0f, 0xffffffffu), 0x3f80, "exact values never move");
}

Test(dtype, names_and_sizes) {
    ampx_dtype dt;
    cr_assert_eq(ampx_dtype_parse("bfloat16", &dt), 0);
    cr_assert_eq(dt, AMPX_BF16);
    cr_assert_eq(ampx_dtype_parse("float16", &dt), 0);
    cr_assert_eq(dt, AMPX_F16);
    cr_assert_eq(ampx_dtype_parse("f64", &dt), -1);
    cr_assert_eq(ampx_dtype_size(AMPX_BF16), 2);
    cr_assert_eq(ampx_dtype_size(AMPX_I32), 4);
    cr_assert_str_eq(ampx_dtype_name(AMPX_F16), "f16");
}

// ---------------------------------------------------------------------------------------
// fp8 (e4m3, e5m2): all 2^32 f32 patterns narrowed both ways, all 256 codes widened

typedef struct fp8_format {
    const char *name;
    ampx_dtype dt;
    int exp_bits, mant, emin;
    double max;
} fp8_format;

static const fp8_format fp8_formats[] = {
    {"e4m3", AMPX_E4M3, 4, 3, -6, 448.0},
    {"e5m2", AMPX_E5M2, 5, 2, -14, 57344.0},
};

/* The code of a value r already on the format's grid (0 <= r <= max), from its double's
 * fields. */
static uint8_t fp8_encode_exact(double r, const fp8_format *f) {
    if (r == 0) return 0;
    if (r < pow2(f->emin)) return (uint8_t)(r * pow2(f->mant - f->emin)); /* subnormal units */
    uint64_t b = dbits(r);
    int exp    = (int)((b >> 52) & 0x7ff) - 1023;
    int bias   = (1 << (f->exp_bits - 1)) - 1;
    return (uint8_t)(((exp + bias) << f->mant) |
                     (int)((b >> (52 - f->mant)) & ((1u << f->mant) - 1)));
}

/* The reference narrowing of the finite or infinite f32 x; *overflow set when it lies past
 * the largest finite. */
static uint8_t ref_f32_to_fp8(uint32_t x, const fp8_format *f, int *overflow) {
    float fv;
    memcpy(&fv, &x, sizeof fv);
    double v  = fabs((double)fv);
    *overflow = isinf(v) || round_to_format(v, x, f->mant, f->emin) > f->max;
    if (*overflow) return 0;
    return (uint8_t)(((x >> 31) << 7) |
                     fp8_encode_exact(round_to_format(v, x, f->mant, f->emin), f));
}

static void fp8_narrowing_exhaustive(const fp8_format *f) {
    uint64_t mismatches = 0;
    uint8_t maxcode     = fp8_encode_exact(f->max, f);
    for (uint64_t i = 0; i <= 0xffffffffull; i++) {
        uint32_t x   = (uint32_t)i;
        float fv     = ampx_f32_from_bits(x);
        uint8_t sat  = ampx_f32_to_fp8(fv, f->dt, 1);
        uint8_t ovf  = ampx_f32_to_fp8(fv, f->dt, 0);
        uint8_t sign = (uint8_t)((x >> 31) << 7);
        uint8_t want_sat, want_ovf;
        if ((x & 0x7fffffffu) > 0x7f800000u) { /* NaN: the format's NaN, sign kept */
            want_sat = want_ovf = f->dt == AMPX_E4M3 ? (uint8_t)(sign | 0x7f)
                                                     : (uint8_t)(sign | 0x7e | ((x >> 21) & 1));
        } else {
            int overflow;
            uint8_t r = ref_f32_to_fp8(x, f, &overflow);
            want_sat  = overflow ? (uint8_t)(sign | maxcode) : r;
            want_ovf  = overflow ? (uint8_t)(sign | (f->dt == AMPX_E4M3 ? 0x7f : 0x7c)) : r;
        }
        if ((sat != want_sat || ovf != want_ovf) && mismatches++ < 5)
            cr_log_error("f32_to_%s(%08x) = %02x saturating, %02x not; reference %02x, %02x",
                         f->name, x, sat, ovf, want_sat, want_ovf);
    }
    cr_assert_eq(mismatches, 0, "%llu f32 patterns narrow to the wrong %s",
                 (unsigned long long)mismatches, f->name);
}

Test(dtype, f32_to_e4m3_exhaustive, .timeout = 600) {
    fp8_narrowing_exhaustive(&fp8_formats[0]);
}

Test(dtype, f32_to_e5m2_exhaustive, .timeout = 600) {
    fp8_narrowing_exhaustive(&fp8_formats[1]);
}

/* Every code: widened to the value its fields give, and back to itself (NaNs to the
 * format's NaN with the sign); widening to bf16 is exact too. */
Test(dtype, fp8_widening_and_round_trip_exhaustive) {
    for (size_t k = 0; k < 2; k++) {
        const fp8_format *f = &fp8_formats[k];
        int bias            = (1 << (f->exp_bits - 1)) - 1;
        for (uint32_t c = 0; c < 256; c++) {
            int sign   = c >> 7;
            int e      = (int)(c >> f->mant) & ((1 << f->exp_bits) - 1);
            uint32_t m = c & ((1u << f->mant) - 1);
            double v;
            if (f->dt == AMPX_E4M3 && e == 15 && m == 7)
                v = NAN;
            else if (f->dt == AMPX_E5M2 && e == 31)
                v = m ? NAN : INFINITY;
            else if (e == 0)
                v = ldexp((double)m, 1 - bias - f->mant);
            else
                v = ldexp(1.0 + ldexp((double)m, -f->mant), e - bias);
            if (sign) v = -v;
            float got = ampx_fp8_to_f32((uint8_t)c, f->dt);
            cr_assert_eq(ampx_bf16_to_f32(ampx_f32_to_bf16(got)) == got || isnan(got), 1,
                         "%s %02x is not exact in bf16", f->name, c);
            if (isnan(v)) {
                cr_assert(isnan(got) && !!signbit(got) == sign, "%s %02x -> %a, want NaN", f->name,
                          c, got);
                uint8_t back = ampx_f32_to_fp8(got, f->dt, 1);
                cr_assert(isnan(ampx_fp8_to_f32(back, f->dt)) && (back >> 7) == sign,
                          "%s NaN %02x came back as %02x", f->name, c, back);
                continue;
            }
            cr_assert((double)got == v && !!signbit(got) == sign, "%s %02x -> %a, want %a", f->name,
                      c, got, v);
            cr_assert_eq(ampx_f32_to_fp8(got, f->dt, 0), c, "%s %02x does not round-trip", f->name,
                         c);
            if (!isinf(v))
                cr_assert_eq(ampx_f32_to_fp8(got, f->dt, 1), c, "%s %02x saturating", f->name, c);
        }
    }
}

/* The rules a reader looks for, each f32 class once. */
Test(dtype, fp8_landmarks) {
    cr_assert_eq(ampx_f32_to_e4m3(448.0f, 0), 0x7e);
    cr_assert_eq(ampx_f32_to_e4m3(464.0f, 0), 0x7e); /* the tie goes to even 448 */
    cr_assert_eq(ampx_f32_to_e4m3(464.1f, 0), 0x7f); /* past it: NaN, there is no inf */
    cr_assert_eq(ampx_f32_to_e4m3(464.1f, 1), 0x7e); /* saturated */
    cr_assert_eq(ampx_f32_to_e4m3(-INFINITY, 1), 0xfe);
    cr_assert_eq(ampx_f32_to_e4m3(-INFINITY, 0), 0xff);
    cr_assert_eq(ampx_f32_to_e4m3(0x1p-9f, 0), 0x01);   /* smallest subnormal */
    cr_assert_eq(ampx_f32_to_e4m3(0x1p-10f, 0), 0x00);  /* its half: tie to even zero */
    cr_assert_eq(ampx_f32_to_e4m3(0x1.8p-9f, 0), 0x02); /* 1.5 units: tie to even 2 */
    cr_assert_eq(ampx_f32_to_e4m3(-0.0f, 0), 0x80);
    cr_assert_eq(ampx_f32_to_e4m3(ampx_f32_from_bits(0x00000001u), 0), 0x00); /* f32 subnormal */
    cr_assert_eq(ampx_f32_to_e5m2(57344.0f, 0), 0x7b);
    cr_assert_eq(ampx_f32_to_e5m2(61439.0f, 0), 0x7b);
    cr_assert_eq(ampx_f32_to_e5m2(61440.0f, 0), 0x7c); /* the tie goes to even: inf */
    cr_assert_eq(ampx_f32_to_e5m2(61440.0f, 1), 0x7b);
    cr_assert_eq(ampx_f32_to_e5m2(INFINITY, 0), 0x7c);
    cr_assert_eq(ampx_f32_to_e5m2(0x1p-16f, 0), 0x01);
    cr_assert_eq(ampx_f32_to_e5m2(ampx_f32_from_bits(0xffc00000u), 1), 0xfe); /* quiet NaN */
    cr_assert_eq(ampx_f32_to_e5m2(ampx_f32_from_bits(0x7fa00000u), 1), 0x7f); /* payload bit */
    cr_assert_eq(ampx_f32_to_e4m3(ampx_f32_from_bits(0x7f800001u), 1), 0x7f); /* signalling */
    cr_assert(ampx_fp8_is_max(0xfe, AMPX_E4M3) && !ampx_fp8_is_max(0x7f, AMPX_E4M3));
    cr_assert_eq(ampx_fp8_max(AMPX_E5M2), 57344.0f);
    ampx_dtype dt;
    cr_assert_eq(ampx_dtype_parse("float8_e4m3fn", &dt), 0);
    cr_assert_eq(dt, AMPX_E4M3);
    cr_assert_eq(ampx_dtype_size(AMPX_E5M2), 1);
    cr_assert(!ampx_dtype_is_float(AMPX_E4M3) && ampx_dtype_is_fp8(AMPX_E5M2));
}
