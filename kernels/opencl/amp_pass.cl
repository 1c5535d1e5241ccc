/* amp_pass.cl — AMP_PASS (ABI 1.4), one work-group per tensor (one launch each, in list order
 * on the stream): over one read of each value, GRAD_STATS of the value as read (grad_stats.cl's
 * loop), the unscale and non-finite check of unscale_check.cl, and the square of the value as
 * stored summed as sum_squares.cl sums it. Each work item visits the elements sum_squares and
 * grad_stats give it and the group reduces in their fixed tree order, so the op gives the bits
 * of those kernels run one after the other. `want`: 1 stats, 2 counts, 4 nans (buffers not
 * wanted are placeholders, never written); sq_mode: 0 no square sum, 1 out = s, 2 out += s. */
__kernel REDUCE_WG void amp_pass(TENSOR(g), ulong n, uint tiny_bits, FARG(flag), FARG(scalars),
                                 FARG(sq), int sq_mode, FARG(stats), FARG(counts), FARG(nans),
                                 uint want) {
    IPTR(flag);
    FPTR(sq);
    FPTR(stats);
    IPTR(counts);
    IPTR(nans);
    __global scalars_t *s = (__global scalars_t *)(scalars_p + scalars_o);
    __local float red[WG];
    __local uint redu[WG];
    int multiply    = s->mode != SCALER_NONE;
    float inv_scale = (float)((wide_t)1.0 / (wide_t)s->scale);
    float mx = 0.0f, sum = 0.0f, sumsq = 0.0f, sqs = 0.0f;
    uint finite = 0, zeros = 0, tiny = 0, nonfinite = 0, nan = 0, bad = 0;
    for (ulong i = get_local_id(0); i < n; i += WG) {
        float v = LD(g, i);
        uint ab = as_uint(v) & 0x7fffffffu;
        if (ab >= 0x7f800000u) {
            nonfinite++;
            nan += ab > 0x7f800000u;
        } else {
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
        if (multiply) {
            ST(g, i, v * inv_scale);
            v = LD(g, i); /* check the value as stored */
        }
        bad |= !is_finite_bits(v);
        sqs += v * v;
    }
    bad = wg_sum_u(bad, redu);
    if (sq_mode) sqs = wg_sum(sqs, red);
    if (want) {
        redu[get_local_id(0)] = as_uint(mx);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = WG / 2; k > 0; k >>= 1) {
            if (get_local_id(0) < k)
                redu[get_local_id(0)] = max(redu[get_local_id(0)], redu[get_local_id(0) + k]);
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
    }
    if (get_local_id(0) == 0) {
        flag[0] = bad != 0;
        if (bad) s->found_inf = 1;
        if (sq_mode) sq[0] = (sq_mode == 1 ? 0.0f : sq[0]) + sqs;
        if (want & 1) {
            stats[0] = mx;
            stats[1] = finite ? sum / (float)finite : 0.0f;
            stats[2] = finite ? sqrt(sumsq / (float)finite) : 0.0f;
            stats[3] = (float)n;
        }
        if (want & 2) {
            counts[0] = (int)zeros;
            counts[1] = (int)tiny;
            counts[2] = (int)nonfinite;
        }
        if (want & 4) nans[0] = (int)nan;
    }
}
