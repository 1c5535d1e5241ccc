/* ocl_tmpdir.h — a fresh directory for the OpenCL tests: $TMPDIR/ampx-ocl-<what>-XXXXXX
 * (/tmp when TMPDIR is unset or empty), made by mkdtemp; NULL when it cannot be. */
#ifndef AMPX_TESTS_OCL_TMPDIR_H
#define AMPX_TESTS_OCL_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

static inline char *ocl_tmpdir(char *buf, size_t cap, const char *what) {
    const char *base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    int len = snprintf(buf, cap, "%s/ampx-ocl-%s-XXXXXX", base, what);
    if (len < 0 || (size_t)len >= cap) return NULL;
    return mkdtemp(buf);
}

#endif
