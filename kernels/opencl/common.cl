/* common.cl — what every OpenCL kernel of ampx shares; the plugin puts it first in the
 * program it builds from kernels/opencl/.
 *
 * Tensors travel as three kernel arguments: the buffer (bytes), the byte offset of the first
 * element, and the dtype (AMPX_F32 0, AMPX_BF16 1, AMPX_F16 2 as in dtype.h; the fp8 ones,
 * AMPX_E4M3 4 and AMPX_E5M2 5, only where a kernel says so: see "fp8" below). Every element
 * is widened to f32 exactly when loaded and rounded once to nearest even when stored. The
 * conversions are integer ports of dtype.h, so they are bit-exact on every device and need
 * no cl_khr_fp16: f16 is a storage format here, the arithmetic is f32 as the ABI asks.
 *
 * Build-time macros set by the plugin: WG (the work-group size of the reduction kernels, a
 * power of two) and AMPX_FP64 (the device has cl_khr_fp64; a few scalars use double then).
 *
 * The kernels of kernels/opencl/typed/ are built once per dtype combination instead
 * (AMPX_TYPED, see "Typed access" below): there a tensor is only (buffer, byte offset), its
 * dtype is the macro T_<name> (f32, bf16 or f16) and VW is the vector width of LDV / STV.
 */
#pragma OPENCL FP_CONTRACT OFF /* a * b + c rounds twice, as the CPU backend and reference */

#ifdef AMPX_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double wide_t;
#else
typedef float wide_t;
#endif

#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#ifndef AMPX_TYPED /* the dtype is a kernel argument, switched on per element */
#define TENSOR(n) __global uchar *n##_p, ulong n##_o, int n##_dt
#define CTENSOR(n) __global const uchar *n##_p, ulong n##_o, int n##_dt
#define LD(n, i) ld_elem(n##_p + n##_o, n##_dt, (i))
#define ST(n, i, v) st_elem(n##_p + n##_o, n##_dt, (i), (v))
#else /* the dtype is T_<name>, fixed when the program is built */
#define TENSOR(n) __global uchar *n##_p, ulong n##_o
#define CTENSOR(n) __global const uchar *n##_p, ulong n##_o
#define LD(n, i) CAT(ld1_, T_##n)(n##_p + n##_o, (i))
#define ST(n, i, v) CAT(st1_, T_##n)(n##_p + n##_o, (i), (v))
#define LDV(n, i) CAT(ldv_, T_##n)(n##_p + n##_o, (i)) /* elements i .. i + VW - 1 */
#define STV(n, i, v) CAT(stv_, T_##n)(n##_p + n##_o, (i), (v))
#endif
#define F32P(n) ((__global float *)(n##_p + n##_o))
#define I32P(n) ((__global int *)(n##_p + n##_o))

// ---------------------------------------------------------------------------------------
// bf16 and f16 <-> f32, bit-exact ports of dtype.h

inline float bf16_to_f32(ushort h) {
    return as_float((uint)h << 16);
}

inline ushort f32_to_bf16(float f) {
    uint x = as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x0040u);
    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* The class of h is decided on h's magnitude bits as a 32-bit value (inf/NaN at 0x7c00 and
 * above, zero and subnormals below 0x0400), never on the 5-bit exponent field alone: clang
 * turns tests of `(h >> 10) & 0x1f` against 31 and 0 into a switch on the field truncated to
 * i5, and Oclgrind 21.10 does not drop the bits above an odd-width integer's width (0xfd92 >>
 * 10 is 0x3f, 31 as an i5), so it decoded -inf, negative NaNs and negative subnormals and
 * zeros as normal numbers (tests/opencl/oclgrind/trunc_switch.sim shows it). */
