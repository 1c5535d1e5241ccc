/* softmax.cl — SOFTMAX_FWD, SOFTMAX_BWD and SOFTMAX_XENT's rows: one work item per row on CPU
 * devices (ROW_ITEMS), one work-group per row elsewhere. z = scale * x with the causal mask
 * (-inf past the query's position), the row max subtracted before exp, sums in f32 in an
 * order fixed per row (four vector accumulators, or the group's tree). */

/* Columns of row r that the causal mask leaves visible: j <= (r mod seq_q) + cols - seq_q. */
inline ulong visible_cols(int causal, ulong r, ulong cols, ulong seq_q) {
    return causal ? (r % seq_q) + (cols - seq_q) + 1 : cols;
}

#ifdef K_xent_rows
/* SOFTMAX_XENT's rows (softmax_xent.cl's xent_count before, xent_loss after, on the stream):
 * work[0] = the valid rows (int bits), written by xent_count; work[1 + r] = row r's loss
 * term. The gradient's factor g = grad_scale / n_valid * the loss scale, in wide_t. */
inline float xent_factor(__global const float *work, __global const float *scalars,
                         float grad_scale) {
    int n_valid  = ((__global const int *)work)[0];
    float lscale = scalars ? scalars[0] : 1.0f;
    return n_valid ? (float)((wide_t)grad_scale / (wide_t)n_valid * (wide_t)lscale) : 0.0f;
}
#endif

#ifdef ROW_ITEMS
/* CPU devices: one work item per row (rows strided over the launch), VW columns per step
 * with vector loads, sums in four vector accumulators (common.cl's ROW_VSUM), no barriers.
 * The forward keeps the exps of a row of up to SM_KEEP visible columns in private memory, so
 * each is computed once, and multiplies by 1 / sum (at most an ulp from dividing). The max
 * ignores NaNs (fmax), but a NaN makes the sum NaN and with it the whole row, as in the
 * work-group kernel. */
#define SM_KEEP 2048

#if defined(K_softmax_fwd) || defined(K_xent_rows)
#define AS_INTV CAT(as_int, VW)
/* exp(d) for d <= 0 (or NaN, kept): Cephes' expf, d = q ln2 + r with |r| <= ln2 / 2, a
 * polynomial of degree 5 in r, times 2^q put in the exponent bits; 0 below -86 (where 2^q
 * would leave the normal range; exp(-86) is 4e-38). About 1 ulp, in about two thirds of
 * the instructions of PoCL's inlined exp (whose rint alone is a long software sequence). */
inline floatv sm_exp(floatv d) {
    /* q = d log2(e) rounded to an integer: adding 1.5 * 2^23 leaves it in the low bits */
    floatv t = d * 1.44269504088896341f + 12582912.0f;
    floatv q = t - 12582912.0f;
    intv qi  = AS_INTV(t) - 0x4b400000;
    floatv r = fma(q, -0.693359375f, d);
    r        = fma(q, 2.12194440e-4f, r);
    floatv p = 1.9875691500e-4f;
    p        = fma(p, r, 1.3981999507e-3f);
    p        = fma(p, r, 8.3334519073e-3f);
    p        = fma(p, r, 4.1665795894e-2f);
    p        = fma(p, r, 1.6666665459e-1f);
    p        = fma(p, r, 5.0000001201e-1f);
    p        = fma(p, r * r, r) + 1.0f;
    floatv e = AS_FLOATV(AS_INTV(p) + (qi << 23));
    e        = select(e, (floatv)0.0f, d < -86.0f);
    return select(e, d, isnan(d));
}

/* sm_exp(z - mx), also kept at ex[j .. j + VW - 1] */
inline floatv sm_exp_keep(floatv z, float mx, float *ex, ulong j) {
    floatv e = sm_exp(z - mx);
    VSTORE(e, 0, ex + j);
    return e;
}
#endif

#ifdef K_softmax_fwd

