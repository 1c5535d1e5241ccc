/* forensics.c — overflow forensics armed on every step (train.forensics, --forensics).
 *
 * The steps the gradient monitor scans already say where a non-finite value came from
 * (monitor.c). The others, when armed, run ABS_MAX over every output the monitor would scan,
 * right after its node, into a slot of their own in a ring like the records' (FR_HEAD bytes
 * with the loss scale the gradients carry, then one f32 per scan position per micro-batch):
 * one read of each output, no sums, nothing read back before the flush. At the flush a
 * skipped step's slot is diagnosed as the monitor's are: the first output in execution order
 * that held a non-finite value, whether its node created it from finite inputs or was handed
 * one, and the nodes that passed it on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/hooks.h"
#include "watch/watch.h"

ampx_status forensics_setup(ampx_trainer *t) {
    ampx_status st;
    if (!t->mon->armed || t->mon->fbuf) return AMPX_OK;
    if (t->ifc->abi_minor < 8 || !ampx_backend_op_slot(t->be, AMPX_OP_ABS_MAX))
        return tr_fail(t, AMPX_ERR_UNSUPPORTED,
                       "train.forensics needs the backend op abs_max (ABI 1.8), which backend "
                       "'%s' (ABI 1.%u) does not have: leave forensics off, or use --monitor 1",
                       t->ifc->name, (unsigned)t->ifc->abi_minor);
    if ((st = monitor_scan_setup(t))) return st; /* the tables, not the monitor's slots */
    uint64_t bytes      = FR_HEAD + 4 * (uint64_t)t->A * (uint64_t)t->mon->n_scan;
    t->mon->fslot_bytes = (bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    t->mon->fhost       = malloc(t->mon->fslot_bytes * (uint64_t)t->K);
    if (!t->mon->fhost) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    return tr_alloc_zero(t, t->mon->fslot_bytes * (uint64_t)t->K, &t->mon->fbuf);
}

static void forensics_free(ampx_trainer *t) {
    if (t->mon->fbuf) t->ifc->buffer_free(t->ctx, t->mon->fbuf);
    free(t->mon->fhost);
    t->mon->fbuf  = NULL;
    t->mon->fhost = NULL;
}

/* An armed step's slot (ring slot ring_at): zeroed (finite), the loss scale copied in. */
static ampx_status forensics_begin_step(ampx_trainer *t, int64_t ring_at) {
    ampx_status st;
    t->mon->fslot_cur = (uint64_t)ring_at * t->mon->fslot_bytes;
    if ((st = tr_check(t,
                       t->ifc->buffer_fill(t->ctx, t->mon->fbuf, t->mon->fslot_cur,
                                           t->mon->fslot_bytes, 0, 4),
                       "buffer_fill")))
        return st;
    return tr_check(t,
                    t->ifc->buffer_copy(t->ctx, t->mon->fbuf, t->mon->fslot_cur, t->scalars, 0, 4),
                    "buffer_copy");
}

/* After node `node` of an armed micro-batch: the largest |x| of each output it scans. */
static ampx_status forensics_scan_node(ampx_trainer *t, executor *x, int node) {
    ampx_tensor ts[G_MAX_OUT];
    uint64_t ns[G_MAX_OUT];
    int c = monitor_scan_list(t, x, node, ts, ns), f = t->mon->scan_first[node];
    if (!c) return AMPX_OK;
    uint64_t at         = (uint64_t)(x->micro * t->mon->n_scan + f);
    const g_node *n     = &t->g.nodes[node];
    ampx_abs_max_args a = {
        .size = sizeof a,
        .x    = {.count = (uint32_t)c, .tensors = ts, .n_elems = ns},
        .out  = tr_tensor(t->mon->fbuf, t->mon->fslot_cur + FR_HEAD + 4 * at, AMPX_F32)};
    t->call.dtype = n->dtype;
    return call_op(&t->call, n->name, AMPX_OP_ABS_MAX, &a);
}

/* The flush's n armed slots, read at once (slot i of the flush: fhost + i * fslot_bytes). */
static ampx_status forensics_read_slots(ampx_trainer *t, int64_t n) {
    return tr_check(t,
                    t->ifc->buffer_read(t->ctx, t->mon->fbuf, 0, t->mon->fhost,
                                        t->mon->fslot_bytes * (uint64_t)n),
                    "buffer_read");
}

/* Record r of an armed step (slot i of the flush): a skipped step gets its diagnosis; every
 * step leaves its finite magnitudes for the safe-scale estimate of a later one. */
static void forensics_record(ampx_trainer *t, int64_t i, ampx_step_record *r) {
    scan_view v = {t->mon->fhost + (uint64_t)i * t->mon->fslot_bytes, 1};
    if (r->skipped) {
        monitor_diagnose(t, &v);
        /* no output this rank scanned held one: the gradients became non-finite after the
         * ops (another rank's, in the all-reduce; or in place, as a fault injected there) */
        if (!t->mon->first_nonfinite[0] && t->dp.world > 1)
            snprintf(t->mon->first_nonfinite, sizeof t->mon->first_nonfinite,
                     "none in rank %d's outputs: another rank's gradients brought it through "
                     "the all-reduce",
                     t->dp.rank);
        else if (!t->mon->first_nonfinite[0])
            snprintf(t->mon->first_nonfinite, sizeof t->mon->first_nonfinite,
                     "none in the ops' outputs: it appeared after the backward, in %s",
                     r->overflow && r->overflow[0] ? r->overflow : "the gradients");
        r->first_nonfinite = t->mon->first_nonfinite;
        r->created_by      = t->mon->created_by;
        r->overflow_origin = t->mon->origin;
    }
    monitor_note_finite(t, &v, r->step);
}

// ---------------------------------------------------------------------------------------
// The hook: the steps the monitor does not scan, when armed

static ampx_status fr_begin(ampx_trainer *t, const step_view *s, int *on_nodes) {
    t->mon->lean_live = *on_nodes = t->mon->armed && !tr_monitored(t, t->step + 1);
    return t->mon->lean_live ? forensics_begin_step(t, s->ring_at) : AMPX_OK;
}

static ampx_status fr_end(ampx_trainer *t, const step_view *s, ampx_status st) {
    (void)s;
    t->mon->lean_live = 0;
    return st;
}

static ampx_status fr_read(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq) {
    (void)buf, (void)wsq;
    /* the armed slots: the steps the monitor does not scan */
    return t->mon->armed && tr_monitored_in_flush(t, n) < n ? forensics_read_slots(t, n) : AMPX_OK;
}

static void fr_record(ampx_trainer *t, int64_t i, ampx_step_record *r) {
    if (t->mon->armed && !tr_monitored(t, r->step)) forensics_record(t, i, r);
}

const step_hook forensics_hook = {.name       = "forensics",
                                  .begin      = fr_begin,
                                  .after_node = forensics_scan_node,
                                  .end        = fr_end,
                                  .read       = fr_read,
                                  .record     = fr_record,
                                  .release    = forensics_free};
