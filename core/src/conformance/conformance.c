/* conformance.c — ampx_conformance_run: every (op, dtypes) a backend supports, checked
 * against the double-precision reference in reference.c.
 *
 * For each op the sweep enumerates every dtype combination its heading in backend.h allows
 * and asks supports(). A rejected combination is reported UNSUPPORTED after checking that
 * calling the op anyway returns an error. An accepted one runs over several awkward shapes
 * (1, primes, sizes off every power-of-two block, one long reduction) on seeded random data,
 * and in the full sweep over a large tier too: the last variants of each table, past the
 * sizes where backends change code paths (> 65536 elements, several GEMM tiles and chunks):
 *   - every tensor lives in its own buffer between guard bytes, at a byte offset that is
 *     sometimes 0 and usually not; guards must come back unchanged;
 *   - outputs are poisoned with a NaN pattern first, so an element the op forgets shows;
 *     outputs that accumulate start from random values the reference starts from too;
 *   - inputs must come back bitwise unchanged (except where the op works in place);
 *   - results are compared with the reference computed in double from the same rounded
 *     inputs, normwise and elementwise, against the tolerance table below; exact ops
 *     (casts, unscale, the scaler, counts, copies) are compared bit for bit.
 * Every case owns its host and device memory through one conf_case_ctx and releases it in
 * cc_end on every path, so a failing op only records a failed case.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"
#include "conformance/reference.h"

// ---------------------------------------------------------------------------------------
// Tolerance table
//
// An op that accumulates K terms in f32 and rounds once to its output dtype has, per
// element and relative to the size of its terms (mag), an error of at most about
//     u(out) |result|            (the final rounding; u = 2^-24 f32, 2^-8 bf16, 2^-11 f16)
//   + K 2^-24 mag                (f32 accumulation, worst case linear in K)
// The suite allows twice the rounding term and four times the accumulation term:
//     elementwise  |got - ref| <= 2 u(out) |ref| + 4 K 2^-24 mag + floor
//     normwise     ||got - ref||_2 / ||ref||_2 <= 2 u(out) + 4 K 2^-24 + floor sqrt(n) / ||ref||_2
// floor = K 2^-126 + the output's smallest subnormal covers flush-to-zero of f32
// intermediates and rounding near zero. K per op (also in docs/CONFORMANCE.md):
//   GEMM k+4 | ADD 3 | BIAS_GRAD rows+1 | ACT (transcendental) 16 | SOFTMAX cols+16 |
//   XENT cols+rows+16 | LAYERNORM cols+16 (bwd dgamma/dbeta rows+cols+16) |
//   BATCHNORM N+16 | EMBEDDING_BWD max duplicates+1 | REDUCE cols+2 |
//   SUM_SQUARES n+2 | GRAD_STATS n+4 | SGD/ADAMW 4 (mag carries the op count)
// Exact (bit for bit): CAST nearest-even and stochastic (rnd = ampx_hash32(seed, i)), SCALE
// and MUL (one f32 product, then one rounding to the output, or one rounding of the exact
// product), ACT relu, EMBEDDING_FWD, UNSCALE_CHECK, GRAD_STATS counts and max,
// SCALER_UPDATE, optimizer copies (stochastic: rnd = ampx_hash32(seed + t, i)).

#define CONF_F32_UNIT 0x1p-24 /* one f32 rounding */

static double conf_tol(ampx_dtype out, double k) {
    return 2.0 * ref_unit_roundoff(out) + 4.0 * k * CONF_F32_UNIT;
}

/* Large reductions: the bound grows with K (4% of the terms' size at K = 165000), more than
 * a dropped tail chunk of a few thousand terms would move the result. A sentinel, the
 * smallest power of two s >= 4 tol_rel mag, placed last in the reduction makes losing it
 * alone exceed the bound (s > tol_rel (mag + s) for tol_rel < 3/4), while the rest of the
 * data stays typical. Powers of two are exact in every float dtype. */
#define CONF_LARGE 65536u /* a reduction this long gets a sentinel */

static double conf_sentinel(double tol_rel, double mag) {
    return ldexp(1.0, (int)ceil(log2(4.0 * tol_rel * mag)));
}

#define CONF_GUARD_BYTE 0xC3u /* fills the guard regions around every tensor */
#define CONF_TRAIL 64u        /* guard bytes after each tensor */

// ---------------------------------------------------------------------------------------
// Random numbers: splitmix64, seeded per case so a single op's run sees the same data as
// the full sweep.

static uint64_t conf_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t conf_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    return conf_mix(*s);
}

static double conf_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * ((double)(conf_next(s) >> 11) * 0x1p-53);
}

// ---------------------------------------------------------------------------------------
// A run, a case, and the tensors of a case

typedef struct conf_run {
    ampx_backend *be;
    const ampx_backend_iface *ifc;
    ampx_context *ctx;
    uint64_t seed;
    int quick;
    ampx_conf_report_fn report;
    void *user;
    ampx_conf_summary *sum;
    ampx_status fatal; /* AMPX_ERR_DEVICE once the device has failed: the sweep stops */
} conf_run;

enum { CT_IN = 0, CT_OUT = 1, CT_INOUT = 2 };

typedef struct conf_tensor {
    const char *name;
    ampx_tensor t; /* what the op sees: buffer, byte offset (the lead guard), dtype */
    ampx_dtype dt;
    uint64_t n, esz, lead, bytes, total;
    int kind;
    uint8_t *image; /* guards + data as written */
    uint8_t *back;  /* guards + data as read back after the op */
    double *v;      /* the written values, exactly, as double */
} conf_tensor;

#define CC_MAX_TENSORS 64

typedef struct conf_case_ctx {
    conf_run *run;
    ampx_conf_case rep;
    double worst; /* largest err / tol of the comparisons so far */
    int probe;    /* 1: supports() said no; 2: invalid dtypes; the call must fail */
    uint64_t rng;
    conf_tensor *tensors[CC_MAX_TENSORS];
    uint32_t n_tensors;
    void **allocs;
    uint32_t n_allocs, cap_allocs;
} conf_case_ctx;

static int cc_ok(const conf_case_ctx *cc) {
    return cc->rep.verdict != AMPX_CONF_FAIL;
}

/* Records a failure; the first message is kept (later ones are usually consequences). */
static void cc_fail(conf_case_ctx *cc, const char *fmt, ...) {
    if (cc->rep.verdict == AMPX_CONF_FAIL) return;
    cc->rep.verdict = AMPX_CONF_FAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc->rep.message, sizeof cc->rep.message, fmt, ap);
    va_end(ap);
}

static void cc_shape(conf_case_ctx *cc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc->rep.shape, sizeof cc->rep.shape, fmt, ap);
    va_end(ap);
}

/* Zeroed host memory owned by the case; NULL (and a failed case) when out of memory. */
static void *cc_alloc(conf_case_ctx *cc, uint64_t bytes) {
    if (cc->n_allocs == cc->cap_allocs) {
        uint32_t cap = cc->cap_allocs ? 2 * cc->cap_allocs : 64;
        void **p     = realloc(cc->allocs, cap * sizeof *p);
        if (!p) {
            cc_fail(cc, "host out of memory");
            return NULL;
        }
        cc->allocs     = p;
        cc->cap_allocs = cap;
    }
    void *p = calloc(1, bytes ? (size_t)bytes : 1);
    if (!p) {
        cc_fail(cc, "host out of memory (%" PRIu64 " bytes)", bytes);
        return NULL;
    }
    cc->allocs[cc->n_allocs++] = p;
    return p;
}

static void cc_begin(conf_run *r, conf_case_ctx *cc, uint32_t op, const ampx_dtype *dts,
                     uint32_t nd, int variant, int probe) {
    memset(cc, 0, sizeof *cc);
    cc->run          = r;
    cc->probe        = probe;
    cc->rep.op       = op;
    cc->rep.n_dtypes = nd;
    for (uint32_t i = 0; i < nd && i < 4; i++)
        cc->rep.dtypes[i] = dts[i];
    cc->rep.verdict = probe == 1 ? AMPX_CONF_UNSUPPORTED : AMPX_CONF_PASS;
    uint64_t key    = conf_mix(r->seed ^ conf_mix(op + 1));
    for (uint32_t i = 0; i < nd; i++)
        key = conf_mix(key ^ (uint64_t)(dts[i] + 7) << (8 * i));
    cc->rng = conf_mix(key ^ conf_mix((uint64_t)variant * 0x100 + (uint64_t)probe));
}

/* Frees every buffer and host allocation of the case, reports it and counts it. */
static void cc_end(conf_case_ctx *cc) {
    conf_run *r = cc->run;
    for (uint32_t i = 0; i < cc->n_tensors; i++)
        if (cc->tensors[i]->t.buf) r->ifc->buffer_free(r->ctx, cc->tensors[i]->t.buf);
    for (uint32_t i = 0; i < cc->n_allocs; i++)
        free(cc->allocs[i]);
    free(cc->allocs);
    cc->allocs = NULL;
    if (cc->rep.verdict == AMPX_CONF_PASS)
        r->sum->passed++;
    else if (cc->rep.verdict == AMPX_CONF_FAIL)
        r->sum->failed++;
    else
        r->sum->unsupported++;
    if (r->report) r->report(r->user, &cc->rep);
}

/* The NaN pattern written over outputs before a call (quiet NaNs with a payload, and a
 * recognisable garbage integer for i32). */
static uint32_t conf_poison(ampx_dtype dt) {
    switch (dt) {
    case AMPX_F32: return 0x7fc5a5a5u;
    case AMPX_BF16: return 0x7fc5u;
    case AMPX_F16: return 0x7e5au;
    default: return 0x5a5a5a5au;
    }
}

static void ct_put_bits(conf_tensor *ct, uint8_t *img, uint64_t i, uint32_t bits) {
    uint8_t *p = img + ct->lead + i * ct->esz;
    if (ct->esz == 4)
        memcpy(p, &bits, 4);
    else {
        uint16_t h = (uint16_t)bits;
        memcpy(p, &h, 2);
    }
}

