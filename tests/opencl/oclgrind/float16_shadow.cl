/* float16_shadow.cl — Oclgrind 21.10's uninitialized-value check loses track of 16-wide vectors.
 *
 * in holds 16 initialized floats. Lanes 8-15 of a float16 loaded by vload16 (or built from
 * two vload8 and computed on, or passed to exp) reach fmax, whose arguments the check requires
 * initialized, and Oclgrind 21.10 reports "Controlflow depends on uninitialized value" for
 * them; the same code on float8 (float8_shadow.cl) is not reported. The tiled attention kernels
 * compute on float16 (attention.cl's AT_B tiles), so on this version they can be checked
 * with --data-races but not with --uninitialized (docs/OPENCL.md). */
__kernel void float16_shadow(__global const float *in, __global float *out) {
    float8 hi = vload16(0, in).hi;
    out[0]    = fmax(hi, hi).s1;
}
