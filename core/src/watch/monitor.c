/* monitor.c — the gradient-health monitor: grad_stats over every parameter gradient
 * (scaled, as the backward left it) and over every node's outputs right after the node ran,
 * into the monitor slot of the step; read back with the step records, never in between.
 * A backend with AMP_PASS computes the parameters' part inside that fused op
 * (monitor_amp_pass says where it writes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "graph/ops.h"
#include "exec/hooks.h"
#include "watch/watch.h"

/* The compute dtype of the layer that reads parameter p (its master or working copy). */
static ampx_dtype layer_dtype(const ampx_trainer *t, const param *p) {
    int copy = t->g.values[p->value].copy;
    for (int i = 0; i < t->g.n_forward; i++) {
        const g_node *n = &t->g.nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && (n->in[k] == p->value || n->in[k] == copy)) return n->dtype;
    }
    return AMPX_F32;
}

static void layer_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
}

ampx_status monitor_scan_setup(ampx_trainer *t) {
    if (t->mon->ready) return AMPX_OK;
    t->mon->ready = 1;
    for (int i = 0; i < t->n_params; i++) {
        t->mon->compute[i] = layer_dtype(t, &t->params[i]);
        t->mon->target[i]  = t->mon->compute[i] == AMPX_F16 || t->mon->compute[i] == AMPX_BF16
                                 ? t->mon->compute[i]
                                 : AMPX_F32;
        layer_of(t->params[i].name, t->mon->layer[i], sizeof t->mon->layer[i]);
    }
    int N              = t->g.n_nodes;
    t->mon->scan_first = calloc((size_t)N, sizeof *t->mon->scan_first);
    t->mon->scan_count = calloc((size_t)N, sizeof *t->mon->scan_count);
    t->mon->scan_value = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->mon->scan_value);
    t->mon->scan_node  = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->mon->scan_node);
    t->mon->value_scan = malloc((size_t)t->g.n_values * sizeof *t->mon->value_scan + 1);
    t->mon->fr_max     = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->mon->fr_max);
    t->mon->fr_scale   = calloc((size_t)N * G_MAX_OUT + 1, sizeof *t->mon->fr_scale);
    t->mon->fr_step    = malloc(((size_t)N * G_MAX_OUT + 1) * sizeof *t->mon->fr_step);
    if (!t->mon->scan_first || !t->mon->scan_count || !t->mon->scan_value || !t->mon->scan_node ||
        !t->mon->value_scan || !t->mon->fr_max || !t->mon->fr_scale || !t->mon->fr_step)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < N * G_MAX_OUT + 1; i++)
        t->mon->fr_step[i] = -1;
    for (int v = 0; v < t->g.n_values; v++)
        t->mon->value_scan[v] = -1;
    for (int i = 0; i < N; i++) {
        const g_node *n       = &t->g.nodes[i];
        t->mon->scan_first[i] = t->mon->n_scan;
        if (n->op == OP_RESHAPE) { /* a view: its input's statistics stand for it */
            if (n->in[0] >= 0 && n->out[0] >= 0)
                t->mon->value_scan[n->out[0]] = t->mon->value_scan[n->in[0]];
            continue;
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && ampx_dtype_is_float(t->g.values[n->out[k]].dtype)) {
                t->mon->value_scan[n->out[k]]       = t->mon->n_scan;
                t->mon->scan_value[t->mon->n_scan]  = n->out[k];
                t->mon->scan_node[t->mon->n_scan++] = i;
                t->mon->scan_count[i]++;
            }
    }
    return AMPX_OK;
}

