/* cases_layout.c — conformance cases of PERMUTE (ABI 1.1), the strided N-D copy. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_permute, ampx_permute_args)

// ---------------------------------------------------------------------------------------
// PERMUTE: every y element some index reaches must be its x element converted, bit for bit:
// a copy where the dtypes match (NaN payloads included), exact where y is wider, reference.c's
// round to nearest even (the rounding of dtype.h's ampx_f32_to_{bf16,f16}) where y is
// narrower, NaN staying NaN across dtypes. Every y element no index reaches (row padding,
// strided gaps, a tail, all of y for an empty copy) must keep its poison. The layouts are
// given both ways: x contiguous and y strided (a scatter), and y contiguous and x strided (a
// gather), as a transpose or a head split/merge may be written either way.

typedef struct permute_cfg {
    const char *what;
    uint32_t ndim;
    uint64_t dims[AMPX_PERMUTE_MAX_DIMS];
    uint64_t xs[AMPX_PERMUTE_MAX_DIMS], ys[AMPX_PERMUTE_MAX_DIMS]; /* strides, in elements */
    uint64_t y_tail; /* y elements after the last one reached */
    int bits;        /* 1: x holds random bit patterns (NaN payloads, inf, subnormals, values
                        that overflow or round to 0 when narrowed); 0: values in [-4, 4] */
} permute_cfg;

static const permute_cfg permute_cfgs[] = {
    {"copy", 1, {1}, {1}, {1}, 0, 0},
    {"copy", 1, {1031}, {1}, {1}, 3, 1},
    /* y = x^T, [7,13] -> [13,7]: x contiguous, y strided */
    {"transpose [7,13]", 2, {7, 13}, {13, 1}, {1, 7}, 0, 0},
    /* attention's head split [B,T,H,D] -> [B,H,T,D], B=2 T=13 H=4 D=8 (scatter) */
    {"head split [2,13,4,8]", 4, {2, 13, 4, 8}, {416, 32, 8, 1}, {416, 8, 104, 1}, 0, 1},
    /* a bias row read for every row: x stride 0 */
    {"broadcast [31] -> [17,31]", 2, {17, 31}, {0, 1}, {31, 1}, 0, 0},
    /* rows of 29 into rows of 32: 3 untouched elements per row, and a tail of 5 */
    {"padded rows [13,29] -> ld 32", 2, {13, 29}, {29, 1}, {32, 1}, 5, 1},
    /* last two axes of [3,31,17] swapped, iterated in y's order: y contiguous, x strided */
    {"transpose [3,31,17] gather", 3, {3, 17, 31}, {527, 1, 17}, {527, 31, 1}, 0, 0},
    /* last two axes of [2,3,33,65] swapped (scatter) */
    {"transpose [2,3,33,65]", 4, {2, 3, 33, 65}, {6435, 2145, 65, 1}, {6435, 2145, 1, 33}, 0, 1},
    /* head merge [B,H,T,D] -> [B,T,H,D], B=3 H=5 T=7 D=9, in y's order (gather) */
    {"head merge [3,5,7,9] gather", 4, {3, 7, 5, 9}, {315, 9, 63, 1}, {315, 45, 9, 1}, 0, 0},
    /* every third x element to every second y element */
    {"strided copy", 1, {333}, {3}, {2}, 1, 1},
    /* [4,1,6] broadcast to [4,5,6]: stride 0 on a middle axis */
    {"broadcast [4,1,6] -> [4,5,6]", 3, {4, 5, 6}, {6, 0, 1}, {30, 6, 1}, 0, 0},
    /* [5,6,7] -> [7,5,6]: every axis moves (scatter) */
    {"rotate [5,6,7] -> [7,5,6]", 3, {5, 6, 7}, {42, 7, 1}, {6, 1, 30}, 0, 1},
    /* a zero dimension: nothing is read or written */
    {"empty [4,0,5]", 3, {4, 0, 5}, {5, 5, 1}, {5, 5, 1}, 0, 0},
    /* size-1 axes: [1,7,1,5] -> [5,7] */
    {"size-1 axes [1,7,1,5] -> [5,7]", 4, {1, 7, 1, 5}, {35, 5, 5, 1}, {35, 1, 7, 7}, 2, 1},
    /* large tier: more than 65536 elements each, partial tiles in both directions */
    {"transpose [300,257] gather", 2, {257, 300}, {1, 257}, {300, 1}, 0, 1},
    {"head split [4,129,6,33]",
     4,
     {4, 129, 6, 33},
     {25542, 198, 33, 1},
     {25542, 33, 4257, 1},
     0,
     0},
};

/* Elements of a tensor that a layout reaches: 1 + the largest offset (1 when a dim is 0, so
 * the tensor still exists). */
