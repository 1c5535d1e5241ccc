/* caps.h — what a backend can do, as the passes see it: data filled once from the backend's
 * supports() (backend/caps.c) before the passes run, so that no pass asks a backend and the
 * graph's shape depends on the backend only through this struct. */
#ifndef AMPX_PASSES_CAPS_H
#define AMPX_PASSES_CAPS_H

#include <stdint.h>

#include "ampx/dtype.h"

typedef struct pass_caps {
    /* gemm_epilogue[a][b][c]: 1 when the backend runs a GEMM of operand dtypes a, b into c with
     * the epilogue (bias, activation, pre-activation; ABI 1.5), as GEMM_FP8 when a is fp8 */
    uint8_t gemm_epilogue[AMPX_DTYPE_COUNT][AMPX_DTYPE_COUNT][AMPX_DTYPE_COUNT];
} pass_caps;

/* An ordered backend list (at most PLACE_MAX members) as the placement pass sees it: per
 * node, which members take every call the node issues (found by a probe of the calls,
 * exec/place.h), and why each other member does not. */
#define PLACE_MAX 8
typedef struct pass_need {
    uint8_t ok;                    /* bit m: member m takes every call of the node */
    uint8_t ops;                   /* calls the node issues (0: a view, nothing to run) */
    uint8_t refused_op[PLACE_MAX]; /* the first call member m refused (AMPX_OP_COUNT: none) */
    uint8_t no_slot[PLACE_MAX];    /* 1: it has no slot for that op; 0: supports() said no */
    char refused_dtypes[PLACE_MAX][48];
} pass_need;

/* Every ability: the passes as they run on the in-tree backends (the memory estimate). */
void pass_caps_all(pass_caps *c);

#endif
