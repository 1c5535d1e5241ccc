/* scale.cl — SCALE: y = alpha x, VW elements per step. Built per (T_x, T_y). */
#ifdef K_scale
__kernel void scale(CTENSOR(x), TENSOR(y), ulong n, float alpha) {
    ulong nv = n / VW;
    FOR_VECS (j, nv)
        STV(y, j * VW, alpha * LDV(x, j * VW));
    for (ulong i = nv * VW + GID; i < n; i += GSIZE)
        ST(y, i, alpha * LD(x, i));
}
#endif
