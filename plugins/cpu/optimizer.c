/* optimizer.c — multi-tensor SGD (momentum, Nesterov) and AdamW on f32 master weights.
 *
 * Both read found_inf from the scalars block first: a step with non-finite gradients
 * returns at once, so parameters, optimizer state, copies and the block itself stay
 * bitwise unchanged. Otherwise lr comes from the schedule at the count of applied steps
 * (ampx_scheduled_lr) and is written back to scalars->lr, and the clip coefficient comes
 * from the global sum of squares (ampx_km_clip_coef of kernel_math.h). Each element's update is
 * evaluated in double from the f32 state and the widened gradient; params and state are rounded
 * once to f32 when stored, and the low-precision copy is rounded from the new f32 parameter (to
 * nearest even, or stochastically with ampx_hash32(seed + t, i) for element i of tensor t).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"

/* The start of a step, shared by both optimizers. Returns 0 when found_inf skips it (nothing
 * is written); otherwise writes the scheduled lr to scalars->lr and returns 1 with *s, *lr
 * and the clip coefficient *c, rounded to f32 as the scalar it is. */
static int step_begin(const ampx_tensor *scalars, float max_grad_norm,
                      const ampx_tensor *grad_sq_sum, ampx_scalars **s, float *lr, double *c) {
    *s = (ampx_scalars *)cpu_ptr(scalars);
    if ((*s)->found_inf != 0) return 0;
    *lr      = ampx_scheduled_lr(*s, (*s)->applied_steps);
    (*s)->lr = *lr;
    *c       = ampx_km_clip_coef(max_grad_norm,
                           grad_sq_sum->buf ? (const float *)cpu_ptr(grad_sq_sum) : NULL);
    return 1;
}

/* What both optimizers know of tensor t: the f32 params, the gradient, the optional
 * low-precision copy and the step's lr and clip coefficient. */
typedef struct opt_tensor {
    float *p;
    const void *g;
    void *copy;
    ampx_dtype gdt, cdt;
    uint64_t n;
    double lr, c;
    int stochastic;
    uint64_t seed;
} opt_tensor;

static opt_tensor opt_tensor_at(const ampx_tensor_list *params, const ampx_tensor *grads,
                                const ampx_tensor *copies, uint32_t t, float lr, double c,
                                uint32_t stochastic_copy, uint64_t seed) {
    return (opt_tensor){
        .p          = cpu_ptr(&params->tensors[t]),
        .g          = cpu_ptr(&grads[t]),
        .copy       = copies ? cpu_ptr(&copies[t]) : NULL,
        .gdt        = grads[t].dtype,
        .cdt        = copies ? copies[t].dtype : AMPX_F32,
        .n          = params->n_elems[t],
        .lr         = lr,
        .c          = c,
        .stochastic = stochastic_copy != 0,
        .seed       = seed + t, /* tensor t draws its own stream */
    };
}

/* Chunk `item` of o's gradient widened to f32 in g and, when clipping, times c rounded to
 * f32; returns the chunk's length and sets *i0 to its first element. */
CPU_INLINE uint64_t load_grad_chunk(const opt_tensor *o, uint64_t item, float *g, uint64_t *i0) {
    *i0        = item * CPU_CHUNK;
    uint64_t n = o->n - *i0 < CPU_CHUNK ? o->n - *i0 : CPU_CHUNK;
    cpu_load_f32(g, o->g, o->gdt, *i0, n);
    if (o->c != 1.0)
        for (uint64_t k = 0; k < n; k++)
            g[k] = (float)(o->c * g[k]);
    return n;
}

/* Rounds the chunk's new f32 parameters pn[0 .. n) into elements i0 .. i0+n of the copy,
 * when there is one (after the update loop, so that loop stays free of calls). */
static void store_copies(const opt_tensor *o, uint64_t i0, const float *pn, uint64_t n) {
    if (!o->copy) return;
    if (o->stochastic)
        for (uint64_t k = 0; k < n; k++)
            cpu_st_sr(o->copy, o->cdt, i0 + k, pn[k], ampx_hash32(o->seed, i0 + k));
    else
        cpu_store_f32(o->copy, o->cdt, i0, pn, n);
}

// ---------------------------------------------------------------------------------------
// SGD (PyTorch torch.optim.SGD):
//   g = c grad + wd p;  buf = (first step ? g : momentum buf + (1 - dampening) g);
//   g = nesterov ? g + momentum buf : buf;  p -= lr g.

typedef struct sgd_job {
    opt_tensor o;
    float *buf;
    double wd, momentum, dampening;
    int nesterov, first;
} sgd_job;

/* The update of elements pr[0 .. n) with widened gradients gr, new parameters left in gr.
 * One loop per case (momentum off, first step, later steps) with the branches outside, so
 * the compiler vectorises each; every case evaluates the formula above in the same order. */
