/* gemm_epilogue.c — GEMM's ABI 1.5 epilogue on the cpu backend.
 *
 * Forward: each finished row of a C tile, alpha * acc + beta * C in f32 (the driver's value,
 * not yet rounded), gets v = v + bias[j] in f32, pre_act = round(v), C = round(f(v)): one
 * rounding per destination. f is evaluated as ACT_FWD evaluates it on the same table
 * (activation.c): on the portable table ampx_km_act_f in double, rounded to f32; on the AVX2
 * and AVX-512 tables gelu, sigmoid and silu in f32 eight lanes at a time with the same IEEE
 * operations in the same order as activation.c's act8_avx2 (whose AVX-512 twin gives the
 * same bits), the n % 8 tail of a row in double. So an f32 C is bit-identical to GEMM, ADD
 * and ACT_FWD run apart wherever those eight-lane groups line up (rows of a multiple of 8).
 *
 * Backward: the bias gradient, column sums of op(B), is summed per column in double in the
 * order of the batches and k (BIAS_GRAD's order and width, elementwise.c), the old value
 * added last when accumulating, rounded once to f32: with one batch and B stored k x n it
 * is BIAS_GRAD of B bit for bit. It reads B once more (threads over column blocks) rather
 * than inside the packing, which reads each element once per k block of tiles.
 */
#include "gemm_epilogue.h"

#include <string.h>

#include "ampx/kernel_math.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#include "avx2_math.h"
#endif

// ---------------------------------------------------------------------------------------
// Forward: bias, pre_act, activation

void cpu_gemm_epi_init(cpu_gemm_epi *e, const cpu_kernels *kern, const ampx_gemm_args *g) {
    memset(e, 0, sizeof *e);
    e->act     = g->act == AMPX_GEMM_ACT_NONE ? -1 : (int)(g->act - 1);
    e->bias    = cpu_ptr(&g->bias);
    e->bias_dt = g->bias.dtype;
    e->pre     = cpu_ptr(&g->pre_act);
    e->pre_dt  = g->pre_act.dtype;
    e->on      = e->act >= 0 || e->bias || e->pre;
    e->relu    = e->act == AMPX_ACT_RELU;
    e->vec     = kern->isa >= CPU_ISA_AVX2 &&
             (e->act == AMPX_ACT_GELU || e->act == AMPX_ACT_SIGMOID || e->act == AMPX_ACT_SILU);
    e->wide = kern->isa >= CPU_ISA_AVX512 && (e->act < 0 || e->vec);
}

/* relu as activation.c computes it: x for x > 0, x + x for NaN (quieted), +0 otherwise. */
static inline float relu_f32(float v) {
    return v > 0.0f ? v : v != v ? v + v : 0.0f;
}

/* f(v) rounded to f32 as the table's ACT_FWD gives it outside its eight-lane groups. */
static inline float act_one(const cpu_gemm_epi *e, float v) {
    if (e->relu) return relu_f32(v);
    return (float)ampx_km_act_f(e->act, v);
}

#if CPU_HAVE_AVX2_TABLE
/* activation.c's act8_avx2 forward, operation for operation: v = -u with u = x (sigmoid,
 * silu) or 2 k (x + c x^3) (gelu), s = sigmoid(u) from cpu_avx2_sigmoid_neg_ps (no
 * division), f = s (sigmoid) or x s (gelu, silu). */
CPU_AVX2_FN static void act_row_avx2(int act, float *r, uint64_t n) {
    uint64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 x = _mm256_loadu_ps(r + k), s, om;
        cpu_avx2_sigmoid_neg_ps(cpu_avx2_act_neg_arg_ps((uint32_t)act, x), &s, &om);
        _mm256_storeu_ps(r + k, act == AMPX_ACT_SIGMOID ? s : _mm256_mul_ps(x, s));
    }
    for (; k < n; k++)
        r[k] = (float)ampx_km_act_f(act, r[k]);
}
#endif

#define EPI_COLS 256

void cpu_gemm_epi_row(const cpu_gemm_epi *e, float *r, uint64_t off, uint64_t col0, uint64_t n) {
    float t[EPI_COLS];
    for (uint64_t c0 = 0; c0 < n; c0 += EPI_COLS) {
        uint64_t nc = n - c0 < EPI_COLS ? n - c0 : EPI_COLS;
        float *v    = r + c0;
        if (e->bias) {
            cpu_load_f32(t, e->bias, e->bias_dt, col0 + c0, nc);
            for (uint64_t j = 0; j < nc; j++)
                v[j] = v[j] + t[j];
        }
        if (e->pre) cpu_store_f32(e->pre, e->pre_dt, off + c0, v, nc);
        if (e->act < 0) continue;
#if CPU_HAVE_AVX2_TABLE
        if (e->vec) {
            act_row_avx2(e->act, v, nc);
            continue;
        }
#endif
        for (uint64_t j = 0; j < nc; j++)
            v[j] = act_one(e, v[j]);
    }
}