/* The scan tables, then the monitored steps' slots (K of them, like the records' ring). */
ampx_status monitor_setup(ampx_trainer *t) {
    ampx_status st = monitor_scan_setup(t);
    if (st || t->mon->buf) return st;
    t->mon->slot_bytes = (mon_off(t, MON_END) + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    t->mon->host       = malloc(t->mon->slot_bytes * (uint64_t)t->K);
    if (!t->mon->host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    return tr_alloc_zero(t, t->mon->slot_bytes * (uint64_t)t->K, &t->mon->buf);
}

static void monitor_free(ampx_trainer *t) {
    if (t->mon->buf) t->ifc->buffer_free(t->ctx, t->mon->buf);
    free(t->mon->scan_first);
    free(t->mon->scan_count);
    free(t->mon->scan_value);
    free(t->mon->scan_node);
    free(t->mon->value_scan);
    free(t->mon->host);
    free(t->mon->fr_max), free(t->mon->fr_scale), free(t->mon->fr_step);
    headroom_free(t);
}

/* A monitored step's slot (ring slot ring_at): cleared to all ones (a NaN count of -1 reads
 * as "not written"), the loss scale the gradients carry copied in first. */
static ampx_status monitor_begin_step(ampx_trainer *t, int64_t ring_at) {
    ampx_status st;
    t->mon->slot_cur = (uint64_t)ring_at * t->mon->slot_bytes;
    if ((st = tr_check(t,
                       t->ifc->buffer_fill(t->ctx, t->mon->buf, t->mon->slot_cur,
                                           t->mon->slot_bytes, 0xFFFFFFFFu, 4),
                       "buffer_fill")))
        return st;
    return tr_check(
        t, t->ifc->buffer_copy(t->ctx, t->mon->buf, t->mon->slot_cur + MON_SCALE, t->scalars, 0, 4),
        "buffer_copy");
}

static ampx_status grad_stats(ampx_trainer *t, const char *who, ampx_dtype target,
                              ampx_tensor_list list, ampx_buffer *b, uint64_t stats,
                              uint64_t counts, uint64_t nans) {
    ampx_grad_stats_args a = {.size       = sizeof a,
                              .target     = target,
                              .grads      = list,
                              .stats      = tr_tensor(b, stats, AMPX_F32),
                              .counts     = tr_tensor(b, counts, AMPX_I32),
                              .nan_counts = tr_tensor(b, nans, AMPX_I32)};
    t->call.dtype          = target;
    return call_op(&t->call, who, AMPX_OP_GRAD_STATS, &a);
}

int monitor_scan_list(const ampx_trainer *t, executor *x, int node, ampx_tensor *ts, uint64_t *ns) {
    int c = t->mon->scan_count[node], f = t->mon->scan_first[node];
    for (int k = 0; k < c; k++) {
        ts[k] = exec_tensor(x, t->mon->scan_value[f + k]);
        ns[k] = exec_numel(x, t->mon->scan_value[f + k]);
    }
    return c;
}

/* After node `node` of a monitored micro-batch: the statistics of its outputs. */
static ampx_status monitor_scan_node(ampx_trainer *t, executor *x, int node) {
    ampx_tensor ts[G_MAX_OUT];
    uint64_t ns[G_MAX_OUT];
    int c = monitor_scan_list(t, x, node, ts, ns), f = t->mon->scan_first[node];
    if (!c) return AMPX_OK;
    uint64_t base = t->mon->slot_cur, at = (uint64_t)(x->micro * t->mon->n_scan + f);
    const g_node *n = &t->g.nodes[node];
    return grad_stats(t, n->name, n->dtype,
                      (ampx_tensor_list){.count = (uint32_t)c, .tensors = ts, .n_elems = ns},
                      t->mon->buf, base + mon_off(t, MON_SSTATS) + 16 * at,
                      base + mon_off(t, MON_SCOUNTS) + 12 * at,
                      base + mon_off(t, MON_SNAN) + 4 * at);
}

/* The parameter gradients' statistics into buffer b at slot offset base, in parameter order:
 * one grad_stats per run of parameters whose layers share a compute dtype (its target). */
static ampx_status monitor_param_stats(ampx_trainer *t, ampx_buffer *b, uint64_t base) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list all = tr_grad_list(t, ts, ns);
    t->call.phase        = CALL_AMP;
    for (int at = 0, end; at < t->n_params; at = end) {
        for (end = at + 1; end < t->n_params && t->mon->target[end] == t->mon->target[at]; end++)
            ;
        uint64_t k     = (uint64_t)at;
        ampx_status st = grad_stats(
            t, "monitor", t->mon->target[at],
            (ampx_tensor_list){
                .count = (uint32_t)(end - at), .tensors = all.tensors + at, .n_elems = ns + at},
            b, base + mon_off(t, MON_PSTATS) + 16 * k, base + mon_off(t, MON_PCOUNTS) + 12 * k,
            base + mon_off(t, MON_PNAN) + 4 * k);
        if (st) return st;
    }
    return AMPX_OK;
}

static void monitor_amp_pass(ampx_trainer *t, ampx_amp_pass_args *f) {
    uint64_t mb   = t->mon->slot_cur;
    f->targets    = t->mon->target;
    f->stats      = tr_tensor(t->mon->buf, mb + mon_off(t, MON_PSTATS), AMPX_F32);
    f->counts     = tr_tensor(t->mon->buf, mb + mon_off(t, MON_PCOUNTS), AMPX_I32);
    f->nan_counts = tr_tensor(t->mon->buf, mb + mon_off(t, MON_PNAN), AMPX_I32);
}

// ---------------------------------------------------------------------------------------
// Reading a slot

static void read_one(const unsigned char *slot, uint64_t so, uint64_t co, uint64_t no, int k,
                     double scale, ampx_tensor_health *h) {
    float st[4];
    int32_t cn[3], nan;
    memcpy(st, slot + so + 16 * (uint64_t)k, 16);
    memcpy(cn, slot + co + 12 * (uint64_t)k, 12);
    memcpy(&nan, slot + no + 4 * (uint64_t)k, 4);
    double n          = h->n ? (double)h->n : 1;
    h->max_abs        = st[0] / scale;
    h->rms            = st[2] / scale;
    h->zero_frac      = cn[0] / n;
    h->underflow_frac = cn[1] / n;
    h->nan            = nan >= 0 && nan <= cn[2] ? nan : -1;
    h->inf            = h->nan >= 0 ? cn[2] - nan : cn[2];
}

/* Fills t->mon->health (parameter order) from a monitor slot. */
static void read_health(ampx_trainer *t, const unsigned char *slot, double scale) {
    if (!(scale > 0)) scale = 1;
    for (int i = 0; i < t->n_params; i++) {
        ampx_tensor_health *h = &t->mon->health[i];
        h->name               = t->params[i].name;
        h->layer              = t->mon->layer[i];
        h->compute            = t->mon->compute[i];
        h->n                  = t->params[i].n;
        read_one(slot, mon_off(t, MON_PSTATS), mon_off(t, MON_PCOUNTS), mon_off(t, MON_PNAN), i,
                 scale, h);
    }
}

/* Scan position s of micro-batch a as either kind of slot shows it: the largest finite |x|
 * (an armed slot knows it only when every value is finite, else 0), how many values are
 * non-finite (an armed slot: 1 when any) and of them NaN (-1: not counted). */
static void view_get(const ampx_trainer *t, const scan_view *v, int64_t a, int s, scan_value *out) {
    if (v->lean) {
        float m;
        memcpy(&m, v->slot + FR_HEAD + 4 * (uint64_t)(a * t->mon->n_scan + s), 4);
        out->max_abs   = isfinite(m) ? m : 0;
        out->nonfinite = !isfinite(m);
        out->nan       = isnan(m);
        return;
    }
    float st[4];
    int32_t cn[3];
    scan_read(t, v->slot, a, s, st, cn, &out->nan);
    out->max_abs   = st[0];
    out->nonfinite = cn[2];
    if (!(out->nan >= 0 && out->nan <= cn[2])) out->nan = -1;
}

/* The inputs of node n in micro-batch a: their largest finite magnitudes into buf. Returns
 * 1 when every float input is finite as far as the monitor knows (scanned and finite; a
 * weight or running statistic, which the run-health check keeps finite; a constant; a data
 * input, checked finite when read), 0 when one held a non-finite value or is an activation
 * the monitor did not scan (*other names it). */
static int inputs_finite(const ampx_trainer *t, const scan_view *view, int64_t a, const g_node *n,
                         char *buf, size_t cap, const char **other, double *in_max) {
    size_t len = 0;
    int ok     = 1;
    buf[0]     = 0;
    *in_max    = 0;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || !ampx_dtype_is_float(t->g.values[v].dtype)) continue;
        const g_value *val = &t->g.values[v];
        int sp             = t->mon->value_scan[v];
        scan_value sv;
        if (sp < 0) {
            if (val->role == ROLE_ACTIVATION || val->role == ROLE_GRADIENT)
                ok = 0, *other = val->name;
            continue;
        }
        view_get(t, view, a, sp, &sv);
        if (sv.nonfinite != 0) ok = 0, *other = val->name;
        if (sv.max_abs > *in_max) *in_max = sv.max_abs;
        if (len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s %.3g", len ? ", " : "", val->name,
                                    (double)sv.max_abs);
    }
    return ok;
}

