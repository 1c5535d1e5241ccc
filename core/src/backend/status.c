/* status.c — names of statuses and ops: the words the tools and logs use. */
#include <string.h>

#include "ampx/ampx.h"

const char *ampx_status_name(ampx_status st) {
    switch (st) {
    case AMPX_OK: return "AMPX_OK";
    case AMPX_ERR_INVALID: return "AMPX_ERR_INVALID";
    case AMPX_ERR_UNSUPPORTED: return "AMPX_ERR_UNSUPPORTED";
    case AMPX_ERR_NO_MEMORY: return "AMPX_ERR_NO_MEMORY";
    case AMPX_ERR_DEVICE: return "AMPX_ERR_DEVICE";
    case AMPX_ERR_UNAVAILABLE: return "AMPX_ERR_UNAVAILABLE";
    case AMPX_ERR_INTERNAL: return "AMPX_ERR_INTERNAL";
    case AMPX_ERR_BUSY: return "AMPX_ERR_BUSY";
    }
    return "AMPX_ERR_UNKNOWN";
}

/* Indexed by ampx_op: the names are the slots of ampx_backend_ops. */
#define OP_NAME(index, slot, OP, args, n_dtypes, f32) #slot,
static const char *const op_names[AMPX_OP_COUNT] = {AMPX_OPS(OP_NAME)};
#undef OP_NAME

const char *ampx_op_name(uint32_t op) {
    return op < AMPX_OP_COUNT ? op_names[op] : NULL;
}

int ampx_op_parse(const char *name, uint32_t *op) {
    for (uint32_t i = 0; i < AMPX_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) {
            *op = i;
            return 0;
        }
    return -1;
}

/* Number of dtypes supports() takes for each op, in the order of the op's heading. */
#define OP_N_DTYPES(index, slot, OP, args, n_dtypes, f32) n_dtypes,
static const uint8_t op_n_dtypes[AMPX_OP_COUNT] = {AMPX_OPS(OP_N_DTYPES)};
#undef OP_N_DTYPES

uint32_t ampx_op_n_dtypes(uint32_t op) {
    return op < AMPX_OP_COUNT ? op_n_dtypes[op] : 0;
}
