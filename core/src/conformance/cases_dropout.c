/* cases_dropout.c — conformance cases of DROPOUT (ABI 1.1). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_dropout, ampx_dropout_args)

// ---------------------------------------------------------------------------------------
// DROPOUT: the mask is the same bits on every backend, keep(i) = ampx_hash32(seed, offset +
// i) >= threshold, so it is checked element by element against reference.c's own hash. A
// dropped element must be +0 by its bits (x * 0 would give -0 for negative x and NaN for
// NaN or inf, which the specials variant holds); a kept one must be x * scale exactly: one
// f32 product then one rounding to y, or the exact product rounded once, as for SCALE.
// Variants compute the tensor in two calls with element offsets (the pieces must give the
// whole tensor's mask, and equal a single call bit for bit), work in place, put the counter
// past 2^32, and set the threshold to one element's own hash, which must be kept (>=).

typedef struct dropout_cfg {
    uint64_t n;
    double rate;     /* threshold = floor(rate 2^32), scale = (float)(1 / (1 - rate)) */
    float scale;     /* non-zero: this scale instead of the rate's */
    uint64_t offset; /* element index of x[0] in the mask's counter space */
    uint64_t split;  /* 0: one call; else two calls over [0, split) and [split, n) */
    int inplace;     /* y = x (where the dtypes match) */
    int mode;        /* 0 random values, 1 specials, 2 threshold = an element's own hash */
} dropout_cfg;

static const dropout_cfg dropout_cfgs[] = {
    {1, 0.5, 0.0f, 0, 0, 0, 0},
    {7, 0.1, 0.0f, 3, 0, 0, 0},
    {1000, 0.0, 0.0f, 0, 0, 0, 0}, /* threshold 0, scale 1: y = x */
    {4097, 0.9, 0.0f, 17, 0, 1, 0},
    {4099, 0.5, 0.0f, 0x100000005ull, 1237, 0, 0},
    {67, 0.5, 0.0f, 11, 0, 0, 1},
    {1031, 0.0, 1.25f, 0, 0, 0, 0}, /* threshold 0 keeps everything: y = 1.25 x */
    {1000, 0.0, 0.0f, (1ull << 40) + 1, 0, 0, 2},
    {4099, 0.25, 0.0f, 5, 2053, 1, 0},
    {4097, 0.99, 0.0f, 0xfffffffffffff000ull, 0, 0, 0}, /* the counter wraps past 2^64 */
    /* large tier: several chunks and threads; two pieces of more than 65536 each */
    {100003, 0.5, 0.0f, 12345, 0, 0, 0},
    {140001, 0.125, 0.0f, 7, 70001, 1, 0},
};

/* Specials: a dropped one must still be +0; a kept one NaN, inf or overflow to inf. */
static double dropout_special(ampx_dtype dt, uint64_t i, double x) {
    switch (i % 8) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return -0.0;
    case 4: return 0.0;
    case 5: return ref_max_finite(dt);
    case 6: return -ref_max_finite(dt);
    default: return x;
    }
}

