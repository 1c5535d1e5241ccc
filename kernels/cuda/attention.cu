/* attention.cu — ATTN_FWD and ATTN_BWD (backend.h): one thread per query row (the forward,
 * delta and dq) or key row (dk and dv), grid-stride over [batch, heads, seq], the kernels of
 * kernels/opencl/attention.cl in CUDA.
 *
 * The forward keeps its row's online softmax in f32 (running max m, sum l of exp(s - m), the
 * context accumulator rescaled by exp(m_old - m_new)) over tiles of ATTN_TK keys whose scores
 * sit in registers, so nothing of size seq x seq exists; the accumulator holds ATTN_CW
 * columns and a wider head runs the pass once per column block. The backward recomputes
 * p = exp(s - lse): the dq kernel writes delta = do . o, the dkv kernel (after it on the
 * stream) reads it. The dropout mask is dtype.h's ampx_hash32 of the element index of the
 * [B, H, T, T] probabilities, DROPOUT's bit for bit. Multiply-adds may contract into FMA,
 * within the conformance tolerance. */
#include "common.cuh"

#define ATTN_TK 32
#define ATTN_CW 64

__device__ __forceinline__ uint64_t attn_at(const cuk_attn &a, uint64_t b, uint64_t t, uint64_t h,
                                            uint64_t c, uint64_t ld) {
    return (b * a.seq + t) * ld + h * a.hd + c;
}

__device__ __forceinline__ float attn_keep(const cuk_attn &a, uint64_t row, uint64_t j) {
    if (a.threshold == 0) return 1.0f;
    return ampx_hash32(a.seed, a.offset + row * a.seq + j) >= a.threshold ? a.dscale : 0.0f;
}

__global__ void attn_fwd_kernel(cuk_attn a) {
    uint64_t rows = a.batch * a.heads * a.seq;
    for (uint64_t row = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = row % a.seq, bh = row / a.seq, b = bh / a.heads, h = bh % a.heads;
        uint64_t kend = a.causal ? i + 1 : a.seq;
        for (uint64_t c0 = 0; c0 < a.hd; c0 += ATTN_CW) {
            uint64_t nc = a.hd - c0 < ATTN_CW ? a.hd - c0 : ATTN_CW;
            float acc[ATTN_CW], s[ATTN_TK];
            for (uint64_t c = 0; c < nc; c++)
                acc[c] = 0.0f;
            float m = -INFINITY, l = 0.0f;
            for (uint64_t j0 = 0; j0 < kend; j0 += ATTN_TK) {
                uint64_t nk = kend - j0 < ATTN_TK ? kend - j0 : ATTN_TK;
                float mx    = -INFINITY;
                for (uint64_t jj = 0; jj < nk; jj++) {
                    float d = 0.0f;
                    for (uint64_t c = 0; c < a.hd; c++)
                        d += cuk_ld(a.q, a.qdt, attn_at(a, b, i, h, c, a.ld_q)) *
                             cuk_ld(a.k, a.qdt, attn_at(a, b, j0 + jj, h, c, a.ld_k));
                    s[jj] = d * a.scale;
                    mx    = fmaxf(mx, s[jj]);
                }
                float mn = fmaxf(m, mx), alpha = m == -INFINITY ? 0.0f : expf(m - mn);
                for (uint64_t c = 0; c < nc; c++)
                    acc[c] *= alpha;
                l *= alpha;
                for (uint64_t jj = 0; jj < nk; jj++) {
                    float p = expf(s[jj] - mn);
                    l += p;
                    p *= attn_keep(a, row, j0 + jj);
                    for (uint64_t c = 0; c < nc; c++)
                        acc[c] += p * cuk_ld(a.v, a.qdt, attn_at(a, b, j0 + jj, h, c0 + c, a.ld_v));
                }
                m = mn;
            }
            float inv = 1.0f / l;
            for (uint64_t c = 0; c < nc; c++)
                cuk_st(a.out, a.odt, attn_at(a, b, i, h, c0 + c, a.ld_o), acc[c] * inv);
            if (c0 == 0) a.lse[row] = m + logf(l);
        }
    }
}

