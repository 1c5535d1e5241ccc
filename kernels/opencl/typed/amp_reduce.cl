/* amp_reduce.cl — the per-chunk partial sums of GRAD_STATS, SUM_SQUARES and AMP_PASS, built
 * per T_g; amp_finish.cl combines them. A tensor of n elements is cut into chunks of `chunk`
 * elements (a fixed constant of the plugin, a multiple of every VW; the last chunk shorter, an
 * empty tensor one empty chunk), so the partition depends on n alone. Each chunk writes one
 * record of PART_WORDS words to `part` (record c of the tensor at part + PART_WORDS c), and
 * chunk 0 writes n to `hdr` (two words), which the finishing kernel reads to know the
 * tensor's chunks.
 *
 * The three kernels run the same code (part_chunk) with the work it does fixed per kernel:
 * statistics of the values as read, unscale and check, the sum of squares of the values as
 * stored, each summed in the same order in every kernel, so AMP_PASS gives the bits of
 * grad_stats, unscale_check and sum_squares run one after the other.
 *
 * CPU devices (ROW_ITEMS): one work item per chunk (PoCL vectorizes a work item's own vector
 * code, not a loop across items), VW elements per step with vector loads, two sets of vector
 * accumulators (part_chunk), no barriers. Elsewhere: one work-group per chunk, work item i
 * visiting the chunk's elements i, i + WG, ..., the group reducing in common.cl's fixed tree
 * order. Either way the partition, and the order within a chunk, are fixed by n and the
 * device's VW or WG alone. */

inline void part_store(__global uint *rec, const gstats *st, float sq, uint bad) {
    rec[0] = as_uint(st->mx);
    rec[1] = as_uint(st->sum);
    rec[2] = as_uint(st->sumsq);
    rec[3] = as_uint(sq);
    rec[4] = st->finite;
    rec[5] = st->zeros;
    rec[6] = st->tiny;
    rec[7] = st->nonfinite;
    rec[8] = st->nan;
    rec[9] = bad;
}

/* One element, as the tails and the work-group chunks take them: its statistics as read,
 * then (unscale) the unscale in place when multiply and the check of the value as stored, and
 * (sq) the square of that value summed. */
inline void part_elem(TENSOR(g), ulong i, uint tiny_bits, float inv_scale, int multiply,
                      const int stats, const int unscale, const int sq, gstats *st, float *sqs,
                      uint *bad) {
    float v = LD(g, i);
    if (stats) gstats_add(st, v, tiny_bits);
    if (unscale) {
        if (multiply) {
            ST(g, i, v * inv_scale);
            v = LD(g, i);
        }
        *bad |= !is_finite_bits(v);
    }
    if (sq) *sqs += v * v;
}

#ifdef ROW_ITEMS
#define INLINE inline __attribute__((always_inline))
#ifndef AS_INTV
#define AS_INTV CAT(as_int, VW)
#endif

/* One set of vector accumulators: lane l of set k holds the elements l of the chunk's
 * vectors k, k + 2, k + 4, ... Counts are exact; lt counts 0 <= |g| < tiny (zeros included). */
typedef struct pacc {
    floatv sum, sumsq, sq;
    intv mx, zeros, lt, finite, nan, bad;
} pacc;

INLINE void pacc_zero(pacc *a) {
    a->sum = a->sumsq = a->sq = 0.0f;
    a->mx = a->zeros = a->lt = a->finite = a->nan = a->bad = 0;
}

/* 1 in the lanes where the comparison m holds, else 0. Not `-m` (OpenCL's -1 per true lane,
 * negated): clang turns that into a zext of the <VW x i1> comparison, and Oclgrind 21.10 gives
 * 255 for each true lane of one (it keeps vector booleans as all-ones bytes), which made every
 * count 255 times too large there (tests/opencl/oclgrind/vector_bool_zext.sim). The select
 * builtin is a call Oclgrind evaluates itself, and compiles to the same code elsewhere. */
#define ONES(m) select((intv)0, (intv)1, (m))

/* Statistics of the vector v, every lane finite (the chunk's max |g| says whether they were). */
INLINE void stats_step(pacc *a, floatv v, int tiny) {
    intv ab = AS_INTV(v) & 0x7fffffff;
    a->mx   = max(a->mx, ab);
    a->sum += v;
    a->sumsq += v * v;
    a->zeros += ONES(ab == 0);
    a->lt += ONES(ab < tiny);
}

/* The same where a lane may be non-finite: such a lane adds +0 to the sums (which start at +0
 * and so never become -0: the same sums as skipping it) and 0 to the max, so where every lane
 * is finite both give the same bits. */
