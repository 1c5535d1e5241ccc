/* softmax.cl — SOFTMAX_FWD and SOFTMAX_BWD, one work-group per row. z = scale * x with the
 * causal mask (-inf past the query's position), the row max subtracted before exp, sums in
 * f32 over the group in a fixed tree order. */

/* Columns of row r that the causal mask leaves visible: j <= (r mod seq_q) + cols - seq_q. */
inline ulong visible_cols(int causal, ulong r, ulong cols, ulong seq_q) {
    return causal ? (r % seq_q) + (cols - seq_q) + 1 : cols;
}

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
