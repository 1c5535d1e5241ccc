/* fuse.c — the fusion pass (fuse.h). A dense layer lowers to three consecutive forward nodes:
 * matmul (h0 = x W), bias (h1 = h0 + b) and, when it has one, act (y = f(h1)). Where h0 is
 * read by the bias alone, b is one row of h0's last axis, no cast sits between them and the
 * backend takes GEMM's epilogue for the layer's dtypes, the matmul node becomes a dense node
 * (in x, W, b; out y and h1, or h1 alone) and the bias and act nodes become fused nodes that
 * run nothing. Node ids do not move (dropout keys, names and the trace stay put); h0 is no
 * longer written or placed. h1 stays the activation's saved input, written by the GEMM's
 * pre_act, so ACT_BWD reads what it read before. The weight-gradient GEMM also sums the bias
 * gradient (the column sums of its B operand dh) where the backend takes that for its dtypes
 * and W is not transposed (a tied head's dW = dh^T x has dh as its A operand). An fp8
 * product (matmul_fp8) fuses alike into a dense_fp8 node when the backend takes GEMM_FP8's
 * epilogue: out y, x_q, W_q and the pre-activation; its bias gradient stays BIAS_GRAD. */
#include "passes/fuse.h"

#include "graph/ops.h"

/* Forward nodes that read value v. */
static int readers(const g_graph *g, int v) {
    int n = 0;
    for (int i = 0; i < g->n_forward; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            n += g->nodes[i].in[k] == v;
    return n;
}

/* The act node after the bias node i + 1 that reads h1, or NULL. */
static g_node *act_after(g_graph *g, int i, int h1) {
    if (i + 2 >= g->n_forward) return NULL;
    g_node *a = &g->nodes[i + 2];
    return a->op == OP_ACT && a->n_in == 1 && a->in[0] == h1 ? a : NULL;
}

static void make_fused(g_node *n) {
    n->op    = OP_FUSED;
    n->n_in  = 0;
    n->n_out = 0;
}

/* Fuses the layer whose matmul (or matmul_fp8) is node i; 1 when it did. */
/* The backend runs a GEMM of dtypes d with the epilogue. */
static int epilogue(const pass_caps *caps, const ampx_dtype d[3]) {
    return caps->gemm_epilogue[d[0]][d[1]][d[2]];
}

static int fuse_at(g_graph *g, int i, const pass_caps *caps) {
    g_node *mm = &g->nodes[i], *bs = &g->nodes[i + 1];
    int fp8 = mm->op == OP_MATMUL_FP8;
    if ((mm->op != OP_MATMUL && !fp8) || bs->op != OP_BIAS || bs->in[0] != mm->out[0] ||
        mm->a.groups > 1)
        return 0; /* a grouped product's bias is not one row per GEMM of the batch */
    int x = mm->in[0], w = mm->in[1], h0 = mm->out[0], b = bs->in[1], h1 = bs->out[0];
    const g_value *bv = &g->values[b];
    if (bv->ndim != 1 || bv->dims[0] != g_last(&g->values[h0]) || readers(g, h0) != 1 ||
        g->values[h0].dtype != g->values[h1].dtype || h0 == g->logits || h0 == g->loss)
        return 0;
    g_node *ac        = act_after(g, i, h1);
    int y             = ac ? ac->out[0] : h1;
    ampx_dtype fwd[3] = {g->values[x].dtype, g->values[w].dtype, g->values[y].dtype};
    ampx_dtype bwd[3] = {g->values[x].dtype, g->values[h1].dtype, AMPX_F32};
    if (fp8) fwd[0] = fwd[1] = AMPX_E4M3; /* GEMM_FP8's epilogue on the codes */
    if (!epilogue(caps, fwd)) return 0;
    /* dense: out y (, pre); dense_fp8: out y, x_q, W_q (as matmul_fp8's) (, pre) */
    int at_pre             = fp8 ? 3 : 1;
    mm->op                 = fp8 ? OP_DENSE_FP8 : OP_DENSE;
    mm->in[2]              = b;
    mm->n_in               = 3;
    mm->out[0]             = y;
    mm->out[at_pre]        = h1;
    mm->n_out              = at_pre + (ac ? 1 : 0);
    mm->a.epi_act          = ac ? ac->a.act + 1 : 0;
    mm->a.fuse_bias_grad   = !fp8 && !mm->a.trans_b && epilogue(caps, bwd);
    g->values[y].producer  = i;
    g->values[h1].producer = i;
    g->values[h0].producer = -1;
    make_fused(bs);
    if (ac) make_fused(ac);
    return 1;
}

int fuse_dense(g_graph *g, const pass_caps *caps) {
    int fused = 0;
    for (int i = 0; i + 1 < g->n_forward; i++)
        fused += fuse_at(g, i, caps);
    return fused;
}
