/* pipeline.h — the one pass pipeline: the passes over a graph, always in this order. A model's
 * load runs the policy pass (PASS_POLICY); a trainer's creation runs the rest on its copy of
 * the graph, and the memory estimate runs them on a scratch copy. What the backend can do
 * comes in as data (pass_caps); no pass touches a backend. */
#ifndef AMPX_PASSES_PIPELINE_H
#define AMPX_PASSES_PIPELINE_H

#include <stddef.h>

#include "ampx/ampx.h"
#include "base/error.h"
#include "passes/caps.h"
#include "passes/model.h"
#include "passes/place.h"
#include "passes/planner.h"

typedef enum pass_id {
    PASS_POLICY,   /* model.graph from model.raw: dtypes with reasons, casts, fp8 products */
    PASS_COPIES,   /* working copies cast on use (when cast_copies) */
    PASS_FUSE,     /* dense layers as one GEMM with an epilogue, where caps has it */
    PASS_AUTODIFF, /* the backward nodes (unless forward_only) */
    PASS_PLACE,    /* placement: where each node runs on an ordered backend list (place) */
    PASS_PLAN,     /* arena offsets by liveness; persistent: the parameters' gradients */
} pass_id;

typedef struct pass_job {
    ampx_model *m;         /* PASS_POLICY: the model whose graph it resolves */
    g_graph *g;            /* the other passes: the graph they rewrite */
    const pass_caps *caps; /* PASS_FUSE */
    int cast_copies;       /* PASS_COPIES: cast the working copies on use */
    unsigned recompute;    /* PASS_AUTODIFF: RECOMPUTE_* (RECOMPUTE_COPIES with cast_copies) */
    int forward_only;      /* a sampler or predictor: no backward */
    pass_placing *place;   /* PASS_PLACE: the list and its abilities (NULL: one backend) */
    uint64_t rows;         /* PASS_PLAN: micro-batch rows */
    int keep;              /* PASS_PLAN: no two values share a place (plan_make) */
    uint8_t *persistent;   /* PASS_PLAN's: per value, 1 for a parameter's gradient (owned) */
    plan plan;             /* PASS_PLAN's */
    ampx_err err;          /* a failure's message */
} pass_job;

/* Runs passes first..last of job j in order: AMPX_OK, or the status with j->err written. */
ampx_status pass_run(pass_job *j, pass_id first, pass_id last);
/* What PASS_PLAN allocated. */
void pass_job_free(pass_job *j);

#endif
