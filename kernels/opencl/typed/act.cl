/* act.cl — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu in f32, with
 * kernel_math.h's functions (embedded before this file; in OpenCL C their working precision
 * is float): the same formulas as the cpu and cuda backends, which evaluate them in double.
 * Loads and stores move VW elements; the math runs lane by lane, with the activation picked
 * once per kernel rather than per element (the switch of ampx_km_act_f / _df, unrolled), so
 * the compiler can vectorize the lanes of the cheap ones.
 * act_fwd is built per (T_x, T_y), act_bwd per (T_x, T_dy, T_dx). */

/* for (each vector j) { v = F(x[j]) lane by lane (MAP, one of common.cl's); BODY } */
#define ACT_VEC_LOOP(MAP, F, BODY)                                                                 \
    FOR_VECS (j, nv) {                                                                             \
        floatv v = LDV(x, j * VW);                                                                 \
        MAP(F, v);                                                                                 \
        BODY;                                                                                      \
    }

#define ACT_SWITCH(act, SUFFIX, BODY)                                                              \
    switch (act) {                                                                                 \
    case AMPX_KM_ACT_RELU: ACT_VEC_LOOP(MAP_VEC, act_relu##SUFFIX##_v, BODY) break;                \
    case AMPX_KM_ACT_GELU: ACT_VEC_LOOP(ACT_GELU_MAP##SUFFIX, ACT_GELU##SUFFIX, BODY) break;       \
    case AMPX_KM_ACT_TANH: ACT_VEC_LOOP(MAP_LANES_LOOP, ACT_TANH##SUFFIX, BODY) break;             \
    case AMPX_KM_ACT_SIGMOID: ACT_VEC_LOOP(MAP_LANES_LOOP, ampx_km_sigmoid##SUFFIX, BODY) break;   \
    case AMPX_KM_ACT_SILU: ACT_VEC_LOOP(MAP_LANES_LOOP, ampx_km_silu##SUFFIX, BODY) break;         \
    default: ACT_VEC_LOOP(MAP_LANES, ACT_ZERO, BODY) break;                                        \
    }
/* Gelu: common.cl's ACT_GELU_FNS; act_gelu_v / _df_v for vectors, _s for the tail elements. */
ACT_GELU_FNS(floatv, _v)
ACT_GELU_FNS(float, _s)
/* Relu and its derivative on whole vectors, kernel_math.h's values (NaN passes through,
 * -0 and negatives give +0): its lane-by-lane form ran at a fifth of a copy on PoCL. */
inline floatv act_relu_v(floatv x) {
    return select(select((floatv)0.0f, x, isnan(x)), x, x > 0.0f);
}
inline floatv act_relu_df_v(floatv x) {
    return select(select((floatv)0.0f, x, isnan(x)), (floatv)1.0f, x > 0.0f);
}
#define MAP_VEC(F, v) ((v) = F(v))
#define ACT_GELU_MAP MAP_VEC
#define ACT_GELU act_gelu_v
#define ACT_GELU_MAP_df MAP_VEC
#define ACT_GELU_df act_gelu_df_v
#define ACT_TANH(x) tanh(x)
#define ACT_TANH_df(x) ampx_km_tanh_df(x)
#define ACT_ZERO(x) 0.0f
#define ACT_ZERO_df(x) 0.0f

#ifdef K_act_fwd
__kernel void act_fwd(CTENSOR(x), TENSOR(y), ulong n, int act) {
    ulong nv = n / VW;
    ACT_SWITCH(act, , STV(y, j * VW, v))
    for (ulong i = nv * VW + GID; i < n; i += GSIZE)
        ST(y, i, act == AMPX_KM_ACT_GELU ? act_gelu_s(LD(x, i)) : ampx_km_act_f(act, LD(x, i)));
}
#endif

#ifdef K_act_bwd
__kernel void act_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), ulong n, int act) {
    ulong nv = n / VW;
    ACT_SWITCH(act, _df, STV(dx, j * VW, LDV(dy, j * VW) * v))
    for (ulong i = nv * VW + GID; i < n; i += GSIZE)
        ST(dx, i,
           LD(dy, i) *
               (act == AMPX_KM_ACT_GELU ? act_gelu_df_s(LD(x, i)) : ampx_km_act_df(act, LD(x, i))));
}
#endif
