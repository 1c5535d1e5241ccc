/* act.cl — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu in f32, with
 * kernel_math.h's functions (embedded before this file; in OpenCL C their working precision
 * is float): the same formulas as the cpu and cuda backends, which evaluate them in double.
 * Loads and stores move VW elements; the math runs lane by lane, with the activation picked
 * once per kernel rather than per element (the switch of ampx_km_act_f / _df, unrolled), so
 * the compiler can vectorize the lanes of the cheap ones.
 * act_fwd is built per (T_x, T_y), act_bwd per (T_x, T_dy, T_dx). */

/* for (each vector j) { v = F(x[j]) lane by lane (MAP, one of common.cl's); BODY } */
#define ACT_VEC_LOOP(MAP, F, BODY)                                                                 \
    for (ulong j = GID; j < nv; j += GSIZE) {                                                      \
        floatv v = LDV(x, j * VW);                                                                 \
        MAP(F, v);                                                                                 \
        BODY;                                                                                      \
    }

#define ACT_SWITCH(act, SUFFIX, BODY)                                                              \
    switch (act) {                                                                                 \
    case AMPX_KM_ACT_RELU: ACT_VEC_LOOP(MAP_LANES, ampx_km_relu##SUFFIX, BODY) break;              \
    case AMPX_KM_ACT_GELU: ACT_VEC_LOOP(ACT_GELU_MAP##SUFFIX, ACT_GELU##SUFFIX, BODY) break;       \
    case AMPX_KM_ACT_TANH: ACT_VEC_LOOP(MAP_LANES_LOOP, ACT_TANH##SUFFIX, BODY) break;             \
    case AMPX_KM_ACT_SIGMOID: ACT_VEC_LOOP(MAP_LANES_LOOP, ampx_km_sigmoid##SUFFIX, BODY) break;   \
    case AMPX_KM_ACT_SILU: ACT_VEC_LOOP(MAP_LANES_LOOP, ampx_km_silu##SUFFIX, BODY) break;         \
    default: ACT_VEC_LOOP(MAP_LANES, ACT_ZERO, BODY) break;                                        \
    }
/* Gelu as 0.5 x (1 + tanh u) = x s, s = 1 / (1 + exp(-2u)), u = k (x + c x^3): the same
 * function, whole vectors at a time (PoCL's vector exp; its lane-by-lane tanh ran at a
 * fiftieth of a copy), and more accurate where 1 + tanh u cancels (x < 0). The derivative
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2) is s + 2 x s q k (1 + 3 c x^2),
 * q = 1 - s = exp(-2u) s (whichever does not cancel), its second term 0 where s q is, as
 * kernel_math.h's is where 1 - tanh^2 u is. Both give what kernel_math.h's |x| > 20 cut
 * gives (f: -0 below, x above; f': 0 and 1), and NaN where it gives NaN (x = -inf for f).
 * act_gelu_v / _df_v for vectors, _s for the tail elements. */
#define ACT_GELU_FNS(T, SUF)                                                                       \
    inline T act_gelu##SUF(T x) {                                                                  \
        T u = AMPX_KM_GELU_K * (x + AMPX_KM_GELU_C * x * x * x);                                   \
        return x / (1.0f + exp(-2.0f * u));                                                        \
    }                                                                                              \
    inline T act_gelu_df##SUF(T x) {                                                               \
        T u = AMPX_KM_GELU_K * (x + AMPX_KM_GELU_C * x * x * x);                                   \
        T e = exp(-2.0f * u);                                                                      \
        T s = 1.0f / (1.0f + e);                                                                   \
        T q = select(1.0f - s, e * s, e < 1.0f);                                                   \
        T d = 2.0f * x * s * q * AMPX_KM_GELU_K * (1.0f + 3.0f * AMPX_KM_GELU_C * x * x);          \
        return s + select(d, (T)0.0f, s * q == 0.0f);                                              \
    }
ACT_GELU_FNS(floatv, _v)
ACT_GELU_FNS(float, _s)
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
