/* float8_shadow.cl — float16_shadow.cl's kernel on float8, which Oclgrind 21.10's
 * uninitialized-value check follows right (out = 13, nothing reported). */
__kernel void float8_shadow(__global const float *in, __global float *out) {
    float4 hi = vload8(1, in).hi;
    out[0]    = fmax(hi, hi).s1;
}