/* ds = scale p (keep dp - delta) of query i and key j; *pd = keep p. */
__device__ __forceinline__ float attn_ds(const cuk_attn &a, uint64_t b, uint64_t h, uint64_t i,
                                         uint64_t j, float lse_i, float delta_i, float keep,
                                         float *pd) {
    float d = 0.0f, dp = 0.0f;
    for (uint64_t c = 0; c < a.hd; c++) {
        d += cuk_ld(a.q, a.qdt, attn_at(a, b, i, h, c, a.ld_q)) *
             cuk_ld(a.k, a.qdt, attn_at(a, b, j, h, c, a.ld_k));
        dp += cuk_ld(a.d_o, a.ddt, attn_at(a, b, i, h, c, a.ld_o)) *
              cuk_ld(a.v, a.qdt, attn_at(a, b, j, h, c, a.ld_v));
    }
    float p = expf(d * a.scale - lse_i);
    *pd     = keep * p;
    return a.scale * p * (keep * dp - delta_i);
}

__global__ void attn_bwd_dq_kernel(cuk_attn a) {
    uint64_t rows = a.batch * a.heads * a.seq;
    for (uint64_t row = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = row % a.seq, bh = row / a.seq, b = bh / a.heads, h = bh % a.heads;
        float di = 0.0f;
        for (uint64_t c = 0; c < a.hd; c++)
            di += cuk_ld(a.d_o, a.ddt, attn_at(a, b, i, h, c, a.ld_o)) *
                  cuk_ld(a.o, a.odt, attn_at(a, b, i, h, c, a.ld_o));
        a.delta[row]  = di;
        uint64_t kend = a.causal ? i + 1 : a.seq;
        for (uint64_t c0 = 0; c0 < a.hd; c0 += ATTN_CW) {
            uint64_t nc = a.hd - c0 < ATTN_CW ? a.hd - c0 : ATTN_CW;
            float acc[ATTN_CW];
            for (uint64_t c = 0; c < nc; c++)
                acc[c] = 0.0f;
            for (uint64_t j = 0; j < kend; j++) {
                float pd, ds = attn_ds(a, b, h, i, j, a.lse[row], di, attn_keep(a, row, j), &pd);
                for (uint64_t c = 0; c < nc; c++)
                    acc[c] += ds * cuk_ld(a.k, a.qdt, attn_at(a, b, j, h, c0 + c, a.ld_k));
            }
            for (uint64_t c = 0; c < nc; c++)
                cuk_st(a.dq, a.gdt, attn_at(a, b, i, h, c0 + c, a.ld_dq), acc[c]);
        }
    }
}

__global__ void attn_bwd_dkv_kernel(cuk_attn a) {
    uint64_t rows = a.batch * a.heads * a.seq;
    for (uint64_t row = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t j = row % a.seq, bh = row / a.seq, b = bh / a.heads, h = bh % a.heads;
        for (uint64_t c0 = 0; c0 < a.hd; c0 += ATTN_CW) {
            uint64_t nc = a.hd - c0 < ATTN_CW ? a.hd - c0 : ATTN_CW;
            float ak[ATTN_CW], av[ATTN_CW];
            for (uint64_t c = 0; c < nc; c++)
                ak[c] = av[c] = 0.0f;
            for (uint64_t i = a.causal ? j : 0; i < a.seq; i++) {
                uint64_t qrow = bh * a.seq + i;
                float pd, ds = attn_ds(a, b, h, i, j, a.lse[qrow], a.delta[qrow],
                                       attn_keep(a, qrow, j), &pd);
                for (uint64_t c = 0; c < nc; c++) {
                    ak[c] += ds * cuk_ld(a.q, a.qdt, attn_at(a, b, i, h, c0 + c, a.ld_q));
                    av[c] += pd * cuk_ld(a.d_o, a.ddt, attn_at(a, b, i, h, c0 + c, a.ld_o));
                }
            }
            for (uint64_t c = 0; c < nc; c++) {
                cuk_st(a.dk, a.gdt, attn_at(a, b, j, h, c0 + c, a.ld_dk), ak[c]);
                cuk_st(a.dv, a.gdt, attn_at(a, b, j, h, c0 + c, a.ld_dv), av[c]);
            }
        }
    }
}

#define ATTN_THREADS 64

extern "C" cudaError_t cuk_attn_fwd_run(cudaStream_t s, const cuk_attn *a) {
    uint64_t rows = a->batch * a->heads * a->seq;
    if (rows == 0) return cudaSuccess;
    attn_fwd_kernel<<<cuk_blocks(rows, ATTN_THREADS, 1u << 16), ATTN_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_attn_bwd_run(cudaStream_t s, const cuk_attn *a) {
    uint64_t rows = a->batch * a->heads * a->seq;
    if (rows == 0) return cudaSuccess;
    unsigned blocks = cuk_blocks(rows, ATTN_THREADS, 1u << 16);
    attn_bwd_dq_kernel<<<blocks, ATTN_THREADS, 0, s>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    attn_bwd_dkv_kernel<<<blocks, ATTN_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}