static uint32_t ct_bits(const conf_tensor *ct, const uint8_t *img, uint64_t i) {
    const uint8_t *p = img + ct->lead + i * ct->esz;
    if (ct->esz == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* A tensor of n elements in a fresh device buffer. Its lead guard (= its byte offset) is
 * 0, 16 or 64 + 3 elements, picked at random; 64 guard bytes follow. Outputs start
 * poisoned; inputs are filled by the caller. Returns NULL (case failed) on error. */
static conf_tensor *ct_new(conf_case_ctx *cc, const char *name, ampx_dtype dt, uint64_t n,
                           int kind) {
    conf_run *r = cc->run;
    if (!cc_ok(cc)) return NULL;
    if (cc->n_tensors == CC_MAX_TENSORS) {
        cc_fail(cc, "internal: too many tensors in one case");
        return NULL;
    }
    conf_tensor *ct = cc_alloc(cc, sizeof *ct);
    if (!ct) return NULL;
    uint64_t esz = ampx_dtype_size(dt);
    if (esz == 0) esz = 4;
    uint64_t pick = conf_next(&cc->rng) % 4;
    ct->name      = name;
    ct->dt        = dt;
    ct->n         = n;
    ct->esz       = esz;
    ct->kind      = kind;
    ct->lead      = pick == 0 ? 0 : pick == 1 ? 16 : 64 + 3 * esz;
    ct->bytes     = n * esz;
    ct->total     = ct->lead + ct->bytes + CONF_TRAIL;
    ct->image     = cc_alloc(cc, ct->total);
    ct->v         = cc_alloc(cc, n * sizeof(double));
    if (!ct->image || !ct->v) return NULL;
    memset(ct->image, CONF_GUARD_BYTE, ct->total);
    uint32_t poison = conf_poison(dt);
    for (uint64_t i = 0; i < n; i++) {
        ct_put_bits(ct, ct->image, i, poison);
        ct->v[i] = NAN;
    }
    ct->t.offset   = ct->lead;
    ct->t.dtype    = dt;
    ampx_status st = r->ifc->buffer_alloc(r->ctx, ct->total, &ct->t.buf);
    if (st != AMPX_OK || !ct->t.buf) {
        ct->t.buf = NULL;
        cc_fail(cc, "buffer_alloc(%" PRIu64 ") for %s: %s: %s", ct->total, name,
                ampx_status_name(st), ampx_backend_last_error(r->be));
        return NULL;
    }
    cc->tensors[cc->n_tensors++] = ct;
    return ct;
}

/* Sets element i to x, which must be representable in the tensor's dtype (or inf/NaN). */
static void ct_set(conf_tensor *ct, uint64_t i, double x) {
    ct->v[i] = x;
    ct_put_bits(ct, ct->image, i, ref_encode(ct->dt, x));
}

/* Sets element i to raw bits (NaN payloads, random bit patterns). */
static void ct_set_bits(conf_tensor *ct, uint64_t i, uint32_t bits) {
    ct_put_bits(ct, ct->image, i, bits);
    ct->v[i] = ref_decode(ct->dt, bits);
}

static void ct_fill(conf_case_ctx *cc, conf_tensor *ct, double lo, double hi) {
    for (uint64_t i = 0; i < ct->n; i++)
        ct_set(ct, i, ref_round(ct->dt, conf_uniform(&cc->rng, lo, hi)));
}

static double ct_get(const conf_tensor *ct, uint64_t i) {
    return ref_decode(ct->dt, ct_bits(ct, ct->back, i));
}

/* Writes every tensor (guards and all) to its buffer. */
static int cc_upload(conf_case_ctx *cc) {
    conf_run *r = cc->run;
    if (!cc_ok(cc)) return -1;
    for (uint32_t i = 0; i < cc->n_tensors; i++) {
        conf_tensor *ct = cc->tensors[i];
        ampx_status st  = r->ifc->buffer_write(r->ctx, ct->t.buf, 0, ct->image, ct->total);
        if (st != AMPX_OK) {
            cc_fail(cc, "buffer_write of %s: %s: %s", ct->name, ampx_status_name(st),
                    ampx_backend_last_error(r->be));
            return -1;
        }
    }
    return 0;
}

/* Reads every tensor back; checks guards of all and the contents of inputs. */
static int cc_download(conf_case_ctx *cc) {
    conf_run *r = cc->run;
    for (uint32_t i = 0; i < cc->n_tensors; i++) {
        conf_tensor *ct = cc->tensors[i];
        ct->back        = cc_alloc(cc, ct->total);
        if (!ct->back) return -1;
        ampx_status st = r->ifc->buffer_read(r->ctx, ct->t.buf, 0, ct->back, ct->total);
        if (st != AMPX_OK) {
            cc_fail(cc, "buffer_read of %s: %s: %s", ct->name, ampx_status_name(st),
                    ampx_backend_last_error(r->be));
            return -1;
        }
        for (uint64_t b = 0; b < ct->total; b++) {
            int in_data = b >= ct->lead && b < ct->lead + ct->bytes;
            if (!in_data && ct->back[b] != CONF_GUARD_BYTE) {
                if (b < ct->lead)
                    cc_fail(cc, "guard before %s overwritten at byte -%" PRIu64, ct->name,
                            ct->lead - b);
                else
                    cc_fail(cc, "guard after %s overwritten at byte +%" PRIu64, ct->name,
                            b - ct->lead - ct->bytes);
                return -1;
            }
        }
        if (ct->kind == CT_IN &&
            memcmp(ct->image + ct->lead, ct->back + ct->lead, ct->bytes) != 0) {
            for (uint64_t e = 0; e < ct->n; e++)
                if (ct_bits(ct, ct->image, e) != ct_bits(ct, ct->back, e)) {
                    cc_fail(cc, "input %s modified at element %" PRIu64 " (0x%x -> 0x%x)", ct->name,
                            e, ct_bits(ct, ct->image, e), ct_bits(ct, ct->back, e));
                    break;
                }
            return -1;
        }
    }
    return 0;
}

/* Finishes a call: synchronizes, then in probe mode checks that it failed; otherwise
 * checks it succeeded and reads everything back. Returns non-zero when the case should
 * stop here (failed, or a probe that is done). */
static int cc_finish_call(conf_case_ctx *cc, const char *what, ampx_status st) {
    conf_run *r = cc->run;
    if (st == AMPX_OK) st = r->ifc->synchronize(r->ctx);
    if (st == AMPX_ERR_DEVICE && r->fatal == AMPX_OK) r->fatal = st; /* nothing after is sound */
    if (cc->probe) {
        if (st == AMPX_OK)
            cc_fail(cc, "%s: supports() rejects these dtypes but the op returned AMPX_OK", what);
        else
            snprintf(cc->rep.message, sizeof cc->rep.message, "supports() = 0; the op returns %s",
                     ampx_status_name(st));
        return 1;
    }
    if (st != AMPX_OK) {
        cc_fail(cc, "%s returned %s%s: %s", what, ampx_status_name(st),
                st == AMPX_ERR_UNSUPPORTED ? " although supports() accepted the dtypes" : "",
                ampx_backend_last_error(r->be));
        return 1;
    }
    return cc_download(cc) != 0;
}

// ---------------------------------------------------------------------------------------
// Comparison

#define CMP_NORM 1  /* normwise relative error against conf_tol */
#define CMP_ELEM 2  /* elementwise bound against |ref| or mag */
#define CMP_EXACT 4 /* values equal (NaN matches NaN) */

/* Compares got with ref over n values; dt is the output dtype, k the reduction length of
 * the tolerance table, mag (optional) the size of the terms per element. */
static void cc_compare(conf_case_ctx *cc, const char *what, const double *got, const double *ref,
                       const double *mag, uint64_t n, ampx_dtype dt, double k, int flags) {
    double d2 = 0.0, r2 = 0.0, worst_ratio = 0.0;
    uint64_t worst_i = 0;
    double floor_abs = k * 0x1p-126 + ref_min_subnormal(dt);
    for (uint64_t i = 0; i < n; i++) {
        double g = got[i], e = ref[i];
        if (!isfinite(e) || !isfinite(g)) {
            int same = (isnan(e) && isnan(g)) || g == e;
            if (!same) {
                cc_fail(cc, "%s[%" PRIu64 "] = %.9g, expected %.9g", what, i, g, e);
                return;
            }
            continue;
        }
        if (flags & CMP_EXACT) {
            if (g != e) {
                cc_fail(cc, "%s[%" PRIu64 "] = %.9g, expected exactly %.9g", what, i, g, e);
                return;
            }
            continue;
        }
        d2 += (g - e) * (g - e);
        r2 += e * e;
        if (flags & CMP_ELEM) {
            double m = mag ? mag[i] : fabs(e);
            double bound =
                2.0 * ref_unit_roundoff(dt) * fabs(e) + 4.0 * k * CONF_F32_UNIT * m + floor_abs;
            double ratio = fabs(g - e) / bound;
            if (ratio > worst_ratio) {
                worst_ratio = ratio;
                worst_i     = i;
            }
        }
    }
    if (flags & CMP_EXACT) return;
    if ((flags & CMP_ELEM) && worst_ratio > 0.0 && worst_ratio >= cc->worst) {
        uint64_t i  = worst_i;
        cc->worst   = worst_ratio;
        cc->rep.err = fabs(got[i] - ref[i]); /* absolute, against the element's bound */
        cc->rep.tol = cc->rep.err / worst_ratio;
    }
    if ((flags & CMP_ELEM) && worst_ratio > 1.0) {
        uint64_t i = worst_i;
        cc_fail(cc, "%s[%" PRIu64 "] = %.9g, expected %.9g: off by %.3g, %.3g times the bound",
                what, i, got[i], ref[i], fabs(got[i] - ref[i]), worst_ratio);
    }
    if (flags & CMP_NORM) {
        double err = sqrt(d2) / fmax(sqrt(r2), DBL_MIN);
        if (r2 == 0.0 && d2 == 0.0) err = 0.0;
        /* the table's relative bound, plus the absolute floor per element (outputs that are
         * mostly subnormal in the output dtype round to its subnormal grid) */
        double tol = conf_tol(dt, k) + floor_abs * sqrt((double)n) / fmax(sqrt(r2), DBL_MIN);
        if (err / tol >= cc->worst) {
            cc->worst   = err / tol;
            cc->rep.err = err;
            cc->rep.tol = tol;
        }
        if (err > tol)
            cc_fail(cc, "%s: normwise relative error %.3g > tolerance %.3g", what, err, tol);
    }
}

/* got[] of an output tensor as doubles (case-owned). */
static double *cc_values(conf_case_ctx *cc, const conf_tensor *ct) {
    double *g = cc_alloc(cc, ct->n * sizeof(double));
    if (g)
        for (uint64_t i = 0; i < ct->n; i++)
            g[i] = ct_get(ct, i);
    return g;
}

/* Elementwise: got must equal one of two candidates (NaN matches NaN). */
static void cc_expect_one_of(conf_case_ctx *cc, const char *what, const conf_tensor *ct,
                             const double *e1, const double *e2) {
    for (uint64_t i = 0; i < ct->n; i++) {
        double g = ct_get(ct, i);
        if (isnan(g) && (isnan(e1[i]) || isnan(e2[i]))) continue;
        if (g == e1[i] || g == e2[i]) continue;
        cc_fail(cc, "%s[%" PRIu64 "] = %.9g, expected exactly %.9g", what, i, g, e1[i]);
        return;
    }
}

// ---------------------------------------------------------------------------------------
// Typed calls through the op slots

#define CONF_DEFINE_CALL(fname, argtype)                                                           \
    static ampx_status fname(conf_run *r, uint32_t op, const argtype *a) {                         \
        void *slot = ampx_backend_op_slot(r->be, op);                                              \
        if (!slot) return AMPX_ERR_UNSUPPORTED;                                                    \
        ampx_status (*fn)(ampx_context *, const argtype *);                                        \
        memcpy(&fn, &slot, sizeof fn);                                                             \
        return fn(r->ctx, a);                                                                      \
    }

CONF_DEFINE_CALL(call_gemm, ampx_gemm_args)
CONF_DEFINE_CALL(call_cast, ampx_cast_args)
CONF_DEFINE_CALL(call_add, ampx_add_args)
CONF_DEFINE_CALL(call_mul, ampx_mul_args)
CONF_DEFINE_CALL(call_scale, ampx_scale_args)
CONF_DEFINE_CALL(call_bias_grad, ampx_bias_grad_args)
CONF_DEFINE_CALL(call_act, ampx_act_args)
CONF_DEFINE_CALL(call_softmax, ampx_softmax_args)
CONF_DEFINE_CALL(call_xent, ampx_softmax_xent_args)
CONF_DEFINE_CALL(call_layernorm, ampx_layernorm_args)
CONF_DEFINE_CALL(call_batchnorm, ampx_batchnorm_args)
CONF_DEFINE_CALL(call_embedding, ampx_embedding_args)
CONF_DEFINE_CALL(call_reduce, ampx_reduce_args)
CONF_DEFINE_CALL(call_sum_squares, ampx_sum_squares_args)
CONF_DEFINE_CALL(call_unscale, ampx_unscale_check_args)
CONF_DEFINE_CALL(call_grad_stats, ampx_grad_stats_args)
CONF_DEFINE_CALL(call_scaler_update, ampx_scaler_update_args)
CONF_DEFINE_CALL(call_sgd, ampx_sgd_args)
CONF_DEFINE_CALL(call_adamw, ampx_adamw_args)

static const ampx_tensor conf_null_tensor = {NULL, 0, AMPX_F32};

// ---------------------------------------------------------------------------------------
// GEMM: padding of A and B holds NaN (an op that reads it poisons C); padding of C holds
// random values that must survive bitwise; beta == 0 leaves C's active part poisoned.

typedef struct gemm_cfg {
    uint64_t m, n, k, batch;
    int ta, tb;
    uint64_t pad_a, pad_b, pad_c, gap; /* extra leading dimension; extra batch stride */
    float alpha, beta;
} gemm_cfg;

static const gemm_cfg gemm_cfgs[] = {
    {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f},
    {7, 13, 31, 1, 0, 1, 3, 0, 2, 0, 1.0f, 0.5f},
    {13, 7, 127, 2, 1, 0, 0, 5, 0, 7, 0.75f, 0.0f},
    {31, 17, 1031, 1, 1, 1, 1, 2, 3, 0, 1.0f, -1.25f},
    {67, 45, 100, 3, 0, 0, 5, 0, 1, 3, -0.5f, 1.0f},
    {5, 129, 64, 1, 1, 1, 0, 0, 0, 0, 1.0f, 0.0f},
    {16, 9, 0, 2, 0, 1, 0, 0, 4, 2, 1.0f, 0.75f},
    /* large tier (full sweep only): several MC x NC tiles, KC slices and threads */
    {300, 260, 270, 1, 0, 0, 1, 3, 2, 0, 1.0f, 0.5f},
    {129, 300, 257, 2, 1, 1, 3, 1, 5, 11, -0.75f, 0.0f},
};

/* The batched, doubly transposed large variant costs the double reference ~20M products
 * per combination: it runs where A and B share a dtype (9 of 27 combinations, which still
 * put every dtype in every slot). */
#define GEMM_LARGE_SUBSET 8

static int gemm_runs(const ampx_dtype *dts, int variant) {
    return variant != GEMM_LARGE_SUBSET || dts[0] == dts[1];
}

static void case_gemm(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const gemm_cfg *g = &gemm_cfgs[variant];
    uint64_t rows_a = g->ta ? g->k : g->m, cols_a = g->ta ? g->m : g->k;
    uint64_t rows_b = g->tb ? g->n : g->k, cols_b = g->tb ? g->k : g->n;
    uint64_t lda = cols_a + g->pad_a, ldb = cols_b + g->pad_b, ldc = g->n + g->pad_c;
    if (lda == 0) lda = 1;
    if (ldb == 0) ldb = 1;
    uint64_t sa = rows_a * lda + g->gap, sb = rows_b * ldb + g->gap, sc = g->m * ldc + g->gap;
    uint64_t na = sa * (g->batch - 1) + rows_a * lda, nb = sb * (g->batch - 1) + rows_b * ldb;
    uint64_t nc = sc * (g->batch - 1) + g->m * ldc;
    cc_shape(cc,
             "m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64 " batch=%" PRIu64 "%s%s lda=%" PRIu64
             " ldb=%" PRIu64 " ldc=%" PRIu64 " alpha=%g beta=%g",
             g->m, g->n, g->k, g->batch, g->ta ? " tA" : "", g->tb ? " tB" : "", lda, ldb, ldc,
             (double)g->alpha, (double)g->beta);
    conf_tensor *A  = ct_new(cc, "A", dts[0], na, CT_IN);
    conf_tensor *B  = ct_new(cc, "B", dts[1], nb, CT_IN);
    conf_tensor *C  = ct_new(cc, "C", dts[2], nc, CT_INOUT);
    uint8_t *active = cc_alloc(cc, nc);
    double *ref = cc_alloc(cc, nc * sizeof(double)), *mag = cc_alloc(cc, nc * sizeof(double));
    double *gv = cc_alloc(cc, nc * sizeof(double));
    if (!cc_ok(cc)) goto done;
    for (uint64_t b = 0; b < g->batch; b++) {
        for (uint64_t i = 0; i < rows_a; i++)
            for (uint64_t j = 0; j < cols_a; j++)
                ct_set(A, b * sa + i * lda + j, ref_round(A->dt, conf_uniform(&cc->rng, -1, 1)));
        for (uint64_t i = 0; i < rows_b; i++)
            for (uint64_t j = 0; j < cols_b; j++)
                ct_set(B, b * sb + i * ldb + j, ref_round(B->dt, conf_uniform(&cc->rng, -1, 1)));
        for (uint64_t i = 0; i < g->m; i++)
            for (uint64_t j = 0; j < g->n; j++)
                active[b * sc + i * ldc + j] = 1;
    }
    for (uint64_t e = 0; e < nc; e++) /* padding: random, must survive; active: see above */
        if (!active[e] || g->beta != 0.0f)
            ct_set(C, e, ref_round(C->dt, conf_uniform(&cc->rng, -1, 1)));
    ampx_gemm_args a = {sizeof a,
                        (uint32_t)g->ta,
                        (uint32_t)g->tb,
                        g->m,
                        g->n,
                        g->k,
                        g->batch,
                        lda,
                        ldb,
                        ldc,
                        sa,
                        sb,
                        sc,
                        g->alpha,
                        g->beta,
                        A->t,
                        B->t,
                        C->t};
    if (cc_upload(cc) || cc_finish_call(cc, "gemm", call_gemm(r, AMPX_OP_GEMM, &a))) goto done;
    memcpy(ref, C->v, nc * sizeof(double));
    ref_gemm(g->ta, g->tb, g->m, g->n, g->k, g->batch, A->v, lda, sa, B->v, ldb, sb, g->alpha,
             g->beta, ref, ldc, sc, mag);
    uint64_t na_ = 0;
    for (uint64_t e = 0; e < nc; e++) {
        if (!active[e]) {
            if (ct_bits(C, C->image, e) != ct_bits(C, C->back, e)) {
                cc_fail(cc, "C[%" PRIu64 "] outside the m x n blocks was modified", e);
                goto done;
            }
            continue;
        }
        gv[na_]    = ct_get(C, e);
        ref[na_]   = ref[e];
        mag[na_++] = mag[e];
    }
    cc_compare(cc, "C", gv, ref, mag, na_, C->dt, (double)g->k + 4, CMP_NORM | CMP_ELEM);
done:
    return;
}

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

static void case_cast(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
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
    cc_shape(cc, "n=%" PRIu64 " %s %s", n, sr ? "stochastic" : "nearest-even", modes[mode]);
    conf_tensor *S  = ct_new(cc, "src", sdt, n, CT_IN);
    conf_tensor *D  = ct_new(cc, "dst", ddt, n, CT_OUT);
    conf_tensor *D2 = sr ? ct_new(cc, "dst (repeat)", ddt, n, CT_OUT) : NULL;
    double *block_x = cc_alloc(cc, CAST_SR_BLOCKS * sizeof(double));
    if (!cc_ok(cc)) goto done;
    for (uint64_t i = 0; i < n; i++) {
        if (mode == 0)
            ct_set(S, i, ref_round(sdt, cast_specials[i]));
        else if (mode == 1) {
            uint32_t bits = (uint32_t)conf_next(&cc->rng);
            ct_set_bits(S, i, S->esz == 2 ? bits & 0xffffu : bits);
        } else if (mode == 2) {
            double x =
                ldexp(conf_uniform(&cc->rng, 1.0, 2.0), (int)(conf_next(&cc->rng) % 46) - 28);
            ct_set(S, i, ref_round(sdt, (conf_next(&cc->rng) & 1) ? -x : x));
        } else {
            /* A block of one value that dst cannot hold (when the pair narrows at all). */
            uint64_t blk = i / CAST_SR_BLOCK;
            if (i % CAST_SR_BLOCK == 0) {
                double x = 0.0;
                for (int tries = 0; tries < 64; tries++) {
                    int e = ddt == AMPX_F16 && sdt == AMPX_BF16
                                ? -20 - (int)(conf_next(&cc->rng) % 4)
                                : (int)(conf_next(&cc->rng) % 7) - 3;
                    x     = ref_round(sdt, ldexp(conf_uniform(&cc->rng, 1.0, 2.0), e));
                    if (ref_round(ddt, x) != x) break;
                }
                block_x[blk] = x;
            }
            ct_set(S, i, block_x[blk]);
        }
    }
    ampx_cast_args a = {
        sizeof a, sr ? AMPX_ROUND_STOCHASTIC : AMPX_ROUND_NEAREST_EVEN, n, seed, S->t, D->t};
    if (cc_upload(cc)) goto done;
    ampx_status st = call_cast(r, AMPX_OP_CAST, &a);
    if (st == AMPX_OK && D2) {
        ampx_cast_args a2 = a;
        a2.dst            = D2->t;
        st                = call_cast(r, AMPX_OP_CAST, &a2);
    }
    if (cc_finish_call(cc, "cast", st)) goto done;
    for (uint64_t i = 0; i < n; i++) {
        double x = S->v[i], got = ct_get(D, i);
        uint32_t gb = ct_bits(D, D->back, i);
        if (isnan(x)) {
            if (!isnan(got)) {
                cc_fail(cc, "dst[%" PRIu64 "] = %.9g for a NaN source", i, got);
                goto done;
            }
            continue;
        }
        double rne = ref_round(ddt, x);
        if (!sr) {
            uint32_t eb = ref_encode(ddt, rne) & (D->esz == 2 ? 0xffffu : 0xffffffffu);
            if (gb != eb) {
                cc_fail(cc, "dst[%" PRIu64 "] = 0x%x (%.9g) for source %a, expected 0x%x (%.9g)", i,
                        gb, got, x, eb, rne);
                goto done;
            }
            continue;
        }
        double lo, hi;
        ref_neighbours(ddt, x, &lo, &hi);
        if (!(got == lo || got == hi || got == rne) || (got == 0.0 && signbit(got) != signbit(x))) {
            cc_fail(cc, "dst[%" PRIu64 "] = %.9g for source %a: not a neighbour (%.9g, %.9g)", i,
                    got, x, lo, hi);
            goto done;
        }
        if (gb != ct_bits(D2, D2->back, i)) {
            cc_fail(cc, "dst[%" PRIu64 "]: two runs with seed %" PRIu64 " differ (0x%x, 0x%x)", i,
                    seed, gb, ct_bits(D2, D2->back, i));
            goto done;
        }
        /* ... and exactly the one backend.h's random word picks: ampx_hash32(seed, i) */
        uint32_t rnd = ref_hash32(seed, i);
        double want  = ref_round_sr(ddt, x, rnd);
        uint32_t wb  = ref_encode(ddt, want) & (D->esz == 2 ? 0xffffu : 0xffffffffu);
        if (gb != wb) {
            cc_fail(cc,
                    "dst[%" PRIu64 "] = 0x%x (%.9g) for source %a with rnd 0x%08x, expected 0x%x "
                    "(%.9g): not the stochastic rounding of ampx_hash32(seed %" PRIu64 ", %" PRIu64
                    ")",
                    i, gb, got, x, rnd, wb, want, seed, i);
            goto done;
        }
    }
    if (mode == 3) {
        /* Unbiased: within a block the share rounded up is p = (x - lo) / (hi - lo), up to
         * binomial noise (5 sigma) and the granularity of the random bits (2^-12). */
        for (uint64_t blk = 0; blk < CAST_SR_BLOCKS; blk++) {
            double x = block_x[blk], lo, hi;
            ref_neighbours(ddt, x, &lo, &hi);
            if (lo == hi || !isfinite(lo) || !isfinite(hi)) continue;
            uint64_t ups = 0;
            for (uint64_t i = blk * CAST_SR_BLOCK; i < (blk + 1) * CAST_SR_BLOCK; i++)
                ups += ct_get(D, i) == hi;
            double p = (x - lo) / (hi - lo), f = (double)ups / CAST_SR_BLOCK;
            double allowed = 5.0 * sqrt(p * (1.0 - p) / CAST_SR_BLOCK) + 0x1p-12;
            double dev     = fabs(f - p);
            if (dev / allowed > cc->worst) {
                cc->worst   = dev / allowed;
                cc->rep.err = dev;
                cc->rep.tol = allowed;
            }
            if (dev > allowed) {
                cc_fail(cc, "stochastic rounding of %a is biased: %.4f rounded up, expected %.4f",
                        x, f, p);
                goto done;
            }
        }
    }
done:
    return;
}

// ---------------------------------------------------------------------------------------
// ADD, MUL, SCALE: elementwise in f32; row broadcast; in place on a or b.

typedef struct add_cfg {
    uint64_t rows, cols;
    int bcast, inplace; /* inplace: 1 y = a, 2 y = b */
    float alpha, beta;
} add_cfg;

static const add_cfg add_cfgs[] = {
    {1, 1, 0, 0, 1.0f, 1.0f},
    {7, 13, 0, 1, 0.5f, -2.0f},
    {31, 127, 1, 0, 1.0f, 1.0f},
    {64, 67, 0, 2, -1.0f, 0.25f},
    {13, 1031, 1, 1, 2.0f, 1.0f},
    {3, 5, 1, 0, 1.0f, -1.0f},
    /* large tier */
    {263, 401, 0, 2, 0.75f, -1.5f},
    {1031, 71, 1, 1, 1.0f, 0.5f},
};

static void case_add_mul(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                         int is_mul) {
    const add_cfg *c = &add_cfgs[variant];
    int inp          = c->inplace;
    if (inp == 1 && dts[2] != dts[0]) inp = 0;
    if (inp == 2 && (dts[2] != dts[1] || c->bcast)) inp = 0;
    uint64_t n = c->rows * c->cols, nb = c->bcast ? c->cols : n;
    if (is_mul)
        cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s", c->rows, c->cols,
                 c->bcast ? " broadcast" : "",
                 inp == 1   ? " y=a"
                 : inp == 2 ? " y=b"
                            : "");
    else
        cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " alpha=%g beta=%g%s%s", c->rows, c->cols,
                 (double)c->alpha, (double)c->beta, c->bcast ? " broadcast" : "",
                 inp == 1   ? " y=a"
                 : inp == 2 ? " y=b"
                            : "");
    conf_tensor *A = ct_new(cc, "a", dts[0], n, inp == 1 ? CT_INOUT : CT_IN);
    conf_tensor *B = ct_new(cc, "b", dts[1], nb, inp == 2 ? CT_INOUT : CT_IN);
    conf_tensor *Y = inp == 1 ? A : inp == 2 ? B : ct_new(cc, "y", dts[2], n, CT_OUT);
    double *ref = cc_alloc(cc, n * sizeof(double)), *mag = cc_alloc(cc, n * sizeof(double));
    double *alt = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, A, -2, 2);
    ct_fill(cc, B, -2, 2);
    if (cc_upload(cc)) goto done;
    if (is_mul) {
        ampx_mul_args a = {sizeof a, (uint32_t)c->bcast, c->rows, c->cols, A->t, B->t, Y->t};
        if (cc_finish_call(cc, "mul", call_mul(r, AMPX_OP_MUL, &a))) goto done;
        ref_mul(c->rows, c->cols, c->bcast, A->v, B->v, ref);
        /* one f32 product rounded to y (two roundings), or the exact product rounded once */
        for (uint64_t i = 0; i < n; i++) {
            alt[i] = ref_round(Y->dt, ref[i]);
            ref[i] = ref_round(Y->dt, ref_round(AMPX_F32, ref[i]));
        }
        cc_expect_one_of(cc, "y", Y, ref, alt);
    } else {
        ampx_add_args a = {
            sizeof a, (uint32_t)c->bcast, c->rows, c->cols, c->alpha, c->beta, A->t, B->t, Y->t};
        if (cc_finish_call(cc, "add", call_add(r, AMPX_OP_ADD, &a))) goto done;
        ref_add(c->rows, c->cols, c->bcast, c->alpha, c->beta, A->v, B->v, ref, mag);
        double *g = cc_values(cc, Y);
        if (g) cc_compare(cc, "y", g, ref, mag, n, Y->dt, 3, CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

static void case_add(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_add_mul(r, cc, dts, variant, 0);
}

static void case_mul(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_add_mul(r, cc, dts, variant, 1);
}

static void case_scale(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t n;
        float alpha;
        int inplace;
    } cfgs[] = {
        {1, 1.0f, 0},           {7, 0.5f, 1},      {1031, -3.0f, 0},
        {4099, 1.0f / 3.0f, 1}, {127, 1e-3f, 0}, /* large tier */
        {150001, 0.1f, 1},      {70001, -2.5f, 0},
    };
    uint64_t n = cfgs[variant].n;
    float al   = cfgs[variant].alpha;
    int inp    = cfgs[variant].inplace && dts[0] == dts[1];
    cc_shape(cc, "n=%" PRIu64 " alpha=%.9g%s", n, (double)al, inp ? " in place" : "");
    conf_tensor *X = ct_new(cc, "x", dts[0], n, inp ? CT_INOUT : CT_IN);
    conf_tensor *Y = inp ? X : ct_new(cc, "y", dts[1], n, CT_OUT);
    double *ref = cc_alloc(cc, n * sizeof(double)), *alt = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -100, 100);
    ampx_scale_args a = {sizeof a, n, al, X->t, Y->t};
    if (cc_upload(cc) || cc_finish_call(cc, "scale", call_scale(r, AMPX_OP_SCALE, &a))) goto done;
    ref_scale(n, al, X->v, ref);
    for (uint64_t i = 0; i < n; i++) {
        alt[i] = ref_round(Y->dt, ref[i]);
        ref[i] = ref_round(Y->dt, ref_round(AMPX_F32, ref[i]));
    }
    cc_expect_one_of(cc, "y", Y, ref, alt);
done:
    return;
}

