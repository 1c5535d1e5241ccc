/* ampx/backend_types.h — part of the backend plugin ABI (a plugin includes backend.h, which
 * includes this): statuses and the log callback, the handles, what the host gives create()
 * and what device_info() fills, tensors, the scalars block, and the op list AMPX_OPS with the
 * op numbers. backend.h states the rules of the boundary; they hold here as there.
 */
#ifndef AMPX_BACKEND_TYPES_H
#define AMPX_BACKEND_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* C11 spells it _Static_assert, C++ static_assert: the header compiles as either. */
#ifdef __cplusplus
#define AMPX_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define AMPX_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// Status, log, handles

typedef enum ampx_status {
    AMPX_OK              = 0,
    AMPX_ERR_INVALID     = 1, /* bad argument: null handle, out-of-range offset, bad shape */
    AMPX_ERR_UNSUPPORTED = 2, /* op / dtype combination not supported (supports() said no) */
    AMPX_ERR_NO_MEMORY   = 3, /* allocation failed on host or device */
    AMPX_ERR_DEVICE      = 4, /* the device or its driver reported an error */
    AMPX_ERR_UNAVAILABLE = 5, /* the backend cannot run here (probe failed) */
    AMPX_ERR_INTERNAL    = 6, /* anything else */
    AMPX_ERR_BUSY        = 7, /* (host only) a trainer already in use by another thread */
} ampx_status;

typedef enum ampx_log_level {
    AMPX_LOG_ERROR = 0,
    AMPX_LOG_WARN  = 1,
    AMPX_LOG_INFO  = 2,
    AMPX_LOG_DEBUG = 3,
} ampx_log_level;

/* Host callback for messages. On every failing call the plugin first logs one ERROR line
 * that says what failed and why (e.g. "gemm: lda 3 < k 4"). */
typedef void (*ampx_log_fn)(void *user, ampx_log_level level, const char *msg);

typedef struct ampx_context ampx_context; /* one device + one in-order stream */
typedef struct ampx_buffer ampx_buffer;   /* device memory, owned by the plugin */

/* What the host gives create(). */
typedef struct ampx_host {
    uint32_t size;              /* sizeof(ampx_host) as the host knows it */
    uint32_t abi_major;         /* the host's AMPX_ABI_MAJOR */
    uint32_t abi_minor;         /* the host's AMPX_ABI_MINOR */
    ampx_log_fn log;            /* (optional) NULL: messages are dropped */
    void *log_user;             /* passed back to log */
    const char *const *options; /* "key=value" strings, n_options of them */
    uint32_t n_options;
} ampx_host;

/* What device_info() fills. Strings are NUL-terminated and truncated to fit. */
typedef struct ampx_device_info {
    uint32_t size;         /* set by the host to sizeof(ampx_device_info) */
    char name[128];        /* e.g. "AMD EPYC (2 threads)", "NVIDIA H200" */
    char description[512]; /* free text: driver, ISA path, compute capability ... */
    uint64_t memory_bytes; /* device memory, 0 if unknown */
    uint32_t n_threads;    /* host threads the plugin uses (CPU backends), else 0 */
} ampx_device_info;

/* A reference to typed memory: a buffer, a byte offset into it, and the element dtype. */
typedef struct ampx_tensor {
    ampx_buffer *buf;
    uint64_t offset; /* bytes; must be a multiple of the dtype's size */
    ampx_dtype dtype;
} ampx_tensor;

// ---------------------------------------------------------------------------------------
// The scalars block
//
// A small block in device memory that carries the loss scaler and the learning-rate
// schedule through a training step without the host reading it. The AMP ops and the
// optimizers read and write it on the stream; the host reads it only when it logs.
// Layout is fixed: 4-byte fields only, little-endian, append-only like every ABI struct
// (its first field is not a size because device kernels index it directly; its size is
// sizeof(ampx_scalars) of the ABI minor the host speaks).