/* The largest loss scale under which backward node n's output (scan position s, dtype
 * limit lim) stays finite, "" when there is no basis. A cast or a scale by alpha is its
 * input times 1 or |alpha|, so its inputs' largest magnitude in_max gives it exactly; any
 * other backward value is linear in the incoming gradient too, so the last step whose values
 * at s were all finite gives it for that step's data (an estimate for this one's). */
static size_t safe_scale(const ampx_trainer *t, const g_node *n, int s, double scale, double lim,
                         double in_max, char *o, size_t cap) {
    double k = n->op == OP_CAST ? 1.0 : n->op == OP_SCALE ? fabs((double)n->a.alpha) : 0.0;
    if (k > 0 && in_max > 0)
        return (size_t)snprintf(o, cap, ", at most %.4g would have kept them finite",
                                scale * lim / (k * in_max));
    const tr_monitor *m = t->mon;
    if (!m->fr_step || m->fr_step[s] < 0 || !(m->fr_max[s] > 0) || !(m->fr_scale[s] > 0)) return 0;
    return (size_t)snprintf(o, cap,
                            ", and about %.4g would have kept them finite (at step %lld its "
                            "values reached %.4g under loss scale %.9g; backward values scale "
                            "with it)",
                            (double)m->fr_scale[s] * lim / (double)m->fr_max[s],
                            (long long)m->fr_step[s], (double)m->fr_max[s], (double)m->fr_scale[s]);
}

