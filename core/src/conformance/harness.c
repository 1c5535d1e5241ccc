/* harness.c — what every conformance case is built from: the tolerance table, seeded
 * random numbers, a case's tensors (guard bytes, poisoned outputs, byte offsets), upload
 * and download, the comparison with the double-precision reference, and the scalars
 * block. The sweep that runs the cases of every op is sweep.c. */
#include "conformance/harness.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Tolerance table (harness.h explains it)

double conf_tol(ampx_dtype out, double k) {
    return 2.0 * ref_unit_roundoff(out) + 4.0 * k * CONF_F32_UNIT;
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

uint64_t conf_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    return conf_mix(*s);
}

double conf_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * ((double)(conf_next(s) >> 11) * 0x1p-53);
}

// ---------------------------------------------------------------------------------------
// A run, a case, and the tensors of a case

int conf_ok(const conf_case_ctx *cc) {
    return cc->rep.verdict != AMPX_CONF_FAIL;
}

/* Records a failure; the first message is kept (later ones are usually consequences). */
void conf_fail(conf_case_ctx *cc, const char *fmt, ...) {
    if (cc->rep.verdict == AMPX_CONF_FAIL) return;
    cc->rep.verdict = AMPX_CONF_FAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc->rep.message, sizeof cc->rep.message, fmt, ap);
    va_end(ap);
}

void conf_shape(conf_case_ctx *cc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc->rep.shape, sizeof cc->rep.shape, fmt, ap);
    va_end(ap);
}

/* Zeroed host memory owned by the case; NULL (and a failed case) when out of memory. */
void conf_measure(conf_case_ctx *cc, const char *measure, double err, double tol) {
    snprintf(cc->rep.measure, sizeof cc->rep.measure, "%s", measure);
    cc->rep.err = err;
    cc->rep.tol = tol;
}

void *conf_alloc(conf_case_ctx *cc, uint64_t bytes) {
    if (cc->n_allocs == cc->cap_allocs) {
        uint32_t cap = cc->cap_allocs ? 2 * cc->cap_allocs : 64;
        void **p     = realloc(cc->allocs, cap * sizeof *p);
        if (!p) {
            conf_fail(cc, "host out of memory");
            return NULL;
        }
        cc->allocs     = p;
        cc->cap_allocs = cap;
    }
    void *p = calloc(1, bytes ? (size_t)bytes : 1);
    if (!p) {
        conf_fail(cc, "host out of memory (%" PRIu64 " bytes)", bytes);
        return NULL;
    }
    cc->allocs[cc->n_allocs++] = p;
    return p;
}

void conf_case_begin(conf_run *r, conf_case_ctx *cc, uint32_t op, const ampx_dtype *dts,
                     uint32_t nd, int variant, int probe) {
    memset(cc, 0, sizeof *cc);
    cc->run          = r;
    cc->probe        = probe;
    cc->rep.op       = op;
    cc->rep.n_dtypes = nd;
    for (uint32_t i = 0; i < nd && i < 4; i++)
        cc->rep.dtypes[i] = dts[i];
    cc->rep.verdict = probe == 1 ? AMPX_CONF_UNSUPPORTED : AMPX_CONF_PASS;
    cc->rep.index   = variant;
    cc->rep.probe   = probe;
    uint64_t key    = conf_mix(r->seed ^ conf_mix(op + 1));
    for (uint32_t i = 0; i < nd; i++)
        key = conf_mix(key ^ (uint64_t)(dts[i] + 7) << (8 * i));
    cc->rng = conf_mix(key ^ conf_mix((uint64_t)variant * 0x100 + (uint64_t)probe));
}

/* Frees every buffer and host allocation of the case, reports it and counts it. */
void conf_case_end(conf_case_ctx *cc) {
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
    case AMPX_E4M3: return 0x7fu;
    case AMPX_E5M2: return 0x7fu;
    default: return 0x5a5a5a5au;
    }
}

static void conf_tensor_put_bits(conf_tensor *ct, uint8_t *img, uint64_t i, uint32_t bits) {
    uint8_t *p = img + ct->lead + i * ct->esz;
    if (ct->esz == 4)
        memcpy(p, &bits, 4);
    else if (ct->esz == 1)
        *p = (uint8_t)bits;
    else {
        uint16_t h = (uint16_t)bits;
        memcpy(p, &h, 2);
    }
}

