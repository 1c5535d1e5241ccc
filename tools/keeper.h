/* keeper.h — the checkpoints of an `ampx train` run (tools/keeper.c): their names, the lock
 * on the checkpoint path, the last K periodic files and the best one, with the keeper's
 * state kept in the trainer (ampx_trainer_keeper) so every checkpoint carries it. */
#ifndef AMPX_TOOLS_KEEPER_H
#define AMPX_TOOLS_KEEPER_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/train.h"

typedef struct ckpt_keeper {
    ampx_keeper *k;   /* the trainer's */
    const char *base; /* the checkpoint path F */
    int64_t keep;     /* --keep K; 0: the periodic checkpoints are F itself */
} ckpt_keeper;

/* F with a tag before its .safetensors extension: run.safetensors -> run.best.safetensors;
 * the periodic file of a step: run.step000100.safetensors. */
void ckpt_name(const char *base, const char *tag, char *out, size_t cap);
void ckpt_step_name(const char *base, int64_t step, char *out, size_t cap);

/* An exclusive lock on checkpoint path ckpt: flock on ckpt.lock, which holds the pid; *fd is
 * kept open for the run's life. 0, or -1 after a message in err (another run holds it). */
int keeper_lock(const char *ckpt, int *fd, char *err, size_t cap);
/* Removes the lock file and releases the lock (fd -1: none). */
void keeper_unlock(const char *ckpt, int fd);

/* The keeper of trainer t writing checkpoints to base (after the load of resume, if any): a
 * run resumed from one of base's own checkpoints (base, its best, its periodic ones)
 * continues the state that checkpoint holds; else the state starts empty (best +inf), and a
 * checkpoint of base written before the state was saved adopts the periodic files of base's
 * name up to its step. */
void keeper_start(ckpt_keeper *kp, ampx_trainer *t, const char *base, const char *resume,
                  int64_t keep);
/* The periodic checkpoint of the step, the oldest beyond K removed once it is written; 0, or
 * -1 after a message in err. */
int keeper_save_periodic(ckpt_keeper *kp, ampx_trainer *t, char *err, size_t cap);
/* After a validation of loss: the best checkpoint, when it is better than the best so far;
 * 0, or -1 after a message in err. */
int keeper_save_best(ckpt_keeper *kp, ampx_trainer *t, double loss, char *err, size_t cap);

#endif
