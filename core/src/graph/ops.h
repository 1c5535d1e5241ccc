/* ops.h — the op kinds of the graph and their rules. Each kind has one rule: its name, the
 * backend ops it issues, shape inference, the forward (which backend ops it enqueues) and the
 * backward (which nodes autodiff emits), side by side in one file per op family:
 *   dense.c       matmul, bias and their backward GEMMs; the fused dense layer; the fp8
 *                 products and the quantizing cast
 *   elementwise.c add, mul, scale, cast, activations, dropout
 *   norm.c        layer norm, batch norm
 *   softmax.c     softmax / log-softmax
 *   layout.c      reshape (a view), transpose of the two last axes
 *   reduce.c      sum / mean over an axis
 *   loss.c        softmax cross-entropy (per position for N-D logits), mean squared error
 *   embed.c       token embedding (gather) and its scatter-add backward, position tables
 *   attention.c   batched products of activations, splitting and merging heads, and the
 *                 fused attention op
 *   conv.c        im2col and its adjoint (a convolution is im2col, then a matmul), pooling,
 *                 concatenation and its slices
 * Adding an op: an enum entry here, its rule in the family file, its name in the builder. */
#ifndef AMPX_GRAPH_OPS_H
#define AMPX_GRAPH_OPS_H

#include "graph/exec.h"
#include "graph/graph.h"

typedef enum g_op {
    /* dense.c */
    OP_MATMUL,    /* y[.., n] = x[.., k] W[k, n]                 in: x, W        */
    OP_MATMUL_DW, /* dW (+)= x^T dy                              in: x, dy  out: dW */
    OP_MATMUL_DX, /* dx = dy W^T                                 in: dy, W  out: dx */
    OP_BIAS,      /* y = x + b (b over the last axis)            in: x, b        */
    OP_BIAS_GRAD, /* db (+)= sum over rows of dy                 in: dy     out: db */
    /* elementwise.c */
    OP_ADD,     /* y = a + b (same shape); backward: a sum of two f32 gradients too */
    OP_MUL,     /* y = a * b (same shape)                   */
    OP_SCALE,   /* y = alpha x                              */
    OP_CAST,    /* y = x in another dtype                   */
    OP_ACT,     /* y = f(x)                                 */
    OP_ACT_BWD, /* dx = dy f'(x)                            in: x, dy  */
    OP_DROPOUT, /* y = mask(seed, node) x / (1 - rate); the backward is the same op on dy */
    /* norm.c */
    OP_LAYERNORM,     /* y, mean, rstd = layernorm(x; gamma, beta)  */
    OP_LAYERNORM_BWD, /* dx, dgamma, dbeta                          */
    OP_BATCHNORM,     /* y, mean, rstd = batchnorm(x; gamma, beta, running stats) */
    OP_BATCHNORM_BWD,
    /* softmax.c */
    OP_SOFTMAX,     /* y = softmax(alpha x) over the last axis (causal optional) */
    OP_SOFTMAX_BWD, /* in: y, dy */
    /* layout.c */
    OP_RESHAPE,   /* a view: no op issued */
    OP_TRANSPOSE, /* swaps the two last axes (a PERMUTE) */
    /* reduce.c */
    OP_REDUCE,     /* sum or mean over one axis                  */
    OP_REDUCE_BWD, /* dx = broadcast of dy over that axis        in: dy, ones */
    /* loss.c */
    OP_XENT, /* loss (and, training, dlogits) of softmax cross-entropy   in: logits, labels */
    OP_MSE,  /* loss (and, training, dpred) of the mean squared error    in: pred, target */
    /* embed.c */
    OP_EMBED,     /* y[.., t, :] = table[ids[.., t], :]          in: ids, table */
    OP_EMBED_BWD, /* dtable (+)= scatter-add of dy by ids       in: ids, dy  out: dtable */
    /* attention.c */
    OP_BMM,           /* C = alpha op(A) op(B) over the leading axes   in: A, B */
    OP_SPLIT_HEADS,   /* x [.., T, P*D] -> P values [.., H, T, D/H]     */
    OP_MERGE_HEADS,   /* P values [.., H, T, D/H] -> [.., T, P*D]       */
    OP_ATTENTION,     /* context, lse = attention(qkv [.., T, 3D]) in one op (ATTN_FWD) */
    OP_ATTENTION_BWD, /* d qkv, delta                 in: qkv, context, lse, d context */
    /* embed.c */
    OP_POSITION,      /* y = x + table[:T] (a table of P >= T rows)  in: x [.., T, D], table */
    OP_POSITION_GRAD, /* dtable[:T] (+)= sum over examples of dy    in: dy  out: dtable */
    /* dense.c: a matmul, its bias and its activation as one GEMM with an epilogue
     * (passes/fuse.c makes them where the backend takes it) */
    OP_DENSE, /* y = f(x W + b), pre = x W + b      in: x, W, b  out: y (, pre) */
    OP_FUSED, /* a node whose work the dense node before it does: nothing to run */
    /* conv.c */
    OP_IM2COL,   /* cols [.., OH OW, C KH KW] = the windows of x [.., C, H, W]    in: x    */
    OP_COL2IM,   /* dx = the sum of the window elements of dcols at each pixel in: dcols */
    OP_POOL,     /* y [.., C, OH, OW] = max or mean of each window   out: y (, indices i32) */
    OP_POOL_BWD, /* dx from dy (and a max pool's indices)          in: dy (, indices)   */
    OP_CONCAT,   /* y = the inputs side by side along a.axis                            */
    OP_SLICE,    /* y = x[.., at : at + len, ..] along a.axis (concat's backward)      */
    /* dense.c: a product of weights with fp8 operands (passes/fp8.c makes them from matmuls
     * that policy.fp8 names), per-tensor scaled by the fp8 state's slots */
    OP_MATMUL_FP8,    /* y = q(x) q(W), x_q and W_q kept   in: x, W  out: y, x_q, W_q */
    OP_MATMUL_DW_FP8, /* dW (+)= x_q^T dy_q                 in: x_q, dy_q  out: dW     */
    OP_MATMUL_DX_FP8, /* dx = dy_q W_q^T                    in: dy_q, W_q  out: dx     */
    OP_QUANTIZE,      /* y = q(x) in fp8 with its slot's scale, raising its amax        */
    OP_DENSE_FP8,     /* matmul_fp8, bias and act as one GEMM_FP8 with the epilogue
                         (passes/fuse.c)          in: x, W, b  out: y, x_q, W_q (, pre) */
    OP_COUNT
} g_op;

