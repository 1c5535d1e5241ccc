/* error.h — the core's one error type and its one formatting helper. Every stage reports a
 * failure the same way: a one-line message into a buffer the caller owns (an ampx_err: where
 * and how large), formatted by err_set / err_add, which return -1 so a failing path reads
 * `return err_set(e, "...")`. Messages often quote what a file held (keys, names, paths), so
 * control characters are written as '?': a message stays one line whatever the input was. */
#ifndef AMPX_BASE_ERROR_H
#define AMPX_BASE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ampx_err {
    char *msg;  /* NULL or cap 0: the message is dropped */
    size_t cap; /* bytes, the terminating NUL included */
} ampx_err;

#define ERR(buf, cap) ((ampx_err){(buf), (cap)})

/* Replaces the message; returns -1. */
int err_set(ampx_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends to the message; returns -1. */
int err_add(ampx_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int err_vadd(ampx_err e, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Control characters of msg (a message or a quoted name) become '?'. */
void err_one_line(char *msg);

#endif
