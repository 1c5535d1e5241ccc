/* test_tmp.h — fresh files and directories for tests: $TMPDIR/<what>-XXXXXX (/tmp when TMPDIR
 * is unset or empty), made by mkstemp or mkdtemp into buf[cap]. */
#ifndef AMPX_TESTS_TEST_TMP_H
#define AMPX_TESTS_TEST_TMP_H

#include <stdio.h>
#include <stdlib.h>

/* The template $TMPDIR/<what>-XXXXXX into buf[cap]; 0, or -1 when it does not fit. */
static inline int test_tmp_template(char *buf, size_t cap, const char *what) {
    const char *base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    int len = snprintf(buf, cap, "%s/%s-XXXXXX", base, what);
    return len < 0 || (size_t)len >= cap ? -1 : 0;
}

/* A new file: its open descriptor, or -1. */
static inline int test_mkstemp(char *buf, size_t cap, const char *what) {
    return test_tmp_template(buf, cap, what) ? -1 : mkstemp(buf);
}

/* A new directory: buf, or NULL. */
static inline char *test_mkdtemp(char *buf, size_t cap, const char *what) {
    return test_tmp_template(buf, cap, what) ? NULL : mkdtemp(buf);
}

#endif