static void case_bias_grad(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int acc;
    } cfgs[] = {
        {1, 1, 0},
        {7, 13, 1},
        {127, 31, 0},
        {1000, 3, 1},
        {31, 1031, 0},
        /* large tier: many rows and few columns; many rows and many column blocks */
        {40000, 3, 1},
        {257, 1031, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols;
    int acc = cfgs[variant].acc;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s", rows, cols, acc ? " accumulate" : "");
    conf_tensor *DY = ct_new(cc, "dy", dts[0], rows * cols, CT_IN);
    conf_tensor *DB = ct_new(cc, "db", dts[1], cols, acc ? CT_INOUT : CT_OUT);
    double *ref = cc_alloc(cc, cols * sizeof(double)), *mag = cc_alloc(cc, cols * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, DY, -1, 1);
    if (acc) ct_fill(cc, DB, -4, 4);
    ampx_bias_grad_args a = {sizeof a, (uint32_t)acc, rows, cols, DY->t, DB->t};
    if (cc_upload(cc) || cc_finish_call(cc, "bias_grad", call_bias_grad(r, AMPX_OP_BIAS_GRAD, &a)))
        goto done;
    memcpy(ref, DB->v, cols * sizeof(double));
    ref_bias_grad(rows, cols, acc, DY->v, ref, mag);
    double *g = cc_values(cc, DB);
    if (g) cc_compare(cc, "db", g, ref, mag, cols, DB->dt, (double)rows + 1, CMP_NORM | CMP_ELEM);
done:
    return;
}

// ---------------------------------------------------------------------------------------
// Activations. relu is exact; the transcendental ones are held to 16 f32 roundings of the
// terms' size (|x| enters because gelu's 1 + tanh cancels for negative x).

static const char *const act_names[] = {"relu", "gelu", "tanh", "sigmoid", "silu"};

/* Variants 0..4: each function at n = 1031; 5..9: each at n = 13 in place; then the large
 * tier: gelu at n = 100003, relu at n = 70001 in place. */
static void case_act(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant, int bwd) {
    uint32_t act = (uint32_t)variant % AMPX_ACT_COUNT;
    uint64_t n   = variant < AMPX_ACT_COUNT ? 1031 : 13;
    int want_inp = variant >= AMPX_ACT_COUNT;
    if (variant >= 2 * AMPX_ACT_COUNT) {
        int big  = variant == 2 * AMPX_ACT_COUNT;
        act      = big ? AMPX_ACT_GELU : AMPX_ACT_RELU;
        n        = big ? 100003 : 70001;
        want_inp = !big;
    }
    ampx_dtype ydt = bwd ? dts[2] : dts[1];
    int inp        = want_inp && (bwd ? dts[2] == dts[1] : dts[1] == dts[0]);
    cc_shape(cc, "%s n=%" PRIu64 "%s", act_names[act], n, inp ? " in place" : "");
    conf_tensor *X  = ct_new(cc, "x", dts[0], n, !bwd && inp ? CT_INOUT : CT_IN);
    conf_tensor *DY = bwd ? ct_new(cc, "dy", dts[1], n, inp ? CT_INOUT : CT_IN) : NULL;
    conf_tensor *Y  = inp ? (bwd ? DY : X) : ct_new(cc, bwd ? "dx" : "y", ydt, n, CT_OUT);
    double *ref = cc_alloc(cc, n * sizeof(double)), *mag = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -6, 6);
    if (n > 3) ct_set(X, 3, 0.0);
    if (bwd) ct_fill(cc, DY, -1, 1);
    ampx_act_args a = {sizeof a, act, n, X->t, bwd ? DY->t : conf_null_tensor, Y->t};
    if (cc_upload(cc)) goto done;
    if (cc_finish_call(cc, bwd ? "act_bwd" : "act_fwd",
                       call_act(r, bwd ? AMPX_OP_ACT_BWD : AMPX_OP_ACT_FWD, &a)))
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        double x = X->v[i];
        if (bwd) {
            double dy = DY->v[i];
            ref[i]    = dy * ref_act_deriv(act, x);
            mag[i]    = fabs(ref[i]) + fabs(dy) * (1.0 + fabs(x) + 0.1 * fabs(x * x * x) + 0x1p-6);
        } else {
            ref[i] = ref_act(act, x);
            mag[i] = fabs(ref[i]) + fabs(x) + 0x1p-6;
        }
        if (act == AMPX_ACT_RELU) ref[i] = ref_round(ydt, ref[i]); /* exact up to the store */
    }
    double *g = cc_values(cc, Y);
    if (!g) goto done;
    if (act == AMPX_ACT_RELU)
        cc_compare(cc, bwd ? "dx" : "y", g, ref, NULL, n, ydt, 0, CMP_EXACT);
    else
        cc_compare(cc, bwd ? "dx" : "y", g, ref, mag, n, ydt, 16, CMP_NORM | CMP_ELEM);
done:
    return;
}

static void case_act_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_act(r, cc, dts, variant, 0);
}

static void case_act_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_act(r, cc, dts, variant, 1);
}

// ---------------------------------------------------------------------------------------
// Softmax forward/backward and fused cross-entropy

typedef struct softmax_cfg {
    uint64_t rows, cols;
    int causal;
    uint64_t seq_q;
    int log_;
    float scale;
} softmax_cfg;

