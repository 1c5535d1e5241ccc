/* placed.h — a trainer on an ordered backend list (tr_placed in trainer.h): its members and
 * home, the probe and the placement pass's data, the executor's copies, and the listing. */
#ifndef AMPX_EXEC_PLACED_H
#define AMPX_EXEC_PLACED_H

#include "exec/trainer.h"
#include "passes/pipeline.h"

/* The ops a training step issues outside the nodes, on home: into ops (8 at most); their count.
 * A sampler or predictor issues none. */
int step_ops_needed(const ampx_trainer *t, const g_graph *g, uint32_t *ops);
/* The members of be (a list, or one backend) and the home: the first member with every op
 * the step issues (under placement "strict": the first). Sets t->be, t->ifc, t->ctx to home's. */
ampx_status placed_open(ampx_trainer *t, ampx_backend *be);
/* The member whose GEMM the fusion pass asks about (the first with a GEMM slot). */
ampx_backend *placed_gemm_member(const ampx_trainer *t);
/* Between autodiff and placement: the probe of every node's calls on every member, as the
 * placement pass's data in job->place (nothing on one backend). */
ampx_status placed_probe(ampx_trainer *t, pass_job *job);
/* After the placement pass, before anything is allocated: among the members with every op of
 * the step, the home whose placement copies the fewest bytes per step (the first of those on
 * a tie; under "strict" the first member stays). */
void placed_choose_home(ampx_trainer *t);
/* Once the executor and the fp8 state exist: the executor's copies and the planned bytes. */
ampx_status placed_attach(ampx_trainer *t);
void placed_free(ampx_trainer *t);
/* Placement "measured"'s choice once made, for a checkpoint ("NAME,NAME:0110..." : the list,
 * then each node's member), malloc'd; NULL when there is none. */
char *placed_choice(const ampx_trainer *t);
/* A checkpoint's choice: taken (no measuring) when this run measures on the same list and
 * graph and every node's member takes it; else the run measures anew, with a notice. */
void placed_restore(ampx_trainer *t, const char *choice);

#endif
