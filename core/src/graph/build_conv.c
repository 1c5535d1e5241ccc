/* build_conv.c — the image layers of the model file: conv2d, maxpool2d, avgpool2d,
 * global_avgpool, flatten and concat, lowered into conv.c's nodes and the dense family's
 * matmul. Images are [channels, height, width] per example (channels first). A conv2d layer
 * "c1" becomes im2col ("c1.cols", one row of channels x kernel values per output position),
 * a matmul by the weight "c1.weight" [channels / groups x kh x kw, filters] (grouped when
 * groups > 1), the bias "c1.bias" and the activation on those rows ("c1.rows"), then a
 * transpose and a view back to channels first: the layer's output "c1" [filters, oh, ow]. */
#include <stdio.h>
#include <string.h>

#include "graph/lower.h"
#include "graph/ops.h"

/* "key": n or [h, w], each in [lo, hi]; dflt for both when absent (required: an error). */
static int size_pair(builder *b, const json_value *obj, const char *key, int required, int lo,
                     int hi, int dflt, int out[2]) {
    const json_value *v = json_get(obj, key);
    out[0] = out[1] = dflt;
    if (!v) return required ? jmissing(b->c, obj, key) : 0;
    int n = v->type == JSON_ARRAY ? (int)v->n_items : 1;
    if (n != 1 && n != 2)
        return jerr(b->c, v, "expected a size or [height, width], found %d sizes", n);
    for (int i = 0; i < n; i++) {
        const json_value *d = v->type == JSON_ARRAY ? v->items[i] : v;
        if (d->type != JSON_NUMBER || d->num != (double)(int64_t)d->num || d->num < lo ||
            d->num > hi)
            return jerr(b->c, d, "expected an integer in [%d, %d]", lo, hi);
        out[i] = (int)d->num;
    }
    if (n == 1) out[1] = out[0];
    return 0;
}

/* The images a layer reads: x must be [channels, height, width] per example. */
static int images(builder *b, const b_node *n, int64_t *ch) {
    const g_value *x = &b->g->values[n->ins[0]];
    if (!x->batched || x->ndim != 4) {
        char s[64];
        g_shape_str(x, s, sizeof s);
        return jerr(b->c, n->iv ? n->iv : n->at,
                    "%s reads images [channels, height, width]; \"%s\" has shape %s (a reshape "
                    "makes one)",
                    n->kind_name, x->name, s);
    }
    *ch = x->dims[1];
    return 0;
}

/* kernel, stride, padding and dilation into a; pool: stride defaults to the kernel, no
 * dilation, padding below the kernel, and no "same". */
static int window_keys(builder *b, const b_node *n, int pool, g_attrs *a) {
    const json_value *v = n->v, *pv = json_get(v, "padding");
    int k[2], s[2], p[2] = {0, 0}, d[2] = {1, 1};
    if (size_pair(b, v, "kernel", 1, 1, 1 << 16, 1, k) ||
        size_pair(b, v, "stride", 0, 1, 1 << 16, pool ? 0 : 1, s) ||
        (!pool && size_pair(b, v, "dilation", 0, 1, 1 << 16, 1, d)))
        return -1;
    if (pool && !s[0]) s[0] = k[0], s[1] = k[1];
    if (pv && pv->type == JSON_STRING) {
        if (!strcmp(pv->str, "same") && !pool) {
            for (int i = 0; i < 2; i++) {
                int64_t span = (int64_t)d[i] * (k[i] - 1);
                if (s[i] != 1 || span % 2)
                    return jerr(b->c, pv,
                                "\"same\" padding needs stride 1 and an odd kernel span (kernel "
                                "%dx%d, dilation %dx%d)",
                                k[0], k[1], d[0], d[1]);
                p[i] = (int)(span / 2 < 65536 ? span / 2 : 65536);
            }
        } else if (strcmp(pv->str, "valid"))
            return jerr(b->c, pv, "expected a size, [height, width]%s or \"valid\"",
                        pool ? "" : ", \"same\"");
    } else if (size_pair(b, v, "padding", 0, 0, 1 << 16, 0, p)) {
        return -1;
    }
    if (pool && (p[0] >= k[0] || p[1] >= k[1]))
        return jerr(b->c, pv, "pooling pads less than its kernel (%dx%d)", k[0], k[1]);
    a->kh = k[0], a->kw = k[1], a->stride_h = s[0], a->stride_w = s[1];
    a->pad_h = p[0], a->pad_w = p[1], a->dil_h = d[0], a->dil_w = d[1];
    return 0;
}

