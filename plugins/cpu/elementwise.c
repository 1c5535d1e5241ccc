/* elementwise.c — ADD (add, axpby, bias-add), MUL, SCALE and BIAS_GRAD.
 *
 * Each element is loaded to f32 (exact), combined in f32 exactly as written in backend.h,
 * and rounded once to y's dtype. Work is cut into CPU_CHUNK-element chunks that threads take
 * in any order; an element's result does not depend on the chunking. In-place calls (y the
 * very same tensor as a or b) are safe because every chunk reads its inputs before it writes.
 * A broadcast row of b is copied to f32 workspace first, so y may even be that row.
 */
#include <string.h>

#include "avx2_math.h"
#include "cpu.h"

// ---------------------------------------------------------------------------------------
// ADD and MUL

typedef struct binary_job {
    int mul; /* 0: y = alpha a + beta b;  1: y = a * b */
    float alpha, beta;
    const void *a, *b;
    void *y;
    ampx_dtype adt, bdt, ydt;
    uint64_t n, cols;
    const float *brow; /* broadcast row of b in f32, or NULL */
} binary_job;

/* y[k] from a[k] and b[k]; a, b and y may be the same array (every element is read before
 * it is written). */
CPU_INLINE void binary_run_seg(const binary_job *j, const float *a, const float *b, float *y,
                               uint64_t n) {
    if (j->mul)
        for (uint64_t k = 0; k < n; k++)
            y[k] = a[k] * b[k];
    else
        for (uint64_t k = 0; k < n; k++)
            y[k] = j->alpha * a[k] + j->beta * b[k];
}

#if CPU_HAVE_AVX2_TABLE
/* The AVX2 and AVX-512 paths: the same f32 operations (two products and a sum, no fused
 * multiply-add, or one product) sixteen lanes at a time, a, b and y read and written where they lie
 * (bf16 and f16 converted in registers), the last vector masked: every element gets the portable
 * path's bits. b is the tensor at element bi, or the f32 broadcast row at brow. */
CPU_AVX512_FN static void binary_seg_avx512(const binary_job *j, uint64_t i, const float *brow,
                                            uint64_t m) {
    const __m512 va = _mm512_set1_ps(j->alpha), vb = _mm512_set1_ps(j->beta);
    for (uint64_t k = 0; k < m; k += 16) {
        __mmask16 msk = cpu_avx512_mask16(m - k);
        __m512 a      = cpu_avx512_ld16(j->a, j->adt, i + k, msk);
        __m512 b =
            brow ? _mm512_maskz_loadu_ps(msk, brow + k) : cpu_avx512_ld16(j->b, j->bdt, i + k, msk);
        __m512 y = j->mul ? _mm512_mul_ps(a, b)
                          : _mm512_add_ps(_mm512_mul_ps(va, a), _mm512_mul_ps(vb, b));
        cpu_avx512_st16(j->y, j->ydt, i + k, y, msk);
    }
}

/* The same on the AVX2 path, eight lanes, the last m % 8 elements one by one (the same f32
 * operations in C, no contraction). */
CPU_AVX2_FN static void binary_seg_avx2(const binary_job *j, uint64_t i, const float *brow,
                                        uint64_t m) {
    const __m256 va = _mm256_set1_ps(j->alpha), vb = _mm256_set1_ps(j->beta);
    uint64_t k = 0;
    for (; k + 8 <= m; k += 8) {
        __m256 a = cpu_avx2_ld8(j->a, j->adt, i + k);
        __m256 b = brow ? _mm256_loadu_ps(brow + k) : cpu_avx2_ld8(j->b, j->bdt, i + k);
        __m256 y = j->mul ? _mm256_mul_ps(a, b)
                          : _mm256_add_ps(_mm256_mul_ps(va, a), _mm256_mul_ps(vb, b));
        cpu_avx2_st8(j->y, j->ydt, i + k, y);
    }
    for (; k < m; k++) {
        float a = cpu_ld(j->a, j->adt, i + k), b = brow ? brow[k] : cpu_ld(j->b, j->bdt, i + k);
        cpu_st(j->y, j->ydt, i + k, j->mul ? a * b : j->alpha * a + j->beta * b);
    }
}

