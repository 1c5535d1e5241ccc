/* grad_stats.cl — GRAD_STATS, one work-group per tensor (one launch each), through common.cl's
 * gstats: the NaN count only when asked (ABI 1.2). */
__kernel REDUCE_WG void grad_stats(CTENSOR(g), ulong n, uint tiny_bits, FARG(stats), FARG(counts),
                                   FARG(nans), uint want_nans) {
    FPTR(stats);
    IPTR(counts);
    IPTR(nans);
    __local float red[WG];
    __local uint redu[WG];
    gstats st = gstats_zero();
    for (ulong i = get_local_id(0); i < n; i += WG)
        gstats_add(&st, LD(g, i), tiny_bits);
    gstats_reduce(&st, red, redu);
    if (get_local_id(0) == 0) gstats_store(&st, n, 3u | (want_nans ? 4u : 0u), stats, counts, nans);
}
