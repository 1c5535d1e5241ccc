/* ampx/kit/base.h — part of plugin_kit.h (a plugin includes that): the kit and its log, an
 * op's args copied by their size, the dtype table supports() answers from, and the checks of
 * tensors, the scalars block and tensor lists that every op's take (kit/take_*.h) builds on.
 */
#ifndef AMPX_KIT_BASE_H
#define AMPX_KIT_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../dtype.h"
#include "../kernel_math.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AMPX_KIT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMPX_KIT_PRINTF(f, a)
#endif

// ---------------------------------------------------------------------------------------
// The kit and its log

/* The size in bytes the host asked for when it allocated buf (the plugin's own record). */
typedef uint64_t (*ampx_kit_buffer_bytes_fn)(const ampx_buffer *buf);

typedef struct ampx_kit {
    ampx_log_fn log;                       /* the host's callback; NULL drops messages */
    void *log_user;                        /* passed back to log */
    const char *name;                      /* the plugin's short name: "cpu", "example" */
    ampx_kit_buffer_bytes_fn buffer_bytes; /* reads a buffer's size */
} ampx_kit;

/* The kit of a context whose struct has a member `kit`, or NULL for a NULL context (then
 * every check fails with AMPX_ERR_INVALID and logs nothing: there is nowhere to log). */
#define AMPX_KIT(ctx) ((ctx) ? &(ctx)->kit : (const ampx_kit *)0)

/* Returns the status of expr when it is not AMPX_OK. */
#define AMPX_KIT_TRY(expr)                                                                         \
    do {                                                                                           \
        ampx_status ampx_kit_st_ = (expr);                                                         \
        if (ampx_kit_st_ != AMPX_OK) return ampx_kit_st_;                                          \
    } while (0)

static inline void ampx_kit_vlog(const ampx_kit *kit, ampx_log_level level, const char *fmt,
                                 va_list ap) {
    if (!kit || !kit->log) return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    kit->log(kit->log_user, level, msg);
}

static inline void ampx_kit_log(const ampx_kit *kit, ampx_log_level level, const char *fmt, ...)
    AMPX_KIT_PRINTF(3, 4);
static inline void ampx_kit_log(const ampx_kit *kit, ampx_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampx_kit_vlog(kit, level, fmt, ap);
    va_end(ap);
}

/* Logs one ERROR line and returns st. */
static inline ampx_status ampx_kit_fail(const ampx_kit *kit, ampx_status st, const char *fmt, ...)
    AMPX_KIT_PRINTF(3, 4);
static inline ampx_status ampx_kit_fail(const ampx_kit *kit, ampx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampx_kit_vlog(kit, AMPX_LOG_ERROR, fmt, ap);
    va_end(ap);
    return st;
}

/* a * b with overflow detection: 0 and *out, or -1 on overflow. */
static inline int ampx_kit_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

// ---------------------------------------------------------------------------------------
// Args by size, dtypes, tensors

/* Copies an args struct into a zeroed local of the size this plugin was built with, reading
 * only the first size bytes the caller states (its first field). */
static inline ampx_status ampx_kit_take(const ampx_kit *kit, const char *opname, const void *args,
                                        void *local, size_t local_size) {
    if (!kit) return AMPX_ERR_INVALID; /* nowhere to log */
    if (!args) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args is NULL", opname);
    uint32_t size;
    memcpy(&size, args, sizeof size);
    if (size < sizeof(uint32_t))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: args size %u too small", opname, size);
    memset(local, 0, local_size);
    memcpy(local, args, size < local_size ? size : local_size);
    return AMPX_OK;
}

static inline int ampx_kit_all_float(const ampx_dtype *dt, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!ampx_dtype_is_float(dt[i])) return 0;
    return 1;
}

/* The dtypes every op of backend.h accepts, in the order of its heading: n_dtypes of them
 * (AMPX_OPS), each a float dtype, f32 where the op's f32 bit says so. A backend that takes
 * all of them answers supports() with this; one that takes fewer narrows it and refuses the
 * rest in its op (ampx_kit_check_dtypes with its own table). */
static inline int ampx_kit_dtypes_ok(uint32_t op, const ampx_dtype *dt, uint32_t n) {
#define AMPX_KIT_HEADING_(index, slot, OP, args, n_dtypes, f32) {n_dtypes, f32},
    static const struct { uint8_t n, f32; } heading[AMPX_OP_COUNT] = {AMPX_OPS(AMPX_KIT_HEADING_)};
#undef AMPX_KIT_HEADING_
    if ((n > 0 && !dt) || op >= AMPX_OP_COUNT || n != heading[op].n) return 0;
    if (op == AMPX_OP_FP8_QUANTIZE) /* one side fp8, the other a float dtype */
        return (ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_float(dt[1])) ||
               (ampx_dtype_is_float(dt[0]) && ampx_dtype_is_fp8(dt[1]));
    if (op == AMPX_OP_GEMM_FP8) /* fp8 operands, a float C */
        return ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_fp8(dt[1]) && ampx_dtype_is_float(dt[2]);
    for (uint32_t i = 0; i < n; i++)
        if ((heading[op].f32 >> i & 1) ? dt[i] != AMPX_F32 : !ampx_dtype_is_float(dt[i])) return 0;
    return 1;
}

/* supports() for a backend that implements every op with every dtype of ampx_kit_dtypes_ok. */
static inline int ampx_kit_supports(uint32_t op, const ampx_dtype *dt, uint32_t n,
                                    uint32_t shape_class) {
    if (op >= AMPX_OP_COUNT || shape_class != AMPX_SHAPE_ANY) return 0;
    return ampx_kit_dtypes_ok(op, dt, n);
}

