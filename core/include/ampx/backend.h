/* ampx/backend.h — the backend plugin ABI, version 1.8.
 *
 * This is the only header a vendor needs (with the header-only dtype.h). A backend is a
 * shared object that exports exactly one symbol, ampx_backend_entry, and keeps everything
 * else hidden. The host loads it with dlopen(RTLD_NOW | RTLD_LOCAL).
 *
 * Rules of the boundary
 *   1. Versions: the host passes the ABI version it speaks to ampx_backend_entry; the
 *      plugin returns its table, which states the version it was built for. The major
 *      must match; the minor is append-only (new ops, new fields at the end).
 *   2. Every struct that crosses the boundary starts with its own size in bytes. A reader
 *      reads a field only if it lies within that size; a field beyond it reads as 0/NULL.
 *   3. probe() is cheap: it touches no heavy driver state and says why a device is unusable.
 *   4. supports() is authoritative: an op it accepts never fails for being unsupported.
 *      A NULL op slot means unsupported.
 *   5. Every call returns a status. Messages go to the host's log callback. No abort, exit,
 *      longjmp or C++ exception crosses the boundary.
 *   6. Buffers are opaque handles owned by the plugin. Ops are enqueued in order on the
 *      context's one stream; synchronize() waits. The host never dereferences device memory.
 *      A context is used by one host thread at a time; distinct contexts may be used from
 *      different threads at once.
 *   7. Ops are numbered once and never renumbered (AMPX_OPS); each op's slot is checked at
 *      compile time to lie where its number puts it in the op table.
 *   8. Options are "key=value" strings given at create().
 *
 * Conventions of the op set
 *   - Matrices are row-major. Shapes are element counts; offsets are bytes.
 *   - Floating tensors may be f32, bf16 or f16 unless an op says otherwise; the dtype
 *     travels with each ampx_tensor. Every reduction and every GEMM accumulates in f32
 *     (or wider) whatever its inputs, and rounds once when it stores (to nearest even).
 *   - Outputs never alias inputs unless the op says "in place".
 *   - An output that is only written (not accumulated into) is never read: NaN or garbage
 *     in it does not leak into the result.
 *   - A tensor may be null (buf NULL) only where its op says so: gamma/beta of the norms,
 *     dgamma/dbeta of the norm backwards (not computed), running statistics of a training
 *     batch norm, dlogits of SOFTMAX_XENT, scalars of SOFTMAX_XENT, grad_sq_sum and copies
 *     of the optimizers, sq_sum, stats, counts and nan_counts of AMP_PASS.
 *   - A tensor whose dtype is fixed by the op (labels i32, statistics f32, ...) given in
 *     another dtype is an argument error (AMPX_ERR_INVALID), not an unsupported op.
 *
 * The ABI is in three headers, all included by this one: backend_types.h (statuses, handles,
 * the host and device-info structs, tensors, the scalars block, the op list AMPX_OPS),
 * backend_args.h (each op's argument struct and contract) and this one (the ABI version, the
 * op table, the backend table and the entry point).
 */
#ifndef AMPX_BACKEND_H
#define AMPX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend_args.h"
#include "backend_types.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPX_ABI_MAJOR 1
#define AMPX_ABI_MINOR 8

#if defined(_WIN32)
#define AMPX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define AMPX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

// ---------------------------------------------------------------------------------------
// The op table. Slots are in op-number order, one per line of AMPX_OPS; a NULL slot is
// unsupported. A plugin built for an older minor has a smaller table (its size says so) and
// the host reads the slots past it as NULL: 1.1 added dropout and permute, 1.4 amp_pass
// (optional: NULL, and the host runs unscale_check, grad_stats and sum_squares instead), 1.5
// attn_fwd and attn_bwd (optional: NULL, and a model's attention runs as its composite), 1.6
// im2col, col2im, pool2d_fwd and pool2d_bwd (a model with convolutions or pooling needs them),
// 1.7 fp8_quantize, gemm_fp8 and fp8_scale_update (a policy with fp8 GEMMs needs them), 1.8
// abs_max (the trainer's armed overflow forensics need it).
// Every op is enqueued on the context's stream and may complete later; argument errors are
// reported at enqueue time, device errors at the latest by the next synchronize().

// clang-format off
#define AMPX_OP_SLOT_(index, slot, OP, args_type, n_dtypes, f32)                                   \
    ampx_status (*slot)(ampx_context *ctx, const args_type *args);
// clang-format on
typedef struct ampx_backend_ops {
    uint32_t size; /* sizeof(ampx_backend_ops) the plugin was built with */
    uint32_t reserved;
    AMPX_OPS(AMPX_OP_SLOT_) /* ampx_status (*gemm)(ampx_context *, const ampx_gemm_args *); ... */
} ampx_backend_ops;
#undef AMPX_OP_SLOT_

/* One slot per op, in order: each op's slot lies where its number puts it. */
AMPX_STATIC_ASSERT(sizeof(ampx_backend_ops) == 8 + AMPX_OP_COUNT * sizeof(void (*)(void)),
                   "ampx_backend_ops must have exactly one slot per ampx_op");