INLINE void stats_step_masked(pacc *a, floatv v, int tiny) {
    intv ab  = AS_INTV(v) & 0x7fffffff;
    intv fin = ab < 0x7f800000; /* -1 where finite */
    floatv f = AS_FLOATV(AS_INTV(v) & fin);
    a->mx    = max(a->mx, ab & fin);
    a->sum += f;
    a->sumsq += f * f;
    a->finite += ONES(fin);
    a->nan += ONES(ab > 0x7f800000);
    a->zeros += ONES(ab == 0);
    a->lt += ONES(ab < tiny);
}

/* The unscale of the vector of g at i (stored in place) and check, then the square of the
 * value as stored. */
INLINE void unscale_step(pacc *a, TENSOR(g), ulong i, float inv_scale, const int multiply,
                         const int unscale) {
    floatv v = LDV(g, i);
    if (unscale) {
        if (multiply) {
            floatv x = v * inv_scale;
            STV(g, i, x);
            v = STORED(g, x);
        }
        a->bad |= (AS_INTV(v) & 0x7f800000) == 0x7f800000;
    }
    a->sq += v * v;
}

inline uint hmax_i(intv v) {
    int m = 0;
    for (int l = 0; l < VW; l++)
        m = max(m, ((int *)&v)[l]);
    return (uint)m;
}

inline uint hsum_i(intv v) {
    int s = 0;
    for (int l = 0; l < VW; l++)
        s += ((int *)&v)[l];
    return (uint)s;
}

/* Vectors [i, iv) of g, two per step into the sets a0 and a1 (two chains of additions), the
 * last odd one into a0. */
#define PAIRS(STEP)                                                                                \
    do {                                                                                           \
        ulong i_ = i0;                                                                             \
        for (; i_ + 2 * VW <= iv; i_ += 2 * VW) {                                                  \
            STEP(&a0, i_);                                                                         \
            STEP(&a1, i_ + VW);                                                                    \
        }                                                                                          \
        if (i_ < iv) STEP(&a0, i_);                                                                \
    } while (0)

/* One chunk, elements [i0, i1) of g; multiply, stats, unscale and sq are constants of the
 * caller. The statistics of the values as read come first, in a pass of their own over the
 * chunk's vectors that assumes every value finite; a chunk whose max |g| says otherwise is
 * summed again with the non-finite lanes masked out (before anything is stored). Then the
 * unscale, check and square sum in a second pass, which finds the chunk in the cache. Sets a0
 * + a1, then the lanes by HSUM, then the scalar tail (the tensor's last n % VW elements). */
INLINE void part_chunk(TENSOR(g), ulong i0, ulong i1, uint tiny_bits, float inv_scale,
                       const int multiply, const int stats, const int unscale, const int sq,
                       __global uint *rec) {
    ulong iv = i0 + (i1 - i0) / VW * VW;
    int tiny = (int)tiny_bits;
    pacc a0, a1;
    pacc_zero(&a0);
    pacc_zero(&a1);
    gstats st = gstats_zero();
    if (stats) {
#define STATS_STEP(a, j) stats_step(a, LDV(g, j), tiny)
        PAIRS(STATS_STEP);
        uint mx = hmax_i(max(a0.mx, a1.mx));
        if (mx >= 0x7f800000u) {
            pacc_zero(&a0);
            pacc_zero(&a1);
#define STATS_MASKED(a, j) stats_step_masked(a, LDV(g, j), tiny)
            PAIRS(STATS_MASKED);
            mx        = hmax_i(max(a0.mx, a1.mx));
            st.finite = hsum_i(a0.finite + a1.finite);
            st.nan    = hsum_i(a0.nan + a1.nan);
        } else {
            st.finite = (uint)(iv - i0);
        }
        st.mx        = as_float(mx);
        st.sum       = HSUM(a0.sum + a1.sum);
        st.sumsq     = HSUM(a0.sumsq + a1.sumsq);
        st.zeros     = hsum_i(a0.zeros + a1.zeros);
        st.tiny      = hsum_i(a0.lt + a1.lt) - st.zeros;
        st.nonfinite = (uint)(iv - i0) - st.finite;
    }
    float sqs = 0.0f;
    uint bad  = 0;
    if (unscale || sq) {
        pacc_zero(&a0);
        pacc_zero(&a1);
#define UNSCALE_STEP(a, j) unscale_step(a, g_p, g_o, j, inv_scale, multiply, unscale)
        PAIRS(UNSCALE_STEP);
        sqs = HSUM(a0.sq + a1.sq);
        bad = any(a0.bad | a1.bad);
    }
    for (ulong i = iv; i < i1; i++) {
        part_elem(g_p, g_o, i, tiny_bits, inv_scale, multiply, stats, unscale, sq, &st, &sqs, &bad);
    }
    part_store(rec, &st, sqs, bad);
}

