/* fp8.cu — ABI 1.7: FP8_QUANTIZE (both directions) and FP8_SCALE_UPDATE.
 *
 * Every code is written and read with dtype.h's own conversions compiled for the device
 * (common.cuh), so the bits equal the host's: nearest even, subnormals kept, the NaN rules
 * of e4m3 and e5m2, saturating or not.
 *
 * FP8_QUANTIZE: each thread takes groups of 4 consecutive elements in a grid-stride loop
 * (one 4-byte fp8 access per group and one vector access on the float side when both are
 * aligned, element by element otherwise and for the last group). To fp8, each thread keeps
 * the largest |x| it saw (fmaxf: NaNs ignored, infinities kept) and its overflow and
 * flushed-to-zero counts; a block reduces them and its thread 0 raises amax and adds to the
 * counts with one atomic each, so a quantization split into parts, or several tensors that
 * share one slot, accumulate.
 *
 * FP8_SCALE_UPDATE: one thread per tensor; kernel_math.h's ampx_km_fp8_max_step and
 * ampx_km_fp8_scale, IEEE f32 divisions (the plugin is not built with fast math).
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// FP8_QUANTIZE

/* The code of v in fp8 dtype dt, as dtype.h's ampx_f32_to_fp8(v, dt, saturate), and in *of
 * whether it overflowed: v not NaN and its rounding past the largest finite (an infinity
 * included). The non-saturating code tells: e4m3 NaN (0x7f) or e5m2 inf (0x7c) from a
 * non-NaN v; saturating, that code becomes the largest finite with v's sign, as dtype.h's
 * saturating path gives it. */
__device__ __forceinline__ uint32_t fp8_encode(float v, int32_t dt, int saturate, int *of) {
    int e4      = dt == AMPX_E4M3;
    uint32_t c  = e4 ? ampx_f32_to_e4m3(v, 0) : ampx_f32_to_e5m2(v, 0);
    uint32_t ov = e4 ? 0x7fu : 0x7cu;
    *of         = !isnan(v) && (c & 0x7fu) == ov;
    if (*of && saturate) c = (c & 0x80u) | (e4 ? 0x7eu : 0x7bu);
    return c;
}

__device__ __forceinline__ float fp8_decode(uint32_t c, int32_t dt) {
    return dt == AMPX_E4M3 ? ampx_e4m3_to_f32((uint8_t)c) : ampx_e5m2_to_f32((uint8_t)c);
}

/* *p = fmaxf(*p, m), atomically, for the block's largest |x| m (>= 0; 0 when it saw no
 * non-NaN element): backend.h's amax = max(amax, max |x|) with NaNs ignored, as the CPU
 * plugin's fmaxf. For a non-negative *p this is atomicMax on the bits; the compare-and-swap
 * loop also replaces a NaN or negative slot. */
__device__ __forceinline__ void fp8_raise_amax(float *p, float m) {
    unsigned int *u  = (unsigned int *)p;
    unsigned int old = *(volatile unsigned int *)u;
    for (;;) {
        float cur = __uint_as_float(old);
        if (!(isnan(cur) || m > cur)) return;
        unsigned int prev = atomicCAS(u, old, __float_as_uint(m));
        if (prev == old) return;
        old = prev;
    }
}

/* To fp8: dst[i] = fp8(f32(src[i] * s)). vec: src aligned for cuk_ld4 and dst to 4 bytes. */
__global__ void fp8_quantize_to_kernel(cuk_fp8_quantize q, int vec) {
    const float s             = q.scale[0];
    const uint64_t groups     = (q.n + 3) / 4;
    float amax                = 0.0f; /* the largest |x| seen, NaNs ignored */
    unsigned long long n_over = 0, n_flush = 0;
    uint8_t *dst = (uint8_t *)q.dst;
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < groups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i0 = g * 4;
        int cnt     = q.n - i0 < 4 ? (int)(q.n - i0) : 4;
        float x[4];
        if (vec && cnt == 4)
            cuk_ld4(q.src, q.sdt, i0, x);
        else
            for (int j = 0; j < cnt; j++)
                x[j] = cuk_ld(q.src, q.sdt, i0 + j);
        uint32_t packed = 0;
        for (int j = 0; j < cnt; j++) {
            int of;
            uint32_t c = fp8_encode(x[j] * s, q.ddt, q.saturate, &of);
            if (q.saturate == 2 && isinf(x[j])) /* an infinite input stays non-finite */
                c = (c & 0x80u) | (q.ddt == AMPX_E4M3 ? 0x7fu : 0x7cu);
            amax = fmaxf(amax, fabsf(x[j]));
            n_over += (unsigned)of;
            n_flush += (unsigned)(isfinite(x[j]) && x[j] != 0.0f && (c & 0x7fu) == 0);
            packed |= c << (8 * j);
        }
        if (vec && cnt == 4)
            ((uint32_t *)dst)[g] = packed;
        else
            for (int j = 0; j < cnt; j++)
                dst[i0 + j] = (uint8_t)(packed >> (8 * j));
    }
    /* amax and counts are the same for every thread of the launch: the reductions below are
     * reached by all threads of a block or by none */
    if (q.amax) {
        float m = cuk_block_max(amax);
        if (threadIdx.x == 0) fp8_raise_amax(q.amax, m);
    }
    if (q.counts) {
        unsigned long long o = cuk_block_sum_u64(n_over);
        unsigned long long f = cuk_block_sum_u64(n_flush);
        if (threadIdx.x == 0) { /* i32 counters, wrapping as the host's additions would */
            if (o) atomicAdd((unsigned int *)&q.counts[0], (unsigned int)o);
            if (f) atomicAdd((unsigned int *)&q.counts[1], (unsigned int)f);
        }
    }
}

