/* call.c — the checked call layer (see call.h). */
#include "backend/call.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ampx/dtype.h"
#include "base/error.h"

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
    err_set(ERR(c->err, c->cap), "%s: %s: %s", what, ampx_status_name(st),
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
        err_set(ERR(c->err, c->cap), "%s: backend %s has no %s op", who, c->ifc->name,
                ampx_op_name(op) ? ampx_op_name(op) : "?");
        return AMPX_ERR_UNSUPPORTED;
    }
    ampx_status st = AMPX_ERR_INTERNAL;
    call_event ev;
    if (c->observe) ev.t0_ns = call_now_ns();
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
        SLOT(AMP_PASS, ampx_amp_pass_args);
    default: break;
    }
    in_flight.active = 0;
    c->counts[op]++;
    if (c->observe) {
        if (c->sync_each && st == AMPX_OK) st = c->ifc->synchronize(c->ctx);
        ev.t1_ns  = call_now_ns();
        ev.op     = op;
        ev.who    = who;
        ev.phase  = c->phase;
        ev.status = st;
        call_describe(op, args, &ev);
        /* a GEMM runs in its operands' precision; every other op in its node's */
        ev.dtype = op == AMPX_OP_GEMM ? ((const ampx_gemm_args *)args)->a.dtype : c->dtype;
        c->observe(c->observe_user, &ev);
    }
    if (st == AMPX_OK) return st;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", who, ampx_op_name(op));
    return call_check(c, st, what);
}

// ---------------------------------------------------------------------------------------
// Describing an op for the observer

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

typedef struct desc {
    call_event *e;
    size_t ns, nd; /* used lengths of e->shapes, e->dtypes */
} desc;

static void shape(desc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void shape(desc *d, const char *fmt, ...) {
    if (d->ns >= sizeof d->e->shapes) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->e->shapes + d->ns, sizeof d->e->shapes - d->ns, fmt, ap);
    va_end(ap);
    if (n > 0) d->ns += (size_t)n;
}

/* A tensor of n elements read or written once; null tensors count nothing. */
static void tensor(desc *d, ampx_tensor t, uint64_t n) {
    if (!t.buf) return;
    d->e->bytes += n * ampx_dtype_size(t.dtype);
    if (d->nd < sizeof d->e->dtypes) {
        int k = snprintf(d->e->dtypes + d->nd, sizeof d->e->dtypes - d->nd, "%s%s",
                         d->nd ? "," : "", ampx_dtype_name(t.dtype));
        if (k > 0) d->nd += (size_t)k;
    }
}

static void list(desc *d, ampx_tensor_list l, const ampx_tensor *more, uint64_t *total) {
    *total = 0;
    for (uint32_t i = 0; i < l.count; i++) {
        tensor(d, l.tensors[i], l.n_elems[i]);
        if (more) tensor(d, more[i], l.n_elems[i]);
        *total += l.n_elems[i];
    }
}

