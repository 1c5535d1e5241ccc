/* trainer.c — the executor: plans buffers by liveness, runs forward, the loss, reverse-mode
 * backward, the fused unscale-and-check, the optimizer and the scaler update through the
 * plugin ABI, and reads the device's per-step records only when it logs.
 *
 * A step, on the device and in this order, with no host wait:
 *   for each micro-batch: forward; softmax-xent (loss into the ring, logit gradient seeded
 *   with the loss scale); backward (parameter gradients accumulate in f32);
 *   unscale_check (flags into the ring); sum_squares (into the ring, for clipping and the
 *   norm); the optimizer (skips itself on found_inf); scaler_update; the scalars block is
 *   copied into the ring. */
#include "train/trainer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/dtype.h"

#define ALIGN 64
#define SLOT_SCALARS 0
#define SLOT_GSQ 128
#define SLOT_LOSS 136

ampx_status tr_fail(ampx_trainer *t, ampx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof t->error, fmt, ap);
    va_end(ap);
    return st;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t dsize(ampx_dtype d) {
    return d == AMPX_BF16 || d == AMPX_F16 ? 2 : 4;
}

static ampx_status check(ampx_trainer *t, ampx_status st, const char *what) {
    if (st == AMPX_OK) return st;
    const char *why = ampx_backend_last_error(t->be);
    return tr_fail(t, st, "%s: %s: %s", what, ampx_status_name(st), why && *why ? why : "failed");
}

