/* fuzz_json.c — the position-tracking JSON reader (config/json.c): any bytes parse or give
 * one "FILE:LINE:COL: message", and every value's JSON path can be written. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/json.h"

static void walk(const json_value *v, int depth) {
    char path[256];
    json_path(v, path, sizeof path);
    if (depth < 70)
        for (size_t i = 0; i < v->n_items; i++)
            walk(v->items[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char err[512];
    json_value *v = json_parse(text, "fuzz.json", ERR(err, sizeof err));
    if (v) {
        walk(v, 0);
        json_free(v);
    } else if (!err[0] || strchr(err, '\n')) {
        abort(); /* a failure is exactly one line */
    }
    free(text);
    return 0;
}
