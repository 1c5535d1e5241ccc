/* elementwise.cu — ADD (add, axpby, bias-add), MUL, SCALE and BIAS_GRAD.
 *
 * Each element is loaded to f32 (exact), combined in f32 exactly as backend.h writes it, and
 * rounded once to y's dtype. Threads take 4 consecutive elements: with every pointer aligned
 * to 4 elements (and, for a row broadcast, rows a multiple of 4 long) they move as one 16-
 * or 8-byte vector, otherwise one by one; the arithmetic is the same either way. In place
 * (y the very same tensor as a or b) is safe: each thread reads its elements before writing
 * them. A broadcast row that y overlaps is staged into a copy by the host code first.
 */
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// ADD and MUL

__device__ __forceinline__ float binary_f(const cuk_binary &b, float x, float y) {
    return b.mul ? x * y : b.alpha * x + b.beta * y;
}

__global__ void binary_kernel(cuk_binary b, int vec) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x * 4;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < b.n; i += stride) {
        if (vec && i + 4 <= b.n) {
            float x[4], y[4];
            cuk_ld4(b.a, b.adt, i, x);
            cuk_ld4(b.b, b.bdt, b.broadcast_b ? i % b.cols : i, y);
            for (int j = 0; j < 4; j++)
                x[j] = binary_f(b, x[j], y[j]);
            cuk_st4(b.y, b.ydt, i, x);
        } else {
            uint64_t end = i + 4 < b.n ? i + 4 : b.n;
            for (uint64_t e = i; e < end; e++) {
                float x = cuk_ld(b.a, b.adt, e);
                float y = cuk_ld(b.b, b.bdt, b.broadcast_b ? e % b.cols : e);
                cuk_st(b.y, b.ydt, e, binary_f(b, x, y));
            }
        }
    }
}

extern "C" cudaError_t cuk_binary_run(cudaStream_t s, const cuk_binary *b) {
    if (b->n == 0) return cudaSuccess;
    int vec = cuk_aligned4(b->a, b->adt) && cuk_aligned4(b->b, b->bdt) &&
              cuk_aligned4(b->y, b->ydt) && (!b->broadcast_b || b->cols % 4 == 0);
    binary_kernel<<<cuk_blocks(b->n, 4 * CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*b, vec);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// SCALE

__global__ void scale_kernel(cuk_scale c, int vec) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x * 4;
    for (uint64_t i = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < c.n; i += stride) {
        if (vec && i + 4 <= c.n) {
            float x[4];
            cuk_ld4(c.x, c.xdt, i, x);
            for (int j = 0; j < 4; j++)
                x[j] = c.alpha * x[j];
            cuk_st4(c.y, c.ydt, i, x);
        } else {
            uint64_t end = i + 4 < c.n ? i + 4 : c.n;
            for (uint64_t e = i; e < end; e++)
                cuk_st(c.y, c.ydt, e, c.alpha * cuk_ld(c.x, c.xdt, e));
        }
    }
}

extern "C" cudaError_t cuk_scale_run(cudaStream_t s, const cuk_scale *c) {
    if (c->n == 0) return cudaSuccess;
    int vec = cuk_aligned4(c->x, c->xdt) && cuk_aligned4(c->y, c->ydt);
    scale_kernel<<<cuk_blocks(c->n, 4 * CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*c, vec);
    return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// BIAS_GRAD: db[c] = (accumulate ? db[c] : 0) + sum_r dy[r, c]
//
// A block owns 32 columns; its 8 rows of threads (threadIdx.y) stride over the rows, each
// summing in double, and the 8 partial sums are added in a fixed order. Reads of a warp are
// 32 consecutive columns of one row (coalesced).

__global__ void bias_grad_kernel(cuk_bias_grad b) {
    __shared__ double part[8][33];
    uint64_t c = (uint64_t)blockIdx.x * 32 + threadIdx.x;
    double s   = 0.0;
    if (c < b.cols)
        for (uint64_t r = threadIdx.y; r < b.rows; r += 8)
            s += cuk_ld(b.dy, b.dydt, r * b.cols + c);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < b.cols) {
        double t = 0.0;
        for (int k = 0; k < 8; k++)
            t += part[k][threadIdx.x];
        if (b.accumulate) t += cuk_ld(b.db, b.dbdt, c);
        cuk_st(b.db, b.dbdt, c, (float)t);
    }
}

extern "C" cudaError_t cuk_bias_grad_run(cudaStream_t s, const cuk_bias_grad *b) {
    if (b->cols == 0) return cudaSuccess;
    uint64_t blocks = (b->cols + 31) / 32;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
    bias_grad_kernel<<<(unsigned)blocks, dim3(32, 8), 0, s>>>(*b);
    return cudaGetLastError();
}
