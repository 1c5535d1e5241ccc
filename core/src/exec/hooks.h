/* hooks.h — what attaches to a training step. The step (step.c) is the handful of calls a
 * step is: the micro-batches' forward and backward, the AMP pass, the optimizer, the
 * scaler. Everything else that must see a step (the gradient monitor, armed forensics, the
 * data-parallel all-reduce and ZeRO-1, fp8 scaling, the trace timeline, fault injection)
 * is a step_hook: a table of optional callbacks, each called at its point of every step and
 * of every flush of the records. step_hooks[] in train/hooks.c lists them, in the order they run;
 * a trainer runs the list it was created with (t->hooks).
 *
 * A hook sees the trainer and the step's view; it keeps its own state in its part of the
 * trainer. A callback that fails returns the status with t->error written; the step stops
 * there. */
#ifndef AMPX_HOOKS_H
#define AMPX_HOOKS_H

#include "exec/trainer.h"

/* A ring slot (step.c): the scalars block after the step, the squared gradient norm, the
 * micro-batches' losses (A f32), then the parameters' non-finite flags (n_params i32). */
#define SLOT_SCALARS 0
#define SLOT_GSQ 128
#define SLOT_LOSS 136

/* The step as its hooks see it. */
typedef struct step_view {
    int64_t ring_at;     /* the step's ring slot */
    uint64_t slot;       /* its byte offset in t->ring.buf */
    uint64_t ops_before; /* ops issued before the step (the timeline counts its own) */
} step_view;

/* Byte offset in the ring of the step's per-parameter non-finite flags. */
static inline uint64_t slot_flags(const ampx_trainer *t, const step_view *s) {
    return s->slot + SLOT_LOSS + 4 * (uint64_t)t->A;
}

typedef struct step_hook {
    const char *name;
    /* (optional) before the micro-batches; returns 1 in *on_nodes to watch the nodes */
    ampx_status (*begin)(ampx_trainer *t, const step_view *s, int *on_nodes);
    /* (optional) after each node of a micro-batch, when begin asked for it */
    ampx_status (*after_node)(ampx_trainer *t, executor *x, int node);
    /* (optional) the gradients are written: before anything reads them */
    ampx_status (*grads_ready)(ampx_trainer *t, const step_view *s);
    /* (optional) before the AMP pass: the fused op's arguments (NULL: no fused op, the
     * unscale and check and the square sum follow as their own ops) */
    ampx_status (*before_amp)(ampx_trainer *t, const step_view *s, ampx_amp_pass_args *fused);
    /* (optional) after the AMP pass, before the optimizer reads found_inf and the norm */
    ampx_status (*after_amp)(ampx_trainer *t, const step_view *s);
    /* (optional) after the optimizer, before the scaler's update consumes found_inf */
    ampx_status (*before_scaler)(ampx_trainer *t, const step_view *s);
    /* (optional) after the scaler's update, before the scalars block goes into the ring */
    ampx_status (*after_update)(ampx_trainer *t, const step_view *s);
    /* (optional) the step is over with status st (also when it failed); returns the status */
    ampx_status (*end)(ampx_trainer *t, const step_view *s, ampx_status st);
    /* (optional) a flush read n ring slots into buf; *wsq is the masters' sum of squares */
    ampx_status (*read)(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq);
    /* (optional) record r of the flush's slot i, filled in */
    void (*record)(ampx_trainer *t, int64_t i, ampx_step_record *r);
    /* (optional) record r as it is handed to the caller, after every hook's record */
    void (*recorded)(ampx_trainer *t, const ampx_step_record *r, int32_t skipped_steps);
    /* (optional) the trainer is freed */
    void (*release)(ampx_trainer *t);
} step_hook;

/* hooks.c: the hooks, in the order they run, and how many. */
extern const step_hook *const step_hooks[];
extern const int n_step_hooks;

/* inject.c: where the all-reduce injects +inf this step (data-parallel); UINT64_MAX: none. */
uint64_t inject_grad_off(const ampx_trainer *t);

/* Each hook, defined in the file named. */
extern const step_hook timeline_hook;  /* watch/timeline.c */
extern const step_hook monitor_hook;   /* watch/monitor.c */
extern const step_hook forensics_hook; /* watch/forensics.c */
extern const step_hook zero_hook;      /* replicas.c */
extern const step_hook fp8_hook;       /* fp8.c */
extern const step_hook dp_hook;        /* replicas.c */
extern const step_hook inject_hook;    /* inject.c */
extern const step_hook placed_hook;    /* placed.c: placement "measured" */

#endif