static const softmax_cfg softmax_cfgs[] = {
    {1, 1, 0, 0, 0, 1.0f},
    {7, 13, 0, 0, 1, 1.0f},
    {12, 31, 1, 4, 0, 0.125f},
    {32, 16, 1, 16, 1, 1.0f},
    {33, 127, 0, 0, 0, 1.0f},
    {4, 1031, 0, 0, 1, 0.5f},
    {5, 64, 1, 5, 0, 1.0f},
    /* large tier */
    {300, 257, 1, 100, 0, 0.125f},
    {257, 1031, 0, 0, 1, 0.5f},
};

static void case_softmax_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const softmax_cfg *c = &softmax_cfgs[variant];
    uint64_t n           = c->rows * c->cols;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s scale=%g", c->rows, c->cols,
             c->log_ ? " log" : "", c->causal ? " causal" : "", (double)c->scale);
    if (c->causal) {
        size_t l = strlen(cc->rep.shape);
        snprintf(cc->rep.shape + l, sizeof cc->rep.shape - l, " seq_q=%" PRIu64, c->seq_q);
    }
    conf_tensor *X = ct_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y = ct_new(cc, "y", dts[1], n, CT_OUT);
    double *ref = cc_alloc(cc, n * sizeof(double)), *mag = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -8, 8);
    ampx_softmax_args a = {sizeof a,          (uint32_t)c->causal,
                           (uint32_t)c->log_, c->rows,
                           c->cols,           c->seq_q,
                           c->scale,          X->t,
                           conf_null_tensor,  Y->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "softmax_fwd", call_softmax(r, AMPX_OP_SOFTMAX_FWD, &a)))
        goto done;
    ref_softmax_fwd(c->rows, c->cols, c->causal, c->seq_q, c->log_, c->scale, X->v, ref);
    /* exp(z - max) is off by |z - max| f32 roundings of its argument; log-softmax adds the
     * absolute error of max and log(sum). */
    for (uint64_t rr = 0; rr < c->rows; rr++) {
        double amax = 0.0;
        for (uint64_t j = 0; j < c->cols; j++)
            amax = fmax(amax, fabs(c->scale * X->v[rr * c->cols + j]));
        for (uint64_t j = 0; j < c->cols; j++) {
            uint64_t i = rr * c->cols + j;
            mag[i]     = c->log_ ? fabs(ref[i]) + 2.0 * amax + log((double)c->cols) + 1.0
                                 : fabs(ref[i]) * (1.0 + 2.0 * amax);
        }
    }
    double *g = cc_values(cc, Y);
    if (g) cc_compare(cc, "y", g, ref, mag, n, Y->dt, (double)c->cols + 16, CMP_NORM | CMP_ELEM);
done:
    return;
}

static void case_softmax_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int log_, causal;
        uint64_t seq_q;
        float scale;
    } cfgs[] = {
        {1, 1, 0, 0, 0, 1.0f},
        {7, 13, 1, 0, 0, 1.0f},
        {33, 127, 0, 0, 0, 0.125f},
        {4, 1031, 1, 0, 0, 1.0f},
        {12, 31, 0, 1, 4, 1.0f},
        {9, 20, 1, 1, 6, 0.5f}, /* causal log-softmax: masked dy must not leak */
        /* large tier */
        {300, 257, 0, 1, 100, 1.0f},
        {97, 1031, 1, 0, 0, 0.5f},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int log_ = cfgs[variant].log_, causal = cfgs[variant].causal;
    float scale    = cfgs[variant].scale;
    uint64_t seq_q = cfgs[variant].seq_q;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s%s scale=%g", rows, cols, log_ ? " log" : "",
             causal ? " causal" : "", (double)scale);
    conf_tensor *Y  = ct_new(cc, "y", dts[0], n, CT_IN);
    conf_tensor *DY = ct_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = ct_new(cc, "dx", dts[2], n, CT_OUT);
    double *tmp = cc_alloc(cc, n * sizeof(double)), *ref = cc_alloc(cc, n * sizeof(double));
    double *mag = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    /* y is a real forward output (rounded to its dtype), as the backward always sees. */
    for (uint64_t i = 0; i < n; i++)
        tmp[i] = conf_uniform(&cc->rng, -4, 4);
    ref_softmax_fwd(rows, cols, causal, seq_q, log_, 1.0, tmp, ref);
    for (uint64_t i = 0; i < n; i++)
        ct_set(Y, i, ref_round(Y->dt, ref[i]));
    ct_fill(cc, DY, -1, 1); /* dy is non-zero at masked positions too: it must be ignored */
    ampx_softmax_args a = {
        sizeof a, (uint32_t)causal, (uint32_t)log_, rows, cols, seq_q, scale, Y->t, DY->t, DX->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "softmax_bwd", call_softmax(r, AMPX_OP_SOFTMAX_BWD, &a)))
        goto done;
    ref_softmax_bwd(rows, cols, causal, seq_q, log_, scale, Y->v, DY->v, ref);
    for (uint64_t rr = 0; rr < rows; rr++) {
        double s = 0.0;
        for (uint64_t j = 0; j < cols; j++) {
            uint64_t i = rr * cols + j;
            s += log_ ? fabs(DY->v[i]) : fabs(DY->v[i] * Y->v[i]);
        }
        for (uint64_t j = 0; j < cols; j++) {
            uint64_t i = rr * cols + j;
            int masked = causal && j > (rr % seq_q) + (cols - seq_q); /* dx must be 0 */
            mag[i]     = masked ? 0.0
                         : log_ ? fabs(scale) * (fabs(DY->v[i]) + exp(Y->v[i]) * s * 2.0)
                                : fabs(scale) * fabs(Y->v[i]) * (fabs(DY->v[i]) + s);
        }
    }
    double *g = cc_values(cc, DX);
    if (g) cc_compare(cc, "dx", g, ref, mag, n, DX->dt, (double)cols + 16, CMP_NORM | CMP_ELEM);
done:
    return;
}

static void case_xent(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols, n_ignore;
        int32_t ignore_index;
        float loss_scale; /* 0: no scalars block */
        float grad_scale;
        int with_dlogits, special; /* special 1: all ignored, 2: a label out of range */
    } cfgs[] = {
        {1, 1, 0, -100, 0, 1.0f, 1, 0},
        {7, 13, 2, -100, 0, 1.0f, 1, 0},
        {33, 127, 5, -100, 1024, 1.0f, 1, 0},
        {5, 1031, 1, -100, 0, 0.5f, 0, 0},
        {4, 9, 4, -100, 0, 1.0f, 1, 1},
        {6, 10, 1, -100, 0, 1.0f, 1, 2},
        {64, 67, 3, 3, 65536, 1.0f, 1, 0},
        /* large tier */
        {300, 1031, 7, -100, 1024, 1.0f, 1, 0},
        {2000, 67, 40, 5, 4096, 0.25f, 1, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int32_t ign = cfgs[variant].ignore_index;
    int special = cfgs[variant].special, with_d = cfgs[variant].with_dlogits;
    float lscale = cfgs[variant].loss_scale;
    cc_shape(cc,
             "rows=%" PRIu64 " cols=%" PRIu64 " ignored=%" PRIu64
             " ignore_index=%d grad_scale=%g%s%s%s",
             rows, cols, cfgs[variant].n_ignore, ign, (double)cfgs[variant].grad_scale,
             lscale != 0 ? " loss-scaled" : "", with_d ? "" : " loss only",
             special == 2 ? " bad label" : "");
    conf_tensor *X   = ct_new(cc, "logits", dts[0], n, CT_IN);
    conf_tensor *L   = ct_new(cc, "labels", AMPX_I32, rows, CT_IN);
    conf_tensor *OUT = ct_new(cc, "loss", AMPX_F32, 1, CT_OUT);
    conf_tensor *D   = with_d ? ct_new(cc, "dlogits", dts[1], n, CT_OUT) : NULL;
    conf_tensor *S   = lscale != 0 ? ct_new(cc, "scalars", AMPX_I32, 32, CT_IN) : NULL;
    int32_t *labels  = cc_alloc(cc, rows * sizeof(int32_t));
    double *ref      = cc_alloc(cc, n * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -4, 4);
    for (uint64_t i = 0; i < rows; i++) {
        labels[i] = (int32_t)(conf_next(&cc->rng) % cols);
        if (ign >= 0 && labels[i] == ign) labels[i] = (ign + 1) % (int32_t)cols;
    }
    if (cols > 1) labels[0] = (int32_t)cols - 1;
    for (uint64_t i = 0; i < cfgs[variant].n_ignore && i < rows; i++)
        labels[rows - 1 - 2 * i % rows] = ign;
    if (special == 1)
        for (uint64_t i = 0; i < rows; i++)
            labels[i] = ign;
    if (special == 2) labels[rows / 2] = (int32_t)cols;
    for (uint64_t i = 0; i < rows; i++)
        ct_set(L, i, labels[i]);
    if (S) {
        ampx_scalars s = {0};
        s.scale        = lscale;
        s.mode         = AMPX_SCALER_DYNAMIC;
        for (uint64_t i = 0; i < 32; i++) {
            int32_t w;
            memcpy(&w, (const char *)&s + 4 * i, 4);
            ct_set_bits(S, i, (uint32_t)w);
        }
    }
    ampx_softmax_xent_args a = {sizeof a,
                                ign,
                                rows,
                                cols,
                                cfgs[variant].grad_scale,
                                X->t,
                                L->t,
                                OUT->t,
                                D ? D->t : conf_null_tensor,
                                S ? S->t : conf_null_tensor};
    if (cc_upload(cc) || cc_finish_call(cc, "softmax_xent", call_xent(r, AMPX_OP_SOFTMAX_XENT, &a)))
        goto done;
    double loss;
    int64_t nv      = ref_softmax_xent(rows, cols, labels, ign, cfgs[variant].grad_scale,
                                  lscale != 0 ? lscale : 1.0, X->v, &loss, ref);
    double got_loss = ct_get(OUT, 0);
    if (nv < 0) {
        if (!isnan(got_loss))
            cc_fail(cc, "loss = %.9g for an out-of-range label, expected NaN", got_loss);
        goto done;
    }
    /* per-row terms lse - x[label] are >= 0; their absolute error scales with the row's
     * largest |logit| (4) and log(cols) */
    double lmag = fabs(loss) + 4.0 + log((double)cols);
    cc_compare(cc, "loss", &got_loss, &loss, &lmag, 1, AMPX_F32, (double)(cols + rows) + 16,
               nv == 0 ? CMP_EXACT : CMP_ELEM);
    if (D) {
        double *g = cc_values(cc, D);
        if (!g) goto done;
        for (uint64_t rr = 0; rr < rows; rr++)
            if (labels[rr] == ign)
                for (uint64_t j = 0; j < cols; j++)
                    if (g[rr * cols + j] != 0.0) {
                        cc_fail(cc, "dlogits[%" PRIu64 ",%" PRIu64 "] = %.9g in an ignored row", rr,
                                j, g[rr * cols + j]);
                        goto done;
                    }
        cc_compare(cc, "dlogits", g, ref, NULL, n, D->dt, (double)cols + 16,
                   nv == 0 ? CMP_EXACT : CMP_NORM);
    }
done:
    return;
}

// ---------------------------------------------------------------------------------------
// Layer norm and batch norm. Inputs are offset from zero so the mean matters; the backward
// gets mean and rstd as the forward would save them (reference statistics rounded to f32).

static void case_layernorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int affine;
        float eps;
    } cfgs[] = {
        {2, 1, 1, 1e-5f},
        {7, 13, 0, 1e-5f},
        {31, 127, 1, 1e-5f},
        {3, 1031, 1, 1e-3f},
        {64, 67, 0, 1e-5f},
        /* large tier */
        {300, 257, 1, 1e-5f},
        {97, 1031, 0, 1e-3f},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int aff   = cfgs[variant].affine;
    float eps = cfgs[variant].eps;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " eps=%g%s", rows, cols, (double)eps,
             aff ? "" : " no gamma/beta");
    conf_tensor *X  = ct_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y  = ct_new(cc, "y", dts[1], n, CT_OUT);
    conf_tensor *G  = aff ? ct_new(cc, "gamma", AMPX_F32, cols, CT_IN) : NULL;
    conf_tensor *Bt = aff ? ct_new(cc, "beta", AMPX_F32, cols, CT_IN) : NULL;
    conf_tensor *M  = ct_new(cc, "mean", AMPX_F32, rows, CT_OUT);
    conf_tensor *RS = ct_new(cc, "rstd", AMPX_F32, rows, CT_OUT);
    double *ry = cc_alloc(cc, n * sizeof(double)), *rm = cc_alloc(cc, rows * sizeof(double));
    double *rr = cc_alloc(cc, rows * sizeof(double)), *mm = cc_alloc(cc, rows * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -1, 3);
    if (aff) {
        ct_fill(cc, G, 0.5, 1.5);
        ct_fill(cc, Bt, -0.5, 0.5);
    }
    ampx_layernorm_args a = {sizeof a,
                             0,
                             rows,
                             cols,
                             eps,
                             X->t,
                             G ? G->t : conf_null_tensor,
                             Bt ? Bt->t : conf_null_tensor,
                             M->t,
                             RS->t,
                             conf_null_tensor,
                             Y->t,
                             conf_null_tensor,
                             conf_null_tensor};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "layernorm_fwd", call_layernorm(r, AMPX_OP_LAYERNORM_FWD, &a)))
        goto done;
    ref_layernorm_fwd(rows, cols, eps, X->v, G ? G->v : NULL, Bt ? Bt->v : NULL, ry, rm, rr);
    for (uint64_t i = 0; i < rows; i++) {
        mm[i] = 0.0;
        for (uint64_t j = 0; j < cols; j++)
            mm[i] += fabs(X->v[i * cols + j]) / (double)cols;
    }
    double *gy = cc_values(cc, Y), *gm = cc_values(cc, M), *gr = cc_values(cc, RS);
    if (!cc_ok(cc)) goto done;
    cc_compare(cc, "y", gy, ry, NULL, n, Y->dt, (double)cols + 16, CMP_NORM);
    cc_compare(cc, "mean", gm, rm, mm, rows, AMPX_F32, (double)cols, CMP_NORM | CMP_ELEM);
    cc_compare(cc, "rstd", gr, rr, NULL, rows, AMPX_F32, (double)cols + 16, CMP_NORM | CMP_ELEM);
done:
    return;
}

