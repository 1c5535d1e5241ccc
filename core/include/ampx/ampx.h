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
#include <stdio.h>

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
/* Non-zero if GEMM with dtypes {A, B, C} takes the ABI 1.5 epilogue (bias, act, pre_act,
 * bias_grad of ampx_gemm_args): the plugin was built for minor >= 5 and answers
 * supports(GEMM, dtypes, 3, AMPX_SHAPE_GEMM_EPILOGUE). A plugin of an older minor never is
 * asked (it may answer any shape class as ANY) and is never handed the epilogue. */
AMPX_API int ampx_backend_gemm_epilogue(const ampx_backend *be, const ampx_dtype *dtypes);
/* An ordered backend list (a spec "a,b" or "./libvendor.so,cpu"): its members in order, each
 * a backend of its own; a trainer places each op on the first member that takes it. A single
 * backend counts 1 and is its own member 0. ampx_backend_member is NULL past the count. On a
 * list, op_slot, supports and op_mask answer for any member; the table and the context are
 * the first member's. */
AMPX_API int ampx_backend_count(const ampx_backend *be);
AMPX_API ampx_backend *ampx_backend_member(ampx_backend *be, int i);
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

/* Opens path for reading under the input rules: a regular file only (a FIFO, a device such as
 * /dev/zero or a folder is refused without blocking), of at most max_bytes (0: the input cap in
 * force, as ampx_set_max_input_bytes says); its size in *size. NULL and "PATH: reason" in err
 * on failure. */
AMPX_API FILE *ampx_input_open(const char *path, uint64_t max_bytes, uint64_t *size, char *err,
                               size_t err_cap);
/* The whole of such a file, NUL-terminated (free() it); its length in *len. */
AMPX_API char *ampx_input_read(const char *path, uint64_t max_bytes, size_t *len, char *err,
                               size_t err_cap);

// ---------------------------------------------------------------------------------------
// Outputs: written whole or not at all, never over an input (docs/RELIABILITY.md).

/* A file being written: a temporary file beside the target, renamed over it by
 * ampx_output_commit once complete (fsynced, and the folder fsynced after the rename). A
 * target that is a pipe or a device (/dev/stdout, /dev/null) is written in place. */
typedef struct ampx_output ampx_output;
AMPX_API ampx_status ampx_output_open(const char *path, ampx_output **out, char *err,
                                      size_t err_cap);
AMPX_API FILE *ampx_output_stream(ampx_output *o);
/* Flushes, fsyncs and renames into place; frees o. On failure the target is as it was and
 * the temporary file is gone. */
AMPX_API ampx_status ampx_output_commit(ampx_output *o, char *err, size_t err_cap);
/* Drops the temporary file, leaving the target as it was; frees o (NULL: nothing). */
AMPX_API void ampx_output_discard(ampx_output *o);

/* One file of a command and its role in messages ("-o", "--checkpoint", "the model file"). */
typedef struct ampx_file_role {
    const char *path; /* NULL: not given, skipped */
    const char *what;
} ampx_file_role;
/* Refuses, with one line naming both, an output that is the same file as an input or as
 * another output: the same device and inode after resolving links, or for a file not there
 * yet the same folder and name. */
AMPX_API ampx_status ampx_check_outputs(const ampx_file_role *outputs, int n_outputs,
                                        const ampx_file_role *inputs, int n_inputs, char *err,
                                        size_t err_cap);

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

// ---------------------------------------------------------------------------------------
// Tokenizing text: a byte-level BPE (GPT-2's kind), docs/LANGUAGE_MODELS.md. Token ids are
// 0..255 for the bytes, 256 + i for merge i, and the end-of-text token last. A tokenizer is
// not safe to use from two threads at once (the encoder keeps a cache of encoded chunks).

typedef struct ampx_tokenizer ampx_tokenizer;

/* Token ids that grow as they are appended (free(ids) when done). */
typedef struct ampx_token_buf {
    uint32_t *ids;
    size_t n, cap;
} ampx_token_buf;

