/* softmax.cu — SOFTMAX_FWD / SOFTMAX_BWD (optionally log-softmax, causal mask, pre-scale) and
 * the fused SOFTMAX_XENT loss.
 *
 * One block per row (rows beyond the grid loop), its threads striding over the columns and
 * combining partial results with warp-shuffle block reductions. Numerics follow the CPU
 * backend: z = scale * x is formed in f32; the row max is subtracted before exponentiating;
 * exponentials, their sum and the logarithm are evaluated in double; each output is rounded
 * once to its dtype. A NaN anywhere in a row poisons the row (its max becomes NaN). Masked
 * positions get probability 0 (log-probability -inf) forward and gradient 0 backward.
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// SOFTMAX_FWD and SOFTMAX_BWD

/* The last visible key of row r: j <= lim, aligned at the end of the row. */
__device__ __forceinline__ uint64_t visible_lim(const cuk_softmax &a, uint64_t r) {
    return a.causal ? (r % a.seq_q) + (a.cols - a.seq_q) : a.cols - 1;
}

__global__ void softmax_fwd_kernel(cuk_softmax a) {
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        uint64_t base = r * a.cols, lim = visible_lim(a, r);
        float mx = -INFINITY;
        int nan  = 0;
        for (uint64_t c = threadIdx.x; c <= lim; c += blockDim.x) {
            float z = a.scale * cuk_ld(a.in, a.idt, base + c);
            mx      = fmaxf(mx, z);
            nan |= z != z;
        }
        mx = cuk_block_max(mx);
        if (cuk_block_or(nan)) mx = NAN;
        double sum = 0.0;
        for (uint64_t c = threadIdx.x; c <= lim; c += blockDim.x)
            sum += exp((double)(a.scale * cuk_ld(a.in, a.idt, base + c)) - (double)mx);
        sum        = cuk_block_sum(sum);
        double lse = log(sum);
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            float v;
            if (c > lim) {
                v = a.log ? -INFINITY : 0.0f;
            } else {
                double d = (double)(a.scale * cuk_ld(a.in, a.idt, base + c)) - (double)mx;
                v        = a.log ? (float)(d - lse) : (float)(exp(d) / sum);
            }
            cuk_st(a.out, a.odt, base + c, v);
        }
    }
}

/* softmax:     dx_j = scale y_j (dy_j - sum_k dy_k y_k)
 * log_softmax: dx_j = scale (dy_j - exp(y_j) sum_k dy_k)
 * Sums over visible keys only; dx = 0 at masked positions whatever dy holds there. */
__global__ void softmax_bwd_kernel(cuk_softmax a) {
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        uint64_t base = r * a.cols, lim = visible_lim(a, r);
        double s = 0.0;
        for (uint64_t c = threadIdx.x; c <= lim; c += blockDim.x) {
            double dy = cuk_ld(a.dy, a.dydt, base + c);
            s += a.log ? dy : dy * (double)cuk_ld(a.in, a.idt, base + c);
        }
        s = cuk_block_sum(s);
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            float v = 0.0f;
            if (c <= lim) {
                double y  = cuk_ld(a.in, a.idt, base + c);
                double dy = cuk_ld(a.dy, a.dydt, base + c);
                v         = a.log ? (float)((double)a.scale * (dy - exp(y) * s))
                                  : (float)((double)a.scale * y * (dy - s));
            }
            cuk_st(a.out, a.odt, base + c, v);
        }
    }
}

extern "C" cudaError_t cuk_softmax_run(cudaStream_t s, const cuk_softmax *a) {
    if (a->rows == 0 || a->cols == 0) return cudaSuccess;
    unsigned blocks = cuk_blocks(a->rows, 1, 1u << 30), threads = cuk_row_threads(a->cols);
    if (a->bwd)
        softmax_bwd_kernel<<<blocks, threads, 0, s>>>(*a);
    else
        softmax_fwd_kernel<<<blocks, threads, 0, s>>>(*a);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// SOFTMAX_XENT
//
// Three kernels on the stream: count the valid rows; per row, the term logsumexp(row) -
// row[label] (into a double array) and the gradient g (softmax_j - [j == label]) with
// g = grad_scale / n_valid (* scalars->scale), read from the device; then the terms summed
// in row order into the loss. A label outside [0, cols) that is not ignore_index makes its
// term NaN (hence the loss) and is never used as an index.

__global__ void xent_count_kernel(cuk_xent a) {
    unsigned long long n = 0;
    for (uint64_t r = threadIdx.x; r < a.rows; r += blockDim.x)
        n += a.labels[r] != a.ignore_index;
    n = cuk_block_sum_u64(n);
    if (threadIdx.x == 0) *a.n_valid = n;
}

__global__ void xent_rows_kernel(cuk_xent a) {
    unsigned long long n_valid = *a.n_valid;
    double loss_scale          = a.scalars ? (double)((const ampx_scalars *)a.scalars)->scale : 1.0;
    double g = n_valid ? (double)a.grad_scale / (double)n_valid * loss_scale : 0.0;
    for (uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        uint64_t base = r * a.cols;
        int32_t label = a.labels[r];
        if (label == a.ignore_index) {
            if (threadIdx.x == 0) a.terms[r] = 0.0;
            if (a.dlogits)
                for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x)
                    cuk_st(a.dlogits, a.ddt, base + c, 0.0f);
            continue;
        }
        int bad  = label < 0 || (uint64_t)label >= a.cols;
        float mx = -INFINITY;
        int nan  = 0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
            float x = cuk_ld(a.logits, a.ldt, base + c);
            mx      = fmaxf(mx, x);
            nan |= x != x;
        }
        mx = cuk_block_max(mx);
        if (cuk_block_or(nan)) mx = NAN;
        double sum = 0.0;
        for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x)
            sum += exp((double)cuk_ld(a.logits, a.ldt, base + c) - (double)mx);
        sum = cuk_block_sum(sum);
        if (threadIdx.x == 0) {
            double lse = (double)mx + log(sum);
            a.terms[r] = bad ? (double)NAN : lse - (double)cuk_ld(a.logits, a.ldt, base + label);
        }
        if (a.dlogits)
            for (uint64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
                double p = exp((double)cuk_ld(a.logits, a.ldt, base + c) - (double)mx) / sum;
                if (!bad && c == (uint64_t)label) p -= 1.0;
                cuk_st(a.dlogits, a.ddt, base + c, (float)(g * p));
            }
    }
}

__global__ void xent_loss_kernel(cuk_xent a) {
    /* In row order: each thread sums a contiguous run of rows, then the block adds the runs
     * in thread order (a fixed tree), so the loss does not depend on timing. */
    uint64_t per = (a.rows + blockDim.x - 1) / blockDim.x;
    uint64_t r0 = threadIdx.x * per, r1 = r0 + per < a.rows ? r0 + per : a.rows;
    double s = 0.0;
    for (uint64_t r = r0; r < r1; r++)
        s += a.terms[r];
    s = cuk_block_sum(s);
    if (threadIdx.x == 0) {
        unsigned long long n_valid = *a.n_valid;
        *a.loss                    = (float)(n_valid ? s / (double)n_valid : 0.0);
    }
}

extern "C" cudaError_t cuk_xent_run(cudaStream_t s, const cuk_xent *a) {
    xent_count_kernel<<<1, CUK_THREADS, 0, s>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    if (a->rows > 0) {
        xent_rows_kernel<<<cuk_blocks(a->rows, 1, 1u << 30), cuk_row_threads(a->cols), 0, s>>>(*a);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    xent_loss_kernel<<<1, CUK_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}