static void case_layernorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int acc;
    } cfgs[] = {
        {2, 1, 0},
        {7, 13, 0},
        {31, 127, 1},
        {3, 1031, 0},
        {64, 67, 1},
        /* large tier */
        {300, 257, 1},
        {97, 1031, 0},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols, n = rows * cols;
    int acc = cfgs[variant].acc;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 "%s", rows, cols, acc ? " accumulate" : "");
    conf_tensor *X  = ct_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *DY = ct_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = ct_new(cc, "dx", dts[2], n, CT_OUT);
    conf_tensor *G  = ct_new(cc, "gamma", AMPX_F32, cols, CT_IN);
    conf_tensor *M  = ct_new(cc, "mean", AMPX_F32, rows, CT_IN);
    conf_tensor *RS = ct_new(cc, "rstd", AMPX_F32, rows, CT_IN);
    conf_tensor *DG = ct_new(cc, "dgamma", AMPX_F32, cols, acc ? CT_INOUT : CT_OUT);
    conf_tensor *DB = ct_new(cc, "dbeta", AMPX_F32, cols, acc ? CT_INOUT : CT_OUT);
    double *tmp = cc_alloc(cc, n * sizeof(double)), *rdx = cc_alloc(cc, n * sizeof(double));
    double *rm = cc_alloc(cc, rows * sizeof(double)), *rr = cc_alloc(cc, rows * sizeof(double));
    double *rdg = cc_alloc(cc, cols * sizeof(double)), *rdb = cc_alloc(cc, cols * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -1, 3);
    ct_fill(cc, DY, -1, 1);
    ct_fill(cc, G, 0.5, 1.5);
    ref_layernorm_fwd(rows, cols, 1e-5, X->v, NULL, NULL, tmp, rm, rr);
    for (uint64_t i = 0; i < rows; i++) {
        ct_set(M, i, ref_round(AMPX_F32, rm[i]));
        ct_set(RS, i, ref_round(AMPX_F32, rr[i]));
    }
    if (acc) {
        ct_fill(cc, DG, -2, 2);
        ct_fill(cc, DB, -2, 2);
    }
    ampx_layernorm_args a = {sizeof a,         (uint32_t)acc, rows,  cols,  1e-5f, X->t,  G->t,
                             conf_null_tensor, M->t,          RS->t, DY->t, DX->t, DG->t, DB->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "layernorm_bwd", call_layernorm(r, AMPX_OP_LAYERNORM_BWD, &a)))
        goto done;
    memcpy(rdg, DG->v, cols * sizeof(double));
    memcpy(rdb, DB->v, cols * sizeof(double));
    ref_layernorm_bwd(rows, cols, acc, X->v, G->v, M->v, RS->v, DY->v, rdx, rdg, rdb);
    double *gdx = cc_values(cc, DX), *gdg = cc_values(cc, DG), *gdb = cc_values(cc, DB);
    if (!cc_ok(cc)) goto done;
    cc_compare(cc, "dx", gdx, rdx, NULL, n, DX->dt, (double)cols + 16, CMP_NORM);
    cc_compare(cc, "dgamma", gdg, rdg, NULL, cols, AMPX_F32, (double)(rows + cols) + 16, CMP_NORM);
    cc_compare(cc, "dbeta", gdb, rdb, NULL, cols, AMPX_F32, (double)rows + 16, CMP_NORM);
done:
    return;
}

typedef struct bn_cfg {
    uint64_t outer, channels, inner;
    int training, affine, acc;
    float momentum;
} bn_cfg;

static const bn_cfg bn_cfgs[] = {
    {2, 3, 5, 1, 1, 0, 0.1f},
    {4, 7, 1, 1, 0, 1, 0.1f},
    {3, 5, 13, 0, 1, 0, 0.1f},
    {8, 16, 31, 1, 1, 1, 0.01f},
    {1, 3, 1031, 1, 1, 0, 0.1f},
    {2, 3, 7, 0, 0, 1, 0.1f},
    /* large tier: several channels of N = 16496; one channel of N = 100005 */
    {16, 5, 1031, 1, 1, 1, 0.1f},
    {3, 1, 33335, 1, 0, 0, 0.1f},
};