inline float f16_to_f32(ushort h) {
    uint sign = (uint)(h & 0x8000u) << 16;
    uint a    = h & 0x7fffu; /* exponent and mantissa */
    if (a >= 0x7c00u) return as_float(sign | 0x7f800000u | ((a & 0x3ffu) << 13));
    if (a < 0x0400u) {
        if (a == 0u) return as_float(sign);
        /* subnormal a * 2^-24: shift the leading one to bit 10 */
        uint sh = clz(a) - 21u; /* a < 2^10: clz >= 22, shift >= 1 */
        return as_float(sign | ((113u - sh) << 23) | (((a << sh) & 0x3ffu) << 13));
    }
    return as_float(sign | ((a << 13) + (112u << 23)));
}

inline ushort f32_to_f16(float f) {
    uint x      = as_uint(f);
    ushort sign = (ushort)((x >> 16) & 0x8000u);
    uint ax     = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        if (ax <= 0x33000000u) return sign;
        uint e     = ax >> 23;
        uint m     = (ax & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;
        uint r     = m >> shift;
        uint rem   = m & ((1u << shift) - 1u);
        uint half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (r & 1u))) r++;
        return (ushort)(sign | r);
    }
    uint r   = (ax >> 13) - (112u << 10);
    uint rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (ushort)(sign | r);
}

