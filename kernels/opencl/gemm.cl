/* gemm.cl — GEMM helpers and the row-blocked kernel for any mix of A/B/C dtypes, and the
 * fp8 operands of GEMM_FP8 (ABI 1.7).
 *
 * f32 x f32 -> f32 goes to CLBlast SGEMM. Other dtype mixes run gemm_rows_<A>_<B> here, or
 * the tiled kernel of typed/gemm_tuned.cl (built per dtype pair and tuned per device), or
 * are widened to f32 (cast), multiplied by CLBlast and rounded back (gemm_store_c); the
 * plugin picks the faster per its `gemm` option (see docs/OPENCL.md). Either way products
 * and sums are f32, alpha and beta apply in f32 and C is rounded once.
 *
 * GEMM_FP8 runs gemm_rows_<A>_<B> (or typed/gemm_tuned.cl's tiled kernel) with A and B e4m3
 * or e5m2 (widened exactly) and the two dequantization factors dq_a, dq_b (f32 [1] each, read on
 * the device): the factor of the sum is alpha * (dq_a[0] * dq_b[0]) in f32, backend.h's order. Both
 * kernels read C_old from c and write the result to out: C itself, or (the epilogue's) an f32 copy
 * of C's layout that gemm_epilogue then finishes. */

/* C_b = beta * C_b over the m x n elements of batches [batch0, batch0 + batches) (k == 0,
 * and before CLBlast with beta == 0, so NaN poison in C never meets 0 * C); beta == 0
 * writes zeros without reading C. */
__kernel void gemm_beta(TENSOR(c), ulong m, ulong n, ulong ldc, ulong sc, ulong batch0,
                        ulong batches, float beta) {
    ulong total = m * n * batches;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong rj, j, bt = batch0 + udivmod(e, m * n, &rj), r = udivmod(rj, n, &j);
        ulong ci = bt * sc + r * ldc + j;
        ST(c, ci, beta == 0.0f ? 0.0f : beta * LD(c, ci));
    }
}

/* Rounds the f32 result of the converted path back into C's m x n elements (the padding of
 * C is left as it was). tmp has C's layout. */
__kernel void gemm_store_c(__global const float *tmp, TENSOR(c), ulong m, ulong n, ulong ldc,
                           ulong sc, ulong batch0, ulong batches) {
    ulong total = m * n * batches;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong rj, j, bt = batch0 + udivmod(e, m * n, &rj), r = udivmod(rj, n, &j);
        ulong ci = bt * sc + r * ldc + j;
        ST(c, ci, tmp[ci]);
    }
}

/* GEMM's epilogue (ABI 1.5) over the f32 result tmp (C's layout; C itself when C is f32,
 * each element read before it is written): v = tmp + bias[j] in f32 (has_bias),
 * pre = round(v) (has_pre), C = round(f(v)) with f in f32 as ACT_FWD's: gelu common.cl's
 * act_gelu, the others kernel_math.h's ampx_km_act_f (act = 1 + ampx_act; 0: C = round(v)).
 * One rounding per destination. The tiled kernel does the same in its store
 * (typed/gemm_tuned.cl); this one serves the convert path and GEMM_FP8's rows. */
ACT_GELU_FNS(float, _ep)

__kernel void gemm_epilogue(__global const float *tmp, ulong tmp_o, TENSOR(c), CTENSOR(bias),
                            int has_bias, TENSOR(pre), int has_pre, uint act, ulong m, ulong n,
                            ulong ldc, ulong sc, ulong batch0, ulong batches) {
    ulong total = m * n * batches;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong rj, j, bt = batch0 + udivmod(e, m * n, &rj), r = udivmod(rj, n, &j);
        ulong ci = bt * sc + r * ldc + j;
        float v  = tmp[tmp_o + ci];
        if (has_bias) v = v + LD(bias, j);
        if (has_pre) ST(pre, ci, v);
        if (act == 1 + AMPX_KM_ACT_GELU)
            v = act_gelu_ep(v);
        else if (act)
            v = (float)ampx_km_act_f((int)act - 1, v);
        ST(c, ci, v);
    }
}

/* GEMM's bias gradient: db[j] = (accumulate ? db[j] : 0) + the sum over batches and k of
 * op(B)[p, j], one work item per column, summed in f32 in that order. */
