/* llmc.h — llm.c's GPT-2 checkpoints (llmc.c): a model's shape in llm.c's terms, reading one
 * into a trainer's parameters and writing them as one. */
#ifndef AMPX_LLMC_H
#define AMPX_LLMC_H

#include "base/error.h"
#include "exec/trainer.h"

/* llm.c's GPT2Config: max_seq_len, vocab_size, num_layers, num_heads, channels,
 * padded_vocab_size. */
typedef struct llmc_dims {
    int64_t maxT, V, L, NH, C, Vp;
} llmc_dims;

/* Whether path starts with llm.c's checkpoint magic (20240326). */
int llmc_is_checkpoint(const char *path);
/* Every parameter from llm.c checkpoint path (every header field checked against the model). */
ampx_status llmc_init_from(ampx_trainer *t, const char *path, ampx_err e);
/* The parameters as an llm.c checkpoint: version 3 (f32) or 5 (bf16), the vocabulary padded
 * to a multiple of 128 with zero rows. */
ampx_status llmc_write(ampx_trainer *t, const char *path, ampx_dtype dtype, ampx_err e);

#endif