__kernel void softmax_fwd(CTENSOR(x), TENSOR(y), ulong rows, ulong cols, ulong seq_q, int causal,
                          int logsm, float scale) {
    float ex[SM_KEEP];
    for (ulong r = GID; r < rows; r += GSIZE) {
        ulong nv = visible_cols(causal, r, cols, seq_q), base = r * cols, nvv = nv / VW * VW;
        int keep = !logsm && nv <= SM_KEEP;
        float mx, sum;
#define SM_Z(j) (scale * LDV(x, base + (j)))
        ROW_VMAX(SM_Z, nvv, mx);
        for (ulong j = nvv; j < nv; j++)
            mx = nan_max(mx, scale * LD(x, base + j));
        if (keep) {
#define SM_EK(j) sm_exp_keep(SM_Z(j), mx, ex, (j))
            ROW_VSUM(SM_EK, nvv, sum);
            for (ulong j = nvv; j < nv; j++)
                sum += ex[j] = exp(scale * LD(x, base + j) - mx);
            float inv = 1.0f / sum;
            for (ulong j = 0; j < nvv; j += VW)
                STV(y, base + j, VLOAD(0, ex + j) * inv);
            for (ulong j = nvv; j < nv; j++)
                ST(y, base + j, ex[j] * inv);
        } else {
#define SM_E(j) exp(SM_Z(j) - mx)
            ROW_VSUM(SM_E, nvv, sum);
            for (ulong j = nvv; j < nv; j++)
                sum += exp(scale * LD(x, base + j) - mx);
            float lse = mx + log(sum), inv = 1.0f / sum;
            if (logsm)
                for (ulong j = 0; j < nvv; j += VW)
                    STV(y, base + j, SM_Z(j) - lse);
            else
                for (ulong j = 0; j < nvv; j += VW)
                    STV(y, base + j, SM_E(j) * inv);
            for (ulong j = nvv; j < nv; j++) {
                float z = scale * LD(x, base + j);
                ST(y, base + j, logsm ? z - lse : exp(z - mx) * inv);
            }
        }
        for (ulong j = nv; j < cols; j++)
            ST(y, base + j, logsm ? -INFINITY : 0.0f);
    }
}
#endif

#ifdef K_softmax_bwd
__kernel void softmax_bwd(CTENSOR(y), CTENSOR(dy), TENSOR(dx), ulong rows, ulong cols, ulong seq_q,
                          int causal, int logsm, float scale) {
    for (ulong r = GID; r < rows; r += GSIZE) {
        ulong nv = visible_cols(causal, r, cols, seq_q), base = r * cols, nvv = nv / VW * VW;
        float s;
#define SM_DY(j) LDV(dy, base + (j))
#define SM_DYY(j) (LDV(dy, base + (j)) * LDV(y, base + (j)))
        if (logsm)
            ROW_VSUM(SM_DY, nvv, s);
        else
            ROW_VSUM(SM_DYY, nvv, s);
        for (ulong j = nvv; j < nv; j++)
            s += logsm ? LD(dy, base + j) : LD(dy, base + j) * LD(y, base + j);
        if (logsm)
            for (ulong j = 0; j < nvv; j += VW)
                STV(dx, base + j, scale * (LDV(dy, base + j) - exp(LDV(y, base + j)) * s));
        else
            for (ulong j = 0; j < nvv; j += VW) {
                floatv yj = LDV(y, base + j);
                STV(dx, base + j, scale * yj * (LDV(dy, base + j) - s));
            }
        for (ulong j = nvv; j < nv; j++) {
            float yj = LD(y, base + j), dyj = LD(dy, base + j);
            ST(dx, base + j, logsm ? scale * (dyj - exp(yj) * s) : scale * yj * (dyj - s));
        }
        for (ulong j = nv; j < cols; j++)
            ST(dx, base + j, 0.0f);
    }
}
#endif

#ifdef K_xent_rows
/* exp(x_j - mx) of the row's column j, as the row's sum computed it: sm_exp in the vector
 * part, exp in the tail. */
