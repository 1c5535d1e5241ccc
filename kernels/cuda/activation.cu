/* activation.cu — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu.
 *
 * As in the CPU backend's portable path, and with the same functions (ampx_km_act_f and
 * ampx_km_act_df of ampx/kernel_math.h), the function and its derivative are evaluated in
 * double from the exactly widened input, rounded to f32, then once more to the output dtype.
 * In place (y = x, dx = dy) is safe: each thread reads its element before writing it.
 */
#include "common.cuh"

__device__ __forceinline__ float act_one(const cuk_act &a, float x, float dy) {
    if (a.bwd) return (float)((double)dy * ampx_km_act_df(a.act, x));
    return (float)ampx_km_act_f(a.act, x);
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