__kernel void gemm_bias_grad(CTENSOR(b), TENSOR(db), int accumulate, ulong n, ulong k, ulong ldb,
                             ulong sb, ulong batch, int tb) {
    for (ulong j = GID; j < n; j += GSIZE) {
        float s = 0.0f;
        for (ulong bt = 0; bt < batch; bt++)
            for (ulong p = 0; p < k; p++)
                s += LD(b, bt * sb + (tb ? j * ldb + p : p * ldb + j));
        ST(db, j, accumulate ? LD(db, j) + s : s);
    }
}

/* gemm_rows_<A>_<B>: register-blocked GEMM for CPU-like devices (PoCL), where a work item
 * is a thread and only its own vector code is SIMD: compilers there do not vectorise across
 * work items of a kernel that has loops inside. Each work item computes a 6 x 16 block of C
 * (rows i0.., columns j0..) in twelve float8 accumulators (12 AVX registers): per k step it
 * loads sixteen consecutive elements of a row of op(B) as two float8 (widening bf16 with a
 * shift, f16 with vload_half8, fp8 with common.cl's lane-wise integer code, all exact),
 * broadcasts six elements of op(A), and does six vector multiply-adds. One kernel per A/B
 * dtype pair, so the loop has no dtype branch. Dimension 0 walks the row blocks, so
 * consecutive work-groups reuse the same columns of B from cache. Rows past m and columns
 * past n re-read the last row or column and are not stored. Products and sums are f32;
 * alpha and beta apply once at the end, C is rounded once. */
#define GR_ROWS 6
#define GR_COLS 16

inline float lds_f32(__global const uchar *p, ulong i) {
    return ((__global const float *)p)[i];
}
inline float lds_bf16(__global const uchar *p, ulong i) {
    return bf16_to_f32(((__global const ushort *)p)[i]);
}
inline float lds_f16(__global const uchar *p, ulong i) {
    return f16_to_f32(((__global const ushort *)p)[i]);
}
inline float8 ldv_f32(__global const uchar *p, ulong i) {
    return vload8(0, (__global const float *)p + i);
}
inline float8 ldv_bf16(__global const uchar *p, ulong i) {
    return as_float8(convert_uint8(vload8(0, (__global const ushort *)p + i)) << 16);
}
inline float8 ldv_f16(__global const uchar *p, ulong i) {
    return vload_half8(0, (__global const half *)p + i);
}

/* The body of gemm_rows_<A>_<B> (AN, BN: the load helpers' suffixes): C_old is read from c,
 * the sum times ALPHA plus beta * C_old is stored to OUT. */
