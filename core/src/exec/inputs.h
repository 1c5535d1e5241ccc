/* inputs.h — the graph's inputs over the data (inputs.c): mapped at creation, staged and
 * uploaded, bound for training or held-out rows, written per micro-batch. */
#ifndef AMPX_EXEC_INPUTS_H
#define AMPX_EXEC_INPUTS_H

#include "exec/trainer.h"

ampx_status inputs_map(ampx_trainer *t, data_request *req); /* the inputs onto the data */
ampx_status inputs_alloc(ampx_trainer *t);                  /* host staging (after loading) */
ampx_status inputs_upload(ampx_trainer *t);                 /* held-out rows; training buffers */
void inputs_free(ampx_trainer *t);
void inputs_bind(ampx_trainer *t, int test); /* the graph's inputs: training or held-out */
ampx_status inputs_write_rows(ampx_trainer *t, const float *x, const int32_t *y, int64_t n);
ampx_status inputs_write_windows(ampx_trainer *t, uint64_t key);
ampx_status inputs_select_micro(ampx_trainer *t, int64_t global_micro);

#endif
