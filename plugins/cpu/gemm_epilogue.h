/* gemm_epilogue.h — GEMM's ABI 1.5 epilogue on the cpu backend (gemm_epilogue.c): the bias,
 * the pre-activation store and the activation applied to each finished f32 row of a C tile
 * while it is in cache, before its one rounding to C's dtype; and the bias gradient (column
 * sums of op(B)). gemm.c's drivers call these; nothing else does. */
#ifndef AMPX_CPU_GEMM_EPILOGUE_H
#define AMPX_CPU_GEMM_EPILOGUE_H

#include "cpu.h"

/* The forward epilogue of one GEMM, its pointers resolved. on == 0: none (bias grad aside). */
typedef struct cpu_gemm_epi {
    int on;
    int act;  /* ampx_act, or -1 */
    int vec;  /* gelu/sigmoid/silu in f32, eight lanes, as the AVX2 and AVX-512 ACT_FWD */
    int relu; /* the relu of activation.c: exact, NaN quieted */
    int wide; /* cpu_gemm_epi_store runs sixteen lanes (AVX-512 tables; no activation or vec) */
    const void *bias;
    ampx_dtype bias_dt;
    void *pre; /* pre_act, C's layout */
    ampx_dtype pre_dt;
} cpu_gemm_epi;

/* Fills e from g (already checked by the kit) for the kernel table kern. */
void cpu_gemm_epi_init(cpu_gemm_epi *e, const cpu_kernels *kern, const ampx_gemm_args *g);
/* r[0 .. n) holds alpha * acc + beta * C of C's elements off .. off + n - 1 (columns col0 ..
 * col0 + n - 1 of one row): adds the bias, stores pre_act there, applies the activation in
 * place. */
void cpu_gemm_epi_row(const cpu_gemm_epi *e, float *r, uint64_t off, uint64_t col0, uint64_t n);
/* C's elements off .. off + n - 1 (columns col0 .. of one row) = the row path above applied
 * to alpha * r[0 .. n), rounded once to cdt: a tile row's whole epilogue (with beta, the
 * driver folds beta * C into r first and passes alpha 1; r is overwritten). */
void cpu_gemm_epi_store(const cpu_gemm_epi *e, float *r, float alpha, void *C, ampx_dtype cdt,
                        uint64_t off, uint64_t col0, uint64_t n);
/* The same for one element v of C's element off, column col. */
float cpu_gemm_epi_one(const cpu_gemm_epi *e, float v, uint64_t off, uint64_t col);
/* bias_grad (+)= column sums of op(B) over every batch, when g asks for it. */
void cpu_gemm_bias_grad(ampx_context *ctx, const ampx_gemm_args *g);

#endif
