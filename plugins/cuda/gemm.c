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
 *
 * GEMM_FP8 (ABI 1.7) runs on the same native kernel, which widens the e4m3/e5m2 codes exactly
 * as it stages them and reads the two dequantization factors on the device. On a device of
 * compute capability 8.9 or newer, cuBLASLt (libcublasLt.so.<major>, loaded at run time next
 * to cuBLAS) takes the fp8 GEMMs its fp8 kernels accept: the "TN" layout (row-major trans_b
 * set and trans_a clear: the forward product X W^T), not e5m2 x e5m2, no epilogue, every
 * pointer, leading dimension and batch stride 16-byte aligned, k and n multiples of 16. It
 * computes alpha a_scale_inv b_scale_inv acc + beta C in f32 with the factors as its A and B
 * scale pointers, fast accumulation off (partial sums promoted to f32). When its heuristic
 * offers no algorithm, the native kernel runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_api.h>

#include "cuda.h"

#ifndef AMPX_CUDA_LIBDIR
#define AMPX_CUDA_LIBDIR ""
#endif

#define STR_(x) #x
#define STR(x) STR_(x)
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)
#define CUBLASLT_SONAME "libcublasLt.so." STR(CUBLAS_VER_MAJOR)

/* cuBLASLt's workspace for the fp8 GEMMs (Hopper's fp8 kernels ask for up to 32 MiB). */
#define CU_LT_WORKSPACE ((uint64_t)32 << 20)

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
    struct { /* cuBLASLt for GEMM_FP8; handle NULL: not loaded (lt_note says why) */
        void *lib;
        cublasLtHandle_t handle;
        void *ws; /* CU_LT_WORKSPACE bytes of device memory, allocated at first use */
        int ws_failed;
        __typeof__(&cublasLtCreate) create;
        __typeof__(&cublasLtDestroy) destroy;
        __typeof__(&cublasLtMatmulDescCreate) desc_create;
        __typeof__(&cublasLtMatmulDescDestroy) desc_destroy;
        __typeof__(&cublasLtMatmulDescSetAttribute) desc_set;
        __typeof__(&cublasLtMatrixLayoutCreate) layout_create;
        __typeof__(&cublasLtMatrixLayoutDestroy) layout_destroy;
        __typeof__(&cublasLtMatrixLayoutSetAttribute) layout_set;
        __typeof__(&cublasLtMatmulPreferenceCreate) pref_create;
        __typeof__(&cublasLtMatmulPreferenceDestroy) pref_destroy;
        __typeof__(&cublasLtMatmulPreferenceSetAttribute) pref_set;
        __typeof__(&cublasLtMatmulAlgoGetHeuristic) heuristic;
        __typeof__(&cublasLtMatmul) matmul;
    } lt;
    char lt_note[160];
};

/* dlopen by soname (found through the RUNPATH or the system), then in the toolkit folder. */
static void *open_lib(const char *soname, const char *in_toolkit, char *err, size_t cap) {
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    const char *e = dlerror();
    if (e)
        snprintf(err, cap, "%s", e);
    else
        snprintf(err, cap, "%s: not found", soname);
    if (AMPX_CUDA_LIBDIR[0]) {
        lib = dlopen(in_toolkit, RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
    }
    return NULL;
}

static void *open_cublas(char *err, size_t cap) {
    return open_lib(CUBLAS_SONAME, AMPX_CUDA_LIBDIR "/" CUBLAS_SONAME, err, cap);
}

/* cuBLASLt for the fp8 GEMMs, on a device that has fp8 tensor cores (compute capability 8.9
 * or newer). Not loading it is no error: b->lt.handle stays NULL, b->lt_note says why, and
 * GEMM_FP8 runs on the native kernel. */
static void lt_load(ampx_context *ctx, cu_blas *b) {
    char err[128];
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx->device) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(b->lt_note, sizeof b->lt_note, "fp8 GEMM native (compute capability unknown)");
        return;
    }
    if (major * 10 + minor < 89) {
        snprintf(b->lt_note, sizeof b->lt_note,
                 "fp8 GEMM native (compute capability %d.%d has no fp8 tensor cores)", major,
                 minor);
        return;
    }
    b->lt.lib = open_lib(CUBLASLT_SONAME, AMPX_CUDA_LIBDIR "/" CUBLASLT_SONAME, err, sizeof err);
    if (!b->lt.lib) {
        snprintf(b->lt_note, sizeof b->lt_note, "fp8 GEMM native (cannot load cuBLASLt: %.100s)",
                 err);
        return;
    }
