/* placed.c — a trainer on an ordered backend list (placed.h). */
#include "exec/placed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "exec/fp8.h"
#include "exec/hooks.h"
#include "graph/ops.h"

int step_ops_needed(const ampx_trainer *t, const g_graph *g, uint32_t *ops) {
    if (t->inference) return 0;
    int n = 0, copies = 0;
    for (int v = 0; v < g->n_values; v++)
        copies |= g->values[v].master >= 0;
    ops[n++] = AMPX_OP_UNSCALE_CHECK;
    ops[n++] = AMPX_OP_SUM_SQUARES;
    ops[n++] = AMPX_OP_SCALER_UPDATE;
    ops[n++] = t->m->cfg.opt.kind == OPT_ADAMW ? AMPX_OP_ADAMW : AMPX_OP_SGD;
    if (copies) ops[n++] = AMPX_OP_CAST;
    if (g->n_fp8) ops[n++] = AMPX_OP_FP8_SCALE_UPDATE;
    return n;
}

ampx_status placed_open(ampx_trainer *t, ampx_backend *be) {
    tr_placed *p = &t->place;
    p->n         = ampx_backend_count(be);
    for (int m = 0; m < p->n; m++)
        p->members[m] = ampx_backend_member(be, m);
    p->home = 0;
    if (p->n > 1 && t->m->cfg.place.mode != PLACEMENT_STRICT) {
        uint32_t ops[8];
        int k = step_ops_needed(t, &t->m->graph, ops), found = -1;
        for (int m = 0; m < p->n && found < 0; m++) {
            int all = 1;
            for (int i = 0; i < k && all; i++)
                all = ampx_backend_op_slot(p->members[m], ops[i]) != NULL;
            if (all) found = m;
        }
        p->home = found < 0 ? 0 : found; /* none: the first, whose refusal names the op */
    }
    t->be  = p->members[p->home];
    t->ifc = ampx_backend_iface_of(t->be);
    t->ctx = ampx_backend_context(t->be);
    for (int m = 0; m < p->n; m++)
        if (m != p->home) call_init(&p->calls[m], p->members[m], tr_err(t)), p->calls[m].track = m;
    return AMPX_OK;
}

ampx_backend *placed_gemm_member(const ampx_trainer *t) {
    for (int m = 0; m < t->place.n; m++)
        if (ampx_backend_op_slot(t->place.members[m], AMPX_OP_GEMM)) return t->place.members[m];
    return t->be;
}

ampx_status placed_probe(ampx_trainer *t, pass_job *job) {
    tr_placed *p = &t->place;
    if (p->n < 2) return AMPX_OK;
    if (place_probe_run(&p->probe, &t->g, (uint64_t)t->B, !t->inference, p->members, p->n))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    pass_placing *q = &p->placing;
    q->n            = p->n;
    q->home         = p->home;
    q->need         = p->probe.need;
    q->cfg          = &t->m->cfg.place;
    for (int m = 0; m < p->n; m++)
        snprintf(q->names[m], sizeof q->names[m], "%s", ampx_backend_iface_of(p->members[m])->name);
    job->place = q;
    return AMPX_OK;
}

/* Bytes of each slot at the trainer's batch (values, then the blocks outside them). */
static uint64_t *slot_sizes(const ampx_trainer *t) {
    const g_graph *g = &t->g;
    uint64_t *sz     = calloc((size_t)g->n_values + PLACE_PSEUDO, sizeof *sz);
    if (!sz) return NULL;
    for (int v = 0; v < g->n_values; v++)
        sz[v] = v == g->loss
                    ? 4
                    : g_numel(&g->values[v], (uint64_t)t->B) * ampx_dtype_size(g->values[v].dtype);
    sz[g->n_values + PLACE_SCALARS] = sizeof(ampx_scalars);
    uint64_t history = (uint64_t)(t->fp8_history ? t->fp8_history : t->m->cfg.pol.fp8.history);
    sz[g->n_values + PLACE_FP8_STATE]  = (2 + history) * (uint64_t)g->n_fp8 * 4;
    sz[g->n_values + PLACE_FP8_COUNTS] = (uint64_t)g->n_fp8 * 8;
    return sz;
}

