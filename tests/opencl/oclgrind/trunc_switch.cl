/* trunc_switch.cl — Oclgrind 21.10 does not drop the bits of an integer above an odd width.
 *
 * f16_by_field is common.cl's f16 decode as it was: clang compiles its tests of the 5-bit
 * exponent field `(h >> 10) & 0x1f` against 31 and 0 into `trunc i32 to i5` and `switch i5`.
 * For h = 0xfd92 (a NaN with the sign set) the field is 31, but h >> 10 is 0x3f and Oclgrind
 * keeps all of it in the i5, so the switch takes the normal-number path: 0xc7b24000
 * (-91264) where the NaN 0xffb24000 is due; h = 0xfc00 (-inf) gives -65536, h = 0x8001 (the
 * negative subnormal -2^-24) gives -3.05e-05. f16_by_magnitude is common.cl's f16_to_f32
 * since, which decides the class on the 32-bit magnitude; Oclgrind decodes it right. */
inline float f16_by_field(ushort h) {
    uint sign = (uint)(h & 0x8000u) << 16;
    uint e    = (h >> 10) & 0x1fu;
    uint mant = h & 0x3ffu;
    if (e == 0x1fu) return as_float(sign | 0x7f800000u | (mant << 13));
    if (e == 0u) {
        if (mant == 0u) return as_float(sign);
        uint sh = clz(mant) - 21u;
        mant <<= sh;
        return as_float(sign | ((113u - sh) << 23) | ((mant & 0x3ffu) << 13));
    }
    return as_float(sign | ((e + 112u) << 23) | (mant << 13));
}

inline float f16_by_magnitude(ushort h) {
    uint sign = (uint)(h & 0x8000u) << 16;
    uint a    = h & 0x7fffu;
    if (a >= 0x7c00u) return as_float(sign | 0x7f800000u | ((a & 0x3ffu) << 13));
    if (a < 0x0400u) {
        if (a == 0u) return as_float(sign);
        uint sh = clz(a) - 21u;
        return as_float(sign | ((113u - sh) << 23) | (((a << sh) & 0x3ffu) << 13));
    }
    return as_float(sign | ((a << 13) + (112u << 23)));
}

/* out[i] = the bits of h[i] decoded the old way, out[4 + i] the new way */
__kernel void trunc_switch(__global const ushort *h, __global uint *out) {
    uint i     = get_global_id(0);
    out[i]     = as_uint(f16_by_field(h[i]));
    out[4 + i] = as_uint(f16_by_magnitude(h[i]));
}
