/* rules.c — the rule table: each op kind of graph/ops.h to its rule (shape, forward,
 * backward), which lives in the op family's file. The table is apart from graph.c so that
 * the family files, which call graph.c's bookkeeping, and the table, which names their
 * rules, never call each other. */
#include "graph/ops.h"

#include <stdio.h>
#include <string.h>

static const g_rule *const rules[OP_COUNT] = {
    [OP_MATMUL]        = &g_rule_matmul,
    [OP_MATMUL_DW]     = &g_rule_matmul_dw,
    [OP_MATMUL_DX]     = &g_rule_matmul_dx,
    [OP_BIAS]          = &g_rule_bias,
    [OP_BIAS_GRAD]     = &g_rule_bias_grad,
    [OP_ADD]           = &g_rule_add,
    [OP_MUL]           = &g_rule_mul,
    [OP_SCALE]         = &g_rule_scale,
    [OP_CAST]          = &g_rule_cast,
    [OP_ACT]           = &g_rule_act,
    [OP_ACT_BWD]       = &g_rule_act_bwd,
    [OP_DROPOUT]       = &g_rule_dropout,
    [OP_LAYERNORM]     = &g_rule_layernorm,
    [OP_LAYERNORM_BWD] = &g_rule_layernorm_bwd,
    [OP_BATCHNORM]     = &g_rule_batchnorm,
    [OP_BATCHNORM_BWD] = &g_rule_batchnorm_bwd,
    [OP_SOFTMAX]       = &g_rule_softmax,
    [OP_SOFTMAX_BWD]   = &g_rule_softmax_bwd,
    [OP_RESHAPE]       = &g_rule_reshape,
    [OP_TRANSPOSE]     = &g_rule_transpose,
    [OP_REDUCE]        = &g_rule_reduce,
    [OP_REDUCE_BWD]    = &g_rule_reduce_bwd,
    [OP_XENT]          = &g_rule_xent,
    [OP_MSE]           = &g_rule_mse,
    [OP_EMBED]         = &g_rule_embed,
    [OP_EMBED_BWD]     = &g_rule_embed_bwd,
    [OP_BMM]           = &g_rule_bmm,
    [OP_SPLIT_HEADS]   = &g_rule_split_heads,
    [OP_MERGE_HEADS]   = &g_rule_merge_heads,
    [OP_POSITION]      = &g_rule_position,
    [OP_POSITION_GRAD] = &g_rule_position_grad,
    [OP_DENSE]         = &g_rule_dense,
    [OP_FUSED]         = &g_rule_fused,
    [OP_ATTENTION]     = &g_rule_attention,
    [OP_ATTENTION_BWD] = &g_rule_attention_bwd,
    [OP_IM2COL]        = &g_rule_im2col,
    [OP_COL2IM]        = &g_rule_col2im,
    [OP_POOL]          = &g_rule_pool,
    [OP_POOL_BWD]      = &g_rule_pool_bwd,
    [OP_CONCAT]        = &g_rule_concat,
    [OP_SLICE]         = &g_rule_slice,
    [OP_MATMUL_FP8]    = &g_rule_matmul_fp8,
    [OP_MATMUL_DW_FP8] = &g_rule_matmul_dw_fp8,
    [OP_MATMUL_DX_FP8] = &g_rule_matmul_dx_fp8,
    [OP_QUANTIZE]      = &g_rule_quantize,
    [OP_DENSE_FP8]     = &g_rule_dense_fp8,
};

const g_rule *g_rule_of(int op) {
    return op >= 0 && op < OP_COUNT ? rules[op] : NULL;
}

uint32_t g_mask_key(const g_graph *g, int node) {
    const g_node *n = &g->nodes[node];
    char name[G_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s", n->name);
    size_t len = strlen(name), suf = strlen(".attention");
    if (n->op == OP_ATTENTION && len >= suf && !strcmp(name + len - suf, ".attention"))
        snprintf(name + len - suf, sizeof name - (len - suf), ".dropout");
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}
