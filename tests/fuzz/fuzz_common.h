/* fuzz_common.h — what the libFuzzer harnesses share: the input as a file ampx can open
 * (a memfd, rewritten for every input, read through /proc/self/fd like any path). */
#ifndef AMPX_FUZZ_COMMON_H
#define AMPX_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to the harness's memfd and returns its path. */
static const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("ampx-fuzz", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    return path;
}

#endif