/* ampx_hash32 of dtype.h */
inline uint hash32(ulong seed, ulong index) {
    ulong z = seed * 0x9e3779b97f4a7c15ul + index;
    uint x  = (uint)(z ^ (z >> 32));
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

inline ushort f32_to_bf16_sr(float f, uint rnd) {
    uint x = as_uint(f);
    if ((x & 0x7fffffffu) >= 0x7f800000u) return f32_to_bf16(f);
    return (ushort)((x + (rnd & 0xffffu)) >> 16);
}

inline ushort f32_to_f16_sr(float f, uint rnd) {
    uint x      = as_uint(f);
    ushort sign = (ushort)((x >> 16) & 0x8000u);
    uint ax     = x & 0x7fffffffu;
    if (ax >= 0x477fe000u) return f32_to_f16(f);
    if (ax >= 0x38800000u) {
        uint trunc = (ax >> 13) - (112u << 10);
        if ((rnd >> 19) < (ax & 0x1fffu)) trunc++;
        return (ushort)(sign | trunc);
    }
    uint e     = ax >> 23;
    uint m     = e ? (ax & 0x7fffffu) | 0x800000u : ax;
    uint shift = 126u - (e ? e : 1u);
    if (shift < 32u) {
        uint trunc = m >> shift, frac = m & ((1u << shift) - 1u);
        if ((rnd >> (32u - shift)) < frac) trunc++;
        return (ushort)(sign | trunc);
    }
    int up = shift - 32u >= 24u ? (rnd == 0u && m != 0u) : ((((ulong)rnd) << (shift - 32u)) < m);
    return (ushort)(sign | (up ? 1u : 0u));
}

// ---------------------------------------------------------------------------------------
// Element access

inline float ld_elem(__global const uchar *base, int dt, ulong i) {
    if (dt == DT_F32) return ((__global const float *)base)[i];
    ushort h = ((__global const ushort *)base)[i];
    return dt == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

inline void st_elem(__global uchar *base, int dt, ulong i, float v) {
    if (dt == DT_F32)
        ((__global float *)base)[i] = v;
    else
        ((__global ushort *)base)[i] = dt == DT_BF16 ? f32_to_bf16(v) : f32_to_f16(v);
}

/* Stochastic rounding store (f32 stores exactly). */
inline void st_elem_sr(__global uchar *base, int dt, ulong i, float v, uint rnd) {
    if (dt == DT_F32)
        ((__global float *)base)[i] = v;
    else
        ((__global ushort *)base)[i] =
            dt == DT_BF16 ? f32_to_bf16_sr(v, rnd) : f32_to_f16_sr(v, rnd);
}

// ---------------------------------------------------------------------------------------
// fp8 (ABI 1.7): e4m3 and e5m2 codes <-> f32, bit-exact ports of dtype.h's
// ampx_e4m3_to_f32, ampx_e5m2_to_f32 and ampx_f32_to_e4m3 / e5m2 (integer code, so the
// device's denormal mode never enters). They are not tensors of ld_elem / st_elem: only the
// fp8 ops (fp8.cl, the fp8 GEMM kernels) read and write them, through these.

#define DT_E4M3 4
#define DT_E5M2 5

inline float e4m3_to_f32(uchar c) {
    uint sign = (uint)(c & 0x80u) << 24;
    uint e    = (c >> 3) & 0xfu;
    uint mant = c & 0x7u;
    if (e == 0xfu && mant == 0x7u) return as_float(sign | 0x7fc00000u);
    if (e == 0u) return as_float(sign | as_uint((float)mant * (1.0f / 512.0f))); /* exact */
    return as_float(sign | ((e + 120u) << 23) | (mant << 20));
}

inline float e5m2_to_f32(uchar c) {
    return f16_to_f32((ushort)((ushort)c << 8));
}

inline float fp8_to_f32(uchar c, int dt) {
    return dt == DT_E4M3 ? e4m3_to_f32(c) : e5m2_to_f32(c);
}

/* Eight codes at once, lane for lane the scalar functions' bits (the GEMM's row loads). */
inline float8 e4m3v8_to_f32(uchar8 c8) {
    uint8 c    = convert_uint8(c8);
    uint8 sign = (c & 0x80u) << 24;
    uint8 e    = (c >> 3) & 0xfu;
    uint8 mant = c & 0x7u;
    uint8 r    = sign | ((e + 120u) << 23) | (mant << 20);
    r          = select(r, sign | as_uint8(convert_float8(mant) * (1.0f / 512.0f)), e == 0u);
    r          = select(r, sign | 0x7fc00000u, (e == 0xfu) & (mant == 0x7u));
    return as_float8(r);
}

inline float8 e5m2v8_to_f32(uchar8 c8) {
    uint8 c    = convert_uint8(c8);
    uint8 sign = (c & 0x80u) << 24;
    uint8 e    = (c >> 2) & 0x1fu;
    uint8 mant = c & 0x3u;
    uint8 r    = sign | ((e + 112u) << 23) | (mant << 21);
    r          = select(r, sign | as_uint8(convert_float8(mant) * (1.0f / 65536.0f)), e == 0u);
    r          = select(r, sign | 0x7f800000u | (mant << 21), e == 0x1fu);
    return as_float8(r);
}

/* dtype.h's ampx_fp8_round_: the non-negative finite f32 with bits ax on the grid of a
 * format of mbits mantissa bits and exponent bias `bias`, nearest even; the code without
 * its sign, possibly past the largest finite. */
inline uint fp8_round(uint ax, uint mbits, int bias) {
    if (ax < 0x00800000u) return 0u; /* f32 zeros and subnormals lie far below half an fp8 ulp */
    int e    = (int)(ax >> 23) - 127;
    int emin = 1 - bias;
    uint m   = (ax & 0x7fffffu) | 0x800000u;
    uint shift, base;
    if (e >= emin) {
        shift = 23u - mbits;
        base  = ((uint)(e + bias) << mbits) | ((m & 0x7fffffu) >> shift);
    } else {
        shift = (uint)(emin - e) + 23u - mbits;
        if (shift > 24u) return 0u;
        base = m >> shift;
    }
    uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (base & 1u))) base++;
    return base;
}

/* The code of f in fp8 dtype dt (ampx_f32_to_fp8); *overflow = 1 when f is not a NaN and
 * its rounding lies past the largest finite (an infinity included), else 0. */
