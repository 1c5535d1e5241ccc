/* cases_window.c — conformance cases of ABI 1.6's window ops: IM2COL (exact: each element a
 * tap of x converted once, 0 for padding), COL2IM and POOL2D_BWD (sums of the windows that
 * reach each element, held to the tolerance of kh kw f32 additions, elements between the
 * images left untouched), POOL2D_FWD (max exact with its index, the first largest on ties
 * and the first NaN; average held to its sum's tolerance, with and without the padding in
 * the divisor). Shapes cover padding, strides below, at and above the kernel, dilation,
 * windows larger than the plane (padded) and images further apart than their planes (a
 * group of the channels). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_window, ampx_window_args)

typedef struct window_cfg {
    uint64_t n, channels, height, width;
    uint32_t kh, kw, sh, sw, ph, pw, dh, dw;
    uint64_t gap; /* x_batch - channels height width */
} window_cfg;

/* IM2COL and COL2IM */
static const window_cfg conv_cfgs[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
    {2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 0},    /* a "same" 3x3 convolution */
    {2, 4, 11, 8, 3, 2, 2, 1, 1, 0, 2, 1, 0},   /* strides, dilation, asymmetric */
    {3, 2, 9, 9, 5, 5, 3, 3, 2, 2, 1, 1, 17},   /* images further apart than their planes */
    {1, 2, 5, 5, 7, 7, 1, 1, 1, 1, 1, 1, 0},    /* one window, larger than the plane */
    {2, 2, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, 5},    /* stride = kernel: every tap once */
    {2, 3, 7, 7, 1, 1, 3, 3, 0, 0, 1, 1, 0},    /* stride > kernel: pixels no window reads */
    {4, 16, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 0}, /* large tier */
    {2, 64, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 0},
};

/* POOL2D_FWD and POOL2D_BWD: each config runs max and average (variant = 2 config + mode) */
static const window_cfg pool_cfgs[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, 0},    /* the usual 2x2 pooling */
    {2, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0},    /* overlapping, padded */
    {1, 3, 5, 6, 3, 2, 1, 2, 1, 0, 1, 1, 11},   /* asymmetric, images further apart */
    {3, 2, 5, 5, 2, 2, 3, 3, 1, 1, 1, 1, 0},    /* stride > kernel */
    {8, 32, 28, 28, 2, 2, 2, 2, 0, 0, 1, 1, 0}, /* large tier */
    {4, 16, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 0},
};

#define N_CONV (sizeof conv_cfgs / sizeof conv_cfgs[0])
#define N_POOL (sizeof pool_cfgs / sizeof pool_cfgs[0])

static ampx_window_args window_args(const window_cfg *c, int max, int count_pad, int acc) {
    return (ampx_window_args){.size       = sizeof(ampx_window_args),
                              .mode       = max ? AMPX_POOL_MAX : AMPX_POOL_AVG,
                              .n          = c->n,
                              .channels   = c->channels,
                              .height     = c->height,
                              .width      = c->width,
                              .x_batch    = c->channels * c->height * c->width + c->gap,
                              .kh         = c->kh,
                              .kw         = c->kw,
                              .stride_h   = c->sh,
                              .stride_w   = c->sw,
                              .pad_h      = c->ph,
                              .pad_w      = c->pw,
                              .dil_h      = c->dh,
                              .dil_w      = c->dw,
                              .count_pad  = (uint32_t)count_pad,
                              .accumulate = (uint32_t)acc};
}

static void window_shape(conf_case_ctx *cc, const window_cfg *c, const char *extra) {
    conf_shape(cc,
               "n=%" PRIu64 " c=%" PRIu64 " %" PRIu64 "x%" PRIu64 " kernel %ux%u stride %ux%u "
               "pad %ux%u dilation %ux%u x_batch +%" PRIu64 "%s",
               c->n, c->channels, c->height, c->width, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw,
               c->dh, c->dw, c->gap, extra);
}

/* x's elements: the n images x_batch apart, the last without its gap. */
static uint64_t x_elems(const ampx_window_args *a) {
    return a->n ? (a->n - 1) * a->x_batch + a->channels * a->height * a->width : 0;
}

/* 1 when x element e lies in an image's planes (not in the gap after one). */
static int in_planes(const ampx_window_args *a, uint64_t e) {
    return e % a->x_batch < a->channels * a->height * a->width;
}

/* Compares dx, written over the planes by COL2IM or POOL2D_BWD, with ref over those elements
 * (k: the most terms an element sums), and checks the gaps kept their bits. */
