/* fuzz_gemm_params.c — the OpenCL backend's GEMM parameter file (plugins/opencl/gemm_params.c),
 * untrusted input read from the cache folder. The first two bytes pick the device's limits
 * (local memory 1 KiB .. 256 MiB, work-groups of 1 .. 2^15 items), the rest is the file.
 * A file that parses must pass the check again and survive format -> parse unchanged; one
 * that does not must say why in one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_params.h"

#define KEY 0x0123456789abcdefull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    ocl_gemm_limits lim = {1024ull << (data[0] % 19), 1ull << (data[1] % 16)};
    ocl_gemm_params p, q;
    double gflops = -1.0, g2 = -1.0;
    char why[160] = "";
    if (ocl_gemm_params_parse((const char *)data + 2, size - 2, KEY, &lim, &p, &gflops, why,
                              sizeof why) != 0) {
        if (!why[0] || strchr(why, '\n')) abort();
        return 0;
    }
    if (ocl_gemm_params_check(&p, &lim, why, sizeof why) != 0 || !(gflops >= 0.0)) abort();
    char text[256];
    int n = ocl_gemm_params_format(&p, KEY, gflops, text, sizeof text);
    if (n <= 0 || ocl_gemm_params_parse(text, (size_t)n, KEY, &lim, &q, &g2, why, sizeof why) ||
        memcmp(&p, &q, sizeof p) != 0)
        abort();
    return 0;
}