/* Why a shape is refused: the message and which input is wrong (-1: the node itself). */
typedef struct g_shape_error {
    char msg[640];
    int input;
} g_shape_error;

typedef struct g_rule {
    const char *name;
    /* The backend ops the forward issues (AMPX_OP_COUNT ends the list). */
    uint32_t ops[4];
    /* Sets the output values' shapes from the inputs' (outputs exist, dims unset);
     * returns -1 with *e filled when the inputs do not fit. NULL: outputs are given. */
    int (*shape)(g_graph *g, g_node *n, g_shape_error *e);
    /* Enqueues the node's work. */
    ampx_status (*forward)(g_exec *x, const g_graph *g, const g_node *n);
    /* Emits the backward nodes of forward node n (id `self`) through the g_* helpers.
     * NULL: the op has no gradient (backward nodes, losses handled in forward). */
    int (*backward)(g_graph *g, int self);
} g_rule;

const g_rule *g_rule_of(int op);

/* The key of forward node `node`'s dropout mask: a hash of its name, or for a fused attention
 * node ("L.attention") of the name of the composite's dropout node ("L.dropout"), so the
 * mask does not depend on node numbering and both forms of a layer drop the same elements. */
uint32_t g_mask_key(const g_graph *g, int node);

/* Family tables (each file defines its kinds' rules). */
extern const g_rule g_rule_matmul, g_rule_matmul_dw, g_rule_matmul_dx, g_rule_bias,
    g_rule_bias_grad, g_rule_dense, g_rule_fused, g_rule_matmul_fp8, g_rule_matmul_dw_fp8,
    g_rule_matmul_dx_fp8, g_rule_quantize, g_rule_dense_fp8;
extern const g_rule g_rule_add, g_rule_mul, g_rule_scale, g_rule_cast, g_rule_act, g_rule_act_bwd,
    g_rule_dropout;
extern const g_rule g_rule_layernorm, g_rule_layernorm_bwd, g_rule_batchnorm, g_rule_batchnorm_bwd;
extern const g_rule g_rule_softmax, g_rule_softmax_bwd;
extern const g_rule g_rule_reshape, g_rule_transpose;
extern const g_rule g_rule_reduce, g_rule_reduce_bwd;
extern const g_rule g_rule_xent, g_rule_mse;
/* dense.c: y = x + b broadcast over rows of `cols` (the bias add and the position table's
 * add), and its backward: dx = dy, and db from grad_op (OP_BIAS_GRAD, OP_POSITION_GRAD).
 * A b over more than x's last axis spans positions: a run on some positions alone reads
 * their part of it. */
ampx_status g_row_add_fwd(g_exec *x, const g_graph *g, const g_node *n, uint64_t cols);
int g_row_add_bwd(g_graph *g, int self, int grad_op);
extern const g_rule g_rule_embed, g_rule_embed_bwd, g_rule_position, g_rule_position_grad;
extern const g_rule g_rule_bmm, g_rule_split_heads, g_rule_merge_heads, g_rule_attention,
    g_rule_attention_bwd;
extern const g_rule g_rule_im2col, g_rule_col2im, g_rule_pool, g_rule_pool_bwd, g_rule_concat,
    g_rule_slice;

#endif
