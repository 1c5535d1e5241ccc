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

/* Every ability: the passes as they run on the in-tree backends (the memory estimate). */
void pass_caps_all(pass_caps *c);

#endif
