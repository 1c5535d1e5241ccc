/* checkpoint.h — the checkpoint reader's in-memory entry point (checkpoint.c), for the
 * fuzz harness: ampx_trainer_load() runs the same checks on the file, read in chunks. */
#ifndef AMPX_CHECKPOINT_H
#define AMPX_CHECKPOINT_H

#include <stddef.h>

#include "base/error.h"
#include "formats/safetensors.h"
#include "exec/trainer.h"

/* Validates a whole checkpoint file held in memory (name: for messages) against the
 * trainer's model and, only when every check passed, writes it to the device. */
ampx_status ck_load_memory(ampx_trainer *t, const char *name, const unsigned char *file, size_t len,
                           ampx_err e);

#endif
