/* cpu.h — internal header of the CPU backend (libampx-cpu.so).
 *
 * The context and buffer structs behind the ABI's opaque handles, the thread pool, the
 * per-context workspaces, the run-time ISA seam (cpu_kernels), and the helpers every op
 * file shares: loading any float dtype as f32, storing f32 to any dtype with round to
 * nearest even (dtype.h does the bit-exact conversions). Argument checks are plugin_kit.h's:
 * they log one ERROR line through the host's callback and never touch memory on failure.
 *
 * Everything here has hidden visibility (the CMake target sets it); the plugin exports
 * only ampx_backend_entry.
 */
#ifndef AMPX_PLUGIN_CPU_H
#define AMPX_PLUGIN_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "ampx/plugin_kit.h"

// ---------------------------------------------------------------------------------------
// Buffers: host memory, 64-byte aligned, with their size so every access is bounds-checked.

struct ampx_buffer {
    unsigned char *data; /* aligned_alloc(64, ...); never NULL, even for 0 bytes */
    uint64_t bytes;      /* the size the host asked for */
};

// ---------------------------------------------------------------------------------------
// Thread pool: n_threads - 1 persistent workers plus the calling thread.

/* One item of a parallel_for; tid in [0, n_threads) selects the thread's workspace. */
typedef void (*cpu_task_fn)(void *arg, uint64_t item, unsigned tid);

/* Dispatch is a generation counter: the caller publishes the job, bumps `generation`
 * (release) and works too; workers spin on it (bounded, with pause) before they sleep on
 * cv_work, and the caller spins on `active` before it sleeps on cv_done. The mutex and the
 * condition variables are taken only when a side has gone to sleep (`sleepers`,
 * `caller_waits`), so back-to-back ops cost no system call and no context switch. */
typedef struct cpu_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* sleeping workers wait here for a new generation */
    pthread_cond_t cv_done; /* a sleeping caller waits here for active == 0 */
    pthread_t *threads;
    unsigned n_workers;
    _Atomic unsigned active;     /* workers still inside the current generation */
    _Atomic uint64_t generation; /* bumped once per parallel_for (and at quit) */
    _Atomic unsigned sleepers;   /* workers blocked (or about to block) on cv_work */
    _Atomic int caller_waits;    /* the caller is blocked (or about to block) on cv_done */
    _Atomic int quit;
    cpu_task_fn fn; /* the job: written before the generation's release */
    void *arg;
    const struct cpu_kernels *kern; /* the caller's table, for the workers' cpu_tls_kern */
    uint64_t n_items;
    uint64_t grain;        /* items per claim of next */
    _Atomic uint64_t next; /* next item to hand out */
} cpu_pool;

// ---------------------------------------------------------------------------------------
// Run-time ISA seam (isa.c). create() picks one kernel table from what cpuid/XGETBV report,
// capped by the `isa` option and AMPX_CPU_ISA. Tables: portable C, AVX2+FMA+F16C, AVX-512F
// and AVX512-BF16; the AMX path is detected and reported but runs the AVX512-BF16 table
// (docs/CPU.md).

typedef enum cpu_isa {
    CPU_ISA_PORTABLE = 0,
    CPU_ISA_AVX2,
    CPU_ISA_AVX512,
    CPU_ISA_AVX512BF16,
    CPU_ISA_AMX,
    CPU_ISA_COUNT
} cpu_isa;

/* What the processor has and the OS enables (a feature whose state XCR0 leaves off is 0). */
typedef struct cpu_features {
    int avx, avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512bf16;
    int amx_hw; /* AMX-TILE and AMX-BF16 with the tile state enabled (permission not asked) */
} cpu_features;

/* The micro-kernels' epilogue: c[i*ldc + j] = alpha * sum + beta * c[i*ldc + j] in f32 (two
 * products and a sum, each rounded), then rounded once to C's dtype as dtype.h does: the bits
 * of the driver's scalar epilogue. With beta 0, alpha * sum, and c is not read. c points at
 * element (0, 0) of the block: float * for f32, uint16_t * for bf16 and f16 (only tables
 * with micro_out_16 get those). */
