/* cases_attention.c — conformance cases of ATTN_FWD and ATTN_BWD against the naive double
 * reference (the whole softmax row at once).
 *
 * Shapes: one position (the first causal row sees one key), lengths off every tile size,
 * a long sequence (300), causal and not, the fused [B, T, 3D] layout of a QKV projection
 * (q, k, v three column ranges of one tensor, their gradients three ranges of one output)
 * and separate tensors with padded row strides. Dropout cases check the mask itself: with
 * v the identity (head_dim >= seq) the context row i is p'_i, so every element the mask
 * drops must come back exactly 0 and every kept visible one non-zero.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_attn, ampx_attn_args)

typedef struct attn_cfg {
    uint64_t batch, heads, seq, head_dim;
    int causal, fused;
    double rate; /* dropout */
    int identity_v;
} attn_cfg;

static const attn_cfg fwd_cfgs[] = {
    {1, 1, 1, 1, 1, 0, 0.0, 0},    /* one key */
    {2, 3, 37, 16, 1, 1, 0.0, 0},  /* fused layout, causal */
    {1, 2, 70, 24, 0, 0, 0.0, 0},  /* not causal, padded strides */
    {2, 2, 33, 40, 1, 1, 0.25, 1}, /* dropout: the mask through an identity v */
    {1, 1, 65, 72, 0, 0, 0.5, 1},  /* dropout, not causal, one past a key tile */
    {1, 2, 21, 136, 1, 0, 0.1, 0}, /* a head wider than OpenCL's tiled kernels take */
    /* large tier */
    {1, 2, 300, 64, 1, 1, 0.0, 0}, /* long */
    {2, 1, 129, 32, 0, 0, 0.1, 0},
};

static const attn_cfg bwd_cfgs[] = {
    {1, 1, 1, 3, 1, 0, 0.0, 0},
    {2, 2, 37, 16, 1, 1, 0.0, 0},
    {1, 2, 70, 24, 0, 0, 0.2, 0},
    {1, 1, 19, 130, 1, 0, 0.1, 0}, /* wider than OpenCL's tiled kernels */
    /* large tier */
    {1, 2, 300, 32, 1, 1, 0.1, 0},
};

/* The tensors of one case: q, k, v (views of one tensor when fused), o, lse. */
typedef struct attn_io {
    ampx_attn_args a;
    conf_tensor *qkv[3], *o, *lse;
    double *q, *k, *v; /* compact copies of the values the op sees */
    ref_attn_shape s;
} attn_io;

/* Compact [B, T, H hd] values of a strided operand (element (row, c) at row * ld + col0 + c). */
static void attn_gather(const ref_attn_shape *s, const double *src, uint64_t ld, uint64_t col0,
                        double *dst) {
    uint64_t w = s->heads * s->head_dim;
    for (uint64_t r = 0; r < s->batch * s->seq; r++)
        for (uint64_t c = 0; c < w; c++)
            dst[r * w + c] = src[r * ld + col0 + c];
}

/* Builds q, k, v (fused or separate, filled) and o, lse (outputs, or inputs for the
 * backward), and the args and shape they imply. */