/* The value named "<layer>.<suffix>". */
static int named_act(builder *b, const b_node *n, const char *suffix, ampx_dtype d) {
    char name[G_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.%s", n->name, suffix);
    return b_new_act(b, n->at, name, d);
}

/* The conv's weight [channels / groups kh kw, filters] and bias [filters]. */
static int conv_params(builder *b, b_node *n, int64_t ch, int64_t filters, int groups,
                       const g_attrs *a, int bias) {
    g_init wi = INIT_GLOROT_UNIFORM, bi = INIT_ZEROS;
    float std = 0.02f;
    if (b_parse_init(b, n->v, &wi, &bi, &std)) return -1;
    int64_t k = ch / groups * a->kh * a->kw, wd[2] = {k, filters}, bd[1] = {filters};
    int64_t fan_out = filters / groups * a->kh * a->kw;
    n->params[0] = b_param(b, n->at, n->name, "weight", ROLE_PARAM, 2, wd, wi, std, k, fan_out, 1);
    n->n_params  = 1;
    if (n->params[0] < 0) return -1;
    if (bias && (n->params[n->n_params++] = b_param(b, n->at, n->name, "bias", ROLE_PARAM, 1, bd,
                                                    bi, std, k, fan_out, 0)) < 0)
        return -1;
    return 0;
}

/* The product's rows [oh ow, filters], its bias and activation; the last is "<name>.rows". */
static int conv_rows(builder *b, b_node *n, int cols, int bias, int act, int groups) {
    int last   = !bias && act < 0;
    int y      = named_act(b, n, last ? "rows" : "matmul", AMPX_F32);
    int mi[2]  = {cols, n->params[0]};
    g_attrs ma = {.alpha = 1, .groups = groups, .conv = 1};
    if (y < 0 || b_add_node(b, n->at, NULL, OP_MATMUL, mi, 2, &y, 1, &ma, n->name)) return -1;
    if (bias) {
        int yb     = named_act(b, n, act < 0 ? "rows" : "pre", AMPX_F32);
        int bin[2] = {y, n->params[1]};
        g_attrs ba = {.alpha = 1};
        if (yb < 0 || b_add_node(b, n->at, NULL, OP_BIAS, bin, 2, &yb, 1, &ba, n->name)) return -1;
        y = yb;
    }
    if (act >= 0) {
        char an[G_NAME_MAX];
        snprintf(an, sizeof an, "%.80s.%s", n->name, b_act_names[act]);
        int ya     = named_act(b, n, "rows", AMPX_F32);
        g_attrs aa = {.act = act, .alpha = 1};
        if (ya < 0 || b_add_node(b, n->at, NULL, OP_ACT, &y, 1, &ya, 1, &aa, an)) return -1;
        y = ya;
    }
    return y;
}

int b_parse_conv2d(builder *b, b_node *n) {
    jctx *c    = b->c;
    int64_t ch = 0, filters = 0, groups = 1;
    int bias = 1, act = -1;
    g_attrs wa = {.alpha = 1};
    if (images(b, n, &ch) || jint(c, n->v, "filters", 1, 1, 1 << 24, &filters) ||
        jint(c, n->v, "groups", 0, 1, 1 << 24, &groups) || jbool(c, n->v, "bias", &bias) ||
        jenum(c, n->v, "activation", 0, b_act_names, &act) || window_keys(b, n, 0, &wa))
        return -1;
    if (ch % groups || filters % groups)
        return jerr(c, json_get(n->v, "groups"),
                    "%lld groups do not divide %lld input channels and %lld filters",
                    (long long)groups, (long long)ch, (long long)filters);
    if (conv_params(b, n, ch, filters, (int)groups, &wa, bias)) return -1;
    int cols = named_act(b, n, "cols", AMPX_F32);
    if (cols < 0 || b_add_node(b, n->at, n->iv, OP_IM2COL, n->ins, 1, &cols, 1, &wa, n->name))
        return -1;
    int rows   = conv_rows(b, n, cols, bias, act, (int)groups);
    int chw    = named_act(b, n, "chw", AMPX_F32);
    g_attrs ta = {.alpha = 1};
    if (rows < 0 || chw < 0 ||
        b_add_node(b, n->at, NULL, OP_TRANSPOSE, &rows, 1, &chw, 1, &ta, n->name))
        return -1;
    const g_value *x = &b->g->values[n->ins[0]];
    int64_t oh =
        (x->dims[2] + 2 * (int64_t)wa.pad_h - (int64_t)wa.dil_h * (wa.kh - 1) - 1) / wa.stride_h +
        1;
    g_attrs ra = {.alpha = 1, .shape_ndim = 3, .shape = {filters, oh, -1}};
    return b_one_node(b, n, OP_RESHAPE, &chw, 1, &ra);
}

static int parse_pool(builder *b, b_node *n, int avg) {
    int64_t ch           = 0;
    g_attrs a            = {.alpha = 1, .pool_avg = avg, .count_pad = 1};
    const json_value *cp = json_get(n->v, "count_padding");
    if (images(b, n, &ch) || window_keys(b, n, 1, &a) ||
        jbool(b->c, n->v, "count_padding", &a.count_pad))
        return -1;
    if (cp && !avg) return jerr(b->c, cp, "\"count_padding\" applies to avgpool2d only");
    if (avg) return b_one_node(b, n, OP_POOL, n->ins, 1, &a);
    int outs[2] = {b_new_act(b, n->at, n->name, AMPX_F32), named_act(b, n, "indices", AMPX_I32)};
    if (outs[0] < 0 || outs[1] < 0 ||
        b_add_node(b, n->at, n->iv, OP_POOL, n->ins, 1, outs, 2, &a, n->name))
        return -1;
    n->out = outs[0];
    return 0;
}

int b_parse_maxpool2d(builder *b, b_node *n) {
    return parse_pool(b, n, 0);
}

int b_parse_avgpool2d(builder *b, b_node *n) {
    return parse_pool(b, n, 1);
}

/* The mean of each channel: a view [channels, height width], then a mean over its last axis
 * (against a constant of ones, as the mean layer). */
int b_parse_global_avgpool(builder *b, b_node *n) {
    int64_t ch = 0;
    if (images(b, n, &ch)) return -1;
    const g_value *x = &b->g->values[n->ins[0]];
    int64_t hw[1]    = {x->dims[2] * x->dims[3]};
    int flat = named_act(b, n, "flat", AMPX_F32), ones = -1;
    g_attrs ra = {.alpha = 1, .shape_ndim = 2, .shape = {ch, hw[0]}};
    if (flat < 0 || b_add_node(b, n->at, n->iv, OP_RESHAPE, n->ins, 1, &flat, 1, &ra, n->name))
        return -1;
    char on[G_NAME_MAX];
    snprintf(on, sizeof on, "%.80s.ones", n->name);
    if ((ones = g_add_value(b->g, on, ROLE_CONST, AMPX_F32, 0, 1, hw)) < 0) return b_full(b, n->at);
    b->g->values[ones].const_fill = 1.0f;
    g_attrs ma                    = {.alpha = 1, .axis = 2, .mode = AMPX_REDUCE_MEAN};
    int rin[2]                    = {flat, ones};
    return b_one_node(b, n, OP_REDUCE, rin, 2, &ma);
}

int b_parse_flatten(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1, .shape_ndim = 1, .shape = {-1}};
    return b_one_node(b, n, OP_RESHAPE, n->ins, 1, &a);
}

/* concat: the inputs side by side along "axis" of an example (default 0, the channels). */
int b_parse_concat(builder *b, b_node *n) {
    g_attrs a = {.alpha = 1};
    if (b_axis_of(b, n->v, n->ins[0], 0, &a.axis)) return -1;
    return b_one_node(b, n, OP_CONCAT, n->ins, n->n_ins, &a);
}
