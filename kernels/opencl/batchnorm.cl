/* batchnorm.cl — BATCHNORM_FWD and BATCHNORM_BWD over x[outer, channels, inner], one
 * work-group per channel; statistics over the N = outer * inner values of a channel in
 * f32, two passes (mean, then the centred sum of squares). Element k of channel c is at
 * (k / inner) * channels * inner + c * inner + k % inner. */

inline ulong bn_index(ulong k, ulong c, ulong channels, ulong inner) {
    ulong r, q = udivmod(k, inner, &r);
    return q * channels * inner + c * inner + r;
}

__kernel REDUCE_WG void batchnorm_fwd(CTENSOR(x), TENSOR(y), FARG(gamma), FARG(beta),
                                      FARG(run_mean), FARG(run_var), FARG(mean), FARG(rstd),
                                      ulong outer, ulong channels, ulong inner, float eps,
                                      float momentum, int training) {
    FPTR(gamma);
    FPTR(beta);
    FPTR(run_mean);
    FPTR(run_var);
    FPTR(mean);
    FPTR(rstd);
    __local float red[WG];
    ulong N = outer * inner;
    { /* one work-group per channels entry: the launch has exactly that many groups */
        ulong c = get_group_id(0);
        /* The batch statistics are computed in eval mode too: barriers stay outside any
         * branch, which every OpenCL compiler (PoCL's included) handles. */
        float s = 0.0f;
        for (ulong k = get_local_id(0); k < N; k += WG)
            s += LD(x, bn_index(k, c, channels, inner));
        float bmu = wg_sum(s, red) / (float)N;
        float q   = 0.0f;
        for (ulong k = get_local_id(0); k < N; k += WG) {
            float d = LD(x, bn_index(k, c, channels, inner)) - bmu;
            q += d * d;
        }
        float var = wg_sum(q, red) / (float)N;
        float mu = bmu, rs = 1.0f / sqrt(var + eps);
        if (training) {
            if (get_local_id(0) == 0) {
                mean[c] = mu;
                rstd[c] = rs;
                if (run_mean) run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * mu;
                if (run_var) {
                    float unbiased = N > 1 ? var * (float)N / (float)(N - 1) : var;
                    run_var[c]     = (1.0f - momentum) * run_var[c] + momentum * unbiased;
                }
            }
        } else {
            mu = run_mean[c];
            rs = 1.0f / sqrt(run_var[c] + eps);
        }
        float ga = gamma ? gamma[c] : 1.0f, be = beta ? beta[c] : 0.0f;
        for (ulong k = get_local_id(0); k < N; k += WG) {
            ulong i = bn_index(k, c, channels, inner);
            ST(y, i, (LD(x, i) - mu) * rs * ga + be);
        }
    }
}

/* xhat = (x - mean) rstd, dx = gamma rstd (dy - mean_N(dy) - xhat mean_N(dy xhat)),
 * dgamma (+)= sum_N dy xhat, dbeta (+)= sum_N dy */
__kernel REDUCE_WG void batchnorm_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), FARG(gamma), FARG(mean),
                                      FARG(rstd), FARG(dgamma), FARG(dbeta), ulong outer,
                                      ulong channels, ulong inner, int accumulate) {
    FPTR(gamma);
    FPTR(mean);
    FPTR(rstd);
    FPTR(dgamma);
    FPTR(dbeta);
    __local float red[WG];
    ulong N = outer * inner;
    { /* one work-group per channels entry: the launch has exactly that many groups */
        ulong c  = get_group_id(0);
        float mu = mean[c], rs = rstd[c];
        float sd = 0.0f, sdx = 0.0f;
        for (ulong k = get_local_id(0); k < N; k += WG) {
            ulong i = bn_index(k, c, channels, inner);
            float d = LD(dy, i);
            sd += d;
            sdx += d * ((LD(x, i) - mu) * rs);
        }
        sd       = wg_sum(sd, red);
        sdx      = wg_sum(sdx, red);
        float f  = (gamma ? gamma[c] : 1.0f) * rs;
        float md = sd / (float)N, mdx = sdx / (float)N;
        for (ulong k = get_local_id(0); k < N; k += WG) {
            ulong i    = bn_index(k, c, channels, inner);
            float xhat = (LD(x, i) - mu) * rs;
            ST(dx, i, f * (LD(dy, i) - md - xhat * mdx));
        }
        if (get_local_id(0) == 0) {
            if (dgamma) dgamma[c] = accumulate ? dgamma[c] + sdx : sdx;
            if (dbeta) dbeta[c] = accumulate ? dbeta[c] + sd : sd;
        }
    }
}
