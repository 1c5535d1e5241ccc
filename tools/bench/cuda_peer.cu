/* cuda_peer.cu — GEMM rate of libampx-cuda.so against cuBLAS, side by side in one process.
 *
 *   nvcc -O2 -std=c++17 -I core/include -o cuda_peer tools/bench/cuda_peer.cu -lcublas -ldl
 *   ./cuda_peer PATH/libampx-cuda.so [SIZE ...]        (default sizes 4096 8192)
 *
 * For each size n and dtype (bf16 in and out with f32 compute; f32 with f32 compute, no TF32)
 * it times C = A B (n x n x n) five times each way and prints the medians:
 *   cublas      cublasGemmEx called directly (the peer),
 *   ampx        the plugin's GEMM op through its ABI (gemm=auto: cuBLAS where it can),
 *   ampx-native the plugin with gemm=native (its own kernel),
 * each as TFLOP/s and as a ratio to cublas measured in the same run. A trial is R calls
 * enqueued back to back and one synchronisation, timed on the host clock the same way for
 * every path. Output is a Markdown table on stdout.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define _Static_assert static_assert
#include "ampx/backend.h"
#undef _Static_assert

#define TRIALS 5

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "cuda_peer: %s\n", what);
    exit(1);
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "cuda_peer: %s: %s\n", #x, cudaGetErrorString(e_));                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CB(x)                                                                                      \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "cuda_peer: %s: %s\n", #x, cublasGetStatusString(s_));                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void on_log(void *user, ampx_log_level level, const char *msg) {
    (void)user;
    if (level <= AMPX_LOG_WARN) fprintf(stderr, "ampx-cuda: %s\n", msg);
}

/* Host data: values in [-1, 1) in steps of 1/64, exact in every dtype. */
static std::vector<unsigned char> host_matrix(size_t n_elems, ampx_dtype dt, unsigned seed) {
    std::vector<unsigned char> v(n_elems * ampx_dtype_size(dt));
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n_elems; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        float f = (float)((int)(x % 128u) - 64) / 64.0f;
        if (dt == AMPX_F32)
            memcpy(&v[4 * i], &f, 4);
        else {
            uint16_t h = ampx_f32_to_bf16(f);
            memcpy(&v[2 * i], &h, 2);
        }
    }
    return v;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct plugin {
    void *dl;
    const ampx_backend_iface *I;
    ampx_context *C;
};

static plugin open_plugin(const char *path, const char *opt) {
    plugin p;
    p.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p.dl) die(dlerror());
    void *sym = dlsym(p.dl, AMPX_BACKEND_ENTRY_SYMBOL);
    if (!sym) die("no ampx_backend_entry");
    ampx_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    p.I = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    char reason[512];
    if (!p.I || p.I->probe(reason, sizeof reason) != AMPX_OK) die(reason);
    const char *opts[1] = {opt};
    ampx_host h         = {sizeof h, AMPX_ABI_MAJOR, AMPX_ABI_MINOR, on_log, NULL, opts, 1};
    if (p.I->create(&h, &p.C) != AMPX_OK) die("create failed");
    return p;
}