/* What training did, for the user. */
typedef struct ampx_tokenizer_stats {
    uint64_t chunks;        /* pre-split chunks in the texts */
    uint64_t unique_chunks; /* distinct ones: the merges are counted over these, by count */
    uint32_t merges;        /* merges learned: vocab_size - 257, or fewer when no pair is left */
} ampx_tokenizer_stats;

/* Learns vocab_size - 257 merges (vocab_size in [257, 65536]) from n texts: each pre-split
 * as GPT-2 does, the pairs counted over the distinct chunks weighted by their counts; each
 * merge takes the most frequent pair, ties going to the smallest (left id, right id), passing
 * over a pair whose token would be longer than 255 bytes (llm.c's tokenizer file's limit). Stops
 * early when no pair is left (stats->merges says so; the vocabulary is then smaller).
 * 0, or -1 with one line in err. stats may be NULL. */
AMPX_API int ampx_tokenizer_train(const unsigned char *const *texts, const size_t *lens, size_t n,
                                  uint32_t vocab_size, ampx_tokenizer **out,
                                  ampx_tokenizer_stats *stats, char *err, size_t err_cap);
/* Reads ampx's JSON tokenizer file or llm.c's tokenizer file (magic 20240328: it decodes
 * only). Every field is checked: "FILE:LINE:COL: $.merges[3][1]: ..." for JSON, "FILE: the
 * header's FIELD ..." for llm.c's. 0, or -1 with one line in err. */
AMPX_API int ampx_tokenizer_load(const char *path, ampx_tokenizer **out, char *err, size_t err_cap);
/* Writes ampx's JSON tokenizer file (ampx_tokenizer_save) or llm.c's tokenizer file
 * (version 2, for decoding; refused when a token is over 255 bytes). 0, or -1 with one line. */
AMPX_API int ampx_tokenizer_save(const ampx_tokenizer *t, const char *path, char *err,
                                 size_t err_cap);
AMPX_API int ampx_tokenizer_save_llmc(const ampx_tokenizer *t, const char *path, char *err,
                                      size_t err_cap);
AMPX_API void ampx_tokenizer_free(ampx_tokenizer *t); /* NULL is a no-op */

AMPX_API uint32_t ampx_tokenizer_vocab(const ampx_tokenizer *t);
AMPX_API uint32_t ampx_tokenizer_eot(const ampx_tokenizer *t);
/* Merges (0 for one read from llm.c's file, which cannot encode); merge i's pair into a, b. */
AMPX_API uint32_t ampx_tokenizer_n_merges(const ampx_tokenizer *t);
AMPX_API int ampx_tokenizer_can_encode(const ampx_tokenizer *t);
AMPX_API void ampx_tokenizer_merge(const ampx_tokenizer *t, uint32_t i, uint32_t *a, uint32_t *b);
/* The bytes of token id (NULL when id is outside the vocabulary). */
AMPX_API const unsigned char *ampx_tokenizer_token(const ampx_tokenizer *t, uint32_t id,
                                                   size_t *len);
/* Appends the ids of text (any bytes: invalid UTF-8 and NUL included) to out; the end-of-text
 * token is never produced from text. 0, or -1 with one line in err (out of memory, a
 * decode-only tokenizer). */
AMPX_API int ampx_tokenizer_encode(ampx_tokenizer *t, const unsigned char *text, size_t len,
                                   ampx_token_buf *out, char *err, size_t err_cap);
/* GPT-2's pre-split: the end of the chunk that starts at byte i < n of s. */
AMPX_API size_t ampx_pretokenize_next(const unsigned char *s, size_t n, size_t i);
/* Writes ids as llm.c's token file (header of 256 int32: 20240520, 1, count; then uint16
 * tokens); ids above 65535 are refused. 0, or -1 with one line in err. */
/* Reads llm.c's token file, every token below vocab (checked as training checks it). 0, or -1
 * with one line in err; free(*ids) when done. */
AMPX_API int ampx_token_file_read(const char *path, uint32_t vocab, uint16_t **ids, size_t *n,
                                  char *err, size_t err_cap);
AMPX_API int ampx_token_file_write(const char *path, const uint32_t *ids, size_t n, char *err,
                                   size_t err_cap);

#ifdef __cplusplus
}
#endif
#endif /* AMPX_AMPX_H */
