/* fuzz_set.c — the `--set PATH=VALUE` override parser (config/overrides.c) and the model
 * loader behind it: the input is up to four --set flags, one a line, applied to
 * tests/fuzz/tiny.json. Refused with one line, or loaded; a path with an empty key ("a..b",
 * ".a", "a.") is always refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/train.h"

enum { MAX_SETS = 4 };

/* Whether the flag's path (before its first '=') has an empty key. */
static int empty_key(const char *set) {
    const char *eq = strchr(set, '=');
    size_t n       = eq ? (size_t)(eq - set) : strlen(set);
    if (n == 0) return 0; /* no path at all: refused for another reason */
    if (set[0] == '.' || set[n - 1] == '.') return 1;
    for (size_t i = 0; i + 1 < n; i++)
        if (set[i] == '.' && set[i + 1] == '.') return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    const char *sets[MAX_SETS];
    int n = 0, must_fail = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < MAX_SETS;
         line = strtok_r(NULL, "\n", &save)) {
        sets[n++] = line;
        must_fail |= strlen(line) < 256 && empty_key(line);
    }
    char err[1024] = "";
    ampx_model *m  = NULL;
    ampx_status st = ampx_model_load_for(AMPX_SOURCE_DIR "/tests/fuzz/tiny.json", NULL, sets, n,
                                         AMPX_ALL_OPS, &m, err, sizeof err);
    if (st == AMPX_OK) {
        if (must_fail) abort(); /* "optimizer..lr" read as "optimizer.lr" */
        ampx_model_free(m);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    free(text);
    return 0;
}
