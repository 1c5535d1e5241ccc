/* ampx/kit/shell.h — part of plugin_kit.h (a plugin includes that): the op prototypes and the
 * tables every plugin's plugin.c used to spell out, generated from AMPX_OPS and the plugin's
 * one list of the ops it implements.
 *
 * The list is an X-macro of slot names (the members of ampx_backend_ops, AMPX_OPS' second
 * column) that passes its second argument through, so the kit can add the plugin's prefix:
 *
 *     #define CPU_OPS(X, p) X(p, gemm) X(p, cast) X(p, add) ... X(p, abs_max)
 *
 * An op left out of the list gets a NULL slot (unsupported; supports() must then say no). With
 * the plugin's prefix p, whose op functions are p_<slot> (cpu_gemm, cpu_cast, ...):
 *   AMPX_KIT_OP_PROTOTYPES(p, LIST)   declares every listed op, with the args struct of its
 *                                     AMPX_OPS line: ampx_status p_gemm(ampx_context *ctx,
 *                                     const ampx_gemm_args *args); ... (in the plugin's header)
 *   AMPX_KIT_OPS_COMPLETE(LIST)       fails the build unless LIST has every op of AMPX_OPS
 *                                     (a backend that must implement them all: a new op in
 *                                     AMPX_OPS then stops its build until it is added)
 *   AMPX_KIT_TIMED_OPS(p, LIST)       defines p_timed_<slot> for every listed op: p_<slot>, and
 *                                     while the plugin profiles (ABI 1.2) its span recorded
 *                                     through the plugin's own two functions
 *                                       int  p_prof_op_start(ampx_context *ctx, uint64_t *mark)
 *                                       void p_prof_op_end(ampx_context *ctx, uint64_t mark)
 *                                     start returns 0 when this op is not recorded (no context,
 *                                     not profiling, capacity reached), else 1 with a mark of
 *                                     its start; end runs after the op returned AMPX_OK
 *   AMPX_KIT_OP_TABLE(name, f, LIST)  a static const ampx_backend_ops `name` whose listed
 *                                     slots are f_<slot> (f: p, or p_timed), the others NULL
 *   AMPX_KIT_IFACE(p, NAME, VERSION, OPS)
 *                                     the designated initializers of ampx_backend_iface's
 *                                     fields up to .ops, from p_probe, p_create, p_destroy,
 *                                     p_device_info, p_supports, p_buffer_alloc, _free,
 *                                     _write, _read, _copy, _fill and p_synchronize; followed
 *                                     (optionally) by AMPX_KIT_IFACE_PROFILE(p) (ABI 1.2:
 *                                     p_profile_begin, p_profile_end) and
 *                                     AMPX_KIT_IFACE_NATIVE(p) (ABI 1.3: p_buffer_native,
 *                                     p_stream_native)
 *   AMPX_KIT_ENTRY(iface)             the one exported symbol, ampx_backend_entry, giving
 *                                     &iface to a host of this ABI major and NULL to others
 * So a plugin.c ends with
 *
 *     AMPX_KIT_TIMED_OPS(cpu, CPU_OPS)
 *     AMPX_KIT_OP_TABLE(cpu_ops, cpu_timed, CPU_OPS);
 *     static const ampx_backend_iface cpu_iface = {
 *         AMPX_KIT_IFACE(cpu, "cpu", CPU_PLUGIN_VERSION, cpu_ops), AMPX_KIT_IFACE_PROFILE(cpu),
 *         AMPX_KIT_IFACE_NATIVE(cpu)};
 *     AMPX_KIT_ENTRY(cpu_iface)
 *
 * The wrappers and tables are what the plugins wrote by hand before: the op functions are
 * called as they were, and the tables' layout is backend.h's.
 */
#ifndef AMPX_KIT_SHELL_H
#define AMPX_KIT_SHELL_H

#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// Each op's args struct by its slot name: ampx_kit_args_gemm is ampx_gemm_args, ...

#define AMPX_KIT_ARGS_TYPEDEF_(index, slot, OP, args, n_dtypes, f32)                               \
    typedef args ampx_kit_args_##slot;
AMPX_OPS(AMPX_KIT_ARGS_TYPEDEF_)
#undef AMPX_KIT_ARGS_TYPEDEF_

// ---------------------------------------------------------------------------------------
// Prototypes, completeness

