/* embedding.cu — EMBEDDING_FWD (row gather) and EMBEDDING_BWD (scatter-add into f32).
 *
 * Forward: one thread per element of y, converting from the table's dtype (exact when
 * widening, nearest even when narrowing); an id outside [0, vocab) gives a zero row.
 * Backward: one thread per element of dy, added into the f32 dtable with atomicAdd, so rows
 * of a repeated id are summed in an unspecified order (each addition rounds in f32, within
 * the ABI's f32 accumulation; the bits may differ from run to run when an id repeats).
 * Out-of-range ids are skipped.
 */
#include "common.cuh"

__global__ void emb_fwd_kernel(cuk_embedding a) {
    uint64_t total = a.n * a.dim, stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        uint64_t i = e / a.dim, c = e - i * a.dim;
        int32_t id = a.ids[i];
        float v    = 0.0f;
        if (id >= 0 && (uint64_t)id < a.vocab) v = cuk_ld(a.table, a.tdt, (uint64_t)id * a.dim + c);
        cuk_st(a.y, a.ydt, e, v);
    }
}

__global__ void emb_bwd_kernel(cuk_embedding a) {
    uint64_t total = a.n * a.dim, stride = (uint64_t)gridDim.x * blockDim.x;
    float *dtable = (float *)a.table;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        uint64_t i = e / a.dim, c = e - i * a.dim;
        int32_t id = a.ids[i];
        if (id < 0 || (uint64_t)id >= a.vocab) continue;
        atomicAdd(dtable + (uint64_t)id * a.dim + c, cuk_ld(a.y, a.ydt, e));
    }
}

extern "C" cudaError_t cuk_embedding_fwd_run(cudaStream_t s, const cuk_embedding *a) {
    uint64_t total = a->n * a->dim;
    if (total == 0) return cudaSuccess;
    emb_fwd_kernel<<<cuk_blocks(total, CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_embedding_bwd_run(cudaStream_t s, const cuk_embedding *a) {
    uint64_t total = a->n * a->dim;
    if (total == 0) return cudaSuccess;
    emb_bwd_kernel<<<cuk_blocks(total, CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(*a);
    return cudaGetLastError();
}
