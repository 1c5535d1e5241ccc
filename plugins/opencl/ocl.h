/* ocl.h — internal header of the OpenCL backend (libampx-opencl.so).
 *
 * The context and buffer structs behind the ABI's opaque handles, the kernel table, and the
 * helpers every op file shares: OpenCL status checks that log the call's name and the
 * error's name, argument checks that log one ERROR line (the same rules and messages as the
 * CPU backend), a small kernel-argument builder, and device scratch buffers.
 *
 * Everything here has hidden visibility; the plugin exports only ampx_backend_entry.
 */
#ifndef AMPX_PLUGIN_OCL_H
#define AMPX_PLUGIN_OCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "ampx/plugin_kit.h"
#include "gemm_params.h"

// ---------------------------------------------------------------------------------------
// Buffers: a cl_mem of at least one byte, and the size the host asked for.

struct ampx_buffer {
    cl_mem mem;
    uint64_t bytes;
};

// ---------------------------------------------------------------------------------------
// Kernels, by name in kernels/opencl/ (one .cl file per op group). The table order is ocl_kernel's.

typedef enum ocl_kernel {
    K_BUFFER_FILL,
    K_XENT_COUNT,
    K_XENT_LOSS,
    K_BATCHNORM_FWD,
    K_BATCHNORM_BWD,
    K_EMBEDDING_FWD,
    K_EMBEDDING_BWD,
    K_REDUCE,
    K_ABS_MAX,
    K_UNSCALE_CLEAR_FLAGS,
    K_AMP_FINISH,
    K_SCALER_UPDATE,
    K_OPT_BEGIN,
    K_DROPOUT,
    K_PERMUTE,
    K_ATTN_FWD,
    K_ATTN_BWD_DQ,
    K_ATTN_BWD_DKV,
    K_ATTN_FWD_TILED,
    K_ATTN_BWD_DQ_TILED,
    K_ATTN_BWD_DKV_TILED,
    K_ATTN_FWD_ITEMS,
    K_ATTN_BWD_DQ_ITEMS,
    K_ATTN_BWD_DKV_ITEMS,
    K_IM2COL,
    K_COL2IM,
    K_POOL2D_FWD,
    K_POOL2D_BWD,
    K_GEMM_BETA,
    K_GEMM_STORE_C,
    K_GEMM_EPILOGUE,
    K_GEMM_BIAS_GRAD,
    K_GEMM_ROWS, /* 9 kernels gemm_rows_<A>_<B>, index K_GEMM_ROWS + 3 * A dtype + B dtype */
    K_GEMM_ROWS_LAST = K_GEMM_ROWS + 8,
    K_GEMM_ROWS_FP8, /* 4 kernels gemm_rows_<A>_<B> of fp8 A and B, + 2 * (A e5m2) + (B e5m2) */
    K_GEMM_ROWS_FP8_LAST = K_GEMM_ROWS_FP8 + 3,
    K_FP8_QUANTIZE,
    K_FP8_DEQUANTIZE,
    K_FP8_SCALE_UPDATE,
    K_COUNT
} ocl_kernel;

extern const char *const ocl_kernel_names[K_COUNT];

/* Kernels of kernels/opencl/typed/, built per dtype combination of their tensors on first
 * use (typed.c). */
typedef enum ocl_typed {
    TK_CAST,             /* src, dst */
    TK_ADD,              /* a, b, y */
    TK_SCALE,            /* x, y */
    TK_BIAS_GRAD,        /* dy, db */
    TK_ACT_FWD,          /* x, y */
    TK_ACT_BWD,          /* x, dy, dx */
    TK_SOFTMAX_FWD,      /* x, y */
    TK_SOFTMAX_BWD,      /* y, dy, dx */
    TK_XENT_ROWS,        /* logits, dlogits */
    TK_LAYERNORM_FWD,    /* x, y */
    TK_LAYERNORM_BWD,    /* x, dy, dx */
    TK_LAYERNORM_PARAMS, /* x, dy */
    TK_UNSCALE_CHECK,    /* g */
    TK_SGD,              /* g, copy */
    TK_ADAMW,            /* g, copy */
    TK_GRAD_STATS_PART,  /* g */
    TK_SUM_SQUARES_PART, /* g */
    TK_AMP_PASS_PART,    /* g */
    TK_COUNT
} ocl_typed;

