/* test_tmp.h — a fresh file for a test: $TMPDIR/<what>-XXXXXX (/tmp when TMPDIR is unset or
 * empty), made by mkstemp into buf[cap]; its open descriptor, or -1 when it cannot be. */
#ifndef AMPX_TESTS_TEST_TMP_H
#define AMPX_TESTS_TEST_TMP_H

#include <stdio.h>
#include <stdlib.h>

static inline int test_mkstemp(char *buf, size_t cap, const char *what) {
    const char *base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    int len = snprintf(buf, cap, "%s/%s-XXXXXX", base, what);
    if (len < 0 || (size_t)len >= cap) return -1;
    return mkstemp(buf);
}

#endif
