/* bias_grad.cl — BIAS_GRAD: db[c] = (accumulate ? db[c] : 0) + sum_r dy[r, c]. One work item
 * per column sums its rows in order in f32, so the result does not depend on the launch. */
#ifdef K_bias_grad
__kernel void bias_grad(CTENSOR(dy), TENSOR(db), ulong rows, ulong cols, int accumulate) {
    for (ulong c = GID; c < cols; c += GSIZE) {
        float s = 0.0f;
        for (ulong r = 0; r < rows; r++)
            s += LD(dy, r * cols + c);
        if (accumulate) s += LD(db, c);
        ST(db, c, s);
    }
}
#endif