/* How the first non-finite value (scan position s of micro-batch a) came to be: the node
 * that created it from finite inputs, and the nodes after it that passed one on. */
static void describe_origin(ampx_trainer *t, const scan_view *v, int64_t a, int s) {
    const g_node *n  = &t->g.nodes[t->mon->scan_node[s]];
    const g_value *y = &t->g.values[t->mon->scan_value[s]];
    char ins[320], *o = t->mon->origin;
    const char *other = "";
    size_t cap        = sizeof t->mon->origin, len;
    float scale;
    scan_value sv;
    view_get(t, v, a, s, &sv);
    memcpy(&scale, v->slot + MON_SCALE, 4);
    double in_max;
    int created = inputs_finite(t, v, a, n, ins, sizeof ins, &other, &in_max);
    snprintf(t->mon->created_by, sizeof t->mon->created_by, "%s", created ? n->name : "");
    const char *phase  = n->phase == PHASE_BACKWARD ? "backward" : "forward";
    const g_rule *rule = g_rule_of(n->op);
    const char *op     = rule ? rule->name : "op";
    char counts[64];
    if (v->lean) /* an armed slot knows the kind, not the counts */
        snprintf(counts, sizeof counts, "%s", sv.nan ? "NaN" : "inf");
    else if (sv.nan >= 0) /* a backend without NaN counts leaves -1 */
        snprintf(counts, sizeof counts, "%d inf, %d NaN", sv.nonfinite - sv.nan, sv.nan);
    else
        snprintf(counts, sizeof counts, "%d non-finite", sv.nonfinite);
    if (created)
        len = (size_t)snprintf(o, cap,
                               "created by node %s (%s, %s, %s: %s in %s; %s holds magnitudes up "
                               "to %.5g) from finite inputs%s%s",
                               n->name, op, phase, ampx_dtype_name(y->dtype), counts, y->name,
                               ampx_dtype_name(y->dtype), watch_dtype_max(y->dtype),
                               ins[0] ? " (largest |x|: " : "", ins);
    else
        len = (size_t)snprintf(o, cap,
                               "reached node %s (%s, %s) through %s, an input the "
                               "monitor does not scan or that held one already",
                               n->name, op, phase, other);
    if (created && ins[0] && len < cap) len += (size_t)snprintf(o + len, cap - len, ")");
    if (len < cap)
        len += n->phase == PHASE_BACKWARD
                   ? (size_t)snprintf(o + len, cap - len, "; the gradients carried loss scale %.9g",
                                      (double)scale)
                   : (size_t)snprintf(o + len, cap - len,
                                      "; a forward value: no loss scale avoids it");
    if (created && n->phase == PHASE_BACKWARD && len < cap)
        len += safe_scale(t, n, s, scale, watch_dtype_max(y->dtype), in_max, o + len, cap - len);
    /* the nodes after it whose outputs held non-finite values passed it on, listed by name
     * (a node's backward nodes carry its name) */
    const char *seen[5] = {n->name};
    int shown = 0, more = 0;
    for (int q = s + 1; q < t->mon->n_scan; q++) {
        view_get(t, v, a, q, &sv);
        const char *name = t->g.nodes[t->mon->scan_node[q]].name;
        int dup          = 0;
        for (int k = 0; k <= shown && !dup; k++)
            dup = !strcmp(seen[k], name);
        if (sv.nonfinite <= 0 || dup) continue;
        if (shown == 4) {
            more++; /* counted per node, not per name, past the fourth */
            continue;
        }
        seen[++shown] = name;
        if (len < cap)
            len += (size_t)snprintf(o + len, cap - len, "%s%s",
                                    shown > 1 ? ", " : "; passed on by ", name);
    }
    if (more && len < cap) snprintf(o + len, cap - len, " and %d more", more);
}

