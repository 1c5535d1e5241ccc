/* cuda.h — internal header of the CUDA backend (libampx-cuda.so).
 *
 * The context and buffer structs behind the ABI's opaque handles, the argument checks every
 * op shares (the same rules and messages as the CPU backend's), the status helpers that turn
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
    ampx_log_fn log;
    void *log_user;
    int device;
    cudaStream_t stream;
    cu_gemm_path gemm_path;
    cu_blas *blas; /* NULL: native GEMM only */
    char blas_note[320];
};

// ---------------------------------------------------------------------------------------
// Logging, status (plugin.c)

/* Logs one ERROR line through the host callback and returns st. */
ampx_status cu_fail(ampx_context *ctx, ampx_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cu_log(ampx_context *ctx, ampx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

// ---------------------------------------------------------------------------------------
// Argument checks (plugin.c), the CPU backend's rules

int cu_dtypes_ok(uint32_t op, const ampx_dtype *dtypes, uint32_t n_dtypes);
ampx_status cu_check_dtypes(ampx_context *ctx, const char *opname, uint32_t op,
                            const ampx_dtype *dtypes, uint32_t n_dtypes);
ampx_status cu_check_tensor(ampx_context *ctx, const char *opname, const char *name,
                            const ampx_tensor *t, uint64_t n_elems, int optional);
ampx_status cu_check_tensor_dt(ampx_context *ctx, const char *opname, const char *name,
                               const ampx_tensor *t, ampx_dtype want, uint64_t n_elems,
                               int optional);
ampx_status cu_check_scalars(ampx_context *ctx, const char *opname, const ampx_tensor *t,
                             int optional);
ampx_status cu_check_list(ampx_context *ctx, const char *opname, const char *name,
                          const ampx_tensor_list *l);
ampx_status cu_take_args(ampx_context *ctx, const char *opname, const void *args, void *local,
                         size_t local_size);
/* The whole checks of DROPOUT and PERMUTE; check_permute also gives the copy's loop form
 * (4 dims, the last walking y with the smallest stride) and its number of indices. */
ampx_status cu_check_dropout(ampx_context *ctx, const ampx_dropout_args *a);
ampx_status cu_check_permute(ampx_context *ctx, const ampx_permute_args *a, ampx_permute_args *loop,
                             uint64_t *n_elems);

#define CU_TAKE_ARGS(ctx, opname, args, local)                                                     \
    do {                                                                                           \
        ampx_status st_take_ = cu_take_args(ctx, opname, args, &(local), sizeof(local));           \
        if (st_take_ != AMPX_OK) return st_take_;                                                  \
        st_take_ = cu_enter(ctx, opname);                                                          \
        if (st_take_ != AMPX_OK) return st_take_;                                                  \
    } while (0)

#define CU_TRY(expr)                                                                               \
    do {                                                                                           \
        ampx_status st_try_ = (expr);                                                              \
        if (st_try_ != AMPX_OK) return st_try_;                                                    \
    } while (0)

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
// The ops

ampx_status cu_gemm(ampx_context *ctx, const ampx_gemm_args *a);
ampx_status cu_cast(ampx_context *ctx, const ampx_cast_args *a);
ampx_status cu_add(ampx_context *ctx, const ampx_add_args *a);
ampx_status cu_mul(ampx_context *ctx, const ampx_mul_args *a);
ampx_status cu_scale(ampx_context *ctx, const ampx_scale_args *a);
ampx_status cu_bias_grad(ampx_context *ctx, const ampx_bias_grad_args *a);
ampx_status cu_act_fwd(ampx_context *ctx, const ampx_act_args *a);
ampx_status cu_act_bwd(ampx_context *ctx, const ampx_act_args *a);
ampx_status cu_softmax_fwd(ampx_context *ctx, const ampx_softmax_args *a);
ampx_status cu_softmax_bwd(ampx_context *ctx, const ampx_softmax_args *a);
ampx_status cu_softmax_xent(ampx_context *ctx, const ampx_softmax_xent_args *a);
ampx_status cu_layernorm_fwd(ampx_context *ctx, const ampx_layernorm_args *a);
ampx_status cu_layernorm_bwd(ampx_context *ctx, const ampx_layernorm_args *a);
ampx_status cu_batchnorm_fwd(ampx_context *ctx, const ampx_batchnorm_args *a);
ampx_status cu_batchnorm_bwd(ampx_context *ctx, const ampx_batchnorm_args *a);
ampx_status cu_embedding_fwd(ampx_context *ctx, const ampx_embedding_args *a);
ampx_status cu_embedding_bwd(ampx_context *ctx, const ampx_embedding_args *a);
ampx_status cu_reduce(ampx_context *ctx, const ampx_reduce_args *a);
ampx_status cu_sum_squares(ampx_context *ctx, const ampx_sum_squares_args *a);
ampx_status cu_unscale_check(ampx_context *ctx, const ampx_unscale_check_args *a);
ampx_status cu_grad_stats(ampx_context *ctx, const ampx_grad_stats_args *a);
ampx_status cu_scaler_update(ampx_context *ctx, const ampx_scaler_update_args *a);
ampx_status cu_sgd(ampx_context *ctx, const ampx_sgd_args *a);
ampx_status cu_adamw(ampx_context *ctx, const ampx_adamw_args *a);
ampx_status cu_dropout(ampx_context *ctx, const ampx_dropout_args *a);
ampx_status cu_permute(ampx_context *ctx, const ampx_permute_args *a);

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
