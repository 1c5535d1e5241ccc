/* timeline.c — the trace window of a run (--trace): which steps are traced, how their ops
 * are timed (the backend's device timestamps when it has them, else the host's clock with a
 * synchronize after each op), and the file's metadata. obs/trace.c writes the file. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "obs/trace.h"
#include "exec/hooks.h"

/* A step of the trace window: the stream is drained first so the step's ops start from an
 * idle device; the ops are timed by the backend when it has timestamps, else on the host
 * with a synchronize after each. */
static ampx_status timeline_begin(ampx_trainer *t) {
    ampx_status st = tr_check(t, t->ifc->synchronize(t->ctx), "synchronize");
    if (st) return st;
    trace_step_begin(t->timeline.trace, t->step + 1);
    if (t->timeline.dev_cap &&
        (st = tr_check(t, t->ifc->profile_begin(t->ctx, t->timeline.dev_cap), "profile_begin")))
        return st;
    t->call.observe      = trace_op;
    t->call.observe_user = t->timeline.trace;
    t->call.sync_each    = t->timeline.dev_cap == 0;
    return AMPX_OK;
}

static ampx_status timeline_end(ampx_trainer *t, ampx_status st, uint64_t before) {
    t->call.observe   = NULL;
    t->call.sync_each = 0;
    uint32_t n        = 0;
    if (t->timeline.dev_cap) {
        ampx_status pe = t->ifc->profile_end(t->ctx, t->timeline.dev_ns, t->timeline.dev_cap, &n);
        if (!st) st = tr_check(t, pe, "profile_end");
    }
    trace_step_end(t->timeline.trace, t->timeline.dev_cap ? t->timeline.dev_ns : NULL, n,
                   call_total(&t->call) - before);
    return st;
}

static void timeline_free(ampx_trainer *t) {
    char ignored[8];
    trace_close(t->timeline.trace, ERR(ignored, sizeof ignored));
    free(t->timeline.dev_ns);
}

// ---------------------------------------------------------------------------------------
// The hook: a step of the window is timed; every record's counters go into the file

static ampx_status tl_begin(ampx_trainer *t, const step_view *s, int *on_nodes) {
    (void)s, (void)on_nodes;
    if (!trace_wants(t->timeline.trace, t->step + 1)) return AMPX_OK;
    ampx_status st = timeline_begin(t);
    if (!st) t->timeline.open = 1;
    return st;
}

static ampx_status tl_end(ampx_trainer *t, const step_view *s, ampx_status st) {
    if (!t->timeline.open) return st;
    t->timeline.open = 0;
    return timeline_end(t, st, s->ops_before);
}

static void tl_recorded(ampx_trainer *t, const ampx_step_record *r, int32_t skipped_steps) {
    if (!t->timeline.trace) return;
    trace_counters(t->timeline.trace, r->step, r->loss, r->scale, r->grad_norm, r->lr,
                   skipped_steps);
    for (int k = 0; k < r->n_fp8; k++)
        trace_fp8(t->timeline.trace, r->step, r->fp8[k].name, r->fp8[k].scale, r->fp8[k].amax);
}

const step_hook timeline_hook = {.name     = "timeline",
                                 .begin    = tl_begin,
                                 .end      = tl_end,
                                 .recorded = tl_recorded,
                                 .release  = timeline_free};

// ---------------------------------------------------------------------------------------
// The API

ampx_status ampx_trainer_trace(ampx_trainer *t, const char *path, int64_t first, int64_t last,
                               char *err, size_t err_cap) {
    if (t->timeline.trace) {
        err_set(ERR(err, err_cap), "a trace is already being written");
        return AMPX_ERR_INVALID;
    }
    if (first < 1 || last < first) {
        err_set(ERR(err, err_cap), "trace window %lld:%lld: expected 1 <= first <= last",
                (long long)first, (long long)last);
        return AMPX_ERR_INVALID;
    }
    t->timeline.trace = trace_open(path, first, last, ERR(err, err_cap));
    if (!t->timeline.trace) return AMPX_ERR_INVALID;
    /* one op per node and micro-batch at most a few times over, and the step's own */
    uint32_t cap = (uint32_t)(t->g.n_nodes * 8 * t->A + 64);
    /* on a backend list the host times every op (one backend's timestamps cannot order the
     * others' ops and the copies) */
    if (t->place.n < 2 && t->ifc->size > offsetof(ampx_backend_iface, profile_end) &&
        t->ifc->profile_begin && t->ifc->profile_end &&
        (t->timeline.dev_ns = calloc(2 * (size_t)cap, sizeof *t->timeline.dev_ns)))
        t->timeline.dev_cap = cap;
    char v[256];
    trace_meta(t->timeline.trace, "ampx_version", AMPX_VERSION_STRING);
    trace_meta(t->timeline.trace, "model", t->m->cfg.file);
    snprintf(v, sizeof v, "%s %s (ABI %u.%u)", t->ifc->name, t->ifc->version, t->ifc->abi_major,
             t->ifc->abi_minor);
    trace_meta(t->timeline.trace, "backend", v);
    trace_meta(t->timeline.trace, "timing", t->timeline.dev_cap ? "device" : "host");
    trace_meta(t->timeline.trace, "timing_note",
               t->timeline.dev_cap
                   ? "op times are the backend's device timestamps"
                   : "the backend has no device timestamps (ABI 1.2 profile slots): op "
                     "times are the host's clock around each op, with a synchronize after "
                     "it, so they include launch overhead and the steps run slower");
    snprintf(v, sizeof v, "%lld:%lld", (long long)first, (long long)last);
    trace_meta(t->timeline.trace, "steps", v);
    return AMPX_OK;
}

ampx_status ampx_trainer_trace_close(ampx_trainer *t, char *err, size_t err_cap) {
    if (!t->timeline.trace) return AMPX_OK;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)call_total(&t->call));
    trace_meta(t->timeline.trace, "ops_issued", v);
    int bad           = trace_close(t->timeline.trace, ERR(err, err_cap));
    t->timeline.trace = NULL;
    return bad ? AMPX_ERR_INVALID : AMPX_OK;
}
