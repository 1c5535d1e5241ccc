/* adamw.cl — AdamW (PyTorch torch.optim.AdamW), one launch per tensor after opt_begin,
 * t = applied_steps + 1 (bias corrections from opt_begin):
 *   g = c grad;  p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps);  copy = round(p).
 * A skipped step (work[0] == 0) writes nothing. */
__kernel void adamw(FARG(p), CTENSOR(g), FARG(m), FARG(v), TENSOR(copy), int has_copy, ulong n,
                    float wd, float beta1, float beta2, float eps, int stochastic, ulong seed,
                    __global const float *work) {
    __global const int *iwork = (__global const int *)work;
    if (iwork[0] == 0) return;
    FPTR(p);
    FPTR(m);
    FPTR(v);
    float lr   = work[1];
    float c    = work[2];
    wide_t bc1 = work[4], bc2 = work[5], b1 = beta1, b2 = beta2;
    wide_t decay = (float)((wide_t)1 - (wide_t)lr * (wide_t)wd);
    for (ulong i = GID; i < n; i += GSIZE) {
        float gr = LD(g, i);
        if (c != 1.0f) gr = c * gr;
        wide_t gv = gr;
        wide_t pv = (wide_t)p[i] * decay;
        float mn  = (float)(b1 * (wide_t)m[i] + ((wide_t)1 - b1) * gv);
        float vn  = (float)(b2 * (wide_t)v[i] + ((wide_t)1 - b2) * gv * gv);
        wide_t up = (wide_t)lr * ((wide_t)mn / bc1) / (sqrt((wide_t)vn / bc2) + (wide_t)eps);
        float pn  = (float)(pv - up);
        m[i]      = mn;
        v[i]      = vn;
        p[i]      = pn;
        if (has_copy) {
            if (stochastic)
                st_elem_sr(copy_p + copy_o, copy_dt, i, pn, hash32(seed, i));
            else
                ST(copy, i, pn);
        }
    }
}
