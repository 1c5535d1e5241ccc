/* error.h — the core's one error type and its one family of formatting helpers. Every stage
 * reports a failure the same way: a one-line message into a buffer the caller owns (an
 * ampx_err: where and how large), formatted by err_set / err_add, which return -1 so a
 * failing path reads `return err_set(e, "...")`, or by err_fail, which returns the status it
 * is given (`return err_fail(e, AMPX_ERR_INVALID, "...")`). An internal function that can
 * fail takes an ampx_err; the public API's (char *err, size_t err_cap) becomes
 * ERR(err, err_cap) at the boundary. Messages often quote what a file held (keys, names,
 * paths), so control characters are written as '?': a message stays one line whatever the
 * input was. */
#ifndef AMPX_BASE_ERROR_H
#define AMPX_BASE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "ampx/backend.h"

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
/* Replaces the message; returns st. */
ampx_status err_fail(ampx_err e, ampx_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Empties the message (a caller reads "" as no failure). */
void err_clear(ampx_err e);
/* Control characters of msg (a message or a quoted name) become '?'. */
void err_one_line(char *msg);

#endif