#define LT_SYM(field, name)                                                                        \
    if (!(*(void **)&b->lt.field = dlsym(b->lt.lib, name))) {                                      \
        snprintf(b->lt_note, sizeof b->lt_note, "fp8 GEMM native (cuBLASLt lacks %s)", name);      \
        goto fail;                                                                                 \
    }
    LT_SYM(create, "cublasLtCreate")
    LT_SYM(destroy, "cublasLtDestroy")
    LT_SYM(desc_create, "cublasLtMatmulDescCreate")
    LT_SYM(desc_destroy, "cublasLtMatmulDescDestroy")
    LT_SYM(desc_set, "cublasLtMatmulDescSetAttribute")
    LT_SYM(layout_create, "cublasLtMatrixLayoutCreate")
    LT_SYM(layout_destroy, "cublasLtMatrixLayoutDestroy")
    LT_SYM(layout_set, "cublasLtMatrixLayoutSetAttribute")
    LT_SYM(pref_create, "cublasLtMatmulPreferenceCreate")
    LT_SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy")
    LT_SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute")
    LT_SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic")
    LT_SYM(matmul, "cublasLtMatmul")
#undef LT_SYM
    cublasStatus_t s = b->lt.create(&b->lt.handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        b->lt.handle = NULL;
        snprintf(b->lt_note, sizeof b->lt_note, "fp8 GEMM native (cublasLtCreate: %s)",
                 b->status_name(s));
        goto fail;
    }
    snprintf(b->lt_note, sizeof b->lt_note, "fp8 GEMM: cuBLASLt where it applies");
    return;
fail:
    /* libcublasLt stays mapped, as libcublas does */
    b->lt.lib = NULL;
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
    lt_load(ctx, b);
    ctx->blas = b;
    snprintf(ctx->blas_note, sizeof ctx->blas_note, "cuBLAS %d.%d.%d; %s", b->version / 10000,
             b->version / 100 % 100, b->version % 100, b->lt_note);
    return AMPX_OK;
fail:
    dlclose(b->lib);
    free(b);
    return AMPX_ERR_UNAVAILABLE;
}

