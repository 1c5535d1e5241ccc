/* dropout.cl — DROPOUT: y[i] = x[i] * scale where hash32(seed, offset + i) >= threshold, else
 * +0 (whatever x holds). hash32 is dtype.h's ampx_hash32 in the same 64- and 32-bit integer
 * arithmetic (common.cl), so the mask is every other backend's bit for bit; the product is
 * f32, rounded once to y. offset + i wraps modulo 2^64 as on the host. In place is safe: each
 * work item reads its element before writing it. */
__kernel void dropout(CTENSOR(x), TENSOR(y), ulong n, ulong seed, ulong offset, uint threshold,
                      float scale) {
    for (ulong i = GID; i < n; i += GSIZE) {
        float v = LD(x, i);
        ST(y, i, hash32(seed, offset + i) >= threshold ? v * scale : 0.0f);
    }
}