inline uchar f32_to_fp8(float f, int dt, int saturate, int *overflow) {
    uint x     = as_uint(f);
    uchar sign = (uchar)((x >> 24) & 0x80u);
    uint ax    = x & 0x7fffffffu;
    *overflow  = 0;
    if (dt == DT_E4M3) {
        if (ax > 0x7f800000u) return (uchar)(sign | 0x7fu);
        uint r = ax == 0x7f800000u ? 0x7fu : fp8_round(ax, 3u, 7);
        if (r <= 0x7eu) return (uchar)(sign | r);
        *overflow = 1;
        return (uchar)(sign | (saturate ? 0x7eu : 0x7fu));
    }
    if (ax > 0x7f800000u) return (uchar)(sign | 0x7eu | ((ax >> 21) & 1u));
    uint r = ax == 0x7f800000u ? 0x7cu : fp8_round(ax, 2u, 15);
    if (r <= 0x7bu) return (uchar)(sign | r);
    *overflow = 1;
    return (uchar)(sign | (saturate ? 0x7bu : 0x7cu));
}

/* ld_elem for any dtype a GEMM operand may have: f32, bf16, f16, e4m3 or e5m2. */
inline float ld_operand(__global const uchar *base, int dt, ulong i) {
    if (dt == DT_E4M3) return e4m3_to_f32(base[i]);
    if (dt == DT_E5M2) return e5m2_to_f32(base[i]);
    return ld_elem(base, dt, i);
}
#ifndef AMPX_TYPED
#define LDO(n, i) ld_operand(n##_p + n##_o, n##_dt, (i))
#endif

#ifdef AMPX_TYPED
// ---------------------------------------------------------------------------------------
// Typed access: one load and one store per dtype, scalar (ld1_, st1_) and VW elements at a
// time (ldv_, stv_; vloadn / vstoren need only the element's alignment). The vector
// conversions are the scalar ones above with each branch computed on every lane and
// picked by select(), so every lane gets the scalar function's bits; they are integer
// code, so no device denormal mode or cl_khr_fp16 enters.

typedef CAT(float, VW) floatv;
typedef CAT(uint, VW) uintv;
typedef CAT(ushort, VW) ushortv;
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#define AS_FLOATV CAT(as_float, VW)
#define AS_UINTV CAT(as_uint, VW)
#define TO_UINTV CAT(convert_uint, VW)
#define TO_USHORTV CAT(convert_ushort, VW)
#define UV(c) ((uintv)(c))

inline floatv bf16v_to_f32(ushortv h) {
    return AS_FLOATV(TO_UINTV(h) << 16);
}

inline ushortv f32v_to_bf16(floatv f) {
    uintv x = AS_UINTV(f);
    uintv r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    r       = select(r, (x >> 16) | 0x0040u, (x & 0x7fffffffu) > 0x7f800000u); /* NaN: quiet */
    return TO_USHORTV(r);
}

inline floatv f16v_to_f32(ushortv h16) {
    uintv h    = TO_UINTV(h16);
    uintv sign = (h & 0x8000u) << 16;
    uintv e    = (h >> 10) & 0x1fu;
    uintv mant = h & 0x3ffu;
    uintv r    = sign | ((e + 112u) << 23) | (mant << 13);
    uintv sh   = clz(mant) - 21u; /* subnormal: shift the leading one to bit 10 */
    uintv sub  = sign | ((113u - sh) << 23) | (((mant << sh) & 0x3ffu) << 13);
    r          = select(r, sub, e == 0u);
    r          = select(r, sign, (e == 0u) & (mant == 0u));
    r          = select(r, sign | 0x7f800000u | (mant << 13), e == 0x1fu);
    return AS_FLOATV(r);
}

