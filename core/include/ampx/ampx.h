/* ampx/ampx.h — the public API of libampx.
 *
 * libampx loads backend plugins (backend.h is their ABI), checks them against its own
 * double-precision reference (the conformance suite); ampx/train.h builds and trains models
 * on top of it. The library never prints and never exits: every function that can fail
 * returns an ampx_status and writes a one-line message into a caller-supplied buffer or
 * the backend's last-error string.
 */
#ifndef AMPX_AMPX_H
#define AMPX_AMPX_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPX_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define AMPX_API __declspec(dllexport)
#else
#define AMPX_API __attribute__((visibility("default")))
#endif

AMPX_API const char *ampx_status_name(ampx_status st); /* "AMPX_ERR_INVALID" ... */
AMPX_API const char *ampx_op_name(uint32_t op); /* "gemm", "softmax_xent" ...; NULL if unknown */
AMPX_API int ampx_op_parse(const char *name, uint32_t *op); /* 0 on success */
/* How many dtypes supports() takes for an op (the order is in the op's heading in backend.h). */
AMPX_API uint32_t ampx_op_n_dtypes(uint32_t op);

// ---------------------------------------------------------------------------------------
// Loading backends

typedef struct ampx_backend ampx_backend;

/* Opens a backend. `spec` is either a name ("cpu" -> libampx-cpu.so, searched on
 * $AMPX_PLUGIN_PATH, then beside the running executable's build or install tree), or a
 * path containing a '/' ("./libvendor.so"), loaded as given. Options are "key=value"
 * strings passed to the plugin; AMPX_BACKEND_OPTS (comma-separated) is prepended, where an
 * entry NAME.key=value goes only to the backend named NAME.
 * On failure returns non-OK and writes one line naming the file and the reason to err. */
AMPX_API ampx_status ampx_backend_open(const char *spec, const char *const *options,
                                       uint32_t n_options, ampx_backend **out, char *err,
                                       size_t err_cap);
/* Synchronizes, destroys the context and closes the plugin. NULL is a no-op. */
AMPX_API void ampx_backend_close(ampx_backend *be);

AMPX_API const ampx_backend_iface *ampx_backend_iface_of(const ampx_backend *be);
AMPX_API ampx_context *ampx_backend_context(const ampx_backend *be);
AMPX_API const char *ampx_backend_path(const ampx_backend *be); /* the file loaded */
/* The last ERROR line the plugin logged (empty if none). */
AMPX_API const char *ampx_backend_last_error(const ampx_backend *be);
/* Non-zero if the op slot exists and supports() accepts the dtypes. */
AMPX_API int ampx_backend_supports(const ampx_backend *be, uint32_t op, const ampx_dtype *dtypes,
                                   uint32_t n_dtypes);
/* The op slot as a generic pointer (NULL if absent or beyond the plugin's table). */
AMPX_API void *ampx_backend_op_slot(const ampx_backend *be, uint32_t op);
/* Bit i set when op i has a slot and supports() takes it in f32: what the model loader
 * (ampx_model_load_for) needs to know to choose between a layer's fused and composite form. */
AMPX_API uint64_t ampx_backend_op_mask(const ampx_backend *be);

/* Discovery: every libampx-*.so on the search path, probed (not created). */
typedef struct ampx_plugin_info {
    char name[64]; /* from the file name: libampx-NAME.so */
    char path[1024];
    int loadable;  /* dlopen and entry symbol and ABI major all fine */
    int available; /* probe said usable */
    uint32_t abi_major, abi_minor;
    char reason[512]; /* why not loadable / not available */
} ampx_plugin_info;

/* Fills up to cap entries (sorted by name, first hit per name wins); returns the count found
 * (may exceed cap). */
AMPX_API size_t ampx_plugin_list(ampx_plugin_info *out, size_t cap);

/* The directories searched for plugins, ':'-joined, into buf. */
AMPX_API void ampx_plugin_search_path(char *buf, size_t cap);

/* device_info() through the loader: the strings come back NUL-terminated whatever the plugin
 * wrote; "(no device info)" when the plugin has none or fails. */
AMPX_API ampx_status ampx_backend_device_info(const ampx_backend *be, ampx_device_info *info);

/* The largest file ampx reads (models, policies, data, checkpoints), in bytes. 0 restores the
 * default (1 GiB, 16 MiB for JSON files; $AMPX_MAX_INPUT_BYTES when set). Larger files are refused
 * with a message that names this limit. */
AMPX_API void ampx_set_max_input_bytes(uint64_t bytes);

// ---------------------------------------------------------------------------------------
// Conformance: every supported (op, dtypes) against the double-precision reference.

typedef enum ampx_conf_verdict {
    AMPX_CONF_PASS        = 0,
    AMPX_CONF_FAIL        = 1,
    AMPX_CONF_UNSUPPORTED = 2, /* supports() said no: not a failure */
} ampx_conf_verdict;

typedef struct ampx_conf_case {
    uint32_t op;
    ampx_dtype dtypes[4];
    uint32_t n_dtypes;
    char shape[128]; /* human-readable case, e.g. "m=17 n=33 k=129 tA" */
    ampx_conf_verdict verdict;
    double err;        /* measured error, in the measure below */
    double tol;        /* the tolerance it was held to (0 with an exact comparison) */
    char message[512]; /* why it failed: the element, its value and the expected one */
    int32_t index;     /* the case's index among the variants of its (op, dtypes) */
    int32_t probe;     /* 1: the dtypes are unsupported and the case checks that calling the op
                          fails cleanly; 2: dtypes the ABI forbids, which must be refused */
    char measure[48];  /* what err measures: "normwise relative", "elementwise (its own bound)",
                          "exact" (any difference fails) */
} ampx_conf_case;

typedef void (*ampx_conf_report_fn)(void *user, const ampx_conf_case *c);

typedef struct ampx_conf_options {
    uint64_t seed; /* random data seed; 0 picks a fixed default */
    int32_t op;    /* -1: all ops; else only this op */
    int quick;     /* non-zero: fewer and smaller shapes */
} ampx_conf_options;

typedef struct ampx_conf_summary {
    uint32_t passed, failed, unsupported; /* cases; a refused-dtypes probe passes */
    uint32_t ops_run;     /* ops with at least one supported dtype combination run */
    uint32_t ops_passing; /* of those, ops whose supported cases all passed */
    /* The minimum set (every op models/mlp.json needs, in f32; docs/CONFORMANCE.md), checked
     * when the run covers every op: how many of it the backend does not support, and which. */
    uint32_t required_missing;
    char missing[512];
} ampx_conf_summary;

/* 1 when a run passes: it ran, no case failed, at least one op ran its supported cases and
 * passed them, and (for a run of every op) nothing of the minimum set is missing. */
AMPX_API int ampx_conformance_passed(ampx_status run_status, const ampx_conf_summary *s,
                                     int all_ops);

/* Runs the suite; calls report for every case. Returns AMPX_OK when it ran (failures are
 * counted in summary), or AMPX_ERR_DEVICE when an op or synchronize reported a device fault:
 * the run stops there, since nothing the device computes afterwards can be trusted. */
AMPX_API ampx_status ampx_conformance_run(ampx_backend *be, const ampx_conf_options *opt,
                                          ampx_conf_report_fn report, void *user,
                                          ampx_conf_summary *summary);

#ifdef __cplusplus
}
#endif
#endif /* AMPX_AMPX_H */
