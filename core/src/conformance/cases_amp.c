/* cases_amp.c — conformance cases of UNSCALE_CHECK, GRAD_STATS, AMP_PASS and SCALER_UPDATE. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_unscale, ampx_unscale_check_args)
CONF_DEFINE_CALL(call_grad_stats, ampx_grad_stats_args)
CONF_DEFINE_CALL(call_scaler_update, ampx_scaler_update_args)
CONF_DEFINE_CALL(call_amp_pass, ampx_amp_pass_args)

// ---------------------------------------------------------------------------------------
// AMP: unscale-and-check and gradient statistics are exact; the scaler update is replayed
// against reference.c's model step by step, over the whole 128-byte block.

/* Tensor t of an unscale (unscale_check, amp_pass): every value as stored against the
 * reference unscale of its input, and flags[fb + t] against whether any is non-finite.
 * Adds the reference squares to *sq (when not NULL) and ORs the flag into *any; -1 after a
 * failure. */
static int check_unscaled(conf_case_ctx *cc, const conf_tensor *g, uint32_t t, const conf_tensor *F,
                          uint32_t fb, const ampx_scalars *s0, int *any, double *sq) {
    int flag = 0;
    for (uint64_t i = 0; i < g->n; i++) {
        double e = ref_unscale(g->dt, g->v[i], s0->scale, s0->mode);
        flag |= !isfinite(e);
        if (sq) *sq += e * e;
        uint32_t gb = conf_tensor_bits(g, g->back, i);
        int ok      = isnan(e) ? isnan(conf_tensor_get(g, i))
                               : gb == (ref_encode(g->dt, e) & (g->esz == 2 ? 0xffffu : ~0u));
        if (!ok) {
            conf_fail(cc, "g[%u][%" PRIu64 "] = %.9g (0x%x), expected %.9g (from %.9g)", t, i,
                      conf_tensor_get(g, i), gb, e, g->v[i]);
            return -1;
        }
    }
    *any |= flag;
    int32_t gf = (int32_t)conf_tensor_bits(F, F->back, fb + t);
    if (gf != flag) {
        conf_fail(cc, "flags[%u] = %d, expected %d", fb + t, gf, flag);
        return -1;
    }
    return 0;
}

/* The flags outside [fb, fb + count), set to 7 before the call, are as they were; -1 if not. */
static int check_flags_kept(conf_case_ctx *cc, const conf_tensor *F, uint32_t fb, uint32_t count) {
    for (uint64_t i = 0; i < F->n; i++)
        if ((i < fb || i >= fb + count) && conf_tensor_bits(F, F->back, i) != 7u) {
            conf_fail(cc, "flags[%" PRIu64 "] outside [flag_base, flag_base + count) was modified",
                      i);
            return -1;
        }
    return 0;
}

/* Element at of g made non-finite (kind 0 inf, 1 NaN with a payload) or (kind 2) 0.75 times
 * the largest finite value, for an overflow by the unscale's multiply. */
static void set_bad(conf_tensor *g, uint64_t at, int kind) {
    if (kind == 0)
        conf_tensor_set(g, at, -INFINITY);
    else if (kind == 1)
        conf_tensor_set_bits(g, at,
                             g->esz == 2 ? (g->dt == AMPX_BF16 ? 0x7fd1u : 0x7e11u) : 0x7fc01234u);
    else
        conf_tensor_set(g, at, ref_round(g->dt, 0.75 * ref_max_finite(g->dt)));
}

/* The scalars block the unscale cases start from. */
static ampx_scalars amp_scalars0(float scale, int32_t mode, int32_t found_inf) {
    ampx_scalars s0    = {0};
    s0.scale           = scale;
    s0.found_inf       = found_inf;
    s0.mode            = mode;
    s0.growth_tracker  = 5;
    s0.hysteresis_left = s0.hysteresis = 2;
    s0.growth_factor                   = 2.0f;
    s0.backoff_factor                  = 0.5f;
    s0.growth_interval                 = 2000;
    s0.max_scale                       = INFINITY;
    s0.lr                              = 0.01f;
    return s0;
}