static int attn_setup(conf_case_ctx *cc, const attn_cfg *c, ampx_dtype qdt, ampx_dtype odt, int bwd,
                      attn_io *io) {
    uint64_t w = c->heads * c->head_dim, rows = c->batch * c->seq;
    uint64_t ld = c->fused ? 3 * w : w + 3, n = rows * w;
    uint64_t seed = conf_next(&cc->rng);
    io->s         = (ref_attn_shape){
                c->batch, c->heads, c->seq, c->head_dim, c->causal, 1.0 / sqrt((double)c->head_dim), 0,
                1.0,      seed,     0};
    if (c->rate > 0) {
        io->s.threshold     = (uint32_t)floor(c->rate * 0x1p32);
        io->s.dropout_scale = (double)(float)(1.0 / (1.0 - c->rate));
        io->s.offset        = conf_next(&cc->rng) % 1000;
    }
    conf_shape(cc, "b=%" PRIu64 " h=%" PRIu64 " t=%" PRIu64 " hd=%" PRIu64 "%s%s rate=%g%s",
               c->batch, c->heads, c->seq, c->head_dim, c->causal ? " causal" : "",
               c->fused ? " fused qkv" : " ld+3", c->rate, c->identity_v ? " v=identity" : "");
    if (c->fused) {
        io->qkv[0] = io->qkv[1] = io->qkv[2] = conf_tensor_new(cc, "qkv", qdt, rows * ld, CT_IN);
    } else {
        io->qkv[0] = conf_tensor_new(cc, "q", qdt, rows * ld, CT_IN);
        io->qkv[1] = conf_tensor_new(cc, "k", qdt, rows * ld, CT_IN);
        io->qkv[2] = conf_tensor_new(cc, "v", qdt, rows * ld, CT_IN);
    }
    io->o = conf_tensor_new(cc, "o", odt, n, bwd ? CT_IN : CT_OUT);
    io->lse =
        conf_tensor_new(cc, "lse", AMPX_F32, c->batch * c->heads * c->seq, bwd ? CT_IN : CT_OUT);
    io->q = conf_alloc(cc, 3 * n * sizeof(double));
    if (!conf_ok(cc)) return -1;
    io->k = io->q + n, io->v = io->k + n;
    for (int p = 0; p < 3; p++)
        if (p == 0 || !c->fused) conf_tensor_fill(cc, io->qkv[p], -2, 2);
    if (c->identity_v) /* v(j, c) = [c == j] in every head */
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t col = 0; col < w; col++)
                conf_tensor_set(io->qkv[2], r * ld + (c->fused ? 2 * w : 0) + col,
                                col % c->head_dim == r % c->seq ? 1.0 : 0.0);
    for (int p = 0; p < 3; p++)
        attn_gather(&io->s, io->qkv[p]->v, ld, c->fused ? (uint64_t)p * w : 0,
                    p == 0   ? io->q
                    : p == 1 ? io->k
                             : io->v);
    ampx_attn_args a = {.size              = sizeof a,
                        .causal            = (uint32_t)c->causal,
                        .batch             = c->batch,
                        .heads             = c->heads,
                        .seq               = c->seq,
                        .head_dim          = c->head_dim,
                        .scale             = (float)io->s.scale,
                        .dropout_threshold = io->s.threshold,
                        .dropout_scale     = (float)io->s.dropout_scale,
                        .seed              = io->s.seed,
                        .offset            = io->s.offset,
                        .ld_q              = ld,
                        .ld_k              = ld,
                        .ld_v              = ld,
                        .ld_o              = w,
                        .q                 = io->qkv[0]->t,
                        .k                 = io->qkv[1]->t,
                        .v                 = io->qkv[2]->t,
                        .o                 = io->o->t,
                        .lse               = io->lse->t};
    if (c->fused) {
        a.k.offset += w * io->qkv[0]->esz;
        a.v.offset += 2 * w * io->qkv[0]->esz;
    }
    io->s.scale = (double)a.scale; /* the f32 scale the op is given */
    io->a       = a;
    return 0;
}

// ---------------------------------------------------------------------------------------
// ATTN_FWD

/* With an identity v, o(i, c) for c < seq is p'_ic: dropped and masked elements must be 0
 * exactly, kept visible ones non-zero (unless too small for o's dtype). */
static void attn_check_mask(conf_case_ctx *cc, const attn_io *io, const double *got,
                            const double *ref) {
    const ref_attn_shape *s = &io->s;
    double tiny             = 1024.0 * ref_min_subnormal(io->o->dt); /* may round to 0 below */
    for (uint64_t b = 0; b < s->batch; b++)
        for (uint64_t h = 0; h < s->heads; h++)
            for (uint64_t i = 0; i < s->seq; i++)
                for (uint64_t j = 0; j < s->seq; j++) {
                    uint64_t e  = (b * s->seq + i) * s->heads * s->head_dim + h * s->head_dim + j;
                    int visible = !(s->causal && j > i);
                    int keep    = ref_attn_keep(s, b, h, i, j);
                    int bad =
                        visible && keep ? got[e] == 0.0 && fabs(ref[e]) > tiny : got[e] != 0.0;
                    if (bad) {
                        conf_fail(cc,
                                  "o[b=%" PRIu64 ",h=%" PRIu64 ",i=%" PRIu64 "] column %" PRIu64
                                  " = %.9g: the key is %s",
                                  b, h, i, j, got[e],
                                  !visible ? "masked (expected 0)"
                                  : keep   ? "kept (expected non-zero)"
                                           : "dropped by the mask (expected exactly 0)");
                        return;
                    }
                }
}

/* With bf16 q, k, v the op may round p (p') and ds to bf16 before their products, as a
 * composite attention does (backend.h, ATTN_FWD): each such term is then off by at most
 * u(bf16) of itself, which the magnitudes mag bound. */
static int attn_inner(const ampx_dtype *dts) {
    return dts[0] == AMPX_BF16 ? CMP_INNER_BF16 : 0;
}