#define PART_LOOP(CALL)                                                                            \
    for (ulong c = GID; c < nc; c += GSIZE) {                                                      \
        ulong i0 = c * chunk, i1 = min(n, i0 + chunk);                                             \
        CALL;                                                                                      \
        if (c == 0) {                                                                              \
            hdr[0] = (uint)n;                                                                      \
            hdr[1] = (uint)(n >> 32);                                                              \
        }                                                                                          \
    }
#else
/* One chunk by the work-group. */
inline void part_chunk(TENSOR(g), ulong i0, ulong i1, uint tiny_bits, float inv_scale, int multiply,
                       const int stats, const int unscale, const int sq, __global uint *rec,
                       __local float *red, __local uint *redu) {
    gstats st = gstats_zero();
    float sqs = 0.0f;
    uint bad  = 0;
    for (ulong i = i0 + get_local_id(0); i < i1; i += WG) {
        part_elem(g_p, g_o, i, tiny_bits, inv_scale, multiply, stats, unscale, sq, &st, &sqs, &bad);
    }
    if (unscale) bad = wg_sum_u(bad, redu);
    if (sq) sqs = wg_sum(sqs, red);
    if (stats) gstats_reduce(&st, red, redu);
    if (get_local_id(0) == 0) part_store(rec, &st, sqs, bad);
}

#define PART_LOOP(CALL)                                                                            \
    for (ulong c = get_group_id(0); c < nc; c += get_num_groups(0)) {                              \
        ulong i0 = c * chunk, i1 = min(n, i0 + chunk);                                             \
        CALL;                                                                                      \
        if (c == 0 && get_local_id(0) == 0) {                                                      \
            hdr[0] = (uint)n;                                                                      \
            hdr[1] = (uint)(n >> 32);                                                              \
        }                                                                                          \
    }
#endif

/* The kernels' common start: the header pointer and, for work-groups, the local memory of the
 * reductions (at kernel scope, as OpenCL 1.2 asks). */
#ifdef ROW_ITEMS
#define PART_ATTR
#define PART_LOCAL
#define PART_HDR __global uint *hdr = (__global uint *)(hdr_p + hdr_o)
#else
#define PART_ATTR REDUCE_WG
#define PART_LOCAL , red, redu
#define PART_HDR                                                                                   \
    __global uint *hdr = (__global uint *)(hdr_p + hdr_o);                                         \
    __local float red[WG];                                                                         \
    __local uint redu[WG]
#endif
#define PART_REC ((__global uint *)(part_p + part_o) + PART_WORDS * c)

#ifdef K_grad_stats_part
__kernel PART_ATTR void grad_stats_part(TENSOR(g), ulong n, ulong chunk, uint tiny_bits, FARG(part),
                                        FARG(hdr)) {
    PART_HDR;
    ulong nc = max((n + chunk - 1) / chunk, (ulong)1);
    PART_LOOP(part_chunk(g_p, g_o, i0, i1, tiny_bits, 1.0f, 0, 1, 0, 0, PART_REC PART_LOCAL))
}
#endif

#ifdef K_sum_squares_part
__kernel PART_ATTR void sum_squares_part(TENSOR(g), ulong n, ulong chunk, FARG(part), FARG(hdr)) {
    PART_HDR;
    ulong nc = max((n + chunk - 1) / chunk, (ulong)1);
    PART_LOOP(part_chunk(g_p, g_o, i0, i1, 0u, 1.0f, 0, 0, 0, 1, PART_REC PART_LOCAL))
}
#endif

#ifdef K_amp_pass_part
/* stats: whether the statistics are wanted. The loop is built for each case of stats and of
 * multiply (the scaler's mode), the branches taken once per launch. */
__kernel PART_ATTR void amp_pass_part(TENSOR(g), ulong n, ulong chunk, uint tiny_bits,
                                      FARG(scalars), int stats, FARG(part), FARG(hdr)) {
    PART_HDR;
    __global ampx_scalars *s = (__global ampx_scalars *)(scalars_p + scalars_o);
    int multiply             = s->mode != AMPX_KM_SCALER_NONE;
    float inv_scale          = ampx_km_inv_scale(s->scale);
    ulong nc                 = max((n + chunk - 1) / chunk, (ulong)1);
#define AMP_PART(M, S)                                                                             \
    PART_LOOP(part_chunk(g_p, g_o, i0, i1, tiny_bits, inv_scale, M, S, 1, 1, PART_REC PART_LOCAL))
    if (stats && multiply) {
        AMP_PART(1, 1)
    } else if (stats) {
        AMP_PART(0, 1)
    } else if (multiply) {
        AMP_PART(1, 0)
    } else {
        AMP_PART(0, 0)
    }
}
#endif
