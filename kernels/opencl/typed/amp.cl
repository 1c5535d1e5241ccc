/* amp.cl — UNSCALE_CHECK per gradient tensor: g = round(g * inv_scale) in place, VW elements
 * per step, inv_scale computed in double (as PyTorch) where the device has it, else by a
 * correctly rounded f32 division, which gives the same float. A non-finite stored value sets
 * the tensor's flag and found_inf. The flags of the call are zeroed first by
 * unscale_clear_flags (unscale_check.cl) on the same stream. Built per T_g. */
#ifdef K_unscale_check
inline intv nonfinite_v(floatv v) {
    return (AS_UINTV(v) & 0x7f800000u) == 0x7f800000u;
}

/* Elements i0, i0 + step, ... below i1 one at a time (the tails): unscaled in place when
 * multiply, checked as stored; 1 if any is not finite. */
inline int unscale_elems(TENSOR(g), ulong i0, ulong i1, ulong step, float inv_scale, int multiply) {
    int bad = 0;
    for (ulong i = i0; i < i1; i += step) {
        float v = LD(g, i);
        if (multiply) {
            ST(g, i, v * inv_scale);
            v = LD(g, i);
        }
        bad |= !is_finite_bits(v);
    }
    return bad;
}

inline void unscale_flag(int bad, __global int *flags, __global ampx_scalars *s) {
    if (bad) {
        flags[0]     = 1; /* every writer writes the same 1: the race is benign */
        s->found_inf = 1;
    }
}

#ifdef ROW_ITEMS
/* CPU devices: one work item per chunk of `chunk` elements (amp.c's AMP_CHUNK, a multiple of
 * VW), the chunk's vectors in order, so each item reads one contiguous run with vector loads
 * and reduces its flag lanes once. */
__kernel void unscale_check(TENSOR(g), ulong n, ulong chunk, FARG(flags), FARG(scalars)) {
    IPTR(flags);
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    int multiply             = s->mode != AMPX_KM_SCALER_NONE;
    float inv_scale          = ampx_km_inv_scale(s->scale);
    for (ulong c = GID; c * chunk < n; c += GSIZE) {
        ulong i0 = c * chunk, i1 = min(n, i0 + chunk), iv = i0 + (i1 - i0) / VW * VW;
        intv badv = 0;
        if (multiply)
            for (ulong i = i0; i < iv; i += VW) {
                floatv x = LDV(g, i) * inv_scale;
                STV(g, i, x);
                badv |= nonfinite_v(STORED(g, x)); /* the value as stored */
            }
        else
            for (ulong i = i0; i < iv; i += VW)
                badv |= nonfinite_v(LDV(g, i));
        int bad = any(badv) | unscale_elems(g_p, g_o, iv, i1, 1, inv_scale, multiply);
        unscale_flag(bad, flags, s);
    }
}
#else
/* Elsewhere: grid-stride over vectors (chunk unused). */
__kernel void unscale_check(TENSOR(g), ulong n, ulong chunk, FARG(flags), FARG(scalars)) {
    IPTR(flags);
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    int multiply             = s->mode != AMPX_KM_SCALER_NONE;
    float inv_scale          = ampx_km_inv_scale(s->scale);
    ulong nv                 = n / VW;
    intv badv                = 0;
    if (multiply)
        for (ulong j = GID; j < nv; j += GSIZE) {
            STV(g, j * VW, LDV(g, j * VW) * inv_scale);
            badv |= nonfinite_v(LDV(g, j * VW)); /* the value as stored */
        }
    else
        for (ulong j = GID; j < nv; j += GSIZE)
            badv |= nonfinite_v(LDV(g, j * VW));
    int bad = any(badv) | unscale_elems(g_p, g_o, nv * VW + GID, n, GSIZE, inv_scale, multiply);
    unscale_flag(bad, flags, s);
}
#endif
#endif
