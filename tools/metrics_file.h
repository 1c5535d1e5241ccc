/* metrics_file.h — reading the metrics file `ampx train --metrics` writes (one JSON object per
 * line: step lines with loss, scale, lr, grad_norm, val_loss, skipped; monitor lines with a
 * layer's max |g|; fp8 lines with a tensor's scale and amax), for `ampx plot`. Parsing works on
 * bytes already read (under the input rules, by the caller), so the fuzz harness
 * (tests/fuzz/fuzz_metrics.c) runs the same code. */
#ifndef AMPX_TOOLS_METRICS_FILE_H
#define AMPX_TOOLS_METRICS_FILE_H

#include <stddef.h>

#define METRICS_MAX_LAYERS 64

/* Points (x, y) in file order. */
typedef struct series {
    double *x, *y;
    int n, cap;
} series;

/* The curves of a run. */
typedef struct metrics_run {
    series loss, val, scale, lr, gnorm, skipped;
    series headroom; /* monitored steps: the least headroom of an activation (binary orders) */
    char layers[METRICS_MAX_LAYERS][64];
    int n_layers;
    series heat[METRICS_MAX_LAYERS]; /* per layer: (step, max |g|) */
    /* policy.fp8: per fp8 tensor (the first METRICS_MAX_LAYERS), its scale and its amax */
    char fp8[METRICS_MAX_LAYERS][64];
    int n_fp8;
    series fp8_scale[METRICS_MAX_LAYERS], fp8_amax[METRICS_MAX_LAYERS];
} metrics_run;

/* Reads the lines of text (len bytes, any bytes) into r (zeroed by the caller); name is the
 * file in messages. 0, or -1 with "NAME:LINE: reason" (or "NAME: reason") in err; either way
 * metrics_free(r) releases what was read. */
int metrics_parse(metrics_run *r, const char *text, size_t len, const char *name, char *err,
                  size_t cap);
void metrics_free(metrics_run *r);

#endif
