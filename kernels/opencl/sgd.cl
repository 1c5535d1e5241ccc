/* sgd.cl — SGD (PyTorch torch.optim.SGD), one launch per tensor after opt_begin:
 *   g = c grad + wd p;  buf = (first step ? g : momentum buf + (1 - dampening) g);
 *   g = nesterov ? g + momentum buf : buf;  p -= lr g;  copy = round(p).
 * A skipped step (work[0] == 0) writes nothing. */
__kernel void sgd(FARG(p), CTENSOR(g), FARG(buf), TENSOR(copy), int has_copy, ulong n, float wd,
                  float momentum, float dampening, int nesterov, int stochastic, ulong seed,
                  __global const float *work) {
    __global const int *iwork = (__global const int *)work;
    if (iwork[0] == 0) return;
    FPTR(p);
    FPTR(buf);
    wide_t lr = work[1], momentum_ = momentum, wd_ = wd;
    float c   = work[2];
    int first = iwork[3] == 0;
    for (ulong i = GID; i < n; i += GSIZE) {
        float gr = LD(g, i);
        if (c != 1.0f) gr = c * gr;
        wide_t pv = p[i], gv = gr;
        if (wd != 0.0f) gv += wd_ * pv;
        if (momentum != 0.0f) {
            wide_t b =
                first ? gv : momentum_ * (wide_t)buf[i] + ((wide_t)1 - (wide_t)dampening) * gv;
            buf[i] = (float)b;
            gv     = nesterov ? gv + momentum_ * b : b;
        }
        float pn = (float)(pv - lr * gv);
        p[i]     = pn;
        if (has_copy) {
            if (stochastic)
                st_elem_sr(copy_p + copy_o, copy_dt, i, pn, hash32(seed, i));
            else
                ST(copy, i, pn);
        }
    }
}
