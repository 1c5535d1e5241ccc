/* cases_optimizer.c — conformance cases of SGD and ADAMW. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_sgd, ampx_sgd_args)
CONF_DEFINE_CALL(call_adamw, ampx_adamw_args)

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

/* The tensors of a case: per tensor the parameter, gradient, state (m / momentum buffer,
 * v) and low-precision copy, NULL (conf_null_tensor in the lists) where the case has none. */
typedef struct opt_io {
    conf_tensor *P[3], *G[3], *M[3], *V[3], *CP[3], *GSQ, *S;
    ampx_tensor tp[3], tg[3], tm[3], tv[3], tc[3];
    uint64_t ne[3];
    float wd[3];
} opt_io;

static void opt_shape(conf_case_ctx *cc, const opt_cfg *c, int adam) {
    conf_shape(cc, "tensors=%u %s=%g %s=%g%s wd=%g%s%s%s%s applied_steps=%d%s", c->count,
               adam ? "beta1" : "momentum", (double)c->momentum, adam ? "beta2" : "dampening",
               (double)c->dampening, c->nesterov ? " nesterov" : "", (double)c->wd,
               c->per_tensor_wd ? " per-tensor" : "",
               c->clip == 1   ? " clip"
               : c->clip == 2 ? " clip-inactive"
                              : "",
               c->found_inf ? " found_inf" : "", c->stochastic ? " stochastic-copy" : "",
               c->applied, c->schedule ? " cosine" : "");
}

/* Makes the tensors (in the order their random offsets are drawn); 0 when all were made. */
static int opt_tensors(conf_case_ctx *cc, const opt_cfg *c, ampx_dtype gdt, int adam, int has_state,
                       opt_io *io) {
    for (uint32_t t = 0; t < c->count; t++) {
        uint64_t n = c->sizes[t];
        io->ne[t]  = n;
        io->P[t]   = conf_tensor_new(cc, "param", AMPX_F32, n, CT_INOUT);
        io->G[t]   = conf_tensor_new(cc, "grad", gdt, n, CT_IN);
        io->M[t]   = has_state
                         ? conf_tensor_new(cc, adam ? "m" : "momentum_buf", AMPX_F32, n, CT_INOUT)
                         : NULL;
        io->V[t]   = adam ? conf_tensor_new(cc, "v", AMPX_F32, n, CT_INOUT) : NULL;
        io->CP[t] = c->copy[t] != NOC ? conf_tensor_new(cc, "copy", c->copy[t], n, CT_INOUT) : NULL;
        if (!conf_ok(cc)) return -1;
        io->tp[t] = io->P[t]->t;
        io->tg[t] = io->G[t]->t;
        io->tm[t] = io->M[t] ? io->M[t]->t : conf_null_tensor;
        io->tv[t] = io->V[t] ? io->V[t]->t : conf_null_tensor;
        io->tc[t] = io->CP[t] ? io->CP[t]->t : conf_null_tensor;
        io->wd[t] = c->wd * (float)(t + 1);
    }
    io->GSQ = c->clip ? conf_tensor_new(cc, "grad_sq_sum", AMPX_F32, 1, CT_IN) : NULL;
    io->S   = conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    return conf_ok(cc) ? 0 : -1;
}

/* Fills the inputs; returns the square sum of the gradients. */
static double opt_fill(conf_case_ctx *cc, const opt_cfg *c, opt_io *io) {
    double gss = 0.0;
    for (uint32_t t = 0; t < c->count; t++) {
        conf_tensor_fill(cc, io->P[t], -1, 1);
        conf_tensor_fill(cc, io->G[t], -1, 1);
        if (io->M[t]) conf_tensor_fill(cc, io->M[t], -0.1, 0.1);
        if (io->V[t]) conf_tensor_fill(cc, io->V[t], 0.0, 0.05);
        if (io->CP[t] && c->found_inf)
            conf_tensor_fill(cc, io->CP[t], -1, 1); /* must survive a skipped step */
        gss += ref_sum_squares(io->G[t]->n, io->G[t]->v);
    }
    return gss;
}

/* The scalars block of a case: its found_inf, applied steps and lr schedule. */
static ampx_scalars opt_scalars0(const opt_cfg *c, int adam) {
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
    return s0;
}

