/* safetensors.h — the safetensors format as checkpoints and exports use it (safetensors.c):
 * an 8-byte little-endian header length, a JSON header (dtype, shape, data_offsets per
 * tensor, and __metadata__ with string values), then the raw little-endian data.
 *
 * Reading checks a header the way the reference reader does (every entry a tensor with a
 * known dtype, integer shape and offsets whose span is its size, the spans tiling the data
 * section exactly). Writing goes into a temporary file beside the target (st_create_temp),
 * renamed over it once complete and synced. */
#ifndef AMPX_TRAIN_SAFETENSORS_H
#define AMPX_TRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ampx/ampx.h"
#include "base/error.h"
#include "config/json.h"

/* The largest safetensors header accepted: far more than a model's tensors need. */
#define CK_MAX_HEADER_BYTES (16u << 20)

/* A file being read, for messages. */
typedef struct ck_reader {
    const char *name; /* the file, for messages */
    ampx_err err;     /* where its messages go */
} ck_reader;

/* "NAME: " and the message into r's buffer; returns AMPX_ERR_INVALID. */
ampx_status st_bad(ck_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decimal integer string in [lo, hi], nothing else (no sign, blanks or leading zeros). */
int parse_dec(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A __metadata__ string field, or NULL. */
const char *meta_str(const json_value *meta, const char *key);
/* The header of a safetensors file in memory, parsed and checked; *root must be
 * json_free'd. */
ampx_status st_parse(ck_reader *r, const unsigned char *file, size_t len, json_value **root,
                     const unsigned char **data, uint64_t *data_len);
/* Reads a whole safetensors file and checks its header; *file must be freed. */
ampx_status st_read(const char *path, unsigned char **file, json_value **root,
                    const unsigned char **data, uint64_t *data_len, ampx_err e);
/* Opens a safetensors file and checks its header alone (the tensors stay on disk: read each
 * with st_read_span at *data_at); *f must be fclose'd, *root json_free'd. */
ampx_status st_open(const char *path, FILE **f, json_value **root, uint64_t *data_at,
                    uint64_t *data_len, ampx_err e);
/* st_open with a size limit of its own instead of input_max_bytes() (a checkpoint: the
 * model's state and a header bound it). */
ampx_status st_open_max(const char *path, uint64_t max_bytes, FILE **f, json_value **root,
                        uint64_t *data_at, uint64_t *data_len, ampx_err e);
/* Bytes [begin, end) of the data section into buf; 0, or -1 on a read error. */
int st_read_span(FILE *f, uint64_t data_at, uint64_t begin, uint64_t end, void *buf);
/* An entry's dtype, shape and byte span (st_parse checked them). */
void st_entry(const json_value *e, const char **dtype, uint64_t *dims, int *ndim, uint64_t *begin,
              uint64_t *end);
/* Element i of F32, BF16 or F16 data p, as f32. */
float st_value(const char *dtype, const unsigned char *p, uint64_t i);

/* A growing string (a header being written); oom once an allocation failed. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as the inside of a JSON string. */
void json_escape(const char *s, char *out, size_t cap);
/* Creates the temporary file beside path (O_EXCL, mode 0666 & ~umask): its fd, or -1 with
 * the message in err. */
int st_create_temp(const char *path, char *tmp, size_t cap, ampx_err e);
/* fsyncs path's folder, so that a rename into it is durable. */
ampx_status st_sync_folder(const char *path, ampx_err e);

/* The step a checkpoint's __metadata__ names; -1 when the file has none, cannot be read or is
 * not an ampx checkpoint (data-parallel ranks compare it before they start). */
int64_t st_file_step(const char *path);

#endif