#define CALL(t, op, args)                                                                          \
    do {                                                                                           \
        if (!(t)->planning) {                                                                      \
            ampx_status st_ = check((t), (t)->ops->op((t)->ctx, (args)), #op);                     \
            if (st_) return st_;                                                                   \
        }                                                                                          \
    } while (0)

static ampx_tensor buf_tensor(ampx_buffer *b, uint64_t off, ampx_dtype d) {
    return (ampx_tensor){.buf = b, .offset = off, .dtype = d};
}

// ---------------------------------------------------------------------------------------
// Tensors of the plan. While planning, each reference extends the item's live interval;
// while running, it is the item's place in the arena.

static ampx_tensor ref(ampx_trainer *t, int ni, int kind) {
    const node *n = &t->m->nodes[ni];
    plan_item *p  = &t->plan[ni * T_PER_NODE + kind];
    ampx_dtype d  = n->dtype;
    if (kind == T_MEAN || kind == T_RSTD) d = AMPX_F32;
    if (kind == T_TEMP) d = t->m->nodes[n->inputs[0]].dtype;
    if (t->planning) {
        uint64_t cols = kind == T_MEAN || kind == T_RSTD ? 1
                        : kind == T_TEMP                 ? (uint64_t)t->m->nodes[n->inputs[0]].cols
                                                         : (uint64_t)n->cols;
        p->bytes      = (uint64_t)t->B * cols * dsize(d);
        if (p->first < 0) p->first = t->time;
        p->last = t->time;
        return buf_tensor(NULL, 0, d);
    }
    return buf_tensor(t->arena, p->offset, d);
}

static ampx_tensor y_of(ampx_trainer *t, int i) {
    const node *n = &t->m->nodes[i];
    if (n->kind == NODE_INPUT)
        return buf_tensor(t->x_src, (uint64_t)t->row0 * (uint64_t)n->cols * 4, AMPX_F32);
    if (n->kind == NODE_LABELS) return buf_tensor(t->y_src, (uint64_t)t->row0 * 4, AMPX_I32);
    return ref(t, i, T_Y);
}

static ampx_tensor weight_of(ampx_trainer *t, const param *p) {
    if (p->copy_dtype != AMPX_F32) return buf_tensor(p->copy, 0, p->copy_dtype);
    return buf_tensor(p->master, 0, AMPX_F32);
}

/* One row-major 2-D product C = op(A) op(B) (+ C when accumulating), leading dimensions
 * those of the stored matrices. */
static ampx_status gemm2d(ampx_trainer *t, int trans_a, int trans_b, uint64_t m, uint64_t n,
                          uint64_t k, int accumulate, ampx_tensor a, ampx_tensor b, ampx_tensor c) {
    ampx_gemm_args g = {.size    = sizeof g,
                        .trans_a = (uint32_t)trans_a,
                        .trans_b = (uint32_t)trans_b,
                        .m       = m,
                        .n       = n,
                        .k       = k,
                        .batch   = 1,
                        .lda     = trans_a ? m : k,
                        .ldb     = trans_b ? k : n,
                        .ldc     = n,
                        .alpha   = 1,
                        .beta    = accumulate ? 1.0f : 0.0f,
                        .a       = a,
                        .b       = b,
                        .c       = c};
    CALL(t, gemm, &g);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Forward

static ampx_status forward_node(ampx_trainer *t, int i) {
    const ampx_model *m = t->m;
    const node *n       = &m->nodes[i];
    uint64_t r = (uint64_t)t->rows, cols = (uint64_t)n->cols;
    switch (n->kind) {
    case NODE_INPUT:
    case NODE_LABELS: return AMPX_OK;
    case NODE_CAST: {
        ampx_cast_args a = {
            .size = sizeof a, .n = r * cols, .src = y_of(t, n->inputs[0]), .dst = ref(t, i, T_Y)};
        CALL(t, cast, &a);
        return AMPX_OK;
    }
    case NODE_DENSE: {
        const param *w = &t->params[t->w_param[i]];
        uint64_t in    = (uint64_t)m->nodes[n->inputs[0]].cols;
        ampx_status st =
            gemm2d(t, 0, 0, r, cols, in, 0, y_of(t, n->inputs[0]), weight_of(t, w), ref(t, i, T_Y));
        if (st) return st;
        if (n->bias) {
            const param *b  = &t->params[t->w_param[i] + 1];
            ampx_add_args a = {.size        = sizeof a,
                               .broadcast_b = 1,
                               .rows        = r,
                               .cols        = cols,
                               .alpha       = 1,
                               .beta        = 1,
                               .a           = ref(t, i, T_Y),
                               .b           = buf_tensor(b->master, 0, AMPX_F32),
                               .y           = ref(t, i, T_Y)};
            CALL(t, add, &a);
        }
        return AMPX_OK;
    }
    case NODE_ACT: {
        ampx_act_args a = {.size    = sizeof a,
                           .act     = (uint32_t)n->act,
                           .n       = r * cols,
                           .x       = y_of(t, n->inputs[0]),
                           .y_or_dx = ref(t, i, T_Y)};
        CALL(t, act_fwd, &a);
        return AMPX_OK;
    }
    case NODE_LAYERNORM: {
        const param *g        = &t->params[t->w_param[i]];
        ampx_layernorm_args a = {.size    = sizeof a,
                                 .rows    = r,
                                 .cols    = cols,
                                 .eps     = n->eps,
                                 .x       = y_of(t, n->inputs[0]),
                                 .gamma   = buf_tensor(g->master, 0, AMPX_F32),
                                 .beta    = buf_tensor(g[1].master, 0, AMPX_F32),
                                 .mean    = ref(t, i, T_MEAN),
                                 .rstd    = ref(t, i, T_RSTD),
                                 .y_or_dx = ref(t, i, T_Y)};
        CALL(t, layernorm_fwd, &a);
        return AMPX_OK;
    }
    case NODE_ADD: {
        ampx_add_args a = {.size  = sizeof a,
                           .rows  = r,
                           .cols  = cols,
                           .alpha = 1,
                           .beta  = 1,
                           .a     = y_of(t, n->inputs[0]),
                           .b     = y_of(t, n->inputs[1]),
                           .y     = ref(t, i, T_Y)};
        CALL(t, add, &a);
        return AMPX_OK;
    }
    case NODE_LOSS: {
        int lg                   = n->inputs[0];
        ampx_softmax_xent_args a = {.size         = sizeof a,
                                    .ignore_index = m->ignore_index,
                                    .rows         = r,
                                    .cols         = (uint64_t)m->classes,
                                    .grad_scale   = 1.0f / (float)t->A,
                                    .logits       = y_of(t, lg),
                                    .labels       = y_of(t, n->inputs[1]),
                                    .loss = buf_tensor(t->loss_buf, t->loss_offset, AMPX_F32)};
        if (t->training) {
            a.dlogits          = ref(t, lg, T_G);
            a.scalars          = buf_tensor(t->scalars, 0, AMPX_F32);
            t->has_contrib[lg] = 1;
        }
        CALL(t, softmax_xent, &a);
        return AMPX_OK;
    }
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Backward: each node adds its inputs' gradients. The first contribution to a gradient
// writes it; later ones accumulate (GEMM with beta 1, or through the node's temp and ADD).

/* Where node i's backward writes the gradient of input `in`: the gradient itself when this
 * is its first contribution, else node i's temp (*accumulate set: ADD it afterwards). */
static ampx_tensor dx_target(ampx_trainer *t, int i, int in, int *accumulate) {
    *accumulate        = t->has_contrib[in];
    t->has_contrib[in] = 1;
    return *accumulate ? ref(t, i, T_TEMP) : ref(t, in, T_G);
}

static ampx_status accumulate_into(ampx_trainer *t, int i, int in) {
    uint64_t n      = (uint64_t)t->rows * (uint64_t)t->m->nodes[in].cols;
    ampx_add_args a = {.size  = sizeof a,
                       .rows  = 1,
                       .cols  = n,
                       .alpha = 1,
                       .beta  = 1,
                       .a     = ref(t, in, T_G),
                       .b     = ref(t, i, T_TEMP),
                       .y     = ref(t, in, T_G)};
    CALL(t, add, &a);
    return AMPX_OK;
}

static ampx_status backward_node(ampx_trainer *t, int i) {
    const ampx_model *m = t->m;
    const node *n       = &m->nodes[i];
    uint64_t r = (uint64_t)t->rows, cols = (uint64_t)n->cols;
    int in = n->inputs[0], acc = 0;
    uint32_t first_micro = t->micro == 0;
    ampx_status st;
    if (!t->need_grad[i] || n->kind == NODE_LOSS || n->kind == NODE_INPUT || n->kind == NODE_LABELS)
        return AMPX_OK;
    switch (n->kind) {
    case NODE_DENSE: {
        param *w      = &t->params[t->w_param[i]];
        uint64_t in_c = (uint64_t)m->nodes[in].cols;
        /* dW = x^T dy, accumulated in f32 across micro-batches */
        st = gemm2d(t, 1, 0, in_c, cols, r, !first_micro, y_of(t, in), ref(t, i, T_G),
                    buf_tensor(w->grad, 0, AMPX_F32));
        if (st) return st;
        if (n->bias) {
            ampx_bias_grad_args b = {.size       = sizeof b,
                                     .accumulate = !first_micro,
                                     .rows       = r,
                                     .cols       = cols,
                                     .dy         = ref(t, i, T_G),
                                     .db         = buf_tensor(w[1].grad, 0, AMPX_F32)};
            CALL(t, bias_grad, &b);
        }
        if (t->need_grad[in]) {
            /* dx = dy W^T; a second contribution accumulates in the GEMM itself */
            int again          = t->has_contrib[in];
            t->has_contrib[in] = 1;
            st = gemm2d(t, 0, 1, r, in_c, cols, again, ref(t, i, T_G), weight_of(t, w),
                        ref(t, in, T_G));
            if (st) return st;
        }
        return AMPX_OK;
    }
    case NODE_ACT: {
        if (!t->need_grad[in]) return AMPX_OK;
        ampx_act_args a = {.size = sizeof a,
                           .act  = (uint32_t)n->act,
                           .n    = r * cols,
                           .x    = y_of(t, in),
                           .dy   = ref(t, i, T_G)};
        a.y_or_dx       = dx_target(t, i, in, &acc);
        CALL(t, act_bwd, &a);
        return acc ? accumulate_into(t, i, in) : AMPX_OK;
    }
    case NODE_CAST: {
        if (!t->need_grad[in]) return AMPX_OK;
        ampx_cast_args a = {.size = sizeof a, .n = r * cols, .src = ref(t, i, T_G)};
        a.dst            = dx_target(t, i, in, &acc);
        CALL(t, cast, &a);
        return acc ? accumulate_into(t, i, in) : AMPX_OK;
    }
    case NODE_LAYERNORM: {
        param *g              = &t->params[t->w_param[i]];
        ampx_layernorm_args a = {.size       = sizeof a,
                                 .accumulate = !first_micro,
                                 .rows       = r,
                                 .cols       = cols,
                                 .eps        = n->eps,
                                 .x          = y_of(t, in),
                                 .gamma      = buf_tensor(g->master, 0, AMPX_F32),
                                 .mean       = ref(t, i, T_MEAN),
                                 .rstd       = ref(t, i, T_RSTD),
                                 .dy         = ref(t, i, T_G),
                                 .dgamma     = buf_tensor(g->grad, 0, AMPX_F32),
                                 .dbeta      = buf_tensor(g[1].grad, 0, AMPX_F32)};
        if (t->need_grad[in])
            a.y_or_dx = dx_target(t, i, in, &acc);
        else
            a.y_or_dx = ref(t, i, T_TEMP); /* the op always writes dx */
        CALL(t, layernorm_bwd, &a);
        return acc ? accumulate_into(t, i, in) : AMPX_OK;
    }
    case NODE_ADD:
        for (int k = 0; k < 2; k++) {
            int src = n->inputs[k];
            if (!t->need_grad[src]) continue;
            if (!t->has_contrib[src]) {
                t->has_contrib[src] = 1;
                ampx_cast_args a    = {.size = sizeof a,
                                       .n    = r * cols,
                                       .src  = ref(t, i, T_G),
                                       .dst  = ref(t, src, T_G)};
                CALL(t, cast, &a);
            } else {
                ampx_add_args a = {.size  = sizeof a,
                                   .rows  = 1,
                                   .cols  = r * cols,
                                   .alpha = 1,
                                   .beta  = 1,
                                   .a     = ref(t, src, T_G),
                                   .b     = ref(t, i, T_G),
                                   .y     = ref(t, src, T_G)};
                CALL(t, add, &a);
            }
        }
        return AMPX_OK;
    default: break;
    }
    return AMPX_OK;
}

/* One micro-batch: forward (and, training, backward). The schedule position advances per
 * node so that the plan sees each tensor's live interval. */
static ampx_status micro_batch(ampx_trainer *t) {
    const ampx_model *m = t->m;
    ampx_status st;
    memset(t->has_contrib, 0, sizeof t->has_contrib);
    t->time = 0;
    for (int i = 0; i < m->n_nodes; i++, t->time++)
        if ((st = forward_node(t, i))) return st;
    if (!t->training) return AMPX_OK;
    for (int i = m->n_nodes - 1; i >= 0; i--, t->time++)
        if ((st = backward_node(t, i))) return st;
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Planning: live intervals from a dry run, then first-fit placement, largest first.

static int by_size_desc(const void *a, const void *b, void *items) {
    const plan_item *p = items;
    uint64_t sa = p[*(const int *)a].bytes, sb = p[*(const int *)b].bytes;
    return sa < sb ? 1 : sa > sb ? -1 : *(const int *)a - *(const int *)b;
}

static void plan_buffers(ampx_trainer *t) {
    int n = t->m->n_nodes * T_PER_NODE;
    for (int i = 0; i < n; i++)
        t->plan[i] = (plan_item){.first = -1};
    t->planning = 1;
    t->training = 1;
    t->rows     = t->B;
    t->micro    = 1; /* the general case: accumulating */
    micro_batch(t);
    t->micro    = 0;
    t->planning = 0;
    int order[MODEL_MAX_NODES * T_PER_NODE], k = 0;
    for (int i = 0; i < n; i++)
        if (t->plan[i].first >= 0) order[k++] = i;
    qsort_r(order, (size_t)k, sizeof order[0], by_size_desc, t->plan);
    t->arena_bytes = t->unplanned_bytes = 0;
    for (int a = 0; a < k; a++) {
        plan_item *p   = &t->plan[order[a]];
        uint64_t bytes = (p->bytes + ALIGN - 1) / ALIGN * ALIGN, off = 0;
        t->unplanned_bytes += bytes;
        for (int moved = 1; moved;) { /* first fit among placed items that overlap in time */
            moved = 0;
            for (int b = 0; b < a; b++) {
                const plan_item *q = &t->plan[order[b]];
                uint64_t qb        = (q->bytes + ALIGN - 1) / ALIGN * ALIGN;
                int in_time        = !(q->last < p->first || p->last < q->first);
                if (in_time && off < q->offset + qb && q->offset < off + bytes) {
                    off   = q->offset + qb;
                    moved = 1;
                }
            }
        }
        p->offset = off;
        if (off + bytes > t->arena_bytes) t->arena_bytes = off + bytes;
    }
}

// ---------------------------------------------------------------------------------------
// Parameters

static void init_values(float *v, uint64_t n, init_kind kind, float std, uint64_t fan_in,
                        uint64_t fan_out, uint64_t seed) {
    double limit = kind == INIT_GLOROT_UNIFORM ? sqrt(6.0 / (double)(fan_in + fan_out))
                                               : sqrt(6.0 / (double)fan_in);
    for (uint64_t i = 0; i < n; i++) {
        double u = data_uniform(seed, i), z;
        switch (kind) {
        case INIT_GLOROT_UNIFORM:
        case INIT_HE_UNIFORM: v[i] = (float)((2 * u - 1) * limit); break;
        case INIT_HE_NORMAL:
        case INIT_NORMAL:
            z    = sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * data_uniform(seed + 7, i));
            v[i] = (float)(z * (kind == INIT_NORMAL ? std : sqrt(2.0 / (double)fan_in)));
            break;
        case INIT_ZEROS: v[i] = 0; break;
        case INIT_ONES: v[i] = 1; break;
        }
    }
}

static ampx_status alloc_zero(ampx_trainer *t, uint64_t bytes, ampx_buffer **out) {
    ampx_status st = check(t, t->ifc->buffer_alloc(t->ctx, bytes ? bytes : 4, out), "buffer_alloc");
    if (st) return st;
    return check(t, t->ifc->buffer_fill(t->ctx, *out, 0, bytes ? bytes : 4, 0, 4), "buffer_fill");
}

static ampx_status add_param(ampx_trainer *t, int node_i, const char *suffix, uint64_t d0,
                             uint64_t d1, init_kind kind, float std, uint64_t fan_in,
                             uint64_t fan_out, float wd, ampx_dtype copy_dtype) {
    const ampx_model *m = t->m;
    param *p            = &t->params[t->n_params];
    snprintf(p->name, sizeof p->name, "%s.%s", m->nodes[node_i].name, suffix);
    p->node        = node_i;
    p->dim0        = d0;
    p->dim1        = d1;
    p->n           = d1 ? d0 * d1 : d0;
    p->wd          = wd;
    p->copy_dtype  = copy_dtype;
    uint64_t bytes = p->n * 4;
    ampx_status st;
    if ((st = alloc_zero(t, bytes, &p->master)) || (st = alloc_zero(t, bytes, &p->grad))) return st;
    if (m->opt.kind == OPT_ADAMW || m->opt.momentum != 0)
        if ((st = alloc_zero(t, bytes, &p->s1))) return st;
    if (m->opt.kind == OPT_ADAMW && (st = alloc_zero(t, bytes, &p->s2))) return st;
    if (copy_dtype != AMPX_F32 && (st = alloc_zero(t, p->n * 2, &p->copy))) return st;
    float *v = malloc(bytes + 4);
    if (!v) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", p->name);
    init_values(v, p->n, kind, std, fan_in, fan_out,
                m->train.seed * 1000003ull + (uint64_t)t->n_params * 7919ull + 1);
    st = check(t, t->ifc->buffer_write(t->ctx, p->master, 0, v, bytes), "buffer_write");
    free(v);
    if (st) return st;
    if (copy_dtype != AMPX_F32) {
        ampx_cast_args c = {.size = sizeof c,
                            .n    = p->n,
                            .src  = buf_tensor(p->master, 0, AMPX_F32),
                            .dst  = buf_tensor(p->copy, 0, copy_dtype)};
        if ((st = check(t, t->ops->cast(t->ctx, &c), "cast"))) return st;
    }
    t->n_params++;
    return AMPX_OK;
}

static ampx_status create_params(ampx_trainer *t) {
    const ampx_model *m = t->m;
    ampx_status st;
    for (int i = 0; i < m->n_nodes; i++) {
        const node *n = &m->nodes[i];
        t->w_param[i] = -1;
        if (n->kind == NODE_DENSE) {
            uint64_t in = (uint64_t)m->nodes[n->inputs[0]].cols, out = (uint64_t)n->cols;
            t->w_param[i] = t->n_params;
            if ((st = add_param(t, i, "weight", in, out, n->init_w, n->init_std, in, out,
                                m->opt.weight_decay, n->dtype)))
                return st;
            if (n->bias && (st = add_param(t, i, "bias", out, 0, n->init_b, n->init_std, in, out, 0,
                                           AMPX_F32)))
                return st;
        } else if (n->kind == NODE_LAYERNORM) {
            uint64_t c    = (uint64_t)n->cols;
            t->w_param[i] = t->n_params;
            if ((st = add_param(t, i, "gamma", c, 0, n->init_w, n->init_std, c, c, 0, AMPX_F32)) ||
                (st = add_param(t, i, "beta", c, 0, n->init_b, n->init_std, c, c, 0, AMPX_F32)))
                return st;
        }
    }
    /* need_grad: the node has parameters, or an input that needs one */
    for (int i = 0; i < m->n_nodes; i++) {
        const node *n   = &m->nodes[i];
        t->need_grad[i] = t->w_param[i] >= 0;
        for (int k = 0; k < n->n_inputs; k++)
            t->need_grad[i] |= t->need_grad[n->inputs[k]];
        if (n->kind == NODE_LOSS) t->need_grad[i] = 0;
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Creation

void init_scalars(const ampx_model *m, ampx_scalars *s) {
    const scaler_config *c    = &m->scaler;
    const optimizer_config *o = &m->opt;
    memset(s, 0, sizeof *s);
    s->scale                  = c->mode == AMPX_SCALER_NONE ? 1.0f : c->init_scale;
    s->hysteresis_left        = c->hysteresis;
    s->mode                   = c->mode;
    s->growth_factor          = c->growth_factor;
    s->backoff_factor         = c->backoff_factor;
    s->growth_interval        = c->growth_interval;
    s->hysteresis             = c->hysteresis;
    s->consecutive_hysteresis = c->consecutive_hysteresis;
    s->min_scale              = c->min_scale;
    s->max_scale              = c->max_scale;
    s->on_min_scale_error     = c->on_min_scale_error;
    s->max_consecutive_skips  = c->max_consecutive_skips;
    s->lr_schedule            = o->schedule;
    s->lr_base                = o->lr;
    s->lr_min                 = o->min_lr;
    s->warmup_steps           = o->warmup_steps;
    s->decay_steps            = o->decay_steps ? o->decay_steps : o->file_steps;
    s->lr                     = ampx_scheduled_lr(s, 0);
}

static ampx_status upload(ampx_trainer *t, ampx_buffer **b, const void *src, uint64_t bytes) {
    ampx_status st = check(t, t->ifc->buffer_alloc(t->ctx, bytes ? bytes : 4, b), "buffer_alloc");
    if (st || !bytes) return st;
    return check(t, t->ifc->buffer_write(t->ctx, *b, 0, src, bytes), "buffer_write");
}

ampx_status ampx_trainer_create(ampx_model *m, ampx_backend *be, ampx_trainer **out, char *err,
                                size_t err_cap) {
    *out            = NULL;
    ampx_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, err_cap, "out of memory");
        return AMPX_ERR_NO_MEMORY;
    }
    t->m               = m;
    t->be              = be;
    t->ifc             = ampx_backend_iface_of(be);
    t->ops             = t->ifc->ops;
    t->ctx             = ampx_backend_context(be);
    t->B               = m->train.batch;
    t->A               = m->train.accumulate;
    t->K               = m->train.log_every;
    t->inject_step     = -1;
    t->epoch_on_device = -1;
    ampx_status st     = AMPX_ERR_INVALID;
    if (data_load(m, &t->data, t->error, sizeof t->error)) goto fail;
    if (t->data.n_train < t->B) {
        tr_fail(t, st, "%s: %lld training examples are fewer than one batch of %lld", m->file,
                (long long)t->data.n_train, (long long)t->B);
        goto fail;
    }
    t->micro_per_epoch = t->data.n_train / t->B;
    uint64_t f         = (uint64_t)t->data.features;
    t->shuffle_x       = malloc(sizeof(float) * (size_t)(t->data.n_train * (int64_t)f));
    t->shuffle_y       = malloc(sizeof(int32_t) * (size_t)t->data.n_train);
    if (!t->shuffle_x || !t->shuffle_y) {
        st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the training set");
        goto fail;
    }
    /* Every op the plan uses must be there (a NULL slot is unsupported). */
    static const uint32_t needed[] = {
        AMPX_OP_GEMM,          AMPX_OP_CAST,        AMPX_OP_ADD,           AMPX_OP_BIAS_GRAD,
        AMPX_OP_ACT_FWD,       AMPX_OP_ACT_BWD,     AMPX_OP_SOFTMAX_XENT,  AMPX_OP_LAYERNORM_FWD,
        AMPX_OP_LAYERNORM_BWD, AMPX_OP_SUM_SQUARES, AMPX_OP_UNSCALE_CHECK, AMPX_OP_SCALER_UPDATE,
        AMPX_OP_SGD,           AMPX_OP_ADAMW};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (!ampx_backend_op_slot(be, needed[i])) {
            st = tr_fail(t, AMPX_ERR_UNSUPPORTED, "backend %s has no %s op, which training needs",
                         t->ifc->name, ampx_op_name(needed[i]));
            goto fail;
        }
    if ((st = create_params(t))) goto fail;
    plan_buffers(t);
    t->slot_bytes =
        (SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)t->n_params + ALIGN - 1) / ALIGN * ALIGN;
    ampx_scalars s;
    init_scalars(m, &s);
    if ((st = alloc_zero(t, t->arena_bytes, &t->arena)) ||
        (st = alloc_zero(t, t->slot_bytes * (uint64_t)t->K, &t->ring)) ||
        (st = alloc_zero(t, 64, &t->eval_loss)) || (st = upload(t, &t->scalars, &s, sizeof s)) ||
        (st = alloc_zero(t, (uint64_t)t->data.n_train * f * 4, &t->x_train)) ||
        (st = alloc_zero(t, (uint64_t)t->data.n_train * 4, &t->y_train)) ||
        (st = upload(t, &t->x_test, t->data.x_test, (uint64_t)t->data.n_test * f * 4)) ||
        (st = upload(t, &t->y_test, t->data.y_test, (uint64_t)t->data.n_test * 4)))
        goto fail;
    t->t_last_flush = now_ms();
    *out            = t;
    return AMPX_OK;
fail:
    snprintf(err, err_cap, "%s", t->error);
    ampx_trainer_free(t);
    return st ? st : AMPX_ERR_INVALID;
}

void ampx_trainer_free(ampx_trainer *t) {
    if (!t) return;
    if (t->ctx) t->ifc->synchronize(t->ctx);
    ampx_buffer **bufs[] = {&t->arena,   &t->ring,    &t->eval_loss, &t->scalars,
                            &t->x_train, &t->y_train, &t->x_test,    &t->y_test};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) t->ifc->buffer_free(t->ctx, *bufs[i]);
    for (int i = 0; i < t->n_params; i++) {
        param *p          = &t->params[i];
        ampx_buffer *pb[] = {p->master, p->grad, p->s1, p->s2, p->copy};
        for (int k = 0; k < 5; k++)
            if (pb[k]) t->ifc->buffer_free(t->ctx, pb[k]);
    }
    data_free(&t->data);
    free(t->shuffle_x);
    free(t->shuffle_y);
    free(t);
}

// ---------------------------------------------------------------------------------------
// Steps

/* Puts epoch e's shuffle of the training set on the device (one write per epoch). */
static ampx_status load_epoch(ampx_trainer *t, int64_t e) {
    if (t->epoch_on_device == e) return AMPX_OK;
    int64_t n = t->data.n_train, f = t->data.features;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t seed = t->m->train.seed * 0x9E3779B97F4A7C15ull + (uint64_t)e * 0x2545F4914F6CDD1Dull;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(data_uniform(seed, (uint64_t)i) * (double)(i + 1));
        int64_t x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(t->shuffle_x + i * f, t->data.x_train + perm[i] * f, sizeof(float) * (size_t)f);
        t->shuffle_y[i] = t->data.y_train[perm[i]];
    }
    free(perm);
    ampx_status st =
        check(t, t->ifc->buffer_write(t->ctx, t->x_train, 0, t->shuffle_x, (uint64_t)(n * f) * 4),
              "buffer_write");
    if (!st)
        st = check(t, t->ifc->buffer_write(t->ctx, t->y_train, 0, t->shuffle_y, (uint64_t)n * 4),
                   "buffer_write");
    if (!st) t->epoch_on_device = e;
    return st;
}

static ampx_status select_micro(ampx_trainer *t, int64_t global_micro) {
    ampx_status st = load_epoch(t, global_micro / t->micro_per_epoch);
    t->row0        = (global_micro % t->micro_per_epoch) * t->B;
    t->rows        = t->B;
    t->x_src       = t->x_train;
    t->y_src       = t->y_train;
    return st;
}

static ampx_tensor_list grad_list(ampx_trainer *t, ampx_tensor *ts, uint64_t *ns) {
    for (int i = 0; i < t->n_params; i++) {
        ts[i] = buf_tensor(t->params[i].grad, 0, AMPX_F32);
        ns[i] = t->params[i].n;
    }
    return (ampx_tensor_list){.count = (uint32_t)t->n_params, .tensors = ts, .n_elems = ns};
}

static ampx_status optimizer_step(ampx_trainer *t, ampx_tensor gsq) {
    const optimizer_config *o = &t->m->opt;
    ampx_tensor pt[TR_MAX_PARAMS], gt[TR_MAX_PARAMS], s1[TR_MAX_PARAMS], s2[TR_MAX_PARAMS],
        cp[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    float wd[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        pt[i]    = buf_tensor(p->master, 0, AMPX_F32);
        gt[i]    = buf_tensor(p->grad, 0, AMPX_F32);
        s1[i]    = buf_tensor(p->s1, 0, AMPX_F32);
        s2[i]    = buf_tensor(p->s2, 0, AMPX_F32);
        cp[i]    = p->copy_dtype != AMPX_F32 ? buf_tensor(p->copy, 0, p->copy_dtype)
                                             : buf_tensor(NULL, 0, AMPX_BF16);
        ns[i]    = p->n;
        wd[i]    = p->wd;
    }
    ampx_tensor_list params = {.count = (uint32_t)t->n_params, .tensors = pt, .n_elems = ns};
    uint64_t seed           = ampx_hash32(t->m->train.seed, (uint64_t)t->step) * 0x100000001ull;
    ampx_tensor sc          = buf_tensor(t->scalars, 0, AMPX_F32);
    if (o->kind == OPT_ADAMW) {
        ampx_adamw_args a = {.size            = sizeof a,
                             .beta1           = o->beta1,
                             .beta2           = o->beta2,
                             .eps             = o->eps,
                             .weight_decay    = o->weight_decay,
                             .max_grad_norm   = o->clip_grad_norm,
                             .wd              = wd,
                             .params          = params,
                             .grads           = gt,
                             .m               = s1,
                             .v               = s2,
                             .copies          = cp,
                             .grad_sq_sum     = gsq,
                             .scalars         = sc,
                             .stochastic_copy = (uint32_t)o->stochastic_rounding,
                             .seed            = seed};
        return check(t, t->ops->adamw(t->ctx, &a), "adamw");
    }
    ampx_sgd_args a = {.size            = sizeof a,
                       .nesterov        = (uint32_t)o->nesterov,
                       .momentum        = o->momentum,
                       .dampening       = o->dampening,
                       .weight_decay    = o->weight_decay,
                       .max_grad_norm   = o->clip_grad_norm,
                       .wd              = wd,
                       .params          = params,
                       .grads           = gt,
                       .momentum_buf    = o->momentum != 0 ? s1 : NULL,
                       .copies          = cp,
                       .grad_sq_sum     = gsq,
                       .scalars         = sc,
                       .stochastic_copy = (uint32_t)o->stochastic_rounding,
                       .seed            = seed};
    return check(t, t->ops->sgd(t->ctx, &a), "sgd");
}

static ampx_status one_step(ampx_trainer *t) {
    ampx_status st;
    uint64_t slot = (uint64_t)((t->step - t->ring_first) % t->K) * t->slot_bytes;
    t->training   = 1;
    t->loss_buf   = t->ring;
    for (int64_t a = 0; a < t->A; a++) {
        t->micro       = (int)a;
        t->loss_offset = slot + SLOT_LOSS + 4 * (uint64_t)a;
        if ((st = select_micro(t, t->step * t->A + a)) || (st = micro_batch(t))) return st;
    }
    if (t->step + 1 == t->inject_step) {
        uint32_t inf = 0x7F800000u;
        if ((st = check(t,
                        t->ifc->buffer_fill(t->ctx, t->params[t->inject_param].grad, 0, 4, inf, 4),
                        "buffer_fill")))
            return st;
    }
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list grads    = grad_list(t, ts, ns);
    ampx_tensor gsq           = buf_tensor(t->ring, slot + SLOT_GSQ, AMPX_F32);
    ampx_unscale_check_args u = {
        .size      = sizeof u,
        .flag_base = 0,
        .grads     = grads,
        .flags     = buf_tensor(t->ring, slot + SLOT_LOSS + 4 * (uint64_t)t->A, AMPX_I32),
        .scalars   = buf_tensor(t->scalars, 0, AMPX_F32)};
    ampx_sum_squares_args q   = {.size = sizeof q, .x = grads, .out = gsq};
    ampx_scaler_update_args v = {.size = sizeof v, .scalars = u.scalars};
    if ((st = check(t, t->ops->unscale_check(t->ctx, &u), "unscale_check")) ||
        (st = check(t, t->ops->sum_squares(t->ctx, &q), "sum_squares")) ||
        (st = optimizer_step(t, gsq)) ||
        (st = check(t, t->ops->scaler_update(t->ctx, &v), "scaler_update")))
        return st;
    st = check(t,
               t->ifc->buffer_copy(t->ctx, t->ring, slot + SLOT_SCALARS, t->scalars, 0,
                                   sizeof(ampx_scalars)),
               "buffer_copy");
    if (!st) t->step++;
    return st;
}

/* Reads the records of the steps since the last flush and hands them to record(). */
static ampx_status flush(ampx_trainer *t, ampx_record_fn record, void *user, int *stop) {
    int64_t n = t->step - t->ring_first;
    if (n <= 0) return AMPX_OK;
    unsigned char *buf = malloc((size_t)(t->slot_bytes * (uint64_t)n));
    if (!buf) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st =
        check(t, t->ifc->buffer_read(t->ctx, t->ring, 0, buf, t->slot_bytes * (uint64_t)n),
              "buffer_read");
    double now = now_ms(), per = (now - t->t_last_flush) / (double)n;
    t->t_last_flush = now;
    for (int64_t i = 0; !st && i < n; i++) {
        const unsigned char *s = buf + (uint64_t)i * t->slot_bytes;
        ampx_scalars sc;
        float gsq, loss = 0;
        memcpy(&sc, s + SLOT_SCALARS, sizeof sc);
        memcpy(&gsq, s + SLOT_GSQ, 4);
        double lsum = 0;
        for (int64_t a = 0; a < t->A; a++) {
            memcpy(&loss, s + SLOT_LOSS + 4 * a, 4);
            lsum += loss;
        }
        char names[2048] = "";
        if (sc.last_found_inf)
            for (int p = 0; p < t->n_params; p++) {
                int32_t flag;
                memcpy(&flag, s + SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)p, 4);
                size_t len = strlen(names);
                if (flag && len + strlen(t->params[p].name) + 8 < sizeof names)
                    snprintf(names + len, sizeof names - len, "%s%s.grad", len ? ", " : "",
                             t->params[p].name);
            }
        ampx_step_record r = {.step      = t->ring_first + i + 1,
                              .loss      = lsum / (double)t->A,
                              .grad_norm = sqrt((double)gsq),
                              .scale     = sc.scale,
                              .lr        = sc.lr,
                              .skipped   = sc.last_found_inf,
                              .time_ms   = per,
                              .overflow  = names};
        if (record && record(user, &r)) *stop = 1;
        if (sc.stop_reason && !*stop) {
            *stop = 2;
            if (sc.stop_reason & AMPX_STOP_MIN_SCALE)
                st = tr_fail(t, AMPX_ERR_INVALID,
                             "step %lld: the loss scale reached min_scale %g and gradients still "
                             "overflow (on_min_scale = error): the model diverges, or the policy "
                             "needs more f32",
                             (long long)r.step, (double)sc.min_scale);
            else
                st = tr_fail(t, AMPX_ERR_INVALID,
                             "step %lld: more than %d consecutive steps skipped "
                             "(max_consecutive_skips): training does not recover",
                             (long long)r.step, sc.max_consecutive_skips);
        }
    }
    free(buf);
    t->ring_first = t->step;
    return st;
}

ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record, void *user) {
    int stop        = 0;
    ampx_status st  = AMPX_OK;
    t->ring_first   = t->step;
    t->t_last_flush = now_ms();
    while (t->step < until && !stop) {
        if ((st = one_step(t))) return st;
        if (t->step - t->ring_first == t->K || t->step == until)
            if ((st = flush(t, record, user, &stop))) return st;
    }
    return st;
}

