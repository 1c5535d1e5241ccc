/* kvcache.h — the KV cache of incremental sampling (kvcache.c). */
#ifndef AMPX_INFER_KVCACHE_H
#define AMPX_INFER_KVCACHE_H

#include "exec/trainer.h"

/* The cache after a whole forward of rows windows ids; the cache brought to a window
 * (kv_advance, for ampx_trainer_logits_last in infer.c); its memory. */
void kv_filled(ampx_trainer *t, const int32_t *ids, int64_t rows);
ampx_status kv_advance(ampx_trainer *t, const int32_t *ids, int64_t len, int64_t *same);
void kv_free(ampx_trainer *t);

#endif
