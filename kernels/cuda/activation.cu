/* activation.cu — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu.
 *
 * As in the CPU backend, the function and its derivative are evaluated in double from the
 * exactly widened input (the gelu cubic cannot overflow there), rounded to f32, then once
 * more to the output dtype. Forward and backward of each function sit side by side. In place
 * (y = x, dx = dy) is safe: each thread reads its element before writing it.
 */
#include "common.cuh"

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

__device__ __forceinline__ double sigmoid_d(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* f(x) */
__device__ double act_f(int32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? x : (x != x ? x : 0.0); /* NaN propagates */
    case AMPX_ACT_GELU: return 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x)));
    case AMPX_ACT_TANH: return tanh(x);
    case AMPX_ACT_SIGMOID: return sigmoid_d(x);
    case AMPX_ACT_SILU: return x * sigmoid_d(x);
    default: return 0.0;
    }
}

/* f'(x) */
__device__ double act_df(int32_t act, double x) {
    switch (act) {
    case AMPX_ACT_RELU: return x > 0.0 ? 1.0 : (x != x ? x : 0.0); /* 0 at x <= 0 */
    case AMPX_ACT_GELU: {
        /* d/dx 0.5 x (1 + tanh u), u = k (x + c x^3):
         *   0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2) */
        double t = tanh(GELU_K * (x + GELU_C * x * x * x));
        double s = 1.0 - t * t;
        double d = s == 0.0 ? 0.0 : 0.5 * x * s * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        return 0.5 * (1.0 + t) + d;
    }
    case AMPX_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case AMPX_ACT_SIGMOID: {
        double s = sigmoid_d(x);
        return s * (1.0 - s);
    }
    case AMPX_ACT_SILU: { /* sigma(x) (1 + x (1 - sigma(x))) */
        double s = sigmoid_d(x);
        return s * (1.0 + x * (1.0 - s));
    }
    default: return 0.0;
    }
}

__device__ __forceinline__ float act_one(const cuk_act &a, float x, float dy) {
    if (a.bwd) return (float)((double)dy * act_df(a.act, x));
    return (float)act_f(a.act, x);
}

__global__ void act_kernel(cuk_act a, int vec) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x * 4;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < a.n; i += stride) {
        if (vec && i + 4 <= a.n) {
            float x[4], dy[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            cuk_ld4(a.x, a.xdt, i, x);
            if (a.bwd) cuk_ld4(a.dy, a.dydt, i, dy);
            for (int j = 0; j < 4; j++)
                x[j] = act_one(a, x[j], dy[j]);
            cuk_st4(a.out, a.odt, i, x);
        } else {
            uint64_t end = i + 4 < a.n ? i + 4 : a.n;
            for (uint64_t e = i; e < end; e++) {
                float x  = cuk_ld(a.x, a.xdt, e);
                float dy = a.bwd ? cuk_ld(a.dy, a.dydt, e) : 0.0f;
                cuk_st(a.out, a.odt, e, act_one(a, x, dy));
            }
        }
    }
}

extern "C" cudaError_t cuk_act_run(cudaStream_t s, const cuk_act *a) {
    if (a->n == 0) return cudaSuccess;
    int vec = cuk_aligned4(a->x, a->xdt) && cuk_aligned4(a->out, a->odt) &&
              (!a->bwd || cuk_aligned4(a->dy, a->dydt));
    act_kernel<<<cuk_blocks(a->n, 4 * CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*a, vec);
    return cudaGetLastError();
}
