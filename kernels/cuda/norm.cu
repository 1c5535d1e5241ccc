/* norm.cu — LAYERNORM_FWD/BWD (per row) and BATCHNORM_FWD/BWD (per channel).
 *
 * As in the CPU backend, statistics are two-pass in double (the mean first, then the mean of
 * squared deviations, which avoids E[x^2] - E[x]^2 cancellation), saved as f32 for the
 * backward, which reads those f32 values back; outputs are formed in double and rounded once.
 * Layer norm: one block per row. Its dgamma/dbeta are column sums over rows: a block owns 32
 * columns and 8 rows of threads, partial sums added in a fixed order. Batch norm: one block
 * per channel, striding over its outer x inner values.
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// LAYERNORM

__global__ void ln_fwd_kernel(cuk_layernorm a) {
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        uint64_t base = r * a.cols;
        double s      = 0.0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x)
            s += cuk_ld(a.x, a.xdt, base + c);
        double mean = cuk_block_sum(s) / (double)a.cols;
        double ss   = 0.0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            double d = (double)cuk_ld(a.x, a.xdt, base + c) - mean;
            ss += d * d;
        }
        double rstd = 1.0 / sqrt(cuk_block_sum(ss) / (double)a.cols + (double)a.eps);
        if (threadIdx.x == 0) {
            a.mean[r] = (float)mean;
            a.rstd[r] = (float)rstd;
        }
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            double v = ((double)cuk_ld(a.x, a.xdt, base + c) - mean) * rstd;
            if (a.gamma) v *= (double)a.gamma[c];
            if (a.beta) v += (double)a.beta[c];
            cuk_st(a.out, a.odt, base + c, (float)v);
        }
    }
}

/* dx = rstd (g - mean_j(g) - xhat mean_j(g xhat)), g = dy gamma, from the saved f32 stats. */
__global__ void ln_bwd_kernel(cuk_layernorm a) {
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        uint64_t base = r * a.cols;
        double mean = a.mean_in[r], rstd = a.rstd_in[r], sg = 0.0, sgx = 0.0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            double xhat = ((double)cuk_ld(a.x, a.xdt, base + c) - mean) * rstd;
            double g =
                (double)cuk_ld(a.dy, a.dydt, base + c) * (a.gamma ? (double)a.gamma[c] : 1.0);
            sg += g;
            sgx += g * xhat;
        }
        double mg = cuk_block_sum(sg) / (double)a.cols, mgx = cuk_block_sum(sgx) / (double)a.cols;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            double xhat = ((double)cuk_ld(a.x, a.xdt, base + c) - mean) * rstd;
            double g =
                (double)cuk_ld(a.dy, a.dydt, base + c) * (a.gamma ? (double)a.gamma[c] : 1.0);
            cuk_st(a.out, a.odt, base + c, (float)(rstd * (g - mg - xhat * mgx)));
        }
    }
}

/* dgamma (+)= sum_r dy xhat, dbeta (+)= sum_r dy. */
__global__ void ln_bwd_params_kernel(cuk_layernorm a) {
    __shared__ double pgx[8][33], pg[8][33];
    uint64_t c = (uint64_t)blockIdx.x * 32 + threadIdx.x;
    double sgx = 0.0, sg = 0.0;
    if (c < a.cols)
        for (uint64_t r = threadIdx.y; r < a.rows; r += 8) {
            double dy   = cuk_ld(a.dy, a.dydt, r * a.cols + c);
            double xhat = ((double)cuk_ld(a.x, a.xdt, r * a.cols + c) - (double)a.mean_in[r]) *
                          (double)a.rstd_in[r];
            sgx += dy * xhat;
            sg += dy;
        }
    pgx[threadIdx.y][threadIdx.x] = sgx;
    pg[threadIdx.y][threadIdx.x]  = sg;
    __syncthreads();
    if (threadIdx.y == 0 && c < a.cols) {
        double tgx = 0.0, tg = 0.0;
        for (int k = 0; k < 8; k++) {
            tgx += pgx[k][threadIdx.x];
            tg += pg[k][threadIdx.x];
        }
        if (a.dgamma) a.dgamma[c] = (float)((a.accumulate ? (double)a.dgamma[c] : 0.0) + tgx);
        if (a.dbeta) a.dbeta[c] = (float)((a.accumulate ? (double)a.dbeta[c] : 0.0) + tg);
    }
}

