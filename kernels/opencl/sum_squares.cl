/* sum_squares.cl — SUM_SQUARES, one launch per tensor of the list, in list order on the
 * stream: out[0] = (first && !accumulate ? 0 : out[0]) + sum of x^2 over the tensor. */
__kernel REDUCE_WG void sum_squares(CTENSOR(x), ulong n, FARG(out), int start_from_zero) {
    FPTR(out);
    __local float red[WG];
    float s = 0.0f;
    for (ulong i = get_local_id(0); i < n; i += WG) {
        float v = LD(x, i);
        s += v * v;
    }
    s = wg_sum(s, red);
    if (get_local_id(0) == 0) out[0] = (start_from_zero ? 0.0f : out[0]) + s;
}
