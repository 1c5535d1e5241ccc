/* cuda.h — internal header of the CUDA backend (libampx-cuda.so).
 *
 * The context and buffer structs behind the ABI's opaque handles (argument checks are
 * plugin_kit.h's, the same rules and messages as every backend's), the status helpers that turn
 * every CUDA and cuBLAS error into one ERROR line naming the error, and stream-ordered
 * temporaries. Device code lives in kernels/cuda, CUDA C++ behind kernels/cuda/kernels.h.
 *
 * The plugin links the CUDA runtime statically and loads the driver (libcuda.so.1) and
 * cuBLAS at run time, so it loads on a machine without either and its probe says why.
 * Everything here has hidden visibility; the plugin exports only ampx_backend_entry.
 */
#ifndef AMPX_PLUGIN_CUDA_H
#define AMPX_PLUGIN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "ampx/plugin_kit.h"
#include "kernels.h"

// ---------------------------------------------------------------------------------------
// Buffers: device memory from cudaMalloc with the size the host asked for, so every access
// is bounds-checked on the host before anything is enqueued.

struct ampx_buffer {
    unsigned char *data; /* device pointer; never NULL, even for 0 bytes */
    uint64_t bytes;
};

// ---------------------------------------------------------------------------------------
// cuBLAS, loaded at run time (gemm.c)

typedef struct cu_blas cu_blas; /* the library handle, entry points and a cublasHandle_t */

typedef enum cu_gemm_path {
    CU_GEMM_AUTO   = 0, /* cuBLAS where it takes the dtypes, else native */
    CU_GEMM_CUBLAS = 1, /* as auto, but create() fails when cuBLAS cannot be loaded */
    CU_GEMM_NATIVE = 2, /* the native kernel always */
} cu_gemm_path;

// ---------------------------------------------------------------------------------------
// The context: one device, one non-blocking stream.

struct ampx_context {
    ampx_kit kit; /* the host's log, the plugin's name, buffer sizes (plugin_kit.h) */
    int device;
    cudaStream_t stream;
    cu_gemm_path gemm_path;
    cu_blas *blas; /* NULL: native GEMM only */
    char blas_note[320];
    struct { /* ABI 1.2 device timestamps: CUDA events around every op */
        int on;
        uint32_t cap, n;
        cudaEvent_t base, *ev; /* ev[2i], ev[2i + 1]: start and end of op i */
    } prof;
};

// ---------------------------------------------------------------------------------------
// Logging, status (status.c)

/* Logs one ERROR line through the context's kit and returns st; cu_log at any level. */
#define cu_fail(ctx, ...) ampx_kit_fail(AMPX_KIT(ctx), __VA_ARGS__)
#define cu_log(ctx, ...) ampx_kit_log(AMPX_KIT(ctx), __VA_ARGS__)

/* AMPX_OK for cudaSuccess; otherwise logs "<op>: <what>: <cudaErrorName>: <string>" and
 * returns NO_MEMORY for an allocation failure, DEVICE otherwise. */
ampx_status cu_check(ampx_context *ctx, const char *op, const char *what, cudaError_t e);

/* Makes the context's device current on the calling thread (a context may move between
 * host threads, one at a time). */
ampx_status cu_enter(ampx_context *ctx, const char *op);

/* Stream-ordered temporary device memory: allocated on the stream, freed on the stream after
 * the kernels that use it, so nothing waits. */
ampx_status cu_tmp_alloc(ampx_context *ctx, const char *op, uint64_t bytes, void **out);
void cu_tmp_free(ampx_context *ctx, void *p);

#define CU_TRY AMPX_KIT_TRY

/* An op's start: expr takes and checks its args (plugin_kit.h's ampx_kit_take_<op>), then
 * the context's device is made current. */
#define CU_TAKE(ctx, opname, expr)                                                                 \
    do {                                                                                           \
        CU_TRY(expr);                                                                              \
        CU_TRY(cu_enter(ctx, opname));                                                             \
    } while (0)

/* buffer_bytes of the kit: the size the host asked for. */
uint64_t cu_buffer_bytes(const ampx_buffer *buf);

static inline int cu_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

/* The tensor's first element on the device (NULL for a null tensor). */
static inline void *cu_ptr(const ampx_tensor *t) {
    return t->buf ? (void *)(t->buf->data + t->offset) : NULL;
}

// ---------------------------------------------------------------------------------------
// cuBLAS (gemm.c)

/* Loads cuBLAS and creates a handle on ctx->stream; on failure fills ctx->blas_note and
 * returns UNAVAILABLE (logged by the caller as it sees fit). */
ampx_status cu_blas_load(ampx_context *ctx);
void cu_blas_unload(ampx_context *ctx);
/* "cuBLAS 13.0.2" or the reason it is not used. */
const char *cu_blas_describe(ampx_context *ctx);

// ---------------------------------------------------------------------------------------
// The ops (ops.c; GEMM and GEMM_FP8 in gemm.c): cu_<slot> for every op of AMPX_OPS, declared
// from this list (plugin_kit.h's kit/shell.h), which plugin.c's tables are generated from too.

// clang-format off
#define CU_OPS(X, p)                                                                               \
    X(p, gemm)          X(p, cast)          X(p, add)           X(p, mul)                          \
    X(p, scale)         X(p, bias_grad)     X(p, act_fwd)       X(p, act_bwd)                      \
    X(p, softmax_fwd)   X(p, softmax_bwd)   X(p, softmax_xent)  X(p, layernorm_fwd)                \
    X(p, layernorm_bwd) X(p, batchnorm_fwd) X(p, batchnorm_bwd) X(p, embedding_fwd)                \
    X(p, embedding_bwd) X(p, reduce)        X(p, sum_squares)   X(p, unscale_check)                \
    X(p, grad_stats)    X(p, scaler_update) X(p, sgd)           X(p, adamw)                        \
    X(p, dropout)       X(p, permute)       X(p, amp_pass)      X(p, attn_fwd)                     \
    X(p, attn_bwd)      X(p, im2col)        X(p, col2im)        X(p, pool2d_fwd)                   \
    X(p, pool2d_bwd)    X(p, fp8_quantize)  X(p, gemm_fp8)      X(p, fp8_scale_update)             \
    X(p, abs_max)
// clang-format on
AMPX_KIT_OP_PROTOTYPES(cu, CU_OPS)
AMPX_KIT_OPS_COMPLETE(CU_OPS);

/* Buffers (buffer.c) */
ampx_status cu_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out);
void cu_buffer_free(ampx_context *ctx, ampx_buffer *buf);
ampx_status cu_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                            uint64_t bytes);
ampx_status cu_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                           uint64_t bytes);
ampx_status cu_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                           const ampx_buffer *src, uint64_t src_offset, uint64_t bytes);
ampx_status cu_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                           uint32_t pattern, uint32_t pattern_bytes);

#endif /* AMPX_PLUGIN_CUDA_H */
