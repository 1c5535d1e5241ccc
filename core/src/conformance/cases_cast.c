/* cases_cast.c — conformance cases of CAST. */
#include <inttypes.h>
#include <math.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_cast, ampx_cast_args)

// ---------------------------------------------------------------------------------------
// CAST: nearest-even is bit-exact against reference.c's own rounding; stochastic rounding
// must land on a neighbour, repeat for the same seed, be unbiased, and be bit-exact against
// reference.c's own hash and rounding rule (the stream backend.h specifies).

static const double cast_specials[] = {
    0.0,
    -0.0,
    INFINITY,
    -INFINITY,
    NAN,
    1.0,
    -1.0,
    65504.0,
    65519.0,
    65520.0,
    -65520.0,
    65536.0,
    0x1p-14,
    0x1p-24,
    0x1p-25,
    0x3p-26,
    0x1p-26,
    -0x1p-25,
    0x1.8p-25,
    0x1p-126,
    0x1p-133,
    0x1p-149,
    -0x1p-149,
    0x1.fffffep127,
    -0x1.fffffep127,
    0x1.ff8p127,
    1.0 + 0x1p-8,
    1.0 + 0x3p-8,
    1.0 + 0x1p-11,
    1.0 + 0x3p-11,
    -(1.0 + 0x3p-11),
    1.0 + 0x1p-9,
    255.5,
    1.0 / 3.0,
    3.0e38,
    1e10,
    0x1.0081p0,
    0x1.0008p0,
    0x1.ffp15,
    0x1.ffcp15,
};

#define CAST_SR_BLOCK 4096u
#define CAST_SR_BLOCKS 16u

/* A value dst cannot hold (when the pair narrows at all): one block of mode 3. */
static double cast_block_value(conf_case_ctx *cc, ampx_dtype sdt, ampx_dtype ddt) {
    double x = 0.0;
    for (int tries = 0; tries < 64; tries++) {
        int e = ddt == AMPX_F16 && sdt == AMPX_BF16 ? -20 - (int)(conf_next(&cc->rng) % 4)
                                                    : (int)(conf_next(&cc->rng) % 7) - 3;
        x     = ref_round(sdt, ldexp(conf_uniform(&cc->rng, 1.0, 2.0), e));
        if (ref_round(ddt, x) != x) break;
    }
    return x;
}

/* The source values of a case of the given mode (see conf_case_cast's table); mode 3 also
 * records each block's value in block_x. */
static void cast_fill(conf_case_ctx *cc, conf_tensor *S, ampx_dtype ddt, int mode,
                      double *block_x) {
    ampx_dtype sdt = S->dt;
    for (uint64_t i = 0; i < S->n; i++) {
        if (mode == 0)
            conf_tensor_set(S, i, ref_round(sdt, cast_specials[i]));
        else if (mode == 1) {
            uint32_t bits = (uint32_t)conf_next(&cc->rng);
            conf_tensor_set_bits(S, i, S->esz == 2 ? bits & 0xffffu : bits);
        } else if (mode == 2) {
            double x =
                ldexp(conf_uniform(&cc->rng, 1.0, 2.0), (int)(conf_next(&cc->rng) % 46) - 28);
            conf_tensor_set(S, i, ref_round(sdt, (conf_next(&cc->rng) & 1) ? -x : x));
        } else {
            uint64_t blk = i / CAST_SR_BLOCK;
            if (i % CAST_SR_BLOCK == 0) block_x[blk] = cast_block_value(cc, sdt, ddt);
            conf_tensor_set(S, i, block_x[blk]);
        }
    }
}

/* Stochastic rounding of element i: a neighbour, the same in the repeat D2, and exactly the
 * one backend.h's random word picks. Returns 0, or -1 with the case failed. */
static int cast_check_sr(conf_case_ctx *cc, const conf_tensor *S, const conf_tensor *D,
                         const conf_tensor *D2, uint64_t seed, uint64_t i) {
    ampx_dtype ddt = D->dt;
    double x = S->v[i], got = conf_tensor_get(D, i), rne = ref_round(ddt, x);
    uint32_t gb = conf_tensor_bits(D, D->back, i);
    double lo, hi;
    ref_neighbours(ddt, x, &lo, &hi);
    if (!(got == lo || got == hi || got == rne) || (got == 0.0 && signbit(got) != signbit(x))) {
        conf_fail(cc, "dst[%" PRIu64 "] = %.9g for source %a: not a neighbour (%.9g, %.9g)", i, got,
                  x, lo, hi);
        return -1;
    }
    if (gb != conf_tensor_bits(D2, D2->back, i)) {
        conf_fail(cc, "dst[%" PRIu64 "]: two runs with seed %" PRIu64 " differ (0x%x, 0x%x)", i,
                  seed, gb, conf_tensor_bits(D2, D2->back, i));
        return -1;
    }
    /* ... and exactly the one backend.h's random word picks: ampx_hash32(seed, i) */
    uint32_t rnd = ref_hash32(seed, i);
    double want  = ref_round_sr(ddt, x, rnd);
    uint32_t wb  = ref_encode(ddt, want) & (D->esz == 2 ? 0xffffu : 0xffffffffu);
    if (gb != wb) {
        conf_fail(cc,
                  "dst[%" PRIu64 "] = 0x%x (%.9g) for source %a with rnd 0x%08x, expected 0x%x "
                  "(%.9g): not the stochastic rounding of ampx_hash32(seed %" PRIu64 ", %" PRIu64
                  ")",
                  i, gb, got, x, rnd, wb, want, seed, i);
        return -1;
    }
    return 0;
}

