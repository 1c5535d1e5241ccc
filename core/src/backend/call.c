/* call.c — the checked call layer (see call.h). */
#include "backend/call.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// A crash inside a plugin: the op in flight is recorded around every call, and a handler for
// SIGSEGV, SIGBUS, SIGFPE and SIGILL names the plugin and the op on stderr, then puts back
// the handler that was there before (the default, or a sanitizer's) and lets the signal
// take its course: a fault re-executes and meets that handler, a sent signal is re-raised.

static struct {
    const char *volatile plugin, *volatile path, *volatile who, *volatile op;
    volatile sig_atomic_t active;
} in_flight;

static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction previous[4];

static size_t put(char *buf, size_t n, size_t cap, const char *s) {
    while (s && *s && n + 1 < cap)
        buf[n++] = *s++;
    return n;
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int k = 0;
    while (k < 3 && fault_signals[k] != sig)
        k++;
    if (in_flight.active) { /* only async-signal-safe calls from here */
        static const char *const names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"};
        char msg[1024];
        size_t n  = 0;
        n         = put(msg, n, sizeof msg, "ampx: ");
        n         = put(msg, n, sizeof msg, names[k]);
        n         = put(msg, n, sizeof msg, " inside backend '");
        n         = put(msg, n, sizeof msg, in_flight.plugin);
        n         = put(msg, n, sizeof msg, "' (");
        n         = put(msg, n, sizeof msg, in_flight.path);
        n         = put(msg, n, sizeof msg, ") during op ");
        n         = put(msg, n, sizeof msg, in_flight.op);
        n         = put(msg, n, sizeof msg, " issued by ");
        n         = put(msg, n, sizeof msg, in_flight.who);
        n         = put(msg, n, sizeof msg, "\n");
        ssize_t w = write(2, msg, n);
        (void)w;
    }
    sigaction(sig, &previous[k], NULL);
    if (si->si_code <= 0) raise(sig); /* sent with kill(): no fault to re-execute */
}

static void install_handlers(void) {
    for (int k = 0; k < 4; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags     = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(fault_signals[k], &sa, &previous[k]);
    }
}

void call_init(call_ctx *c, ampx_backend *be, char *err, size_t cap) {
    memset(c, 0, sizeof *c);
    c->be                      = be;
    c->ifc                     = ampx_backend_iface_of(be);
    c->ctx                     = ampx_backend_context(be);
    c->err                     = err;
    c->cap                     = cap;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handlers);
}

ampx_status call_check(call_ctx *c, ampx_status st, const char *what) {
    if (st == AMPX_OK) return st;
    const char *why = ampx_backend_last_error(c->be);
    snprintf(c->err, c->cap, "%s: %s: %s", what, ampx_status_name(st),
             why && *why ? why : "failed");
    return st;
}

#define SLOT(name, type)                                                                           \
    case AMPX_OP_##name:                                                                           \
        st = ((ampx_status(*)(ampx_context *, const type *))slot)(c->ctx, (const type *)args);     \
        break

ampx_status call_op(call_ctx *c, const char *who, uint32_t op, const void *args) {
    void *slot = op < AMPX_OP_COUNT ? ampx_backend_op_slot(c->be, op) : NULL;
    if (!slot || op >= AMPX_OP_COUNT) {
        snprintf(c->err, c->cap, "%s: backend %s has no %s op", who, c->ifc->name,
                 ampx_op_name(op) ? ampx_op_name(op) : "?");
        return AMPX_ERR_UNSUPPORTED;
    }
    ampx_status st   = AMPX_ERR_INTERNAL;
    in_flight.plugin = c->ifc->name;
    in_flight.path   = ampx_backend_path(c->be);
    in_flight.who    = who;
    in_flight.op     = ampx_op_name(op);
    in_flight.active = 1;
    switch (op) {
        SLOT(GEMM, ampx_gemm_args);
        SLOT(CAST, ampx_cast_args);
        SLOT(ADD, ampx_add_args);
        SLOT(MUL, ampx_mul_args);
        SLOT(SCALE, ampx_scale_args);
        SLOT(BIAS_GRAD, ampx_bias_grad_args);
        SLOT(ACT_FWD, ampx_act_args);
        SLOT(ACT_BWD, ampx_act_args);
        SLOT(SOFTMAX_FWD, ampx_softmax_args);
        SLOT(SOFTMAX_BWD, ampx_softmax_args);
        SLOT(SOFTMAX_XENT, ampx_softmax_xent_args);
        SLOT(LAYERNORM_FWD, ampx_layernorm_args);
        SLOT(LAYERNORM_BWD, ampx_layernorm_args);
        SLOT(BATCHNORM_FWD, ampx_batchnorm_args);
        SLOT(BATCHNORM_BWD, ampx_batchnorm_args);
        SLOT(EMBEDDING_FWD, ampx_embedding_args);
        SLOT(EMBEDDING_BWD, ampx_embedding_args);
        SLOT(REDUCE, ampx_reduce_args);
        SLOT(SUM_SQUARES, ampx_sum_squares_args);
        SLOT(UNSCALE_CHECK, ampx_unscale_check_args);
        SLOT(GRAD_STATS, ampx_grad_stats_args);
        SLOT(SCALER_UPDATE, ampx_scaler_update_args);
        SLOT(SGD, ampx_sgd_args);
        SLOT(ADAMW, ampx_adamw_args);
        SLOT(DROPOUT, ampx_dropout_args);
        SLOT(PERMUTE, ampx_permute_args);
    default: break;
    }
    in_flight.active = 0;
    c->counts[op]++;
    if (st == AMPX_OK) return st;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", who, ampx_op_name(op));
    return call_check(c, st, what);
}
