/* cast.cl — CAST: dst[i] = src[i] widened exactly to f32, then rounded to dst's dtype to
 * nearest even, VW elements at a time, or stochastically with rnd = hash32(seed, i) (the
 * same stream as dtype.h, so every backend rounds each element identically), one at a time.
 * Built per (T_src, T_dst). */
#ifdef K_cast
__kernel void cast(CTENSOR(src), TENSOR(dst), ulong n, int stochastic, ulong seed) {
    if (stochastic) {
        for (ulong i = GID; i < n; i += GSIZE)
            st_elem_sr(dst_p + dst_o, CAT(DT_ID_, T_dst), i, LD(src, i), hash32(seed, i));
        return;
    }
    ulong nv = n / VW;
    FOR_VECS (j, nv)
        STV(dst, j * VW, LDV(src, j * VW));
    for (ulong i = nv * VW + GID; i < n; i += GSIZE)
        ST(dst, i, LD(src, i));
}
#endif
