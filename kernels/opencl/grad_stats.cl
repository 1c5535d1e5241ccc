/* grad_stats.cl — GRAD_STATS, one work-group per tensor (one launch each): max |g| and the
 * counts (NaNs apart, when asked) are exact; mean and RMS of the finite values from f32 sums over the group.
 * Zero, tiny and non-finite are decided on the bits, so a device that flushes denormals
 * still counts an f32 subnormal as below the smallest normal, not as zero. */
__kernel REDUCE_WG void grad_stats(CTENSOR(g), ulong n, uint tiny_bits, FARG(stats), FARG(counts),
                                   FARG(nans), uint want_nans) {
    FPTR(stats);
    IPTR(counts);
    IPTR(nans);
    __local float red[WG];
    __local uint redu[WG];
    float mx = 0.0f, sum = 0.0f, sumsq = 0.0f;
    uint finite = 0, zeros = 0, tiny = 0, nonfinite = 0, nan = 0;
    for (ulong i = get_local_id(0); i < n; i += WG) {
        float v = LD(g, i);
        uint ab = as_uint(v) & 0x7fffffffu;
        if (ab >= 0x7f800000u) {
            nonfinite++;
            nan += ab > 0x7f800000u;
            continue;
        }
        finite++;
        float av = as_float(ab);
        if (ab == 0u)
            zeros++;
        else if (ab < tiny_bits)
            tiny++;
        if (ab > as_uint(mx)) mx = av;
        sum += v;
        sumsq += v * v;
    }
    /* max of non-negative finite floats: compare as integers */
    redu[get_local_id(0)] = as_uint(mx);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (get_local_id(0) < s)
            redu[get_local_id(0)] = max(redu[get_local_id(0)], redu[get_local_id(0) + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = as_float(redu[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    sum       = wg_sum(sum, red);
    sumsq     = wg_sum(sumsq, red);
    finite    = wg_sum_u(finite, redu);
    zeros     = wg_sum_u(zeros, redu);
    tiny      = wg_sum_u(tiny, redu);
    nonfinite = wg_sum_u(nonfinite, redu);
    nan       = wg_sum_u(nan, redu);
    if (get_local_id(0) == 0) {
        stats[0]  = mx;
        stats[1]  = finite ? sum / (float)finite : 0.0f;
        stats[2]  = finite ? sqrt(sumsq / (float)finite) : 0.0f;
        stats[3]  = (float)n;
        counts[0] = (int)zeros;
        counts[1] = (int)tiny;
        counts[2] = (int)nonfinite;
        if (want_nans) nans[0] = (int)nan; /* (optional, ABI 1.2) the NaNs among them */
    }
}