inline ushortv f32v_to_f16(floatv f) {
    uintv x    = AS_UINTV(f);
    uintv sign = (x >> 16) & 0x8000u;
    uintv ax   = x & 0x7fffffffu;
    /* normal results */
    uintv rn  = (ax >> 13) - (112u << 10);
    uintv rem = ax & 0x1fffu;
    rn += select(UV(0u), UV(1u), (rem > 0x1000u) | ((rem == 0x1000u) & ((rn & 1u) != 0u)));
    /* subnormal results (shift 14 .. 24 where they are picked; OpenCL shifts mod 32) */
    uintv e     = ax >> 23;
    uintv m     = (ax & 0x7fffffu) | 0x800000u;
    uintv shift = 126u - e;
    uintv rs    = m >> shift;
    uintv rems  = m & ((UV(1u) << shift) - 1u);
    uintv half_ = UV(1u) << (shift - 1u);
    rs += select(UV(0u), UV(1u), (rems > half_) | ((rems == half_) & ((rs & 1u) != 0u)));
    uintv r = select(rn, rs, ax < 0x38800000u);
    r       = select(r, UV(0u), ax <= 0x33000000u);
    r       = select(r, UV(0x7c00u), ax >= 0x477ff000u);
    r       = select(r, 0x7e00u | ((ax >> 13) & 0x3ffu), ax > 0x7f800000u);
    return TO_USHORTV(sign | r);
}

#define DT_ID_f32 DT_F32 /* CAT(DT_ID_, T_x): the dtype number of tensor x */
#define DT_ID_bf16 DT_BF16
#define DT_ID_f16 DT_F16

#define F32_AT(p) ((__global const float *)(p))
#define U16_AT(p) ((__global const ushort *)(p))
inline float ld1_f32(__global const uchar *p, ulong i) {
    return F32_AT(p)[i];
}
inline float ld1_bf16(__global const uchar *p, ulong i) {
    return bf16_to_f32(U16_AT(p)[i]);
}
inline float ld1_f16(__global const uchar *p, ulong i) {
    return f16_to_f32(U16_AT(p)[i]);
}
inline void st1_f32(__global uchar *p, ulong i, float v) {
    ((__global float *)p)[i] = v;
}
inline void st1_bf16(__global uchar *p, ulong i, float v) {
    ((__global ushort *)p)[i] = f32_to_bf16(v);
}
inline void st1_f16(__global uchar *p, ulong i, float v) {
    ((__global ushort *)p)[i] = f32_to_f16(v);
}
inline floatv ldv_f32(__global const uchar *p, ulong i) {
    return VLOAD(0, F32_AT(p) + i);
}
inline floatv ldv_bf16(__global const uchar *p, ulong i) {
    return bf16v_to_f32(VLOAD(0, U16_AT(p) + i));
}
inline floatv ldv_f16(__global const uchar *p, ulong i) {
    return f16v_to_f32(VLOAD(0, U16_AT(p) + i));
}
inline void stv_f32(__global uchar *p, ulong i, floatv v) {
    VSTORE(v, 0, (__global float *)p + i);
}
/* vstoren of a ushortv becomes VW two-byte stores on PoCL; an aligned vector is stored
 * whole (the same bytes). */
inline void stv_u16(__global ushort *q, ushortv h) {
    if (((ulong)q & (sizeof(ushortv) - 1)) == 0)
        *(__global ushortv *)q = h;
    else
        VSTORE(h, 0, q);
}
inline void stv_bf16(__global uchar *p, ulong i, floatv v) {
    stv_u16((__global ushort *)p + i, f32v_to_bf16(v));
}
inline void stv_f16(__global uchar *p, ulong i, floatv v) {
    stv_u16((__global ushort *)p + i, f32v_to_f16(v));
}

/* STORED(x, v): the values v as tensor x stores them (what LDV after STV gives, without the
 * load: the same rounding, widened back). */
inline floatv stored_f32(floatv v) {
    return v;
}
inline floatv stored_bf16(floatv v) {
    return bf16v_to_f32(f32v_to_bf16(v));
}
inline floatv stored_f16(floatv v) {
    return f16v_to_f32(f32v_to_f16(v));
}
#define STORED(n, v) CAT(stored_, T_##n)(v)

/* v = F(lane) for every lane of v, for math with no vector form here (the activations).
 * MAP_LANES spells the lanes out, which the compiler's SLP vectorizer turns into vector
 * code for short branch-free F (relu); MAP_LANES_LOOP runs F in a loop of VW over a private
 * array, which the loop vectorizer vectorizes after inlining F's library calls (tanh, exp),
 * lane by lane the same operations, so the same bits. */
