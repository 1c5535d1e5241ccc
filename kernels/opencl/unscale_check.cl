/* unscale_check.cl — UNSCALE_CHECK: g = round(g * inv_scale) in place, inv_scale computed in
 * double (as PyTorch) where the device has it, else by a correctly rounded f32 division,
 * which gives the same float. A non-finite stored value sets the tensor's flag and found_inf.
 * The flags of the call are zeroed first by unscale_clear_flags on the same stream. */
__kernel void unscale_clear_flags(FARG(flags), uint count) {
    IPTR(flags);
    for (ulong t = GID; t < count; t += GSIZE)
        flags[t] = 0;
}

__kernel void unscale_check(TENSOR(g), ulong n, FARG(flags), FARG(scalars)) {
    IPTR(flags);
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    int multiply             = s->mode != AMPX_KM_SCALER_NONE;
    float inv_scale          = ampx_km_inv_scale(s->scale);
    int bad                  = 0;
    for (ulong i = GID; i < n; i += GSIZE) {
        float v = LD(g, i);
        if (multiply) {
            ST(g, i, v * inv_scale);
            v = LD(g, i); /* check the value as stored */
        }
        bad |= !is_finite_bits(v);
    }
    if (bad) {
        flags[0]     = 1; /* every writer writes the same 1: the race is benign */
        s->found_inf = 1;
    }
}
