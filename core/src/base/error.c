/* error.c — the formatting helpers of the core's errors (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

void err_one_line(char *msg) {
    for (; msg && *msg; msg++)
        if ((unsigned char)*msg < 0x20 || *msg == 0x7F) *msg = '?';
}

int err_vadd(ampx_err e, const char *fmt, va_list ap) {
    if (!e.msg || e.cap == 0) return -1;
    size_t n = strnlen(e.msg, e.cap);
    if (n >= e.cap) n = e.cap - 1;
    vsnprintf(e.msg + n, e.cap - n, fmt, ap);
    err_one_line(e.msg + n);
    return -1;
}

int err_add(ampx_err e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap);
    va_end(ap);
    return -1;
}

int err_set(ampx_err e, const char *fmt, ...) {
    if (!e.msg || e.cap == 0) return -1;
    e.msg[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap);
    va_end(ap);
    return -1;
}

ampx_status err_fail(ampx_err e, ampx_status st, const char *fmt, ...) {
    err_clear(e);
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap);
    va_end(ap);
    return st;
}

void err_clear(ampx_err e) {
    if (e.msg && e.cap) e.msg[0] = 0;
}