/* The first scanned tensor of a step that held a non-finite value, and how it came to be;
 * then the parameters' gradients (a monitor slot has their statistics). */
void monitor_diagnose(ampx_trainer *t, const scan_view *v) {
    t->mon->first_nonfinite[0] = 0;
    t->mon->origin[0]          = 0;
    t->mon->created_by[0]      = 0;
    for (int64_t a = 0; a < t->A; a++)
        for (int s = 0; s < t->mon->n_scan; s++) {
            scan_value sv;
            view_get(t, v, a, s, &sv);
            if (sv.nonfinite > 0) {
                const g_node *n = &t->g.nodes[t->mon->scan_node[s]];
                snprintf(t->mon->first_nonfinite, sizeof t->mon->first_nonfinite,
                         "%s (%s of node %s%s)", t->g.values[t->mon->scan_value[s]].name,
                         n->phase == PHASE_BACKWARD ? "backward" : "forward", n->name,
                         t->A > 1 ? ", a micro-batch" : "");
                describe_origin(t, v, a, s);
                return;
            }
        }
    for (int k = 0; !v->lean && k < t->n_params; k++) {
        int32_t cn[3];
        memcpy(cn, v->slot + mon_off(t, MON_PCOUNTS) + 12 * (uint64_t)k, 12);
        if (cn[2] > 0) {
            snprintf(t->mon->first_nonfinite, sizeof t->mon->first_nonfinite,
                     "%s.grad (after the backward)", t->params[k].name);
            return;
        }
    }
}

/* After a step's slot is read: each scan position whose values were all finite (in every
 * micro-batch) keeps their largest |x|, the loss scale and the step, for safe_scale. */