void cu_blas_unload(ampx_context *ctx) {
    cu_blas *b = ctx->blas;
    if (!b) return;
    if (b->lt.ws) (void)cudaFreeAsync(b->lt.ws, ctx->stream);
    if (b->lt.handle) b->lt.destroy(b->lt.handle);
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

/* The native kernel's descriptor of a checked GEMM (no fp8 factors). */
static cuk_gemm native_desc(const ampx_gemm_args *g) {
    cuk_gemm k = {
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
        .scale_a  = NULL,
        .scale_b  = NULL,
    };
    return k;
}

static int has_epilogue(const ampx_gemm_args *g) {
    return g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf;
}

/* Batches whose C matrices overlap run one after the other, as "for b in [0, batch)" orders
 * them (m, n and batch non-zero). */
static int overlapping_batches(const ampx_gemm_args *g) {
    uint64_t c_span = (g->m - 1) * g->ldc + g->n;
    return g->batch > 1 && g->stride_c < c_span;
}

ampx_status cu_gemm(ampx_context *ctx, const ampx_gemm_args *args) {
    ampx_gemm_args a;
    CU_TAKE(ctx, "gemm", ampx_kit_take_gemm(AMPX_KIT(ctx), args, &a, NULL));
    const ampx_gemm_args *g = &a;
    cuk_gemm k              = native_desc(g);
    if (g->bias_grad.buf)
        CU_TRY(cu_check(ctx, "gemm", "bias gradient kernel launch",
                        cuk_gemm_bias_grad(ctx->stream, &k, (float *)cu_ptr(&g->bias_grad),
                                           g->bias_grad_accumulate != 0)));
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;
    int sequential = overlapping_batches(g);

    if (!has_epilogue(g) && ctx->blas && ctx->gemm_path != CU_GEMM_NATIVE && blas_takes(g)) {
        if (!sequential) return blas_gemm(ctx, g, 0, g->batch);
        for (uint64_t b = 0; b < g->batch; b++)
            CU_TRY(blas_gemm(ctx, g, b, 1));
        return AMPX_OK;
    }
    return cu_check(ctx, "gemm", "native kernel launch",
                    cuk_gemm_native(ctx->stream, &k, sequential));
}

// ---------------------------------------------------------------------------------------
// GEMM_FP8 (ABI 1.7)

static int lt_dtype(ampx_dtype dt) {
    switch (dt) {
    case AMPX_E4M3: return CUDA_R_8F_E4M3;
    case AMPX_E5M2: return CUDA_R_8F_E5M2;
    default: return cuda_dtype(dt);
    }
}

static int aligned16(const void *p) {
    return (uintptr_t)p % 16 == 0;
}

/* 1 if cuBLASLt's fp8 kernels take this checked GEMM_FP8 (no epilogue, C batches apart).
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and
 * its B our A, and its required "TN" (its A transposed, its B not) is our trans_b set and
 * trans_a clear. Its m, n, k are our n, m, k. */
static int lt_takes(ampx_context *ctx, const ampx_gemm_args *g) {
    if (!ctx->blas || !ctx->blas->lt.handle || ctx->gemm_path == CU_GEMM_NATIVE) return 0;
    if (!g->trans_b || g->trans_a) return 0;
    if (g->a.dtype == AMPX_E5M2 && g->b.dtype == AMPX_E5M2) return 0; /* no such kernel */
    uint64_t ec = ampx_dtype_size(g->c.dtype);
    if (g->k == 0 || g->k % 16 || g->n % 16 || g->lda % 16 || g->ldb % 16 || (g->ldc * ec) % 16)
        return 0;
    if (!aligned16(cu_ptr(&g->a)) || !aligned16(cu_ptr(&g->b)) || !aligned16(cu_ptr(&g->c)))
        return 0;
    if (g->batch > 1 && (g->stride_a % 16 || g->stride_b % 16 || (g->stride_c * ec) % 16)) return 0;
    const uint64_t lim = INT_MAX;
    return g->batch <= lim && g->lda <= (uint64_t)LLONG_MAX && g->ldb <= (uint64_t)LLONG_MAX &&
           g->ldc <= (uint64_t)LLONG_MAX && g->stride_a <= (uint64_t)LLONG_MAX &&
           g->stride_b <= (uint64_t)LLONG_MAX && g->stride_c <= (uint64_t)LLONG_MAX;
}

/* A column-major layout of rows x cols with leading dimension ld, batched when nbatch > 1. */
static cublasStatus_t lt_layout(cu_blas *b, cublasLtMatrixLayout_t *out, ampx_dtype dt,
                                uint64_t rows, uint64_t cols, uint64_t ld, uint64_t nbatch,
                                uint64_t stride) {
    cublasStatus_t s =
        b->lt.layout_create(out, (cudaDataType)lt_dtype(dt), rows, cols, (int64_t)ld);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *out = NULL;
        return s;
    }
    if (nbatch > 1) {
        int32_t count = (int32_t)nbatch;
        int64_t off   = (int64_t)stride;
        if ((s = b->lt.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                  sizeof count)) != CUBLAS_STATUS_SUCCESS)
            return s;
        s = b->lt.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off, sizeof off);
    }
    return s;
}

/* The fp8 GEMM on cuBLASLt, all batches in one call. *ran 0 (and AMPX_OK): cuBLASLt offers no
 * algorithm for it, could not describe it or refused it as unsupported, and the caller runs
 * the native kernel. */
