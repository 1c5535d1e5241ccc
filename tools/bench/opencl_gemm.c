/* opencl_gemm.c — the OpenCL backend's GEMM against CLBlast SGEMM on the same device, side by
 * side in one process: for each square size, the variants run alternately (one repetition
 * of each, round after round) so that clock and load drift hit all of them alike; the
 * median of each is reported as GFLOP/s (2 m n k / seconds) and as a ratio to CLBlast SGEMM.
 *
 * Variants:
 *   clblast_sgemm   CLBlast SGEMM called directly, in its own context on the same device
 *   ampx_f32        ampx opencl backend, f32 x f32 -> f32 (goes to CLBlast SGEMM)
 *   ampx_bf16       ampx opencl backend, bf16 x bf16 -> bf16, default path (gemm=auto)
 *   ampx_bf16_tiled / ampx_bf16_convert   the two bf16 paths forced (gemm=tiled / convert)
 *   ampx_f16        f16 x f16 -> f16, default path
 * Timing covers enqueue to completion (clFinish / synchronize), data already on the device.
 *
 * usage: opencl_gemm [--device P:D] [--reps N] [--sizes 256,512,1024] [--markdown] [--trans-b]
 * (--trans-b: C = A B^T, B stored n x k, for every variant)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/ampx.h"
#include "ampx/dtype.h"

#define MAX_REPS 64
#define N_VARIANTS 7

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what) {
    fprintf(stderr, "opencl_gemm: %s\n", what);
    exit(1);
}

// ---------------------------------------------------------------------------------------
// ampx side: one backend per GEMM path option

typedef struct ampx_side {
    ampx_backend *be;
    const ampx_backend_iface *t;
    ampx_context *ctx;
    ampx_buffer *a, *b, *c;       /* f32 */
    ampx_buffer *a16[2], *b16[2]; /* the same values rounded to bf16 [0] and f16 [1] */
} ampx_side;

static void ampx_side_open(ampx_side *s, const char *device, const char *gemm_opt, size_t n) {
    char dev_opt[64], err[512];
    snprintf(dev_opt, sizeof dev_opt, "device=%s", device);
    const char *opts[2] = {dev_opt, gemm_opt};
    if (ampx_backend_open("opencl", opts, 2, &s->be, err, sizeof err) != AMPX_OK) die(err);
    s->t         = ampx_backend_iface_of(s->be);
    s->ctx       = ampx_backend_context(s->be);
    size_t bytes = n * n * 4;
    if (s->t->buffer_alloc(s->ctx, bytes, &s->a) || s->t->buffer_alloc(s->ctx, bytes, &s->b) ||
        s->t->buffer_alloc(s->ctx, bytes, &s->c))
        die(ampx_backend_last_error(s->be));
    /* values in [-1, 1): random bits through a small LCG, written as f32 and, converted
     * (round to nearest even), as bf16 and f16: a 16-bit GEMM reads 16-bit values, not the
     * halves of f32 bit patterns (which would be subnormals, infinities and NaN) */
    float *h     = malloc(bytes);
    uint16_t *hh = malloc(bytes / 2);
    if (!h || !hh) die("out of memory");
    uint32_t x = 12345;
    for (size_t i = 0; i < n * n; i++) {
        x    = x * 1664525u + 1013904223u;
        h[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
    }
    s->t->buffer_write(s->ctx, s->a, 0, h, bytes);
    s->t->buffer_write(s->ctx, s->b, 0, h, bytes);
    s->t->buffer_fill(s->ctx, s->c, 0, bytes, 0, 4);
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < n * n; i++)
            hh[i] = d == 0 ? ampx_f32_to_bf16(h[i]) : ampx_f32_to_f16(h[i]);
        if (s->t->buffer_alloc(s->ctx, bytes / 2, &s->a16[d]) ||
            s->t->buffer_alloc(s->ctx, bytes / 2, &s->b16[d]))
            die(ampx_backend_last_error(s->be));
        s->t->buffer_write(s->ctx, s->a16[d], 0, hh, bytes / 2);
        s->t->buffer_write(s->ctx, s->b16[d], 0, hh, bytes / 2);
    }
    free(h), free(hh);
}

static int trans_b; /* --trans-b: C = A B^T (B stored n x k) */

static double ampx_side_run(ampx_side *s, size_t n, ampx_dtype dt) {
    ampx_gemm_args g = {.size    = sizeof g,
                        .m       = n,
                        .n       = n,
                        .k       = n,
                        .batch   = 1,
                        .trans_b = (uint32_t)trans_b,
                        .lda     = n,
                        .ldb     = n,
                        .ldc     = n,
                        .alpha   = 1.0f,
                        .beta    = 0.0f,
                        .a       = {dt == AMPX_F32 ? s->a : s->a16[dt == AMPX_F16], 0, dt},
                        .b       = {dt == AMPX_F32 ? s->b : s->b16[dt == AMPX_F16], 0, dt},
                        .c       = {s->c, 0, dt}};
    double t0        = now_s();
    if (s->t->ops->gemm(s->ctx, &g) != AMPX_OK || s->t->synchronize(s->ctx) != AMPX_OK)
        die(ampx_backend_last_error(s->be));
    return now_s() - t0;
}