static ampx_status measure_setup(ampx_trainer *t);

/* Whether member m has every op the step issues outside the nodes. */
static int has_step_ops(const ampx_trainer *t, int m) {
    uint32_t ops[8];
    int k = step_ops_needed(t, &t->g, ops);
    for (int i = 0; i < k; i++)
        if (!ampx_backend_op_slot(t->place.members[m], ops[i])) return 0;
    return 1;
}

void placed_choose_home(ampx_trainer *t) {
    tr_placed *p = &t->place;
    if (p->n < 2 || !p->placing.member || t->m->cfg.place.mode == PLACEMENT_STRICT) return;
    uint64_t *sz = slot_sizes(t);
    if (!sz) return;
    int last = t->inference ? t->g.n_forward : t->g.n_nodes, best = p->home;
    uint64_t least = UINT64_MAX;
    for (int m = 0; m < p->n; m++) {
        if (!has_step_ops(t, m)) continue;
        /* a view sits with the home: nothing runs for it, so where is only bookkeeping */
        for (int i = 0; i < t->g.n_nodes; i++)
            if (p->placing.why[i] == PLACE_VIEW) p->placing.member[i] = (int8_t)m;
        uint64_t b = place_simulate(&p->probe, &t->g, p->placing.member, m, 0, last, sz,
                                    t->inference != 0, NULL);
        if (b < least) least = b, best = m;
    }
    free(sz);
    for (int i = 0; i < t->g.n_nodes; i++)
        if (p->placing.why[i] == PLACE_VIEW) p->placing.member[i] = (int8_t)best;
    if (best == p->home) return;
    p->home         = best;
    p->placing.home = best;
    t->be           = p->members[best];
    t->ifc          = ampx_backend_iface_of(t->be);
    t->ctx          = ampx_backend_context(t->be);
    call_init(&t->call, t->be, tr_err(t));
    t->call.track = best;
    for (int m = 0; m < p->n; m++)
        if (m != best) call_init(&p->calls[m], p->members[m], tr_err(t)), p->calls[m].track = m;
}

ampx_status placed_attach(ampx_trainer *t) {
    tr_placed *p = &t->place;
    if (p->n < 2) return AMPX_OK;
    exec_place *r = &p->run;
    if (place_init(r, &t->g)) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    r->n           = p->n;
    r->home        = p->home;
    r->keep        = t->inference != 0;
    r->node_member = p->placing.member;
    for (int m = 0; m < p->n; m++)
        r->calls[m] = m == p->home ? &t->call : &p->calls[m];
    uint64_t *sz = slot_sizes(t);
    if (!sz) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int k = 0; k < PLACE_PSEUDO; k++)
        r->pseudo_bytes[k] = sz[t->g.n_values + k];
    p->node_bytes = calloc((size_t)t->g.n_nodes + 1, sizeof *p->node_bytes);
    if (!p->node_bytes) {
        free(sz);
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    }
    int last      = t->inference ? t->g.n_forward : t->g.n_nodes;
    p->step_bytes = place_simulate(&p->probe, &t->g, p->placing.member, p->home, 0, last, sz,
                                   r->keep, p->node_bytes) *
                    (uint64_t)(t->inference ? 1 : t->A);
    free(sz);
    t->x.pl = r;
    if (t->m->cfg.place.mode == PLACEMENT_MEASURED && !t->inference) return measure_setup(t);
    return AMPX_OK;
}

void placed_free(ampx_trainer *t) {
    tr_placed *p = &t->place;
    if (p->run.valid) place_free(&p->run);
    place_probe_free(&p->probe);
    pass_placing_free(&p->placing);
    free(p->node_bytes);
    p->node_bytes = NULL;
}