ampx_status ampx_trainer_evaluate(ampx_trainer *t, ampx_eval_result *out) {
    const ampx_model *m = t->m;
    int64_t n = t->data.n_test, correct = 0;
    double loss_sum       = 0;
    uint64_t c            = (uint64_t)m->classes;
    ampx_dtype ld         = m->nodes[m->logits].dtype;
    unsigned char *logits = malloc((size_t)((uint64_t)t->B * c * 4));
    if (!logits) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    t->training    = 0;
    t->loss_buf    = t->eval_loss;
    t->loss_offset = 0;
    t->x_src       = t->x_test;
    t->y_src       = t->y_test;
    for (int64_t r0 = 0; r0 < n && !st; r0 += t->B) {
        t->row0 = r0;
        t->rows = n - r0 < t->B ? n - r0 : t->B;
        if ((st = micro_batch(t))) break;
        ampx_tensor lt = ref(t, m->logits, T_Y);
        float loss;
        if ((st = check(t,
                        t->ifc->buffer_read(t->ctx, lt.buf, lt.offset, logits,
                                            (uint64_t)t->rows * c * dsize(ld)),
                        "buffer_read")) ||
            (st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, &loss, 4), "buffer_read")))
            break;
        loss_sum += (double)loss * (double)t->rows;
        for (int64_t r = 0; r < t->rows; r++) {
            int64_t best = 0;
            float bv     = -INFINITY;
            for (uint64_t j = 0; j < c; j++) {
                uint64_t k = (uint64_t)r * c + j;
                float v    = ld == AMPX_F32    ? ((float *)logits)[k]
                             : ld == AMPX_BF16 ? ampx_bf16_to_f32(((uint16_t *)logits)[k])
                                               : ampx_f16_to_f32(((uint16_t *)logits)[k]);
                if (v > bv) bv = v, best = (int64_t)j;
            }
            correct += best == t->data.y_test[r0 + r];
        }
    }
    free(logits);
    t->training = 1;
    if (st) return st;
    out->examples = n;
    out->accuracy = n ? (double)correct / (double)n : 0;
    out->loss     = n ? loss_sum / (double)n : 0;
    return AMPX_OK;
}