extern "C" cudaError_t cuk_layernorm_fwd_run(cudaStream_t s, const cuk_layernorm *a) {
    if (a->rows == 0) return cudaSuccess;
    ln_fwd_kernel<<<cuk_blocks(a->rows, 1, 1u << 30), cuk_row_threads(a->cols), 0, s>>>(*a);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_layernorm_bwd_run(cudaStream_t s, const cuk_layernorm *a) {
    if (a->rows > 0 && a->cols > 0) {
        ln_bwd_kernel<<<cuk_blocks(a->rows, 1, 1u << 30), cuk_row_threads(a->cols), 0, s>>>(*a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    /* with rows == 0 the sums are 0 (or unchanged when accumulating) */
    if ((a->dgamma || a->dbeta) && a->cols > 0) {
        uint64_t blocks = (a->cols + 31) / 32;
        if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
        ln_bwd_params_kernel<<<(unsigned)blocks, dim3(32, 8), 0, s>>>(*a);
        return cudaGetLastError();
    }
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// BATCHNORM: x is [outer, channels, inner]; channel c's N = outer * inner values lie in
// `outer` runs of `inner` contiguous elements.

__device__ __forceinline__ uint64_t bn_index(const cuk_batchnorm &a, uint64_t c, uint64_t k) {
    uint64_t o = k / a.inner, i = k - o * a.inner;
    return (o * a.channels + c) * a.inner + i;
}

__global__ void bn_fwd_kernel(cuk_batchnorm a) {
    uint64_t N = a.outer * a.inner;
    for (uint64_t c = blockIdx.x; c < a.channels; c += gridDim.x) {
        double mean, rstd;
        if (a.training) {
            double s = 0.0;
            for (uint64_t k = threadIdx.x; k < N; k += blockDim.x)
                s += cuk_ld(a.x, a.xdt, bn_index(a, c, k));
            mean      = cuk_block_sum(s) / (double)N;
            double ss = 0.0;
            for (uint64_t k = threadIdx.x; k < N; k += blockDim.x) {
                double d = (double)cuk_ld(a.x, a.xdt, bn_index(a, c, k)) - mean;
                ss += d * d;
            }
            double var = cuk_block_sum(ss) / (double)N;
            rstd       = 1.0 / sqrt(var + (double)a.eps);
            if (threadIdx.x == 0) {
                a.mean[c] = (float)mean;
                a.rstd[c] = (float)rstd;
                /* running statistics use the unbiased variance; with N == 1 the biased (0) */
                double m = a.momentum, nd = (double)N;
                double unbiased = nd > 1.0 ? var * nd / (nd - 1.0) : var;
                if (a.run_mean)
                    a.run_mean[c] = (float)((1.0 - m) * (double)a.run_mean[c] + m * mean);
                if (a.run_var)
                    a.run_var[c] = (float)((1.0 - m) * (double)a.run_var[c] + m * unbiased);
            }
        } else {
            mean = a.run_mean[c];
            rstd = 1.0 / sqrt((double)a.run_var[c] + (double)a.eps);
        }
        double gm = a.gamma ? (double)a.gamma[c] : 1.0, bt = a.beta ? (double)a.beta[c] : 0.0;
        for (uint64_t k = threadIdx.x; k < N; k += blockDim.x) {
            uint64_t idx = bn_index(a, c, k);
            cuk_st(a.out, a.odt, idx,
                   (float)(((double)cuk_ld(a.x, a.xdt, idx) - mean) * rstd * gm + bt));
        }
        __syncthreads(); /* eval reads run_mean/run_var; training writes them: keep channels apart
                          */
    }
}

/* dx = gamma rstd (dy - mean_N(dy) - xhat mean_N(dy xhat)) from the saved f32 statistics. */
__global__ void bn_bwd_kernel(cuk_batchnorm a) {
    uint64_t N = a.outer * a.inner;
    for (uint64_t c = blockIdx.x; c < a.channels; c += gridDim.x) {
        double mean = a.mean[c], rstd = a.rstd[c], sdy = 0.0, sdyx = 0.0;
        for (uint64_t k = threadIdx.x; k < N; k += blockDim.x) {
            uint64_t idx = bn_index(a, c, k);
            double dy    = cuk_ld(a.dy, a.dydt, idx);
            sdy += dy;
            sdyx += dy * (((double)cuk_ld(a.x, a.xdt, idx) - mean) * rstd);
        }
        sdy        = cuk_block_sum(sdy);
        sdyx       = cuk_block_sum(sdyx);
        double gm  = a.gamma ? (double)a.gamma[c] : 1.0;
        double mdy = sdy / (double)N, mdyx = sdyx / (double)N;
        for (uint64_t k = threadIdx.x; k < N; k += blockDim.x) {
            uint64_t idx = bn_index(a, c, k);
            double xhat  = ((double)cuk_ld(a.x, a.xdt, idx) - mean) * rstd;
            double dy    = cuk_ld(a.dy, a.dydt, idx);
            cuk_st(a.out, a.odt, idx, (float)(gm * rstd * (dy - mdy - xhat * mdyx)));
        }
        if (threadIdx.x == 0) {
            if (a.dgamma) a.dgamma[c] = (float)((a.accumulate ? (double)a.dgamma[c] : 0.0) + sdyx);
            if (a.dbeta) a.dbeta[c] = (float)((a.accumulate ? (double)a.dbeta[c] : 0.0) + sdy);
        }
    }
}

extern "C" cudaError_t cuk_batchnorm_fwd_run(cudaStream_t s, const cuk_batchnorm *a) {
    if (a->outer == 0 || a->inner == 0 || a->channels == 0) return cudaSuccess;
    bn_fwd_kernel<<<cuk_blocks(a->channels, 1, 1u << 30), CUK_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_batchnorm_bwd_run(cudaStream_t s, const cuk_batchnorm *a) {
    if (a->outer == 0 || a->inner == 0 || a->channels == 0) return cudaSuccess;
    bn_bwd_kernel<<<cuk_blocks(a->channels, 1, 1u << 30), CUK_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}
