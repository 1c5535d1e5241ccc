/* place.h — the placement pass: on an ordered backend list, the member each node runs on and
 * why. The members' abilities come as data (pass_need per node, from a probe of the calls
 * each node issues); the pass touches no backend. */
#ifndef AMPX_PASSES_PLACE_H
#define AMPX_PASSES_PLACE_H

#include <stdint.h>

#include "base/error.h"
#include "config/settings.h"
#include "graph/graph.h"
#include "passes/caps.h"

/* Why a node runs where it does. */
typedef enum place_why {
    PLACE_VIEW,     /* it issues nothing (a view, a fused node): placed with its neighbours */
    PLACE_FIRST,    /* the first backend of the list takes it */
    PLACE_FALLBACK, /* an earlier backend does not take it (need.refused_*) */
    PLACE_RULE,     /* a placement rule names its backend */
    PLACE_MEASURED, /* it ran fastest there, copies included (placement "measured") */
} place_why;

typedef struct pass_placing {
    int n; /* members; below 2 the pass does nothing */
    char names[PLACE_MAX][64];
    int home;                    /* the member holding the values and the step's own ops */
    const pass_need *need;       /* per node */
    const placement_config *cfg; /* mode and rules */
    int8_t *member;              /* the pass's: per node */
    uint8_t *why;                /* the pass's: per node, a place_why */
    int16_t *rule;               /* the pass's: per node, the rule that placed it, or -1 */
} pass_placing;

/* Places every node of g (the pass): 0, or -1 with e set (a node no member takes, a rule
 * naming no member or a member that cannot run its node, or a fallback under "strict"). */
int place_nodes(const g_graph *g, pass_placing *p, ampx_err e);
void pass_placing_free(pass_placing *p);
/* "example has no layernorm_bwd" / "example does not take softmax_fwd bf16,f32": why member
 * m does not run node i, into buf. */
void place_refusal(const pass_placing *p, int i, int m, char *buf, size_t cap);

#endif
