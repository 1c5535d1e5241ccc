/* place.c — the placement pass (place.h). */
#include "passes/place.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"

void place_refusal(const pass_placing *p, int i, int m, char *buf, size_t cap) {
    const pass_need *q = &p->need[i];
    const char *op     = ampx_op_name(q->refused_op[m]);
    if (!op) op = "?";
    if (q->no_slot[m])
        snprintf(buf, cap, "%s has no %s", p->names[m], op);
    else
        snprintf(buf, cap, "%s does not take %s %s", p->names[m], op, q->refused_dtypes[m]);
}

static int member_named(const pass_placing *p, const char *name) {
    for (int m = 0; m < p->n; m++)
        if (strcmp(p->names[m], name) == 0) return m;
    return -1;
}

/* The last rule whose glob matches node n's name (later rules win), or -1. */
static int rule_for(const placement_config *c, const g_node *n) {
    for (int r = c->n_rules - 1; r >= 0; r--)
        if (fnmatch(c->rules[r].glob, n->name, 0) == 0) return r;
    return -1;
}

static void list_names(const pass_placing *p, char *buf, size_t cap) {
    size_t k = 0;
    buf[0]   = 0;
    for (int m = 0; m < p->n && k < cap; m++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", m ? ", " : "", p->names[m]);
}

int place_nodes(const g_graph *g, pass_placing *p, ampx_err e) {
    if (p->n < 2) return 0;
    p->member = calloc((size_t)g->n_nodes + 1, sizeof *p->member);
    p->why    = calloc((size_t)g->n_nodes + 1, sizeof *p->why);
    p->rule   = calloc((size_t)g->n_nodes + 1, sizeof *p->rule);
    if (!p->member || !p->why || !p->rule) {
        err_set(e, "out of memory");
        return -1;
    }
    const placement_config *c = p->cfg;
    char names[512], why[256];
    list_names(p, names, sizeof names);
    for (int r = 0; r < c->n_rules; r++)
        if (member_named(p, c->rules[r].backend) < 0) {
            err_set(e,
                    "%s: placement rule \"%s\" names backend '%s', which is not in the list (%s)",
                    c->rules[r].where, c->rules[r].glob, c->rules[r].backend, names);
            return -1;
        }
    for (int i = 0; i < g->n_nodes; i++) {
        const g_node *n    = &g->nodes[i];
        const pass_need *q = &p->need[i];
        int r              = rule_for(c, n);
        p->rule[i]         = (int16_t)r;
        if (!q->ops) { /* a view: nothing runs, nothing is copied for it */
            p->member[i] = (int8_t)p->home;
            p->why[i]    = PLACE_VIEW;
            continue;
        }
        if (r >= 0) {
            int m = member_named(p, c->rules[r].backend);
            if (!(q->ok >> m & 1)) {
                place_refusal(p, i, m, why, sizeof why);
                err_set(e, "%s: placement rule \"%s\" puts node \"%s\" on %s, but %s",
                        c->rules[r].where, c->rules[r].glob, n->name, p->names[m], why);
                return -1;
            }
            p->member[i] = (int8_t)m;
            p->why[i]    = PLACE_RULE;
            continue;
        }
        int m = 0;
        while (m < p->n && !(q->ok >> m & 1))
            m++;
        if (c->mode == PLACEMENT_STRICT && m != 0) {
            place_refusal(p, i, 0, why, sizeof why);
            err_set(e,
                    "backend %s, which node \"%s\" needs (placement \"strict\" runs every node on "
                    "the first backend of the list)",
                    why, n->name);
            return -1;
        }
        if (m == p->n) {
            size_t k = 0;
            for (int b = 0; b < p->n && k < sizeof why; b++) {
                char one[160];
                place_refusal(p, i, b, one, sizeof one);
                k += (size_t)snprintf(why + k, sizeof why - k, "%s%s", b ? "; " : "", one);
            }
            err_set(e, "node \"%s\" runs on no backend of the list: %s", n->name, why);
            return -1;
        }
        p->member[i] = (int8_t)m;
        p->why[i]    = m == 0 ? PLACE_FIRST : PLACE_FALLBACK;
    }
    return 0;
}

void pass_placing_free(pass_placing *p) {
    free(p->member), free(p->why), free(p->rule);
    p->member = NULL, p->why = NULL, p->rule = NULL;
}