typedef enum ampx_scaler_mode {
    AMPX_SCALER_NONE    = 0, /* scale stays 1; non-finite gradients still skip the step */
    AMPX_SCALER_STATIC  = 1, /* scale stays init; non-finite gradients skip the step */
    AMPX_SCALER_DYNAMIC = 2, /* grows and backs off the scale, as SCALER_UPDATE says */
} ampx_scaler_mode;

typedef enum ampx_lr_schedule {
    AMPX_LR_CONSTANT      = 0, /* lr = lr_base */
    AMPX_LR_WARMUP_COSINE = 1, /* linear warmup to lr_base, cosine decay to lr_min */
} ampx_lr_schedule;

/* Bits of ampx_scalars.stop_reason. */
#define AMPX_STOP_MIN_SCALE 1         /* backed off to min_scale with on_min_scale = error */
#define AMPX_STOP_CONSECUTIVE_SKIPS 2 /* more than max_consecutive_skips skipped steps */

typedef struct ampx_scalars {
    /* -- state -- */
    float scale;               /* the loss scale; the loss gradient is seeded with it */
    int32_t found_inf;         /* OR of this step's unscale_check flags; 0 or 1 */
    int32_t growth_tracker;    /* applied steps since the last growth or overflow */
    int32_t hysteresis_left;   /* overflows still tolerated before backing off */
    int32_t applied_steps;     /* optimizer step count: only applied steps count */
    int32_t skipped_steps;     /* total skipped steps */
    int32_t consecutive_skips; /* skipped steps since the last applied one */
    int32_t last_found_inf;    /* found_inf of the step scaler_update last consumed */
    int32_t stop_reason;       /* AMPX_STOP_* bits; the host stops the run when non-zero */
    float lr;                  /* the learning rate the optimizer last used */
    /* -- scaler configuration (host-written once) -- */
    int32_t mode;                   /* ampx_scaler_mode */
    float growth_factor;            /* > 1, e.g. 2 */
    float backoff_factor;           /* in (0, 1), e.g. 0.5 */
    int32_t growth_interval;        /* applied steps between growths, e.g. 2000 */
    int32_t hysteresis;             /* overflows tolerated before a backoff, >= 1 */
    int32_t consecutive_hysteresis; /* 1: refill hysteresis_left on every applied step */
    float min_scale;                /* backoff never goes below; 0 = unbounded */
    float max_scale;                /* growth never goes above; inf = unbounded */
    int32_t on_min_scale_error;     /* 1: set AMPX_STOP_MIN_SCALE when at min_scale */
    int32_t max_consecutive_skips;  /* 0 = unbounded */
    /* -- learning-rate schedule (host-written once) -- */
    int32_t lr_schedule;  /* ampx_lr_schedule */
    float lr_base;        /* peak learning rate */
    float lr_min;         /* floor of the cosine decay */
    int32_t warmup_steps; /* applied steps of linear warmup */
    int32_t decay_steps;  /* applied step at which the cosine reaches lr_min */
    int32_t reserved[7];  /* zero; room to grow within one cache line pair */
} ampx_scalars;

AMPX_STATIC_ASSERT(sizeof(ampx_scalars) == 128, "ampx_scalars layout is part of the ABI");

// ---------------------------------------------------------------------------------------
// Op numbers. Append only; never renumber.
//
// AMPX_OPS is the one list of the ops: one line per op, in op-number order, and everything
// that walks the ops is generated from it (this enum, the slot table ampx_backend_ops in
// backend.h, the kit's dtype table in ampx/kit/base.h, the plugins' op prototypes and tables
// from ampx/kit/shell.h, the host's names, call layer and conformance sweep). A macro X
// given to it is called once per op as
//   X(index, slot, OP, args, n_dtypes, f32)
//     index     the op number: AMPX_OP_<OP> = index
//     slot      the member of ampx_backend_ops, also the op's name ("gemm")
//     OP        the suffix of its AMPX_OP_ constant
//     args      the argument struct; the slot is ampx_status (*slot)(ampx_context *ctx,
//               const args *args)
//     n_dtypes  how many dtypes supports() takes, in the order of the op's heading (in
//               backend_args.h)
//     f32       bit i set: dtype i must be f32 (EMBEDDING_BWD's dtable); the others may be
//               any float dtype, except the fp8 positions of the ABI 1.7 ops, which their
//               headings state (FP8_QUANTIZE: exactly one of src and dst fp8; GEMM_FP8: A
//               and B fp8) and the kit's ampx_kit_dtypes_ok knows
// A new op is a new last line with the next index (and a new AMPX_OP_COUNT_V1_x), its args
// struct in backend_args.h, its kit take in ampx/kit/take_*.h and its conformance cases;
// docs/ARCHITECTURE.md ("Adding a backend op") lists every place.