static void ampx_side_close(ampx_side *s) {
    s->t->buffer_free(s->ctx, s->a);
    s->t->buffer_free(s->ctx, s->b);
    s->t->buffer_free(s->ctx, s->c);
    for (int d = 0; d < 2; d++) {
        s->t->buffer_free(s->ctx, s->a16[d]);
        s->t->buffer_free(s->ctx, s->b16[d]);
    }
    ampx_backend_close(s->be);
}

// ---------------------------------------------------------------------------------------
// CLBlast side: its own context and queue on the same device

typedef struct clb_side {
    cl_context ctx;
    cl_command_queue q;
    cl_mem a, b, c;
} clb_side;

static void clb_open(clb_side *s, const char *device, size_t n) {
    unsigned p = 0, d = 0;
    if (sscanf(device, "%u:%u", &p, &d) != 2) die("--device wants P:D");
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS || p >= np) die("no such platform");
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS || d >= nd)
        die("no such device");
    cl_int err;
    s->ctx = clCreateContext(NULL, 1, &devs[d], NULL, NULL, &err);
    if (err) die("clCreateContext failed");
    s->q = clCreateCommandQueue(s->ctx, devs[d], 0, &err);
    if (err) die("clCreateCommandQueue failed");
    size_t bytes = n * n * 4;
    float *h     = malloc(bytes);
    if (!h) die("out of memory");
    uint32_t x = 12345;
    for (size_t i = 0; i < n * n; i++) {
        x    = x * 1664525u + 1013904223u;
        h[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
    }
    s->a = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
    s->b = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
    s->c = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h, &err);
    if (err) die("clCreateBuffer failed");
    free(h);
}

static double clb_run(clb_side *s, size_t n) {
    double t0 = now_s();
    CLBlastStatusCode st =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                     trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, n, n, n, 1.0f, s->a, 0, n,
                     s->b, 0, n, 0.0f, s->c, 0, n, &s->q, NULL);
    if (st != CLBlastSuccess || clFinish(s->q) != CL_SUCCESS) die("CLBlastSgemm failed");
    return now_s() - t0;
}

static void clb_close(clb_side *s) {
    clReleaseMemObject(s->a);
    clReleaseMemObject(s->b);
    clReleaseMemObject(s->c);
    clReleaseCommandQueue(s->q);
    clReleaseContext(s->ctx);
}

// ---------------------------------------------------------------------------------------

int main(int argc, char **argv) {
    const char *device  = "0:0";
    char sizes_arg[256] = "256,512,1024";
    int reps = 7, markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--markdown"))
            markdown = 1;
        else if (!strcmp(argv[i], "--trans-b"))
            trans_b = 1;
        else {
            fprintf(stderr, "usage: opencl_gemm [--device P:D] [--reps N] [--sizes a,b,c] "
                            "[--markdown] [--trans-b]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) die("--reps must be in [1, 64]");
    static const char *names[N_VARIANTS] = {"clblast_sgemm",   "ampx_f32",          "ampx_bf16",
                                            "ampx_bf16_tiled", "ampx_bf16_convert", "ampx_f16",
                                            "ampx_bf16_rows"};
    if (markdown) {
        printf("| n | %s", names[0]);
        for (int v = 1; v < N_VARIANTS; v++)
            printf(" | %s", names[v]);
        printf(" |\n|---");
        for (int v = 0; v < N_VARIANTS; v++)
            printf("|---");
        printf("|\n");
    }
    char *save = NULL;
    for (char *tok = strtok_r(sizes_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t n = (size_t)atol(tok);
        if (n == 0) die("bad size");
        clb_side clb;
        ampx_side dflt, tiled, conv, rows;
        clb_open(&clb, device, n);
        ampx_side_open(&dflt, device, "gemm=auto", n);
        ampx_side_open(&tiled, device, "gemm=tiled", n);
        ampx_side_open(&conv, device, "gemm=convert", n);
        ampx_side_open(&rows, device, "gemm=rows", n);
        double t[N_VARIANTS][MAX_REPS];
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up (kernel compiles), not counted */
            double x[N_VARIANTS] = {clb_run(&clb, n),
                                    ampx_side_run(&dflt, n, AMPX_F32),
                                    ampx_side_run(&dflt, n, AMPX_BF16),
                                    ampx_side_run(&tiled, n, AMPX_BF16),
                                    ampx_side_run(&conv, n, AMPX_BF16),
                                    ampx_side_run(&dflt, n, AMPX_F16),
                                    ampx_side_run(&rows, n, AMPX_BF16)};
            if (r >= 0)
                for (int v = 0; v < N_VARIANTS; v++)
                    t[v][r] = x[v];
        }
        double flop = 2.0 * (double)n * (double)n * (double)n, gf[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; v++)
            gf[v] = flop / median(t[v], reps) * 1e-9;
        if (markdown) {
            printf("| %zu | %.1f GFLOP/s", n, gf[0]);
            for (int v = 1; v < N_VARIANTS; v++)
                printf(" | %.1f (%.2fx)", gf[v], gf[v] / gf[0]);
            printf(" |\n");
        } else {
            for (int v = 0; v < N_VARIANTS; v++)
                printf("n=%zu %-18s %8.2f GFLOP/s  %.2fx clblast_sgemm\n", n, names[v], gf[v],
                       gf[v] / gf[0]);
        }
        fflush(stdout);
        ampx_side_close(&dflt);
        ampx_side_close(&tiled);
        ampx_side_close(&conv);
        ampx_side_close(&rows);
        clb_close(&clb);
    }
    return 0;
}
