/* optimizer.cu — multi-tensor SGD (momentum, Nesterov) and AdamW on f32 master weights.
 *
 * Every thread reads the scalars block first: with found_inf set the whole step is skipped
 * and nothing at all is written (parameters, state, copies and the block stay bitwise
 * unchanged). Otherwise lr = ampx_scheduled_lr(scalars, applied_steps) (backend.h's own
 * function, compiled for the device), written back to scalars->lr by one thread of the first
 * group, and the clip coefficient c = min(1, max_grad_norm / (sqrt(*grad_sq_sum) + 1e-6)),
 * rounded to f32 when it is not 1, all without the host. As in the CPU backend each
 * element's update is evaluated in double from the f32 state and the widened gradient;
 * params and state are rounded once to f32, and the low-precision copy is rounded from the
 * new f32 parameter (nearest even, or stochastically with ampx_hash32(seed + t, i) for
 * element i of tensor t).
 */
#include "common.cuh"

__global__ void optimizer_kernel(cuk_opt_group g) {
    ampx_scalars *s = (ampx_scalars *)g.scalars;
    if (s->found_inf != 0) return; /* skipped step: nothing changes */
    int32_t step = s->applied_steps;
    float lr_f   = ampx_scheduled_lr(s, step);
    if (g.write_lr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) s->lr = lr_f;
    double lr = lr_f, c = ampx_km_clip_coef(g.max_grad_norm, g.grad_sq_sum);
    if (blockIdx.y >= g.count) return; /* an empty list still writes lr */

    const cuk_opt_tensor t = g.t[blockIdx.y];
    uint64_t seed          = g.seed + g.first + blockIdx.y; /* tensor t draws its own stream */
    double wd              = t.wd;
    /* AdamW: bias corrections in double (PyTorch uses Python floats), decay rounded to f32 */
    double bc1 = 1.0, bc2 = 1.0, decay = 1.0;
    if (g.adamw) {
        double tt = (double)step + 1.0;
        bc1       = 1.0 - pow((double)g.beta1, tt);
        bc2       = 1.0 - pow((double)g.beta2, tt);
        decay     = (double)(float)(1.0 - lr * wd);
    }
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n; i += stride) {
        float gr = cuk_ld(t.g, t.gdt, i);
        if (c != 1.0) gr = (float)(c * gr);
        float pn;
        if (g.adamw) {
            double gd = gr;
            double p  = (double)t.p[i] * decay;
            float m   = (float)((double)g.beta1 * (double)t.s1[i] + (1.0 - (double)g.beta1) * gd);
            float v =
                (float)((double)g.beta2 * (double)t.s2[i] + (1.0 - (double)g.beta2) * gd * gd);
            double up = lr * ((double)m / bc1) / (sqrt((double)v / bc2) + (double)g.eps);
            pn        = (float)(p - up);
            t.s1[i]   = m;
            t.s2[i]   = v;
        } else {
            double p  = t.p[i];
            double gd = gr;
            if (wd != 0.0) gd += wd * p;
            if (g.momentum != 0.0f) {
                double mom = g.momentum;
                double b =
                    step == 0 ? gd : mom * (double)t.s1[i] + (1.0 - (double)g.dampening) * gd;
                t.s1[i] = (float)b;
                gd      = g.nesterov ? gd + mom * b : b;
            }
            pn = (float)(p - lr * gd);
        }
        t.p[i] = pn;
        if (t.copy) {
            if (g.stochastic_copy)
                cuk_st_sr(t.copy, t.cdt, i, pn, ampx_hash32(seed, i));
            else
                cuk_st(t.copy, t.cdt, i, pn);
        }
    }
}

extern "C" cudaError_t cuk_optimizer_run(cudaStream_t s, const cuk_opt_group *g) {
    dim3 grid(cuk_blocks(g->max_n, 4 * CUK_THREADS, 1024), g->count ? g->count : 1);
    optimizer_kernel<<<grid, CUK_THREADS, 0, s>>>(*g);
    return cudaGetLastError();
}
