/* schema.h — reading a JSON tree against what a key may hold, with one-line errors that
 * name the file, line, column and JSON path ("models/mlp.json:14:17: $.layers[3].units:
 * expected a positive integer"); unknown keys and enum values get a did-you-mean. */
#ifndef AMPX_CONFIG_SCHEMA_H
#define AMPX_CONFIG_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "config/json.h"

/* "file:line:col: $.path: message" reporting over one parsed file: the core's one error
 * buffer and formatter for positioned errors. */
typedef struct jctx {
    const char *file;
    ampx_err err;
    int failed;
    const char *const *sets; /* the --set flags whose values carry line -1 - index */
    int n_sets;
} jctx;

/* Applies one `--set PATH=VALUE` (the index-th) to the parsed model (overrides.c). */
int json_apply_set(json_value *root, const char *set, int index, ampx_err e);

int jerr(jctx *c, const json_value *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The place jerr names for v, "FILE:LINE:COL: $.path" (or "--set PATH=VALUE: $.path"), for a
 * message a later pass writes about a value of this file. */
void jplace(const jctx *c, const json_value *v, char *buf, size_t cap);
/* Where a value's line points, for a message naming a second place: "line N", or "--set
 * PATH=VALUE" for a value from the command line (which carries line -1 - index). */
const char *jwhere(const jctx *c, int line, char *buf, size_t cap);
int jmissing(jctx *c, const json_value *obj, const char *key);
/* Every key of obj must be in allowed (NULL-terminated); an unknown key is an error at the
 * key with a did-you-mean. Also checks obj is an object. */
int jkeys(jctx *c, const json_value *obj, const char *const *allowed);
/* Typed getters: absent and !required leaves *out as it is and returns 0. */
int jint(jctx *c, const json_value *obj, const char *key, int required, int64_t lo, int64_t hi,
         int64_t *out);
int jnum(jctx *c, const json_value *obj, const char *key, int required, double lo, double hi,
         double *out);
int jbool(jctx *c, const json_value *obj, const char *key, int *out);
int jstr(jctx *c, const json_value *obj, const char *key, int required, const char **out);
/* A string among choices (NULL-terminated): *out is its index. */
int jenum(jctx *c, const json_value *obj, const char *key, int required, const char *const *choices,
          int *out);
/* The choice nearest to word (edit distance), or NULL if none is close. */
const char *did_you_mean(const char *word, const char *const *choices);

int parse_dtype(const char *s, ampx_dtype *out);

#endif