void monitor_note_finite(ampx_trainer *t, const scan_view *v, int64_t step) {
    tr_monitor *m = t->mon;
    if (!m->fr_step) return;
    float scale;
    memcpy(&scale, v->slot + MON_SCALE, 4);
    for (int s = 0; s < m->n_scan; s++) {
        double mx = 0;
        int ok    = 1;
        for (int64_t a = 0; a < t->A && ok; a++) {
            scan_value sv;
            view_get(t, v, a, s, &sv);
            ok = sv.nonfinite == 0;
            if (sv.max_abs > mx) mx = sv.max_abs;
        }
        if (ok && mx > 0) m->fr_max[s] = (float)mx, m->fr_scale[s] = scale, m->fr_step[s] = step;
    }
}

static void monitor_read(ampx_trainer *t, int64_t i, ampx_step_record *r) {
    const unsigned char *ms = t->mon->host + (uint64_t)i * t->mon->slot_bytes;
    float mscale;
    memcpy(&mscale, ms + MON_SCALE, 4);
    read_health(t, ms, mscale);
    scan_view v = {ms, 0};
    monitor_diagnose(t, &v);
    monitor_note_finite(t, &v, r->step);
    r->health          = t->mon->health;
    r->n_health        = t->n_params;
    r->monitor_scale   = mscale;
    r->first_nonfinite = t->mon->first_nonfinite;
    r->created_by      = t->mon->created_by;
    r->overflow_origin = t->mon->origin;
    headroom_read(t, ms, r);
}

// ---------------------------------------------------------------------------------------
// The hook: a monitored step's slot, its nodes scanned, its parameters' statistics (in the
// fused AMP pass when the backend has it); each flush reads the slots of monitored steps

static ampx_status mon_begin(ampx_trainer *t, const step_view *s, int *on_nodes) {
    t->mon->live = *on_nodes = tr_monitored(t, t->step + 1);
    return t->mon->live ? monitor_begin_step(t, s->ring_at) : AMPX_OK;
}

static ampx_status mon_before_amp(ampx_trainer *t, const step_view *s, ampx_amp_pass_args *fused) {
    (void)s;
    if (!t->mon->live) return AMPX_OK;
    if (!fused) return monitor_param_stats(t, t->mon->buf, t->mon->slot_cur);
    monitor_amp_pass(t, fused);
    return AMPX_OK;
}

static ampx_status mon_end(ampx_trainer *t, const step_view *s, ampx_status st) {
    (void)s;
    t->mon->live = 0;
    return st;
}

static ampx_status mon_read(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq) {
    (void)buf, (void)wsq;
    if (!tr_monitored_in_flush(t, n)) return AMPX_OK;
    return tr_check(
        t,
        t->ifc->buffer_read(t->ctx, t->mon->buf, 0, t->mon->host, t->mon->slot_bytes * (uint64_t)n),
        "buffer_read");
}

static void mon_record(ampx_trainer *t, int64_t i, ampx_step_record *r) {
    if (tr_monitored(t, r->step)) monitor_read(t, i, r);
}

const step_hook monitor_hook = {.name       = "monitor",
                                .begin      = mon_begin,
                                .after_node = monitor_scan_node,
                                .before_amp = mon_before_amp,
                                .end        = mon_end,
                                .read       = mon_read,
                                .record     = mon_record,
                                .release    = monitor_free};

// ---------------------------------------------------------------------------------------
// The API

ampx_status ampx_trainer_grad_health(ampx_trainer *t, ampx_tensor_health *out) {
    ampx_status st = monitor_setup(t);
    if (st) return st;
    st =
        tr_check(t, t->ifc->buffer_fill(t->ctx, t->mon->buf, 0, t->mon->slot_bytes, 0xFFFFFFFFu, 4),
                 "buffer_fill");
    if (!st) st = monitor_param_stats(t, t->mon->buf, 0);
    if (!st)
        st = tr_check(t,
                      t->ifc->buffer_read(t->ctx, t->mon->buf, 0, t->mon->host, t->mon->slot_bytes),
                      "buffer_read");
    if (st) return st;
    read_health(t, t->mon->host, 1.0);
    memcpy(out, t->mon->health, sizeof *out * (size_t)t->n_params);
    return AMPX_OK;
}