/* From fp8: dst[i] = round(f32(value of src[i] * s)) to dst's dtype. vec: src aligned to 4
 * bytes and dst for cuk_st4. */
__global__ void fp8_quantize_from_kernel(cuk_fp8_quantize q, int vec) {
    const float s         = q.scale[0];
    const uint64_t groups = (q.n + 3) / 4;
    const uint8_t *src    = (const uint8_t *)q.src;
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < groups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i0 = g * 4;
        int cnt     = q.n - i0 < 4 ? (int)(q.n - i0) : 4;
        float y[4];
        if (vec && cnt == 4) {
            uint32_t packed = ((const uint32_t *)src)[g];
            for (int j = 0; j < 4; j++)
                y[j] = fp8_decode((packed >> (8 * j)) & 0xffu, q.sdt) * s;
            cuk_st4(q.dst, q.ddt, i0, y);
        } else {
            for (int j = 0; j < cnt; j++)
                cuk_st(q.dst, q.ddt, i0 + j, fp8_decode(src[i0 + j], q.sdt) * s);
        }
    }
}

extern "C" cudaError_t cuk_fp8_quantize_run(cudaStream_t s, const cuk_fp8_quantize *q) {
    if (q->n == 0) return cudaSuccess;
    uint64_t groups = (q->n + 3) / 4;
    unsigned blocks = cuk_blocks(groups, CUK_THREADS, CUK_GRID_CAP);
    int to_fp8      = q->ddt == AMPX_E4M3 || q->ddt == AMPX_E5M2;
    const void *fp8 = to_fp8 ? q->dst : q->src, *wide = to_fp8 ? q->src : q->dst;
    int vec = (uintptr_t)fp8 % 4 == 0 && cuk_aligned4(wide, to_fp8 ? q->sdt : q->ddt);
    if (to_fp8)
        fp8_quantize_to_kernel<<<blocks, CUK_THREADS, 0, s>>>(*q, vec);
    else
        fp8_quantize_from_kernel<<<blocks, CUK_THREADS, 0, s>>>(*q, vec);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// FP8_SCALE_UPDATE

/* One thread per tensor i of the FP8 STATE block: scale[i] at state[i], scale_inv[i] at
 * state[n + i], history[h][i] at state[(2 + h) n + i]. */
__global__ void fp8_scale_update_kernel(cuk_fp8_scale_update u) {
    const uint64_t n = u.n;
    float *scale = u.state, *scale_inv = u.state + n, *hist = u.state + 2 * n;
    /* a step that found an inf or NaN (scalars.found_inf, not yet consumed by
     * SCALER_UPDATE) only clears this step's row */
    const int skip =
        u.skip_on_found_inf && u.scalars && ((const ampx_scalars *)u.scalars)->found_inf != 0;
    const uint32_t H = u.history;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        if (skip) {
            hist[i] = 0.0f;
            continue;
        }
        float first = hist[i], amax = first;
        if (u.algo == AMPX_FP8_AMAX_MAX)
            for (uint32_t h = 1; h < H; h++)
                amax = ampx_km_fp8_max_step(amax, hist[(uint64_t)h * n + i]);
        float sc     = ampx_km_fp8_scale(amax, scale[i], u.fp8_max[i], (int)u.margin);
        scale[i]     = sc;
        scale_inv[i] = 1.0f / sc;
        /* roll: row h takes row h + 1, the last row takes row 0; then row 0 is cleared */
        for (uint32_t h = 0; h + 1 < H; h++)
            hist[(uint64_t)h * n + i] = hist[(uint64_t)(h + 1) * n + i];
        hist[(uint64_t)(H - 1) * n + i] = first;
        hist[i]                         = 0.0f;
    }
}

extern "C" cudaError_t cuk_fp8_scale_update_run(cudaStream_t s, const cuk_fp8_scale_update *u) {
    if (u->n == 0 || u->history == 0) return cudaSuccess;
    fp8_scale_update_kernel<<<cuk_blocks(u->n, CUK_THREADS, CUK_GRID_CAP), CUK_THREADS, 0, s>>>(*u);
    return cudaGetLastError();
}
