/* input.c — reading the files ampx is given: regular files only, no larger than the cap. */
#include "config/input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ampx/ampx.h"
#include "base/error.h"

static uint64_t max_set; /* 0: not set by the API */

void ampx_set_max_input_bytes(uint64_t bytes) {
    max_set = bytes;
}

int input_max_is_set(void) {
    const char *env = getenv("AMPX_MAX_INPUT_BYTES");
    return max_set || (env && *env);
}

uint64_t input_max_bytes(void) {
    if (max_set) return max_set;
    const char *env = getenv("AMPX_MAX_INPUT_BYTES");
    if (env && *env) {
        char *end;
        errno                = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (!errno && !*end && v > 0 && env[0] != '-') return v;
    }
    return INPUT_DEFAULT_MAX_BYTES;
}

static void size_words(uint64_t b, char *buf, size_t cap) {
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
}

FILE *input_open(const char *path, uint64_t max, uint64_t *size, ampx_err e) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer before it can be refused */
    int fd  = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        err_set(e, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        err_set(e, "%s: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(e, "%s: not a regular file (%s)", path,
                S_ISDIR(st.st_mode)                          ? "a directory"
                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                : S_ISFIFO(st.st_mode)                       ? "a pipe"
                                                             : "not a file");
        fclose(f);
        return NULL;
    }
    if ((uint64_t)st.st_size > max) {
        char have[32], lim[32];
        size_words((uint64_t)st.st_size, have, sizeof have);
        size_words(max, lim, sizeof lim);
        err_set(e,
                "%s: %s is larger than the %s input limit (raise it with --max-input-bytes or "
                "AMPX_MAX_INPUT_BYTES)",
                path, have, lim);
        fclose(f);
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    return f;
}

char *input_read(const char *path, uint64_t max, size_t *len, ampx_err e) {
    uint64_t size;
    FILE *f = input_open(path, max, &size, e);
    if (!f) return NULL;
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        err_set(e, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
        fclose(f);
        return NULL;
    }
    /* The file may change under us: read what is there, never more than its size said. */
    size_t n = fread(buf, 1, (size_t)size, f);
    int bad  = ferror(f);
    fclose(f);
    if (bad) {
        err_set(e, "%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len   = n;
    return buf;
}

FILE *ampx_input_open(const char *path, uint64_t max_bytes, uint64_t *size, char *err,
                      size_t err_cap) {
    uint64_t n;
    FILE *f = input_open(path, max_bytes ? max_bytes : input_max_bytes(), &n, ERR(err, err_cap));
    if (f && size) *size = n;
    return f;
}

char *ampx_input_read(const char *path, uint64_t max_bytes, size_t *len, char *err,
                      size_t err_cap) {
    return input_read(path, max_bytes ? max_bytes : input_max_bytes(), len, ERR(err, err_cap));
}