/* Every element of dst: NaN for NaN, bit-exact nearest-even, or (D2 given) stochastic
 * rounding as cast_check_sr checks it. Returns 0, or -1 with the case failed. */
static int cast_check(conf_case_ctx *cc, const conf_tensor *S, const conf_tensor *D,
                      const conf_tensor *D2, uint64_t seed) {
    for (uint64_t i = 0; i < S->n; i++) {
        double x = S->v[i], got = conf_tensor_get(D, i);
        uint32_t gb = conf_tensor_bits(D, D->back, i);
        if (isnan(x)) {
            if (!isnan(got)) {
                conf_fail(cc, "dst[%" PRIu64 "] = %.9g for a NaN source", i, got);
                return -1;
            }
            continue;
        }
        double rne = ref_round(D->dt, x);
        if (D2) {
            if (cast_check_sr(cc, S, D, D2, seed, i)) return -1;
            continue;
        }
        uint32_t eb = ref_encode(D->dt, rne) & (D->esz == 2 ? 0xffffu : 0xffffffffu);
        if (gb != eb) {
            conf_fail(cc, "dst[%" PRIu64 "] = 0x%x (%.9g) for source %a, expected 0x%x (%.9g)", i,
                      gb, got, x, eb, rne);
            return -1;
        }
    }
    return 0;
}

/* Unbiased: within a block the share rounded up is p = (x - lo) / (hi - lo), up to binomial
 * noise (5 sigma) and the granularity of the random bits (2^-12). */
static void cast_check_bias(conf_case_ctx *cc, const conf_tensor *D, const double *block_x) {
    for (uint64_t blk = 0; blk < CAST_SR_BLOCKS; blk++) {
        double x = block_x[blk], lo, hi;
        ref_neighbours(D->dt, x, &lo, &hi);
        if (lo == hi || !isfinite(lo) || !isfinite(hi)) continue;
        uint64_t ups = 0;
        for (uint64_t i = blk * CAST_SR_BLOCK; i < (blk + 1) * CAST_SR_BLOCK; i++)
            ups += conf_tensor_get(D, i) == hi;
        double p = (x - lo) / (hi - lo), f = (double)ups / CAST_SR_BLOCK;
        double allowed = 5.0 * sqrt(p * (1.0 - p) / CAST_SR_BLOCK) + 0x1p-12;
        double dev     = fabs(f - p);
        if (dev / allowed > cc->worst) {
            cc->worst   = dev / allowed;
            cc->rep.err = dev;
            cc->rep.tol = allowed;
        }
        if (dev > allowed) {
            conf_fail(cc, "stochastic rounding of %a is biased: %.4f rounded up, expected %.4f", x,
                      f, p);
            return;
        }
    }
}

void conf_case_cast(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t n;
        int sr, mode;
    } cfgs[] = {
        /* mode 0 specials and ties, 1 random bit patterns, 2 values near the f16/bf16 ranges,
         * 3 SR bias blocks */
        {sizeof cast_specials / sizeof cast_specials[0], 0, 0},
        {1031, 0, 1},
        {1031, 1, 1},
        {CAST_SR_BLOCK * CAST_SR_BLOCKS, 1, 3},
        {4099, 0, 2},
        {1, 0, 2},
        {4099, 1, 2},
        {sizeof cast_specials / sizeof cast_specials[0], 1, 0},
        /* large tier */
        {100003, 1, 2},
        {150001, 0, 1},
    };
    uint64_t n = cfgs[variant].n;
    int sr = cfgs[variant].sr, mode = cfgs[variant].mode;
    ampx_dtype sdt = dts[0], ddt = dts[1];
    uint64_t seed              = conf_next(&cc->rng);
    static const char *modes[] = {"specials+ties", "random bits", "near range", "bias blocks"};
    conf_shape(cc, "n=%" PRIu64 " %s %s", n, sr ? "stochastic" : "nearest-even", modes[mode]);
    conf_tensor *S  = conf_tensor_new(cc, "src", sdt, n, CT_IN);
    conf_tensor *D  = conf_tensor_new(cc, "dst", ddt, n, CT_OUT);
    conf_tensor *D2 = sr ? conf_tensor_new(cc, "dst (repeat)", ddt, n, CT_OUT) : NULL;
    double *block_x = conf_alloc(cc, CAST_SR_BLOCKS * sizeof(double));
    if (!conf_ok(cc)) return;
    cast_fill(cc, S, ddt, mode, block_x);
    ampx_cast_args a = {
        sizeof a, sr ? AMPX_ROUND_STOCHASTIC : AMPX_ROUND_NEAREST_EVEN, n, seed, S->t, D->t};
    if (conf_upload(cc)) return;
    ampx_status st = call_cast(r, AMPX_OP_CAST, &a);
    if (st == AMPX_OK && D2) {
        ampx_cast_args a2 = a;
        a2.dst            = D2->t;
        st                = call_cast(r, AMPX_OP_CAST, &a2);
    }
    if (conf_finish_call(cc, "cast", st) || cast_check(cc, S, D, D2, seed)) return;
    if (mode == 3) cast_check_bias(cc, D, block_x);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_cast = {conf_case_cast, 10, 4, NULL};