#define GEMM_ROWS_BODY(AN, BN, OUT, ALPHA)                                                         \
    const ulong i0 = get_global_id(0) * GR_ROWS, j0 = get_global_id(1) * GR_COLS;                  \
    const ulong bt          = batch0 + get_global_id(2);                                           \
    __global const uchar *A = a_p + a_o, *B = b_p + b_o;                                           \
    ulong arow[GR_ROWS], bcol[GR_COLS];                                                            \
    for (int r = 0; r < GR_ROWS; r++)                                                              \
        arow[r] = bt * sa + (i0 + r < m ? i0 + r : m - 1) * (ta ? 1 : lda);                        \
    for (int v = 0; v < GR_COLS; v++)                                                              \
        bcol[v] = bt * sb + (j0 + v < n ? j0 + v : n - 1) * (tb ? ldb : 1);                        \
    const ulong astep = ta ? lda : 1, bstep = tb ? 1 : ldb;                                        \
    float8 acc0[GR_ROWS], acc1[GR_ROWS]; /* columns j0..j0+7 and j0+8..j0+15 */                    \
    for (int r = 0; r < GR_ROWS; r++)                                                              \
        acc0[r] = acc1[r] = (float8)(0.0f);                                                        \
    if (!tb && j0 + GR_COLS <= n) { /* a whole row segment of op(B) in one load */                 \
        for (ulong p = 0; p < k; p++) {                                                            \
            float8 b0 = ldv_##BN(B, bcol[0] + p * bstep);                                          \
            float8 b1 = ldv_##BN(B, bcol[0] + p * bstep + 8);                                      \
            for (int r = 0; r < GR_ROWS; r++) {                                                    \
                float8 av = (float8)(lds_##AN(A, arow[r] + p * astep));                            \
                acc0[r]   = mad(av, b0, acc0[r]);                                                  \
                acc1[r]   = mad(av, b1, acc1[r]);                                                  \
            }                                                                                      \
        }                                                                                          \
    } else {                                                                                       \
        for (ulong p = 0; p < k; p++) {                                                            \
            float bs[GR_COLS];                                                                     \
            for (int v = 0; v < GR_COLS; v++)                                                      \
                bs[v] = lds_##BN(B, bcol[v] + p * bstep);                                          \
            float8 b0 = vload8(0, bs), b1 = vload8(1, bs);                                         \
            for (int r = 0; r < GR_ROWS; r++) {                                                    \
                float8 av = (float8)(lds_##AN(A, arow[r] + p * astep));                            \
                acc0[r]   = mad(av, b0, acc0[r]);                                                  \
                acc1[r]   = mad(av, b1, acc1[r]);                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    for (int r = 0; r < GR_ROWS; r++) {                                                            \
        if (i0 + r >= m) break;                                                                    \
        float vals[GR_COLS];                                                                       \
        vstore8(acc0[r], 0, vals);                                                                 \
        vstore8(acc1[r], 1, vals);                                                                 \
        for (int v = 0; v < GR_COLS; v++) {                                                        \
            if (j0 + v >= n) break;                                                                \
            ulong ci = bt * sc + (i0 + r) * ldc + j0 + v;                                          \
            float x  = ALPHA * vals[v];                                                            \
            if (beta != 0.0f) x = x + beta * LD(c, ci);                                            \
            ST(OUT, ci, x);                                                                        \
        }                                                                                          \
    }

#define GEMM_ROWS_KERNEL(AN, BN)                                                                   \
    __kernel void gemm_rows_##AN##_##BN(CTENSOR(a), CTENSOR(b), TENSOR(c), ulong m, ulong n,       \
                                        ulong k, ulong lda, ulong ldb, ulong ldc, ulong sa,        \
                                        ulong sb, ulong sc, int ta, int tb, float alpha,           \
                                        float beta, ulong batch0) {                                \
        GEMM_ROWS_BODY(AN, BN, c, alpha)                                                           \
    }

/* GEMM_FP8's: C_old from c, the result to out, alpha times the dequantization factors. */
#define GEMM_ROWS_FP8_KERNEL(AN, BN)                                                               \
    __kernel void gemm_rows_##AN##_##BN(CTENSOR(a), CTENSOR(b), CTENSOR(c), TENSOR(out), ulong m,  \
                                        ulong n, ulong k, ulong lda, ulong ldb, ulong ldc,         \
                                        ulong sa, ulong sb, ulong sc, int ta, int tb, float alpha, \
                                        float beta, ulong batch0, FARG(dq_a), FARG(dq_b)) {        \
        const float al = alpha * (((__global const float *)(dq_a_p + dq_a_o))[0] *                 \
                                  ((__global const float *)(dq_b_p + dq_b_o))[0]);                 \
        GEMM_ROWS_BODY(AN, BN, out, al)                                                            \
    }

GEMM_ROWS_KERNEL(f32, f32)
GEMM_ROWS_KERNEL(f32, bf16)
GEMM_ROWS_KERNEL(f32, f16)
GEMM_ROWS_KERNEL(bf16, f32)
GEMM_ROWS_KERNEL(bf16, bf16)
GEMM_ROWS_KERNEL(bf16, f16)
GEMM_ROWS_KERNEL(f16, f32)
GEMM_ROWS_KERNEL(f16, bf16)
GEMM_ROWS_KERNEL(f16, f16)

inline float lds_e4m3(__global const uchar *p, ulong i) {
    return e4m3_to_f32(p[i]);
}
inline float lds_e5m2(__global const uchar *p, ulong i) {
    return e5m2_to_f32(p[i]);
}
inline float8 ldv_e4m3(__global const uchar *p, ulong i) {
    return e4m3v8_to_f32(vload8(0, p + i));
}
inline float8 ldv_e5m2(__global const uchar *p, ulong i) {
    return e5m2v8_to_f32(vload8(0, p + i));
}

GEMM_ROWS_FP8_KERNEL(e4m3, e4m3)
GEMM_ROWS_FP8_KERNEL(e4m3, e5m2)
GEMM_ROWS_FP8_KERNEL(e5m2, e4m3)
GEMM_ROWS_FP8_KERNEL(e5m2, e5m2)
