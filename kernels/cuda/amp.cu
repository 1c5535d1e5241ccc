/* amp.cu — the loss-scaling ops on the device: UNSCALE_CHECK (the fused multi-tensor unscale
 * and non-finite check), GRAD_STATS (gradient health per tensor), AMP_PASS (both and the sum
 * of squares for clipping over one read of each gradient) and SCALER_UPDATE (the scaler's
 * state machine on the scalars block).
 *
 * Everything reads the scalars block on the device, so a training step never waits for the
 * host: inv_scale is computed per thread from scalars->scale exactly as backend.h says,
 * (float)(1.0 / (double)scale); a non-finite result sets its tensor's flag and found_inf to 1
 * (plain stores of the same value from any number of threads: found_inf |= flag).
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// UNSCALE_CHECK: g = round(g * inv_scale) in place (skipped in mode NONE); a tensor is
// flagged when any value as stored afterwards is non-finite (a product that overflows only
// when narrowed to bf16/f16 counts too).

__global__ void unscale_kernel(cuk_mt_group g, int32_t *flags, ampx_scalars *s) {
    const cuk_mt_tensor t = g.t[blockIdx.y];
    int multiply          = s->mode != AMPX_SCALER_NONE;
    float inv_scale       = ampx_km_inv_scale(s->scale);
    int bad               = 0;
    uint64_t stride       = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n; i += stride) {
        float v = cuk_ld(t.p, t.dt, i);
        if (multiply) {
            v = cuk_round_to(t.dt, v * inv_scale);
            cuk_st(t.p, t.dt, i, v); /* exact: v already holds the rounded value */
        }
        bad |= !isfinite(v);
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) {
        flags[g.first + blockIdx.y] = 1;
        s->found_inf                = 1;
    }
}

extern "C" cudaError_t cuk_unscale_check_run(cudaStream_t s, const cuk_mt_group *g, int32_t *flags,
                                             void *scalars) {
    if (g->count == 0) return cudaSuccess;
    dim3 grid(cuk_blocks(g->max_n, 4 * CUK_THREADS, 1024), g->count);
    unscale_kernel<<<grid, CUK_THREADS, 0, s>>>(*g, flags, (ampx_scalars *)scalars);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// GRAD_STATS: per tensor, over its values as stored: max |g| over finite values, mean and
// RMS of the finite values (sums in double), element count, and counts of zeros, of finite
// non-zeros below the target's smallest normal, of non-finite values. Each of bx blocks per
// tensor leaves a partial; one block per tensor then combines them in order.

/* One thread's running statistics, and the block's partial made of them (every thread of
 * the block calls stats_block). */
typedef struct stats_acc {
    double sum, sumsq;
    unsigned long long finite, zeros, small, nonfinite, nan;
    float max_abs;
} stats_acc;

__device__ __forceinline__ void stats_add(stats_acc *a, float v, float tiny) {
    if (!isfinite(v)) {
        a->nonfinite++;
        a->nan += isnan(v) ? 1 : 0;
        return;
    }
    float av = fabsf(v);
    a->finite++;
    a->sum += v;
    a->sumsq += (double)v * (double)v;
    a->max_abs = fmaxf(a->max_abs, av);
    if (v == 0.0f)
        a->zeros++;
    else if (av < tiny)
        a->small++;
}

__device__ cuk_stats_part stats_block(const stats_acc *a) {
    cuk_stats_part p;
    p.sum       = cuk_block_sum(a->sum);
    p.sumsq     = cuk_block_sum(a->sumsq);
    p.finite    = cuk_block_sum_u64(a->finite);
    p.zeros     = cuk_block_sum_u64(a->zeros);
    p.tiny      = cuk_block_sum_u64(a->small);
    p.nonfinite = cuk_block_sum_u64(a->nonfinite);
    p.nan       = cuk_block_sum_u64(a->nan);
    p.max_abs   = cuk_block_max(a->max_abs);
    p.pad       = 0.0f;
    return p;
}

__global__ void stats_part_kernel(cuk_mt_group g, uint32_t bx, float tiny, cuk_stats_part *part) {
    const cuk_mt_tensor t = g.t[blockIdx.y];
    stats_acc a           = {};
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n;
         i += (uint64_t)bx * blockDim.x)
        stats_add(&a, cuk_ld(t.p, t.dt, i), tiny);
    cuk_stats_part p = stats_block(&a);
    if (threadIdx.x == 0) part[(uint64_t)(g.first + blockIdx.y) * bx + blockIdx.x] = p;
}

__device__ __forceinline__ int32_t count_i32(unsigned long long c) {
    return c > (unsigned long long)INT32_MAX ? INT32_MAX : (int32_t)c;
}

