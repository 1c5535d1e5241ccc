/* accepts.c — whether a backend takes one call as it would be issued (call.h's call_accepts):
 * the op's slot, then supports() with the dtypes of the call's own tensors in the order of
 * the op's heading (backend_args.h) and its shape class. A list op (the AMP and optimizer
 * ops over many tensors) is asked once per distinct dtype of the list. */
#include <string.h>

#include "ampx/dtype.h"
#include "backend/call.h"

typedef struct ask {
    const ampx_backend *be;
    uint32_t op, shape_class;
} ask;

static int yes(const ask *q, const ampx_dtype *dt, uint32_t n) {
    const ampx_backend_iface *ifc = ampx_backend_iface_of(q->be);
    return ifc->supports(ampx_backend_context(q->be), q->op, dt, n, q->shape_class) != 0;
}

/* Each distinct dtype of n tensors (ts, or *ps[i] when ts is NULL). */
static int each(const ask *q, const ampx_tensor *ts, uint32_t n) {
    uint32_t seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        ampx_dtype d = ts[i].dtype;
        if (d < 32 && seen >> d & 1) continue;
        if (d < 32) seen |= 1u << d;
        if (!yes(q, &d, 1)) return 0;
    }
    return 1;
}

static int gemm_epi(const ampx_gemm_args *g) {
    return g->size >= sizeof *g &&
           (g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf || g->bias_grad.buf);
}

#define D2(T, a, b)                                                                                \
    {                                                                                              \
        const T *x_ = args;                                                                        \
        dt[0] = x_->a.dtype, dt[1] = x_->b.dtype;                                                  \
        return 2;                                                                                  \
    }
#define D3(T, a, b, c)                                                                             \
    {                                                                                              \
        const T *x_ = args;                                                                        \
        dt[0] = x_->a.dtype, dt[1] = x_->b.dtype, dt[2] = x_->c.dtype;                             \
        return 3;                                                                                  \
    }

/* The dtypes supports() gets for the ops of ABI 1.0 with fixed tensors: their count, or -1. */
static int dtypes_v1(uint32_t op, const void *args, ampx_dtype *dt) {
    switch (op) {
    case AMPX_OP_CAST: D2(ampx_cast_args, src, dst)
    case AMPX_OP_ADD: D3(ampx_add_args, a, b, y)
    case AMPX_OP_MUL: D3(ampx_mul_args, a, b, y)
    case AMPX_OP_SCALE: D2(ampx_scale_args, x, y)
    case AMPX_OP_BIAS_GRAD: D2(ampx_bias_grad_args, dy, db)
    case AMPX_OP_ACT_FWD: D2(ampx_act_args, x, y_or_dx)
    case AMPX_OP_ACT_BWD: D3(ampx_act_args, x, dy, y_or_dx)
    case AMPX_OP_SOFTMAX_FWD: D2(ampx_softmax_args, x_or_y, y_or_dx)
    case AMPX_OP_SOFTMAX_BWD: D3(ampx_softmax_args, x_or_y, dy, y_or_dx)
    case AMPX_OP_SOFTMAX_XENT: {
        const ampx_softmax_xent_args *a = args;
        dt[0] = a->logits.dtype, dt[1] = a->dlogits.buf ? a->dlogits.dtype : a->logits.dtype;
        return 2;
    }
    case AMPX_OP_LAYERNORM_FWD: D2(ampx_layernorm_args, x, y_or_dx)
    case AMPX_OP_LAYERNORM_BWD: D3(ampx_layernorm_args, x, dy, y_or_dx)
    case AMPX_OP_BATCHNORM_FWD: D2(ampx_batchnorm_args, x, y_or_dx)
    case AMPX_OP_BATCHNORM_BWD: D3(ampx_batchnorm_args, x, dy, y_or_dx)
    case AMPX_OP_EMBEDDING_FWD: D2(ampx_embedding_args, table_or_dtable, y_or_dy)
    case AMPX_OP_EMBEDDING_BWD: D2(ampx_embedding_args, y_or_dy, table_or_dtable)
    case AMPX_OP_REDUCE: D2(ampx_reduce_args, x, y)
    default: return -1;
    }
}