static void check_dx(conf_case_ctx *cc, const ampx_window_args *a, const conf_tensor *DX,
                     const double *ref, const double *mag, double k) {
    uint64_t nx = x_elems(a), m = 0;
    double *got = conf_values(cc, DX), *g = conf_alloc(cc, nx * sizeof(double)),
           *r = conf_alloc(cc, nx * sizeof(double)), *mg = conf_alloc(cc, nx * sizeof(double));
    if (!got || !conf_ok(cc)) return;
    for (uint64_t e = 0; e < nx; e++) {
        if (in_planes(a, e)) {
            g[m] = got[e], r[m] = ref[e], mg[m++] = mag[e];
            continue;
        }
        if (conf_tensor_bits(DX, DX->back, e) != conf_tensor_bits(DX, DX->image, e)) {
            conf_fail(cc, "dx[%" PRIu64 "] lies between two images and was written", e);
            return;
        }
    }
    conf_compare(cc, "dx", g, r, mg, m, DX->dt, k, CMP_NORM | CMP_ELEM);
}

// ---------------------------------------------------------------------------------------
// IM2COL, COL2IM

static void case_im2col(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const window_cfg *c = &conv_cfgs[variant];
    window_shape(cc, c, "");
    ampx_window_args a = window_args(c, 0, 0, 0);
    ref_window w;
    ref_window_init(&w, &a);
    uint64_t nc    = w.n * w.out_h * w.out_w * w.channels * (uint64_t)(w.kh * w.kw);
    conf_tensor *X = conf_tensor_new(cc, "x", dts[0], x_elems(&a), CT_IN);
    conf_tensor *C = conf_tensor_new(cc, "cols", dts[1], nc, CT_OUT);
    double *ref    = conf_alloc(cc, nc * sizeof(double));
    if (!conf_ok(cc)) return;
    conf_tensor_fill(cc, X, -4, 4);
    a.x = X->t, a.y = C->t;
    if (conf_upload(cc) || conf_finish_call(cc, "im2col", call_window(r, AMPX_OP_IM2COL, &a)))
        return;
    ref_im2col(&w, X->v, ref, NULL);
    for (uint64_t e = 0; e < nc; e++)
        ref[e] = ref_round(C->dt, ref[e]);
    double *g = conf_values(cc, C);
    if (g) conf_compare(cc, "cols", g, ref, NULL, nc, C->dt, 0, CMP_EXACT);
}

static void case_col2im(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const window_cfg *c = &conv_cfgs[variant];
    int acc             = variant % 2;
    window_shape(cc, c, acc ? " accumulate" : "");
    ampx_window_args a = window_args(c, 0, 0, acc);
    ref_window w;
    ref_window_init(&w, &a);
    uint64_t nc = w.n * w.out_h * w.out_w * w.channels * (uint64_t)(w.kh * w.kw), nx = x_elems(&a);
    conf_tensor *C  = conf_tensor_new(cc, "cols", dts[0], nc, CT_IN);
    conf_tensor *DX = conf_tensor_new(cc, "dx", dts[1], nx, acc ? CT_INOUT : CT_OUT);
    double *ref = conf_alloc(cc, nx * sizeof(double)), *mag = conf_alloc(cc, nx * sizeof(double));
    if (!conf_ok(cc)) return;
    conf_tensor_fill(cc, C, -1, 1);
    if (acc) conf_tensor_fill(cc, DX, -1, 1);
    a.x = DX->t, a.y = C->t;
    if (conf_upload(cc) || conf_finish_call(cc, "col2im", call_window(r, AMPX_OP_COL2IM, &a)))
        return;
    for (uint64_t e = 0; e < nx && acc; e++)
        ref[e] = DX->v[e], mag[e] = fabs(DX->v[e]);
    ref_col2im(&w, C->v, ref, mag);
    check_dx(cc, &a, DX, ref, mag, (double)(c->kh * c->kw) + 1);
}

// ---------------------------------------------------------------------------------------
// POOL2D_FWD, POOL2D_BWD

/* x for a max pool: small integers, so windows hold ties; in config 2, a NaN and infinities. */
static void fill_max(conf_case_ctx *cc, conf_tensor *X, int specials) {
    for (uint64_t e = 0; e < X->n; e++)
        conf_tensor_set(X, e, (double)(int)(conf_next(&cc->rng) % 7) - 3.0);
    if (specials && X->n > 40) {
        conf_tensor_set(X, 3, NAN);
        conf_tensor_set(X, 17, INFINITY);
        conf_tensor_set(X, 30, -INFINITY);
    }
}