#define OCL_TYPED_COMBOS 27 /* 3 dtypes of up to 3 tensors */

typedef struct ocl_typed_slot {
    cl_program program;
    cl_kernel kernel;
    int row_items; /* built with -DROW_ITEMS: one work item per row (ocl_launch_rows) */
} ocl_typed_slot;

/* How GEMMs other than f32 x f32 -> f32 run (option gemm=). */
typedef enum ocl_gemm_path {
    GEMM_AUTO    = 0, /* f32: CLBlast; else rows on CPU devices, tiled on others (gemm.c) */
    GEMM_TILED   = 1, /* gemm_tuned (gemm_tuned.c) for every dtype mix, f32 included */
    GEMM_CONVERT = 2, /* widen to f32, CLBlast SGEMM, round back */
    GEMM_ROWS    = 3, /* gemm_rows_<A>_<B> for every dtype mix, f32 included */
    GEMM_PACKED  = 4, /* packed panels, a block of C per item (gemm_packed.c): auto on CPUs */
} ocl_gemm_path;

/* Option tune=: when the tuned GEMM kernel's parameters are searched (gemm_tune.c). */
enum { OCL_TUNE_NO = 0, OCL_TUNE_ON = 1, OCL_TUNE_FORCE = 2 };

/* Device scratch (grown on demand; the old one is released, OpenCL keeps it alive until the
 * commands using it are done). */
typedef struct ocl_scratch {
    cl_mem mem;
    size_t bytes;
} ocl_scratch;

/* The packed GEMM's state (gemm_packed.c): its block and its programs. */
typedef struct ocl_packed {
    uint32_t mr, nr;           /* the block of C per work item */
    int fma;                   /* CL_FP_FMA: fma() is the device's own instruction */
    ocl_typed_slot pack[5][2]; /* gemm_pack per operand dtype, for A (MR) and B (NR) */
    ocl_typed_slot mk;         /* gemm_packed */
    int no_cache;              /* tuning candidates: built without the disk cache */
    uint64_t cap;              /* bytes of one run's panels (gemm_packed.c's pack cap) */
} ocl_packed;

#define OCL_N_SCRATCH 4 /* 0-2: buffer copy, softmax, gemm, optimizers; 3: amp.c's partials */

struct ampx_context {
    ampx_kit kit; /* the host's log, the plugin's name, buffer sizes (plugin_kit.h) */
    cl_platform_id platform;
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;
    cl_program program;
    cl_kernel kernels[K_COUNT];
    ocl_typed_slot typed[TK_COUNT][OCL_TYPED_COMBOS]; /* built on first use (typed.c) */
    char build_opts[256];               /* the main program's options; the typed ones add to them */
    int vw;                             /* vector width of the typed kernels (VW) */
    uint32_t typed_built, typed_cached; /* typed programs compiled, and loaded from disk */
    double typed_ms;                    /* time spent getting them */
    size_t wg;                          /* work-group size of the reduction kernels (WG) */
    size_t max_items;                   /* cap on the global size of grid-stride kernels */
    uint64_t max_alloc;                 /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    uint64_t global_mem;                /* CL_DEVICE_GLOBAL_MEM_SIZE */
    int fp64;                           /* cl_khr_fp64 */
    int cpu_device;     /* a CPU device (CL_DEVICE_TYPE_CPU, not also GPU or accelerator) */
    int paths;          /* option paths=: OCL_PATHS_AUTO, OCL_PATHS_WORKGROUP or OCL_PATHS_ITEM */
    int oclgrind;       /* the platform is Oclgrind: quirks.c's workarounds apply */
    ocl_gemm_path gemm; /* option gemm= */
    int no_epilogue;    /* option gemm_epilogue=0 */
    struct {            /* the tuned GEMM kernel (gemm_tune.c, gemm_tuned.c) */
        ocl_gemm_params p;
        ocl_gemm_limits lim;
        const char *from;          /* "defaults", "file" or "tuned" */
        double gflops;             /* what the tuning measured (0: not tuned) */
        uint64_t key;              /* the parameter file's key */
        ocl_typed_slot slot[5][5]; /* per A, B dtype (f32, bf16, f16, e4m3, e5m2) */
    } gt;
    ocl_packed gp; /* the packed GEMM (gemm_packed.c) */
    ocl_scratch scratch[OCL_N_SCRATCH];
    char platform_name[128];
    char device_name[128];
    char driver_version[64];
    char device_version[64];
    char devices_list[320]; /* "P:D name" of every device, for device_info */
    unsigned plat_index, dev_index;
    char cache_dir[512]; /* "" when the disk cache is off */
    int cache_hit;       /* the program came from the disk cache */
    int program_state;   /* the main program: 0 not yet built, 1 built, -1 failed */
    double build_ms;     /* time to get the program (build or load) */
    struct {             /* ABI 1.2 device timestamps from the queue's profiling events */
        int on;
        uint32_t cap, n_ops;
        cl_event base;    /* a marker enqueued by profile_begin */
        cl_event *events; /* every kernel launched while profiling */
        uint32_t n_events, cap_events;
        uint32_t *first, *last; /* per recorded op: its events [first, last] */
    } prof;
};

