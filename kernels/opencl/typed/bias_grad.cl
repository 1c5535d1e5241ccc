/* bias_grad.cl — BIAS_GRAD: db[c] = (accumulate ? db[c] : 0) + sum_r dy[r, c]. Each column's
 * rows are summed in order in f32, so the result does not depend on the launch: VW columns
 * per work item as one vector (consecutive columns of each row are one load; one item per
 * column read each row's element alone), then the cols % VW last columns one per item. */
#ifdef K_bias_grad
__kernel void bias_grad(CTENSOR(dy), TENSOR(db), ulong rows, ulong cols, int accumulate) {
    const ulong nv = cols / VW;
    for (ulong v = GID; v < nv; v += GSIZE) {
        floatv s = (floatv)(0.0f);
        for (ulong r = 0; r < rows; r++)
            s += LDV(dy, r * cols + v * VW);
        if (accumulate) s += LDV(db, v * VW);
        STV(db, v * VW, s);
    }
    for (ulong c = nv * VW + GID; c < cols; c += GSIZE) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++)
            s += LD(dy, r * cols + c);
        if (accumulate) s += LD(db, c);
        ST(db, c, s);
    }
}
#endif