#if CPU_HAVE_AVX2_TABLE
/* cpu_gemm_epi_store's whole sixteen-lane groups on the AVX-512 tables, in one pass: C =
 * f(alpha r + bias) with pre_act stored, the operations of the row path above (the AVX2
 * path's bits). Returns the elements done. */
CPU_AVX512_FN static uint64_t epi_store_avx512(const cpu_gemm_epi *e, const float *r, float alpha,
                                               void *C, ampx_dtype cdt, uint64_t off, uint64_t col0,
                                               uint64_t n) {
    const int ne = cpu_bf16_ne(), act = e->act;
    const __m512 a   = _mm512_set1_ps(alpha);
    const void *bias = e->bias;
    void *pre        = e->pre;
    ampx_dtype bdt = e->bias_dt, pdt = e->pre_dt;
    uint64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512 v = _mm512_mul_ps(a, _mm512_loadu_ps(r + k));
        if (bias) v = _mm512_add_ps(v, cpu_avx512_ld16(bias, bdt, col0 + k, 0xffff));
        if (pre) cpu_avx512_st16_ne(pre, pdt, off + k, v, 0xffff, ne);
        if (act >= 0) v = cpu_avx512_act_fwd_ps((uint32_t)act, v);
        cpu_avx512_st16_ne(C, cdt, off + k, v, 0xffff, ne);
    }
    return k;
}
#endif

void cpu_gemm_epi_store(const cpu_gemm_epi *e, float *r, float alpha, void *C, ampx_dtype cdt,
                        uint64_t off, uint64_t col0, uint64_t n) {
    uint64_t k = 0;
#if CPU_HAVE_AVX2_TABLE
    if (e->wide) k = epi_store_avx512(e, r, alpha, C, cdt, off, col0, n);
#endif
    if (k == n) return;
    for (uint64_t j = k; j < n; j++)
        r[j] = alpha * r[j];
    if (e->on) cpu_gemm_epi_row(e, r + k, off + k, col0 + k, n - k);
    cpu_store_f32(C, cdt, off + k, r + k, n - k);
}

float cpu_gemm_epi_one(const cpu_gemm_epi *e, float v, uint64_t off, uint64_t col) {
    if (e->bias) v = v + cpu_ld(e->bias, e->bias_dt, col);
    if (e->pre) cpu_st(e->pre, e->pre_dt, off, v);
    return e->act < 0 ? v : act_one(e, v);
}

// ---------------------------------------------------------------------------------------
// Backward: the bias gradient, column sums of op(B)

typedef struct bias_grad_job {
    const ampx_gemm_args *g;
    const void *B;
    float *db;
} bias_grad_job;

CPU_INLINE void bias_grad_body(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const bias_grad_job *j  = arg;
    const ampx_gemm_args *g = j->g;
    uint64_t c0 = item * EPI_COLS, nc = g->n - c0 < EPI_COLS ? g->n - c0 : EPI_COLS;
    double sum[EPI_COLS];
    float t[EPI_COLS];
    memset(sum, 0, sizeof sum);
    for (uint64_t b = 0; b < g->batch; b++) {
        uint64_t base = b * g->stride_b;
        if (!g->trans_b) { /* B_b is k x n: a row of op(B) lies contiguous */
            for (uint64_t p = 0; p < g->k; p++) {
                cpu_load_f32(t, j->B, g->b.dtype, base + p * g->ldb + c0, nc);
                for (uint64_t c = 0; c < nc; c++)
                    sum[c] += t[c];
            }
        } else { /* B_b is n x k: op(B)'s column j is B's row j */
            for (uint64_t c = 0; c < nc; c++)
                for (uint64_t p = 0; p < g->k; p++)
                    sum[c] += cpu_ld(j->B, g->b.dtype, base + (c0 + c) * g->ldb + p);
        }
    }
    for (uint64_t c = 0; c < nc; c++) {
        if (g->bias_grad_accumulate) sum[c] += j->db[c0 + c];
        j->db[c0 + c] = (float)sum[c];
    }
}

/* The column sums vectorise across columns (each column's order is unchanged: the same
 * bits on every path). */
CPU_ISA_CHUNK(bias_grad_block, bias_grad_body)

void cpu_gemm_bias_grad(ampx_context *ctx, const ampx_gemm_args *g) {
    if (!g->bias_grad.buf || g->n == 0) return;
    bias_grad_job j = {g, cpu_ptr(&g->b), cpu_ptr(&g->bias_grad)};
    uint64_t work   = g->n * g->k * g->batch;
    cpu_run(ctx, work, cpu_div_up(g->n, EPI_COLS), bias_grad_block, &j);
}