// ---------------------------------------------------------------------------------------
// Logging, OpenCL status (status.c)

/* Logs one ERROR line through the context's kit and returns st; ocl_log at any level. */
#define ocl_fail(ctx, ...) ampx_kit_fail(AMPX_KIT(ctx), __VA_ARGS__)
#define ocl_log(ctx, ...) ampx_kit_log(AMPX_KIT(ctx), __VA_ARGS__)

/* "CL_OUT_OF_RESOURCES", or "OpenCL error -N" for a code this table does not know. */
const char *ocl_err_name(cl_int err);

/* The ampx status an OpenCL error maps to (allocation failures: NO_MEMORY, else DEVICE). */
ampx_status ocl_status_of(cl_int err);

/* err != CL_SUCCESS: logs "<op>: <call>: <error name>" and returns its status. */
ampx_status ocl_check(ampx_context *ctx, cl_int err, const char *op, const char *call);

#define OCL_TRY AMPX_KIT_TRY

/* buffer_bytes of the kit: the size the host asked for. */
uint64_t ocl_buffer_bytes(const ampx_buffer *buf);

static inline int ocl_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

// ---------------------------------------------------------------------------------------
// Launching kernels (launch.c)

/* Arguments are appended in order; the first failure is kept and reported by the launch. */
typedef struct ocl_args {
    ampx_context *ctx;
    cl_kernel kernel;
    const char *name;
    cl_uint n;
    cl_int err;
    ampx_status st; /* a typed kernel that could not be built (logged already) */
    int row_items;  /* the typed row kernel takes one work item per row (ocl_launch_rows) */
} ocl_args;

ocl_args ocl_args_begin(ampx_context *ctx, ocl_kernel k);
/* The row kernels' layout: one work item per row (or block of rows: attention) on CPU
 * devices (no barriers, vector loads; PoCL runs a work-group's items one after the other),
 * one work-group per row elsewhere. AMPX_OPENCL_ROWS=group or =item overrides it (the tests
 * run the group kernels on PoCL). */
/* quirks.c: workarounds for implementations' bugs. ocl_thread_enter before anything that may
 * run the queue on the calling thread; ocl_release_context instead of clReleaseContext. */
int ocl_quirks_oclgrind(const char *platform_name);
void ocl_thread_enter(ampx_context *ctx);
void ocl_release_context(ampx_context *ctx);

/* paths=: which layout the kernels take (ocl_item_paths) */
enum { OCL_PATHS_AUTO, OCL_PATHS_WORKGROUP, OCL_PATHS_ITEM };
int ocl_item_paths(const ampx_context *ctx);
int ocl_row_items(const ampx_context *ctx);
/* Typed kernel k for the dtypes of t0, t1, t2 (as many as it has, the rest NULL), built
 * now if this context has not yet. Its tensors are passed with ocl_arg_fixed. */