static ampx_status lt_gemm(ampx_context *ctx, const ampx_gemm_fp8_args *f, int *ran) {
    cu_blas *b              = ctx->blas;
    const ampx_gemm_args *g = &f->gemm;
    *ran                    = 0;
    if (!b->lt.ws && !b->lt.ws_failed) {
        if (cudaMallocAsync(&b->lt.ws, (size_t)CU_LT_WORKSPACE, ctx->stream) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: clear it, and go on without a workspace */
            b->lt.ws        = NULL;
            b->lt.ws_failed = 1;
        }
    }
    uint64_t ws_bytes         = b->lt.ws ? CU_LT_WORKSPACE : 0;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t p = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found    = 0;
    int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    int8_t fast_accum = 0;
    /* its A is our B: its scale is b_scale_inv; its B is our A */
    const void *scale_lt_a = cu_ptr(&f->b_scale_inv), *scale_lt_b = cu_ptr(&f->a_scale_inv);
    memset(&heur, 0, sizeof heur);
    cublasStatus_t s = b->lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS) desc = NULL;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.desc_set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_lt_a,
                           sizeof scale_lt_a);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.desc_set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_lt_b,
                           sizeof scale_lt_b);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.desc_set(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum);
    /* its A: our B (n x k row-major, trans_b) as k x n column-major; its B: our A (m x k
     * row-major) as k x m; C and D: our C (m x n row-major) as n x m */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = lt_layout(b, &la, g->b.dtype, g->k, g->n, g->ldb, g->batch, g->stride_b);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = lt_layout(b, &lb, g->a.dtype, g->k, g->m, g->lda, g->batch, g->stride_a);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = lt_layout(b, &lc, g->c.dtype, g->n, g->m, g->ldc, g->batch, g->stride_c);
    if (s == CUBLAS_STATUS_SUCCESS) {
        s = b->lt.pref_create(&p);
        if (s != CUBLAS_STATUS_SUCCESS) p = NULL;
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.pref_set(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b->lt.heuristic(b->lt.handle, desc, la, lb, lc, lc, p, 1, &heur, &found);
    ampx_status st = AMPX_OK;
    if (s == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS &&
        heur.workspaceSize <= ws_bytes) {
        void *C = cu_ptr(&g->c);
        s       = b->lt.matmul(b->lt.handle, desc, &g->alpha, cu_ptr(&g->b), la, cu_ptr(&g->a), lb,
                               &g->beta, C, lc, C, lc, &heur.algo, b->lt.ws, (size_t)ws_bytes,
                               ctx->stream);
        if (s == CUBLAS_STATUS_SUCCESS)
            *ran = 1;
        else if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE &&
                 s != CUBLAS_STATUS_ARCH_MISMATCH) /* those refuse before enqueuing: native */
            st =
                cu_fail(ctx, s == CUBLAS_STATUS_ALLOC_FAILED ? AMPX_ERR_NO_MEMORY : AMPX_ERR_DEVICE,
                        "gemm_fp8: cublasLtMatmul: %s: %s", b->status_name(s), b->status_string(s));
    }
    if (p) b->lt.pref_destroy(p);
    if (lc) b->lt.layout_destroy(lc);
    if (lb) b->lt.layout_destroy(lb);
    if (la) b->lt.layout_destroy(la);
    if (desc) b->lt.desc_destroy(desc);
    return st;
}

ampx_status cu_gemm_fp8(ampx_context *ctx, const ampx_gemm_fp8_args *args) {
    ampx_gemm_fp8_args f;
    CU_TAKE(ctx, "gemm_fp8", ampx_kit_take_gemm_fp8(AMPX_KIT(ctx), args, &f, NULL));
    const ampx_gemm_args *g = &f.gemm;
    cuk_gemm k              = native_desc(g);
    k.scale_a               = (const float *)cu_ptr(&f.a_scale_inv);
    k.scale_b               = (const float *)cu_ptr(&f.b_scale_inv);
    /* the column sums of op(B) as its codes' values, as GEMM sums the B it is given */
    if (g->bias_grad.buf)
        CU_TRY(cu_check(ctx, "gemm_fp8", "bias gradient kernel launch",
                        cuk_gemm_bias_grad(ctx->stream, &k, (float *)cu_ptr(&g->bias_grad),
                                           g->bias_grad_accumulate != 0)));
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;
    int sequential = overlapping_batches(g);

    if (!has_epilogue(g) && !sequential && lt_takes(ctx, g)) {
        int ran = 0;
        CU_TRY(lt_gemm(ctx, &f, &ran));
        if (ran) return AMPX_OK;
    }
    return cu_check(ctx, "gemm_fp8", "native kernel launch",
                    cuk_gemm_native(ctx->stream, &k, sequential));
}