CPU_INLINE void sgd_update(const sgd_job *j, float *restrict pr, float *restrict br,
                           float *restrict gr, uint64_t n) {
    const double wd = j->wd, mom = j->momentum, damp1 = 1.0 - j->dampening, lr = j->o.lr;
    const int nest = j->nesterov;
    if (mom == 0.0) {
        for (uint64_t k = 0; k < n; k++) {
            double p = pr[k], g = gr[k];
            if (wd != 0.0) g += wd * p;
            float pn = (float)(p - lr * g);
            pr[k]    = pn;
            gr[k]    = pn;
        }
    } else if (j->first) {
        for (uint64_t k = 0; k < n; k++) {
            double p = pr[k], g = gr[k];
            if (wd != 0.0) g += wd * p;
            double b = g;
            br[k]    = (float)b;
            double u = g + mom * b;
            float pn = (float)(p - lr * (nest ? u : b));
            pr[k]    = pn;
            gr[k]    = pn;
        }
    } else {
        for (uint64_t k = 0; k < n; k++) {
            double p = pr[k], g = gr[k];
            if (wd != 0.0) g += wd * p;
            double b = mom * (double)br[k] + damp1 * g;
            br[k]    = (float)b;
            double u = g + mom * b;
            float pn = (float)(p - lr * (nest ? u : b));
            pr[k]    = pn;
            gr[k]    = pn;
        }
    }
}

CPU_INLINE void sgd_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const sgd_job *j    = arg;
    const opt_tensor *o = &j->o;
    float gr[CPU_CHUNK];
    uint64_t i0, n = load_grad_chunk(o, item, gr, &i0);
    sgd_update(j, o->p + i0, j->buf ? j->buf + i0 : NULL, gr, n);
    store_copies(o, i0, gr, n);
}
CPU_ISA_CHUNK(sgd_chunk, sgd_chunk_body)

ampx_status cpu_sgd(ampx_context *ctx, const ampx_sgd_args *args) {
    ampx_sgd_args a;
    CPU_TRY(ampx_kit_take_sgd(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s;
    float lr;
    double c;
    if (!step_begin(&a.scalars, a.max_grad_norm, &a.grad_sq_sum, &s, &lr, &c))
        return AMPX_OK; /* skipped step: nothing changes */

    for (uint32_t t = 0; t < a.params.count; t++) {
        sgd_job j = {
            .o   = opt_tensor_at(&a.params, a.grads, a.copies, t, lr, c, a.stochastic_copy, a.seed),
            .buf = a.momentum != 0.0f ? cpu_ptr(&a.momentum_buf[t]) : NULL,
            .wd  = a.wd ? a.wd[t] : a.weight_decay,
            .momentum  = a.momentum,
            .dampening = a.dampening,
            .nesterov  = a.nesterov != 0,
            .first     = s->applied_steps == 0,
        };
        cpu_run_chunks(ctx, j.o.n, sgd_chunk, &j);
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// AdamW (PyTorch torch.optim.AdamW), t = applied_steps + 1:
//   g = c grad;  p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// The bias corrections 1 - b^t are evaluated in double (PyTorch uses Python floats).

typedef struct adamw_job {
    opt_tensor o;
    float *m, *v;
    double decay, b1, b2, eps, bc1, bc2;
} adamw_job;

CPU_INLINE void adamw_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const adamw_job *j  = arg;
    const opt_tensor *o = &j->o;
    float gr[CPU_CHUNK];
    uint64_t i0, n = load_grad_chunk(o, item, gr, &i0);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = i0 + k;
        double g   = gr[k];
        double p   = (double)o->p[i] * j->decay;
        float m    = (float)(j->b1 * (double)j->m[i] + (1.0 - j->b1) * g);
        float v    = (float)(j->b2 * (double)j->v[i] + (1.0 - j->b2) * g * g);
        double up  = o->lr * ((double)m / j->bc1) / (sqrt((double)v / j->bc2) + j->eps);
        float pn   = (float)(p - up);
        j->m[i]    = m;
        j->v[i]    = v;
        o->p[i]    = pn;
        gr[k]      = pn;
    }
    store_copies(o, i0, gr, n);
}
CPU_ISA_CHUNK(adamw_chunk, adamw_chunk_body)

ampx_status cpu_adamw(ampx_context *ctx, const ampx_adamw_args *args) {
    ampx_adamw_args a;
    CPU_TRY(ampx_kit_take_adamw(AMPX_KIT(ctx), args, &a));
    ampx_scalars *s;
    float lr;
    double c;
    if (!step_begin(&a.scalars, a.max_grad_norm, &a.grad_sq_sum, &s, &lr, &c))
        return AMPX_OK; /* skipped step: nothing changes */
    double step = (double)s->applied_steps + 1.0;
    double bc1  = 1.0 - pow((double)a.beta1, step);
    double bc2  = 1.0 - pow((double)a.beta2, step);

    for (uint32_t t = 0; t < a.params.count; t++) {
        double wd   = a.wd ? a.wd[t] : a.weight_decay;
        adamw_job j = {
            .o = opt_tensor_at(&a.params, a.grads, a.copies, t, lr, c, a.stochastic_copy, a.seed),
            .m = cpu_ptr(&a.m[t]),
            .v = cpu_ptr(&a.v[t]),
            .decay = (double)(float)(1.0 - (double)lr * wd),
            .b1    = a.beta1,
            .b2    = a.beta2,
            .eps   = a.eps,
            .bc1   = bc1,
            .bc2   = bc2,
        };
        cpu_run_chunks(ctx, j.o.n, adamw_chunk, &j);
    }
    return AMPX_OK;
}