ocl_args ocl_args_typed(ampx_context *ctx, ocl_typed k, const ampx_tensor *t0,
                        const ampx_tensor *t1, const ampx_tensor *t2);
/* Consecutive VW-wide vectors per work item per pass of the typed elementwise kernels
 * (FOR_VECS, VEC_RUN): 16 on CPU devices, 1 elsewhere; AMPX_OPENCL_VEC_RUN overrides it. */
int ocl_vec_run(const ampx_context *ctx);
/* Work items for n elements of such a kernel: VW * VEC_RUN elements per item, and at least
 * one per tail element. */
uint64_t ocl_vec_items(const ampx_context *ctx, uint64_t n);
void ocl_typed_free(ampx_context *ctx);
void ocl_arg_mem(ocl_args *a, cl_mem mem); /* mem may be NULL: a NULL pointer */
void ocl_arg_u64(ocl_args *a, uint64_t v);
void ocl_arg_u32(ocl_args *a, uint32_t v);
void ocl_arg_i32(ocl_args *a, int32_t v);
void ocl_arg_f32(ocl_args *a, float v);
void ocl_arg_local(ocl_args *a, size_t bytes); /* __local memory of that many bytes */
/* A tensor as (buffer, byte offset, dtype); a null tensor as (NULL, 0, 0). */
void ocl_arg_tensor(ocl_args *a, const ampx_tensor *t);
/* A fixed-dtype tensor as (buffer, byte offset). */
void ocl_arg_fixed(ocl_args *a, const ampx_tensor *t);

/* Enqueues a 1-D grid-stride kernel over `work` items (global size capped, a multiple of
 * the local size 64). */
ampx_status ocl_launch_1d(ocl_args *a, uint64_t work);
/* Enqueues `groups` work-groups of ctx->wg items (capped; kernels stride over groups). */
ampx_status ocl_launch_groups(ocl_args *a, uint64_t groups);
/* groups work-groups of local items each */
ampx_status ocl_launch_groups_of(ocl_args *a, uint64_t groups, size_t local);
/* Enqueues a typed row kernel: one work item per row where it was built so (ROW_ITEMS: CPU
 * devices, unless AMPX_OPENCL_ROWS=group), else one work-group of ctx->wg items per row. */
ampx_status ocl_launch_rows(ocl_args *a, uint64_t rows);
/* Enqueues one work item. */
ampx_status ocl_launch_single(ocl_args *a);
/* Enqueues an explicit ND range. */
ampx_status ocl_launch_nd(ocl_args *a, cl_uint dims, const size_t *global, const size_t *local);

/* Scratch buffer `slot` of at least `bytes` (NULL after logging). */
cl_mem ocl_scratch_get(ampx_context *ctx, const char *opname, unsigned slot, size_t bytes);
void ocl_scratch_free(ampx_context *ctx);

// ---------------------------------------------------------------------------------------
// The program (program.c): build or load from the disk cache, create the kernels.

/* Up to 2 source strings making one program. */
typedef struct ocl_source {
    cl_uint n;
    const char *text[2];
    size_t size[2];
} ocl_source;

/* How ocl_program_get uses the disk cache. */
typedef enum ocl_cache_use {
    OCL_CACHE_NONE = 0, /* always compiled, nothing read or stored */
    OCL_CACHE_ONE  = 1, /* loaded when present, else compiled and stored */
    OCL_CACHE_TWO  = 2, /* loaded when present, else compiled; stored the second time a
                         * process compiles it (a <key>.once file remembers the first):
                         * the typed programs on CPU devices (program.c) */
} ocl_cache_use;

ampx_status ocl_program_load(ampx_context *ctx, const char *build_options);
/* The main program, built (or loaded from the cache) the first time a kernel of it is asked
 * for, not at create(): `ampx backends` and a context that runs only typed kernels never
 * compile it. A failed build is reported once and then refused. */
