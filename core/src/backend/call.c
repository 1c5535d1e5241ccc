/* call.c — the checked call layer (see call.h). */
#include "backend/call.h"

#include <stdio.h>
#include <string.h>

void call_init(call_ctx *c, ampx_backend *be, char *err, size_t cap) {
    memset(c, 0, sizeof *c);
    c->be  = be;
    c->ifc = ampx_backend_iface_of(be);
    c->ctx = ampx_backend_context(be);
    c->err = err;
    c->cap = cap;
}

ampx_status call_check(call_ctx *c, ampx_status st, const char *what) {
    if (st == AMPX_OK) return st;
    const char *why = ampx_backend_last_error(c->be);
    snprintf(c->err, c->cap, "%s: %s: %s", what, ampx_status_name(st),
             why && *why ? why : "failed");
    return st;
}

#define SLOT(name, type)                                                                           \
    case AMPX_OP_##name:                                                                           \
        st = ((ampx_status(*)(ampx_context *, const type *))slot)(c->ctx, (const type *)args);     \
        break

ampx_status call_op(call_ctx *c, const char *who, uint32_t op, const void *args) {
    void *slot = op < AMPX_OP_COUNT ? ampx_backend_op_slot(c->be, op) : NULL;
    if (!slot || op >= AMPX_OP_COUNT) {
        snprintf(c->err, c->cap, "%s: backend %s has no %s op", who, c->ifc->name,
                 ampx_op_name(op) ? ampx_op_name(op) : "?");
        return AMPX_ERR_UNSUPPORTED;
    }
    ampx_status st = AMPX_ERR_INTERNAL;
    switch (op) {
        SLOT(GEMM, ampx_gemm_args);
        SLOT(CAST, ampx_cast_args);
        SLOT(ADD, ampx_add_args);
        SLOT(MUL, ampx_mul_args);
        SLOT(SCALE, ampx_scale_args);
        SLOT(BIAS_GRAD, ampx_bias_grad_args);
        SLOT(ACT_FWD, ampx_act_args);
        SLOT(ACT_BWD, ampx_act_args);
        SLOT(SOFTMAX_FWD, ampx_softmax_args);
        SLOT(SOFTMAX_BWD, ampx_softmax_args);
        SLOT(SOFTMAX_XENT, ampx_softmax_xent_args);
        SLOT(LAYERNORM_FWD, ampx_layernorm_args);
        SLOT(LAYERNORM_BWD, ampx_layernorm_args);
        SLOT(BATCHNORM_FWD, ampx_batchnorm_args);
        SLOT(BATCHNORM_BWD, ampx_batchnorm_args);
        SLOT(EMBEDDING_FWD, ampx_embedding_args);
        SLOT(EMBEDDING_BWD, ampx_embedding_args);
        SLOT(REDUCE, ampx_reduce_args);
        SLOT(SUM_SQUARES, ampx_sum_squares_args);
        SLOT(UNSCALE_CHECK, ampx_unscale_check_args);
        SLOT(GRAD_STATS, ampx_grad_stats_args);
        SLOT(SCALER_UPDATE, ampx_scaler_update_args);
        SLOT(SGD, ampx_sgd_args);
        SLOT(ADAMW, ampx_adamw_args);
        SLOT(DROPOUT, ampx_dropout_args);
        SLOT(PERMUTE, ampx_permute_args);
    default: break;
    }
    c->counts[op]++;
    if (st == AMPX_OK) return st;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", who, ampx_op_name(op));
    return call_check(c, st, what);
}