#define AMPX_OP_SLOT_AT_(index, slot, OP, args, n_dtypes, f32)                                     \
    AMPX_STATIC_ASSERT(offsetof(ampx_backend_ops, slot) == 8 + (index) * sizeof(void (*)(void)) && \
                           AMPX_OP_##OP == (index),                                                \
                       "the slot of " #slot " must be slot number " #index);
AMPX_OPS(AMPX_OP_SLOT_AT_)
#undef AMPX_OP_SLOT_AT_

// ---------------------------------------------------------------------------------------
// The backend table returned by ampx_backend_entry.

// clang-format off
typedef struct ampx_backend_iface {
    uint32_t    size;      /* sizeof(ampx_backend_iface) the plugin was built with */
    uint32_t    abi_major; /* AMPX_ABI_MAJOR the plugin was built with */
    uint32_t    abi_minor; /* AMPX_ABI_MINOR the plugin was built with */
    uint32_t    reserved;
    const char *name;      /* short name, e.g. "cpu" */
    const char *version;   /* the plugin's own version string */

    /* Cheap availability check: touches no heavy driver state. Returns AMPX_OK, or
     * AMPX_ERR_UNAVAILABLE with a one-line reason in reason[0..reason_cap). */
    ampx_status (*probe)      (char *reason, size_t reason_cap);
    /* Creates a context (one device, one stream). Unknown option keys are an error. */
    ampx_status (*create)     (const ampx_host *host, ampx_context **out);
    /* Waits for outstanding work and frees everything the context owns. NULL is a no-op. */
    void        (*destroy)    (ampx_context *ctx);
    /* Describes the context's device. */
    ampx_status (*device_info)(ampx_context *ctx, ampx_device_info *info);
    /* 1 if `op` runs with these dtypes (order per the op's heading) on this shape class,
     * else 0. Authoritative: a supported op never fails as unsupported. */
    int         (*supports)   (ampx_context *ctx, uint32_t op, const ampx_dtype *dtypes,
                               uint32_t n_dtypes, uint32_t shape_class);

    /* Buffers. alloc of 0 bytes gives a valid handle. write copies from host memory before
     * it returns (ordered after earlier work); read waits for earlier work and copies to
     * host memory before it returns; copy and fill are enqueued. Offsets and sizes are in
     * bytes and checked against the buffer's size. */
    ampx_status (*buffer_alloc)(ampx_context *ctx, uint64_t bytes, ampx_buffer **out);
    void        (*buffer_free) (ampx_context *ctx, ampx_buffer *buf);
    ampx_status (*buffer_write)(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                const void *src, uint64_t bytes);
    ampx_status (*buffer_read) (ampx_context *ctx, const ampx_buffer *src, uint64_t offset,
                                void *dst, uint64_t bytes);
    ampx_status (*buffer_copy) (ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                                const ampx_buffer *src, uint64_t src_offset, uint64_t bytes);
    /* Fills bytes (a multiple of pattern_bytes) with a 1-, 2- or 4-byte pattern. */
    ampx_status (*buffer_fill) (ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes);
    /* Waits until all enqueued work is done; returns the first deferred error, if any. */
    ampx_status (*synchronize) (ampx_context *ctx);

    const ampx_backend_ops *ops;

    /* ---- ABI 1.2: device timestamps of ops, for the trace (--trace) --------------------
     * Optional, both or neither; a plugin built for an older minor has a smaller table and
     * the host reads them as NULL (it then times each op on its own clock, synchronizing
     * after it). After profile_begin, the stream records the start and end of every op
     * enqueued (each op-slot call that returns AMPX_OK), up to `capacity` ops, in ns since
     * the stream reached profile_begin; the host calls it with the stream idle. profile_end
     * waits for the work, writes (start, end) of op i to ns[2i], ns[2i+1] for the first
     * min(recorded, cap) ops in enqueue order, sets *n_ops to the number recorded (ops past
     * capacity are not) and stops recording. profile_end without profile_begin gives 0 ops. */
    ampx_status (*profile_begin)(ampx_context *ctx, uint32_t capacity);
    ampx_status (*profile_end)  (ampx_context *ctx, uint64_t *ns, uint32_t cap, uint32_t *n_ops);

    /* ---- ABI 1.3: native handles, for collectives without a host round trip ----------
     * Optional, both or neither; NULL (or an older minor's smaller table): the host reads
     * buffers into its memory, all-reduces them there and writes them back. buffer_native
     * gives the buffer's handle at byte 0 and its kind (ampx_native_kind): a host pointer
     * the host may read and write, a cl_mem, a CUDA device pointer. stream_native gives the
     * stream's: NULL with AMPX_NATIVE_HOST when every op has completed once its slot
     * returns, a cl_command_queue, a cudaStream_t. Work the host puts on that stream with
     * the native API (an NCCL collective) runs after the ops enqueued before it and before
     * those enqueued after it. Handles stay valid until the buffer is freed or the context
     * destroyed. */
    ampx_status (*buffer_native)(ampx_context *ctx, const ampx_buffer *buf, uint32_t *kind,
                                 void **handle);
    ampx_status (*stream_native)(ampx_context *ctx, uint32_t *kind, void **handle);
} ampx_backend_iface;
// clang-format on

/* What buffer_native and stream_native hand out (ABI 1.3). */
typedef enum ampx_native_kind {
    AMPX_NATIVE_NONE   = 0,
    AMPX_NATIVE_HOST   = 1, /* host memory (void *); the stream: NULL, ops complete on return */
    AMPX_NATIVE_OPENCL = 2, /* cl_mem; cl_command_queue */
    AMPX_NATIVE_CUDA   = 3, /* CUDA device pointer; cudaStream_t */
} ampx_native_kind;

/* The one exported symbol. host_abi_major/minor: what the host speaks. Returns the
 * plugin's table (static storage, valid until unload), or NULL if it cannot serve that
 * major at all. The host checks the table's abi_major itself. */
typedef const ampx_backend_iface *(*ampx_backend_entry_fn)(uint32_t host_abi_major,
                                                           uint32_t host_abi_minor);
#define AMPX_BACKEND_ENTRY_SYMBOL "ampx_backend_entry"

#ifdef __cplusplus
}
#endif
#endif /* AMPX_BACKEND_H */
