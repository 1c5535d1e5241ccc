/* call.h — the checked call layer: every op the core issues goes through call_op, which
 * checks the slot is there, calls it, captures a failure's status and the backend's message,
 * and counts ops. It is the one place a timeline or an op counter hooks in. */
#ifndef AMPX_BACKEND_CALL_H
#define AMPX_BACKEND_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/ampx.h"

typedef struct call_ctx {
    ampx_backend *be;
    const ampx_backend_iface *ifc;
    ampx_context *ctx;
    uint64_t counts[AMPX_OP_COUNT]; /* ops issued, by op */
    char *err;                      /* the message of the last failure */
    size_t cap;
} call_ctx;

void call_init(call_ctx *c, ampx_backend *be, char *err, size_t cap);
/* Issues op with its args struct; `who` names what issued it (a node) for the message
 * "who: op: STATUS: backend message". */
ampx_status call_op(call_ctx *c, const char *who, uint32_t op, const void *args);
/* Records a failed buffer call (alloc, write, ...) the same way. */
ampx_status call_check(call_ctx *c, ampx_status st, const char *what);

#endif