#define LANES4(F, v) ((float4)(F((v).s0), F((v).s1), F((v).s2), F((v).s3)))
#define LANES8(F, v) ((float8)(LANES4(F, (v).lo), LANES4(F, (v).hi)))
#define LANES16(F, v) ((float16)(LANES8(F, (v).lo), LANES8(F, (v).hi)))
#define MAP_LANES(F, v) ((v) = CAT(LANES, VW)(F, v))
#define MAP_LANES_LOOP(F, v)                                                                       \
    do {                                                                                           \
        float lanes_[VW];                                                                          \
        VSTORE((v), 0, lanes_);                                                                    \
        for (int l_ = 0; l_ < VW; l_++)                                                            \
            lanes_[l_] = F(lanes_[l_]);                                                            \
        (v) = VLOAD(0, lanes_);                                                                    \
    } while (0)

/* The row kernels on CPU devices (ROW_ITEMS, one work item per row): lane l of a vector sum
 * holds the row's elements l, l + VW, l + 2 VW, ... added in order; the lanes are then added
 * in a fixed tree, halves first, so a row's result never depends on the launch. */
typedef CAT(int, VW) intv;
inline float hsum4(float4 v) {
    return (v.s0 + v.s2) + (v.s1 + v.s3);
}
inline float hmax4(float4 v) {
    return fmax(fmax(v.s0, v.s2), fmax(v.s1, v.s3));
}
#if VW == 4
#define HSUM(v) hsum4(v)
#define HMAX(v) hmax4(v)
#elif VW == 8
#define HSUM(v) hsum4((v).lo + (v).hi)
#define HMAX(v) hmax4(fmax((v).lo, (v).hi))
#else
#define HSUM(v) hsum4(((v).lo.lo + (v).hi.lo) + ((v).lo.hi + (v).hi.hi))
#define HMAX(v) hmax4(fmax(fmax((v).lo.lo, (v).hi.lo), fmax((v).lo.hi, (v).hi.hi)))
#endif

/* out = the sum of the vectors F(j), j = 0, VW, 2 VW, ... < nvv (a multiple of VW), in four
 * accumulators (vector k of each block of four goes to accumulator k, the vectors past the
 * last whole block to accumulator 0), added (a0 + a1) + (a2 + a3), then lanes by HSUM:
 * four chains of additions instead of one, in an order fixed by nvv alone. */
#define ROW_VSUM(F, nvv, out)                                                                      \
    do {                                                                                           \
        floatv a0_ = 0.0f, a1_ = 0.0f, a2_ = 0.0f, a3_ = 0.0f;                                     \
        ulong j_ = 0;                                                                              \
        for (; j_ + 4 * VW <= (nvv); j_ += 4 * VW) {                                               \
            a0_ += F(j_);                                                                          \
            a1_ += F(j_ + VW);                                                                     \
            a2_ += F(j_ + 2 * VW);                                                                 \
            a3_ += F(j_ + 3 * VW);                                                                 \
        }                                                                                          \
        for (; j_ < (nvv); j_ += VW)                                                               \
            a0_ += F(j_);                                                                          \
        (out) = HSUM((a0_ + a1_) + (a2_ + a3_));                                                   \
    } while (0)

/* out = the largest lane of the vectors F(j), as ROW_VSUM; fmax drops NaNs (the row kernels
 * that use it see them in their sums). */