static ampx_status opt_call(conf_run *r, const opt_cfg *c, int adam, int has_state,
                            const opt_io *io, float mgn, uint64_t seed) {
    ampx_tensor gsq = io->GSQ ? io->GSQ->t : conf_null_tensor;
    if (adam) {
        ampx_adamw_args a = {sizeof a,
                             c->momentum,
                             c->dampening,
                             1e-8f,
                             c->wd,
                             mgn,
                             c->per_tensor_wd ? io->wd : NULL,
                             {c->count, io->tp, io->ne},
                             io->tg,
                             io->tm,
                             io->tv,
                             io->tc,
                             gsq,
                             io->S->t,
                             (uint32_t)c->stochastic,
                             seed};
        return call_adamw(r, AMPX_OP_ADAMW, &a);
    }
    ampx_sgd_args a = {sizeof a,
                       (uint32_t)c->nesterov,
                       c->momentum,
                       c->dampening,
                       c->wd,
                       mgn,
                       c->per_tensor_wd ? io->wd : NULL,
                       {c->count, io->tp, io->ne},
                       io->tg,
                       has_state ? io->tm : NULL,
                       io->tc,
                       gsq,
                       io->S->t,
                       (uint32_t)c->stochastic,
                       seed};
    return call_sgd(r, AMPX_OP_SGD, &a);
}

/* The copy is the rounding of the plugin's own new parameter gp: to nearest even, or
 * stochastically with rnd = ampx_hash32(seed + t, i), compared bit for bit. Returns 0, or -1
 * with the case failed. */
static int opt_check_copy(conf_case_ctx *cc, const conf_tensor *CP, const double *gp, uint32_t t,
                          int stochastic, uint64_t seed) {
    for (uint64_t i = 0; i < CP->n; i++) {
        uint32_t rnd = ref_hash32(seed + t, i);
        double want  = stochastic ? ref_round_sr(CP->dt, gp[i], rnd) : ref_round(CP->dt, gp[i]);
        double got_c = conf_tensor_get(CP, i), lo, hi;
        uint32_t gb = conf_tensor_bits(CP, CP->back, i), wb = ref_encode(CP->dt, want);
        ref_neighbours(CP->dt, gp[i], &lo, &hi);
        if (stochastic && !(got_c == lo || got_c == hi || got_c == ref_round(CP->dt, gp[i]))) {
            conf_fail(cc, "copy[%u][%" PRIu64 "] (%s) = %.9g: not a neighbour of param %.9g", t, i,
                      ampx_dtype_name(CP->dt), got_c, gp[i]);
            return -1;
        }
        if (isnan(want) ? !isnan(got_c) : gb != wb) {
            if (stochastic)
                conf_fail(cc,
                          "copy[%u][%" PRIu64 "] (%s) = %.9g, expected %.9g: the stochastic "
                          "rounding of param %a with rnd = ampx_hash32(seed + %u, %" PRIu64
                          ") = 0x%08x",
                          t, i, ampx_dtype_name(CP->dt), got_c, want, gp[i], t, i, rnd);
            else
                conf_fail(cc, "copy[%u][%" PRIu64 "] (%s) = %.9g, expected %.9g of param %.9g", t,
                          i, ampx_dtype_name(CP->dt), got_c, want, gp[i]);
            return -1;
        }
    }
    return 0;
}

/* Tensor t of an applied step against the reference step (lr and clip factor given).
 * Returns -1 when the case must stop here. */
