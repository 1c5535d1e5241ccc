/* vector_bool_zext.cl — Oclgrind 21.10 zero-extends a true lane of a vector comparison to 255.
 *
 * OpenCL gives -1 for each true lane of a vector comparison, so `c -= v == 0` counts the zero
 * lanes; clang compiles it as `add (zext <4 x i1> cmp)`. Oclgrind keeps a true lane of a
 * <4 x i1> as an all-ones byte and its zext gives 255: out[0..3] = {255, 0, 255, 0} where they
 * must be {1, 0, 1, 0}. out[4..7] count with the select builtin (typed/amp_reduce.cl's ONES
 * since), which Oclgrind evaluates right. */
__kernel void vector_bool_zext(__global const int *in, __global int *out) {
    int4 v = vload4(0, in);
    int4 c = 0;
    c -= v == 0;
    vstore4(c, 0, out);
    int4 d = 0;
    d += select((int4)0, (int4)1, v == 0);
    vstore4(d, 0, out + 4);
}
