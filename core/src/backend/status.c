/* status.c — names of statuses and ops: the words the tools and logs use. */
#include <string.h>

#include "ampx/ampx.h"

const char *ampx_status_name(ampx_status st) {
    switch (st) {
    case AMPX_OK: return "AMPX_OK";
    case AMPX_ERR_INVALID: return "AMPX_ERR_INVALID";
    case AMPX_ERR_UNSUPPORTED: return "AMPX_ERR_UNSUPPORTED";
    case AMPX_ERR_NO_MEMORY: return "AMPX_ERR_NO_MEMORY";
    case AMPX_ERR_DEVICE: return "AMPX_ERR_DEVICE";
    case AMPX_ERR_UNAVAILABLE: return "AMPX_ERR_UNAVAILABLE";
    case AMPX_ERR_INTERNAL: return "AMPX_ERR_INTERNAL";
    }
    return "AMPX_ERR_UNKNOWN";
}

/* Indexed by ampx_op; the names match the slots of ampx_backend_ops. */
static const char *const op_names[AMPX_OP_COUNT] = {
    [AMPX_OP_GEMM]          = "gemm",
    [AMPX_OP_CAST]          = "cast",
    [AMPX_OP_ADD]           = "add",
    [AMPX_OP_MUL]           = "mul",
    [AMPX_OP_SCALE]         = "scale",
    [AMPX_OP_BIAS_GRAD]     = "bias_grad",
    [AMPX_OP_ACT_FWD]       = "act_fwd",
    [AMPX_OP_ACT_BWD]       = "act_bwd",
    [AMPX_OP_SOFTMAX_FWD]   = "softmax_fwd",
    [AMPX_OP_SOFTMAX_BWD]   = "softmax_bwd",
    [AMPX_OP_SOFTMAX_XENT]  = "softmax_xent",
    [AMPX_OP_LAYERNORM_FWD] = "layernorm_fwd",
    [AMPX_OP_LAYERNORM_BWD] = "layernorm_bwd",
    [AMPX_OP_BATCHNORM_FWD] = "batchnorm_fwd",
    [AMPX_OP_BATCHNORM_BWD] = "batchnorm_bwd",
    [AMPX_OP_EMBEDDING_FWD] = "embedding_fwd",
    [AMPX_OP_EMBEDDING_BWD] = "embedding_bwd",
    [AMPX_OP_REDUCE]        = "reduce",
    [AMPX_OP_SUM_SQUARES]   = "sum_squares",
    [AMPX_OP_UNSCALE_CHECK] = "unscale_check",
    [AMPX_OP_GRAD_STATS]    = "grad_stats",
    [AMPX_OP_SCALER_UPDATE] = "scaler_update",
    [AMPX_OP_SGD]           = "sgd",
    [AMPX_OP_ADAMW]         = "adamw",
    [AMPX_OP_DROPOUT]       = "dropout",
    [AMPX_OP_PERMUTE]       = "permute",
    [AMPX_OP_AMP_PASS]      = "amp_pass",
};

const char *ampx_op_name(uint32_t op) {
    return op < AMPX_OP_COUNT ? op_names[op] : NULL;
}

int ampx_op_parse(const char *name, uint32_t *op) {
    for (uint32_t i = 0; i < AMPX_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) {
            *op = i;
            return 0;
        }
    return -1;
}

/* Number of dtypes supports() takes for each op, in the order of the op's heading. */
static const uint8_t op_n_dtypes[AMPX_OP_COUNT] = {
    [AMPX_OP_GEMM] = 3,          [AMPX_OP_CAST] = 2,          [AMPX_OP_ADD] = 3,
    [AMPX_OP_MUL] = 3,           [AMPX_OP_SCALE] = 2,         [AMPX_OP_BIAS_GRAD] = 2,
    [AMPX_OP_ACT_FWD] = 2,       [AMPX_OP_ACT_BWD] = 3,       [AMPX_OP_SOFTMAX_FWD] = 2,
    [AMPX_OP_SOFTMAX_BWD] = 3,   [AMPX_OP_SOFTMAX_XENT] = 2,  [AMPX_OP_LAYERNORM_FWD] = 2,
    [AMPX_OP_LAYERNORM_BWD] = 3, [AMPX_OP_BATCHNORM_FWD] = 2, [AMPX_OP_BATCHNORM_BWD] = 3,
    [AMPX_OP_EMBEDDING_FWD] = 2, [AMPX_OP_EMBEDDING_BWD] = 2, [AMPX_OP_REDUCE] = 2,
    [AMPX_OP_SUM_SQUARES] = 1,   [AMPX_OP_UNSCALE_CHECK] = 1, [AMPX_OP_GRAD_STATS] = 1,
    [AMPX_OP_SCALER_UPDATE] = 0, [AMPX_OP_SGD] = 1,           [AMPX_OP_ADAMW] = 1,
    [AMPX_OP_DROPOUT] = 2,       [AMPX_OP_PERMUTE] = 2,       [AMPX_OP_AMP_PASS] = 1,
};

uint32_t ampx_op_n_dtypes(uint32_t op) {
    return op < AMPX_OP_COUNT ? op_n_dtypes[op] : 0;
}