void conf_case_unscale_check(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
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
    conf_shape(cc, "tensors=%u scale=%g found_inf=%d mode=%d flag_base=%u%s%s%s", count,
               (double)cfgs[variant].scale, cfgs[variant].found_inf0, cfgs[variant].mode, fb,
               bad >= 0 ? " with " : "", bad >= 0 ? kinds[badkind] : "",
               mixed ? " mixed dtypes" : "");
    conf_tensor *G[3] = {0};
    ampx_tensor tl[3];
    uint64_t ne[3];
    for (uint32_t t = 0; t < count; t++) {
        G[t] = conf_tensor_new(cc, "g[t]", mixed ? (ampx_dtype)(t % 3) : dts[0],
                               cfgs[variant].sizes[t], CT_INOUT);
        if (!G[t]) goto done;
        tl[t] = G[t]->t;
        ne[t] = G[t]->n;
    }
    conf_tensor *F = conf_tensor_new(cc, "flags", AMPX_I32, fb + count + 2, CT_INOUT);
    conf_tensor *S = conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    if (!conf_ok(cc)) goto done;
    for (uint32_t t = 0; t < count; t++) {
        conf_tensor_fill(cc, G[t], -1000, 1000);
        if ((int)t == bad) set_bad(G[t], G[t]->n / 2, badkind);
    }
    for (uint64_t i = 0; i < F->n; i++)
        conf_tensor_set(F, i, 7);
    ampx_scalars s0 =
        amp_scalars0(cfgs[variant].scale, cfgs[variant].mode, cfgs[variant].found_inf0);
    conf_scalars_to_tensor(S, &s0);
    ampx_unscale_check_args a = {sizeof a, fb, {count, tl, ne}, F->t, S->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "unscale_check", call_unscale(r, AMPX_OP_UNSCALE_CHECK, &a)))
        goto done;
    int any = 0;
    for (uint32_t t = 0; t < count; t++)
        if (check_unscaled(cc, G[t], t, F, fb, &s0, &any, NULL)) goto done;
    if (check_flags_kept(cc, F, fb, count)) goto done;
    ampx_scalars exp = s0, got;
    exp.found_inf |= any;
    conf_scalars_from_back(S, &got);
    conf_scalars_diff(cc, "", &got, &exp, 0);
done:
    return;
}

void conf_case_grad_stats(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
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
    conf_shape(cc, "tensors=%u target=%s %s%s", count, ampx_dtype_name(target),
               pattern == 0   ? "zeros"
               : pattern == 1 ? "zeros+tiny+non-finite"
                              : "all non-finite",
               mixed ? " mixed dtypes" : "");
    conf_tensor *G[3] = {0};
    ampx_tensor tl[3];
    uint64_t ne[3];
    for (uint32_t t = 0; t < count; t++) {
        G[t] = conf_tensor_new(cc, "g[t]", mixed ? (ampx_dtype)(t % 3) : dts[0],
                               cfgs[variant].sizes[t], CT_IN);
        if (!G[t]) goto done;
        tl[t] = G[t]->t;
        ne[t] = G[t]->n;
    }
    conf_tensor *ST = conf_tensor_new(cc, "stats", AMPX_F32, 4 * count, CT_OUT);
    conf_tensor *CN = conf_tensor_new(cc, "counts", AMPX_I32, 3 * count, CT_OUT);
    /* ABI 1.2: the NaN counts; -1 going in means "not counted" when it comes back */
    conf_tensor *NC = conf_tensor_new(cc, "nan_counts", AMPX_I32, count, CT_INOUT);
    if (!conf_ok(cc)) goto done;
    for (uint32_t t = 0; t < count; t++)
        conf_tensor_set_bits(NC, t, 0xFFFFFFFFu);
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
            conf_tensor_set(G[t], i, ref_round(dt, x));
        }
    /* a long tensor ends on its largest |g|: max|g| is exact, so a lost tail shows */
    for (uint32_t t = 0; t < count; t++)
        if (G[t]->n >= CONF_LARGE && pattern == 1) conf_tensor_set(G[t], G[t]->n - 1, -3.5);
    ampx_grad_stats_args a = {sizeof a, target, {count, tl, ne}, ST->t, CN->t, NC->t};
    if (conf_upload(cc) ||
        conf_finish_call(cc, "grad_stats", call_grad_stats(r, AMPX_OP_GRAD_STATS, &a)))
        goto done;
    for (uint32_t t = 0; t < count; t++) {
        double st[4], mm;
        int32_t cn[3];
        ref_grad_stats(G[t]->n, G[t]->v, target, st, cn, &mm);
        double got[4];
        for (int j = 0; j < 4; j++)
            got[j] = conf_tensor_get(ST, 4 * t + (uint64_t)j);
        char what[32];
        snprintf(what, sizeof what, "stats[%u].max|g|", t);
        conf_compare(cc, what, &got[0], &st[0], NULL, 1, AMPX_F32, 0, CMP_EXACT);
        snprintf(what, sizeof what, "stats[%u].mean", t);
        conf_compare(cc, what, &got[1], &st[1], &mm, 1, AMPX_F32, (double)G[t]->n + 4, CMP_ELEM);
        snprintf(what, sizeof what, "stats[%u].rms", t);
        conf_compare(cc, what, &got[2], &st[2], NULL, 1, AMPX_F32, (double)G[t]->n + 4, CMP_ELEM);
        snprintf(what, sizeof what, "stats[%u].count", t);
        conf_compare(cc, what, &got[3], &st[3], NULL, 1, AMPX_F32, 0, CMP_EXACT);
        static const char *cnames[3] = {"zeros", "below smallest normal", "non-finite"};
        for (int j = 0; j < 3; j++) {
            int32_t gc = (int32_t)conf_tensor_bits(CN, CN->back, 3 * t + (uint64_t)j);
            if (gc != cn[j]) {
                conf_fail(cc, "counts[%u] (%s) = %d, expected %d", 3 * t + (unsigned)j, cnames[j],
                          gc, cn[j]);
                goto done;
            }
        }
        int32_t nan = (int32_t)conf_tensor_bits(NC, NC->back, t), want = 0;
        for (uint64_t i = 0; i < G[t]->n; i++)
            want += isnan(G[t]->v[i]) != 0;
        if (nan != -1 && nan != want) {
            conf_fail(cc, "nan_counts[%u] = %d, expected %d (of %d non-finite)", t, nan, want,
                      cn[2]);
            goto done;
        }
    }