void call_describe(uint32_t op, const void *args, call_event *e) {
    desc d           = {.e = e};
    e->shapes[0]     = 0;
    e->dtypes[0]     = 0;
    e->bytes         = 0;
    e->flops         = 0;
    uint64_t n_total = 0;
    switch (op) {
    case AMPX_OP_GEMM: {
        const ampx_gemm_args *a = args;
        if (a->batch > 1) shape(&d, "%llux", (unsigned long long)a->batch);
        shape(&d, "%llux%llu * %llux%llu", (unsigned long long)a->m, (unsigned long long)a->k,
              (unsigned long long)a->k, (unsigned long long)a->n);
        uint64_t b = a->batch ? a->batch : 1;
        tensor(&d, a->a, a->m * a->k * b);
        tensor(&d, a->b, a->k * a->n * b);
        tensor(&d, a->c, a->m * a->n * b * (a->beta != 0 ? 2 : 1));
        e->flops = 2 * a->m * a->n * a->k * b;
        break;
    }
    case AMPX_OP_CAST: {
        const ampx_cast_args *a = args;
        shape(&d, "%llu", (unsigned long long)a->n);
        tensor(&d, a->src, a->n);
        tensor(&d, a->dst, a->n);
        break;
    }
    case AMPX_OP_ADD:
    case AMPX_OP_MUL: {
        const ampx_add_args *a = args; /* mul's fields up to y are add's without alpha/beta */
        uint64_t rows = a->rows, cols = a->cols;
        int bc = (int)a->broadcast_b;
        ampx_tensor ta, tb, ty;
        if (op == AMPX_OP_ADD) {
            ta = a->a, tb = a->b, ty = a->y;
        } else {
            const ampx_mul_args *m = args;
            ta = m->a, tb = m->b, ty = m->y;
        }
        shape(&d, "%llux%llu%s", (unsigned long long)rows, (unsigned long long)cols,
              bc ? " + row" : "");
        tensor(&d, ta, rows * cols);
        tensor(&d, tb, bc ? cols : rows * cols);
        tensor(&d, ty, rows * cols);
        e->flops = rows * cols * (op == AMPX_OP_ADD ? 3 : 1);
        break;
    }
    case AMPX_OP_SCALE: {
        const ampx_scale_args *a = args;
        shape(&d, "%llu", (unsigned long long)a->n);
        tensor(&d, a->x, a->n);
        tensor(&d, a->y, a->n);
        e->flops = a->n;
        break;
    }
    case AMPX_OP_BIAS_GRAD: {
        const ampx_bias_grad_args *a = args;
        shape(&d, "%llux%llu", (unsigned long long)a->rows, (unsigned long long)a->cols);
        tensor(&d, a->dy, a->rows * a->cols);
        tensor(&d, a->db, a->cols);
        e->flops = a->rows * a->cols;
        break;
    }
    case AMPX_OP_ACT_FWD:
    case AMPX_OP_ACT_BWD: {
        const ampx_act_args *a = args;
        shape(&d, "%llu", (unsigned long long)a->n);
        tensor(&d, a->x, a->n);
        if (op == AMPX_OP_ACT_BWD) tensor(&d, a->dy, a->n);
        tensor(&d, a->y_or_dx, a->n);
        e->flops = a->n * (op == AMPX_OP_ACT_BWD ? 2 : 1);
        break;
    }
    case AMPX_OP_SOFTMAX_FWD:
    case AMPX_OP_SOFTMAX_BWD: {
        const ampx_softmax_args *a = args;
        uint64_t n                 = a->rows * a->cols;
        shape(&d, "%llux%llu", (unsigned long long)a->rows, (unsigned long long)a->cols);
        tensor(&d, a->x_or_y, n);
        if (op == AMPX_OP_SOFTMAX_BWD) tensor(&d, a->dy, n);
        tensor(&d, a->y_or_dx, n);
        e->flops = 4 * n;
        break;
    }
    case AMPX_OP_SOFTMAX_XENT: {
        const ampx_softmax_xent_args *a = args;
        uint64_t n                      = a->rows * a->cols;
        shape(&d, "%llux%llu", (unsigned long long)a->rows, (unsigned long long)a->cols);
        tensor(&d, a->logits, n);
        tensor(&d, a->labels, a->rows);
        tensor(&d, a->loss, 1);
        tensor(&d, a->dlogits, n);
        e->flops = 5 * n;
        break;
    }
    case AMPX_OP_LAYERNORM_FWD:
    case AMPX_OP_LAYERNORM_BWD: {
        const ampx_layernorm_args *a = args;
        uint64_t n = a->rows * a->cols, bwd = op == AMPX_OP_LAYERNORM_BWD;
        shape(&d, "%llux%llu", (unsigned long long)a->rows, (unsigned long long)a->cols);
        tensor(&d, a->x, n);
        if (bwd) tensor(&d, a->dy, n);
        tensor(&d, a->y_or_dx, n);
        tensor(&d, a->gamma, a->cols);
        e->flops = (bwd ? 10 : 6) * n;
        break;
    }
    case AMPX_OP_BATCHNORM_FWD:
    case AMPX_OP_BATCHNORM_BWD: {
        const ampx_batchnorm_args *a = args;
        uint64_t n = a->outer * a->channels * a->inner, bwd = op == AMPX_OP_BATCHNORM_BWD;
        shape(&d, "%llux%llux%llu", (unsigned long long)a->outer, (unsigned long long)a->channels,
              (unsigned long long)a->inner);
        tensor(&d, a->x, n);
        if (bwd) tensor(&d, a->dy, n);
        tensor(&d, a->y_or_dx, n);
        tensor(&d, a->gamma, a->channels);
        e->flops = (bwd ? 10 : 6) * n;
        break;
    }
    case AMPX_OP_EMBEDDING_FWD:
    case AMPX_OP_EMBEDDING_BWD: {
        const ampx_embedding_args *a = args;
        shape(&d, "%llu of %llux%llu", (unsigned long long)a->n, (unsigned long long)a->vocab,
              (unsigned long long)a->dim);
        tensor(&d, a->table_or_dtable, a->n * a->dim);
        tensor(&d, a->ids, a->n);
        tensor(&d, a->y_or_dy, a->n * a->dim);
        e->flops = op == AMPX_OP_EMBEDDING_BWD ? a->n * a->dim : 0;
        break;
    }
    case AMPX_OP_REDUCE: {
        const ampx_reduce_args *a = args;
        shape(&d, "%llux%llu", (unsigned long long)a->rows, (unsigned long long)a->cols);
        tensor(&d, a->x, a->rows * a->cols);
        tensor(&d, a->y, a->rows);
        e->flops = a->rows * a->cols;
        break;
    }
    case AMPX_OP_SUM_SQUARES: {
        const ampx_sum_squares_args *a = args;
        list(&d, a->x, NULL, &n_total);
        shape(&d, "%u tensors, %llu", a->x.count, (unsigned long long)n_total);
        e->flops = 2 * n_total;
        break;
    }
    case AMPX_OP_UNSCALE_CHECK: {
        const ampx_unscale_check_args *a = args;
        list(&d, a->grads, NULL, &n_total);
        e->bytes *= 2; /* in place: read and written */
        shape(&d, "%u tensors, %llu", a->grads.count, (unsigned long long)n_total);
        e->flops = n_total;
        break;
    }
    case AMPX_OP_GRAD_STATS: {
        const ampx_grad_stats_args *a = args;
        list(&d, a->grads, NULL, &n_total);
        shape(&d, "%u tensors, %llu", a->grads.count, (unsigned long long)n_total);
        e->flops = 4 * n_total;
        break;
    }
    case AMPX_OP_AMP_PASS: {
        const ampx_amp_pass_args *a = args;
        list(&d, a->grads, NULL, &n_total);
        e->bytes *= 2; /* in place: read and written */
        shape(&d, "%u tensors, %llu", a->grads.count, (unsigned long long)n_total);
        e->flops = (a->sq_sum.buf ? 3 : 1) * n_total + (a->stats.buf ? 4 * n_total : 0);
        break;
    }
    case AMPX_OP_SCALER_UPDATE: shape(&d, "scalars"); break;
    case AMPX_OP_SGD: {
        const ampx_sgd_args *a = args;
        list(&d, a->params, a->grads, &n_total);
        e->bytes += n_total * 4 * (a->momentum_buf ? 3 : 1); /* params written, momentum r/w */
        shape(&d, "%u tensors, %llu", a->params.count, (unsigned long long)n_total);
        e->flops = 5 * n_total;
        break;
    }
    case AMPX_OP_ADAMW: {
        const ampx_adamw_args *a = args;
        list(&d, a->params, a->grads, &n_total);
        e->bytes += n_total * 4 * 5; /* params written, m and v read and written */
        shape(&d, "%u tensors, %llu", a->params.count, (unsigned long long)n_total);
        e->flops = 15 * n_total;
        break;
    }
    case AMPX_OP_DROPOUT: {
        const ampx_dropout_args *a = args;
        shape(&d, "%llu", (unsigned long long)a->n);
        tensor(&d, a->x, a->n);
        tensor(&d, a->y, a->n);
        e->flops = a->n;
        break;
    }
    case AMPX_OP_PERMUTE: {
        const ampx_permute_args *a = args;
        uint64_t n                 = 1;
        for (uint32_t i = 0; i < a->ndim && i < AMPX_PERMUTE_MAX_DIMS; i++) {
            shape(&d, "%s%llu", i ? "x" : "", (unsigned long long)a->dims[i]);
            n *= a->dims[i];
        }
        tensor(&d, a->x, n);
        tensor(&d, a->y, n);
        break;
    }
    default: break;
    }
}