static void case_batchnorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const bn_cfg *c = &bn_cfgs[variant];
    uint64_t C = c->channels, n = c->outer * C * c->inner, N = c->outer * c->inner;
    int tr = c->training;
    cc_shape(cc, "outer=%" PRIu64 " channels=%" PRIu64 " inner=%" PRIu64 " %s momentum=%g%s",
             c->outer, C, c->inner, tr ? "training" : "eval", (double)c->momentum,
             c->affine ? "" : " no gamma/beta");
    conf_tensor *X  = ct_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *Y  = ct_new(cc, "y", dts[1], n, CT_OUT);
    conf_tensor *G  = c->affine ? ct_new(cc, "gamma", AMPX_F32, C, CT_IN) : NULL;
    conf_tensor *Bt = c->affine ? ct_new(cc, "beta", AMPX_F32, C, CT_IN) : NULL;
    conf_tensor *RM = ct_new(cc, "running_mean", AMPX_F32, C, tr ? CT_INOUT : CT_IN);
    conf_tensor *RV = ct_new(cc, "running_var", AMPX_F32, C, tr ? CT_INOUT : CT_IN);
    conf_tensor *M  = ct_new(cc, "mean", AMPX_F32, C, tr ? CT_OUT : CT_IN);
    conf_tensor *RS = ct_new(cc, "rstd", AMPX_F32, C, tr ? CT_OUT : CT_IN);
    double *ry = cc_alloc(cc, n * sizeof(double)), *rrm = cc_alloc(cc, C * sizeof(double));
    double *rrv = cc_alloc(cc, C * sizeof(double)), *rme = cc_alloc(cc, C * sizeof(double));
    double *rrs = cc_alloc(cc, C * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -1, 3);
    if (c->affine) {
        ct_fill(cc, G, 0.5, 1.5);
        ct_fill(cc, Bt, -0.5, 0.5);
    }
    ct_fill(cc, RM, -0.5, 0.5);
    ct_fill(cc, RV, 0.5, 2.0);
    if (!tr) { /* not written in eval mode: random contents that must survive */
        ct_fill(cc, M, -1, 1);
        ct_fill(cc, RS, 0.5, 1);
    }
    ampx_batchnorm_args a = {sizeof a,
                             (uint32_t)tr,
                             0,
                             c->outer,
                             C,
                             c->inner,
                             1e-5f,
                             c->momentum,
                             X->t,
                             G ? G->t : conf_null_tensor,
                             Bt ? Bt->t : conf_null_tensor,
                             RM->t,
                             RV->t,
                             M->t,
                             RS->t,
                             conf_null_tensor,
                             Y->t,
                             conf_null_tensor,
                             conf_null_tensor};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "batchnorm_fwd", call_batchnorm(r, AMPX_OP_BATCHNORM_FWD, &a)))
        goto done;
    memcpy(rrm, RM->v, C * sizeof(double));
    memcpy(rrv, RV->v, C * sizeof(double));
    ref_batchnorm_fwd(c->outer, C, c->inner, tr, 1e-5f, c->momentum, X->v, G ? G->v : NULL,
                      Bt ? Bt->v : NULL, rrm, rrv, rme, rrs, ry);
    double *gy = cc_values(cc, Y);
    if (!gy) goto done;
    cc_compare(cc, "y", gy, ry, NULL, n, Y->dt, (double)N + 16, CMP_NORM);
    if (tr) {
        double *gm = cc_values(cc, M), *gr = cc_values(cc, RS), *grm = cc_values(cc, RM);
        double *grv = cc_values(cc, RV);
        if (!cc_ok(cc)) goto done;
        cc_compare(cc, "mean", gm, rme, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
        cc_compare(cc, "rstd", gr, rrs, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM | CMP_ELEM);
        cc_compare(cc, "running_mean", grm, rrm, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
        cc_compare(cc, "running_var", grv, rrv, NULL, C, AMPX_F32, (double)N + 16,
                   CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

static void case_batchnorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const bn_cfg *c = &bn_cfgs[variant];
    uint64_t C = c->channels, n = c->outer * C * c->inner, N = c->outer * c->inner;
    cc_shape(cc, "outer=%" PRIu64 " channels=%" PRIu64 " inner=%" PRIu64 "%s", c->outer, C,
             c->inner, c->acc ? " accumulate" : "");
    conf_tensor *X  = ct_new(cc, "x", dts[0], n, CT_IN);
    conf_tensor *DY = ct_new(cc, "dy", dts[1], n, CT_IN);
    conf_tensor *DX = ct_new(cc, "dx", dts[2], n, CT_OUT);
    conf_tensor *G  = ct_new(cc, "gamma", AMPX_F32, C, CT_IN);
    conf_tensor *M  = ct_new(cc, "mean", AMPX_F32, C, CT_IN);
    conf_tensor *RS = ct_new(cc, "rstd", AMPX_F32, C, CT_IN);
    conf_tensor *DG = ct_new(cc, "dgamma", AMPX_F32, C, c->acc ? CT_INOUT : CT_OUT);
    conf_tensor *DB = ct_new(cc, "dbeta", AMPX_F32, C, c->acc ? CT_INOUT : CT_OUT);
    double *tmp = cc_alloc(cc, n * sizeof(double)), *rdx = cc_alloc(cc, n * sizeof(double));
    double *rm = cc_alloc(cc, C * sizeof(double)), *rs = cc_alloc(cc, C * sizeof(double));
    double *rdg = cc_alloc(cc, C * sizeof(double)), *rdb = cc_alloc(cc, C * sizeof(double));
    double *run = cc_alloc(cc, 2 * C * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -1, 3);
    ct_fill(cc, DY, -1, 1);
    ct_fill(cc, G, 0.5, 1.5);
    ref_batchnorm_fwd(c->outer, C, c->inner, 1, 1e-5, 0.1, X->v, NULL, NULL, run, run + C, rm, rs,
                      tmp);
    for (uint64_t i = 0; i < C; i++) {
        ct_set(M, i, ref_round(AMPX_F32, rm[i]));
        ct_set(RS, i, ref_round(AMPX_F32, rs[i]));
    }
    if (c->acc) {
        ct_fill(cc, DG, -2, 2);
        ct_fill(cc, DB, -2, 2);
    }
    ampx_batchnorm_args a = {sizeof a,
                             1,
                             (uint32_t)c->acc,
                             c->outer,
                             C,
                             c->inner,
                             1e-5f,
                             0.1f,
                             X->t,
                             G->t,
                             conf_null_tensor,
                             conf_null_tensor,
                             conf_null_tensor,
                             M->t,
                             RS->t,
                             DY->t,
                             DX->t,
                             DG->t,
                             DB->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "batchnorm_bwd", call_batchnorm(r, AMPX_OP_BATCHNORM_BWD, &a)))
        goto done;
    memcpy(rdg, DG->v, C * sizeof(double));
    memcpy(rdb, DB->v, C * sizeof(double));
    ref_batchnorm_bwd(c->outer, C, c->inner, c->acc, X->v, G->v, M->v, RS->v, DY->v, rdx, rdg, rdb);
    double *gdx = cc_values(cc, DX), *gdg = cc_values(cc, DG), *gdb = cc_values(cc, DB);
    if (!cc_ok(cc)) goto done;
    cc_compare(cc, "dx", gdx, rdx, NULL, n, DX->dt, (double)N + 16, CMP_NORM);
    cc_compare(cc, "dgamma", gdg, rdg, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
    cc_compare(cc, "dbeta", gdb, rdb, NULL, C, AMPX_F32, (double)N + 16, CMP_NORM);
done:
    return;
}

// ---------------------------------------------------------------------------------------
// Embedding: the gather is exact; the scatter-add has duplicates and out-of-range ids.

static void case_embedding(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                           int bwd) {
    static const struct {
        uint64_t n, vocab, dim;
        int zero_init;
    } cfgs[] = {
        {1, 1, 1, 0},
        {7, 13, 31, 1},
        {100, 50, 67, 0},
        {31, 1000, 128, 1},
        /* large tier: rows wider than a column block; many narrow rows */
        {97, 100, 1031, 0},
        {2000, 500, 40, 1},
    };
    uint64_t n = cfgs[variant].n, vocab = cfgs[variant].vocab, dim = cfgs[variant].dim;
    cc_shape(cc, "n=%" PRIu64 " vocab=%" PRIu64 " dim=%" PRIu64 "%s", n, vocab, dim,
             bwd && cfgs[variant].zero_init ? " dtable=0" : "");
    conf_tensor *T  = ct_new(cc, bwd ? "dtable" : "table", bwd ? dts[1] : dts[0], vocab * dim,
                            bwd ? CT_INOUT : CT_IN);
    conf_tensor *ID = ct_new(cc, "ids", AMPX_I32, n, CT_IN);
    conf_tensor *Y =
        ct_new(cc, bwd ? "dy" : "y", bwd ? dts[0] : dts[1], n * dim, bwd ? CT_IN : CT_OUT);
    int32_t *ids  = cc_alloc(cc, n * sizeof(int32_t));
    uint32_t *dup = cc_alloc(cc, vocab * sizeof(uint32_t));
    double *ref   = cc_alloc(cc, (bwd ? vocab : n) * dim * sizeof(double));
    double *mag   = cc_alloc(cc, vocab * dim * sizeof(double));
    if (!cc_ok(cc)) goto done;
    /* ids from a small range so rows repeat; a few out of range */
    for (uint64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(conf_next(&cc->rng) % (vocab < 20 ? vocab : vocab / 4 + 1));
    if (n >= 7) {
        ids[1] = -1;
        ids[4] = (int32_t)vocab;
        ids[5] = INT32_MIN;
    }
    for (uint64_t i = 0; i < n; i++)
        ct_set(ID, i, ids[i]);
    if (bwd && cfgs[variant].zero_init)
        for (uint64_t i = 0; i < T->n; i++)
            ct_set(T, i, 0.0);
    else
        ct_fill(cc, T, -1, 1);
    if (bwd) ct_fill(cc, Y, -1, 1);
    ampx_embedding_args a = {sizeof a, n, vocab, dim, T->t, ID->t, Y->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, bwd ? "embedding_bwd" : "embedding_fwd",
                       call_embedding(r, bwd ? AMPX_OP_EMBEDDING_BWD : AMPX_OP_EMBEDDING_FWD, &a)))
        goto done;
    if (!bwd) {
        ref_embedding_fwd(n, vocab, dim, T->v, ids, ref);
        for (uint64_t i = 0; i < n * dim; i++)
            ref[i] = ref_round(Y->dt, ref[i]);
        double *g = cc_values(cc, Y);
        if (g) cc_compare(cc, "y", g, ref, NULL, n * dim, Y->dt, 0, CMP_EXACT);
    } else {
        uint32_t maxdup = 0;
        for (uint64_t i = 0; i < n; i++)
            if (ids[i] >= 0 && (uint64_t)ids[i] < vocab && ++dup[ids[i]] > maxdup)
                maxdup = dup[ids[i]];
        memcpy(ref, T->v, vocab * dim * sizeof(double));
        ref_embedding_bwd(n, vocab, dim, Y->v, ids, ref, mag);
        double *g = cc_values(cc, T);
        if (g)
            cc_compare(cc, "dtable", g, ref, mag, vocab * dim, AMPX_F32, (double)maxdup + 1,
                       CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

static void case_embedding_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_embedding(r, cc, dts, variant, 0);
}

static void case_embedding_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_embedding(r, cc, dts, variant, 1);
}

// ---------------------------------------------------------------------------------------
// Reductions

static void case_reduce(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint64_t rows, cols;
        int mean;
    } cfgs[] = {
        {1, 1, 0},
        {7, 13, 1},
        {1, 4099, 0},
        {31, 127, 1},
        {100, 1031, 0},
        /* large tier: one long row; many short rows */
        {1, 200003, 0},
        {1500, 97, 1},
    };
    uint64_t rows = cfgs[variant].rows, cols = cfgs[variant].cols;
    int mean = cfgs[variant].mean;
    cc_shape(cc, "rows=%" PRIu64 " cols=%" PRIu64 " %s", rows, cols, mean ? "mean" : "sum");
    conf_tensor *X = ct_new(cc, "x", dts[0], rows * cols, CT_IN);
    conf_tensor *Y = ct_new(cc, "y", dts[1], rows, CT_OUT);
    double *ref = cc_alloc(cc, rows * sizeof(double)), *mag = cc_alloc(cc, rows * sizeof(double));
    if (!cc_ok(cc)) goto done;
    ct_fill(cc, X, -1, 1.5);
    if (cols >= CONF_LARGE) /* each row's last term: a negative sentinel (keeps f16 sums finite) */
        for (uint64_t rr = 0; rr < rows; rr++) {
            double m = 0.0;
            for (uint64_t c = 0; c < cols; c++)
                m += fabs(X->v[rr * cols + c]);
            ct_set(X, rr * cols + cols - 1,
                   -conf_sentinel(conf_tol(AMPX_F32, (double)cols + 2), m));
        }
    ampx_reduce_args a = {sizeof a, mean ? AMPX_REDUCE_MEAN : AMPX_REDUCE_SUM, rows, cols, X->t,
                          Y->t};
    if (cc_upload(cc) || cc_finish_call(cc, "reduce", call_reduce(r, AMPX_OP_REDUCE, &a)))
        goto done;
    ref_reduce(rows, cols, mean, X->v, ref, mag);
    double *g = cc_values(cc, Y);
    if (g) cc_compare(cc, "y", g, ref, mag, rows, Y->dt, (double)cols + 2, CMP_NORM | CMP_ELEM);
done:
    return;
}

/* The dtype of tensor t in a multi-tensor list: dts[0], or all three in turn for the
 * mixed variants (used only when the backend supports all three). */
static int conf_all_floats_supported(conf_run *r, uint32_t op) {
    for (int d = 0; d < 3; d++) {
        ampx_dtype dt = (ampx_dtype)d;
        if (!ampx_backend_supports(r->be, op, &dt, 1)) return 0;
    }
    return 1;
}

static void case_sum_squares(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint32_t count;
        uint64_t sizes[4];
        int acc, nonfinite, mixed;
    } cfgs[] = {
        {1, {1}, 0, 0, 0},
        {3, {7, 13, 31}, 1, 0, 0},
        {3, {1031, 4099, 1}, 0, 0, 0},
        {2, {127, 64}, 0, 1, 0},
        {4, {5, 6, 7, 8}, 1, 0, 1},
        /* large tier */
        {3, {100003, 1, 65537}, 1, 0, 0},
        {3, {70001, 100003, 5}, 0, 0, 1},
    };
    uint32_t count = cfgs[variant].count;
    int acc = cfgs[variant].acc, mixed = cfgs[variant].mixed && dts[0] != AMPX_I32 &&
                                         conf_all_floats_supported(r, AMPX_OP_SUM_SQUARES);
    conf_tensor *X[4] = {0};
    ampx_tensor tl[4];
    uint64_t ne[4], total = 0;
    char sizes[64] = "";
    for (uint32_t t = 0; t < count; t++) {
        size_t l = strlen(sizes);
        snprintf(sizes + l, sizeof sizes - l, "%s%" PRIu64, t ? "," : "", cfgs[variant].sizes[t]);
    }
    cc_shape(cc, "tensors=[%s]%s%s%s", sizes, acc ? " accumulate" : "",
             cfgs[variant].nonfinite ? " with inf" : "", mixed ? " mixed dtypes" : "");
    for (uint32_t t = 0; t < count; t++) {
        X[t] =
            ct_new(cc, "x[t]", mixed ? (ampx_dtype)(t % 3) : dts[0], cfgs[variant].sizes[t], CT_IN);
        if (!X[t]) goto done;
        tl[t] = X[t]->t;
        ne[t] = X[t]->n;
        total += X[t]->n;
    }
    conf_tensor *OUT = ct_new(cc, "out", AMPX_F32, 1, acc ? CT_INOUT : CT_OUT);
    if (!cc_ok(cc)) goto done;
    double sq = 0.0;
    for (uint32_t t = 0; t < count; t++) {
        ct_fill(cc, X[t], -2, 2);
        sq += ref_sum_squares(X[t]->n, X[t]->v);
    }
    /* the last element of each long tensor: a power of two s with s^2 >= 16 tol_rel sq, so
     * that losing it alone exceeds the bound (4x over, shared by at most two sentinels) */
    double tol_sq = conf_tol(AMPX_F32, (double)total + 2);
    for (uint32_t t = 0; t < count; t++)
        if (X[t]->n >= CONF_LARGE)
            ct_set(X[t], X[t]->n - 1, ldexp(1.0, (int)ceil(0.5 * log2(16.0 * tol_sq * sq))));
    if (cfgs[variant].nonfinite) ct_set(X[1], 17, INFINITY);
    if (acc) ct_set(OUT, 0, 3.5);
    ampx_sum_squares_args a = {sizeof a, (uint32_t)acc, {count, tl, ne}, OUT->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "sum_squares", call_sum_squares(r, AMPX_OP_SUM_SQUARES, &a)))
        goto done;
    double ref = acc ? OUT->v[0] : 0.0, got = ct_get(OUT, 0);
    for (uint32_t t = 0; t < count; t++)
        ref += ref_sum_squares(X[t]->n, X[t]->v);
    if (cfgs[variant].nonfinite) {
        if (isfinite(got)) cc_fail(cc, "out = %.9g with an inf input, expected non-finite", got);
        goto done;
    }
    cc_compare(cc, "out", &got, &ref, NULL, 1, AMPX_F32, (double)total + 2, CMP_NORM | CMP_ELEM);
done:
    return;
}

// ---------------------------------------------------------------------------------------
// AMP: unscale-and-check and gradient statistics are exact; the scaler update is replayed
// against reference.c's model step by step, over the whole 128-byte block.

static void conf_scalars_to_tensor(conf_tensor *S, const ampx_scalars *s) {
    for (uint64_t i = 0; i < 32; i++) {
        uint32_t w;
        memcpy(&w, (const char *)s + 4 * i, 4);
        ct_set_bits(S, i, w);
    }
}

static void conf_scalars_from_back(const conf_tensor *S, ampx_scalars *s) {
    memcpy(s, S->back + S->lead, sizeof *s);
}

static const char *const conf_scalar_fields[32] = {
    "scale",
    "found_inf",
    "growth_tracker",
    "hysteresis_left",
    "applied_steps",
    "skipped_steps",
    "consecutive_skips",
    "last_found_inf",
    "stop_reason",
    "lr",
    "mode",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "hysteresis",
    "consecutive_hysteresis",
    "min_scale",
    "max_scale",
    "on_min_scale_error",
    "max_consecutive_skips",
    "lr_schedule",
    "lr_base",
    "lr_min",
    "warmup_steps",
    "decay_steps",
    "reserved[0]",
    "reserved[1]",
    "reserved[2]",
    "reserved[3]",
    "reserved[4]",
    "reserved[5]",
    "reserved[6]",
};

/* Compares two blocks word by word; float fields are printed as floats. skip_lr leaves the
 * lr word to the caller. Returns 0 when equal. */
static int conf_scalars_diff(conf_case_ctx *cc, const char *when, const ampx_scalars *got,
                             const ampx_scalars *exp, int skip_lr) {
    for (int i = 0; i < 32; i++) {
        uint32_t g, e;
        memcpy(&g, (const char *)got + 4 * i, 4);
        memcpy(&e, (const char *)exp + 4 * i, 4);
        if (g == e || (skip_lr && i == 9)) continue;
        int is_float =
            i == 0 || i == 9 || i == 11 || i == 12 || i == 16 || i == 17 || i == 21 || i == 22;
        float gf, ef;
        memcpy(&gf, &g, 4);
        memcpy(&ef, &e, 4);
        if (is_float)
            cc_fail(cc, "%sscalars.%s = %.9g, expected %.9g", when, conf_scalar_fields[i],
                    (double)gf, (double)ef);
        else
            cc_fail(cc, "%sscalars.%s = %d, expected %d", when, conf_scalar_fields[i], (int32_t)g,
                    (int32_t)e);
        return -1;
    }
    return 0;
}

static void case_unscale_check(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint32_t count;
        uint64_t sizes[3];
        float scale;
        int32_t found_inf0, mode;
        uint32_t flag_base;
        int bad, badkind, mixed; /* bad: tensor with a non-finite value (-1 none);
                                    badkind 0 inf, 1 NaN, 2 overflow by the multiply */
    } cfgs[] = {
        {1, {7}, 1024.0f, 0, AMPX_SCALER_DYNAMIC, 0, -1, 0, 0},
        {3, {13, 1031, 1}, 65536.0f, 0, AMPX_SCALER_DYNAMIC, 2, 1, 0, 0},
        {3, {5, 64, 9}, 3.0f, 1, AMPX_SCALER_DYNAMIC, 1, 2, 1, 0},
        {2, {31, 7}, 1024.0f, 0, AMPX_SCALER_NONE, 0, 0, 1, 0},
        {2, {17, 3}, 0x1p-10f, 0, AMPX_SCALER_DYNAMIC, 0, 1, 2, 0},
        {3, {7, 8, 9}, 512.0f, 0, AMPX_SCALER_STATIC, 3, -1, 0, 1},
        /* large tier */
        {2, {100003, 70001}, 65536.0f, 0, AMPX_SCALER_DYNAMIC, 1, 1, 0, 0},
        {3, {70001, 5, 100003}, 3.0f, 0, AMPX_SCALER_STATIC, 0, -1, 0, 1},
    };
    uint32_t count = cfgs[variant].count, fb = cfgs[variant].flag_base;
    int bad = cfgs[variant].bad, badkind = cfgs[variant].badkind;
    int mixed = cfgs[variant].mixed && dts[0] != AMPX_I32 &&
                conf_all_floats_supported(r, AMPX_OP_UNSCALE_CHECK);
    static const char *kinds[] = {"inf", "NaN", "overflow"};
    cc_shape(cc, "tensors=%u scale=%g found_inf=%d mode=%d flag_base=%u%s%s%s", count,
             (double)cfgs[variant].scale, cfgs[variant].found_inf0, cfgs[variant].mode, fb,
             bad >= 0 ? " with " : "", bad >= 0 ? kinds[badkind] : "",
             mixed ? " mixed dtypes" : "");
    conf_tensor *G[3] = {0};
    ampx_tensor tl[3];
    uint64_t ne[3];
    for (uint32_t t = 0; t < count; t++) {
        G[t] = ct_new(cc, "g[t]", mixed ? (ampx_dtype)(t % 3) : dts[0], cfgs[variant].sizes[t],
                      CT_INOUT);
        if (!G[t]) goto done;
        tl[t] = G[t]->t;
        ne[t] = G[t]->n;
    }
    conf_tensor *F = ct_new(cc, "flags", AMPX_I32, fb + count + 2, CT_INOUT);
    conf_tensor *S = ct_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    if (!cc_ok(cc)) goto done;
    for (uint32_t t = 0; t < count; t++) {
        ct_fill(cc, G[t], -1000, 1000);
        if ((int)t == bad) {
            uint64_t at = G[t]->n / 2;
            if (badkind == 0)
                ct_set(G[t], at, -INFINITY);
            else if (badkind == 1)
                ct_set_bits(G[t], at,
                            G[t]->esz == 2 ? (G[t]->dt == AMPX_BF16 ? 0x7fd1u : 0x7e11u)
                                           : 0x7fc01234u);
            else
                ct_set(G[t], at, ref_round(G[t]->dt, 0.75 * ref_max_finite(G[t]->dt)));
        }
    }
    for (uint64_t i = 0; i < F->n; i++)
        ct_set(F, i, 7);
    ampx_scalars s0    = {0};
    s0.scale           = cfgs[variant].scale;
    s0.found_inf       = cfgs[variant].found_inf0;
    s0.mode            = cfgs[variant].mode;
    s0.growth_tracker  = 5;
    s0.hysteresis_left = s0.hysteresis = 2;
    s0.growth_factor                   = 2.0f;
    s0.backoff_factor                  = 0.5f;
    s0.growth_interval                 = 2000;
    s0.max_scale                       = INFINITY;
    s0.lr                              = 0.01f;
    conf_scalars_to_tensor(S, &s0);
    ampx_unscale_check_args a = {sizeof a, fb, {count, tl, ne}, F->t, S->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "unscale_check", call_unscale(r, AMPX_OP_UNSCALE_CHECK, &a)))
        goto done;
    int any = 0;
    for (uint32_t t = 0; t < count; t++) {
        int flag = 0;
        for (uint64_t i = 0; i < G[t]->n; i++) {
            double e = ref_unscale(G[t]->dt, G[t]->v[i], s0.scale, s0.mode);
            flag |= !isfinite(e);
            uint32_t gb = ct_bits(G[t], G[t]->back, i);
            int ok      = isnan(e) ? isnan(ct_get(G[t], i))
                                   : gb == (ref_encode(G[t]->dt, e) & (G[t]->esz == 2 ? 0xffffu : ~0u));
            if (!ok) {
                cc_fail(cc, "g[%u][%" PRIu64 "] = %.9g (0x%x), expected %.9g (from %.9g)", t, i,
                        ct_get(G[t], i), gb, e, G[t]->v[i]);
                goto done;
            }
        }
        any |= flag;
        int32_t gf = (int32_t)ct_bits(F, F->back, fb + t);
        if (gf != flag) {
            cc_fail(cc, "flags[%u] = %d, expected %d", fb + t, gf, flag);
            goto done;
        }
    }
    for (uint64_t i = 0; i < F->n; i++)
        if ((i < fb || i >= fb + count) && ct_bits(F, F->back, i) != 7u) {
            cc_fail(cc, "flags[%" PRIu64 "] outside [flag_base, flag_base + count) was modified",
                    i);
            goto done;
        }
    ampx_scalars exp = s0, got;
    exp.found_inf |= any;
    conf_scalars_from_back(S, &got);
    conf_scalars_diff(cc, "", &got, &exp, 0);
done:
    return;
}