int64_t ampx_trainer_step(const ampx_trainer *t) {
    return t->step;
}
const char *ampx_trainer_error(const ampx_trainer *t) {
    return t->error;
}

ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out) {
    return check(t, t->ifc->buffer_read(t->ctx, t->scalars, 0, out, sizeof *out), "buffer_read");
}

void ampx_trainer_memory(const ampx_trainer *t, uint64_t *peak, uint64_t *unplanned) {
    *peak      = t->arena_bytes;
    *unplanned = t->unplanned_bytes;
}

int ampx_trainer_n_params(const ampx_trainer *t) {
    return t->n_params;
}
const char *ampx_trainer_param_name(const ampx_trainer *t, int i) {
    return i >= 0 && i < t->n_params ? t->params[i].name : NULL;
}
uint64_t ampx_trainer_param_size(const ampx_trainer *t, int i) {
    return i >= 0 && i < t->n_params ? t->params[i].n : 0;
}

static ampx_buffer *param_buf(ampx_trainer *t, int i, int what) {
    if (i < 0 || i >= t->n_params) return NULL;
    param *p = &t->params[i];
    return what == 0   ? p->master
           : what == 1 ? p->grad
           : what == 2 ? p->s1
           : what == 3 ? p->s2
                       : NULL;
}

ampx_status ampx_trainer_get(ampx_trainer *t, int i, int what, float *host) {
    ampx_buffer *b = param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    return check(t, t->ifc->buffer_read(t->ctx, b, 0, host, t->params[i].n * 4), "buffer_read");
}

ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host) {
    ampx_buffer *b = param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    ampx_status st =
        check(t, t->ifc->buffer_write(t->ctx, b, 0, host, t->params[i].n * 4), "buffer_write");
    param *p = &t->params[i];
    if (!st && what == 0 && p->copy_dtype != AMPX_F32) {
        ampx_cast_args c = {.size = sizeof c,
                            .n    = p->n,
                            .src  = buf_tensor(p->master, 0, AMPX_F32),
                            .dst  = buf_tensor(p->copy, 0, p->copy_dtype)};
        st               = check(t, t->ops->cast(t->ctx, &c), "cast");
    }
    return st;
}

