/* env.c — the environment variables the library reads as numbers, checked before a command
 * runs: a malformed value is one line and exit status 2, never a silent default (the
 * library itself, embedded in a program, falls back to the default; docs/OPTIONS.md). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

typedef struct env_int {
    const char *name;
    long long lo, hi;
    const char *unit; /* what the number counts, and the default */
} env_int;

static const env_int env_ints[] = {
    {"AMPX_MAX_INPUT_BYTES", 1, INT64_MAX, "bytes; unset: 1 GiB"},
    {"AMPX_CREATE_TIMEOUT_S", 0, 86400, "seconds, 0: no limit; unset: 120"},
    {"AMPX_PROBE_TIMEOUT_S", 1, 86400, "seconds; unset: 10"},
    {"AMPX_BUCKET_KB", 1, 1 << 30, "KiB; unset: 1024"},
};

int cli_check_env(const char *prog) {
    for (size_t i = 0; i < sizeof env_ints / sizeof env_ints[0]; i++) {
        const env_int *v = &env_ints[i];
        const char *s    = getenv(v->name);
        if (!s || !*s) continue; /* empty: unset */
        char *end;
        errno       = 0;
        long long x = strtoll(s, &end, 10);
        if (s[0] >= '0' && s[0] <= '9' && !*end && !errno && x >= v->lo && x <= v->hi) continue;
        fprintf(stderr, "%s: %s='%.40s': expected an integer in [%lld, %lld] (%s)\n", prog, v->name,
                s, v->lo, v->hi, v->unit);
        return EXIT_USAGE;
    }
    return 0;
}
