/* harness.h — what the conformance case files share with the harness (harness.c) and the
 * sweep (sweep.c).
 *
 * A case file (cases_<family>.c) holds the cases of one op family: for each op a function
 * conf_case_<op>(run, case, dtypes, variant) that builds its tensors with conf_tensor_new,
 * fills them, calls the op through its slot, finishes the call with conf_finish_call and
 * compares the results with the reference (reference.h) through conf_compare or bit for bit.
 * The harness owns everything around that: the run, the case context and its memory, guard
 * bytes and poison, the tolerance table, and, in sweep.c, the sweep over dtypes and
 * variants (conf_ops lists every op with its variant counts) and the entry point.
 */
#ifndef AMPX_CONFORMANCE_HARNESS_H
#define AMPX_CONFORMANCE_HARNESS_H

#include <stdint.h>
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
//   GEMM k+4 | ADD 3 | BIAS_GRAD rows+1 | ACT (transcendental) 16 | SOFTMAX CONF_K_ROW |
//   XENT loss cols+rows+16, dlogits CONF_K_ROW | LAYERNORM CONF_K_ROW (bwd dgamma rows+cols+16,
//   dbeta rows+16) |
//   BATCHNORM N+16 | EMBEDDING_BWD max duplicates+1 | REDUCE cols+2 |
//   SUM_SQUARES n+2 | GRAD_STATS n+4 | SGD/ADAMW 4 (mag carries the op count)
// Exact (bit for bit): CAST nearest-even and stochastic (rnd = ampx_hash32(seed, i)), SCALE
// and MUL (one f32 product, then one rounding to the output, or one rounding of the exact
// product), ACT relu, EMBEDDING_FWD, UNSCALE_CHECK, GRAD_STATS counts and max,
// SCALER_UPDATE, optimizer copies (stochastic: rnd = ampx_hash32(seed + t, i)), DROPOUT (the
// mask, +0 by its bits where dropped, x * scale as for SCALE where kept) and PERMUTE (a
// copy, widening or nearest-even narrowing; unreached y elements keep their poison).

#define CONF_F32_UNIT 0x1p-24 /* one f32 rounding */

/* K of the row ops' outputs (softmax, log-softmax, their backward, the cross-entropy
 * gradient, layernorm y, dx, mean and rstd): 16 + sqrt(cols), a statistical bound on an f32
 * row sum (its error grows like sqrt(cols) units on data like the cases', Higham and Mary's
 * probabilistic analysis) rather than the worst case cols + 16, which let a sum lose
 * thousands of units at cols = 1031. Measured on cpu (avx2 and portable) and opencl: every
 * f32 row output within 0.025 of this tolerance (docs/CONFORMANCE.md). */
#define CONF_K_ROW(cols) (16.0 + sqrt((double)(cols)))

/* The normwise relative tolerance of an output of dtype out after K = k f32 roundings. */
double conf_tol(ampx_dtype out, double k);

/* Large reductions: a bound linear in K is loose for them, so a reduction this long ends on
 * a sentinel whose loss alone exceeds the bound (see cases_reduce.c). */
#define CONF_LARGE 65536u

// ---------------------------------------------------------------------------------------
// Random numbers: splitmix64, seeded per case so a single op's run sees the same data as
// the full sweep.

uint64_t conf_next(uint64_t *s);
double conf_uniform(uint64_t *s, double lo, double hi);

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

#define CONF_MAX_TENSORS 64

typedef struct conf_case_ctx {
    conf_run *run;
    ampx_conf_case rep;
    double worst; /* largest err / tol of the comparisons so far */
    int probe;    /* 1: supports() said no; 2: invalid dtypes; the call must fail */
    uint64_t rng;
    conf_tensor *tensors[CONF_MAX_TENSORS];
    uint32_t n_tensors;
    void **allocs;
    uint32_t n_allocs, cap_allocs;
} conf_case_ctx;