// clang-format off
#define AMPX_OPS(X)                                                                                \
    /* #  slot           OP             args                     n  f32 */                         \
    X( 0, gemm,          GEMM,          ampx_gemm_args,          3, 0) /* batched matmul */        \
    X( 1, cast,          CAST,          ampx_cast_args,          2, 0) /* dtype conversion */      \
    X( 2, add,           ADD,           ampx_add_args,           3, 0) /* axpby, bias add */       \
    X( 3, mul,           MUL,           ampx_mul_args,           3, 0) /* elementwise product */   \
    X( 4, scale,         SCALE,         ampx_scale_args,         2, 0) /* y = alpha x */           \
    X( 5, bias_grad,     BIAS_GRAD,     ampx_bias_grad_args,     2, 0) /* column sums of dy */     \
    X( 6, act_fwd,       ACT_FWD,       ampx_act_args,           2, 0) /* activation */            \
    X( 7, act_bwd,       ACT_BWD,       ampx_act_args,           3, 0) /* its gradient */          \
    X( 8, softmax_fwd,   SOFTMAX_FWD,   ampx_softmax_args,       2, 0) /* (log-)softmax of rows */ \
    X( 9, softmax_bwd,   SOFTMAX_BWD,   ampx_softmax_args,       3, 0) /* its gradient */          \
    X(10, softmax_xent,  SOFTMAX_XENT,  ampx_softmax_xent_args,  2, 0) /* loss and its gradient */ \
    X(11, layernorm_fwd, LAYERNORM_FWD, ampx_layernorm_args,     2, 0) /* norm over each row */    \
    X(12, layernorm_bwd, LAYERNORM_BWD, ampx_layernorm_args,     3, 0) /* its gradient */          \
    X(13, batchnorm_fwd, BATCHNORM_FWD, ampx_batchnorm_args,     2, 0) /* norm per channel */      \
    X(14, batchnorm_bwd, BATCHNORM_BWD, ampx_batchnorm_args,     3, 0) /* its gradient */          \
    X(15, embedding_fwd, EMBEDDING_FWD, ampx_embedding_args,     2, 0) /* rows of a table */       \
    X(16, embedding_bwd, EMBEDDING_BWD, ampx_embedding_args,     2, 2) /* scatter-add, f32 */      \
    X(17, reduce,        REDUCE,        ampx_reduce_args,        2, 0) /* row sum or mean */       \
    X(18, sum_squares,   SUM_SQUARES,   ampx_sum_squares_args,   1, 0) /* sum x^2 of a list */     \
    X(19, unscale_check, UNSCALE_CHECK, ampx_unscale_check_args, 1, 0) /* g / scale, inf flags */  \
    X(20, grad_stats,    GRAD_STATS,    ampx_grad_stats_args,    1, 0) /* gradient statistics */   \
    X(21, scaler_update, SCALER_UPDATE, ampx_scaler_update_args, 0, 0) /* the loss scale */        \
    X(22, sgd,           SGD,           ampx_sgd_args,           1, 0) /* multi-tensor SGD */      \
    X(23, adamw,         ADAMW,         ampx_adamw_args,         1, 0) /* multi-tensor AdamW */    \
    /* ABI 1.1 */                                                                                  \
    X(24, dropout,       DROPOUT,       ampx_dropout_args,       2, 0) /* counter-based mask */    \
    X(25, permute,       PERMUTE,       ampx_permute_args,       2, 0) /* strided N-D copy */      \
    /* ABI 1.4 (1.2 and 1.3 added no ops) */                                                       \
    X(26, amp_pass,      AMP_PASS,      ampx_amp_pass_args,      1, 0) /* the step's AMP pass */ \
    /* ABI 1.5 */                                                                                  \
    X(27, attn_fwd,      ATTN_FWD,      ampx_attn_args,          2, 0) /* fused attention */       \
    X(28, attn_bwd,      ATTN_BWD,      ampx_attn_args,          4, 0) /* its gradient */      \
    /* ABI 1.6 */                                                                                  \
    X(29, im2col,        IM2COL,        ampx_window_args,        2, 0) /* patches as rows */      \
    X(30, col2im,        COL2IM,        ampx_window_args,        2, 0) /* its adjoint, summed */  \
    X(31, pool2d_fwd,    POOL2D_FWD,    ampx_window_args,        2, 0) /* max/avg pooling */      \
    X(32, pool2d_bwd,    POOL2D_BWD,    ampx_window_args,        2, 0) /* its gradient */         \
    /* ABI 1.7 */                                                                                  \
    X(33, fp8_quantize,  FP8_QUANTIZE,  ampx_fp8_quantize_args,  2, 0) /* scaled fp8 cast */       \
    X(34, gemm_fp8,      GEMM_FP8,      ampx_gemm_fp8_args,      3, 0) /* fp8 operands */          \
    X(35, fp8_scale_update, FP8_SCALE_UPDATE, ampx_fp8_scale_update_args, 0, 0) /* the scales */ \
    /* ABI 1.8 */                                                                                  \
    X(36, abs_max,       ABS_MAX,       ampx_abs_max_args,       1, 0) /* max |x| of a list */
