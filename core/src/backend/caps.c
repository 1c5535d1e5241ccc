/* caps.c — a backend's abilities for the passes (caps.h). */
#include "backend/caps.h"

#include <string.h>

/* GEMM's epilogue for these dtypes; with fp8 operands, GEMM_FP8's (ABI 1.7). */
static int gemm_epilogue(const ampx_backend *be, const ampx_dtype *dtypes) {
    if (!ampx_dtype_is_fp8(dtypes[0])) return ampx_backend_gemm_epilogue(be, dtypes);
    const ampx_backend_iface *ifc = ampx_backend_iface_of(be);
    return ifc->abi_minor >= 7 && ampx_backend_op_slot(be, AMPX_OP_GEMM_FP8) &&
           ifc->supports(ampx_backend_context(be), AMPX_OP_GEMM_FP8, dtypes, 3,
                         AMPX_SHAPE_GEMM_EPILOGUE);
}

/* The products the fusion pass may ask of: float operands into a float output, and fp8
 * (E4M3) operands into a float output; every other entry stays 0. */
void backend_pass_caps(const ampx_backend *be, pass_caps *c) {
    static const ampx_dtype floats[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
    memset(c, 0, sizeof *c);
    for (int k = 0; k < 3; k++) {
        ampx_dtype y = floats[k], q[3] = {AMPX_E4M3, AMPX_E4M3, y};
        c->gemm_epilogue[AMPX_E4M3][AMPX_E4M3][y] = (uint8_t)gemm_epilogue(be, q);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                ampx_dtype d[3]                           = {floats[i], floats[j], y};
                c->gemm_epilogue[floats[i]][floats[j]][y] = (uint8_t)gemm_epilogue(be, d);
            }
    }
}
