/* cast.c — CAST between float dtypes, and the row converters every op uses to move data
 * between a tensor's dtype and f32.
 *
 * Widening bf16/f16 -> f32 is exact. Narrowing rounds to nearest even through dtype.h, or
 * stochastically with rnd = ampx_hash32(seed, i) for element i: the hash is counter-based,
 * so the result is the same whatever the split into threads. bf16 <-> f16 goes through f32,
 * which is exact on the way in, so it rounds once.
 */
#include <string.h>

#include "avx2_math.h"
#include "cpu.h"

// ---------------------------------------------------------------------------------------
// Row converters

void cpu_load_f32(float *dst, const void *base, ampx_dtype dt, uint64_t i0, uint64_t n) {
    if (dt == AMPX_F32)
        memcpy(dst, (const float *)base + i0, (size_t)n * sizeof(float));
    else if (ampx_dtype_is_fp8(dt))
        for (uint64_t j = 0; j < n; j++)
            dst[j] = ampx_fp8_to_f32(((const uint8_t *)base)[i0 + j], dt);
    else
        cpu_tls_kern->load_f32(dst, (const char *)base + i0 * 2, dt, n);
}

void cpu_store_f32(void *base, ampx_dtype dt, uint64_t i0, const float *src, uint64_t n) {
    if (dt == AMPX_F32)
        memmove((float *)base + i0, src, (size_t)n * sizeof(float));
    else
        cpu_tls_kern->store_f32((char *)base + i0 * 2, dt, src, n);
}

// ---------------------------------------------------------------------------------------
// CAST

typedef struct cast_job {
    const void *src;
    void *dst;
    ampx_dtype sdt, ddt;
    uint64_t n, seed;
    int stochastic;
} cast_job;

#if CPU_HAVE_AVX2_TABLE
/* Round-to-nearest casts between different dtypes with the in-register converters
 * (avx2_math.h), src read and dst written where they lie: eight lanes on the AVX2 table
 * (the last n % 8 through dtype.h), sixteen on the AVX-512 ones (the last vector masked).
 * Every conversion gives dtype.h's bits, so the paths agree with the portable one. */
CPU_AVX2_FN static void cast_avx2(const cast_job *j, uint64_t i0, uint64_t n) {
    uint64_t k = 0;
    for (; k + 8 <= n; k += 8)
        cpu_avx2_st8(j->dst, j->ddt, i0 + k, cpu_avx2_ld8(j->src, j->sdt, i0 + k));
    for (; k < n; k++)
        cpu_st(j->dst, j->ddt, i0 + k, cpu_ld(j->src, j->sdt, i0 + k));
}

CPU_AVX512_FN static void cast_avx512(const cast_job *j, uint64_t i0, uint64_t n) {
    const int ne = cpu_bf16_ne(); /* f32 -> bf16 by vcvtneps2bf16 on the AVX512-BF16 path */
    for (uint64_t k = 0; k < n; k += 16) {
        __mmask16 m = cpu_avx512_mask16(n - k);
        cpu_avx512_st16_ne(j->dst, j->ddt, i0 + k, cpu_avx512_ld16(j->src, j->sdt, i0 + k, m), m,
                           ne);
    }
}
#endif

static void cast_chunk(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const cast_job *j = arg;
    uint64_t i0       = item * CPU_CHUNK;
    uint64_t n        = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    if (j->sdt == j->ddt) { /* a copy: bit-exact, NaN payloads included */
        size_t es = ampx_dtype_size(j->sdt);
        memmove((char *)j->dst + i0 * es, (const char *)j->src + i0 * es, (size_t)n * es);
        return;
    }
#if CPU_HAVE_AVX2_TABLE
    if (!j->stochastic && cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        cast_avx512(j, i0, n);
        return;
    }
    if (!j->stochastic && cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        cast_avx2(j, i0, n);
        return;
    }
#endif
    if (j->ddt == AMPX_F32) { /* widening: straight into dst */
        cpu_load_f32((float *)j->dst + i0, j->src, j->sdt, i0, n);
        return;
    }
    float tmp[CPU_CHUNK];
    const float *v = cpu_in_f32(tmp, j->src, j->sdt, i0, n); /* f32 src: read in place */
    if (j->stochastic) {
        for (uint64_t k = 0; k < n; k++)
            cpu_st_sr(j->dst, j->ddt, i0 + k, v[k], ampx_hash32(j->seed, i0 + k));
    } else {
        cpu_store_f32(j->dst, j->ddt, i0, v, n);
    }
}

ampx_status cpu_cast(ampx_context *ctx, const ampx_cast_args *args) {
    ampx_cast_args a;
    CPU_TRY(ampx_kit_take_cast(AMPX_KIT(ctx), args, &a));
    cast_job j = {cpu_ptr(&a.src),
                  cpu_ptr(&a.dst),
                  a.src.dtype,
                  a.dst.dtype,
                  a.n,
                  a.seed,
                  a.rounding == AMPX_ROUND_STOCHASTIC};
    /* Chunk boundaries never change the result: the hash is indexed by element. */
    cpu_run_chunks(ctx, a.n, cast_chunk, &j);
    return AMPX_OK;
}
