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

static int two(const ask *q, ampx_tensor a, ampx_tensor b) {
    ampx_dtype dt[2] = {a.dtype, b.dtype};
    return yes(q, dt, 2);
}

static int three(const ask *q, ampx_tensor a, ampx_tensor b, ampx_tensor c) {
    ampx_dtype dt[3] = {a.dtype, b.dtype, c.dtype};
    return yes(q, dt, 3);
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

int call_accepts(const ampx_backend *be, uint32_t op, const void *args) {
    if (op >= AMPX_OP_COUNT || !ampx_backend_op_slot(be, op)) return 0;
    ask q = {.be = be, .op = op, .shape_class = AMPX_SHAPE_ANY};
    switch (op) {
    case AMPX_OP_GEMM: {
        const ampx_gemm_args *g = args;
        ampx_dtype dt[3]        = {g->a.dtype, g->b.dtype, g->c.dtype};
        if (gemm_epi(g)) return ampx_backend_gemm_epilogue(be, dt);
        return yes(&q, dt, 3);
    }
    case AMPX_OP_GEMM_FP8: {
        const ampx_gemm_args *g = &((const ampx_gemm_fp8_args *)args)->gemm;
        if (gemm_epi(g)) q.shape_class = AMPX_SHAPE_GEMM_EPILOGUE;
        return three(&q, g->a, g->b, g->c);
    }
    case AMPX_OP_CAST: {
        const ampx_cast_args *a = args;
        return two(&q, a->src, a->dst);
    }
    case AMPX_OP_ADD: {
        const ampx_add_args *a = args;
        return three(&q, a->a, a->b, a->y);
    }
    case AMPX_OP_MUL: {
        const ampx_mul_args *a = args;
        return three(&q, a->a, a->b, a->y);
    }
    case AMPX_OP_SCALE: {
        const ampx_scale_args *a = args;
        return two(&q, a->x, a->y);
    }
    case AMPX_OP_BIAS_GRAD: {
        const ampx_bias_grad_args *a = args;
        return two(&q, a->dy, a->db);
    }
    case AMPX_OP_ACT_FWD: {
        const ampx_act_args *a = args;
        return two(&q, a->x, a->y_or_dx);
    }
    case AMPX_OP_ACT_BWD: {
        const ampx_act_args *a = args;
        return three(&q, a->x, a->dy, a->y_or_dx);
    }
    case AMPX_OP_SOFTMAX_FWD: {
        const ampx_softmax_args *a = args;
        return two(&q, a->x_or_y, a->y_or_dx);
    }
    case AMPX_OP_SOFTMAX_BWD: {
        const ampx_softmax_args *a = args;
        return three(&q, a->x_or_y, a->dy, a->y_or_dx);
    }
    case AMPX_OP_SOFTMAX_XENT: {
        const ampx_softmax_xent_args *a = args;
        return two(&q, a->logits, a->dlogits.buf ? a->dlogits : a->logits);
    }
    case AMPX_OP_LAYERNORM_FWD: {
        const ampx_layernorm_args *a = args;
        return two(&q, a->x, a->y_or_dx);
    }
    case AMPX_OP_LAYERNORM_BWD: {
        const ampx_layernorm_args *a = args;
        return three(&q, a->x, a->dy, a->y_or_dx);
    }
    case AMPX_OP_BATCHNORM_FWD: {
        const ampx_batchnorm_args *a = args;
        return two(&q, a->x, a->y_or_dx);
    }
    case AMPX_OP_BATCHNORM_BWD: {
        const ampx_batchnorm_args *a = args;
        return three(&q, a->x, a->dy, a->y_or_dx);
    }
    case AMPX_OP_EMBEDDING_FWD: {
        const ampx_embedding_args *a = args;
        return two(&q, a->table_or_dtable, a->y_or_dy);
    }
    case AMPX_OP_EMBEDDING_BWD: {
        const ampx_embedding_args *a = args;
        return two(&q, a->y_or_dy, a->table_or_dtable);
    }
    case AMPX_OP_REDUCE: {
        const ampx_reduce_args *a = args;
        return two(&q, a->x, a->y);
    }
    case AMPX_OP_SUM_SQUARES: {
        const ampx_sum_squares_args *a = args;
        return each(&q, a->x.tensors, a->x.count);
    }
    case AMPX_OP_UNSCALE_CHECK: {
        const ampx_unscale_check_args *a = args;
        return each(&q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_GRAD_STATS: {
        const ampx_grad_stats_args *a = args;
        return each(&q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_AMP_PASS: {
        const ampx_amp_pass_args *a = args;
        return each(&q, a->grads.tensors, a->grads.count);
    }
    case AMPX_OP_ABS_MAX: {
        const ampx_abs_max_args *a = args;
        return each(&q, a->x.tensors, a->x.count);
    }
    case AMPX_OP_SGD: {
        const ampx_sgd_args *a = args;
        return each(&q, a->grads, a->params.count);
    }
    case AMPX_OP_ADAMW: {
        const ampx_adamw_args *a = args;
        return each(&q, a->grads, a->params.count);
    }
    case AMPX_OP_SCALER_UPDATE:
    case AMPX_OP_FP8_SCALE_UPDATE: return yes(&q, NULL, 0);
    case AMPX_OP_DROPOUT: {
        const ampx_dropout_args *a = args;
        return two(&q, a->x, a->y);
    }
    case AMPX_OP_PERMUTE: {
        const ampx_permute_args *a = args;
        return two(&q, a->x, a->y);
    }
    case AMPX_OP_ATTN_FWD: {
        const ampx_attn_args *a = args;
        return two(&q, a->q, a->o);
    }
    case AMPX_OP_ATTN_BWD: {
        const ampx_attn_args *a = args;
        ampx_dtype dt[4]        = {a->q.dtype, a->o.dtype, a->d_o.dtype, a->dq.dtype};
        return yes(&q, dt, 4);
    }
    case AMPX_OP_IM2COL:
    case AMPX_OP_POOL2D_FWD: {
        const ampx_window_args *a = args;
        return two(&q, a->x, a->y);
    }
    case AMPX_OP_COL2IM:
    case AMPX_OP_POOL2D_BWD: {
        const ampx_window_args *a = args;
        return two(&q, a->y, a->x);
    }
    case AMPX_OP_FP8_QUANTIZE: {
        const ampx_fp8_quantize_args *a = args;
        return two(&q, a->src, a->dst);
    }
    default: return 0;
    }
}
