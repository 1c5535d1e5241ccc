/* buffer.cu — buffer_fill: a 1-, 2- or 4-byte pattern repeated over a byte range of any
 * alignment (cudaMemsetD16/D32 need aligned destinations; tensors at odd offsets do not).
 * Byte k of the range gets byte (k mod pattern_bytes) of the little-endian pattern.
 */
#include "common.cuh"

__global__ void fill_kernel(unsigned char *dst, uint64_t bytes, uint32_t pattern, uint32_t pb) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < bytes; k += stride)
        dst[k] = (unsigned char)(pattern >> (8u * (uint32_t)(k % pb)));
}

extern "C" cudaError_t cuk_fill_run(cudaStream_t s, void *dst, uint64_t bytes, uint32_t pattern,
                                    uint32_t pattern_bytes) {
    if (bytes == 0) return cudaSuccess;
    if (pattern_bytes == 1) return cudaMemsetAsync(dst, (int)(pattern & 0xffu), (size_t)bytes, s);
    fill_kernel<<<cuk_blocks(bytes, CUK_THREADS, 1u << 20), CUK_THREADS, 0, s>>>(
        (unsigned char *)dst, bytes, pattern, pattern_bytes);
    return cudaGetLastError();
}