static void case_grad_stats(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    static const struct {
        uint32_t count;
        uint64_t sizes[3];
        ampx_dtype target;
        int pattern, mixed;
    } cfgs[] = {
        /* pattern 0: all zero, 1: mixed values, 2: tensor 0 entirely non-finite */
        {1, {1}, AMPX_F32, 0, 0},
        {3, {7, 1031, 13}, AMPX_BF16, 1, 0},
        {2, {64, 5}, AMPX_F16, 2, 0},
        {3, {31, 2, 100}, AMPX_F16, 1, 0},
        {3, {40, 50, 60}, AMPX_F32, 1, 1},
        /* large tier */
        {2, {100003, 70001}, AMPX_BF16, 1, 0},
        {3, {70001, 3, 100003}, AMPX_F16, 1, 1},
    };
    uint32_t count    = cfgs[variant].count;
    ampx_dtype target = cfgs[variant].target;
    int pattern       = cfgs[variant].pattern;
    int mixed         = cfgs[variant].mixed && dts[0] != AMPX_I32 &&
                conf_all_floats_supported(r, AMPX_OP_GRAD_STATS);
    cc_shape(cc, "tensors=%u target=%s %s%s", count, ampx_dtype_name(target),
             pattern == 0   ? "zeros"
             : pattern == 1 ? "zeros+tiny+non-finite"
                            : "all non-finite",
             mixed ? " mixed dtypes" : "");
    conf_tensor *G[3] = {0};
    ampx_tensor tl[3];
    uint64_t ne[3];
    for (uint32_t t = 0; t < count; t++) {
        G[t] =
            ct_new(cc, "g[t]", mixed ? (ampx_dtype)(t % 3) : dts[0], cfgs[variant].sizes[t], CT_IN);
        if (!G[t]) goto done;
        tl[t] = G[t]->t;
        ne[t] = G[t]->n;
    }
    conf_tensor *ST = ct_new(cc, "stats", AMPX_F32, 4 * count, CT_OUT);
    conf_tensor *CN = ct_new(cc, "counts", AMPX_I32, 3 * count, CT_OUT);
    if (!cc_ok(cc)) goto done;
    for (uint32_t t = 0; t < count; t++)
        for (uint64_t i = 0; i < G[t]->n; i++) {
            ampx_dtype dt = G[t]->dt;
            uint64_t k    = conf_next(&cc->rng) % 16;
            double x      = conf_uniform(&cc->rng, -3, 3);
            if (pattern == 0 || (pattern == 1 && k == 0))
                x = 0.0;
            else if (pattern == 2 && t == 0)
                x = (i % 3 == 0) ? INFINITY : (i % 3 == 1) ? -INFINITY : NAN;
            else if (k == 1)
                x = ldexp(conf_uniform(&cc->rng, 1, 2), -20); /* below f16 normal */
            else if (k == 2)
                x = ldexp(conf_uniform(&cc->rng, -2, 2), -130); /* below f32 normal */
            else if (k == 3 && t == 1)
                x = (i & 1) ? NAN : -INFINITY;
            ct_set(G[t], i, ref_round(dt, x));
        }
    /* a long tensor ends on its largest |g|: max|g| is exact, so a lost tail shows */
    for (uint32_t t = 0; t < count; t++)
        if (G[t]->n >= CONF_LARGE && pattern == 1) ct_set(G[t], G[t]->n - 1, -3.5);
    ampx_grad_stats_args a = {sizeof a, target, {count, tl, ne}, ST->t, CN->t};
    if (cc_upload(cc) ||
        cc_finish_call(cc, "grad_stats", call_grad_stats(r, AMPX_OP_GRAD_STATS, &a)))
        goto done;
    for (uint32_t t = 0; t < count; t++) {
        double st[4], mm;
        int32_t cn[3];
        ref_grad_stats(G[t]->n, G[t]->v, target, st, cn, &mm);
        double got[4];
        for (int j = 0; j < 4; j++)
            got[j] = ct_get(ST, 4 * t + (uint64_t)j);
        char what[32];
        snprintf(what, sizeof what, "stats[%u].max|g|", t);
        cc_compare(cc, what, &got[0], &st[0], NULL, 1, AMPX_F32, 0, CMP_EXACT);
        snprintf(what, sizeof what, "stats[%u].mean", t);
        cc_compare(cc, what, &got[1], &st[1], &mm, 1, AMPX_F32, (double)G[t]->n + 4, CMP_ELEM);
        snprintf(what, sizeof what, "stats[%u].rms", t);
        cc_compare(cc, what, &got[2], &st[2], NULL, 1, AMPX_F32, (double)G[t]->n + 4, CMP_ELEM);
        snprintf(what, sizeof what, "stats[%u].count", t);
        cc_compare(cc, what, &got[3], &st[3], NULL, 1, AMPX_F32, 0, CMP_EXACT);
        static const char *cnames[3] = {"zeros", "below smallest normal", "non-finite"};
        for (int j = 0; j < 3; j++) {
            int32_t gc = (int32_t)ct_bits(CN, CN->back, 3 * t + (uint64_t)j);
            if (gc != cn[j]) {
                cc_fail(cc, "counts[%u] (%s) = %d, expected %d", 3 * t + (unsigned)j, cnames[j], gc,
                        cn[j]);
                goto done;
            }
        }
    }
done:
    return;
}

/* Scenarios of the scaler: a configuration and a sequence of found_inf values. */
typedef struct scaler_scenario {
    const char *name;
    int32_t mode;
    float init, growth, backoff;
    int32_t interval, hysteresis, consecutive;
    float min_scale, max_scale;
    int32_t on_min_error, max_skips;
    const char *seq; /* '0' applied, '1' overflow */
} scaler_scenario;

static const scaler_scenario scaler_scenarios[] = {
    {"pytorch", AMPX_SCALER_DYNAMIC, 65536.0f, 2.0f, 0.5f, 3, 1, 0, 0.0f, INFINITY, 0, 0,
     "00010000011000"},
    {"hysteresis=3", AMPX_SCALER_DYNAMIC, 1024.0f, 2.0f, 0.5f, 2, 3, 0, 0.0f, INFINITY, 0, 0,
     "1101110111100"},
    {"consecutive_hysteresis", AMPX_SCALER_DYNAMIC, 1024.0f, 2.0f, 0.5f, 4, 2, 1, 0.0f, INFINITY, 0,
     0, "10101101100"},
    {"min_scale stop", AMPX_SCALER_DYNAMIC, 65536.0f, 2.0f, 0.25f, 5, 1, 0, 16384.0f, INFINITY, 1,
     0, "1110"},
    {"min_scale clamp", AMPX_SCALER_DYNAMIC, 100.0f, 2.0f, 0.3f, 5, 1, 0, 7.0f, INFINITY, 0, 0,
     "1111101"},
    {"max_scale", AMPX_SCALER_DYNAMIC, 32768.0f, 2.0f, 0.5f, 1, 1, 0, 0.0f, 131072.0f, 0, 0,
     "00000"},
    {"growth to inf blocked", AMPX_SCALER_DYNAMIC, 0x1p127f, 2.0f, 0.5f, 1, 1, 0, 0.0f, INFINITY, 0,
     0, "0010"},
    {"max_consecutive_skips", AMPX_SCALER_DYNAMIC, 1024.0f, 2.0f, 0.5f, 10, 1, 0, 1.0f, INFINITY, 0,
     2, "110111"},
    {"none", AMPX_SCALER_NONE, 1.0f, 2.0f, 0.5f, 1, 1, 0, 0.0f, INFINITY, 0, 0, "10100"},
    {"static", AMPX_SCALER_STATIC, 128.0f, 2.0f, 0.5f, 1, 2, 0, 0.0f, INFINITY, 0, 3, "0111100"},
    {"odd factors", AMPX_SCALER_DYNAMIC, 3.0f, 1.5f, 0.7f, 2, 1, 0, 0.0f, INFINITY, 0, 0,
     "0001001000"},
};

static void case_scaler_update(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const scaler_scenario *sc = &scaler_scenarios[variant];
    cc_shape(cc, "%s: steps %s", sc->name, sc->seq);
    conf_tensor *S = ct_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    if (!cc_ok(cc)) goto done;
    ampx_scalars m    = {0};
    m.scale           = sc->init;
    m.mode            = sc->mode;
    m.growth_factor   = sc->growth;
    m.backoff_factor  = sc->backoff;
    m.growth_interval = sc->interval;
    m.hysteresis = m.hysteresis_left = sc->hysteresis;
    m.consecutive_hysteresis         = sc->consecutive;
    m.min_scale                      = sc->min_scale;
    m.max_scale                      = sc->max_scale;
    m.on_min_scale_error             = sc->on_min_error;
    m.max_consecutive_skips          = sc->max_skips;
    m.lr                             = 0.125f;
    m.lr_base                        = 0.25f;
    conf_scalars_to_tensor(S, &m);
    if (cc_upload(cc)) goto done;
    ampx_scaler_update_args a = {sizeof a, S->t};
    size_t len                = strlen(sc->seq);
    for (size_t step = 0; step < len; step++) {
        /* the unscale pass would have set found_inf: write just that word */
        int32_t fi     = sc->seq[step] == '1';
        m.found_inf    = fi;
        ampx_status st = r->ifc->buffer_write(r->ctx, S->t.buf,
                                              S->lead + offsetof(ampx_scalars, found_inf), &fi, 4);
        if (st != AMPX_OK) {
            cc_fail(cc, "buffer_write: %s", ampx_status_name(st));
            goto done;
        }
        st = call_scaler_update(r, AMPX_OP_SCALER_UPDATE, &a);
        if (cc->probe || st != AMPX_OK) {
            cc_finish_call(cc, "scaler_update", st);
            goto done;
        }
        if (cc_finish_call(cc, "scaler_update", st)) goto done;
        ref_scaler_update(&m);
        ampx_scalars got;
        conf_scalars_from_back(S, &got);
        char when[48];
        snprintf(when, sizeof when, "after step %zu (found_inf=%d): ", step + 1, fi);
        if (conf_scalars_diff(cc, when, &got, &m, 0)) goto done;
    }
done:
    return;
}

// ---------------------------------------------------------------------------------------
// Optimizers. Skipped steps must leave every byte alone; applied steps are compared with
// the reference elementwise (mag carries each term's size and the op count), and the
// low-precision copies must be the round-to-nearest-even of the plugin's own new params.

typedef struct opt_cfg {
    uint32_t count;
    uint64_t sizes[3];
    float momentum, dampening; /* SGD; for AdamW: beta1, beta2 */
    int nesterov;
    float wd;
    int per_tensor_wd, clip; /* clip 0 none, 1 active, 2 given but inactive */
    ampx_dtype copy[3];      /* AMPX_I32: no copy */
    int found_inf, stochastic;
    int32_t applied, schedule;
} opt_cfg;

#define NOC AMPX_I32
static const opt_cfg sgd_cfgs[] = {
    {1, {7}, 0.0f, 0.0f, 0, 0.0f, 0, 0, {NOC}, 0, 0, 0, AMPX_LR_CONSTANT},
    {3,
     {13, 1031, 1},
     0.9f,
     0.0f,
     0,
     1e-4f,
     0,
     0,
     {AMPX_BF16, NOC, AMPX_F16},
     0,
     0,
     0,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {64, 5, 300},
     0.9f,
     0.1f,
     1,
     1e-2f,
     1,
     1,
     {AMPX_F16, AMPX_BF16, NOC},
     0,
     0,
     5,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {64, 5, 300},
     0.9f,
     0.1f,
     1,
     1e-2f,
     1,
     1,
     {AMPX_F16, AMPX_BF16, NOC},
     1,
     0,
     5,
     AMPX_LR_WARMUP_COSINE},
    {2, {129, 33}, 0.5f, 0.0f, 0, 0.0f, 0, 2, {AMPX_BF16, AMPX_F16}, 0, 1, 3, AMPX_LR_CONSTANT},
    /* large tier */
    {2,
     {100003, 70001},
     0.9f,
     0.0f,
     1,
     1e-4f,
     1,
     1,
     {AMPX_BF16, AMPX_F16},
     0,
     1,
     3,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {70001, 7, 100003},
     0.9f,
     0.1f,
     0,
     1e-2f,
     0,
     2,
     {AMPX_F16, NOC, AMPX_BF16},
     0,
     0,
     0,
     AMPX_LR_WARMUP_COSINE},
};
static const opt_cfg adamw_cfgs[] = {
    {1, {7}, 0.9f, 0.999f, 0, 0.0f, 0, 0, {NOC}, 0, 0, 0, AMPX_LR_CONSTANT},
    {3,
     {13, 1031, 1},
     0.9f,
     0.999f,
     0,
     1e-2f,
     0,
     0,
     {AMPX_BF16, NOC, AMPX_F16},
     0,
     0,
     0,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {64, 5, 300},
     0.8f,
     0.99f,
     0,
     1e-1f,
     1,
     1,
     {AMPX_F16, AMPX_BF16, NOC},
     0,
     0,
     9,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {64, 5, 300},
     0.9f,
     0.999f,
     0,
     1e-2f,
     1,
     1,
     {AMPX_F16, AMPX_BF16, NOC},
     1,
     0,
     5,
     AMPX_LR_WARMUP_COSINE},
    {2, {129, 33}, 0.9f, 0.999f, 0, 0.0f, 0, 2, {AMPX_BF16, AMPX_F16}, 0, 1, 99, AMPX_LR_CONSTANT},
    /* large tier */
    {2,
     {100003, 70001},
     0.9f,
     0.999f,
     0,
     1e-2f,
     1,
     1,
     {AMPX_BF16, AMPX_F16},
     0,
     1,
     9,
     AMPX_LR_WARMUP_COSINE},
    {3,
     {70001, 7, 100003},
     0.8f,
     0.99f,
     0,
     1e-1f,
     0,
     2,
     {AMPX_F16, NOC, AMPX_BF16},
     0,
     0,
     0,
     AMPX_LR_CONSTANT},
};