typedef struct cpu_gemm_out {
    void *c;
    uint64_t ldc;
    float alpha, beta;
    ampx_dtype dtype;
} cpu_gemm_out;

typedef struct cpu_kernels {
    const char *name; /* reported by device_info as "isa=<name>" */
    cpu_isa isa;
    /* Portable GEMM: acc[i*ldacc + j] += sum_p a[i*kc + p] * b[p*nc + j] for i < mc, j < nc,
     * p < kc; a is a packed f32 panel (mc x kc, row-major), b one of kc x nc. NULL when the
     * table uses the sliver micro-kernel below. */
    void (*gemm_tile)(uint64_t mc, uint64_t nc, uint64_t kc, const float *a, const float *b,
                      float *acc, uint64_t ldacc);
    /* Sliver micro-kernel (Goto/BLIS): acc (mr x nr, row stride ldacc) = (first ? 0 : acc)
     * + sum_p a[p*mr + i] * b[p*nr + j], p in order 0 .. kc-1, one fused multiply-add each.
     * a is an mr-row sliver of op(A) packed k-major, b an nr-column sliver of op(B). With
     * `out` (the last k block of a whole mr x nr block of an f32 C), the sum is not stored
     * in acc but written to C as cpu_gemm_out says. mc x nc (multiples of mr and nr, nc <=
     * GEMM_NC_MAX of gemm.c) is the largest C tile of one parallel item. */
    unsigned mr, nr, mc, nc;
    int micro_out_16; /* the micro-kernels' epilogue also writes bf16 and f16 C */
    void (*gemm_micro)(uint64_t kc, const float *a, const float *b, float *acc, uint64_t ldacc,
                       int first, const struct cpu_gemm_out *out);
    /* bf16 pair micro-kernel (optional: NULL runs bf16 x bf16 through gemm_micro, widened).
     * Same contract as gemm_micro with both operands bf16, packed as k-pairs of raw bits:
     * a[q*mr + i] holds op(A)[i][2q] in its high half and op(A)[i][2q+1] in its low half,
     * b[q*nr + j] the same for op(B)[2q..2q+1][j], q < ceil(kc / 2); an odd kc pads a zero
     * low half. Sums in k order 0 .. kc-1, one fused multiply-add per product (avx512.c). */
    void (*gemm_micro_bf16)(uint64_t kc, const uint32_t *a, const uint32_t *b, float *acc,
                            uint64_t ldacc, int first, const struct cpu_gemm_out *out);
    /* dst[j] = src[j] widened exactly to f32 / src[j] rounded to nearest even, j < n, for a
     * bf16 or f16 src / dst (f32 is a copy). Bit-identical on every table. */
    void (*load_f32)(float *dst, const void *src, ampx_dtype dt, uint64_t n);
    void (*store_f32)(void *dst, ampx_dtype dt, const float *src, uint64_t n);
} cpu_kernels;

extern const cpu_kernels cpu_kernels_portable;
#if defined(__x86_64__) || defined(__i386__)
extern const cpu_kernels cpu_kernels_avx2;
extern const cpu_kernels cpu_kernels_avx512;
extern const cpu_kernels cpu_kernels_avx512bf16;
/* The AVX2 table's converters (avx2.c), shared by the AVX-512 tables. */
void cpu_load_f32_avx2(float *dst, const void *src, ampx_dtype dt, uint64_t n);
void cpu_store_f32_avx2(void *dst, ampx_dtype dt, const float *src, uint64_t n);
#define CPU_HAVE_AVX2_TABLE 1
#else
#define CPU_HAVE_AVX2_TABLE 0
#endif