ampx_status ocl_program_ready(ampx_context *ctx);
/* A built program from src, from the disk cache when `use` allows and it has it (*cache_hit
 * says so), else compiled (and stored as `use` says). */
ampx_status ocl_program_get(ampx_context *ctx, const ocl_source *src, const char *options,
                            const char *what, ocl_cache_use use, cl_program *out, int *cache_hit);
/* The cache use of the typed and tuned-GEMM programs on this context's device. */
ocl_cache_use ocl_typed_cache_use(const ampx_context *ctx);
/* The disk cache's key of a program: FNV-1a 64 over the platform, device, device version,
 * driver version, options and sources. */
uint64_t ocl_cache_key(const ampx_context *ctx, const char *options, const ocl_source *src);
/* mkdir -p; 0 when the directory exists afterwards. */
int ocl_make_dirs(const char *dir);
/* A whole file, malloc'ed (NULL when absent, empty or unreadable). */
void *ocl_read_file(const char *path, size_t *size);
// ---------------------------------------------------------------------------------------
// The tuned GEMM kernel: its parameters (gemm_tune.c), its programs and launch (gemm_tuned.c)

/* Its parameters: `given` (option gemm_params=, checked against the device's limits), else
 * a tuning run (tune_mode OCL_TUNE_FORCE, or OCL_TUNE_ON without a valid parameter file;
 * tiny: a two-candidate grid on one small shape), else the cache folder's parameter file,
 * else defaults from device queries. The packed kernel's block (ctx->gp) comes from the same
 * file or tuning run on CPU devices, unless block_given (option gemm_block=). Fails when
 * `given` does not fit or a tuning run fails. */
ampx_status ocl_gemm_tune_init(ampx_context *ctx, int tune_mode, int tiny,
                               const ocl_gemm_params *given, int block_given);
/* gemm_tuned over batches [b0, b0 + nb): C_old read from C, the result (with g's epilogue,
 * applied in the kernel's store) stored to out, which GEMM and GEMM_FP8 pass as C; dq_a, dq_b
 * GEMM_FP8's factors (NULL for GEMM). */
ampx_status ocl_gemm_tuned_launch(ampx_context *ctx, const ampx_gemm_args *g,
                                  const ampx_tensor *out, const ampx_tensor *dq_a,
                                  const ampx_tensor *dq_b, uint64_t b0, uint64_t nb);
void ocl_gemm_tuned_free(ampx_context *ctx);
/* Releases a slot's kernel and program, leaving it empty. */
void ocl_slot_release(ocl_typed_slot *s);
/* Builds `kernel` of typed/gemm_tuned.cl with the typed kernels' options plus `defs`. */
ampx_status ocl_gemm_build(ampx_context *ctx, const char *defs, const char *what,
                           const char *kernel, ocl_cache_use use, ocl_typed_slot *slot);
/* A GEMM operand dtype's index (f32, bf16, f16, e4m3, e5m2: 0-4; 5 for others) and T_ name. */
unsigned ocl_gemm_dt_index(ampx_dtype d);
extern const char *const ocl_gemm_dt_names[5];
/* The sources gemm_tuned.cl builds from: the prelude and the embedded file. */
ocl_source ocl_gemm_tuned_source(void);
/* Builds gemm_tuned for p and dtypes a, b (ocl_gemm_dt_index) into slot, using the disk cache
 * as `use` says; fails when the kernel cannot run MDIMC x NDIMC work-groups. */
ampx_status ocl_gemm_tuned_build(ampx_context *ctx, const ocl_gemm_params *p, unsigned a,
                                 unsigned b, ocl_cache_use use, ocl_typed_slot *slot);
/* Sets the arguments and enqueues kernel (built for p) for batches [b0, b0 + nb). */
ampx_status ocl_gemm_tuned_enqueue(ampx_context *ctx, cl_kernel kernel, const ocl_gemm_params *p,
                                   const ampx_gemm_args *g, const ampx_tensor *out,
                                   const ampx_tensor *dq_a, const ampx_tensor *dq_b, uint64_t b0,
                                   uint64_t nb);

// ---------------------------------------------------------------------------------------
// The packed GEMM (gemm_packed.c)

