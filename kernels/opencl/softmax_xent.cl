/* softmax_xent.cl — SOFTMAX_XENT in three kernels on the stream, so the host never waits:
 * xent_count counts the valid rows, xent_rows (typed/softmax.cl, built per dtype) computes
 * each row's loss term and logit gradient, xent_loss sums the terms in a fixed order.
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
