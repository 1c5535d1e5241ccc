/* divrem_freeze.cl — Oclgrind 21.10's uninitialized-value check cannot run LLVM's `freeze`.
 *
 * Where x % d and x / d meet, clang computes the remainder as x - (x / d) d and freezes x
 * first; under --uninitialized Oclgrind 21.10 stops with "Unsupported instruction: freeze"
 * (supported since, upstream commit ee3a739). divrem_pair is that form; divrem_spelled is
 * common.cl's udivmod, the remainder written out, which gives clang nothing to freeze. Both
 * store 14 and 2 (100 = 14 * 7 + 2). */
__kernel void divrem_pair(__global const ulong *in, __global ulong *out) {
    ulong x = in[0] + get_global_id(0), d = in[1];
    out[0] = x / d;
    out[1] = x % d;
}

__kernel void divrem_spelled(__global const ulong *in, __global ulong *out) {
    ulong x = in[0] + get_global_id(0), d = in[1];
    ulong q = x / d;
    out[0]  = q;
    out[1]  = x - q * d;
}