/* Median seconds per GEMM through the plugin. */
static double time_plugin(plugin &p, ampx_dtype dt, int n, int reps) {
    size_t es = ampx_dtype_size(dt), bytes = (size_t)n * n * es;
    ampx_buffer *a, *b, *c;
    if (p.I->buffer_alloc(p.C, bytes, &a) || p.I->buffer_alloc(p.C, bytes, &b) ||
        p.I->buffer_alloc(p.C, bytes, &c))
        die("plugin buffer_alloc failed");
    std::vector<unsigned char> ha = host_matrix((size_t)n * n, dt, 1),
                               hb = host_matrix((size_t)n * n, dt, 2);
    p.I->buffer_write(p.C, a, 0, ha.data(), bytes);
    p.I->buffer_write(p.C, b, 0, hb.data(), bytes);
    ampx_gemm_args g;
    memset(&g, 0, sizeof g);
    g.size = sizeof g;
    g.m = g.n = g.k = (uint64_t)n;
    g.batch         = 1;
    g.lda = g.ldb = g.ldc = (uint64_t)n;
    g.alpha               = 1.0f;
    g.beta                = 0.0f;
    g.a                   = {a, 0, dt};
    g.b                   = {b, 0, dt};
    g.c                   = {c, 0, dt};
    if (p.I->ops->gemm(p.C, &g) != AMPX_OK || p.I->synchronize(p.C) != AMPX_OK)
        die("plugin gemm failed");
    std::vector<double> t;
    for (int trial = 0; trial < TRIALS; trial++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            p.I->ops->gemm(p.C, &g);
        if (p.I->synchronize(p.C) != AMPX_OK) die("plugin synchronize failed");
        t.push_back((now_s() - t0) / reps);
    }
    p.I->buffer_free(p.C, a);
    p.I->buffer_free(p.C, b);
    p.I->buffer_free(p.C, c);
    return median(t);
}

/* Median seconds per GEMM with cublasGemmEx, row-major C = A B as the plugin computes it. */
static double time_cublas(cublasHandle_t h, ampx_dtype dt, int n, int reps) {
    size_t es = ampx_dtype_size(dt), bytes = (size_t)n * n * es;
    void *a, *b, *c;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMalloc(&c, bytes));
    std::vector<unsigned char> ha = host_matrix((size_t)n * n, dt, 1),
                               hb = host_matrix((size_t)n * n, dt, 2);
    CK(cudaMemcpy(a, ha.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), bytes, cudaMemcpyHostToDevice));
    cudaDataType t = dt == AMPX_F32 ? CUDA_R_32F : CUDA_R_16BF;
    float alpha = 1.0f, beta = 0.0f;
    auto call = [&]() {
        CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b, t, n, a, t, n, &beta, c, t,
                        n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    call();
    CK(cudaDeviceSynchronize());
    std::vector<double> ts;
    for (int trial = 0; trial < TRIALS; trial++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            call();
        CK(cudaDeviceSynchronize());
        ts.push_back((now_s() - t0) / reps);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    return median(ts);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cuda_peer PATH/libampx-cuda.so [SIZE ...]\n");
        return 2;
    }
    std::vector<int> sizes;
    for (int i = 2; i < argc; i++)
        sizes.push_back(atoi(argv[i]));
    if (sizes.empty()) sizes = {4096, 8192};

    plugin autop = open_plugin(argv[1], "gemm=auto"), native = open_plugin(argv[1], "gemm=native");
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetMathMode(
        h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int cublas_ver = 0;
    CB(cublasGetVersion(h, &cublas_ver));
    printf("device: %s (compute capability %d.%d), cuBLAS %d\n\n", prop.name, prop.major,
           prop.minor, cublas_ver);
    printf("| dtype | n | cublas TFLOP/s | ampx TFLOP/s | ampx / cublas | ampx-native TFLOP/s | "
           "native / cublas |\n|---|---|---|---|---|---|---|\n");
    const ampx_dtype dts[2] = {AMPX_BF16, AMPX_F32};
    for (int n : sizes)
        for (ampx_dtype dt : dts) {
            double flop = 2.0 * n * (double)n * n;
            int reps    = n <= 4096 ? 20 : 5;
            double tc   = time_cublas(h, dt, n, reps);
            double ta   = time_plugin(autop, dt, n, reps);
            double tn   = time_plugin(native, dt, n, n <= 4096 ? 3 : 1);
            printf("| %s | %d | %.1f | %.1f | %.2f | %.2f | %.3f |\n", ampx_dtype_name(dt), n,
                   flop / tc * 1e-12, flop / ta * 1e-12, tc / ta, flop / tn * 1e-12, tc / tn);
            fflush(stdout);
        }
    cublasDestroy(h);
    autop.I->destroy(autop.C);
    native.I->destroy(native.C);
    return 0;
}