#define ROW_VMAX(F, nvv, out)                                                                      \
    do {                                                                                           \
        floatv a0_ = -INFINITY, a1_ = -INFINITY, a2_ = -INFINITY, a3_ = -INFINITY;                 \
        ulong j_ = 0;                                                                              \
        for (; j_ + 4 * VW <= (nvv); j_ += 4 * VW) {                                               \
            a0_ = fmax(a0_, F(j_));                                                                \
            a1_ = fmax(a1_, F(j_ + VW));                                                           \
            a2_ = fmax(a2_, F(j_ + 2 * VW));                                                       \
            a3_ = fmax(a3_, F(j_ + 3 * VW));                                                       \
        }                                                                                          \
        for (; j_ < (nvv); j_ += VW)                                                               \
            a0_ = fmax(a0_, F(j_));                                                                \
        (out) = HMAX(fmax(fmax(a0_, a1_), fmax(a2_, a3_)));                                        \
    } while (0)
#endif

/* Gelu as 0.5 x (1 + tanh u) = x s, s = 1 / (1 + exp(-2u)), u = k (x + c x^3): the same
 * function, whole vectors at a time (PoCL's vector exp; its lane-by-lane tanh ran at a
 * fiftieth of a copy), and more accurate where 1 + tanh u cancels (x < 0). The derivative
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2) is s + 2 x s q k (1 + 3 c x^2),
 * q = 1 - s = exp(-2u) s (whichever does not cancel), its second term 0 where s q is, as
 * kernel_math.h's is where 1 - tanh^2 u is. Both give what kernel_math.h's |x| > 20 cut
 * gives (f: -0 below, x above; f': 0 and 1), and NaN where it gives NaN (x = -inf for f).
 * ACT_GELU_FNS(T, SUF) defines act_gelu<SUF> and act_gelu_df<SUF> for the float type T (the
 * constants are kernel_math.h's, which the prelude puts after this file: a macro expands
 * where it is used). ACT_FWD and ACT_BWD (typed/act.cl), the tiled GEMM's epilogue
 * (typed/gemm_tuned.cl) and gemm_epilogue (gemm.cl) use it. */
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

