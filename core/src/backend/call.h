/* call.h — the checked call layer: every op the core issues goes through call_op, which
 * checks the slot is there, calls it, captures a failure's status and the backend's message,
 * and counts ops. It is the one place a timeline or an op counter hooks in: with an observer
 * set, each op is described (shapes, dtypes, bytes, FLOPs) and timed on the host, and the
 * observer gets the description (obs/trace.c writes it as a trace event). */
#ifndef AMPX_BACKEND_CALL_H
#define AMPX_BACKEND_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/ampx.h"
#include "base/error.h"

/* The part of a step an op belongs to, for the trace's phase slices. */
typedef enum call_phase {
    CALL_FORWARD   = 0,
    CALL_BACKWARD  = 1,
    CALL_AMP       = 2, /* unscale-and-check, gradient norm and statistics, scaler update */
    CALL_OPTIMIZER = 3,
    CALL_PHASES
} call_phase;

const char *call_phase_name(call_phase p);

/* One op as the observer sees it. Times are host CLOCK_MONOTONIC nanoseconds around the
 * enqueue (and the synchronize, when the call context synchronizes each op). */
typedef struct call_event {
    uint32_t op;
    const char *who; /* the graph node that issued it, or "step" */
    call_phase phase;
    ampx_dtype dtype; /* the precision it computes in: the node's dtype (GEMM: its operands') */
    char shapes[96];  /* e.g. "64x16 * 16x1024" */
    char dtypes[48];  /* the argument dtypes in the op's order, e.g. "bf16,bf16,bf16" */
    uint64_t bytes;   /* bytes read and written (a lower bound: each tensor once) */
    uint64_t flops;   /* floating-point operations (GEMM 2mnk; elementwise: one per element) */
    int64_t t0_ns, t1_ns;
    ampx_status status;
    /* on a backend list: the member that ran it (0 for one backend), -1 for a copy between
     * members (op AMPX_OP_COUNT), and the member's name */
    int track;
    const char *backend;
} call_event;

typedef void (*call_observer)(void *user, const call_event *e);

typedef struct call_ctx {
    ampx_backend *be;
    const ampx_backend_iface *ifc;
    ampx_context *ctx;
    uint64_t counts[AMPX_OP_COUNT]; /* ops issued, by op */
    ampx_err err;                   /* the message of the last failure */
    /* set by the issuer before each op: the executor per node, the trainer per step op */
    call_phase phase;
    ampx_dtype dtype;
    /* (optional) NULL: no description, no timing, no overhead */
    call_observer observe;
    void *observe_user;
    int sync_each; /* 1: synchronize after each observed op, so host time is device time */
    int track;     /* the member of a backend list this context calls (call_event.track) */
} call_ctx;

void call_init(call_ctx *c, ampx_backend *be, ampx_err e);
/* Issues op with its args struct; `who` names what issued it (a node) for the message
 * "who: op: STATUS: backend message". */
ampx_status call_op(call_ctx *c, const char *who, uint32_t op, const void *args);
/* Records a failed buffer call (alloc, write, ...) the same way. */
ampx_status call_check(call_ctx *c, ampx_status st, const char *what);
/* Fills e's shapes, dtypes, bytes and flops from op's args (the rest is left as is). */
void call_describe(uint32_t op, const void *args, call_event *e);
/* 1 when backend be (one backend, not a list) takes op with these args as issued: the slot
 * is there and supports() accepts the call's dtypes and shape class (backend.h, rule 4). */
int call_accepts(const ampx_backend *be, uint32_t op, const void *args);
/* Total ops issued through c. */
uint64_t call_total(const call_ctx *c);
/* Host CLOCK_MONOTONIC in nanoseconds. */
int64_t call_now_ns(void);

#endif