/* The chunk in runs along the broadcast row (or whole), each run through seg. */
CPU_INLINE void binary_runs(const binary_job *j, uint64_t i0, uint64_t n,
                            void (*seg)(const binary_job *, uint64_t, const float *, uint64_t)) {
    if (!j->brow) {
        seg(j, i0, NULL, n);
        return;
    }
    uint64_t c = i0 % j->cols;
    for (uint64_t k = 0; k < n;) {
        uint64_t m = j->cols - c < n - k ? j->cols - c : n - k;
        seg(j, i0 + k, j->brow + c, m);
        k += m;
        c = 0;
    }
}
#endif

CPU_INLINE void binary_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const binary_job *j = arg;
    uint64_t i0         = item * CPU_CHUNK;
    uint64_t n          = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        binary_runs(j, i0, n, binary_seg_avx512);
        return;
    }
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        binary_runs(j, i0, n, binary_seg_avx2);
        return;
    }
#endif
    float ta[CPU_CHUNK], tb[CPU_CHUNK];
    const float *a = cpu_in_f32(ta, j->a, j->adt, i0, n);
    float *y       = cpu_out_f32(ta, j->y, j->ydt, i0);
    if (j->brow) { /* the chunk in runs along the broadcast row */
        uint64_t c = i0 % j->cols;
        for (uint64_t k = 0; k < n;) {
            uint64_t m = j->cols - c < n - k ? j->cols - c : n - k;
            binary_run_seg(j, a + k, j->brow + c, y + k, m);
            k += m;
            c = 0;
        }
    } else {
        binary_run_seg(j, a, cpu_in_f32(tb, j->b, j->bdt, i0, n), y, n);
    }
    cpu_out_f32_done(j->y, j->ydt, i0, y, n);
}
CPU_ISA_CHUNK(binary_chunk, binary_chunk_body)

/* ADD and MUL after ampx_kit_take_add / _mul. */
static ampx_status binary_run(ampx_context *ctx, const char *opname, binary_job *j,
                              uint32_t broadcast_b, uint64_t rows, uint64_t cols,
                              const ampx_tensor *a, const ampx_tensor *b, const ampx_tensor *y) {
    uint64_t n = rows * cols;
    if (n == 0) return AMPX_OK;
    j->a    = cpu_ptr(a);
    j->b    = cpu_ptr(b);
    j->y    = cpu_ptr(y);
    j->adt  = a->dtype;
    j->bdt  = b->dtype;
    j->ydt  = y->dtype;
    j->n    = n;
    j->cols = cols;
    j->brow = NULL;
    if (broadcast_b) {
        float *row = cpu_reserve_shared_ws(ctx, opname, (size_t)cols * sizeof(float));
        if (!row) return AMPX_ERR_NO_MEMORY;
        cpu_load_f32(row, j->b, j->bdt, 0, cols);
        j->brow = row;
    }
    cpu_run_chunks(ctx, n, binary_chunk, j);
    return AMPX_OK;
}

