/* abs_max.cl — ABS_MAX for one tensor of the list (one work-group; one launch per tensor):
 * out[0] = its largest |x| with NaN above inf. The values widen exactly to f32, whose
 * magnitudes order as their bits do (+inf, then the NaNs, above every finite value), so the
 * work items take the maximum of the bits without the sign and the group reduces them. */
__kernel REDUCE_WG void abs_max(CTENSOR(x), ulong n, FARG(out)) {
    FPTR(out);
    __local uint red[WG];
    uint lid = get_local_id(0), m = 0;
    for (ulong i = lid; i < n; i += WG)
        m = max(m, as_uint(LD(x, i)) & 0x7fffffffu);
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = max(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) out[0] = as_float(red[0] > 0x7f800000u ? 0x7fc00000u : red[0]);
}