// clang-format on

#define AMPX_OP_ENUM_(index, slot, OP, args, n_dtypes, f32) AMPX_OP_##OP = index,
typedef enum ampx_op {
    AMPX_OPS(AMPX_OP_ENUM_) /* AMPX_OP_GEMM = 0, AMPX_OP_CAST = 1, ..., AMPX_OP_ABS_MAX = 36 */
    /* how many ops each minor has: a plugin's table of that minor ends after them */
    AMPX_OP_COUNT_V1_0 = 24,
    AMPX_OP_COUNT_V1_1 = 26,
    AMPX_OP_COUNT_V1_4 = 27,
    AMPX_OP_COUNT_V1_5 = 29,
    AMPX_OP_COUNT_V1_6 = 33,
    AMPX_OP_COUNT_V1_7 = 36,
    AMPX_OP_COUNT_V1_8 = 37
} ampx_op;
#undef AMPX_OP_ENUM_

#define AMPX_OP_COUNT AMPX_OP_COUNT_V1_8

#define AMPX_OP_PLUS_ONE_(index, slot, OP, args, n_dtypes, f32) +1
AMPX_STATIC_ASSERT(0 AMPX_OPS(AMPX_OP_PLUS_ONE_) == AMPX_OP_COUNT,
                   "AMPX_OPS has one line per op, AMPX_OP_COUNT of them");
#undef AMPX_OP_PLUS_ONE_

/* Shape classes for supports(). AMPX_SHAPE_ANY: any shape the op's arguments can describe.
 * AMPX_SHAPE_GEMM_EPILOGUE (ABI 1.5, GEMM only): 1 when the plugin applies the epilogue
 * fields of ampx_gemm_args (bias, act, pre_act, bias_grad) for these {A, B, C} dtypes, with a
 * bias and pre_act of any float dtype and an f32 bias_grad. The host asks it only of a plugin
 * whose table says abi_minor >= 5 (an older plugin may answer any class as ANY) and hands the
 * epilogue to no other: it then issues ADD, ACT_FWD and BIAS_GRAD instead. */
#define AMPX_SHAPE_ANY 0u
#define AMPX_SHAPE_GEMM_EPILOGUE 1u

#ifdef __cplusplus
}
#endif
#endif /* AMPX_BACKEND_TYPES_H */