/* The same for the ops of later minors. */
static int dtypes_later(uint32_t op, const void *args, ampx_dtype *dt) {
    switch (op) {
    case AMPX_OP_DROPOUT: D2(ampx_dropout_args, x, y)
    case AMPX_OP_PERMUTE: D2(ampx_permute_args, x, y)
    case AMPX_OP_ATTN_FWD: D2(ampx_attn_args, q, o)
    case AMPX_OP_ATTN_BWD: {
        const ampx_attn_args *a = args;
        dt[0] = a->q.dtype, dt[1] = a->o.dtype, dt[2] = a->d_o.dtype, dt[3] = a->dq.dtype;
        return 4;
    }
    case AMPX_OP_IM2COL:
    case AMPX_OP_POOL2D_FWD: D2(ampx_window_args, x, y)
    case AMPX_OP_COL2IM:
    case AMPX_OP_POOL2D_BWD: D2(ampx_window_args, y, x)
    case AMPX_OP_FP8_QUANTIZE: D2(ampx_fp8_quantize_args, src, dst)
    case AMPX_OP_SCALER_UPDATE:
    case AMPX_OP_FP8_SCALE_UPDATE: return 0;
    default: return -1;
    }
}
#undef D2
#undef D3

/* The list ops: each distinct dtype of their tensors; -1 for any other op. */
static int list_op(const ask *q, const void *args) {
    switch (q->op) {
    case AMPX_OP_SUM_SQUARES: {
        const ampx_sum_squares_args *a = args;
        return each(q, a->x.tensors, a->x.count);
    }
    case AMPX_OP_UNSCALE_CHECK: {
        const ampx_unscale_check_args *a = args;
        return each(q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_GRAD_STATS: {
        const ampx_grad_stats_args *a = args;
        return each(q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_AMP_PASS: {
        const ampx_amp_pass_args *a = args;
        return each(q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_ABS_MAX: {
        const ampx_abs_max_args *a = args;
        return each(q, a->x.tensors, a->x.count);
    }
    case AMPX_OP_SGD: {
        const ampx_sgd_args *a = args;
        return each(q, a->grads, a->params.count);
    }
    case AMPX_OP_ADAMW: {
        const ampx_adamw_args *a = args;
        return each(q, a->grads, a->params.count);
    }
    default: return -1;
    }
}

int call_accepts(const ampx_backend *be, uint32_t op, const void *args) {
    if (op >= AMPX_OP_COUNT || !ampx_backend_op_slot(be, op)) return 0;
    ask q = {.be = be, .op = op, .shape_class = AMPX_SHAPE_ANY};
    if (op == AMPX_OP_GEMM) {
        const ampx_gemm_args *g = args;
        ampx_dtype dt[3]        = {g->a.dtype, g->b.dtype, g->c.dtype};
        if (gemm_epi(g)) return ampx_backend_gemm_epilogue(be, dt);
        return yes(&q, dt, 3);
    }
    if (op == AMPX_OP_GEMM_FP8) {
        const ampx_gemm_args *g = &((const ampx_gemm_fp8_args *)args)->gemm;
        ampx_dtype dt[3]        = {g->a.dtype, g->b.dtype, g->c.dtype};
        if (gemm_epi(g)) q.shape_class = AMPX_SHAPE_GEMM_EPILOGUE;
        return yes(&q, dt, 3);
    }
    int r = list_op(&q, args);
    if (r >= 0) return r;
    ampx_dtype dt[4];
    int n = dtypes_v1(op, args, dt);
    if (n < 0) n = dtypes_later(op, args, dt);
    return n >= 0 && yes(&q, dt, (uint32_t)n);
}