static void case_optimizer(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                           int adam) {
    const opt_cfg *c = adam ? &adamw_cfgs[variant] : &sgd_cfgs[variant];
    uint32_t count   = c->count;
    int has_state    = adam || c->momentum != 0.0f;
    cc_shape(cc, "tensors=%u %s=%g %s=%g%s wd=%g%s%s%s%s applied_steps=%d%s", count,
             adam ? "beta1" : "momentum", (double)c->momentum, adam ? "beta2" : "dampening",
             (double)c->dampening, c->nesterov ? " nesterov" : "", (double)c->wd,
             c->per_tensor_wd ? " per-tensor" : "",
             c->clip == 1   ? " clip"
             : c->clip == 2 ? " clip-inactive"
                            : "",
             c->found_inf ? " found_inf" : "", c->stochastic ? " stochastic-copy" : "", c->applied,
             c->schedule ? " cosine" : "");
    conf_tensor *P[3] = {0}, *G[3] = {0}, *M[3] = {0}, *V[3] = {0}, *CP[3] = {0};
    ampx_tensor tp[3], tg[3], tm[3], tv[3], tc[3];
    uint64_t ne[3];
    float wd[3];
    for (uint32_t t = 0; t < count; t++) {
        uint64_t n = c->sizes[t];
        ne[t]      = n;
        P[t]       = ct_new(cc, "param", AMPX_F32, n, CT_INOUT);
        G[t]       = ct_new(cc, "grad", dts[0], n, CT_IN);
        M[t]  = has_state ? ct_new(cc, adam ? "m" : "momentum_buf", AMPX_F32, n, CT_INOUT) : NULL;
        V[t]  = adam ? ct_new(cc, "v", AMPX_F32, n, CT_INOUT) : NULL;
        CP[t] = c->copy[t] != NOC ? ct_new(cc, "copy", c->copy[t], n, CT_INOUT) : NULL;
        if (!cc_ok(cc)) goto done;
        tp[t] = P[t]->t;
        tg[t] = G[t]->t;
        tm[t] = M[t] ? M[t]->t : conf_null_tensor;
        tv[t] = V[t] ? V[t]->t : conf_null_tensor;
        tc[t] = CP[t] ? CP[t]->t : conf_null_tensor;
        wd[t] = c->wd * (float)(t + 1);
    }
    conf_tensor *GSQ = c->clip ? ct_new(cc, "grad_sq_sum", AMPX_F32, 1, CT_IN) : NULL;
    conf_tensor *S   = ct_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    if (!cc_ok(cc)) goto done;
    double gss = 0.0;
    for (uint32_t t = 0; t < count; t++) {
        ct_fill(cc, P[t], -1, 1);
        ct_fill(cc, G[t], -1, 1);
        if (M[t]) ct_fill(cc, M[t], -0.1, 0.1);
        if (V[t]) ct_fill(cc, V[t], 0.0, 0.05);
        if (CP[t] && c->found_inf) ct_fill(cc, CP[t], -1, 1); /* must survive a skipped step */
        gss += ref_sum_squares(G[t]->n, G[t]->v);
    }
    float mgn = 0.0f;
    if (GSQ) {
        ct_set(GSQ, 0, ref_round(AMPX_F32, gss));
        mgn = (float)ref_round(AMPX_F32, (c->clip == 1 ? 0.5 : 10.0) * sqrt(gss));
    }
    ampx_scalars s0    = {0};
    s0.scale           = 1024.0f;
    s0.found_inf       = c->found_inf;
    s0.applied_steps   = c->applied;
    s0.mode            = AMPX_SCALER_DYNAMIC;
    s0.lr              = -1.0f;
    s0.growth_factor   = 2.0f;
    s0.backoff_factor  = 0.5f;
    s0.growth_interval = 2000;
    s0.hysteresis = s0.hysteresis_left = 1;
    s0.max_scale                       = INFINITY;
    s0.lr_schedule                     = c->schedule;
    s0.lr_base                         = adam ? 1e-2f : 0.1f;
    s0.lr_min                          = adam ? 1e-4f : 1e-3f;
    s0.warmup_steps                    = 3;
    s0.decay_steps                     = 20;
    conf_scalars_to_tensor(S, &s0);
    uint64_t seed = conf_next(&cc->rng);
    ampx_status st;
    if (cc_upload(cc)) goto done;
    if (adam) {
        ampx_adamw_args a = {sizeof a,
                             c->momentum,
                             c->dampening,
                             1e-8f,
                             c->wd,
                             mgn,
                             c->per_tensor_wd ? wd : NULL,
                             {count, tp, ne},
                             tg,
                             tm,
                             tv,
                             tc,
                             GSQ ? GSQ->t : conf_null_tensor,
                             S->t,
                             (uint32_t)c->stochastic,
                             seed};
        st                = call_adamw(r, AMPX_OP_ADAMW, &a);
    } else {
        ampx_sgd_args a = {sizeof a,
                           (uint32_t)c->nesterov,
                           c->momentum,
                           c->dampening,
                           c->wd,
                           mgn,
                           c->per_tensor_wd ? wd : NULL,
                           {count, tp, ne},
                           tg,
                           has_state ? tm : NULL,
                           tc,
                           GSQ ? GSQ->t : conf_null_tensor,
                           S->t,
                           (uint32_t)c->stochastic,
                           seed};
        st              = call_sgd(r, AMPX_OP_SGD, &a);
    }
    if (cc_finish_call(cc, adam ? "adamw" : "sgd", st)) goto done;
    ampx_scalars got;
    conf_scalars_from_back(S, &got);
    if (c->found_inf) { /* skipped: every tensor and the block bitwise unchanged */
        for (uint32_t i = 0; i < cc->n_tensors; i++) {
            conf_tensor *ct = cc->tensors[i];
            if (memcmp(ct->image + ct->lead, ct->back + ct->lead, ct->bytes) != 0) {
                cc_fail(cc, "%s changed although found_inf is set", ct->name);
                goto done;
            }
        }
        goto done;
    }
    float lr = ref_scheduled_lr(&s0, s0.applied_steps);
    if (conf_scalars_diff(cc, "", &got, &s0, 1)) goto done;
    if (!(fabs((double)got.lr - (double)lr) <= 0x1p-21 * fabs((double)lr))) {
        cc_fail(cc, "scalars.lr = %.9g, expected %.9g (schedule at step %d)", (double)got.lr,
                (double)lr, s0.applied_steps);
        goto done;
    }
    double clip = 1.0;
    if (GSQ) clip = fmin(1.0, (double)mgn / (sqrt(GSQ->v[0]) + 1e-6));
    for (uint32_t t = 0; t < count; t++) {
        uint64_t n = ne[t];
        double *rp = cc_alloc(cc, n * sizeof(double)), *rm = cc_alloc(cc, n * sizeof(double));
        double *rv = cc_alloc(cc, n * sizeof(double)), *mp = cc_alloc(cc, n * sizeof(double));
        double *mm = cc_alloc(cc, n * sizeof(double)), *gp = cc_values(cc, P[t]);
        if (!cc_ok(cc)) goto done;
        memcpy(rp, P[t]->v, n * sizeof(double));
        if (M[t]) memcpy(rm, M[t]->v, n * sizeof(double));
        if (V[t]) memcpy(rv, V[t]->v, n * sizeof(double));
        double wdt = c->per_tensor_wd ? wd[t] : c->wd;
        if (adam) {
            ref_adamw_hparams h = {lr, clip, wdt, c->momentum, c->dampening, 1e-8f, c->applied + 1};
            ref_adamw(n, &h, rp, G[t]->v, rm, rv, mp, mm);
        } else {
            ref_sgd_hparams h = {lr,          clip,           wdt, c->momentum, c->dampening,
                                 c->nesterov, c->applied == 0};
            ref_sgd(n, &h, rp, G[t]->v, M[t] ? rm : NULL, mp, mm);
        }
        cc_compare(cc, "param", gp, rp, mp, n, AMPX_F32, 4, CMP_ELEM);
        if (M[t]) {
            double *gm = cc_values(cc, M[t]);
            if (!gm) goto done;
            cc_compare(cc, adam ? "m" : "momentum_buf", gm, rm, mm, n, AMPX_F32, 4, CMP_ELEM);
        }
        if (V[t]) {
            double *gv = cc_values(cc, V[t]);
            if (!gv) goto done;
            cc_compare(cc, "v", gv, rv, NULL, n, AMPX_F32, 4, CMP_ELEM);
        }
        /* The copy is the rounding of the plugin's own new parameter: to nearest even, or
         * stochastically with rnd = ampx_hash32(seed + t, i), compared bit for bit. */
        if (CP[t])
            for (uint64_t i = 0; i < n; i++) {
                uint32_t rnd = ref_hash32(seed + t, i);
                double want  = c->stochastic ? ref_round_sr(CP[t]->dt, gp[i], rnd)
                                             : ref_round(CP[t]->dt, gp[i]);
                double got_c = ct_get(CP[t], i), lo, hi;
                uint32_t gb = ct_bits(CP[t], CP[t]->back, i), wb = ref_encode(CP[t]->dt, want);
                ref_neighbours(CP[t]->dt, gp[i], &lo, &hi);
                if (c->stochastic &&
                    !(got_c == lo || got_c == hi || got_c == ref_round(CP[t]->dt, gp[i]))) {
                    cc_fail(cc, "copy[%u][%" PRIu64 "] (%s) = %.9g: not a neighbour of param %.9g",
                            t, i, ampx_dtype_name(CP[t]->dt), got_c, gp[i]);
                    goto done;
                }
                if (isnan(want) ? !isnan(got_c) : gb != wb) {
                    if (c->stochastic)
                        cc_fail(cc,
                                "copy[%u][%" PRIu64 "] (%s) = %.9g, expected %.9g: the stochastic "
                                "rounding of param %a with rnd = ampx_hash32(seed + %u, %" PRIu64
                                ") = 0x%08x",
                                t, i, ampx_dtype_name(CP[t]->dt), got_c, want, gp[i], t, i, rnd);
                    else
                        cc_fail(cc,
                                "copy[%u][%" PRIu64 "] (%s) = %.9g, expected %.9g of param %.9g", t,
                                i, ampx_dtype_name(CP[t]->dt), got_c, want, gp[i]);
                    goto done;
                }
            }
    }
done:
    return;
}

static void case_sgd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_optimizer(r, cc, dts, variant, 0);
}

static void case_adamw(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_optimizer(r, cc, dts, variant, 1);
}

// ---------------------------------------------------------------------------------------
// The sweep

typedef void (*conf_case_fn)(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);

/* 0 when variant v is left out for these dtypes (a large variant run on a subset of the
 * combinations to bound the sweep's time); such a variant is neither run nor counted. */
typedef int (*conf_runs_fn)(const ampx_dtype *dts, int variant);

typedef struct conf_op_desc {
    uint32_t op;
    uint32_t n_dtypes;   /* floating dtype slots of the heading: 3^n combinations */
    int n_full, n_quick; /* variants run per supported combination */
    conf_case_fn fn;
    conf_runs_fn runs; /* (optional) NULL: every variant runs on every combination */
} conf_op_desc;

static const conf_op_desc conf_ops[] = {
    {AMPX_OP_GEMM, 3, 9, 4, case_gemm, gemm_runs},
    {AMPX_OP_CAST, 2, 10, 4, case_cast, NULL},
    {AMPX_OP_ADD, 3, 8, 3, case_add, NULL},
    {AMPX_OP_MUL, 3, 8, 3, case_mul, NULL},
    {AMPX_OP_SCALE, 2, 7, 3, case_scale, NULL},
    {AMPX_OP_BIAS_GRAD, 2, 7, 3, case_bias_grad, NULL},
    {AMPX_OP_ACT_FWD, 2, 12, 5, case_act_fwd, NULL},
    {AMPX_OP_ACT_BWD, 3, 12, 5, case_act_bwd, NULL},
    {AMPX_OP_SOFTMAX_FWD, 2, 9, 4, case_softmax_fwd, NULL},
    {AMPX_OP_SOFTMAX_BWD, 3, 8, 3, case_softmax_bwd, NULL},
    {AMPX_OP_SOFTMAX_XENT, 2, 9, 5, case_xent, NULL},
    {AMPX_OP_LAYERNORM_FWD, 2, 7, 3, case_layernorm_fwd, NULL},
    {AMPX_OP_LAYERNORM_BWD, 3, 7, 3, case_layernorm_bwd, NULL},
    {AMPX_OP_BATCHNORM_FWD, 2, 8, 4, case_batchnorm_fwd, NULL},
    {AMPX_OP_BATCHNORM_BWD, 3, 8, 3, case_batchnorm_bwd, NULL},
    {AMPX_OP_EMBEDDING_FWD, 2, 6, 3, case_embedding_fwd, NULL},
    {AMPX_OP_EMBEDDING_BWD, 2, 6, 3, case_embedding_bwd, NULL},
    {AMPX_OP_REDUCE, 2, 7, 3, case_reduce, NULL},
    {AMPX_OP_SUM_SQUARES, 1, 7, 5, case_sum_squares, NULL},
    {AMPX_OP_UNSCALE_CHECK, 1, 8, 6, case_unscale_check, NULL},
    {AMPX_OP_GRAD_STATS, 1, 7, 5, case_grad_stats, NULL},
    {AMPX_OP_SCALER_UPDATE, 0, (int)(sizeof scaler_scenarios / sizeof scaler_scenarios[0]),
     (int)(sizeof scaler_scenarios / sizeof scaler_scenarios[0]), case_scaler_update, NULL},
    {AMPX_OP_SGD, 1, 7, 5, case_sgd, NULL},
    {AMPX_OP_ADAMW, 1, 7, 5, case_adamw, NULL},
};

_Static_assert(sizeof conf_ops / sizeof conf_ops[0] == AMPX_OP_COUNT,
               "the conformance suite must cover every op of the ABI");

static void conf_prefix_shape(conf_case_ctx *cc, const char *prefix) {
    char tmp[sizeof cc->rep.shape];
    size_t lp = strlen(prefix), ls = strlen(cc->rep.shape);
    if (lp >= sizeof tmp) return;
    if (ls > sizeof tmp - 1 - lp) ls = sizeof tmp - 1 - lp;
    memcpy(tmp, prefix, lp);
    memcpy(tmp + lp, cc->rep.shape, ls);
    tmp[lp + ls] = '\0';
    memcpy(cc->rep.shape, tmp, sizeof tmp);
}

/* Dtypes outside the heading (i32 where a float belongs; dtable other than f32): supports()
 * must say no, and calling the op anyway must return an error, not crash. */
static void conf_probe_invalid(conf_run *r, const conf_op_desc *d, const ampx_dtype *dts) {
    conf_case_ctx cc;
    cc_begin(r, &cc, d->op, dts, d->n_dtypes, 0, 2);
    if (ampx_backend_supports(r->be, d->op, dts, d->n_dtypes)) {
        cc_shape(&cc, "invalid dtypes");
        cc_fail(&cc, "supports() accepts dtypes the ABI does not allow for this op");
    } else {
        d->fn(r, &cc, dts, 0);
        conf_prefix_shape(&cc, "invalid dtypes: ");
    }
    cc_end(&cc);
}

static void conf_sweep_op(conf_run *r, const conf_op_desc *d) {
    uint32_t nd = d->n_dtypes, combos = 1;
    for (uint32_t i = 0; i < nd; i++)
        combos *= 3;
    for (uint32_t c = 0; c < combos; c++) {
        ampx_dtype dts[3] = {AMPX_F32, AMPX_F32, AMPX_F32};
        for (uint32_t i = 0, q = c; i < nd; i++, q /= 3)
            dts[nd - 1 - i] = (ampx_dtype)(q % 3);
        if (d->op == AMPX_OP_EMBEDDING_BWD && dts[1] != AMPX_F32) continue; /* dtable is f32 */
        conf_case_ctx cc;
        if (!ampx_backend_supports(r->be, d->op, dts, nd)) {
            /* not a failure, but calling it anyway must fail cleanly */
            cc_begin(r, &cc, d->op, dts, nd, 0, 1);
            d->fn(r, &cc, dts, 0);
            cc_end(&cc);
            continue;
        }
        int nv = r->quick ? d->n_quick : d->n_full;
        for (int v = 0; v < nv && r->fatal == AMPX_OK; v++) {
            if (d->runs && !d->runs(dts, v)) continue;
            cc_begin(r, &cc, d->op, dts, nd, v, 0);
            d->fn(r, &cc, dts, v);
            cc_end(&cc);
        }
        if (r->fatal != AMPX_OK) return;
    }
    if (nd > 0) {
        ampx_dtype bad[3] = {AMPX_I32, AMPX_F32, AMPX_F32};
        conf_probe_invalid(r, d, bad);
    }
    if (d->op == AMPX_OP_EMBEDDING_BWD) {
        ampx_dtype bad[2] = {AMPX_F32, AMPX_BF16};
        conf_probe_invalid(r, d, bad);
    }
}

// ---------------------------------------------------------------------------------------
// Entry point

#define CONF_DEFAULT_SEED 0x616d7078u /* "ampx" */

AMPX_API ampx_status ampx_conformance_run(ampx_backend *be, const ampx_conf_options *opt,
                                          ampx_conf_report_fn report, void *user,
                                          ampx_conf_summary *summary) {
    ampx_conf_summary local;
    if (!summary) summary = &local;
    memset(summary, 0, sizeof *summary);
    if (!be) return AMPX_ERR_INVALID;
    conf_run r   = {0};
    r.be         = be;
    r.ifc        = ampx_backend_iface_of(be);
    r.ctx        = ampx_backend_context(be);
    r.seed       = opt && opt->seed ? opt->seed : CONF_DEFAULT_SEED;
    r.quick      = opt ? opt->quick : 0;
    r.report     = report;
    r.user       = user;
    r.sum        = summary;
    int32_t only = opt ? opt->op : -1;
    if (only < -1 || only >= (int32_t)AMPX_OP_COUNT) return AMPX_ERR_INVALID;
    if (!r.ifc || !r.ctx || !r.ifc->buffer_alloc || !r.ifc->buffer_free || !r.ifc->buffer_write ||
        !r.ifc->buffer_read || !r.ifc->synchronize)
        return AMPX_ERR_INVALID;
    for (size_t i = 0; i < sizeof conf_ops / sizeof conf_ops[0] && r.fatal == AMPX_OK; i++)
        if (only < 0 || (uint32_t)only == conf_ops[i].op) conf_sweep_op(&r, &conf_ops[i]);
    return r.fatal;
}