// ---------------------------------------------------------------------------------------
// The listing

/* "3.1 MiB", "412 B" */
static void human(uint64_t bytes, char *buf, size_t cap) {
    if (bytes >= 1u << 20)
        snprintf(buf, cap, "%.1f MiB", (double)bytes / 1048576.0);
    else if (bytes >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)bytes / 1024.0);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
}

static const char *member_name(const ampx_trainer *t, int m) {
    return t->place.placing.names[m];
}

/* "placement: 41 nodes on example, 23 on cpu (layernorm, softmax_xent, ...); 3.1 MiB copied
 * per step" */
static void summary(const ampx_trainer *t, char *buf, size_t cap) {
    const tr_placed *p   = &t->place;
    int count[PLACE_MAX] = {0}, last = t->inference ? t->g.n_forward : t->g.n_nodes;
    for (int i = 0; i < last; i++)
        if (p->placing.why[i] != PLACE_VIEW) count[p->placing.member[i]]++;
    size_t k = (size_t)snprintf(buf, cap, "placement:");
    for (int m = 0; m < p->n && k < cap; m++) {
        k += (size_t)snprintf(buf + k, cap - k, "%s %d node%s on %s", m ? "," : "", count[m],
                              count[m] == 1 ? "" : "s", member_name(t, m));
        if (m == 0 || !count[m]) continue;
        /* the kinds of node that fell back to it, each once */
        const char *kinds[8];
        int nk = 0, more = 0;
        for (int i = 0; i < last; i++) {
            if (p->placing.member[i] != m || p->placing.why[i] == PLACE_VIEW) continue;
            const char *name = g_rule_of(t->g.nodes[i].op)->name;
            int seen         = 0;
            for (int j = 0; j < nk && !seen; j++)
                seen = !strcmp(kinds[j], name);
            if (!seen && nk < 8)
                kinds[nk++] = name;
            else if (!seen)
                more = 1;
        }
        for (int j = 0; j < nk && k < cap; j++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", j ? ", " : " (", kinds[j]);
        if (nk && k < cap) k += (size_t)snprintf(buf + k, cap - k, "%s)", more ? ", ..." : "");
    }
    char b[32];
    human(p->step_bytes, b, sizeof b);
    if (k < cap)
        snprintf(buf + k, cap - k,
                 "; %s copied per %s; home %s (parameters, optimizer state, "
                 "the step's own ops)",
                 b, t->inference ? "call" : "step", member_name(t, p->home));
}

static const char *why_words(int why) {
    switch (why) {
    case PLACE_VIEW: return "a view: nothing runs";
    case PLACE_FIRST: return "first of the list";
    case PLACE_RULE: return "placement rule";
    case PLACE_MEASURED: return "fastest measured";
    default: return "fallback";
    }
}

void ampx_trainer_placement(const ampx_trainer *t, int full, ampx_line_fn line, void *user) {
    const tr_placed *p = &t->place;
    char buf[1024];
    if (p->n < 2) {
        if (full)
            linef(line, user, "placement: one backend (%s): every node on it, nothing copied",
                  t->ifc->name);
        return;
    }
    if (full == 2) { /* what placement "measured" found, when it has */
        if (p->report[0]) line(user, p->report);
        if (p->report[0]) summary(t, buf, sizeof buf), line(user, buf);
        return;
    }
    summary(t, buf, sizeof buf);
    line(user, buf);
    if (p->report[0]) line(user, p->report);
    if (!full) return;
    int last = t->inference ? t->g.n_forward : t->g.n_nodes;
    linef(line, user, "%5s  %-28s %-14s %-5s %-10s %10s  %s", "node", "name", "op", "dtype",
          "backend", "copied in", "why");
    for (int i = 0; i < last; i++) {
        const g_node *n = &t->g.nodes[i];
        int m = p->placing.member[i], why = p->placing.why[i];
        char b[32], reason[400];
        human(p->node_bytes[i], b, sizeof b);
        if (why == PLACE_FALLBACK) {
            size_t k = 0;
            for (int e = 0; e < m && k < sizeof reason; e++) {
                char one[200];
                place_refusal(&p->placing, i, e, one, sizeof one);
                k += (size_t)snprintf(reason + k, sizeof reason - k, "%s%s", e ? "; " : "", one);
            }
        } else if (why == PLACE_RULE) {
            const placement_rule *r = &t->m->cfg.place.rules[p->placing.rule[i]];
            snprintf(reason, sizeof reason, "%s (\"%s\" at %s)", why_words(why), r->glob, r->where);
        } else {
            snprintf(reason, sizeof reason, "%s", why_words(why));
        }
        linef(line, user, "%5d  %-28.28s %-14s %-5s %-10s %10s  %s", i, n->name,
              g_rule_of(n->op)->name, ampx_dtype_name(n->dtype), member_name(t, m), b, reason);
    }
    char b[32];
    human(p->step_bytes, b, sizeof b);
    linef(line, user,
          "copies: %s per %s as planned (each value a node reads on another backend: one download "
          "and one upload; what it writes back home by the end of each micro-batch)",
          b, t->inference ? "call" : "step");
}

uint64_t ampx_trainer_copies(const ampx_trainer *t, double *seconds) {
    uint64_t n = 0;
    for (int a = 0; a < PLACE_MAX; a++)
        for (int b = 0; b < PLACE_MAX; b++)
            n += t->place.run.moved[a][b];
    if (seconds) *seconds = (double)t->place.run.copy_ns / 1e9;
    return n;
}

// ---------------------------------------------------------------------------------------
// Placement "measured": the first steps time each node on every member that takes it

enum { MEASURE_REPS = 2 };

/* Whether node i may move: placed by the first-fit rule (not a rule, not a view) and taken
 * by more than one member. */
static int movable(const tr_placed *p, int i) {
    int why = p->placing.why[i];
    return (why == PLACE_FIRST || why == PLACE_FALLBACK) &&
           __builtin_popcount(p->placing.need[i].ok) > 1;
}

/* The k-th member (in list order, modulo their count) that takes node i. */
static int candidate(const tr_placed *p, int i, int k) {
    unsigned ok = p->placing.need[i].ok;
    int n       = __builtin_popcount(ok);
    k %= n;
    for (int m = 0; m < p->n; m++)
        if (ok >> m & 1 && k-- == 0) return m;
    return p->placing.member[i];
}

static ampx_status measure_setup(ampx_trainer *t) {
    tr_placed *p = &t->place;
    int nn = t->g.n_nodes, v = 0;
    for (int i = 0; i < nn; i++)
        if (movable(p, i))
            v = __builtin_popcount(p->placing.need[i].ok) > v
                    ? __builtin_popcount(p->placing.need[i].ok)
                    : v;
    if (v < 2) return AMPX_OK; /* nothing to choose: the first-fit placement stands */
    if (t->dp.world > 1)
        return tr_fail(t, AMPX_ERR_UNSUPPORTED,
                       "placement \"measured\" in a data-parallel run: not available yet (each "
                       "rank would time and choose on its own): use \"first\" with --place rules");
    size_t cells = (size_t)nn * (size_t)p->n;
    p->variants  = v;
    p->reps      = MEASURE_REPS;
    p->assign    = calloc((size_t)(v + 1) * (size_t)nn, 1);
    p->node_ns   = calloc(cells, sizeof *p->node_ns);
    p->sum_ns    = calloc(cells, sizeof *p->sum_ns);
    p->runs      = calloc(cells, sizeof *p->runs);
    if (!p->assign || !p->node_ns || !p->sum_ns || !p->runs)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int k = 0; k < v; k++)
        for (int i = 0; i < nn; i++)
            p->assign[(size_t)k * (size_t)nn + (size_t)i] =
                (int8_t)(movable(p, i) ? candidate(p, i, k) : p->placing.member[i]);
    p->measuring   = (v + 1) * MEASURE_REPS;
    p->run.node_ns = p->node_ns;
    return AMPX_OK;
}

/* The variant a measuring step runs: each variant in turn, then the per-node best. */
static int step_variant(const tr_placed *p) {
    return p->step_i < p->variants * p->reps ? p->step_i % p->variants : p->variants;
}

static void per_node_best(tr_placed *p, int nn) {
    int8_t *best = p->assign + (size_t)p->variants * (size_t)nn;
    for (int i = 0; i < nn; i++) {
        best[i] = p->assign[i];
        if (!movable(p, i)) continue;
        double lo = 0;
        for (int m = 0; m < p->n; m++) {
            size_t c = (size_t)i * (size_t)p->n + (size_t)m;
            if (!p->runs[c]) continue;
            double avg = p->sum_ns[c] / p->runs[c];
            if (lo == 0 || avg < lo) lo = avg, best[i] = (int8_t)m;
        }
    }
}

/* The planned copies of the placement as it now is. */
static void replan_bytes(ampx_trainer *t) {
    tr_placed *p = &t->place;
    uint64_t *sz = slot_sizes(t);
    if (!sz) return;
    int last      = t->inference ? t->g.n_forward : t->g.n_nodes;
    p->step_bytes = place_simulate(&p->probe, &t->g, p->placing.member, p->home, 0, last, sz,
                                   p->run.keep, p->node_bytes) *
                    (uint64_t)(t->inference ? 1 : t->A);
    free(sz);
}

/* The fastest of the variants and the per-node best becomes the placement, with a report. */
static void measure_decide(ampx_trainer *t) {
    tr_placed *p = &t->place;
    int nn = t->g.n_nodes, win = 0;
    double best = 0;
    for (int k = 0; k <= p->variants; k++) {
        double avg = p->variant_steps[k] ? p->variant_ns[k] / p->variant_steps[k] : 0;
        if (avg > 0 && (best == 0 || avg < best)) best = avg, win = k;
    }
    memcpy(p->placing.member, p->assign + (size_t)win * (size_t)nn, (size_t)nn);
    int moved = 0;
    for (int i = 0; i < nn; i++)
        if (movable(p, i)) p->placing.why[i] = PLACE_MEASURED, moved++;
    size_t k = (size_t)snprintf(p->report, sizeof p->report,
                                "placement measured over %d steps (node time per step, copies "
                                "included):",
                                p->step_i);
    for (int v = 0; v <= p->variants && k < sizeof p->report; v++) {
        const char *what = v == p->variants ? "per-node best" : p->placing.names[v];
        k += (size_t)snprintf(p->report + k, sizeof p->report - k, "%s %s%s %.2f ms", v ? "," : "",
                              what, v == p->variants ? "" : " where it can",
                              p->variant_steps[v] ? p->variant_ns[v] / p->variant_steps[v] / 1e6
                                                  : 0);
    }
    if (k < sizeof p->report)
        snprintf(p->report + k, sizeof p->report - k,
                 "; chose %s%s for the %d nodes more than one "
                 "backend takes",
                 win == p->variants ? "the per-node best" : p->placing.names[win],
                 win == p->variants ? "" : " where it can", moved);
    replan_bytes(t);
}

static ampx_status measure_begin(ampx_trainer *t, const step_view *s, int *on_nodes) {
    (void)s, (void)on_nodes;
    tr_placed *p = &t->place;
    if (!p->measuring) return AMPX_OK;
    int nn = t->g.n_nodes;
    memcpy(p->placing.member, p->assign + (size_t)step_variant(p) * (size_t)nn, (size_t)nn);
    memset(p->node_ns, 0, sizeof *p->node_ns * (size_t)nn * (size_t)p->n);
    p->run.measure = 1;
    return AMPX_OK;
}

static ampx_status measure_end(ampx_trainer *t, const step_view *s, ampx_status st) {
    (void)s;
    tr_placed *p = &t->place;
    if (!p->measuring) return st;
    p->run.measure = 0;
    if (st) return st;
    int nn = t->g.n_nodes, v = step_variant(p);
    double total = 0;
    for (size_t c = 0; c < (size_t)nn * (size_t)p->n; c++) {
        if (p->node_ns[c] == 0) continue;
        total += p->node_ns[c];
        p->sum_ns[c] += p->node_ns[c];
        p->runs[c]++;
    }
    p->variant_ns[v] += total;
    p->variant_steps[v]++;
    p->step_i++;
    if (p->step_i == p->variants * p->reps) per_node_best(p, nn);
    if (--p->measuring == 0) measure_decide(t);
    return st;
}

static void measure_release(ampx_trainer *t) {
    tr_placed *p = &t->place;
    free(p->assign), free(p->node_ns), free(p->sum_ns), free(p->runs);
    p->assign = NULL, p->node_ns = NULL, p->sum_ns = NULL, p->runs = NULL;
}

const step_hook placed_hook = {
    .name = "placement", .begin = measure_begin, .end = measure_end, .release = measure_release};

// ---------------------------------------------------------------------------------------
// The choice in checkpoints

static size_t list_key(const tr_placed *p, char *buf, size_t cap) {
    size_t k = 0;
    for (int m = 0; m < p->n && k < cap; m++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", m ? "," : "", p->placing.names[m]);
    return k < cap ? k : cap;
}

char *placed_choice(const ampx_trainer *t) {
    const tr_placed *p = &t->place;
    if (p->n < 2 || !p->report[0] || t->m->cfg.place.mode != PLACEMENT_MEASURED) return NULL;
    size_t cap = 8 * 70 + (size_t)t->g.n_nodes + 2;
    char *s    = malloc(cap);
    if (!s) return NULL;
    size_t k = list_key(p, s, cap);
    if (k + (size_t)t->g.n_nodes + 2 > cap) {
        free(s);
        return NULL;
    }
    s[k++] = ':';
    for (int i = 0; i < t->g.n_nodes; i++)
        s[k++] = (char)('0' + p->placing.member[i]);
    s[k] = 0;
    return s;
}

void placed_restore(ampx_trainer *t, const char *choice) {
    tr_placed *p = &t->place;
    if (p->n < 2 || t->m->cfg.place.mode != PLACEMENT_MEASURED || !p->measuring) return;
    char key[8 * 70];
    size_t k = list_key(p, key, sizeof key);
    int nn = t->g.n_nodes, fits = strncmp(choice, key, k) == 0 && choice[k] == ':' &&
                                  strlen(choice + k + 1) == (size_t)nn;
    for (int i = 0; fits && i < nn; i++) {
        int m = choice[k + 1 + i] - '0';
        fits  = m >= 0 && m < p->n && (p->placing.need[i].ok >> m & 1 || !movable(p, i)) &&
               (movable(p, i) || m == p->placing.member[i]);
    }
    if (!fits) {
        snprintf(t->notice, sizeof t->notice,
                 "the checkpoint's measured placement is for another backend list or graph: "
                 "this run measures again");
        return;
    }
    for (int i = 0; i < nn; i++) {
        p->placing.member[i] = (int8_t)(choice[k + 1 + i] - '0');
        if (movable(p, i)) p->placing.why[i] = PLACE_MEASURED;
    }
    p->measuring = 0;
    replan_bytes(t);
    snprintf(p->report, sizeof p->report,
             "placement measured in the run this one resumes (kept in the checkpoint): %s", key);
}
