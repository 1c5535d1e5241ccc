/* abs_max.c — ABS_MAX (ABI 1.8): each tensor's largest |x|, NaN above inf, over one read.
 *
 * Non-negative floats order as their bit patterns do, and so do +inf and the NaNs above it,
 * so the largest |x| with NaN on top is the largest (bits & ~sign) as an unsigned integer: no
 * float compare, no conversion in the loop. bf16 and f16 are reduced on their 16-bit codes
 * (32 lanes per AVX-512 register) and widened once at the end; the widening keeps the order.
 * Items are AM_ITEM elements of one tensor, each item's code kept apart and the tensor's
 * taken as their maximum, so the result does not depend on the threads or the ISA path.
 * An item is 16 of the elementwise ops' chunks: the scan runs at memory speed, so below
 * about 2 items waking the pool costs more than the second thread saves (the trainer's
 * forensics call it on every op's outputs, most of them a few hundred KiB). */
#include <string.h>

#include "avx2_math.h"
#include "cpu.h"

#define AM_ITEM (16 * (uint64_t)CPU_CHUNK)

typedef struct abs_max_job {
    const ampx_tensor *tensors;
    const uint64_t *n_elems;
    const uint64_t *first; /* first item of each tensor; first[count] = every item */
    uint32_t count;
    uint32_t *code; /* per item: the largest magnitude's code, widened to f32 bits */
} abs_max_job;

static uint32_t max_u32(const uint32_t *x, uint64_t n) {
    uint32_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = x[i] & 0x7fffffffu;
        m          = v > m ? v : m;
    }
    return m;
}

static uint16_t max_u16(const uint16_t *x, uint64_t n) {
    uint16_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t v = (uint16_t)(x[i] & 0x7fffu);
        m          = v > m ? v : m;
    }
    return m;
}

#if CPU_HAVE_AVX2_TABLE
CPU_AVX2_FN static uint32_t max_u32_avx2(const uint32_t *x, uint64_t n) {
    const __m256i mask = _mm256_set1_epi32(0x7fffffff);
    __m256i a = _mm256_setzero_si256(), b = a;
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_max_epu32(a, _mm256_and_si256(_mm256_loadu_si256((const void *)(x + i)), mask));
        b = _mm256_max_epu32(b,
                             _mm256_and_si256(_mm256_loadu_si256((const void *)(x + i + 8)), mask));
    }
    uint32_t l[8], m = max_u32(x + i, n - i);
    _mm256_storeu_si256((void *)l, _mm256_max_epu32(a, b));
    for (int k = 0; k < 8; k++)
        m = l[k] > m ? l[k] : m;
    return m;
}

CPU_AVX2_FN static uint16_t max_u16_avx2(const uint16_t *x, uint64_t n) {
    const __m256i mask = _mm256_set1_epi16(0x7fff);
    __m256i a = _mm256_setzero_si256(), b = a;
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm256_max_epu16(a, _mm256_and_si256(_mm256_loadu_si256((const void *)(x + i)), mask));
        b = _mm256_max_epu16(
            b, _mm256_and_si256(_mm256_loadu_si256((const void *)(x + i + 16)), mask));
    }
    uint16_t l[16], m = max_u16(x + i, n - i);
    _mm256_storeu_si256((void *)l, _mm256_max_epu16(a, b));
    for (int k = 0; k < 16; k++)
        m = l[k] > m ? l[k] : m;
    return m;
}

CPU_AVX512_FN static uint32_t max_u32_avx512(const uint32_t *x, uint64_t n) {
    const __m512i mask = _mm512_set1_epi32(0x7fffffff);
    __m512i a = _mm512_setzero_si512(), b = a;
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm512_max_epu32(a, _mm512_and_si512(_mm512_loadu_si512(x + i), mask));
        b = _mm512_max_epu32(b, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), mask));
    }
    uint32_t m = max_u32(x + i, n - i), v = _mm512_reduce_max_epu32(_mm512_max_epu32(a, b));
    return v > m ? v : m;
}