uint32_t conf_tensor_bits(const conf_tensor *ct, const uint8_t *img, uint64_t i) {
    const uint8_t *p = img + ct->lead + i * ct->esz;
    if (ct->esz == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    if (ct->esz == 1) return *p;
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* A tensor of n elements in a fresh device buffer. Its lead guard (= its byte offset) is
 * 0, 16 or 64 + 3 elements, picked at random; 64 guard bytes follow. Outputs start
 * poisoned; inputs are filled by the caller. Returns NULL (case failed) on error. */
conf_tensor *conf_tensor_new(conf_case_ctx *cc, const char *name, ampx_dtype dt, uint64_t n,
                             int kind) {
    conf_run *r = cc->run;
    if (!conf_ok(cc)) return NULL;
    if (cc->n_tensors == CONF_MAX_TENSORS) {
        conf_fail(cc, "internal: too many tensors in one case");
        return NULL;
    }
    conf_tensor *ct = conf_alloc(cc, sizeof *ct);
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
    ct->image     = conf_alloc(cc, ct->total);
    ct->v         = conf_alloc(cc, n * sizeof(double));
    if (!ct->image || !ct->v) return NULL;
    memset(ct->image, CONF_GUARD_BYTE, ct->total);
    uint32_t poison = conf_poison(dt);
    for (uint64_t i = 0; i < n; i++) {
        conf_tensor_put_bits(ct, ct->image, i, poison);
        ct->v[i] = NAN;
    }
    ct->t.offset   = ct->lead;
    ct->t.dtype    = dt;
    ampx_status st = r->ifc->buffer_alloc(r->ctx, ct->total, &ct->t.buf);
    if (st != AMPX_OK || !ct->t.buf) {
        ct->t.buf = NULL;
        conf_fail(cc, "buffer_alloc(%" PRIu64 ") for %s: %s: %s", ct->total, name,
                  ampx_status_name(st), ampx_backend_last_error(r->be));
        return NULL;
    }
    cc->tensors[cc->n_tensors++] = ct;
    return ct;
}

/* Sets element i to x, which must be representable in the tensor's dtype (or inf/NaN). */
void conf_tensor_set(conf_tensor *ct, uint64_t i, double x) {
    ct->v[i] = x;
    conf_tensor_put_bits(ct, ct->image, i, ref_encode(ct->dt, x));
}

/* Sets element i to raw bits (NaN payloads, random bit patterns). */
void conf_tensor_set_bits(conf_tensor *ct, uint64_t i, uint32_t bits) {
    conf_tensor_put_bits(ct, ct->image, i, bits);
    ct->v[i] = ref_decode(ct->dt, bits);
}

void conf_tensor_fill(conf_case_ctx *cc, conf_tensor *ct, double lo, double hi) {
    for (uint64_t i = 0; i < ct->n; i++)
        conf_tensor_set(ct, i, ref_round(ct->dt, conf_uniform(&cc->rng, lo, hi)));
}

double conf_tensor_get(const conf_tensor *ct, uint64_t i) {
    return ref_decode(ct->dt, conf_tensor_bits(ct, ct->back, i));
}

/* Writes every tensor (guards and all) to its buffer. */
int conf_upload(conf_case_ctx *cc) {
    conf_run *r = cc->run;
    if (!conf_ok(cc)) return -1;
    for (uint32_t i = 0; i < cc->n_tensors; i++) {
        conf_tensor *ct = cc->tensors[i];
        ampx_status st  = r->ifc->buffer_write(r->ctx, ct->t.buf, 0, ct->image, ct->total);
        if (st != AMPX_OK) {
            conf_fail(cc, "buffer_write of %s: %s: %s", ct->name, ampx_status_name(st),
                      ampx_backend_last_error(r->be));
            return -1;
        }
    }
    return 0;
}

/* Reads every tensor back; checks guards of all and the contents of inputs. */
static int conf_download(conf_case_ctx *cc) {
    conf_run *r = cc->run;
    for (uint32_t i = 0; i < cc->n_tensors; i++) {
        conf_tensor *ct = cc->tensors[i];
        ct->back        = conf_alloc(cc, ct->total);
        if (!ct->back) return -1;
        ampx_status st = r->ifc->buffer_read(r->ctx, ct->t.buf, 0, ct->back, ct->total);
        if (st != AMPX_OK) {
            conf_fail(cc, "buffer_read of %s: %s: %s", ct->name, ampx_status_name(st),
                      ampx_backend_last_error(r->be));
            return -1;
        }
        for (uint64_t b = 0; b < ct->total; b++) {
            int in_data = b >= ct->lead && b < ct->lead + ct->bytes;
            if (!in_data && ct->back[b] != CONF_GUARD_BYTE) {
                if (b < ct->lead)
                    conf_fail(cc, "guard before %s overwritten at byte -%" PRIu64, ct->name,
                              ct->lead - b);
                else
                    conf_fail(cc, "guard after %s overwritten at byte +%" PRIu64, ct->name,
                              b - ct->lead - ct->bytes);
                return -1;
            }
        }
        if (ct->kind == CT_IN &&
            memcmp(ct->image + ct->lead, ct->back + ct->lead, ct->bytes) != 0) {
            for (uint64_t e = 0; e < ct->n; e++)
                if (conf_tensor_bits(ct, ct->image, e) != conf_tensor_bits(ct, ct->back, e)) {
                    conf_fail(cc, "input %s modified at element %" PRIu64 " (0x%x -> 0x%x)",
                              ct->name, e, conf_tensor_bits(ct, ct->image, e),
                              conf_tensor_bits(ct, ct->back, e));
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
int conf_finish_call(conf_case_ctx *cc, const char *what, ampx_status st) {
    conf_run *r = cc->run;
    if (st == AMPX_OK) st = r->ifc->synchronize(r->ctx);
    if (st == AMPX_ERR_DEVICE && r->fatal == AMPX_OK) r->fatal = st; /* nothing after is sound */
    if (cc->probe) {
        if (st == AMPX_OK)
            conf_fail(cc, "%s: supports() rejects these dtypes but the op returned AMPX_OK", what);
        else
            snprintf(cc->rep.message, sizeof cc->rep.message, "supports() = 0; the op returns %s",
                     ampx_status_name(st));
        return 1;
    }
    if (st != AMPX_OK) {
        conf_fail(cc, "%s returned %s%s: %s", what, ampx_status_name(st),
                  st == AMPX_ERR_UNSUPPORTED ? " although supports() accepted the dtypes" : "",
                  ampx_backend_last_error(r->be));
        return 1;
    }
    return conf_download(cc) != 0;
}

// ---------------------------------------------------------------------------------------
// Comparison

/* Compares got with ref over n values; dt is the output dtype, k the reduction length of
 * the tolerance table, mag (optional) the size of the terms per element. */
void conf_compare(conf_case_ctx *cc, const char *what, const double *got, const double *ref,
                  const double *mag, uint64_t n, ampx_dtype dt, double k, int flags) {
    double d2 = 0.0, r2 = 0.0, worst_ratio = 0.0, worst_abs = -1.0;
    uint64_t worst_i = 0, far_i = 0;
    double floor_abs = k * 0x1p-126 + ref_min_subnormal(dt);
    double inner     = flags & CMP_INNER_BF16 ? ref_unit_roundoff(AMPX_BF16) : 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double g = got[i], e = ref[i];
        if (!isfinite(e) || !isfinite(g)) {
            int same = (isnan(e) && isnan(g)) || g == e;
            if (!same) {
                conf_measure(cc, "exact", isnan(g) || isnan(e) ? NAN : fabs(g - e), 0.0);
                conf_fail(cc, "%s[%" PRIu64 "] = %.9g, expected %.9g", what, i, g, e);
                return;
            }
            continue;
        }
        if (flags & CMP_EXACT) {
            if (g != e) {
                conf_measure(cc, "exact", fabs(g - e), 0.0);
                conf_fail(cc, "%s[%" PRIu64 "] = %.9g, expected exactly %.9g", what, i, g, e);
                return;
            }
            continue;
        }
        d2 += (g - e) * (g - e);
        r2 += e * e;
        if (fabs(g - e) > worst_abs) worst_abs = fabs(g - e), far_i = i;
        if (flags & CMP_ELEM) {
            double m     = mag ? mag[i] : fabs(e);
            double bound = 2.0 * ref_unit_roundoff(dt) * fabs(e) +
                           (4.0 * k * CONF_F32_UNIT + inner) * m + floor_abs;
            double ratio = fabs(g - e) / bound;
            if (ratio > worst_ratio) {
                worst_ratio = ratio;
                worst_i     = i;
            }
        }
    }
    if (flags & CMP_EXACT) return;
    if ((flags & CMP_ELEM) && worst_ratio > 0.0 && worst_ratio >= cc->worst) {
        uint64_t i = worst_i;
        cc->worst  = worst_ratio;
        conf_measure(cc, "elementwise (its own bound)", fabs(got[i] - ref[i]),
                     fabs(got[i] - ref[i]) / worst_ratio);
    }
    if ((flags & CMP_ELEM) && worst_ratio > 1.0) {
        uint64_t i = worst_i;
        conf_fail(cc, "%s[%" PRIu64 "] = %.9g, expected %.9g: off by %.3g, %.3g times the bound",
                  what, i, got[i], ref[i], fabs(got[i] - ref[i]), worst_ratio);
    }
    if (flags & CMP_NORM) {
        double err = sqrt(d2) / fmax(sqrt(r2), DBL_MIN);
        if (r2 == 0.0 && d2 == 0.0) err = 0.0;
        /* the table's relative bound, plus the absolute floor per element (outputs that are
         * mostly subnormal in the output dtype round to its subnormal grid) */
        double tol =
            conf_tol(dt, k) + 2.0 * inner + floor_abs * sqrt((double)n) / fmax(sqrt(r2), DBL_MIN);
        if (err / tol >= cc->worst) {
            cc->worst = err / tol;
            conf_measure(cc, "normwise relative", err, tol);
        }
        if (err > tol)
            conf_fail(cc,
                      "%s: normwise relative error %.3g > tolerance %.3g; the furthest element "
                      "%s[%" PRIu64 "] = %.9g, expected %.9g",
                      what, err, tol, what, far_i, got[far_i], ref[far_i]);
    }
}

/* got[] of an output tensor as doubles (case-owned). */
double *conf_values(conf_case_ctx *cc, const conf_tensor *ct) {
    double *g = conf_alloc(cc, ct->n * sizeof(double));
    if (g)
        for (uint64_t i = 0; i < ct->n; i++)
            g[i] = conf_tensor_get(ct, i);
    return g;
}

const ampx_tensor conf_null_tensor = {NULL, 0, AMPX_F32};

// ---------------------------------------------------------------------------------------
// Multi-tensor lists and the scalars block

/* The dtype of tensor t in a multi-tensor list: dts[0], or all three in turn for the
 * mixed variants (used only when the backend supports all three). */
int conf_all_floats_supported(conf_run *r, uint32_t op) {
    for (int d = 0; d < 3; d++) {
        ampx_dtype dt = (ampx_dtype)d;
        if (!ampx_backend_supports(r->be, op, &dt, 1)) return 0;
    }
    return 1;
}

void conf_scalars_to_tensor(conf_tensor *S, const ampx_scalars *s) {
    for (uint64_t i = 0; i < 32; i++) {
        uint32_t w;
        memcpy(&w, (const char *)s + 4 * i, 4);
        conf_tensor_set_bits(S, i, w);
    }
}

void conf_scalars_from_back(const conf_tensor *S, ampx_scalars *s) {
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
int conf_scalars_diff(conf_case_ctx *cc, const char *when, const ampx_scalars *got,
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
        conf_measure(cc, "exact",
                     is_float ? fabs((double)gf - (double)ef)
                              : fabs((double)(int32_t)g - (double)(int32_t)e),
                     0.0);
        if (is_float)
            conf_fail(cc, "%sscalars.%s = %.9g (0x%08x), expected %.9g (0x%08x)", when,
                      conf_scalar_fields[i], (double)gf, g, (double)ef, e);
        else
            conf_fail(cc, "%sscalars.%s = %d, expected %d", when, conf_scalar_fields[i], (int32_t)g,
                      (int32_t)e);
        return -1;
    }
    return 0;
}