static void case_pool_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const window_cfg *c = &pool_cfgs[variant / 2];
    int max = variant % 2 == 0, count_pad = (variant / 2) % 2, with_idx = variant != 8;
    window_shape(cc, c,
                 max ? (with_idx ? " max" : " max, no indices")
                     : (count_pad ? " avg (padding counted)" : " avg"));
    ampx_window_args a = window_args(c, max, count_pad, 0);
    ref_window w;
    ref_window_init(&w, &a);
    uint64_t ny     = w.n * w.channels * w.out_h * w.out_w;
    conf_tensor *X  = conf_tensor_new(cc, "x", dts[0], x_elems(&a), CT_IN);
    conf_tensor *Y  = conf_tensor_new(cc, "y", dts[1], ny, CT_OUT);
    conf_tensor *ID = max && with_idx ? conf_tensor_new(cc, "indices", AMPX_I32, ny, CT_OUT) : NULL;
    double *ref = conf_alloc(cc, ny * sizeof(double)), *mag = conf_alloc(cc, ny * sizeof(double));
    int32_t *idx = conf_alloc(cc, ny * sizeof(int32_t));
    if (!conf_ok(cc)) return;
    if (max)
        fill_max(cc, X, variant / 2 == 2);
    else
        conf_tensor_fill(cc, X, -4, 4);
    a.x = X->t, a.y = Y->t, a.indices = ID ? ID->t : conf_null_tensor;
    if (conf_upload(cc) ||
        conf_finish_call(cc, "pool2d_fwd", call_window(r, AMPX_OP_POOL2D_FWD, &a)))
        return;
    ref_pool_fwd(&w, X->v, ref, idx, mag);
    double *g = conf_values(cc, Y);
    if (!g) return;
    if (!max) {
        conf_compare(cc, "y", g, ref, mag, ny, Y->dt, (double)(c->kh * c->kw) + 1,
                     CMP_NORM | CMP_ELEM);
        return;
    }
    for (uint64_t e = 0; e < ny; e++)
        ref[e] = ref_round(Y->dt, ref[e]);
    conf_compare(cc, "y", g, ref, NULL, ny, Y->dt, 0, CMP_EXACT);
    for (uint64_t e = 0; ID && e < ny && conf_ok(cc); e++)
        if (conf_tensor_get(ID, e) != (double)idx[e])
            conf_fail(cc, "indices[%" PRIu64 "] = %.0f, expected %d", e, conf_tensor_get(ID, e),
                      idx[e]);
}

static void case_pool_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const window_cfg *c = &pool_cfgs[variant / 2];
    int max = variant % 2 == 0, count_pad = (variant / 2) % 2, acc = (variant / 2) % 3 == 1;
    window_shape(cc, c,
                 max ? (acc ? " max accumulate" : " max")
                     : (count_pad ? " avg (padding counted)" : " avg"));
    ampx_window_args a = window_args(c, max, count_pad, acc);
    ref_window w;
    ref_window_init(&w, &a);
    uint64_t ny = w.n * w.channels * w.out_h * w.out_w, nx = x_elems(&a);
    conf_tensor *DY = conf_tensor_new(cc, "dy", dts[0], ny, CT_IN);
    conf_tensor *DX = conf_tensor_new(cc, "dx", dts[1], nx, acc ? CT_INOUT : CT_OUT);
    conf_tensor *ID = max ? conf_tensor_new(cc, "indices", AMPX_I32, ny, CT_IN) : NULL;
    double *x = conf_alloc(cc, nx * sizeof(double)), *y = conf_alloc(cc, ny * sizeof(double));
    double *ref = conf_alloc(cc, nx * sizeof(double)), *mag = conf_alloc(cc, nx * sizeof(double));
    int32_t *idx = conf_alloc(cc, ny * sizeof(int32_t));
    if (!conf_ok(cc)) return;
    conf_tensor_fill(cc, DY, -1, 1);
    if (acc) conf_tensor_fill(cc, DX, -1, 1);
    if (max) { /* the indices a forward of tied values gives */
        for (uint64_t e = 0; e < nx; e++)
            x[e] = (double)(int)(conf_next(&cc->rng) % 5);
        ref_pool_fwd(&w, x, y, idx, NULL);
        for (uint64_t e = 0; e < ny; e++)
            conf_tensor_set(ID, e, idx[e]);
    }
    a.x = DX->t, a.y = DY->t, a.indices = ID ? ID->t : conf_null_tensor;
    if (conf_upload(cc) ||
        conf_finish_call(cc, "pool2d_bwd", call_window(r, AMPX_OP_POOL2D_BWD, &a)))
        return;
    for (uint64_t e = 0; e < nx && acc; e++)
        ref[e] = DX->v[e], mag[e] = fabs(DX->v[e]);
    ref_pool_bwd(&w, DY->v, idx, ref, mag);
    check_dx(cc, &a, DX, ref, mag, (double)(c->kh * c->kw) + 1);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_im2col     = {case_im2col, (int)N_CONV, 7, NULL};
const conf_op_cases conf_op_col2im     = {case_col2im, (int)N_CONV, 7, NULL};
const conf_op_cases conf_op_pool2d_fwd = {case_pool_fwd, 2 * (int)N_POOL, 10, NULL};
const conf_op_cases conf_op_pool2d_bwd = {case_pool_bwd, 2 * (int)N_POOL, 10, NULL};
