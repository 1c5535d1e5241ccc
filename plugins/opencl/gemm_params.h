/* gemm_params.h — the parameters of the tuned GEMM kernel (kernels/opencl/typed/gemm_tuned.cl)
 * and their text form in the cache folder: checked against a device's limits, parsed from an
 * untrusted file, written back. No OpenCL here, so the fuzz harness builds it alone. */
#ifndef AMPX_PLUGIN_OCL_GEMM_PARAMS_H
#define AMPX_PLUGIN_OCL_GEMM_PARAMS_H

#include <stddef.h>
#include <stdint.h>

/* CLBlast's xgemm names: C tile per work-group MWG x NWG, k slice KWG, work-group shape
 * MDIMC (along m) x NDIMC (along n), float vectors of VWN along n. And the packed kernel's
 * block of C per work item, MR x NR (gemm_packed.c; 0 x 0: the device's default). */
typedef struct ocl_gemm_params {
    uint32_t mwg, nwg, kwg, mdimc, ndimc, vwn;
    uint32_t mr, nr;
} ocl_gemm_params;

/* What a device allows. */
typedef struct ocl_gemm_limits {
    uint64_t local_mem; /* CL_DEVICE_LOCAL_MEM_SIZE, bytes */
    uint64_t max_wg;    /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
} ocl_gemm_limits;

#define OCL_GEMM_PARAMS_MAGIC "ampx-opencl-gemm-params 2"

/* 0 when MR x NR is a block the packed kernel builds: MR 1-16 rows, NR 16, 32, 48 or 64
 * columns, at most 32 accumulators of 16 floats (MR * NR / 16). */
int ocl_gemm_block_check(uint32_t mr, uint32_t nr);

/* 0 when p builds and runs on a device with limits l (and within the bounds every value has
 * here; the block 0 x 0 or one that ocl_gemm_block_check accepts); else -1 and why (a phrase)
 * in why[cap]. */
int ocl_gemm_params_check(const ocl_gemm_params *p, const ocl_gemm_limits *l, char *why,
                          size_t cap);

/* Parses a parameter file's text[len] (not NUL-terminated) written for `key`: 0 and *out
 * when every line is as ocl_gemm_params_format writes it, the key matches and the values pass
 * ocl_gemm_params_check; else -1 and why. *gflops gets the measured rate (0 when absent). */
int ocl_gemm_params_parse(const char *text, size_t len, uint64_t key, const ocl_gemm_limits *l,
                          ocl_gemm_params *out, double *gflops, char *why, size_t cap);

/* The file's text for p, key and the rate the tuning measured; its length (< cap), or -1. */
int ocl_gemm_params_format(const ocl_gemm_params *p, uint64_t key, double gflops, char *out,
                           size_t cap);

/* "MWG=64 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4" into out[cap]. */
void ocl_gemm_params_str(const ocl_gemm_params *p, char *out, size_t cap);

#endif
