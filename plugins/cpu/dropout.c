/* dropout.c — DROPOUT: inverted dropout with a counter-based mask.
 *
 * Element i is kept when ampx_hash32(seed, offset + i) >= threshold (dtype.h's hash, so the
 * mask is the same bits on every backend and for any split into threads or pieces); a kept
 * element becomes x[i] * scale, the product in f32 rounded once to y's dtype (to nearest
 * even, through the table's converters), a dropped one +0 whatever x holds (NaN included).
 * Work is cut into CPU_CHUNK-element chunks like SCALE; each chunk loads x before it stores
 * y, so y may be x.
 */
#include "cpu.h"

typedef struct dropout_job {
    const void *x;
    void *y;
    ampx_dtype xdt, ydt;
    uint64_t n, seed, offset;
    uint32_t threshold;
    float scale;
} dropout_job;

CPU_INLINE void dropout_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const dropout_job *j = arg;
    uint64_t i0          = item * CPU_CHUNK;
    uint64_t n           = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
    uint64_t c0          = j->offset + i0; /* counter of element i0; wraps modulo 2^64 */
    float t[CPU_CHUNK];
    cpu_load_f32(t, j->x, j->xdt, i0, n);
    /* keep ? x * scale : +0 as a bit mask, not a branch: the mask is random, a branch on it
     * mispredicts half the time, and the masked loop vectorises. The bits are the same. */
    for (uint64_t k = 0; k < n; k++) {
        uint32_t keep = 0u - (uint32_t)(ampx_hash32(j->seed, c0 + k) >= j->threshold);
        t[k]          = ampx_f32_from_bits(ampx_f32_bits(t[k] * j->scale) & keep);
    }
    cpu_store_f32(j->y, j->ydt, i0, t, n);
}
CPU_ISA_CHUNK(dropout_chunk, dropout_chunk_body)

ampx_status cpu_dropout(ampx_context *ctx, const ampx_dropout_args *args) {
    ampx_dropout_args a;
    CPU_TRY(ampx_kit_take_dropout(AMPX_KIT(ctx), args, &a));
    dropout_job j = {cpu_ptr(&a.x), cpu_ptr(&a.y), a.x.dtype,   a.y.dtype, a.n,
                     a.seed,        a.offset,      a.threshold, a.scale};
    cpu_run_chunks(ctx, a.n, dropout_chunk, &j);
    return AMPX_OK;
}