/* Records the case's error measure: what err measures ("exact" with tol 0, "normwise
 * relative", "elementwise (its own bound)"), the error and the tolerance it is held to. */
void conf_measure(conf_case_ctx *cc, const char *measure, double err, double tol);
/* 1 while the case has not failed. */
int conf_ok(const conf_case_ctx *cc);
/* Starts case `variant` of op with dtypes dts (nd of them): clears cc and seeds its random
 * numbers from the run's seed, the op, the dtypes and the variant; probe 1 checks that an
 * unsupported combination is refused (sweep.c). */
void conf_case_begin(conf_run *r, conf_case_ctx *cc, uint32_t op, const ampx_dtype *dts,
                     uint32_t nd, int variant, int probe);
/* Frees every buffer and host allocation of the case, reports it and counts it. */
void conf_case_end(conf_case_ctx *cc);
/* Records a failure; the first message is kept (later ones are usually consequences). */
void conf_fail(conf_case_ctx *cc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the case's shape line (what the report prints after the dtypes). */
void conf_shape(conf_case_ctx *cc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Zeroed host memory owned by the case; NULL (and a failed case) when out of memory. */
void *conf_alloc(conf_case_ctx *cc, uint64_t bytes);

/* A tensor of n elements in a fresh device buffer between guard bytes, at a random byte
 * offset. Outputs start poisoned; inputs are filled by the caller. NULL (case failed) on
 * error. kind is CT_IN (must come back unchanged), CT_OUT or CT_INOUT. */
conf_tensor *conf_tensor_new(conf_case_ctx *cc, const char *name, ampx_dtype dt, uint64_t n,
                             int kind);
/* Sets element i to x, which must be representable in the tensor's dtype (or inf/NaN). */
void conf_tensor_set(conf_tensor *ct, uint64_t i, double x);
/* Sets element i to raw bits (NaN payloads, random bit patterns). */
void conf_tensor_set_bits(conf_tensor *ct, uint64_t i, uint32_t bits);
/* Every element uniform in [lo, hi), rounded to the tensor's dtype. */
void conf_tensor_fill(conf_case_ctx *cc, conf_tensor *ct, double lo, double hi);
/* The bits of element i in img (ct->image as written, ct->back as read back). */
uint32_t conf_tensor_bits(const conf_tensor *ct, const uint8_t *img, uint64_t i);
/* Element i as read back after the op, exactly, as double. */
double conf_tensor_get(const conf_tensor *ct, uint64_t i);

/* Writes every tensor (guards and all) to its buffer. Non-zero when the case failed. */
int conf_upload(conf_case_ctx *cc);
/* Finishes a call: synchronizes, then in probe mode checks that it failed; otherwise
 * checks it succeeded and reads everything back (guards and inputs checked). Returns
 * non-zero when the case should stop here (failed, or a probe that is done). */
int conf_finish_call(conf_case_ctx *cc, const char *what, ampx_status st);

// ---------------------------------------------------------------------------------------
// Comparison

#define CMP_NORM 1  /* normwise relative error against conf_tol */
#define CMP_ELEM 2  /* elementwise bound against |ref| or mag */
#define CMP_EXACT 4 /* values equal (NaN matches NaN) */
/* an op allowed to round inner values (products' operands) to bf16 once each: the
 * elementwise bound grows by u(bf16) mag, the normwise tolerance by 2 u(bf16) */
#define CMP_INNER_BF16 8

/* Compares got with ref over n values; dt is the output dtype, k the reduction length of
 * the tolerance table, mag (optional) the size of the terms per element. */
void conf_compare(conf_case_ctx *cc, const char *what, const double *got, const double *ref,
                  const double *mag, uint64_t n, ampx_dtype dt, double k, int flags);
/* got[] of an output tensor as doubles (case-owned). */
double *conf_values(conf_case_ctx *cc, const conf_tensor *ct);

// ---------------------------------------------------------------------------------------
// Typed calls through the op slots: a case file defines the ones it uses (static).

#define CONF_DEFINE_CALL(fname, argtype)                                                           \
    static ampx_status fname(conf_run *r, uint32_t op, const argtype *a) {                         \
        void *slot = ampx_backend_op_slot(r->be, op);                                              \
        if (!slot) return AMPX_ERR_UNSUPPORTED;                                                    \
        ampx_status (*fn)(ampx_context *, const argtype *);                                        \
        memcpy(&fn, &slot, sizeof fn);                                                             \
        return fn(r->ctx, a);                                                                      \
    }

/* A tensor argument the op is told is absent (buf NULL). */
extern const ampx_tensor conf_null_tensor;

// ---------------------------------------------------------------------------------------
// Multi-tensor lists and the scalars block

/* 1 when the backend supports op for each float dtype alone: the mixed-dtype variants of
 * the multi-tensor ops run only then. */
int conf_all_floats_supported(conf_run *r, uint32_t op);
/* The 128-byte block as the 32 words of an i32 tensor. */
void conf_scalars_to_tensor(conf_tensor *S, const ampx_scalars *s);
/* The block as read back after the op. */
void conf_scalars_from_back(const conf_tensor *S, ampx_scalars *s);
/* Compares two blocks word by word; float fields are printed as floats. skip_lr leaves the
 * lr word to the caller. Returns 0 when equal (else the case has failed). */
int conf_scalars_diff(conf_case_ctx *cc, const char *when, const ampx_scalars *got,
                      const ampx_scalars *exp, int skip_lr);

// ---------------------------------------------------------------------------------------
// The cases, one function per op, and what the sweep needs to run them: each case file
// defines conf_op_<slot> for its ops, with variant counts that match its table of variants.
// sweep.c's list of ops is AMPX_OPS, so an op without its conf_op_<slot> does not link.

typedef void (*conf_case_fn)(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);

/* 0 when variant v is left out for these dtypes (a large variant run on a subset of the
 * combinations to bound the sweep's time); such a variant is neither run nor counted. */
typedef int (*conf_runs_fn)(const ampx_dtype *dts, int variant);

typedef struct conf_op_cases {
    conf_case_fn fn;
    int n_full, n_quick; /* variants run per supported combination */
    conf_runs_fn runs;   /* (optional) NULL: every variant runs on every combination */
} conf_op_cases;

#define CONF_OP_CASES(index, slot, OP, args, n_dtypes, f32)                                        \
    extern const conf_op_cases conf_op_##slot;
AMPX_OPS(CONF_OP_CASES)
#undef CONF_OP_CASES

/* cases_gemm.c */
void conf_case_gemm(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
int conf_gemm_runs(const ampx_dtype *dts, int variant);
/* GEMM's epilogue cases (cases_gemm_epilogue.c): variants 0 .. CONF_GEMM_EPILOGUE_VARIANTS-1,
 * run as GEMM's variants after the 13 plain ones. */
#define CONF_GEMM_EPILOGUE_VARIANTS 9
void conf_case_gemm_epilogue(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_cast.c */
void conf_case_cast(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_elementwise.c */
void conf_case_add(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_mul(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_scale(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_bias_grad(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_activation.c */
void conf_case_act_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_act_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_softmax.c */
void conf_case_softmax_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_softmax_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_xent(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_norm.c */
void conf_case_layernorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_layernorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_batchnorm_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_batchnorm_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_embedding.c */
void conf_case_embedding_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_embedding_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_reduce.c */
void conf_case_reduce(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_sum_squares(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_abs_max(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_amp.c; SCALER_UPDATE runs each of its scenarios once */
#define CONF_SCALER_SCENARIOS 14
void conf_case_unscale_check(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_grad_stats(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_amp_pass(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_scaler_update(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_optimizer.c */
void conf_case_sgd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
void conf_case_adamw(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_dropout.c */
void conf_case_dropout(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);
/* cases_layout.c */
void conf_case_permute(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant);

#endif /* AMPX_CONFORMANCE_HARNESS_H */