/* The block of C per work item: mr x nr, or (mr 0) from the device's native vector width. */
void ocl_gemm_packed_init(ampx_context *ctx, uint32_t mr, uint32_t nr);
/* 1 when g runs packed (k > 0 and one batch's panels fit the cap), 0 when it would take the
 * tiled kernel. */
int ocl_gemm_packed_fits(const ampx_context *ctx, const ampx_gemm_args *g);
/* GEMM (dq_a, dq_b NULL) or GEMM_FP8 over every batch, `step` at a time at most. */
ampx_status ocl_gemm_packed_run(ampx_context *ctx, const ampx_gemm_args *g, const ampx_tensor *dq_a,
                                const ampx_tensor *dq_b, uint64_t step);
void ocl_gemm_packed_free(ampx_context *ctx);
/* Releases one packed state's programs (a tuning candidate's). */
void ocl_packed_release(ocl_packed *gp);

extern const char ampx_ocl_source[];      /* kernels/opencl/ sources, embedded at build time */
extern const size_t ampx_ocl_source_size; /* bytes, without the final NUL */
extern const char ampx_ocl_prelude[];     /* common.cl and kernel_math.h */
extern const size_t ampx_ocl_prelude_size;
extern const unsigned ampx_ocl_typed_count; /* kernels/opencl/typed/ *.cl, by file name */
extern const char *const ampx_ocl_typed_names[];
extern const char *const ampx_ocl_typed_sources[];
extern const size_t ampx_ocl_typed_sizes[];

// ---------------------------------------------------------------------------------------
// The ops: ocl_<slot> for every op of AMPX_OPS, each in its family's file, declared from this
// list (plugin_kit.h's kit/shell.h), which plugin.c's tables are generated from too.

// clang-format off
#define OCL_OPS(X, p)                                                                              \
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
AMPX_KIT_OP_PROTOTYPES(ocl, OCL_OPS)
AMPX_KIT_OPS_COMPLETE(OCL_OPS);

// Helpers the ops share across files

/* BIAS_GRAD's kernel on dy (rows x cols, rows contiguous) into db (elementwise.c); GEMM's
 * bias gradient uses it when op(B) is laid out so. */
ampx_status ocl_bias_grad_run(ampx_context *ctx, const ampx_tensor *dy, const ampx_tensor *db,
                              uint64_t rows, uint64_t cols, int accumulate);
/* CAST of n elements after the checks (gemm.c widens operands with it). */
ampx_status ocl_cast_run(ampx_context *ctx, const ampx_tensor *src, const ampx_tensor *dst,
                         uint64_t n, int stochastic, uint64_t seed);
/* GRAD_STATS, SUM_SQUARES and AMP_PASS (amp.c): partial sums per fixed chunk of each tensor
 * (typed/amp_reduce.cl), then one kernel combining them in a fixed order (amp_finish.cl). */
typedef struct ocl_amp_reduce {
    ocl_typed kernel; /* TK_GRAD_STATS_PART, TK_SUM_SQUARES_PART or TK_AMP_PASS_PART */
    ampx_tensor_list grads;
    const ampx_amp_pass_args *pass; /* AMP_PASS: per-tensor targets; else target applies */
    ampx_dtype target;
    uint32_t want; /* 1 stats, 2 counts, 4 NaN counts, 8 sq, 16 flags (amp_finish.cl) */
    ampx_tensor stats, counts, nans, sq, flags, scalars;
    int sq_accumulate;
} ocl_amp_reduce;
ampx_status ocl_amp_reduce_run(ampx_context *ctx, const char *op, const ocl_amp_reduce *r);

/* Buffers (buffer.c) */
ampx_status ocl_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out);
void ocl_buffer_free(ampx_context *ctx, ampx_buffer *buf);
ampx_status ocl_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes);
ampx_status ocl_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes);
ampx_status ocl_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                            const ampx_buffer *src, uint64_t src_offset, uint64_t bytes);
ampx_status ocl_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                            uint32_t pattern, uint32_t pattern_bytes);

#endif /* AMPX_PLUGIN_OCL_H */
