/* reduce.cl — REDUCE: y[r] = sum (or mean) of row r, one work-group per row, f32 partial
 * sums combined in a fixed tree. */
__kernel REDUCE_WG void reduce(CTENSOR(x), TENSOR(y), ulong rows, ulong cols, int mean) {
    __local float red[WG];
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r = get_group_id(0);
        float s = 0.0f;
        for (ulong j = get_local_id(0); j < cols; j += WG)
            s += LD(x, r * cols + j);
        s = wg_sum(s, red);
        if (get_local_id(0) == 0) ST(y, r, mean ? (cols ? s / (float)cols : NAN) : s);
    }
}
