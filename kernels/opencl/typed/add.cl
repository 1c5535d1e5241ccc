/* add.cl — ADD (add, axpby, bias-add) and MUL: one f32 expression per element, rounded once
 * to y, VW elements per step. In place is safe: each work item reads its elements before
 * writing them, and with broadcast_b the row of b is only read (y may alias b only without
 * broadcast). Built per (T_a, T_b, T_y). */
#ifdef K_add
__kernel void add(CTENSOR(a), CTENSOR(b), TENSOR(y), ulong n, ulong cols, int broadcast_b,
                  float alpha, float beta, int mul) {
    ulong nv = n / VW;
    /* a vector of b is contiguous unless a broadcast row ends inside it */
    int b_vec = !broadcast_b || cols % VW == 0;
    if (!broadcast_b) { /* the common case, with no index arithmetic or branch per vector */
        if (mul) {
            FOR_VECS (j, nv)
                STV(y, j * VW, LDV(a, j * VW) * LDV(b, j * VW));
        } else {
            FOR_VECS (j, nv)
                STV(y, j * VW, alpha * LDV(a, j * VW) + beta * LDV(b, j * VW));
        }
    }
    if (broadcast_b)
        FOR_VECS (j, nv) {
            ulong i   = j * VW;
            floatv va = LDV(a, i), vb;
            if (b_vec)
                vb = LDV(b, broadcast_b ? i % cols : i);
            else {
                float lanes[VW];
                for (int l = 0; l < VW; l++)
                    lanes[l] = LD(b, (i + l) % cols);
                vb = VLOAD(0, lanes);
            }
            STV(y, i, mul ? va * vb : alpha * va + beta * vb);
        }
    for (ulong i = nv * VW + GID; i < n; i += GSIZE) {
        float va = LD(a, i);
        float vb = LD(b, broadcast_b ? i % cols : i);
        ST(y, i, mul ? va * vb : alpha * va + beta * vb);
    }
}
#endif
