/* act.cl — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu in f32, with
 * kernel_math.h's ampx_km_act_f and ampx_km_act_df (embedded before this file; in OpenCL C
 * their working precision is float): the same formulas as the cpu and cuda backends, which
 * evaluate them in double. */
__kernel void act_fwd(CTENSOR(x), TENSOR(y), ulong n, int act) {
    for (ulong i = GID; i < n; i += GSIZE)
        ST(y, i, ampx_km_act_f(act, LD(x, i)));
}

__kernel void act_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), ulong n, int act) {
    for (ulong i = GID; i < n; i += GSIZE)
        ST(dx, i, LD(dy, i) * ampx_km_act_df(act, LD(x, i)));
}
