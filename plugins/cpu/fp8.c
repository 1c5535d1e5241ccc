/* fp8.c — ABI 1.7's fp8 ops: FP8_QUANTIZE (scaled casts to and from e4m3 and e5m2, with the
 * input's amax and the overflow and flush counts), GEMM_FP8 (gemm.c's driver, the fp8
 * operands widened as they are packed, the two factors folded into alpha) and
 * FP8_SCALE_UPDATE (the delayed-scaling update of a state block, kernel_math.h's formula).
 *
 * The casts go through dtype.h's conversions one element at a time; each CPU_CHUNK keeps its
 * own amax and counts, combined in chunk order afterwards, so the result does not depend on
 * the thread count.
 */
#include <math.h>
#include <string.h>

#include "ampx/kernel_math.h"
#include "cpu.h"

// ---------------------------------------------------------------------------------------
// FP8_QUANTIZE: dtype.h's narrowing has no branch on the value, so the chunks' loops
// vectorise

typedef struct quant_job {
    const void *src;
    void *dst;
    ampx_dtype sdt, ddt;
    uint64_t n;
    float scale;
    int saturate, to8, stats;
    uint32_t *amax;  /* per chunk: the largest |x| as f32 bits (NaNs left out) */
    int64_t *counts; /* per chunk: overflowed, flushed */
} quant_job;

CPU_INLINE void quant_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const quant_job *j = arg;
    uint64_t i0 = item * CPU_CHUNK, n = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    float buf[CPU_CHUNK];
    if (!j->to8) { /* fp8 -> float: widen, scale, one rounding */
        const uint8_t *s = (const uint8_t *)j->src + i0;
        for (uint64_t e = 0; e < n; e++)
            buf[e] = ampx_fp8_to_f32(s[e], j->sdt) * j->scale;
        cpu_store_f32(j->dst, j->ddt, i0, buf, n);
        return;
    }
    cpu_load_f32(buf, j->src, j->sdt, i0, n);
    uint8_t *d  = (uint8_t *)j->dst + i0;
    int sat     = j->saturate;
    float scale = j->scale;
    if (j->ddt == AMPX_E4M3)
        for (uint64_t e = 0; e < n; e++)
            d[e] = ampx_f32_to_e4m3(buf[e] * scale, sat);
    else
        for (uint64_t e = 0; e < n; e++)
            d[e] = ampx_f32_to_e5m2(buf[e] * scale, sat);
    if (sat == 2) { /* an infinite input stays non-finite: e4m3 NaN, e5m2 inf */
        const uint32_t *ib = (const uint32_t *)(const void *)buf;
        uint8_t nf         = j->ddt == AMPX_E4M3 ? 0x7fu : 0x7cu;
        for (uint64_t e = 0; e < n; e++)
            if ((ib[e] & 0x7fffffffu) == 0x7f800000u) d[e] = (uint8_t)((d[e] & 0x80u) | nf);
    }
    if (!j->stats) return;
    /* an overflow: a product past the largest rounding to a finite code (e4m3 464, the tie
     * there going to 448; e5m2 from 61440) or infinite; a flush: a non-zero finite input
     * whose product is at most half the smallest subnormal (the tie goes to even 0). In 32-bit
     * lanes without branches, so that the loop vectorises: |x| as bits (NaNs as 0) for the
     * amax, and a finite non-zero |x| is a - 1 below 0x7f7fffff. */
    float past         = j->ddt == AMPX_E4M3 ? 464.0f : 61439.99609375f; /* below 61440 */
    float tiny         = j->ddt == AMPX_E4M3 ? 0x1p-10f : 0x1p-17f;
    const uint32_t *ub = (const uint32_t *)(const void *)buf;
    uint32_t amax = 0, over = 0, flushed = 0;
    for (uint64_t e = 0; e < n; e++) { /* NaNs as 0 */
        uint32_t a = ub[e] & 0x7fffffffu, m = a & (0u - (uint32_t)(a <= 0x7f800000u));
        amax = amax > m ? amax : m;
    }
    for (uint64_t e = 0; e < n; e++) { /* a NaN product compares false both ways */
        float p    = fabsf(buf[e] * scale);
        uint32_t a = ub[e] & 0x7fffffffu;
        over += p > past;
        flushed += (uint32_t)(a - 1u < 0x7f7fffffu) & (p <= tiny);
    }
    j->amax[item]           = amax;
    j->counts[2 * item]     = over;
    j->counts[2 * item + 1] = flushed;
}

CPU_ISA_CHUNK(quant_chunk, quant_chunk_body)