/* One block of bx (<= 256) threads per tensor; thread k holds partial k. */
__global__ void stats_finish_kernel(cuk_mt_group g, uint32_t bx, const cuk_stats_part *part,
                                    float *stats, int32_t *counts, int32_t *nans) {
    uint32_t tg = g.first + blockIdx.x;
    cuk_stats_part p;
    memset(&p, 0, sizeof p);
    if (threadIdx.x < bx) p = part[(uint64_t)tg * bx + threadIdx.x];
    double sum                   = cuk_block_sum(p.sum);
    double sumsq                 = cuk_block_sum(p.sumsq);
    unsigned long long finite    = cuk_block_sum_u64(p.finite);
    unsigned long long zeros     = cuk_block_sum_u64(p.zeros);
    unsigned long long small     = cuk_block_sum_u64(p.tiny);
    unsigned long long nonfinite = cuk_block_sum_u64(p.nonfinite);
    unsigned long long nan       = cuk_block_sum_u64(p.nan);
    float max_abs                = cuk_block_max(p.max_abs);
    if (threadIdx.x == 0) {
        if (stats) {
            stats[4ull * tg + 0] = max_abs;
            stats[4ull * tg + 1] = finite ? (float)(sum / (double)finite) : 0.0f;
            stats[4ull * tg + 2] = finite ? (float)sqrt(sumsq / (double)finite) : 0.0f;
            stats[4ull * tg + 3] = (float)g.t[blockIdx.x].n;
        }
        if (counts) {
            counts[3ull * tg + 0] = count_i32(zeros);
            counts[3ull * tg + 1] = count_i32(small);
            counts[3ull * tg + 2] = count_i32(nonfinite);
        }
        if (nans) nans[tg] = count_i32(nan);
    }
}

extern "C" cudaError_t cuk_grad_stats_run(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                          float tiny, cuk_stats_part *partial, float *stats,
                                          int32_t *counts, int32_t *nans) {
    if (g->count == 0) return cudaSuccess;
    stats_part_kernel<<<dim3(bx, g->count), CUK_THREADS, 0, s>>>(*g, bx, tiny, partial);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    stats_finish_kernel<<<g->count, CUK_THREADS, 0, s>>>(*g, bx, partial, stats, counts, nans);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_grad_stats_finish(cudaStream_t s, const cuk_mt_group *g, uint32_t bx,
                                             const cuk_stats_part *partial, float *stats,
                                             int32_t *counts, int32_t *nans) {
    if (g->count == 0) return cudaSuccess;
    stats_finish_kernel<<<g->count, CUK_THREADS, 0, s>>>(*g, bx, partial, stats, counts, nans);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// AMP_PASS: stats_part_kernel's statistics of the value as read, unscale_kernel's unscale
// and check, sumsq_part_kernel's square of the value as stored (reduce.cu), in one loop with
// the partial-sum ops' grid (bx blocks per tensor), so the finishes give those ops' bits.
// `part` and `sq_part` are the same for every thread of a block: the block reductions are
// reached by all of them or none.

typedef struct cuk_tiny {
    float v[CUK_MT_MAX];
} cuk_tiny;

__global__ void amp_pass_kernel(cuk_mt_group g, cuk_tiny tiny, uint32_t bx, int32_t *flags,
                                ampx_scalars *s, cuk_stats_part *part, double *sq_part) {
    const cuk_mt_tensor t = g.t[blockIdx.y];
    const float tn        = tiny.v[blockIdx.y];
    int multiply          = s->mode != AMPX_SCALER_NONE;
    float inv_scale       = ampx_km_inv_scale(s->scale);
    double sq             = 0.0;
    stats_acc a           = {};
    int bad               = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n;
         i += (uint64_t)bx * blockDim.x) {
        float v = cuk_ld(t.p, t.dt, i);
        if (part) stats_add(&a, v, tn);
        if (multiply) {
            v = cuk_round_to(t.dt, v * inv_scale);
            cuk_st(t.p, t.dt, i, v); /* exact: v already holds the rounded value */
        }
        bad |= !isfinite(v);
        if (sq_part) {
            double d = v;
            sq += d * d;
        }
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) {
        flags[g.first + blockIdx.y] = 1;
        s->found_inf                = 1;
    }
    uint64_t at = (uint64_t)(g.first + blockIdx.y) * bx + blockIdx.x;
    if (part) {
        cuk_stats_part p = stats_block(&a);
        if (threadIdx.x == 0) part[at] = p;
    }
    if (sq_part) {
        sq = cuk_block_sum(sq);
        if (threadIdx.x == 0) sq_part[at] = sq;
    }
}

extern "C" cudaError_t cuk_amp_pass_run(cudaStream_t s, const cuk_mt_group *g, const float *tiny,
                                        uint32_t bx, int32_t *flags, void *scalars,
                                        cuk_stats_part *stats_part, double *sq_part) {
    if (g->count == 0) return cudaSuccess;
    cuk_tiny tn;
    for (uint32_t i = 0; i < CUK_MT_MAX; i++)
        tn.v[i] = i < g->count ? tiny[i] : 0.0f;
    amp_pass_kernel<<<dim3(bx, g->count), CUK_THREADS, 0, s>>>(
        *g, tn, bx, flags, (ampx_scalars *)scalars, stats_part, sq_part);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// SCALER_UPDATE: backend.h's pseudo-code on the block (one thread), ampx_km_scaler_step of
// kernel_math.h, the step the cpu plugin takes.

/* scale * factor as PyTorch's _amp_update_scale_cuda_kernel: the f32 scale times the double
 * factor in double, rounded to f32 once. A factor of 0 means "the block's float". */
__device__ static float scale_times(float scale, double factor, float block) {
    double f = factor > 0 ? factor : (double)block;
    return __double2float_rn(__dmul_rn((double)scale, f));
}

__global__ void scaler_update_kernel(ampx_scalars *s, double growth, double backoff) {
    ampx_km_scaler_step(s, scale_times(s->scale, growth, s->growth_factor),
                        scale_times(s->scale, backoff, s->backoff_factor));
}

extern "C" cudaError_t cuk_scaler_update_run(cudaStream_t s, void *scalars, double growth,
                                             double backoff) {
    scaler_update_kernel<<<1, 1, 0, s>>>((ampx_scalars *)scalars, growth, backoff);
    return cudaGetLastError();
}
