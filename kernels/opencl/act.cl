/* act.cl — ACT_FWD and ACT_BWD: relu, gelu (tanh form), tanh, sigmoid, silu in f32, forward
 * and derivative side by side. gelu's cubic overflows f32 for |x| > ~7e12; past |x| = 20,
 * tanh(u) is +-1 in f32 anyway, so it is taken as that and the derivative's 0 * inf cannot
 * turn into NaN. */
#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

inline float sigmoid_f(float x) {
    return 1.0f / (1.0f + exp(-x));
}

inline float gelu_tanh(float x) {
    if (fabs(x) > 20.0f) return x > 0.0f ? 1.0f : -1.0f;
    return tanh(GELU_K * (x + GELU_C * x * x * x));
}

inline float act_f(int act, float x) {
    switch (act) {
    case 0: return x > 0.0f ? x : (x != x ? x : 0.0f);
    case 1: return 0.5f * x * (1.0f + gelu_tanh(x));
    case 2: return tanh(x);
    case 3: return sigmoid_f(x);
    default: return x * sigmoid_f(x);
    }
}

inline float act_df(int act, float x) {
    switch (act) {
    case 0: return x > 0.0f ? 1.0f : (x != x ? x : 0.0f);
    case 1: {
        float t = gelu_tanh(x);
        float s = 1.0f - t * t;
        float d = s == 0.0f ? 0.0f : 0.5f * x * s * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
        return 0.5f * (1.0f + t) + d;
    }
    case 2: {
        float t = tanh(x);
        return 1.0f - t * t;
    }
    case 3: {
        float s = sigmoid_f(x);
        return s * (1.0f - s);
    }
    default: {
        float s = sigmoid_f(x);
        return s * (1.0f + x * (1.0f - s));
    }
    }
}

__kernel void act_fwd(CTENSOR(x), TENSOR(y), ulong n, int act) {
    for (ulong i = GID; i < n; i += GSIZE)
        ST(y, i, act_f(act, LD(x, i)));
}

__kernel void act_bwd(CTENSOR(x), CTENSOR(dy), TENSOR(dx), ulong n, int act) {
    for (ulong i = GID; i < n; i += GSIZE)
        ST(dx, i, LD(dy, i) * act_df(act, LD(x, i)));
}