ampx_status cpu_add(ampx_context *ctx, const ampx_add_args *args) {
    ampx_add_args a;
    CPU_TRY(ampx_kit_take_add(AMPX_KIT(ctx), args, &a));
    binary_job j = {.mul = 0, .alpha = a.alpha, .beta = a.beta};
    return binary_run(ctx, "add", &j, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

ampx_status cpu_mul(ampx_context *ctx, const ampx_mul_args *args) {
    ampx_mul_args a;
    CPU_TRY(ampx_kit_take_mul(AMPX_KIT(ctx), args, &a));
    binary_job j = {.mul = 1};
    return binary_run(ctx, "mul", &j, a.broadcast_b, a.rows, a.cols, &a.a, &a.b, &a.y);
}

// ---------------------------------------------------------------------------------------
// SCALE

typedef struct scale_job {
    float alpha;
    const void *x;
    void *y;
    ampx_dtype xdt, ydt;
    uint64_t n;
} scale_job;

#if CPU_HAVE_AVX2_TABLE
/* y = alpha x where x and y lie (the portable path's product): sixteen lanes on the AVX-512
 * paths, eight on the AVX2 one (the last n % 8 one by one). */
CPU_AVX512_FN static void scale_span_avx512(const scale_job *j, uint64_t i0, uint64_t n) {
    const __m512 va = _mm512_set1_ps(j->alpha);
    for (uint64_t k = 0; k < n; k += 16) {
        __mmask16 msk = cpu_avx512_mask16(n - k);
        cpu_avx512_st16(j->y, j->ydt, i0 + k,
                        _mm512_mul_ps(va, cpu_avx512_ld16(j->x, j->xdt, i0 + k, msk)), msk);
    }
}

CPU_AVX2_FN static void scale_avx2(const scale_job *j, uint64_t i0, uint64_t n) {
    const __m256 va = _mm256_set1_ps(j->alpha);
    uint64_t k      = 0;
    for (; k + 8 <= n; k += 8)
        cpu_avx2_st8(j->y, j->ydt, i0 + k, _mm256_mul_ps(va, cpu_avx2_ld8(j->x, j->xdt, i0 + k)));
    for (; k < n; k++)
        cpu_st(j->y, j->ydt, i0 + k, j->alpha * cpu_ld(j->x, j->xdt, i0 + k));
}
#endif

CPU_INLINE void scale_chunk_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const scale_job *j = arg;
    uint64_t i0        = item * CPU_CHUNK;
    uint64_t n         = j->n - i0 < CPU_CHUNK ? j->n - i0 : CPU_CHUNK;
#if CPU_HAVE_AVX2_TABLE
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        scale_span_avx512(j, i0, n);
        return;
    }
    if (cpu_tls_kern->isa >= CPU_ISA_AVX2) {
        scale_avx2(j, i0, n);
        return;
    }
#endif
    float t[CPU_CHUNK];
    const float *x = cpu_in_f32(t, j->x, j->xdt, i0, n);
    float *y       = cpu_out_f32(t, j->y, j->ydt, i0);
    for (uint64_t k = 0; k < n; k++)
        y[k] = j->alpha * x[k];
    cpu_out_f32_done(j->y, j->ydt, i0, y, n);
}
CPU_ISA_CHUNK(scale_chunk, scale_chunk_body)

ampx_status cpu_scale(ampx_context *ctx, const ampx_scale_args *args) {
    ampx_scale_args a;
    CPU_TRY(ampx_kit_take_scale(AMPX_KIT(ctx), args, &a));
    scale_job j = {a.alpha, cpu_ptr(&a.x), cpu_ptr(&a.y), a.x.dtype, a.y.dtype, a.n};
    cpu_run_chunks(ctx, a.n, scale_chunk, &j);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// BIAS_GRAD: column sums of dy. Each column sums its rows in order in double (wider than
// the f32 the ABI asks for), so the result is the same for any thread count; threads take
// disjoint column blocks.

#define BIAS_COLS 256

typedef struct bias_job {
    const void *dy;
    void *db;
    ampx_dtype dydt, dbdt;
    uint64_t rows, cols;
    int accumulate;
} bias_job;

static void bias_block(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const bias_job *j = arg;
    uint64_t c0       = item * BIAS_COLS;
    uint64_t nc       = j->cols - c0 < BIAS_COLS ? j->cols - c0 : BIAS_COLS;
    double sum[BIAS_COLS];
    float t[BIAS_COLS];
    memset(sum, 0, sizeof sum);
    for (uint64_t r = 0; r < j->rows; r++) {
        const float *dy = cpu_in_f32(t, j->dy, j->dydt, r * j->cols + c0, nc);
        for (uint64_t c = 0; c < nc; c++)
            sum[c] += dy[c];
    }
    if (j->accumulate) {
        cpu_load_f32(t, j->db, j->dbdt, c0, nc);
        for (uint64_t c = 0; c < nc; c++)
            sum[c] += t[c];
    }
    for (uint64_t c = 0; c < nc; c++)
        t[c] = (float)sum[c];
    cpu_store_f32(j->db, j->dbdt, c0, t, nc);
}

ampx_status cpu_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *args) {
    ampx_bias_grad_args a;
    CPU_TRY(ampx_kit_take_bias_grad(AMPX_KIT(ctx), args, &a));
    uint64_t n = a.rows * a.cols;
    bias_job j = {cpu_ptr(&a.dy), cpu_ptr(&a.db), a.dy.dtype,       a.db.dtype,
                  a.rows,         a.cols,         a.accumulate != 0};
    cpu_run(ctx, n, cpu_div_up(a.cols, BIAS_COLS), bias_block, &j);
    return AMPX_OK;
}