inline float xent_exp_at(__global const uchar *logits_p, ulong logits_o, ulong base, ulong nvv,
                         ulong j, float mx) {
    if (j >= nvv) return exp(LD(logits, base + j) - mx);
    float lanes[VW];
    VSTORE(sm_exp(LDV(logits, base + j / VW * VW) - mx), 0, lanes);
    return lanes[j % VW];
}

/* One work item per row. An ignored row writes a zero term and zero gradients; a row keeps
 * its exps (up to SM_KEEP columns) for the gradient, computed again for longer rows. The
 * gradient is g * exp * (1 / sum) stored a vector at a time, the label's column then stored
 * again with 1 subtracted before g (so each element is rounded once from the same value the
 * work-group kernel forms, but for the reciprocal). */
__kernel void xent_rows(CTENSOR(logits), FARG(labels), TENSOR(dlogits), int has_dlogits,
                        FARG(scalars), int has_scalars, ulong rows, ulong cols, int ignore_index,
                        float grad_scale, __global float *work) {
    IPTR(labels);
    FPTR(scalars);
    float ex[SM_KEEP];
    float g   = xent_factor(work, has_scalars ? scalars : 0, grad_scale);
    ulong nvv = cols / VW * VW;
    int keep  = cols <= SM_KEEP;
    for (ulong r = GID; r < rows; r += GSIZE) {
        int label  = labels[r];
        ulong base = r * cols;
        if (label == ignore_index) {
            work[1 + r] = 0.0f;
            if (has_dlogits) {
                for (ulong j = 0; j < nvv; j += VW)
                    STV(dlogits, base + j, (floatv)0.0f);
                for (ulong j = nvv; j < cols; j++)
                    ST(dlogits, base + j, 0.0f);
            }
            continue;
        }
        int bad = label < 0 || (ulong)label >= cols;
        float mx, sum;
#define XE_X(j) LDV(logits, base + (j))
        ROW_VMAX(XE_X, nvv, mx);
        for (ulong j = nvv; j < cols; j++)
            mx = nan_max(mx, LD(logits, base + j));
        if (keep) {
#define XE_EK(j) sm_exp_keep(XE_X(j), mx, ex, (j))
            ROW_VSUM(XE_EK, nvv, sum);
            for (ulong j = nvv; j < cols; j++)
                sum += ex[j] = exp(LD(logits, base + j) - mx);
        } else {
#define XE_E(j) sm_exp(XE_X(j) - mx)
            ROW_VSUM(XE_E, nvv, sum);
            for (ulong j = nvv; j < cols; j++)
                sum += exp(LD(logits, base + j) - mx);
        }
        work[1 + r] = bad ? NAN : mx + log(sum) - LD(logits, base + (ulong)label);
        if (!has_dlogits) continue;
        float inv = 1.0f / sum;
        if (keep) {
            for (ulong j = 0; j < nvv; j += VW)
                STV(dlogits, base + j, g * (VLOAD(0, ex + j) * inv));
            for (ulong j = nvv; j < cols; j++)
                ST(dlogits, base + j, g * (ex[j] * inv));
        } else {
            for (ulong j = 0; j < nvv; j += VW)
                STV(dlogits, base + j, g * (XE_E(j) * inv));
            for (ulong j = nvv; j < cols; j++)
                ST(dlogits, base + j, g * (exp(LD(logits, base + j) - mx) * inv));
        }
        if (!bad) {
            float e = xent_exp_at(logits_p, logits_o, base, nvv, (ulong)label, mx);
            ST(dlogits, base + (ulong)label, g * (e * inv - 1.0f));
        }
    }
}
#endif

#else /* GPUs and accelerators: one work-group per row */

