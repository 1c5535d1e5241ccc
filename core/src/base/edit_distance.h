/* edit_distance.h — the Levenshtein distance behind every did-you-mean: unknown JSON keys and
 * values (config/schema.c) and unknown options and commands of the `ampx` command
 * (tools/getopt.c). Header-only, so the command uses it without libampx exporting it; each
 * caller keeps its own rule for how close is close enough. */
#ifndef AMPX_BASE_EDIT_DISTANCE_H
#define AMPX_BASE_EDIT_DISTANCE_H

#include <stddef.h>
#include <string.h>

/* Insertions, deletions and substitutions turning a into b; strings over 63 characters are
 * "far" (99). */
static inline size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

#endif
