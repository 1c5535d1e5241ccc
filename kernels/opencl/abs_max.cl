/* abs_max.cl — ABS_MAX for one tensor of the list (one launch per tensor, a grid of
 * work-groups): out[0], cleared to 0 first, becomes its largest |x| with NaN above inf. The
 * values widen exactly to f32, whose magnitudes order as their bits do (+inf, then the NaNs,
 * above every finite value), so each item takes the maximum of the bits without the sign (a
 * NaN as the quiet 0x7FC00000), each group reduces them and folds its result into out with
 * atomic_max on those bits: a maximum, so the order of the groups does not matter. */
__kernel REDUCE_WG void abs_max(CTENSOR(x), ulong n, FARG(out)) {
    __local int red[WG];
    int m = 0;
    for (ulong i = GID; i < n; i += GSIZE) {
        uint v = as_uint(LD(x, i)) & 0x7fffffffu;
        m      = max(m, (int)(v > 0x7f800000u ? 0x7fc00000u : v));
    }
    m = wg_max_i(m, red);
    if (get_local_id(0) == 0 && m > 0) atomic_max((__global int *)(out_p + out_o), m);
}