/* Bit tests that do not depend on the device's denormal mode. */
inline int is_finite_bits(float v) {
    return (as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

// ---------------------------------------------------------------------------------------
// Work-group reductions (every work item of a WG-sized group calls them; the result is
// returned to all). Tree order is fixed, so results do not depend on scheduling.

inline float wg_sum(float v, __local float *red) {
    uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* max that propagates NaN (a NaN anywhere gives NaN) */
inline float nan_max(float a, float b) {
    return (a != a || b != b) ? NAN : fmax(a, b);
}

inline float wg_max(float v, __local float *red) {
    uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = nan_max(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* The largest of the group's v (every item calls it; the result is returned to all). */
inline int wg_max_i(int v, __local int *red) {
    uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = max(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline uint wg_sum_u(uint v, __local uint *red) {
    uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    uint r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

#define GID get_global_id(0)
#define GSIZE get_global_size(0)

/* x / d, with *r = x % d spelled out as x - (x / d) d. Where `%` and `/` of the same operands
 * meet, clang computes the remainder that way itself and puts an LLVM `freeze` of x before
 * it, an instruction Oclgrind 21.10's uninitialized-value check cannot run ("Unsupported
 * instruction: freeze"; it can since a later version): the kernels that split an index into
 * coordinates use this instead, which gives clang no pair to rewrite. */
inline ulong udivmod(ulong x, ulong d, ulong *r) {
    ulong q = x / d;
    *r      = x - q * d;
    return q;
}

/* The vectors [0, nv) of an elementwise kernel, VEC_RUN consecutive ones per work item per
 * pass (the plugin launches ocl_vec_items(n) items, which is about nv / VEC_RUN): on CPU
 * devices VEC_RUN > 1, since PoCL runs a work item's whole loop before the next item's, so
 * one vector per item strided by the grid walks memory a vector per item; elsewhere 1, the
 * grid-stride loop, consecutive items on consecutive vectors. Any grid covers every vector. */
#ifndef VEC_RUN
#define VEC_RUN 1
#endif
#define FOR_VECS(j, nv)                                                                            \
    for (ulong j##_b = GID * VEC_RUN; j##_b < (nv); j##_b += GSIZE * VEC_RUN)                      \
        for (ulong j = j##_b, j##_e = min((ulong)(nv), j##_b + VEC_RUN); j < j##_e; j++)
#define REDUCE_WG __attribute__((reqd_work_group_size(WG, 1, 1)))

/* An f32 or i32 tensor of fixed dtype (statistics, labels, the scalars block): buffer and
 * byte offset; a NULL buffer (an absent optional tensor) gives a NULL pointer. */
#define FARG(n) __global uchar *n##_p, ulong n##_o
#define FPTR(n) __global float *n = n##_p ? (__global float *)(n##_p + n##_o) : (__global float *)0
#define IPTR(n) __global int *n = n##_p ? (__global int *)(n##_p + n##_o) : (__global int *)0

// ---------------------------------------------------------------------------------------
// GRAD_STATS' sums (typed/amp_reduce.cl, amp_finish.cl): a work item adds the values it
// visits, a work-group reduces in the fixed tree order above, and the chunks' records are
// combined in chunk order. max |g| and the counts are exact; mean and RMS of the finite values
// come from f32 sums. Zero, tiny and non-finite are decided on the bits, so a device that
// flushes denormals still counts an f32 subnormal as below the smallest normal, not as zero.

typedef struct gstats {
    float mx, sum, sumsq;
    uint finite, zeros, tiny, nonfinite, nan;
} gstats;

inline gstats gstats_zero(void) {
    gstats st = {0.0f, 0.0f, 0.0f, 0u, 0u, 0u, 0u, 0u};
    return st;
}

inline void gstats_add(gstats *st, float v, uint tiny_bits) {
    uint ab = as_uint(v) & 0x7fffffffu;
    if (ab >= 0x7f800000u) {
        st->nonfinite++;
        st->nan += ab > 0x7f800000u;
        return;
    }
    st->finite++;
    if (ab == 0u)
        st->zeros++;
    else if (ab < tiny_bits)
        st->tiny++;
    if (ab > as_uint(st->mx)) st->mx = as_float(ab);
    st->sum += v;
    st->sumsq += v * v;
}

/* Every work item calls it; the group's totals are returned to all. */
inline void gstats_reduce(gstats *st, __local float *red, __local uint *redu) {
    uint lid = get_local_id(0);
    /* max of non-negative finite floats: compare as integers */
    redu[lid] = as_uint(st->mx);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) redu[lid] = max(redu[lid], redu[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    st->mx = as_float(redu[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    st->sum       = wg_sum(st->sum, red);
    st->sumsq     = wg_sum(st->sumsq, red);
    st->finite    = wg_sum_u(st->finite, redu);
    st->zeros     = wg_sum_u(st->zeros, redu);
    st->tiny      = wg_sum_u(st->tiny, redu);
    st->nonfinite = wg_sum_u(st->nonfinite, redu);
    st->nan       = wg_sum_u(st->nan, redu);
}

/* The partial sums of one chunk of a tensor (typed/amp_reduce.cl), PART_WORDS words: max |g|
 * bits, sum, sum of squares (finite values), sum of squares of the values as stored, finite,
 * zeros, tiny, non-finite and NaN counts, and whether a stored value was non-finite. */
#define PART_WORDS 10

/* want: 1 stats {max, mean, rms, n}, 2 counts {zeros, tiny, non-finite}, 4 the NaNs. */
inline void gstats_store(const gstats *st, ulong n, uint want, __global float *stats,
                         __global int *counts, __global int *nans) {
    if (want & 1) {
        stats[0] = st->mx;
        stats[1] = st->finite ? st->sum / (float)st->finite : 0.0f;
        stats[2] = st->finite ? sqrt(st->sumsq / (float)st->finite) : 0.0f;
        stats[3] = (float)n;
    }
    if (want & 2) {
        counts[0] = (int)st->zeros;
        counts[1] = (int)st->tiny;
        counts[2] = (int)st->nonfinite;
    }
    if (want & 4) nans[0] = (int)st->nan;
}
