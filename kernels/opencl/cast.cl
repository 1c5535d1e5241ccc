/* cast.cl — CAST: dst[i] = src[i] widened exactly to f32, then rounded to dst's dtype to
 * nearest even, or stochastically with rnd = hash32(seed, i) (the same stream as dtype.h,
 * so every backend rounds each element identically). */
__kernel void cast(CTENSOR(src), TENSOR(dst), ulong n, int stochastic, ulong seed) {
    for (ulong i = GID; i < n; i += GSIZE) {
        float v = LD(src, i);
        if (stochastic)
            st_elem_sr(dst_p + dst_o, dst_dt, i, v, hash32(seed, i));
        else
            ST(dst, i, v);
    }
}