CPU_AVX512_FN static uint16_t max_u16_avx512(const uint16_t *x, uint64_t n) {
    const __m512i mask = _mm512_set1_epi16(0x7fff);
    __m512i a = _mm512_setzero_si512(), b = a;
    uint64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a = _mm512_max_epu16(a, _mm512_and_si512(_mm512_loadu_si512(x + i), mask));
        b = _mm512_max_epu16(b, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), mask));
    }
    __m256i h = _mm256_max_epu16(_mm512_castsi512_si256(_mm512_max_epu16(a, b)),
                                 _mm512_extracti64x4_epi64(_mm512_max_epu16(a, b), 1));
    uint16_t l[16], m = max_u16(x + i, n - i);
    _mm256_storeu_si256((void *)l, h);
    for (int k = 0; k < 16; k++)
        m = l[k] > m ? l[k] : m;
    return m;
}
#endif

/* The largest magnitude's code among x[0 .. n) of dtype dt, on the thread's ISA path. */
static uint32_t span_code(const void *x, ampx_dtype dt, uint64_t n) {
    int wide = dt == AMPX_F32;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512)
        return wide ? max_u32_avx512(x, n) : max_u16_avx512(x, n);
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) return wide ? max_u32_avx2(x, n) : max_u16_avx2(x, n);
#endif
    return wide ? max_u32(x, n) : max_u16(x, n);
}

/* A code of dtype dt as the bits of the f32 it widens to (monotone on magnitudes). */
static uint32_t widen_code(ampx_dtype dt, uint32_t c) {
    if (dt == AMPX_F32) return c;
    if (dt == AMPX_BF16) return c << 16;
    float f = ampx_f16_to_f32((uint16_t)c);
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static void abs_max_item(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const abs_max_job *j = arg;
    uint32_t t           = cpu_item_tensor(j->first, j->count, item);
    uint64_t i0 = (item - j->first[t]) * AM_ITEM, nt = j->n_elems[t];
    uint64_t n    = nt - i0 < AM_ITEM ? nt - i0 : AM_ITEM;
    ampx_dtype dt = j->tensors[t].dtype;
    const unsigned char *x =
        (const unsigned char *)cpu_ptr(&j->tensors[t]) + i0 * ampx_dtype_size(dt);
    j->code[item] = widen_code(dt, span_code(x, dt, n));
}

ampx_status cpu_abs_max(ampx_context *ctx, const ampx_abs_max_args *args) {
    ampx_abs_max_args a;
    CPU_TRY(ampx_kit_take_abs_max(AMPX_KIT(ctx), args, &a));
    size_t head    = ((size_t)a.x.count + 1) * sizeof(uint64_t);
    head           = (head + 63) & ~(size_t)63;
    uint64_t items = 0, n_total = 0;
    for (uint32_t t = 0; t < a.x.count; t++) {
        items += cpu_div_up(a.x.n_elems[t], AM_ITEM);
        n_total += a.x.n_elems[t];
    }
    unsigned char *ws = cpu_reserve_shared_ws(
        ctx, "abs_max", head + (size_t)(items ? items : 1) * sizeof(uint32_t));
    if (!ws) return AMPX_ERR_NO_MEMORY;
    abs_max_job j   = {.tensors = a.x.tensors,
                       .n_elems = a.x.n_elems,
                       .first   = (const uint64_t *)ws,
                       .count   = a.x.count,
                       .code    = (uint32_t *)(ws + head)};
    uint64_t *first = (uint64_t *)ws;
    first[0]        = 0;
    for (uint32_t t = 0; t < a.x.count; t++)
        first[t + 1] = first[t] + cpu_div_up(a.x.n_elems[t], AM_ITEM);
    cpu_run(ctx, n_total, items, abs_max_item, &j);
    float *out = cpu_ptr(&a.out);
    for (uint32_t t = 0; t < a.x.count; t++) {
        uint32_t m = 0;
        for (uint64_t c = first[t]; c < first[t + 1]; c++)
            m = j.code[c] > m ? j.code[c] : m;
        if (m > 0x7f800000u) m = 0x7fc00000u; /* a NaN: the quiet one */
        memcpy(out + t, &m, 4);
    }
    return AMPX_OK;
}
