/* call.c — the checked call layer (see call.h). */
#include "backend/call.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/guard.h"
#include "base/error.h"

// ---------------------------------------------------------------------------------------
// A crash inside a plugin: each op is marked in flight (backend/guard.h), so a fault, abort()
// or exit() inside it ends the process with a line naming the plugin, the op and its issuer.

static char op_calls[AMPX_OP_COUNT][48]; /* "op gemm", ... */

static void name_ops(void) {
    for (uint32_t op = 0; op < AMPX_OP_COUNT; op++)
        snprintf(op_calls[op], sizeof op_calls[op], "op %s", ampx_op_name(op));
    guard_install();
}

void call_init(call_ctx *c, ampx_backend *be, ampx_err e) {
    memset(c, 0, sizeof *c);
    c->be                      = be;
    c->ifc                     = ampx_backend_iface_of(be);
    c->ctx                     = ampx_backend_context(be);
    c->err                     = e;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, name_ops);
}

ampx_status call_check(call_ctx *c, ampx_status st, const char *what) {
    if (st == AMPX_OK) return st;
    const char *why = ampx_backend_last_error(c->be);
    err_set(c->err, "%s: %s: %s", what, ampx_status_name(st), why && *why ? why : "failed");
    return st;
}

/* One case per op: the slot called with its own type (AMPX_OPS). */
#define SLOT(index, slot, OP, type, n_dtypes, f32)                                                 \
    case AMPX_OP_##OP:                                                                             \
        st = ((ampx_status(*)(ampx_context *, const type *))fn)(c->ctx, (const type *)args);       \
        break;

/* A GEMM that asks for the ABI 1.5 epilogue goes only to a backend that takes it
 * (ampx_backend_gemm_epilogue); one of an older minor gets the args cut to its size, so it
 * never sees fields it does not know. 0, or -1 with the error set. */
static int gemm_gate(call_ctx *c, const char *who, const void **args, ampx_gemm_args *cut) {
    const ampx_gemm_args *g = *args;
    if (g->size < sizeof *g) return 0; /* a 1.4-sized caller asks for no epilogue */
    int epi = g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf || g->bias_grad.buf;
    ampx_dtype dt[3] = {g->a.dtype, g->b.dtype, g->c.dtype};
    if (epi && !ampx_backend_gemm_epilogue(c->be, dt)) {
        err_set(c->err, "%s: backend %s takes no GEMM epilogue (ABI minor %u)", who, c->ifc->name,
                c->ifc->abi_minor);
        return -1;
    }
    if (c->ifc->abi_minor < 5) {
        *cut      = *g;
        cut->size = (uint32_t)AMPX_GEMM_ARGS_SIZE_V1_4;
        *args     = cut;
    }
    return 0;
}

/* GEMM_FP8's epilogue goes only to a backend that claims it for these dtypes. */
static int gemm_fp8_gate(call_ctx *c, const char *who, const ampx_gemm_fp8_args *a) {
    const ampx_gemm_args *g = &a->gemm;
    int epi = g->bias.buf || g->act != AMPX_GEMM_ACT_NONE || g->pre_act.buf || g->bias_grad.buf;
    ampx_dtype dt[3] = {g->a.dtype, g->b.dtype, g->c.dtype};
    if (epi && !c->ifc->supports(c->ctx, AMPX_OP_GEMM_FP8, dt, 3, AMPX_SHAPE_GEMM_EPILOGUE)) {
        err_set(c->err, "%s: backend %s takes no epilogue for gemm_fp8", who, c->ifc->name);
        return -1;
    }
    return 0;
}

ampx_status call_op(call_ctx *c, const char *who, uint32_t op, const void *args) {
    void *fn = op < AMPX_OP_COUNT ? ampx_backend_op_slot(c->be, op) : NULL;
    if (!fn || op >= AMPX_OP_COUNT) {
        err_set(c->err, "%s: backend %s has no %s op", who, c->ifc->name,
                ampx_op_name(op) ? ampx_op_name(op) : "?");
        return AMPX_ERR_UNSUPPORTED;
    }
    ampx_gemm_args cut;
    if (op == AMPX_OP_GEMM && gemm_gate(c, who, &args, &cut)) return AMPX_ERR_UNSUPPORTED;
    if (op == AMPX_OP_GEMM_FP8 && gemm_fp8_gate(c, who, args)) return AMPX_ERR_UNSUPPORTED;
    ampx_status st = AMPX_ERR_INTERNAL;
    call_event ev;
    if (c->observe) ev.t0_ns = call_now_ns();
    guard_call saved;
    guard_enter(&saved, c->ifc->name, ampx_backend_path(c->be), op_calls[op], who);
    switch (op) {
        AMPX_OPS(SLOT)
    default: break;
    }
    guard_leave(&saved);
    c->counts[op]++;
    if (c->observe) {
        if (c->sync_each && st == AMPX_OK) st = c->ifc->synchronize(c->ctx);
        ev.t1_ns   = call_now_ns();
        ev.op      = op;
        ev.who     = who;
        ev.phase   = c->phase;
        ev.status  = st;
        ev.track   = c->track;
        ev.backend = c->ifc->name;
        call_describe(op, args, &ev);
        /* a GEMM runs in its operands' precision; every other op in its node's */
        ev.dtype = op == AMPX_OP_GEMM       ? ((const ampx_gemm_args *)args)->a.dtype
                   : op == AMPX_OP_GEMM_FP8 ? ((const ampx_gemm_fp8_args *)args)->gemm.a.dtype
                                            : c->dtype;
        c->observe(c->observe_user, &ev);
    }
    if (st == AMPX_OK) return st;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", who, ampx_op_name(op));
    return call_check(c, st, what);
}

#undef SLOT

// ---------------------------------------------------------------------------------------
// Phases, the clock, totals (call_describe is in describe.c)

const char *call_phase_name(call_phase p) {
    static const char *names[] = {"forward", "backward", "amp", "optimizer"};
    return p < CALL_PHASES ? names[p] : "?";
}

int64_t call_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t call_total(const call_ctx *c) {
    uint64_t n = 0;
    for (int i = 0; i < AMPX_OP_COUNT; i++)
        n += c->counts[i];
    return n;
}