ampx_status ampx_trainer_gradients(ampx_trainer *t, int64_t first, double *loss) {
    if (first < 0 || first + t->B > t->data.n_train)
        return tr_fail(t, AMPX_ERR_INVALID, "rows %lld..%lld are outside the training set",
                       (long long)first, (long long)(first + t->B));
    ampx_status st = load_epoch(t, 0);
    if (st) return st;
    /* unshuffled rows: write them over epoch 0's copy, which is reloaded on the next step */
    uint64_t f = (uint64_t)t->data.features;
    if ((st =
             check(t,
                   t->ifc->buffer_write(t->ctx, t->x_train, 0, t->data.x_train + first * (int64_t)f,
                                        (uint64_t)t->B * f * 4),
                   "buffer_write")) ||
        (st = check(t,
                    t->ifc->buffer_write(t->ctx, t->y_train, 0, t->data.y_train + first,
                                         (uint64_t)t->B * 4),
                    "buffer_write")))
        return st;
    t->epoch_on_device = -1;
    t->training        = 1;
    t->micro           = 0;
    t->loss_buf        = t->eval_loss;
    t->loss_offset     = 0;
    t->x_src           = t->x_train;
    t->y_src           = t->y_train;
    t->row0            = 0;
    t->rows            = t->B;
    int64_t saved_a    = t->A;
    t->A               = 1;
    st                 = micro_batch(t);
    t->A               = saved_a;
    float l            = 0;
    if (!st) st = check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, &l, 4), "buffer_read");
    *loss = l;
    return st;
}

void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int which) {
    t->inject_step  = step;
    t->inject_param = which < 0 || which >= t->n_params ? 0 : which;
}