static void conf_case_attn_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const attn_cfg *c = &fwd_cfgs[variant];
    attn_io io;
    if (attn_setup(cc, c, dts[0], dts[1], 0, &io)) return;
    uint64_t n = c->batch * c->seq * c->heads * c->head_dim, nl = c->batch * c->heads * c->seq;
    double *ref = conf_alloc(cc, (2 * n + nl) * sizeof(double));
    if (!conf_ok(cc)) return;
    double *mag = ref + n, *lse = mag + n;
    if (conf_upload(cc) || conf_finish_call(cc, "attn_fwd", call_attn(r, AMPX_OP_ATTN_FWD, &io.a)))
        return;
    ref_attn_fwd(&io.s, io.q, io.k, io.v, ref, lse, mag);
    double k  = (double)c->head_dim + (double)c->seq + 16.0;
    double *g = conf_values(cc, io.o);
    if (!g) return;
    conf_compare(cc, "o", g, ref, mag, n, io.o->dt, k, CMP_NORM | CMP_ELEM | attn_inner(dts));
    if (c->identity_v) attn_check_mask(cc, &io, g, ref);
    double *gl = conf_values(cc, io.lse);
    if (gl) conf_compare(cc, "lse", gl, lse, NULL, nl, AMPX_F32, k, CMP_NORM);
}

// ---------------------------------------------------------------------------------------
// ATTN_BWD

static void conf_case_attn_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const attn_cfg *c = &bwd_cfgs[variant];
    attn_io io;
    if (attn_setup(cc, c, dts[0], dts[1], 1, &io)) return;
    uint64_t w = c->heads * c->head_dim, rows = c->batch * c->seq, n = rows * w;
    uint64_t nl = c->batch * c->heads * c->seq, ldg = c->fused ? 3 * w : w + 1;
    conf_tensor *DO = conf_tensor_new(cc, "do", dts[2], n, CT_IN);
    conf_tensor *G[3];
    if (c->fused) {
        G[0] = G[1] = G[2] = conf_tensor_new(cc, "dqkv", dts[3], rows * ldg, CT_OUT);
    } else {
        G[0] = conf_tensor_new(cc, "dq", dts[3], rows * ldg, CT_OUT);
        G[1] = conf_tensor_new(cc, "dk", dts[3], rows * ldg, CT_OUT);
        G[2] = conf_tensor_new(cc, "dv", dts[3], rows * ldg, CT_OUT);
    }
    conf_tensor *DL = conf_tensor_new(cc, "delta", AMPX_F32, nl, CT_OUT);
    double *buf     = conf_alloc(cc, (9 * n + 3 * nl) * sizeof(double));
    if (!conf_ok(cc)) return;
    double *o = buf, *lse = o + n, *d_o = lse + nl, *ref[3] = {d_o + n, d_o + 2 * n, d_o + 3 * n};
    double *dl = ref[2] + n, *got = dl + nl, *mag[3] = {got + n, got + 2 * n, NULL};
    /* o and lse as a real forward leaves them: rounded to their dtypes */
    ref_attn_fwd(&io.s, io.q, io.k, io.v, o, lse, NULL);
    for (uint64_t i = 0; i < n; i++) {
        conf_tensor_set(io.o, i, ref_round(io.o->dt, o[i]));
        o[i] = io.o->v[i];
    }
    for (uint64_t i = 0; i < nl; i++) {
        conf_tensor_set(io.lse, i, ref_round(AMPX_F32, lse[i]));
        lse[i] = io.lse->v[i];
    }
    conf_tensor_fill(cc, DO, -1, 1);
    memcpy(d_o, DO->v, n * sizeof(double));
    io.a.d_o   = DO->t;
    io.a.dq    = G[0]->t;
    io.a.dk    = G[1]->t;
    io.a.dv    = G[2]->t;
    io.a.delta = DL->t;
    io.a.ld_dq = io.a.ld_dk = io.a.ld_dv = ldg;
    if (c->fused) {
        io.a.dk.offset += w * G[0]->esz;
        io.a.dv.offset += 2 * w * G[0]->esz;
    }
    if (conf_upload(cc) || conf_finish_call(cc, "attn_bwd", call_attn(r, AMPX_OP_ATTN_BWD, &io.a)))
        return;
    ref_attn_bwd(&io.s, io.q, io.k, io.v, o, lse, d_o, ref[0], ref[1], ref[2], dl, mag[0], mag[1]);
    double k                          = 2.0 * ((double)c->head_dim + (double)c->seq) + 32.0;
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int p = 0; p < 3 && conf_ok(cc); p++) {
        double *g = conf_values(cc, G[p]);
        if (!g) return;
        attn_gather(&io.s, g, ldg, c->fused ? (uint64_t)p * w : 0, got);
        /* dq and dk cancel (ds = p (dp - delta)): held elementwise to their terms' size;
         * dv sums p' do, normwise */
        conf_compare(cc, names[p], got, ref[p], mag[p], n, G[p]->dt, k,
                     (mag[p] ? CMP_ELEM : CMP_NORM) | attn_inner(dts));
    }
    double *gd = conf_values(cc, DL);
    if (gd && conf_ok(cc)) conf_compare(cc, "delta", gd, dl, NULL, nl, AMPX_F32, k, CMP_NORM);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_attn_fwd = {conf_case_attn_fwd, 8, 6, NULL};
const conf_op_cases conf_op_attn_bwd = {conf_case_attn_bwd, 5, 4, NULL};