/* The dtypes of a call against ampx_kit_dtypes_ok: UNSUPPORTED with "<op>: unsupported
 * dtypes {bf16, f32}" if not. */
static inline ampx_status ampx_kit_check_dtypes(const ampx_kit *kit, const char *opname,
                                                uint32_t op, const ampx_dtype *dt, uint32_t n) {
    if (ampx_kit_dtypes_ok(op, dt, n)) return AMPX_OK;
    char list[128] = "";
    for (uint32_t i = 0; i < n && strlen(list) + 12 < sizeof list; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, ampx_dtype_name(dt[i]));
    }
    return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED, "%s: unsupported dtypes {%s}", opname, list);
}

static inline ampx_status ampx_kit_check_dtypes2(const ampx_kit *kit, const char *opname,
                                                 uint32_t op, ampx_dtype a, ampx_dtype b) {
    ampx_dtype dt[2] = {a, b};
    return ampx_kit_check_dtypes(kit, opname, op, dt, 2);
}

static inline ampx_status ampx_kit_check_dtypes3(const ampx_kit *kit, const char *opname,
                                                 uint32_t op, ampx_dtype a, ampx_dtype b,
                                                 ampx_dtype c) {
    ampx_dtype dt[3] = {a, b, c};
    return ampx_kit_check_dtypes(kit, opname, op, dt, 3);
}

/* t names n_elems elements of its dtype inside its buffer: buf not NULL, a known dtype, the
 * offset a multiple of the dtype size, offset + n_elems * size <= the buffer's size. With
 * `optional`, a NULL buf is fine. */
static inline ampx_status ampx_kit_check_tensor(const ampx_kit *kit, const char *opname,
                                                const char *name, const ampx_tensor *t,
                                                uint64_t n_elems, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is a null buffer", opname, name);
    }
    size_t es = ampx_dtype_size(t->dtype);
    if (es == 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s has unknown dtype %d", opname, name,
                             (int)t->dtype);
    if (t->offset % es != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s offset %llu is not a multiple of the %s size %zu", opname,
                             name, (unsigned long long)t->offset, ampx_dtype_name(t->dtype), es);
    uint64_t bytes, end, have = kit->buffer_bytes(t->buf);
    if (ampx_kit_mul_u64(n_elems, es, &bytes) || __builtin_add_overflow(t->offset, bytes, &end) ||
        end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s of %llu %s elements at offset %llu overruns its buffer of "
                             "%llu bytes",
                             opname, name, (unsigned long long)n_elems, ampx_dtype_name(t->dtype),
                             (unsigned long long)t->offset, (unsigned long long)have);
    return AMPX_OK;
}

/* As ampx_kit_check_tensor, and the dtype must be `want` (f32 statistics, i32 labels). */
static inline ampx_status ampx_kit_check_tensor_dt(const ampx_kit *kit, const char *opname,
                                                   const char *name, const ampx_tensor *t,
                                                   ampx_dtype want, uint64_t n_elems,
                                                   int optional) {
    if (t->buf && t->dtype != want)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s must be %s, not %s", opname, name,
                             ampx_dtype_name(want), ampx_dtype_name(t->dtype));
    return ampx_kit_check_tensor(kit, opname, name, t, n_elems, optional);
}

/* The scalars block: 4-byte aligned, a whole ampx_scalars inside the buffer. */
static inline ampx_status ampx_kit_check_scalars(const ampx_kit *kit, const char *opname,
                                                 const ampx_tensor *t, int optional) {
    if (!t->buf) {
        if (optional) return AMPX_OK;
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: scalars is a null buffer", opname);
    }
    uint64_t end, have = kit->buffer_bytes(t->buf);
    if (t->offset % 4 != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: scalars offset %llu is not 4-byte aligned",
                             opname, (unsigned long long)t->offset);
    if (__builtin_add_overflow(t->offset, (uint64_t)sizeof(ampx_scalars), &end) || end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: scalars block (%zu bytes) at offset %llu overruns its buffer "
                             "of %llu bytes",
                             opname, sizeof(ampx_scalars), (unsigned long long)t->offset,
                             (unsigned long long)have);
    return AMPX_OK;
}

/* A tensor list: tensors and n_elems non-NULL when count > 0, each tensor in bounds with a
 * float dtype (UNSUPPORTED for another). */
static inline ampx_status ampx_kit_check_list(const ampx_kit *kit, const char *opname,
                                              const char *name, const ampx_tensor_list *l) {
    if (l->count == 0) return AMPX_OK;
    if (!l->tensors || !l->n_elems)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s has %u tensors but a NULL %s", opname,
                             name, l->count, l->tensors ? "n_elems" : "tensors array");
    for (uint32_t t = 0; t < l->count; t++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%u]", name, t);
        if (l->tensors[t].buf && !ampx_dtype_is_float(l->tensors[t].dtype))
            return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED, "%s: %s has unsupported dtype %s",
                                 opname, what, ampx_dtype_name(l->tensors[t].dtype));
        AMPX_KIT_TRY(ampx_kit_check_tensor(kit, opname, what, &l->tensors[t], l->n_elems[t], 0));
    }
    return AMPX_OK;
}

/* rows x cols without overflow: "<op>: rows x cols overflows". */
static inline ampx_status ampx_kit_rows_cols(const ampx_kit *kit, const char *opname, uint64_t rows,
                                             uint64_t cols, uint64_t *n) {
    if (ampx_kit_mul_u64(rows, cols, n))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: rows x cols overflows", opname);
    return AMPX_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_BASE_H */
