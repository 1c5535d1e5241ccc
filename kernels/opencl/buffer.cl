/* buffer.cl — buffer_fill: a 1-, 2- or 4-byte little-endian pattern over any byte range
 * (clEnqueueFillBuffer wants the offset aligned to the pattern; the ABI does not). */
__kernel void buffer_fill(__global uchar *p, ulong offset, ulong bytes, uint pattern,
                          uint pattern_bytes) {
    for (ulong i = GID; i < bytes; i += GSIZE)
        p[offset + i] = (uchar)(pattern >> (8u * (uint)(i % pattern_bytes)));
}
