/* json.h — a small JSON reader that remembers where every value came from.
 *
 * Models, policies and scaler settings are JSON, and every error about them must name the
 * file, line, column and JSON path of the offending value. cJSON keeps no positions, so the
 * core reads these files with this reader: a strict RFC 8259 parser (no comments, no
 * trailing commas, duplicate keys refused) that records line and column for each value. */
#ifndef AMPX_JSON_H
#define AMPX_JSON_H

#include <stddef.h>

#include "base/error.h"

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    int line, col;         /* 1-based position of the value's first character */
    int key_line, key_col; /* position of the key, for object members */
    char *key;             /* member name inside an object, else NULL */
    char *str;             /* JSON_STRING */
    double num;            /* JSON_NUMBER */
    int boolean;           /* JSON_BOOL */
    json_value **items;    /* JSON_ARRAY elements or JSON_OBJECT members, in order */
    size_t n_items;
    json_value *parent;
    size_t index; /* position within the parent */
};

/* The cap on a JSON file's bytes unless the input cap was set (config/input.h). */
#define JSON_MAX_FILE_BYTES (16ull << 20)

/* The values of text (NUL-terminated), counted in one pass that allocates nothing: exact for
 * a document that parses. A reader that knows how many values its format holds refuses more
 * before the parser spends ~110 bytes on each. */
uint64_t json_count_values(const char *text);

/* Parses text (NUL-terminated). On failure returns NULL and writes
 * "FILE:LINE:COL: message" to err. */
json_value *json_parse(const char *text, const char *file, ampx_err e);
/* Reads and parses a file; errors as above (a missing file: "FILE: No such file ..."). */
json_value *json_parse_file(const char *path, ampx_err e);
void json_free(json_value *v);

/* The member `key` of an object, or NULL. */
json_value *json_get(const json_value *obj, const char *key);
/* Writes the JSON path of v ("$.layers[3].units") into buf. */
void json_path(const json_value *v, char *buf, size_t cap);
const char *json_type_name(json_type t);
/* Makes a message one line that shows no control characters: every byte below 0x20 and
 * 0x7F (a newline or a terminal escape in a key, a name or a field) becomes '?'. */
#define json_one_line err_one_line /* base/error.h */

#endif
