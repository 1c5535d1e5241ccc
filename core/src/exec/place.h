/* place.h — running one graph on an ordered list of backends (members): what each node's
 * calls need of each member (the probe, before the placement pass), and, while the executor
 * runs, where each value's bytes are valid. A value lives at home (the member that holds the
 * parameters, the optimizer state, the scalars block and the plan's arena) and gets a mirror
 * on each other member that runs a node touching it; before a node runs on a member, every
 * value it touches is made valid there (one download from where it is valid, one upload: a
 * planned copy), and what the node writes is valid there alone. At the end of each run every
 * value is valid at home again, so everything outside the nodes (the step's AMP pass,
 * optimizer and scaler, the hooks, checkpoints) sees the one backend it always saw. */
#ifndef AMPX_EXEC_PLACE_H
#define AMPX_EXEC_PLACE_H

#include <stdint.h>

#include "backend/call.h"
#include "graph/graph.h"
#include "passes/caps.h"

/* The three blocks the rules reach outside the values (slots n_values + k). */
enum { PLACE_SCALARS, PLACE_FP8_STATE, PLACE_FP8_COUNTS, PLACE_PSEUDO };

/* Values a node touches and which of them it writes (roots; slots n_values + PLACE_*). */
typedef struct place_touch {
    int first, count; /* into the touched lists */
} place_touch;

typedef struct place_probe {
    pass_need *need;    /* per node */
    place_touch *touch; /* per node */
    int *slot;          /* touched slots, in order */
    uint8_t *writes;    /* per touched entry: 1 when the node writes it */
    int n_touched, cap;
} place_probe;

/* Runs each node's forward rule against a recording executor over g at `rows` rows
 * (training: whether the backward runs), asking each of the n members whether it takes each
 * call as issued (call_accepts). 0, or -1 when out of memory. */
int place_probe_run(place_probe *p, const g_graph *g, uint64_t rows, int training,
                    ampx_backend *const *members, int n);
void place_probe_free(place_probe *p);

/* Bytes the copies move per run of nodes [first, last) under node_member (home: the member
 * holding everything else), as the executor's coherence does them; sizes: bytes of each
 * slot (values at `rows` rows, then PLACE_PSEUDO blocks). per_node (optional): bytes copied
 * in before each node. Returns the total. */
uint64_t place_simulate(const place_probe *p, const g_graph *g, const int8_t *node_member, int home,
                        int first, int last, const uint64_t *sizes, int keep, uint64_t *per_node);

/* The executor's state while a placed graph runs (executor.pl; NULL: one backend). */
typedef struct exec_place {
    int n, home;
    call_ctx *calls[PLACE_MAX]; /* per member; [home] is the executor's call */
    const int8_t *node_member;  /* per node */
    int n_slots;                /* values + PLACE_PSEUDO */
    uint8_t *valid;             /* per slot: bit m when member m holds its bytes */
    uint8_t *transient;         /* per slot: 1 for a value of the plan's arena */
    ampx_buffer **mirror;       /* [member * n_slots + slot] */
    uint64_t *mirror_bytes;
    uint64_t pseudo_bytes[PLACE_PSEUDO];
    int keep;                /* the plan keeps every value (a sampler's KV cache) */
    int fault;               /* tests: a planted fault (place.c), 0 none */
    int cur;                 /* the member of the node being run, -1 outside */
    int *touched, n_touched; /* the slots the node being run has touched (n_slots) */
    void *staging;
    uint64_t staging_cap;
    uint64_t moved[PLACE_MAX][PLACE_MAX]; /* bytes copied from member a to member b */
    uint64_t copies;
    uint64_t copy_ns; /* host time the copies took (each waits for its source's work first) */
    /* placement "measured": while set, every node is timed on its member (all members idle
     * first, its member synchronized after it), copies included, into node_ns[node * n + m] */
    int measure;
    double *node_ns;
} exec_place;

/* The executor's side (exec_run and the rules' questions, executor.c). */
typedef struct executor executor;
/* A run of nodes from `first`: every slot valid at home (a run from the graph's first node
 * produces every arena value itself: those are valid nowhere yet). */
void place_run_begin(executor *x, int first);
void place_node_begin(executor *x, int node);
/* Slot s is touched by the node being run: made valid on its member, and *t (its tensor at
 * home) moved to that member's mirror. */
ampx_status place_touch_slot(executor *x, int s, ampx_tensor *t);
ampx_status place_node_end(executor *x, int node, int write_through);
/* Measuring: every member idle, then the clock (ns); after node `node`, its member idle and
 * the time since t0 added to node_ns. */
int64_t place_idle_ns(executor *x);
ampx_status place_timed(executor *x, int node, int64_t t0);
/* Every slot valid at home again. */
ampx_status place_run_end(executor *x);
/* Allocates the tables of pl for graph g (n_slots, valid, mirrors, touched); frees them and
 * the mirrors. */
int place_init(exec_place *pl, const g_graph *g);
void place_free(exec_place *pl);

#endif