/* CPU_ISA_CHUNK(name, body): defines the cpu_task_fn `name` from the always-inline
 * function `body` (same signature), compiled three times: as portable C, and (on x86) at
 * -O3 for AVX2+FMA+F16C and for AVX-512 (512-bit vectors) so the compiler vectorises its
 * loops. `name` runs the widest copy the op's table allows. The build is ISO C (-std=c11:
 * no contraction into FMA) and every copy uses the same IEEE operations, so they give
 * identical bits; the vector width only changes throughput (AdamW's double divisions and
 * square roots: about 1.7x from 256 to 512 bits). */
#define CPU_INLINE static inline __attribute__((always_inline))
#if CPU_HAVE_AVX2_TABLE
#define CPU_ISA_CHUNK(name, body)                                                                  \
    static void name##_portable(void *arg, uint64_t item, unsigned tid) {                          \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    __attribute__((target("avx2,fma,f16c"), optimize("O3"))) static void name##_avx2(              \
        void *arg, uint64_t item, unsigned tid) {                                                  \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma,f16c,"                      \
                          "prefer-vector-width=512"),                                              \
                   optimize("O3"))) static void name##_avx512(void *arg, uint64_t item,            \
                                                              unsigned tid) {                      \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    static void name(void *arg, uint64_t item, unsigned tid) {                                     \
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512)                                                   \
            name##_avx512(arg, item, tid);                                                         \
        else if (cpu_tls_kern->isa >= CPU_ISA_AVX2)                                                \
            name##_avx2(arg, item, tid);                                                           \
        else                                                                                       \
            name##_portable(arg, item, tid);                                                       \
    }
#else
#define CPU_ISA_CHUNK(name, body)                                                                  \
    static void name(void *arg, uint64_t item, unsigned tid) {                                     \
        body(arg, item, tid);                                                                      \
    }
#endif

const char *cpu_isa_name(cpu_isa isa);
/* "auto" (the highest path) or a path name; 0 on success. */
int cpu_isa_parse(const char *s, cpu_isa *out);
/* cpuid and XGETBV, once per process. */
const cpu_features *cpu_detect(void);
/* "avx,avx2,fma,f16c" (or "none") into out. */
void cpu_features_str(const cpu_features *f, char *out, size_t cap);
/* The path in use under `cap`: the highest the machine supports up to cap (asking Linux for
 * the AMX tile state when cap allows AMX; *amx_denied says it refused), and its table. */
cpu_isa cpu_isa_select(cpu_isa cap, const cpu_kernels **kern, int *amx_denied);

/* The table of the op running on this thread (set by cpu_run on every thread it uses):
 * cpu_load_f32 and cpu_store_f32 convert with it. Initial-exec: the plugin is dlopen'd, and
 * in the default model every read would be a __tls_get_addr call; a pointer fits glibc's
 * static TLS surplus for dlopen'd modules. It also keeps the variable out of the dynamic TLS
 * that gcc 12's LeakSanitizer scans at exit, where its tracer crashes on the ranges it
 * recorded for this module. */
#define CPU_TLS _Thread_local __attribute__((tls_model("initial-exec")))
extern CPU_TLS const cpu_kernels *cpu_tls_kern;

// ---------------------------------------------------------------------------------------
// The context: one "device" (this machine) and one in-order stream. Ops run synchronously
// on the calling thread (helped by the pool), so the stream is always drained.

typedef struct cpu_scratch {
    void *p;
    size_t bytes;
} cpu_scratch;

#define CPU_MAX_THREADS 1024

struct ampx_context {
    ampx_kit kit; /* the host's log, the plugin's name, buffer sizes (plugin_kit.h) */
    unsigned n_threads;
    const cpu_kernels *kern;
    cpu_isa isa_cap; /* the cap asked for (option and environment) */
    int amx_denied;  /* Linux refused the AMX tile state */
    int epilogue;    /* supports() claims GEMM's epilogue (option gemm_epilogue, default 1) */
    int attention;   /* supports() claims ATTN_FWD/BWD (option attention; auto: AVX-512 paths) */
    cpu_pool pool;
    cpu_scratch *thread_ws; /* n_threads per-thread workspaces, grown on demand */
    cpu_scratch shared_ws;  /* one workspace shared by a call, grown on demand */
    struct {                /* ABI 1.2 device timestamps: start and end of every op */
        int on;
        uint32_t cap, n;
        uint64_t t0, *ns;
    } prof;
};

/* Elements handled per parallel item in elementwise ops, and the size below which an op
 * runs inline on the calling thread (waking the pool costs more than it saves). */
#define CPU_CHUNK 4096u
#define CPU_PAR_MIN 65536u

// ---------------------------------------------------------------------------------------
// Logging and argument checks: plugin_kit.h, through the context's kit

/* Logs one ERROR line "<msg>" through the host callback and returns st. */
#define cpu_fail(ctx, ...) ampx_kit_fail(AMPX_KIT(ctx), __VA_ARGS__)
#define CPU_TRY AMPX_KIT_TRY

/* buffer_bytes of the kit: the size the host asked for. */
uint64_t cpu_buffer_bytes(const ampx_buffer *buf);

/* n * m with overflow detection: returns 0 and sets *out, or -1 on overflow. */
static inline int cpu_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

// ---------------------------------------------------------------------------------------
// Threads (threads.c)

ampx_status cpu_pool_start(cpu_pool *pool, unsigned n_workers);
void cpu_pool_stop(cpu_pool *pool);

/* Runs fn(job, item, tid) for every item in [0, n_items) and returns when all are done: over
 * the pool when the context has more than one thread, there is more than one item and `work`
 * (the elements the call touches) reaches CPU_PAR_MIN; otherwise inline on the calling
 * thread (tid 0), where waking the pool would cost more than it saves. Items never share
 * outputs and partial results are combined in item order, so the result is the same either
 * way and for any thread count. */
void cpu_run(ampx_context *ctx, uint64_t work, uint64_t n_items, cpu_task_fn fn, void *job);

/* Spins, yielding the core once it has spun a while, until *flag == value (acquire): for a
 * task waiting on work that another task of the same cpu_run is doing and that never waits
 * itself (gemm.c's panels). */
void cpu_spin_until(_Atomic int *flag, int value);

static inline uint64_t cpu_div_up(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

/* Rows per item so that an item of whole rows of `cols` elements covers about CPU_CHUNK. */
static inline uint64_t cpu_rows_per_item(uint64_t cols) {
    return cols >= CPU_CHUNK ? 1 : CPU_CHUNK / (cols ? cols : 1);
}

/* cpu_run over n elements in CPU_CHUNK-element items (item i covers [i * CPU_CHUNK, ...)). */
static inline void cpu_run_chunks(ampx_context *ctx, uint64_t n, cpu_task_fn fn, void *job) {
    cpu_run(ctx, n, cpu_div_up(n, CPU_CHUNK), fn, job);
}

/* cpu_run over `rows` rows of `cols` elements, cpu_rows_per_item(cols) whole rows per item
 * (item i covers rows [i * rpi, (i + 1) * rpi)). */
static inline void cpu_run_rows(ampx_context *ctx, uint64_t rows, uint64_t cols, cpu_task_fn fn,
                                void *job) {
    cpu_run(ctx, rows * cols, cpu_div_up(rows, cpu_rows_per_item(cols)), fn, job);
}

/* Chunks of the longest tensor of a list (at least 1): the size of a per-chunk scratch
 * array reused for every tensor. */
static inline uint64_t cpu_list_max_chunks(const ampx_tensor_list *l) {
    uint64_t max_chunks = 1;
    for (uint32_t t = 0; t < l->count; t++) {
        uint64_t c = cpu_div_up(l->n_elems[t], CPU_CHUNK);
        if (c > max_chunks) max_chunks = c;
    }
    return max_chunks;
}

/* For ops that cut a tensor list into items (first[t]: tensor t's first item, ascending):
 * the tensor that item belongs to, the last whose first item is <= item. */
static inline uint32_t cpu_item_tensor(const uint64_t *first, uint32_t count, uint64_t item) {
    uint32_t t = 0, hi = count;
    while (hi - t > 1) {
        uint32_t mid = t + (hi - t) / 2;
        if (first[mid] <= item)
            t = mid;
        else
            hi = mid;
    }
    return t;
}

/* Grows every per-thread workspace to at least `bytes` (64-byte aligned). */
ampx_status cpu_reserve_thread_ws(ampx_context *ctx, const char *opname, size_t bytes);
/* Grows the shared workspace to at least `bytes` and returns it (NULL after logging). */
void *cpu_reserve_shared_ws(ampx_context *ctx, const char *opname, size_t bytes);
void cpu_free_workspaces(ampx_context *ctx);

// ---------------------------------------------------------------------------------------
// Element access. base is the tensor's first element (buffer data + offset).

static inline void *cpu_ptr(const ampx_tensor *t) {
    return t->buf ? (void *)(t->buf->data + t->offset) : NULL;
}

static inline float cpu_ld(const void *base, ampx_dtype dt, uint64_t i) {
    switch (dt) {
    case AMPX_F32: return ((const float *)base)[i];
    case AMPX_BF16: return ampx_bf16_to_f32(((const uint16_t *)base)[i]);
    case AMPX_F16: return ampx_f16_to_f32(((const uint16_t *)base)[i]);
    case AMPX_E4M3: return ampx_e4m3_to_f32(((const uint8_t *)base)[i]);
    case AMPX_E5M2: return ampx_e5m2_to_f32(((const uint8_t *)base)[i]);
    default: return 0.0f;
    }
}

/* Stores v rounded to nearest even (NaN stays NaN, overflow becomes inf). */
static inline void cpu_st(void *base, ampx_dtype dt, uint64_t i, float v) {
    switch (dt) {
    case AMPX_F32: ((float *)base)[i] = v; break;
    case AMPX_BF16: ((uint16_t *)base)[i] = ampx_f32_to_bf16(v); break;
    case AMPX_F16: ((uint16_t *)base)[i] = ampx_f32_to_f16(v); break;
    default: break;
    }
}

/* Stores v with stochastic rounding drawn from rnd (f32 stores it exactly). */
static inline void cpu_st_sr(void *base, ampx_dtype dt, uint64_t i, float v, uint32_t rnd) {
    switch (dt) {
    case AMPX_F32: ((float *)base)[i] = v; break;
    case AMPX_BF16: ((uint16_t *)base)[i] = ampx_f32_to_bf16_sr(v, rnd); break;
    case AMPX_F16: ((uint16_t *)base)[i] = ampx_f32_to_f16_sr(v, rnd); break;
    default: break;
    }
}

/* dst[j] = element i0 + j of base, widened exactly to f32, for j < n. */
void cpu_load_f32(float *dst, const void *base, ampx_dtype dt, uint64_t i0, uint64_t n);
/* Element i0 + j of base = src[j] rounded to nearest even, for j < n. */
void cpu_store_f32(void *base, ampx_dtype dt, uint64_t i0, const float *src, uint64_t n);
/* In-place access for kernels that work on f32 runs. cpu_in_f32: elements i0 .. i0 + n - 1
 * of base as f32, read where they lie when the tensor is f32 (no copy), else widened into
 * scratch. cpu_out_f32: where a kernel writes those elements' f32 results, the tensor
 * itself when it is f32, else scratch, which cpu_out_f32_done then rounds into the tensor
 * (it does nothing for f32). A kernel that reads element k before it writes element k (any
 * elementwise loop, vectorised or not) may pass the same scratch for input and output and
 * works in place (y the very tensor x). */
static inline const float *cpu_in_f32(float *scratch, const void *base, ampx_dtype dt, uint64_t i0,
                                      uint64_t n) {
    if (dt == AMPX_F32) return (const float *)base + i0;
    cpu_tls_kern->load_f32(scratch, (const char *)base + i0 * 2, dt, n);
    return scratch;
}
static inline float *cpu_out_f32(float *scratch, void *base, ampx_dtype dt, uint64_t i0) {
    return dt == AMPX_F32 ? (float *)base + i0 : scratch;
}
static inline void cpu_out_f32_done(void *base, ampx_dtype dt, uint64_t i0, const float *res,
                                    uint64_t n) {
    if (dt != AMPX_F32) cpu_tls_kern->store_f32((char *)base + i0 * 2, dt, res, n);
}
/* The portable table's converters (portable.c): src and dst point at the first element. */
void cpu_load_f32_portable(float *dst, const void *src, ampx_dtype dt, uint64_t n);
void cpu_store_f32_portable(void *dst, ampx_dtype dt, const float *src, uint64_t n);

// ---------------------------------------------------------------------------------------
// The ops, one file each (named after the op in backend.h): cpu_<slot> for every op of
// AMPX_OPS, declared from this list (plugin_kit.h's kit/shell.h), which plugin.c's tables
// are generated from too.

// clang-format off
#define CPU_OPS(X, p)                                                                              \
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
AMPX_KIT_OP_PROTOTYPES(cpu, CPU_OPS)
AMPX_KIT_OPS_COMPLETE(CPU_OPS);

/* The GEMM of checked arguments (GEMM's, or GEMM_FP8's with its factors folded into alpha). */
ampx_status cpu_gemm_checked(ampx_context *ctx, const ampx_gemm_args *g);
/* attention_bf16.c: whether its path runs these arguments (AVX512-BF16, bf16 operands), and
 * the two ops on it, for arguments already taken and checked. */
int cpu_attn_bf16_applies(const ampx_context *ctx, const ampx_attn_args *a, int bwd);
ampx_status cpu_attn_bf16_fwd(ampx_context *ctx, const ampx_attn_args *a);
ampx_status cpu_attn_bf16_bwd(ampx_context *ctx, const ampx_attn_args *a);

/* The pass over a gradient list that UNSCALE_CHECK, GRAD_STATS, SUM_SQUARES and AMP_PASS
 * share (amp.c), so they give the same bits alone and fused. `what` is a set of these: */
#define CPU_AMP_STATS 1u   /* GRAD_STATS of the values as read */
#define CPU_AMP_UNSCALE 2u /* g = round(g * inv_scale), in place */
#define CPU_AMP_CHECK 4u   /* per-tensor flag: a value as stored is non-finite */
#define CPU_AMP_SQ 8u      /* sum of squares of the values as stored */

typedef struct cpu_amp_out {
    float inv_scale;           /* in: CPU_AMP_UNSCALE's factor */
    ampx_dtype target;         /* in: CPU_AMP_STATS' underflow threshold ... */
    const ampx_dtype *targets; /* ... or one per tensor (may be NULL) */
    int32_t *flags;            /* (optional) CPU_AMP_CHECK: one per tensor */
    int32_t any;               /* out: OR of the flags */
    double *sq;                /* (optional) CPU_AMP_SQ: added to, chunk by chunk in order */
    float *stats;              /* (optional) CPU_AMP_STATS: GRAD_STATS' stats, counts and */
    int32_t *counts;           /* nan_counts, each optional */
    int32_t *nans;
} cpu_amp_out;

ampx_status cpu_amp_run(ampx_context *ctx, const char *op, const ampx_tensor_list *l, unsigned what,
                        cpu_amp_out *out);

/* Buffers (buffer.c) */
ampx_status cpu_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out);
void cpu_buffer_free(ampx_context *ctx, ampx_buffer *buf);
ampx_status cpu_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, const void *src,
                             uint64_t bytes);
ampx_status cpu_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset, void *dst,
                            uint64_t bytes);
ampx_status cpu_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                            const ampx_buffer *src, uint64_t src_offset, uint64_t bytes);
ampx_status cpu_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset, uint64_t bytes,
                            uint32_t pattern, uint32_t pattern_bytes);

#endif /* AMPX_PLUGIN_CPU_H */