#ifdef K_softmax_fwd
__kernel REDUCE_WG void softmax_fwd(CTENSOR(x), TENSOR(y), ulong rows, ulong cols, ulong seq_q,
                                    int causal, int logsm, float scale) {
    __local float red[WG];
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r  = get_group_id(0);
        ulong nv = visible_cols(causal, r, cols, seq_q), base = r * cols;
        float mx = -INFINITY;
        for (ulong j = get_local_id(0); j < nv; j += WG)
            mx = nan_max(mx, scale * LD(x, base + j));
        mx        = wg_max(mx, red);
        float sum = 0.0f;
        for (ulong j = get_local_id(0); j < nv; j += WG)
            sum += exp(scale * LD(x, base + j) - mx);
        sum       = wg_sum(sum, red);
        float lse = mx + log(sum);
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float v;
            if (j >= nv)
                v = logsm ? -INFINITY : 0.0f;
            else {
                float z = scale * LD(x, base + j);
                v       = logsm ? z - lse : exp(z - mx) / sum;
            }
            ST(y, base + j, v);
        }
    }
}
#endif

/* softmax:     dx_j = scale * y_j * (dy_j - sum_k dy_k y_k)
 * log_softmax: dx_j = scale * (dy_j - exp(y_j) * sum_k dy_k);  masked j: dx_j = 0. */
#ifdef K_softmax_bwd
__kernel REDUCE_WG void softmax_bwd(CTENSOR(y), CTENSOR(dy), TENSOR(dx), ulong rows, ulong cols,
                                    ulong seq_q, int causal, int logsm, float scale) {
    __local float red[WG];
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r  = get_group_id(0);
        ulong nv = visible_cols(causal, r, cols, seq_q), base = r * cols;
        float s = 0.0f;
        for (ulong j = get_local_id(0); j < nv; j += WG)
            s += logsm ? LD(dy, base + j) : LD(dy, base + j) * LD(y, base + j);
        s = wg_sum(s, red);
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float v = 0.0f;
            if (j < nv) {
                float yj = LD(y, base + j), dyj = LD(dy, base + j);
                v = logsm ? scale * (dyj - exp(yj) * s) : scale * yj * (dyj - s);
            }
            ST(dx, base + j, v);
        }
    }
}
#endif

/* One work-group per row: the row's reductions run for ignored rows too, so the barriers
 * stay outside any branch (PoCL mishandles barriers in branches); only the writes differ. */
#ifdef K_xent_rows
__kernel REDUCE_WG void xent_rows(CTENSOR(logits), FARG(labels), TENSOR(dlogits), int has_dlogits,
                                  FARG(scalars), int has_scalars, ulong rows, ulong cols,
                                  int ignore_index, float grad_scale, __global float *work) {
    IPTR(labels);
    FPTR(scalars);
    __local float red[WG];
    float g = xent_factor(work, has_scalars ? scalars : 0, grad_scale);
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r     = get_group_id(0);
        int label   = labels[r];
        ulong base  = r * cols;
        int ignored = label == ignore_index;
        int bad     = !ignored && (label < 0 || (ulong)label >= cols);
        float mx    = -INFINITY;
        for (ulong j = get_local_id(0); j < cols; j += WG)
            mx = nan_max(mx, LD(logits, base + j));
        mx        = wg_max(mx, red);
        float sum = 0.0f;
        for (ulong j = get_local_id(0); j < cols; j += WG)
            sum += exp(LD(logits, base + j) - mx);
        sum = wg_sum(sum, red);
        if (get_local_id(0) == 0)
            work[1 + r] = ignored ? 0.0f
                          : bad   ? NAN
                                  : mx + log(sum) - LD(logits, base + (ulong)label);
        if (has_dlogits)
            for (ulong j = get_local_id(0); j < cols; j += WG) {
                float p = 0.0f;
                if (!ignored) {
                    p = exp(LD(logits, base + j) - mx) / sum;
                    if (!bad && j == (ulong)label) p -= 1.0f;
                    p = g * p;
                }
                ST(dlogits, base + j, p);
            }
    }
}
#endif
#endif /* ROW_ITEMS */
