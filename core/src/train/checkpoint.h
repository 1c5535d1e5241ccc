/* checkpoint.h — the checkpoint reader's in-memory entry point (checkpoint.c), for the
 * fuzz harness: ampx_trainer_load() runs the same checks on the file, read in chunks. */
#ifndef AMPX_CHECKPOINT_H
#define AMPX_CHECKPOINT_H

#include <stddef.h>

#include "train/safetensors.h"
#include "train/trainer.h"

/* Validates a whole checkpoint file held in memory (name: for messages) against the
 * trainer's model and, only when every check passed, writes it to the device. */
ampx_status ck_load_memory(ampx_trainer *t, const char *name, const unsigned char *file, size_t len,
                           char *err, size_t cap);

/* The step a checkpoint's __metadata__ names; -1 when the file has none, cannot be read or is
 * not an ampx checkpoint (data-parallel ranks compare it before they start). */
int64_t ck_file_step(const char *path);

#endif
