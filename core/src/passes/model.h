/* model.h — a loaded model: its settings and its forward graph with the precision policy
 * applied (dtypes chosen with their reasons, cast nodes inserted). The trainer copies the
 * graph and runs autodiff and the planner on its copy. */
#ifndef AMPX_PASSES_MODEL_H
#define AMPX_PASSES_MODEL_H

#include <stdarg.h>
#include <stdio.h>

#include "ampx/train.h"
#include "base/error.h"
#include "config/settings.h"
#include "graph/graph.h"

struct ampx_model {
    settings cfg;
    g_graph graph;
    g_graph raw; /* the graph as built, before the policy pass */
};

/* The policy pass: each forward node's dtype with a reason code, working copies of the
 * weights read in low precision, cast nodes in front of nodes that read their input in
 * their own dtype. Errors go to err. */
int policy_resolve(ampx_model *m, ampx_err e);
/* The same pass over graph g as built, under policy p; -1 with a message in msg. */
int policy_apply(g_graph *g, const policy *p, ampx_err e);
/* 1 when the trainer casts m's working copies on use (copies.h): train.weight_copies "cast",
 * or "auto" when keeping them would make the planned total larger than under f32 (never with
 * stochastic rounding, whose copies are not casts of their masters). */
int model_casts_copies(const ampx_model *m);
/* The words for a reason code. */
const char *policy_why(g_why why);

/* One printf-formatted line (at most 511 bytes) to a describing callback (describe.c and
 * memory.c print through it). */
static inline void linef(ampx_line_fn line, void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void linef(ampx_line_fn line, void *user, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    line(user, buf);
}

#endif