static uint64_t permute_extent(uint32_t ndim, const uint64_t *dims, const uint64_t *strides) {
    uint64_t last = 0;
    for (uint32_t d = 0; d < ndim; d++)
        if (dims[d] > 0) last += (dims[d] - 1) * strides[d];
    return last + 1;
}

/* "[a,b,c]" */
static void permute_list(char *out, size_t cap, uint32_t ndim, const uint64_t *v) {
    size_t l = 0;
    out[0]   = '\0';
    for (uint32_t d = 0; d < ndim && l < cap; d++)
        l += (size_t)snprintf(out + l, cap - l, "%s%" PRIu64, d ? "," : "[", v[d]);
    if (l < cap) snprintf(out + l, cap - l, "]");
}

void conf_case_permute(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    const permute_cfg *c = &permute_cfgs[variant];
    char dims[48], xs[64], ys[64];
    permute_list(dims, sizeof dims, c->ndim, c->dims);
    permute_list(xs, sizeof xs, c->ndim, c->xs);
    permute_list(ys, sizeof ys, c->ndim, c->ys);
    conf_shape(cc, "%s: dims=%s x_strides=%s y_strides=%s", c->what, dims, xs, ys);
    uint64_t nx    = permute_extent(c->ndim, c->dims, c->xs);
    uint64_t ny    = permute_extent(c->ndim, c->dims, c->ys) + c->y_tail;
    conf_tensor *X = conf_tensor_new(cc, "x", dts[0], nx, CT_IN);
    conf_tensor *Y = conf_tensor_new(cc, "y", dts[1], ny, CT_OUT);
    int64_t *src   = conf_alloc(cc, ny * sizeof(int64_t));
    if (!conf_ok(cc)) goto done;
    for (uint64_t i = 0; i < ny; i++)
        src[i] = -1;
    if (ref_permute(c->ndim, c->dims, c->xs, c->ys, NULL, NULL, src) != 0) {
        conf_fail(cc, "internal: the y strides map two indices to one element");
        goto done;
    }
    if (c->bits)
        for (uint64_t i = 0; i < nx; i++) {
            uint32_t bits = (uint32_t)conf_next(&cc->rng);
            conf_tensor_set_bits(X, i, X->esz == 2 ? bits & 0xffffu : bits);
        }
    else
        conf_tensor_fill(cc, X, -4, 4);
    ampx_permute_args a = {sizeof a, c->ndim, {0}, {0}, {0}, X->t, Y->t};
    for (uint32_t d = 0; d < c->ndim; d++) {
        a.dims[d]      = c->dims[d];
        a.x_strides[d] = c->xs[d];
        a.y_strides[d] = c->ys[d];
    }
    if (conf_upload(cc) || conf_finish_call(cc, "permute", call_permute(r, AMPX_OP_PERMUTE, &a)))
        goto done;
    uint32_t mask = Y->esz == 2 ? 0xffffu : 0xffffffffu;
    for (uint64_t e = 0; e < ny; e++) {
        uint32_t gb = conf_tensor_bits(Y, Y->back, e);
        if (src[e] < 0) {
            uint32_t pb = conf_tensor_bits(Y, Y->image, e);
            if (gb != pb) {
                conf_fail(cc,
                          "y[%" PRIu64 "] = 0x%x: no index reaches it, yet its poison 0x%x "
                          "was overwritten",
                          e, gb, pb);
                goto done;
            }
            continue;
        }
        uint64_t s  = (uint64_t)src[e];
        uint32_t xb = conf_tensor_bits(X, X->image, s);
        double x = X->v[s], got = conf_tensor_get(Y, e);
        if (X->dt == Y->dt) {
            if (gb != xb) {
                conf_fail(cc, "y[%" PRIu64 "] = 0x%x, expected 0x%x: a copy of x[%" PRIu64 "]", e,
                          gb, xb, s);
                goto done;
            }
            continue;
        }
        if (isnan(x)) {
            if (!isnan(got)) {
                conf_fail(cc, "y[%" PRIu64 "] = %.9g from x[%" PRIu64 "] = NaN (0x%x)", e, got, s,
                          xb);
                goto done;
            }
            continue;
        }
        double want = ref_round(Y->dt, x);
        uint32_t wb = ref_encode(Y->dt, want) & mask;
        if (gb != wb) {
            conf_fail(cc,
                      "y[%" PRIu64 "] = 0x%x (%.9g), expected 0x%x (%.9g) from x[%" PRIu64 "] = %a",
                      e, gb, got, wb, want, s, x);
            goto done;
        }
    }
done:
    return;
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_permute = {conf_case_permute, 16, 6, NULL};
