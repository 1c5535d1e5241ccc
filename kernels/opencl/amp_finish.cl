/* amp_finish.cl — the end of GRAD_STATS, SUM_SQUARES and AMP_PASS: one work item combines the
 * chunk records that typed/amp_reduce.cl wrote for every tensor of the call, in chunk order
 * (the first record, then each next one added to it), tensor by tensor in list order, and
 * stores what `want` asks: 1 stats {max, mean, rms, n}, 2 counts, 4 NaN counts (per tensor,
 * common.cl's gstats_store), 8 the sum of squares (sq[0] = (sq_accumulate ? sq[0] : 0) + s_0
 * + s_1 + ..., the tensors added one at a time as a launch per tensor did), 16 the flags of
 * AMP_PASS (flags[t] = a stored value of tensor t was non-finite; found_inf set if any).
 *
 * `part` holds two words per tensor (its n, written by its chunk 0), then the records, each
 * tensor's max(1, ceil(n / chunk)) records after the previous tensor's. The order of every
 * addition is fixed by the sizes alone, and the three ops share it, so AMP_PASS gives the
 * bits of the separate ops. */
__kernel void amp_finish(FARG(part), uint count, ulong chunk, uint want, FARG(stats), FARG(counts),
                         FARG(nans), FARG(sq), int sq_accumulate, FARG(flags), FARG(scalars)) {
    if (get_global_id(0) != 0) return;
    __global const uint *hdr = (__global const uint *)(part_p + part_o);
    __global const uint *rec = hdr + 2 * (ulong)count;
    FPTR(stats);
    IPTR(counts);
    IPTR(nans);
    FPTR(sq);
    IPTR(flags);
    float acc = (want & 8) && sq_accumulate ? sq[0] : 0.0f;
    uint any  = 0;
    for (uint t = 0; t < count; t++) {
        ulong n  = (ulong)hdr[2 * t] | ((ulong)hdr[2 * t + 1] << 32);
        ulong nc = max((n + chunk - 1) / chunk, (ulong)1);
        gstats st;
        st.mx        = as_float(rec[0]);
        st.sum       = as_float(rec[1]);
        st.sumsq     = as_float(rec[2]);
        float s      = as_float(rec[3]);
        st.finite    = rec[4];
        st.zeros     = rec[5];
        st.tiny      = rec[6];
        st.nonfinite = rec[7];
        st.nan       = rec[8];
        uint bad     = rec[9];
        for (ulong c = 1; c < nc; c++) {
            __global const uint *r = rec + PART_WORDS * c;
            st.mx                  = as_float(max(as_uint(st.mx), r[0]));
            st.sum += as_float(r[1]);
            st.sumsq += as_float(r[2]);
            s += as_float(r[3]);
            st.finite += r[4];
            st.zeros += r[5];
            st.tiny += r[6];
            st.nonfinite += r[7];
            st.nan += r[8];
            bad |= r[9];
        }
        rec += PART_WORDS * nc;
        if (want & 7)
            gstats_store(&st, n, want & 7, stats ? stats + 4 * t : stats,
                         counts ? counts + 3 * t : counts, nans ? nans + t : nans);
        if (want & 8) acc = acc + s;
        if (want & 16) {
            flags[t] = bad != 0;
            any |= bad;
        }
    }
    if (want & 8) sq[0] = acc;
    if (any) ((__global ampx_scalars *)(scalars_p + scalars_o))->found_inf = 1;
}
