/* optim.cl — SGD and ADAMW per tensor after opt_begin (scalars.cl), the arithmetic of the
 * PyTorch torch.optim.SGD and AdamW, t = applied_steps + 1 (bias corrections from opt_begin):
 *   SGD:   g = c grad + wd p;  buf = (first step ? g : momentum buf + (1 - dampening) g);
 *          g = nesterov ? g + momentum buf : buf;  p -= lr g;  copy = round(p).
 *   AdamW: g = c grad;  p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *          p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps);  copy = round(p).
 * VW elements per step, each lane the scalar expression's operations in the same order and
 * precision (double where the device has it; no contraction), so the same bits. A skipped
 * step (work[0] == 0) writes nothing. Built per (T_g, T_copy); without a copy T_copy is f32
 * and copy is never written. */
#ifdef AMPX_FP64
typedef CAT(double, VW) widev;
#define TO_WIDEV CAT(convert_double, VW)
#else
typedef floatv widev;
#define TO_WIDEV(x) (x)
#endif
#define TO_FLOATV CAT(convert_float, VW)

/* copy[i .. i + VW - 1] = pn, stochastically rounded lane by lane with rnd = hash32(seed, i) */
inline void st_copy_sr(__global uchar *copy, ulong i, floatv pn, ulong seed) {
    float lanes[VW];
    VSTORE(pn, 0, lanes);
    for (int l = 0; l < VW; l++)
        st_elem_sr(copy, CAT(DT_ID_, T_copy), i + l, lanes[l], hash32(seed, i + l));
}

/* The working copy of the updated values pn at i, when the kernel has one: to nearest, or
 * stochastically; VW values (ST_COPYV) or one (ST_COPY1). */
#define ST_COPYV(i, pn)                                                                            \
    do {                                                                                           \
        if (has_copy && stochastic)                                                                \
            st_copy_sr(copy_p + copy_o, i, pn, seed);                                              \
        else if (has_copy)                                                                         \
            STV(copy, i, pn);                                                                      \
    } while (0)
#define ST_COPY1(i, pn)                                                                            \
    do {                                                                                           \
        if (has_copy && stochastic)                                                                \
            st_elem_sr(copy_p + copy_o, CAT(DT_ID_, T_copy), i, pn, hash32(seed, i));              \
        else if (has_copy)                                                                         \
            ST(copy, i, pn);                                                                       \
    } while (0)

#ifdef K_adamw
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
    wide_t lr_ = lr, eps_ = eps, b1c = (wide_t)1 - b1, b2c = (wide_t)1 - b2;
    ulong nv = n / VW;
    FOR_VECS (j, nv) {
        ulong i   = j * VW;
        floatv gr = LDV(g, i);
        if (c != 1.0f) gr = c * gr;
        widev gv  = TO_WIDEV(gr);
        widev pv  = TO_WIDEV(VLOAD(0, p + i)) * decay;
        floatv mn = TO_FLOATV(b1 * TO_WIDEV(VLOAD(0, m + i)) + b1c * gv);
        floatv vn = TO_FLOATV(b2 * TO_WIDEV(VLOAD(0, v + i)) + b2c * gv * gv);
        widev up  = lr_ * (TO_WIDEV(mn) / bc1) / (sqrt(TO_WIDEV(vn) / bc2) + eps_);
        floatv pn = TO_FLOATV(pv - up);
        VSTORE(mn, 0, m + i);
        VSTORE(vn, 0, v + i);
        VSTORE(pn, 0, p + i);
        ST_COPYV(i, pn);
    }
    for (ulong i = nv * VW + GID; i < n; i += GSIZE) {
        float gr = LD(g, i);
        if (c != 1.0f) gr = c * gr;
        wide_t gv = gr;
        wide_t pv = (wide_t)p[i] * decay;
        float mn  = (float)(b1 * (wide_t)m[i] + b1c * gv);
        float vn  = (float)(b2 * (wide_t)v[i] + b2c * gv * gv);
        wide_t up = lr_ * ((wide_t)mn / bc1) / (sqrt((wide_t)vn / bc2) + eps_);
        float pn  = (float)(pv - up);
        m[i]      = mn;
        v[i]      = vn;
        p[i]      = pn;
        ST_COPY1(i, pn);
    }
}
#endif

#ifdef K_sgd
__kernel void sgd(FARG(p), CTENSOR(g), FARG(buf), TENSOR(copy), int has_copy, ulong n, float wd,
                  float momentum, float dampening, int nesterov, int stochastic, ulong seed,
                  __global const float *work) {
    __global const int *iwork = (__global const int *)work;
    if (iwork[0] == 0) return;
    FPTR(p);
    FPTR(buf);
    wide_t lr = work[1], momentum_ = momentum, wd_ = wd, damp = (wide_t)1 - (wide_t)dampening;
    float c   = work[2];
    int first = iwork[3] == 0;
    ulong nv  = n / VW;
    FOR_VECS (j, nv) {
        ulong i   = j * VW;
        floatv gr = LDV(g, i);
        if (c != 1.0f) gr = c * gr;
        widev pv = TO_WIDEV(VLOAD(0, p + i)), gv = TO_WIDEV(gr);
        if (wd != 0.0f) gv += wd_ * pv;
        if (momentum != 0.0f) {
            widev b = first ? gv : momentum_ * TO_WIDEV(VLOAD(0, buf + i)) + damp * gv;
            VSTORE(TO_FLOATV(b), 0, buf + i);
            gv = nesterov ? gv + momentum_ * b : b;
        }
        floatv pn = TO_FLOATV(pv - lr * gv);
        VSTORE(pn, 0, p + i);
        ST_COPYV(i, pn);
    }
    for (ulong i = nv * VW + GID; i < n; i += GSIZE) {
        float gr = LD(g, i);
        if (c != 1.0f) gr = c * gr;
        wide_t pv = p[i], gv = gr;
        if (wd != 0.0f) gv += wd_ * pv;
        if (momentum != 0.0f) {
            wide_t b = first ? gv : momentum_ * (wide_t)buf[i] + damp * gv;
            buf[i]   = (float)b;
            gv       = nesterov ? gv + momentum_ * b : b;
        }
        float pn = (float)(pv - lr * gv);
        p[i]     = pn;
        ST_COPY1(i, pn);
    }
}
#endif