static int opt_check_tensor(conf_case_ctx *cc, const opt_cfg *c, int adam, const opt_io *io,
                            uint32_t t, float lr, double clip, uint64_t seed) {
    uint64_t n           = io->ne[t];
    const conf_tensor *M = io->M[t], *V = io->V[t];
    double *rp = conf_alloc(cc, n * sizeof(double)), *rm = conf_alloc(cc, n * sizeof(double));
    double *rv = conf_alloc(cc, n * sizeof(double)), *mp = conf_alloc(cc, n * sizeof(double));
    double *mm = conf_alloc(cc, n * sizeof(double)), *gp = conf_values(cc, io->P[t]);
    if (!conf_ok(cc)) return -1;
    memcpy(rp, io->P[t]->v, n * sizeof(double));
    if (M) memcpy(rm, M->v, n * sizeof(double));
    if (V) memcpy(rv, V->v, n * sizeof(double));
    double wdt = c->per_tensor_wd ? io->wd[t] : c->wd;
    if (adam) {
        ref_adamw_hparams h = {lr, clip, wdt, c->momentum, c->dampening, 1e-8f, c->applied + 1};
        ref_adamw(n, &h, rp, io->G[t]->v, rm, rv, mp, mm);
    } else {
        ref_sgd_hparams h = {lr,          clip,           wdt, c->momentum, c->dampening,
                             c->nesterov, c->applied == 0};
        ref_sgd(n, &h, rp, io->G[t]->v, M ? rm : NULL, mp, mm);
    }
    conf_compare(cc, "param", gp, rp, mp, n, AMPX_F32, 4, CMP_ELEM);
    if (M) {
        double *gm = conf_values(cc, M);
        if (!gm) return -1;
        conf_compare(cc, adam ? "m" : "momentum_buf", gm, rm, mm, n, AMPX_F32, 4, CMP_ELEM);
    }
    if (V) {
        double *gv = conf_values(cc, V);
        if (!gv) return -1;
        conf_compare(cc, "v", gv, rv, NULL, n, AMPX_F32, 4, CMP_ELEM);
    }
    if (io->CP[t] && opt_check_copy(cc, io->CP[t], gp, t, c->stochastic, seed)) return -1;
    return 0;
}

/* A skipped step (found_inf) leaves every tensor and the block bitwise unchanged. */
static void opt_check_skipped(conf_case_ctx *cc) {
    for (uint32_t i = 0; i < cc->n_tensors; i++) {
        conf_tensor *ct = cc->tensors[i];
        if (memcmp(ct->image + ct->lead, ct->back + ct->lead, ct->bytes) != 0) {
            conf_fail(cc, "%s changed although found_inf is set", ct->name);
            return;
        }
    }
}

static void case_optimizer(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                           int adam) {
    const opt_cfg *c = adam ? &adamw_cfgs[variant] : &sgd_cfgs[variant];
    int has_state    = adam || c->momentum != 0.0f;
    opt_shape(cc, c, adam);
    opt_io io = {0};
    if (opt_tensors(cc, c, dts[0], adam, has_state, &io)) return;
    double gss = opt_fill(cc, c, &io);
    float mgn  = 0.0f;
    if (io.GSQ) {
        conf_tensor_set(io.GSQ, 0, ref_round(AMPX_F32, gss));
        mgn = (float)ref_round(AMPX_F32, (c->clip == 1 ? 0.5 : 10.0) * sqrt(gss));
    }
    ampx_scalars s0 = opt_scalars0(c, adam);
    conf_scalars_to_tensor(io.S, &s0);
    uint64_t seed = conf_next(&cc->rng);
    if (conf_upload(cc)) return;
    ampx_status st = opt_call(r, c, adam, has_state, &io, mgn, seed);
    if (conf_finish_call(cc, adam ? "adamw" : "sgd", st)) return;
    ampx_scalars got;
    conf_scalars_from_back(io.S, &got);
    if (c->found_inf) {
        opt_check_skipped(cc);
        return;
    }
    float lr = ref_scheduled_lr(&s0, s0.applied_steps);
    if (conf_scalars_diff(cc, "", &got, &s0, 1)) return;
    if (!(fabs((double)got.lr - (double)lr) <= 0x1p-21 * fabs((double)lr))) {
        conf_fail(cc, "scalars.lr = %.9g, expected %.9g (schedule at step %d)", (double)got.lr,
                  (double)lr, s0.applied_steps);
        return;
    }
    double clip = 1.0;
    if (io.GSQ) clip = fmin(1.0, (double)mgn / (sqrt(io.GSQ->v[0]) + 1e-6));
    for (uint32_t t = 0; t < c->count; t++)
        if (opt_check_tensor(cc, c, adam, &io, t, lr, clip, seed)) return;
}

void conf_case_sgd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_optimizer(r, cc, dts, variant, 0);
}

void conf_case_adamw(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_optimizer(r, cc, dts, variant, 1);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_sgd   = {conf_case_sgd, 7, 5, NULL};
const conf_op_cases conf_op_adamw = {conf_case_adamw, 7, 5, NULL};
