/* add.cl — ADD (add, axpby, bias-add), MUL and SCALE: one f32 expression per element,
 * rounded once to y. In place is safe: each work item reads its element before writing it,
 * and with broadcast_b the row of b is only read (y may alias b only without broadcast). */
__kernel void add(CTENSOR(a), CTENSOR(b), TENSOR(y), ulong n, ulong cols, int broadcast_b,
                  float alpha, float beta, int mul) {
    for (ulong i = GID; i < n; i += GSIZE) {
        float va = LD(a, i);
        float vb = LD(b, broadcast_b ? i % cols : i);
        ST(y, i, mul ? va * vb : alpha * va + beta * vb);
    }
}

__kernel void scale(CTENSOR(x), TENSOR(y), ulong n, float alpha) {
    for (ulong i = GID; i < n; i += GSIZE)
        ST(y, i, alpha * LD(x, i));
}