ampx_status cpu_fp8_quantize(ampx_context *ctx, const ampx_fp8_quantize_args *args) {
    ampx_fp8_quantize_args a;
    CPU_TRY(ampx_kit_take_fp8_quantize(AMPX_KIT(ctx), args, &a));
    if (a.n == 0) return AMPX_OK;
    quant_job j     = {.src      = cpu_ptr(&a.src),
                       .dst      = cpu_ptr(&a.dst),
                       .sdt      = a.src.dtype,
                       .ddt      = a.dst.dtype,
                       .n        = a.n,
                       .scale    = *(const float *)cpu_ptr(&a.scale),
                       .saturate = (int)a.saturate,
                       .to8      = ampx_dtype_is_fp8(a.dst.dtype)};
    j.stats         = j.to8 && (a.amax.buf || a.counts.buf);
    uint64_t chunks = cpu_div_up(a.n, CPU_CHUNK);
    if (j.stats) {
        char *ws = cpu_reserve_shared_ws(ctx, "fp8_quantize", chunks * (sizeof(uint32_t) + 16));
        if (!ws) return AMPX_ERR_NO_MEMORY;
        j.counts = (int64_t *)(void *)ws;
        j.amax   = (uint32_t *)(void *)(ws + chunks * 16);
    }
    cpu_run(ctx, a.n, chunks, quant_chunk, &j);
    if (!j.stats) return AMPX_OK;
    uint32_t amax_bits = 0;
    int64_t sum[2]     = {0, 0};
    for (uint64_t c = 0; c < chunks; c++) {
        amax_bits = j.amax[c] > amax_bits ? j.amax[c] : amax_bits;
        sum[0] += j.counts[2 * c];
        sum[1] += j.counts[2 * c + 1];
    }
    float amax = ampx_f32_from_bits(amax_bits);
    if (a.amax.buf) {
        float *am = cpu_ptr(&a.amax);
        *am       = fmaxf(*am, amax);
    }
    if (a.counts.buf) {
        int32_t *cn = cpu_ptr(&a.counts);
        cn[0] += (int32_t)sum[0];
        cn[1] += (int32_t)sum[1];
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// GEMM_FP8

ampx_status cpu_gemm_fp8(ampx_context *ctx, const ampx_gemm_fp8_args *args) {
    ampx_gemm_fp8_args a;
    CPU_TRY(ampx_kit_take_gemm_fp8(AMPX_KIT(ctx), args, &a, NULL));
    if (!ctx->epilogue && ampx_kit_gemm_epilogue(&a.gemm))
        return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "gemm_fp8: epilogue off (gemm_epilogue=0)");
    float sa     = *(const float *)cpu_ptr(&a.a_scale_inv),
          sb     = *(const float *)cpu_ptr(&a.b_scale_inv);
    a.gemm.alpha = a.gemm.alpha * (sa * sb);
    return cpu_gemm_checked(ctx, &a.gemm);
}

// ---------------------------------------------------------------------------------------
// FP8_SCALE_UPDATE

ampx_status cpu_fp8_scale_update(ampx_context *ctx, const ampx_fp8_scale_update_args *args) {
    ampx_fp8_scale_update_args a;
    CPU_TRY(ampx_kit_take_fp8_scale_update(AMPX_KIT(ctx), args, &a));
    float *st = cpu_ptr(&a.state), *scale = st, *scale_inv = st + a.n, *hist = st + 2 * a.n;
    const float *fmax     = cpu_ptr(&a.fp8_max);
    const ampx_scalars *s = a.scalars.buf ? cpu_ptr(&a.scalars) : NULL;
    uint64_t n = a.n, H = a.history;
    if (a.skip_on_found_inf && s->found_inf) {
        memset(hist, 0, n * sizeof(float));
        return AMPX_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        float amax = hist[i];
        if (a.algo == AMPX_FP8_AMAX_MAX)
            for (uint64_t h = 1; h < H; h++)
                amax = ampx_km_fp8_max_step(amax, hist[h * n + i]);
        scale[i]     = ampx_km_fp8_scale(amax, scale[i], fmax[i], a.margin);
        scale_inv[i] = 1.0f / scale[i];
    }
    /* the roll, row by row: row h takes row h + 1, the last row takes row 0, row 0 clears */
    if (H > 1) {
        float *first = cpu_reserve_shared_ws(ctx, "fp8_scale_update", n * sizeof(float));
        if (!first) return AMPX_ERR_NO_MEMORY;
        memcpy(first, hist, n * sizeof(float));
        memmove(hist, hist + n, (H - 1) * n * sizeof(float));
        memcpy(hist + (H - 1) * n, first, n * sizeof(float));
    }
    memset(hist, 0, n * sizeof(float));
    return AMPX_OK;
}
