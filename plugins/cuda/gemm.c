/* gemm.c — GEMM: argument checks, and the choice between cuBLAS and the native kernel.
 *
 * cuBLAS is loaded at run time (dlopen of libcublas.so.<major> of the toolkit the plugin was
 * built with; the plugin's RUNPATH names that toolkit's library folder), so the plugin loads
 * on machines without it and falls back to the native kernel with a warning. Row-major C =
 * op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so cuBLAS gets B first and m, n
 * swapped. cuBLAS runs the dtype combinations it takes with f32 compute (CUBLAS_COMPUTE_32F,
 * no TF32, reduced-precision split-k reductions disallowed): f32 x f32 -> f32, and bf16 x bf16
 * or f16 x f16 -> the same dtype or f32. Everything else (mixed inputs, f32 inputs into a
 * bf16/f16 C, k == 0, arguments past 32 bits) takes the native kernel (kernels/cuda/gemm.cu).
 * So does every GEMM with the ABI 1.5 epilogue (bias, activation, pre_act), which that kernel
 * applies as it stores C; the bias gradient is a kernel of its own over op(B).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_api.h>

#include "cuda.h"

#ifndef AMPX_CUDA_LIBDIR
#define AMPX_CUDA_LIBDIR ""
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

struct cu_blas {
    void *lib;
    cublasHandle_t handle;
    int version;
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasDestroy_v2) destroy;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetMathMode) set_math_mode;
    __typeof__(&cublasGetVersion_v2) get_version;
    __typeof__(&cublasGetStatusName) status_name;
    __typeof__(&cublasGetStatusString) status_string;
    __typeof__(&cublasGemmStridedBatchedEx) gemm;
};

/* dlopen by soname (found through the RUNPATH or the system), then in the toolkit folder. */
static void *open_cublas(char *err, size_t cap) {
    void *lib = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    const char *e = dlerror();
    snprintf(err, cap, "%s", e ? e : CUBLAS_SONAME ": not found");
    if (AMPX_CUDA_LIBDIR[0]) {
        lib = dlopen(AMPX_CUDA_LIBDIR "/" CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
    }
    return NULL;
}

ampx_status cu_blas_load(ampx_context *ctx) {
    char err[256];
    cu_blas *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(ctx->blas_note, sizeof ctx->blas_note, "out of host memory loading cuBLAS");
        return AMPX_ERR_UNAVAILABLE;
    }
    b->lib = open_cublas(err, sizeof err);
    if (!b->lib) {
        snprintf(ctx->blas_note, sizeof ctx->blas_note, "cannot load cuBLAS (%s)", err);
        free(b);
        return AMPX_ERR_UNAVAILABLE;
    }
#define SYM(field, name)                                                                           \
    if (!(*(void **)&b->field = dlsym(b->lib, name))) {                                            \
        snprintf(ctx->blas_note, sizeof ctx->blas_note, "cuBLAS lacks %s", name);                  \
        goto fail;                                                                                 \
    }
    SYM(create, "cublasCreate_v2")
    SYM(destroy, "cublasDestroy_v2")
    SYM(set_stream, "cublasSetStream_v2")
    SYM(set_math_mode, "cublasSetMathMode")
    SYM(get_version, "cublasGetVersion_v2")
    SYM(status_name, "cublasGetStatusName")
    SYM(status_string, "cublasGetStatusString")
    SYM(gemm, "cublasGemmStridedBatchedEx")
#undef SYM
    cublasStatus_t s = b->create(&b->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(ctx->blas_note, sizeof ctx->blas_note, "cublasCreate: %s: %s", b->status_name(s),
                 b->status_string(s));
        goto fail;
    }
    if ((s = b->set_stream(b->handle, ctx->stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = b->set_math_mode(b->handle,
                              (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))) !=
            CUBLAS_STATUS_SUCCESS) {
        snprintf(ctx->blas_note, sizeof ctx->blas_note, "cuBLAS set-up: %s: %s", b->status_name(s),
                 b->status_string(s));
        b->destroy(b->handle);
        goto fail;
    }
    (void)b->get_version(b->handle, &b->version);
    ctx->blas = b;
    snprintf(ctx->blas_note, sizeof ctx->blas_note, "cuBLAS %d.%d.%d", b->version / 10000,
             b->version / 100 % 100, b->version % 100);
    return AMPX_OK;
fail:
    dlclose(b->lib);
    free(b);
    return AMPX_ERR_UNAVAILABLE;
}

void cu_blas_unload(ampx_context *ctx) {
    cu_blas *b = ctx->blas;
    if (!b) return;
    b->destroy(b->handle);
    /* libcublas stays mapped: unloading it while the runtime holds its kernels is unsafe */
    free(b);
    ctx->blas = NULL;
}

const char *cu_blas_describe(ampx_context *ctx) {
    if (ctx->gemm_path == CU_GEMM_NATIVE) return "cuBLAS not used";
    return ctx->blas_note[0] ? ctx->blas_note : "cuBLAS not loaded";
}

// ---------------------------------------------------------------------------------------
// cuBLAS dispatch

static int cuda_dtype(ampx_dtype dt) {
    return dt == AMPX_F32 ? CUDA_R_32F : dt == AMPX_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* 1 if cuBLAS takes these dtypes and every argument fits its int parameters. */
static int blas_takes(const ampx_gemm_args *g) {
    ampx_dtype a = g->a.dtype, b = g->b.dtype, c = g->c.dtype;
    int dt_ok = (a == AMPX_F32 && b == AMPX_F32 && c == AMPX_F32) ||
                ((a == AMPX_BF16 || a == AMPX_F16) && b == a && (c == a || c == AMPX_F32));
    const uint64_t lim = INT_MAX;
    return dt_ok && g->k > 0 && g->m <= lim && g->n <= lim && g->k <= lim && g->batch <= lim &&
           g->lda <= lim && g->ldb <= lim && g->ldc <= lim && g->stride_a <= (uint64_t)LLONG_MAX &&
           g->stride_b <= (uint64_t)LLONG_MAX && g->stride_c <= (uint64_t)LLONG_MAX;
}

static ampx_status blas_gemm(ampx_context *ctx, const ampx_gemm_args *g, uint64_t batch0,
                             uint64_t nbatch) {
    cu_blas *b = ctx->blas;
    size_t ea = ampx_dtype_size(g->a.dtype), eb = ampx_dtype_size(g->b.dtype);
    size_t ec        = ampx_dtype_size(g->c.dtype);
    const char *A    = (const char *)cu_ptr(&g->a) + batch0 * g->stride_a * ea;
    const char *B    = (const char *)cu_ptr(&g->b) + batch0 * g->stride_b * eb;
    char *C          = (char *)cu_ptr(&g->c) + batch0 * g->stride_c * ec;
    cublasStatus_t s = b->gemm(
        b->handle, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)g->n, (int)g->m, (int)g->k, &g->alpha, B, cuda_dtype(g->b.dtype), (int)g->ldb,
        (long long)g->stride_b, A, cuda_dtype(g->a.dtype), (int)g->lda, (long long)g->stride_a,
        &g->beta, C, cuda_dtype(g->c.dtype), (int)g->ldc, (long long)g->stride_c, (int)nbatch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s == CUBLAS_STATUS_SUCCESS) return AMPX_OK;
    return cu_fail(ctx, s == CUBLAS_STATUS_ALLOC_FAILED ? AMPX_ERR_NO_MEMORY : AMPX_ERR_DEVICE,
                   "gemm: cublasGemmStridedBatchedEx: %s: %s", b->status_name(s),
                   b->status_string(s));
}

ampx_status cu_gemm(ampx_context *ctx, const ampx_gemm_args *args) {
    ampx_gemm_args a;
    CU_TAKE(ctx, "gemm", ampx_kit_take_gemm(AMPX_KIT(ctx), args, &a, NULL));
    const ampx_gemm_args *g = &a;
    int epi                 = g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf;
    cuk_gemm k              = {
                     .a        = cu_ptr(&g->a),
                     .b        = cu_ptr(&g->b),
                     .c        = cu_ptr(&g->c),
                     .adt      = g->a.dtype,
                     .bdt      = g->b.dtype,
                     .cdt      = g->c.dtype,
                     .trans_a  = g->trans_a != 0,
                     .trans_b  = g->trans_b != 0,
                     .m        = g->m,
                     .n        = g->n,
                     .k        = g->k,
                     .batch    = g->batch,
                     .lda      = g->lda,
                     .ldb      = g->ldb,
                     .ldc      = g->ldc,
                     .stride_a = g->stride_a,
                     .stride_b = g->stride_b,
                     .stride_c = g->stride_c,
                     .alpha    = g->alpha,
                     .beta     = g->beta,
                     .bias     = g->bias.buf ? cu_ptr(&g->bias) : NULL,
                     .pre      = g->pre_act.buf ? cu_ptr(&g->pre_act) : NULL,
                     .biasdt   = g->bias.dtype,
                     .predt    = g->pre_act.dtype,
                     .act      = g->act,
    };
    if (g->bias_grad.buf)
        CU_TRY(cu_check(ctx, "gemm", "bias gradient kernel launch",
                        cuk_gemm_bias_grad(ctx->stream, &k, (float *)cu_ptr(&g->bias_grad),
                                           g->bias_grad_accumulate != 0)));
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;

    /* Batches whose C matrices overlap run one after the other, as "for b in [0, batch)"
     * orders them. */
    uint64_t c_span = (g->m - 1) * g->ldc + g->n;
    int sequential  = g->batch > 1 && g->stride_c < c_span;

    if (!epi && ctx->blas && ctx->gemm_path != CU_GEMM_NATIVE && blas_takes(g)) {
        if (!sequential) return blas_gemm(ctx, g, 0, g->batch);
        for (uint64_t b = 0; b < g->batch; b++)
            CU_TRY(blas_gemm(ctx, g, b, 1));
        return AMPX_OK;
    }
    return cu_check(ctx, "gemm", "native kernel launch",
                    cuk_gemm_native(ctx->stream, &k, sequential));
}