done:
    return;
}

/* The statistics of tensor t (of the values as read) against the reference; 0 if they agree. */
static int check_stats(conf_case_ctx *cc, const conf_tensor *G, uint32_t t, ampx_dtype target,
                       const conf_tensor *ST, const conf_tensor *CN, const conf_tensor *NC) {
    double st[4], mm;
    int32_t cn[3];
    ref_grad_stats(G->n, G->v, target, st, cn, &mm);
    if (ST) {
        static const char *names[4] = {"max|g|", "mean", "rms", "count"};
        for (int j = 0; j < 4; j++) {
            double got = conf_tensor_get(ST, 4 * (uint64_t)t + (uint64_t)j);
            char what[40];
            snprintf(what, sizeof what, "stats[%u].%s", t, names[j]);
            if (j == 0 || j == 3)
                conf_compare(cc, what, &got, &st[j], NULL, 1, AMPX_F32, 0, CMP_EXACT);
            else
                conf_compare(cc, what, &got, &st[j], j == 1 ? &mm : NULL, 1, AMPX_F32,
                             (double)G->n + 4, CMP_ELEM);
        }
        if (!conf_ok(cc)) return 1;
    }
    if (CN) {
        static const char *cnames[3] = {"zeros", "below smallest normal", "non-finite"};
        for (int j = 0; j < 3; j++) {
            int32_t gc = (int32_t)conf_tensor_bits(CN, CN->back, 3 * (uint64_t)t + (uint64_t)j);
            if (gc != cn[j]) {
                conf_fail(cc, "counts[%u] (%s) = %d, expected %d", 3 * t + (unsigned)j, cnames[j],
                          gc, cn[j]);
                return 1;
            }
        }
    }
    if (NC) {
        int32_t nan = (int32_t)conf_tensor_bits(NC, NC->back, t), want = 0;
        for (uint64_t i = 0; i < G->n; i++)
            want += isnan(G->v[i]) != 0;
        if (nan != want) {
            conf_fail(cc, "nan_counts[%u] = %d, expected %d", t, nan, want);
            return 1;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// AMP_PASS (ABI 1.4): the unscale, flags and found_inf as UNSCALE_CHECK (exact), the square
// sum of the unscaled values as SUM_SQUARES, the statistics of the values as read as
// GRAD_STATS, with per-tensor targets; each optional output left out in some variant.

typedef struct amp_pass_cfg {
    uint32_t count;
    uint64_t sizes[3];
    float scale;
    int32_t mode;
    uint32_t flag_base;
    int bad, badkind; /* as conf_case_unscale_check */
    int sq;           /* 0 no sq_sum, 1 sq_sum =, 2 sq_sum += */
    int want;         /* 1 stats, 2 counts, 4 nan_counts */
    int targets, mixed;
} amp_pass_cfg;

static const amp_pass_cfg amp_pass_cfgs[] = {
    {1, {7}, 1024.0f, AMPX_SCALER_DYNAMIC, 0, -1, 0, 1, 7, 0, 0},
    {3, {13, 1031, 1}, 65536.0f, AMPX_SCALER_DYNAMIC, 2, 1, 1, 2, 7, 1, 0},
    {3, {5, 0, 9}, 3.0f, AMPX_SCALER_DYNAMIC, 0, 0, 0, 1, 1, 0, 1},
    {2, {31, 7}, 1024.0f, AMPX_SCALER_NONE, 1, 0, 0, 0, 6, 1, 0},
    {2, {17, 3}, 0x1p-10f, AMPX_SCALER_DYNAMIC, 0, 1, 2, 1, 0, 0, 0},
    {3, {0, 0, 0}, 1.0f, AMPX_SCALER_STATIC, 0, -1, 0, 1, 7, 0, 0},
    {3, {7, 8, 9}, 1.0f, AMPX_SCALER_STATIC, 0, 2, 1, 2, 7, 1, 1},
    /* large tier */
    {2, {100003, 70001}, 65536.0f, AMPX_SCALER_DYNAMIC, 0, 1, 1, 1, 7, 1, 0},
    {3, {70001, 5, 100003}, 3.0f, AMPX_SCALER_STATIC, 0, -1, 0, 2, 7, 0, 1},
};

static const ampx_dtype amp_pass_targets[3] = {AMPX_BF16, AMPX_F16, AMPX_F32};

/* The tensors of a case; the optional outputs NULL where the variant leaves them out. */
typedef struct amp_pass_io {
    conf_tensor *G[3], *F, *S, *Q, *ST, *CN, *NC;
    ampx_tensor tl[3];
    uint64_t ne[3], total;
} amp_pass_io;

static void amp_pass_shape(conf_case_ctx *cc, const amp_pass_cfg *c, int mixed) {
    static const char *kinds[] = {"inf", "NaN", "overflow"};
    char sizes[64]             = "";
    for (uint32_t t = 0; t < c->count; t++) {
        size_t l = strlen(sizes);
        snprintf(sizes + l, sizeof sizes - l, "%s%" PRIu64, t ? "," : "", c->sizes[t]);
    }
    conf_shape(cc, "tensors=[%s] scale=%g mode=%d flag_base=%u%s%s sq=%s stats=%s%s%s%s%s", sizes,
               (double)c->scale, c->mode, c->flag_base, c->bad >= 0 ? " with " : "",
               c->bad >= 0 ? kinds[c->badkind] : "",
               c->sq == 0   ? "none"
               : c->sq == 1 ? "set"
                            : "accumulate",
               c->want & 1 ? "+stats" : "", c->want & 2 ? "+counts" : "",
               c->want & 4 ? "+nans" : "", c->targets ? " per-tensor targets" : "",
               mixed ? " mixed dtypes" : "");
}

/* Makes the tensors (in the order their random offsets are drawn); 0 when all were made. */
static int amp_pass_tensors(conf_case_ctx *cc, const amp_pass_cfg *c, ampx_dtype dt, int mixed,
                            amp_pass_io *io) {
    uint32_t count = c->count;
    for (uint32_t t = 0; t < count; t++) {
        io->G[t] =
            conf_tensor_new(cc, "g[t]", mixed ? (ampx_dtype)(t % 3) : dt, c->sizes[t], CT_INOUT);
        if (!io->G[t]) return -1;
        io->tl[t] = io->G[t]->t;
        io->ne[t] = io->G[t]->n;
        io->total += io->G[t]->n;
    }
    io->F = conf_tensor_new(cc, "flags", AMPX_I32, c->flag_base + count + 2, CT_INOUT);
    io->S = conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    io->Q =
        c->sq ? conf_tensor_new(cc, "sq_sum", AMPX_F32, 1, c->sq == 2 ? CT_INOUT : CT_OUT) : NULL;
    io->ST = c->want & 1 ? conf_tensor_new(cc, "stats", AMPX_F32, 4 * count, CT_OUT) : NULL;
    io->CN = c->want & 2 ? conf_tensor_new(cc, "counts", AMPX_I32, 3 * count, CT_OUT) : NULL;
    io->NC = c->want & 4 ? conf_tensor_new(cc, "nan_counts", AMPX_I32, count, CT_OUT) : NULL;
    return conf_ok(cc) ? 0 : -1;
}

/* Gradients in [-1000, 1000) with zeros and values below the normals, the variant's bad
 * value; flags 7 (to see which are written); sq_sum 3.5 when it accumulates. */
static void amp_pass_fill(conf_case_ctx *cc, const amp_pass_cfg *c, amp_pass_io *io) {
    for (uint32_t t = 0; t < c->count; t++) {
        conf_tensor *g = io->G[t];
        conf_tensor_fill(cc, g, -1000, 1000);
        for (uint64_t i = 0; i < g->n; i++) { /* zeros and values below the normals */
            uint64_t k = conf_next(&cc->rng) % 16;
            if (k == 0)
                conf_tensor_set(g, i, 0.0);
            else if (k == 1)
                conf_tensor_set(g, i, ref_round(g->dt, ldexp(conf_uniform(&cc->rng, 1, 2), -20)));
            else if (k == 2)
                conf_tensor_set(g, i, ref_round(g->dt, ldexp(conf_uniform(&cc->rng, -2, 2), -130)));
        }
        /* a long tensor ends on its largest |g|: max|g| is exact, so a lost tail shows */
        if (g->n >= CONF_LARGE) conf_tensor_set(g, g->n - 1, -3072.0);
        if ((int)t == c->bad && g->n > 0) set_bad(g, g->n / 2, c->badkind);
    }
    for (uint64_t i = 0; i < io->F->n; i++)
        conf_tensor_set(io->F, i, 7);
    if (c->sq == 2) conf_tensor_set(io->Q, 0, 3.5);
}

/* Every output after the call against the reference. */
static void amp_pass_check(conf_case_ctx *cc, const ampx_amp_pass_args *a, const amp_pass_io *io,
                           const ampx_scalars *s0) {
    uint32_t count = a->grads.count, fb = a->flag_base;
    const conf_tensor *Q = io->Q;
    int any              = 0;
    double sq            = a->sq_accumulate && Q ? Q->v[0] : 0.0;
    for (uint32_t t = 0; t < count; t++)
        if (check_unscaled(cc, io->G[t], t, io->F, fb, s0, &any, &sq) ||
            check_stats(cc, io->G[t], t, a->targets ? a->targets[t] : a->target, io->ST, io->CN,
                        io->NC))
            return;
    if (check_flags_kept(cc, io->F, fb, count)) return;
    if (Q) {
        double got = conf_tensor_get(Q, 0);
        if (!isfinite(sq)) {
            if (isfinite(got))
                conf_fail(cc, "sq_sum = %.9g with a non-finite gradient, expected non-finite", got);
        } else {
            conf_compare(cc, "sq_sum", &got, &sq, NULL, 1, AMPX_F32, (double)io->total + 2,
                         CMP_NORM | CMP_ELEM);
        }
        if (!conf_ok(cc)) return;
    }
    ampx_scalars exp = *s0, got;
    exp.found_inf |= any;
    conf_scalars_from_back(io->S, &got);
    conf_scalars_diff(cc, "", &got, &exp, 0);
}

void conf_case_amp_pass(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const amp_pass_cfg *c = &amp_pass_cfgs[variant];
    int mixed = c->mixed && dts[0] != AMPX_I32 && conf_all_floats_supported(r, AMPX_OP_AMP_PASS);
    amp_pass_shape(cc, c, mixed);
    amp_pass_io io = {0};
    if (amp_pass_tensors(cc, c, dts[0], mixed, &io)) return;
    amp_pass_fill(cc, c, &io);
    ampx_scalars s0 = amp_scalars0(c->scale, c->mode, 0);
    conf_scalars_to_tensor(io.S, &s0);
    ampx_amp_pass_args a = {.size          = sizeof a,
                            .flag_base     = c->flag_base,
                            .grads         = {c->count, io.tl, io.ne},
                            .flags         = io.F->t,
                            .scalars       = io.S->t,
                            .sq_accumulate = c->sq == 2,
                            .target        = AMPX_F16,
                            .targets       = c->targets ? amp_pass_targets : NULL};
    if (io.Q) a.sq_sum = io.Q->t;
    if (io.ST) a.stats = io.ST->t;
    if (io.CN) a.counts = io.CN->t;
    if (io.NC) a.nan_counts = io.NC->t;
    if (conf_upload(cc) || conf_finish_call(cc, "amp_pass", call_amp_pass(r, AMPX_OP_AMP_PASS, &a)))
        return;
    amp_pass_check(cc, &a, &io, &s0);
}

/* Scenarios of the scaler: a configuration and a sequence of found_inf values. growth_f64
 * and backoff_f64 travel in the args (0: the block's floats apply, as from a host that
 * predates them); the factors in the block are then the f32 roundings of the doubles. */
typedef struct scaler_scenario {
    const char *name;
    int32_t mode;
    float init;
    double growth, backoff;
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
    /* the doubles in the args: 1.1 and 0.7 are not exact in f32, so these sequences differ
     * from the f32 products of the block's factors within a few steps */
    {"f64 factors 1.1/0.7", AMPX_SCALER_DYNAMIC, 65536.0f, 1.1, 0.7, 1, 1, 0, 0.0f, INFINITY, 0, 0,
     "000000000001000000000000000100000"},
    {"f64 factors 3/0.25", AMPX_SCALER_DYNAMIC, 1024.0f, 3.0, 0.25, 2, 1, 0, 0.0f, INFINITY, 0, 0,
     "0000010000001"},
    {"f64 factor clamp", AMPX_SCALER_DYNAMIC, 100.0f, 1.3, 0.3, 3, 1, 0, 7.0f, INFINITY, 0, 0,
     "1111001000"},
};

/* The scenarios whose factors travel as doubles in the args. */
static int scaler_f64(const scaler_scenario *sc) {
    return strncmp(sc->name, "f64 ", 4) == 0;
}

_Static_assert(sizeof scaler_scenarios / sizeof scaler_scenarios[0] == CONF_SCALER_SCENARIOS,
               "conf_ops runs each scaler scenario once");

void conf_case_scaler_update(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const scaler_scenario *sc = &scaler_scenarios[variant];
    conf_shape(cc, "%s: steps %s", sc->name, sc->seq);
    conf_tensor *S = conf_tensor_new(cc, "scalars", AMPX_I32, 32, CT_INOUT);
    if (!conf_ok(cc)) goto done;
    ampx_scalars m    = {0};
    m.scale           = sc->init;
    m.mode            = sc->mode;
    m.growth_factor   = (float)sc->growth;
    m.backoff_factor  = (float)sc->backoff;
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
    if (conf_upload(cc)) goto done;
    int f64                   = scaler_f64(sc);
    ampx_scaler_update_args a = {.size               = sizeof a,
                                 .scalars            = S->t,
                                 .growth_factor_f64  = f64 ? sc->growth : 0.0,
                                 .backoff_factor_f64 = f64 ? sc->backoff : 0.0};
    /* without the doubles the plugin multiplies by the block's floats */
    double growth  = f64 ? sc->growth : (double)m.growth_factor;
    double backoff = f64 ? sc->backoff : (double)m.backoff_factor;
    size_t len     = strlen(sc->seq);
    for (size_t step = 0; step < len; step++) {
        /* the unscale pass would have set found_inf: write just that word */
        int32_t fi     = sc->seq[step] == '1';
        m.found_inf    = fi;
        ampx_status st = r->ifc->buffer_write(r->ctx, S->t.buf,
                                              S->lead + offsetof(ampx_scalars, found_inf), &fi, 4);
        if (st != AMPX_OK) {
            conf_fail(cc, "buffer_write: %s", ampx_status_name(st));
            goto done;
        }
        st = call_scaler_update(r, AMPX_OP_SCALER_UPDATE, &a);
        if (cc->probe || st != AMPX_OK) {
            conf_finish_call(cc, "scaler_update", st);
            goto done;
        }
        if (conf_finish_call(cc, "scaler_update", st)) goto done;
        ref_scaler_update(&m, growth, backoff);
        ampx_scalars got;
        conf_scalars_from_back(S, &got);
        char when[48];
        snprintf(when, sizeof when, "after step %zu (found_inf=%d): ", step + 1, fi);
        if (conf_scalars_diff(cc, when, &got, &m, 0)) goto done;
    }
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_unscale_check = {conf_case_unscale_check, 8, 6, NULL};
const conf_op_cases conf_op_grad_stats    = {conf_case_grad_stats, 7, 5, NULL};
const conf_op_cases conf_op_scaler_update = {conf_case_scaler_update, CONF_SCALER_SCENARIOS,
                                             CONF_SCALER_SCENARIOS, NULL};
const conf_op_cases conf_op_amp_pass      = {conf_case_amp_pass, 9, 7, NULL};
