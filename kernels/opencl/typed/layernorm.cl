/* layernorm.cl — LAYERNORM_FWD and LAYERNORM_BWD: one work item per row on CPU devices
 * (ROW_ITEMS), one work-group per row elsewhere; statistics in f32 with the mean subtracted
 * before the variance (two passes, no cancellation).
 * layernorm_params sums dgamma/dbeta over rows, one work item per column, in row order. */

#ifdef ROW_ITEMS
/* CPU devices: one work item per row (rows strided over the launch), VW columns per step
 * with vector loads, sums in four vector accumulators (common.cl's ROW_VSUM), no barriers. */

#ifdef K_layernorm_fwd
inline floatv ln_sq(floatv d) {
    return d * d;
}

__kernel void layernorm_fwd(CTENSOR(x), TENSOR(y), FARG(gamma), FARG(beta), FARG(mean), FARG(rstd),
                            ulong rows, ulong cols, float eps) {
    FPTR(gamma);
    FPTR(beta);
    FPTR(mean);
    FPTR(rstd);
    ulong cv = cols / VW * VW;
    for (ulong r = GID; r < rows; r += GSIZE) {
        ulong base = r * cols;
        float s, q;
#define LN_X(j) LDV(x, base + (j))
        ROW_VSUM(LN_X, cv, s);
        for (ulong j = cv; j < cols; j++)
            s += LD(x, base + j);
        float mu = s / (float)cols;
#define LN_D2(j) ln_sq(LDV(x, base + (j)) - mu)
        ROW_VSUM(LN_D2, cv, q);
        for (ulong j = cv; j < cols; j++) {
            float d = LD(x, base + j) - mu;
            q += d * d;
        }
        float var = q / (float)cols;
        float rs  = 1.0f / sqrt(var + eps);
        mean[r]   = mu;
        rstd[r]   = rs;
        for (ulong j = 0; j < cv; j += VW) {
            floatv v = (LDV(x, base + j) - mu) * rs;
            if (gamma) v = v * VLOAD(0, gamma + j);
            if (beta) v = v + VLOAD(0, beta + j);
            STV(y, base + j, v);
        }
        for (ulong j = cv; j < cols; j++) {
            float v = (LD(x, base + j) - mu) * rs;
            if (gamma) v = v * gamma[j];
            if (beta) v = v + beta[j];
            ST(y, base + j, v);
        }
    }
}
#endif

#ifdef K_layernorm_bwd
/* g = dy gamma for the VW columns at j */
inline floatv ln_gv(floatv dy, __global const float *gamma, ulong j) {
    return gamma ? dy * VLOAD(0, gamma + j) : dy;
}

__kernel void layernorm_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), FARG(gamma), FARG(mean),
                            FARG(rstd), ulong rows, ulong cols) {
    FPTR(gamma);
    FPTR(mean);
    FPTR(rstd);
    ulong cv = cols / VW * VW;
    for (ulong r = GID; r < rows; r += GSIZE) {
        ulong base = r * cols;
        float mu = mean[r], rs = rstd[r];
        float sg, sgx;
#define LN_G(j) ln_gv(LDV(dy, base + (j)), gamma, (j))
#define LN_GX(j) (LN_G(j) * ((LDV(x, base + (j)) - mu) * rs))
        ROW_VSUM(LN_G, cv, sg);
        ROW_VSUM(LN_GX, cv, sgx);
        for (ulong j = cv; j < cols; j++) {
            float g = LD(dy, base + j) * (gamma ? gamma[j] : 1.0f);
            sg += g;
            sgx += g * ((LD(x, base + j) - mu) * rs);
        }
        float mg = sg / (float)cols, mgx = sgx / (float)cols;
        for (ulong j = 0; j < cv; j += VW) {
            floatv g    = ln_gv(LDV(dy, base + j), gamma, j);
            floatv xhat = (LDV(x, base + j) - mu) * rs;
            STV(dx, base + j, rs * (g - mg - xhat * mgx));
        }
        for (ulong j = cv; j < cols; j++) {
            float g    = LD(dy, base + j) * (gamma ? gamma[j] : 1.0f);
            float xhat = (LD(x, base + j) - mu) * rs;
            ST(dx, base + j, rs * (g - mg - xhat * mgx));
        }
    }
}
#endif

#else /* GPUs and accelerators: one work-group per row */

#ifdef K_layernorm_fwd
__kernel REDUCE_WG void layernorm_fwd(CTENSOR(x), TENSOR(y), FARG(gamma), FARG(beta), FARG(mean),
                                      FARG(rstd), ulong rows, ulong cols, float eps) {
    FPTR(gamma);
    FPTR(beta);
    FPTR(mean);
    FPTR(rstd);
    __local float red[WG];
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r    = get_group_id(0);
        ulong base = r * cols;
        float s    = 0.0f;
        for (ulong j = get_local_id(0); j < cols; j += WG)
            s += LD(x, base + j);
        float mu = wg_sum(s, red) / (float)cols;
        float q  = 0.0f;
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float d = LD(x, base + j) - mu;
            q += d * d;
        }
        float var = wg_sum(q, red) / (float)cols;
        float rs  = 1.0f / sqrt(var + eps);
        if (get_local_id(0) == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float v = (LD(x, base + j) - mu) * rs;
            if (gamma) v = v * gamma[j];
            if (beta) v = v + beta[j];
            ST(y, base + j, v);
        }
    }
}
#endif

/* xhat = (x - mean) rstd, g = dy gamma, dx = rstd (g - mean_j g - xhat mean_j(g xhat)) */
#ifdef K_layernorm_bwd
__kernel REDUCE_WG void layernorm_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), FARG(gamma), FARG(mean),
                                      FARG(rstd), ulong rows, ulong cols) {
    FPTR(gamma);
    FPTR(mean);
    FPTR(rstd);
    __local float red[WG];
    { /* one work-group per rows entry: the launch has exactly that many groups */
        ulong r    = get_group_id(0);
        ulong base = r * cols;
        float mu = mean[r], rs = rstd[r];
        float sg = 0.0f, sgx = 0.0f;
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float g = LD(dy, base + j) * (gamma ? gamma[j] : 1.0f);
            sg += g;
            sgx += g * ((LD(x, base + j) - mu) * rs);
        }
        float mg  = wg_sum(sg, red) / (float)cols;
        float mgx = wg_sum(sgx, red) / (float)cols;
        for (ulong j = get_local_id(0); j < cols; j += WG) {
            float g    = LD(dy, base + j) * (gamma ? gamma[j] : 1.0f);
            float xhat = (LD(x, base + j) - mu) * rs;
            ST(dx, base + j, rs * (g - mg - xhat * mgx));
        }
    }
}
#endif

#endif /* ROW_ITEMS */

#ifdef K_layernorm_params
__kernel void layernorm_params(CTENSOR(x), CTENSOR(dy), FARG(mean), FARG(rstd), FARG(dgamma),
                               FARG(dbeta), ulong rows, ulong cols, int accumulate) {
    FPTR(mean);
    FPTR(rstd);
    FPTR(dgamma);
    FPTR(dbeta);
    for (ulong c = GID; c < cols; c += GSIZE) {
        float sg = 0.0f, sb = 0.0f;
        for (ulong r = 0; r < rows; r++) {
            float d = LD(dy, r * cols + c);
            sg += d * ((LD(x, r * cols + c) - mean[r]) * rstd[r]);
            sb += d;
        }
        if (dgamma) dgamma[c] = accumulate ? dgamma[c] + sg : sg;
        if (dbeta) dbeta[c] = accumulate ? dbeta[c] + sb : sb;
    }
}
#endif
