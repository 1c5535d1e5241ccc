/* amp_pass.cl — AMP_PASS (ABI 1.4), one work-group per tensor (one launch each, in list order
 * on the stream): over one read of each value, GRAD_STATS of the value as read (common.cl's
 * gstats), the unscale and non-finite check of typed/amp.cl, and the square of the value as
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
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    __local float red[WG];
    __local uint redu[WG];
    int multiply    = s->mode != AMPX_KM_SCALER_NONE;
    float inv_scale = ampx_km_inv_scale(s->scale);
    float sqs       = 0.0f;
    uint bad        = 0;
    gstats st       = gstats_zero();
    for (ulong i = get_local_id(0); i < n; i += WG) {
        float v = LD(g, i);
        gstats_add(&st, v, tiny_bits);
        if (multiply) {
            ST(g, i, v * inv_scale);
            v = LD(g, i); /* check the value as stored */
        }
        bad |= !is_finite_bits(v);
        sqs += v * v;
    }
    bad = wg_sum_u(bad, redu);
    if (sq_mode) sqs = wg_sum(sqs, red);
    if (want) gstats_reduce(&st, red, redu);
    if (get_local_id(0) == 0) {
        flag[0] = bad != 0;
        if (bad) s->found_inf = 1;
        if (sq_mode) sq[0] = (sq_mode == 1 ? 0.0f : sq[0]) + sqs;
        gstats_store(&st, n, want, stats, counts, nans);
    }
}