void conf_case_dropout(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const dropout_cfg *c = &dropout_cfgs[variant];
    uint64_t n = c->n, split = c->split;
    int inp       = c->inplace && dts[0] == dts[1];
    uint64_t seed = conf_next(&cc->rng);
    uint32_t thr  = (uint32_t)floor(c->rate * 0x1p32);
    float scale   = c->scale != 0.0f ? c->scale : (float)(1.0 / (1.0 - c->rate));
    if (c->mode == 2) {
        /* the first element from n/2 on whose hash gives a rate in [1/4, 3/4]: as the
         * threshold itself it must be kept */
        uint64_t i = n / 2;
        while (i + 1 < n && ref_hash32(seed, c->offset + i) - 0x40000000u >= 0x80000000u)
            i++;
        thr   = ref_hash32(seed, c->offset + i);
        scale = (float)(1.0 / (1.0 - (double)thr * 0x1p-32));
    }
    conf_shape(cc, "n=%" PRIu64 " threshold=0x%08x scale=%.9g offset=%" PRIu64 "%s%s%s", n, thr,
               (double)scale, c->offset, split ? " in two pieces" : "", inp ? " in place" : "",
               c->mode == 1   ? " specials"
               : c->mode == 2 ? " threshold=own hash"
                              : "");
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], n, inp ? CT_INOUT : CT_IN);
    conf_tensor *Y  = inp ? X : conf_tensor_new(cc, "y", dts[1], n, CT_OUT);
    conf_tensor *Y1 = split ? conf_tensor_new(cc, "y (one call)", dts[1], n, CT_OUT) : NULL;
    double *ref     = conf_alloc(cc, n * sizeof(double));
    uint8_t *keep   = conf_alloc(cc, n);
    if (!conf_ok(cc)) goto done;
    conf_tensor_fill(cc, X, -2, 2);
    if (c->mode == 1)
        for (uint64_t i = 0; i < n; i++)
            conf_tensor_set(X, i, dropout_special(X->dt, i, X->v[i]));
    if (conf_upload(cc)) goto done;
    ampx_dropout_args a = {sizeof a, thr, n, seed, c->offset, scale, X->t, Y->t};
    ampx_status st      = AMPX_OK;
    if (split) {
        /* the whole tensor in one call first (it reads x before an in-place pass writes
         * it), then the same tensor as two pieces, each with its own element offset */
        ampx_dropout_args whole = a;
        whole.y                 = Y1->t;
        ampx_dropout_args lo = a, hi = a;
        lo.n = split;
        hi.n = n - split;
        hi.offset += split;
        hi.x.offset += split * X->esz;
        hi.y.offset += split * Y->esz;
        st = call_dropout(r, AMPX_OP_DROPOUT, &whole);
        if (st == AMPX_OK) st = call_dropout(r, AMPX_OP_DROPOUT, &lo);
        if (st == AMPX_OK) st = call_dropout(r, AMPX_OP_DROPOUT, &hi);
    } else {
        st = call_dropout(r, AMPX_OP_DROPOUT, &a);
    }
    if (conf_finish_call(cc, "dropout", st)) goto done;
    ref_dropout(n, thr, seed, c->offset, scale, X->v, ref, keep);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t gb = conf_tensor_bits(Y, Y->back, i);
        double got  = conf_tensor_get(Y, i);
        uint32_t h  = ref_hash32(seed, c->offset + i);
        if (!keep[i]) {
            if (gb != 0) {
                conf_fail(cc,
                          "y[%" PRIu64 "] = %.9g (0x%x), expected +0: dropped, ampx_hash32(seed, "
                          "offset + %" PRIu64 ") = 0x%08x < threshold 0x%08x",
                          i, got, gb, i, h, thr);
                goto done;
            }
            continue;
        }
        /* kept: one f32 product rounded to y (two roundings), or the exact one rounded once */
        double e1 = ref_round(Y->dt, ref_round(AMPX_F32, ref[i])), e2 = ref_round(Y->dt, ref[i]);
        if (isnan(e1) ? isnan(got) : (got == e1 || got == e2)) continue;
        if (gb == 0 && ref[i] != 0.0)
            conf_fail(cc,
                      "y[%" PRIu64 "] = 0, expected %.9g: kept, ampx_hash32(seed, offset + %" PRIu64
                      ") = 0x%08x >= threshold 0x%08x",
                      i, e1, i, h, thr);
        else
            conf_fail(cc, "y[%" PRIu64 "] = %.9g, expected exactly %.9g (x = %.9g, scale %.9g)", i,
                      got, e1, X->v[i], (double)scale);
        goto done;
    }
    if (Y1)
        for (uint64_t i = 0; i < n; i++) {
            uint32_t gb = conf_tensor_bits(Y, Y->back, i), wb = conf_tensor_bits(Y1, Y1->back, i);
            if (gb != wb) {
                conf_fail(cc,
                          "y[%" PRIu64 "] = 0x%x from two pieces (split at %" PRIu64
                          "), 0x%x from one call",
                          i, gb, split, wb);
                goto done;
            }
        }
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_dropout = {conf_case_dropout, 12, 6, NULL};
