/* softmax_xent.cl — SOFTMAX_XENT in three kernels on the stream, so the host never waits:
 * xent_count counts the valid rows, xent_rows computes each row's loss term and logit
 * gradient (one work-group per row), xent_loss sums the terms in a fixed order.
 * work[0] = n_valid (as float bits of an int), work[1 ..] = per-row terms. */

__kernel REDUCE_WG void xent_count(FARG(labels), ulong rows, int ignore_index, __global int *work) {
    IPTR(labels);
    __local uint red[WG];
    uint c = 0;
    for (ulong r = get_local_id(0); r < rows; r += WG)
        c += labels[r] != ignore_index;
    c = wg_sum_u(c, red);
    if (get_local_id(0) == 0) work[0] = (int)c;
}

__kernel REDUCE_WG void xent_rows(CTENSOR(logits), FARG(labels), TENSOR(dlogits), int has_dlogits,
                                  FARG(scalars), int has_scalars, ulong rows, ulong cols,
                                  int ignore_index, float grad_scale, __global float *work) {
    IPTR(labels);
    FPTR(scalars);
    __local float red[WG];
    int n_valid  = ((__global const int *)work)[0];
    float lscale = has_scalars ? scalars[0] : 1.0f;
    float g      = n_valid ? (float)((wide_t)grad_scale / (wide_t)n_valid * (wide_t)lscale) : 0.0f;
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r    = get_group_id(0);
        int label  = labels[r];
        ulong base = r * cols;
        /* The row's reductions run for ignored rows too, so the barriers stay outside any
         * branch (PoCL mishandles barriers in branches); only the writes differ. */
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

__kernel REDUCE_WG void xent_loss(__global const float *work, ulong rows, FARG(loss)) {
    FPTR(loss);
    __local float red[WG];
    float s = 0.0f;
    for (ulong r = get_local_id(0); r < rows; r += WG)
        s += work[1 + r];
    s           = wg_sum(s, red);
    int n_valid = ((__global const int *)work)[0];
    if (get_local_id(0) == 0) loss[0] = n_valid ? s / (float)n_valid : 0.0f;
}