#define AMPX_KIT_OP_PROTO_(p, slot)                                                                \
    ampx_status p##_##slot(ampx_context *ctx, const ampx_kit_args_##slot *args);
#define AMPX_KIT_OP_PROTOTYPES(p, LIST) LIST(AMPX_KIT_OP_PROTO_, p)

#define AMPX_KIT_OP_ONE_(p, slot) +1
#define AMPX_KIT_OP_ANY_(index, slot, OP, args, n_dtypes, f32) +1
/* As many entries as AMPX_OPS has lines. With the op table built from the same list (its
 * designated initializers reject a name that is no slot, and -Wextra warns of one given
 * twice), that is every op once. Used as a declaration: AMPX_KIT_OPS_COMPLETE(CPU_OPS); */
#define AMPX_KIT_OPS_COMPLETE(LIST)                                                                \
    AMPX_STATIC_ASSERT((0 LIST(AMPX_KIT_OP_ONE_, _)) == (0 AMPX_OPS(AMPX_KIT_OP_ANY_)),            \
                       #LIST " must list every op of AMPX_OPS")

// ---------------------------------------------------------------------------------------
// Timed wrappers

#define AMPX_KIT_TIMED_OP_(p, slot)                                                                \
    static ampx_status p##_timed_##slot(ampx_context *ctx, const ampx_kit_args_##slot *args) {     \
        uint64_t mark = 0;                                                                         \
        if (!p##_prof_op_start(ctx, &mark)) return p##_##slot(ctx, args);                          \
        ampx_status st = p##_##slot(ctx, args);                                                    \
        if (st == AMPX_OK) p##_prof_op_end(ctx, mark);                                             \
        return st;                                                                                 \
    }
#define AMPX_KIT_TIMED_OPS(p, LIST) LIST(AMPX_KIT_TIMED_OP_, p)

// ---------------------------------------------------------------------------------------
// The op table, the backend table, the entry point

#define AMPX_KIT_OP_SLOT_(f, slot) .slot = f##_##slot,
#define AMPX_KIT_OP_TABLE(name, f, LIST)                                                           \
    static const ampx_backend_ops name = {.size = sizeof(ampx_backend_ops),                        \
                                          LIST(AMPX_KIT_OP_SLOT_, f)}

// clang-format off
#define AMPX_KIT_IFACE(p, NAME, VERSION, OPS)                                                      \
    .size         = sizeof(ampx_backend_iface),                                                    \
    .abi_major    = AMPX_ABI_MAJOR,                                                                \
    .abi_minor    = AMPX_ABI_MINOR,                                                                \
    .name         = NAME,                                                                          \
    .version      = VERSION,                                                                       \
    .probe        = p##_probe,                                                                     \
    .create       = p##_create,                                                                    \
    .destroy      = p##_destroy,                                                                   \
    .device_info  = p##_device_info,                                                               \
    .supports     = p##_supports,                                                                  \
    .buffer_alloc = p##_buffer_alloc,                                                              \
    .buffer_free  = p##_buffer_free,                                                               \
    .buffer_write = p##_buffer_write,                                                              \
    .buffer_read  = p##_buffer_read,                                                               \
    .buffer_copy  = p##_buffer_copy,                                                               \
    .buffer_fill  = p##_buffer_fill,                                                               \
    .synchronize  = p##_synchronize,                                                               \
    .ops          = &(OPS)
#define AMPX_KIT_IFACE_PROFILE(p) .profile_begin = p##_profile_begin, .profile_end = p##_profile_end
#define AMPX_KIT_IFACE_NATIVE(p) .buffer_native = p##_buffer_native, .stream_native = p##_stream_native
// clang-format on

/* Minors are append-only: a newer host reads what this table has, an older one what it knows. */
#define AMPX_KIT_ENTRY(iface)                                                                      \
    AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,       \
                                                                    uint32_t host_abi_minor);      \
    AMPX_PLUGIN_EXPORT const ampx_backend_iface *ampx_backend_entry(uint32_t host_abi_major,       \
                                                                    uint32_t host_abi_minor) {     \
        (void)host_abi_minor;                                                                      \
        if (host_abi_major != AMPX_ABI_MAJOR) return NULL;                                         \
        return &(iface);                                                                           \
    }

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_SHELL_H */
