/* options.c — every switch that changes which kernels or fusions run, in one table: the
 * backends' key=value options (--backend-opt, AMPX_BACKEND_OPTS), their environment
 * variables, and the model keys that change the step (the AMP pass, the fused loss). The
 * analog of XLA_FLAGS. `ampx backends --options` prints it; docs/OPTIONS.md is the same table.
 * A plugin's "unknown option" message lists its keys; tests/train/observe_cli.sh checks
 * each of them is here. */
#include <stdio.h>

#include "cli.h"

typedef struct perf_switch {
    const char *where;  /* backend name, or "model" / "env" */
    const char *name;   /* key=value key, environment variable or model key */
    const char *values; /* what it accepts */
    const char *deflt;  /* the default */
    const char *effect; /* what it changes */
} perf_switch;

// clang-format off
static const perf_switch switches[] = {
    {"cpu",    "threads",            "1..1024",                         "the online CPUs",
     "worker threads of every op"},
    {"cpu",    "isa",                "auto|portable|avx2|avx512|avx512bf16|amx", "auto",
     "cap on the ISA path of the GEMM and elementwise kernels (the best the CPU has, up to it)"},
    {"cpu",    "attention",          "auto|0|1",                       "auto",
     "claim the fused ATTN_FWD/ATTN_BWD (auto: on the AVX-512 paths; elsewhere the composite is faster)"},
    {"cpu",    "gemm_epilogue",      "0|1",                            "1",
     "dense layers as one GEMM adding bias and activation as C is written (0: separate ops)"},
    {"env",    "AMPX_CPU_ISA",       "as cpu isa",                     "unset",
     "a second ISA cap; the lower of the two applies"},
    {"opencl", "device",             "P:D or a name substring",        "GPU, else accel., CPU",
     "which OpenCL platform and device"},
    {"opencl", "gemm",               "auto|packed|tiled|rows|convert", "auto",
     "GEMM path: packed panels (auto on CPU devices), tuned tiled kernel (auto on others but f32), per-row kernel, or convert + CLBlast"},
    {"opencl", "gemm_block",         "MRxNR (MR 1-16, NR 16|32|48|64)", "6x32 or 6x16 (by vector)",
     "the packed GEMM's block of C per work item"},
    {"opencl", "gemm_epilogue",      "0|1",                            "1",
     "dense layers as one GEMM with bias and activation applied to its f32 result (0: apart)"},
    {"opencl", "cache",              "a directory or off",             "~/.cache/ampx/opencl",
     "the compiled-program cache (first-run build time only)"},
    {"opencl", "tune",               "no|yes|force",                   "no",
     "search the tiled GEMM's tiles (and on CPU devices the packed block) for this device (yes: unless cached), store them"},
    {"opencl", "tune_grid",          "full|tiny",                      "full",
     "the tuning grid (tiny: two candidates on one small shape, for tests)"},
    {"opencl", "gemm_params",        "MWG,NWG,KWG,MDIMC,NDIMC,VWN",    "tuned file, else defaults",
     "the tiled GEMM's tile sizes, overriding the tuned file and the device defaults"},
    {"opencl", "paths",              "auto|workgroup|item",            "item on CPUs, else workgroup",
     "the kernels' layout: work-group reductions and grid-stride loops (GPUs) or a work item per row and the packed GEMM (CPUs)"},
    {"env",    "AMPX_OPENCL_CACHE_DIR", "a directory",                 "unset",
     "the program cache directory, overriding the default location"},
    {"cuda",   "device",             "0..N-1",                         "0",
     "which CUDA device"},
    {"cuda",   "gemm",               "auto|cublas|native",             "auto",
     "GEMM path: cuBLAS (cublasGemmEx, f32 accumulation) or the native kernel"},
    {"model",  "policy",             "f32|mixed_bf16|mixed_f16|jmp string", "f32",
     "the AMP pass: which nodes run in bf16/f16 and where casts go (f32: no AMP pass)"},
    {"model",  "policy.overrides",   "layer glob -> dtype",            "none",
     "keeps chosen layers in another dtype (e.g. f32) than the pass would pick"},
    {"model",  "policy.fp8",         "format, amax_history, amax_algo, margin, ops|layers", "none",
     "products of weights with fp8 operands and per-tensor delayed scaling (docs/FP8.md)"},
    {"model",  "loss softmax_cross_entropy", "(always fused)",         "fused",
     "the loss and its logit gradient are one SOFTMAX_XENT op (no separate softmax)"},
    {"model",  "attention fused",    "true|false",                     "true",
     "one ATTN_FWD/ATTN_BWD op per layer where the backend claims it (ABI 1.5), else GEMM + SOFTMAX + PERMUTE"},
    {"env",    "AMPX_BACKEND_OPTS",  "k=v,k=v",                        "unset",
     "backend options for every command, before --backend-opt (NAME.k=v: one backend; a piece without = continues the value before)"},
    {"env",    "AMPX_BUCKET_KB",     "KiB, >= 1",                      "1024",
     "data parallel: the gradient all-reduce bucket size (a larger parameter is its own bucket)"},
    {"env",    "AMPX_DIST_PATH",     "copy|host",                      "unset (auto)",
     "data parallel: copy forces the host-copy all-reduce; host keeps CUDA buffers off NCCL"},
    {"env",    "AMPX_DIST_TIMEOUT",  "seconds, > 0",                   "30",
     "data parallel: the watchdog's deadline per collective (at least twice the step time; 10x before the first step)"},
    {"env",    "AMPX_DIST_CHECK",    "0|1",                            "0",
     "data parallel: 1 compares every collective's signature (kind, size, step) across ranks before it starts"},
    {"env",    "AMPX_FP8_LOCAL_AMAX", "0|1",                           "0",
     "data parallel, tests only: 1 skips the fp8 amaxes' MAX all-reduce, so the ranks' scales part"},
    {"env",    "AMPX_INJECT_COLLECTIVE", "STEP[@RANK]",                "unset",
     "data parallel, tests only: step STEP's first gradient all-reduce is one value short on rank RANK"},
};
// clang-format on

int cli_print_options(void) {
    printf("%-7s %-27s %-42s %-22s %s\n", "where", "switch", "values", "default", "effect");
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) {
        const perf_switch *s = &switches[i];
        printf("%-7s %-27s %-42s %-22s %s\n", s->where, s->name, s->values, s->deflt, s->effect);
    }
    printf("\nbackend options: --backend-opt key=value (repeatable) or AMPX_BACKEND_OPTS; "
           "docs/OPTIONS.md\n");
    return 0;
}
