/* gemm_tuned.cl — GEMM and GEMM_FP8 tiled in local memory with register blocking, every size
 * a build-time parameter: plugins/opencl/gemm_tune.c picks them per device (defaults from
 * device queries, or a tuning run stored in the cache folder) and builds one program per
 * (T_a, T_b, parameters). The names are CLBlast's xgemm ones:
 *   MWG, NWG     rows and columns of C per work-group
 *   KWG          depth of the k slice staged in local memory
 *   MDIMC, NDIMC the work-group shape: items along m (dimension 1), along n (dimension 0)
 *   VWN          width of the float vectors along n held by each item (1, 2, 4, 8 or 16)
 * Item (tx, ty) keeps MWI x NVI accumulators of VWN floats: rows ty + MDIMC w (w < MWI =
 * MWG / MDIMC), column groups (tx + NDIMC v) VWN .. + VWN - 1 (v < NVI = NWG / (NDIMC VWN)).
 * Each KWG-deep slice of k stages op(A) and op(B) in local memory as f32, each element widened
 * once on load (bf16 and f16 exactly by common.cl's integer code, e4m3 and e5m2 likewise);
 * elements outside the matrices load as 0, padding between rows is never read. Products and
 * sums are f32: each slice's KWG products in k order into `part`, which is then added to the
 * running sum `acc` (so what lives across the barriers is touched once per slice; on PoCL
 * this measured the same as summing into acc directly); alpha (times GEMM_FP8's dequantization
 * factors, read on the device, alpha * (dq_a[0] * dq_b[0]) as backend.h orders it) and beta apply
 * once at the end, then GEMM's epilogue (bias, pre_act, activation: store_block) in f32, and
 * the result is rounded once into out (C). C, out, the bias and pre_act keep their dtype as an
 * argument: they are touched once per element, a row of VWN at a time. The loops over an
 * item's block are unrolled (PoCL left them rolled, with the sums in memory: 1.3x).
 * The packed form for CPU devices (gemm_pack, gemm_packed) is at the end of the file; it shares
 * the fp8 loads and store_block. */
#if defined(K_gemm_tuned) || defined(K_gemm_pack) || defined(K_gemm_packed)

inline float ld1_e4m3(__global const uchar *p, ulong i) {
    return e4m3_to_f32(p[i]);
}
inline float ld1_e5m2(__global const uchar *p, ulong i) {
    return e5m2_to_f32(p[i]);
}

/* fp8 operands VW at a time: lane by lane, the scalar conversion's bits. */
inline floatv ldv_e4m3(__global const uchar *p, ulong i) {
    float t[VW];
    for (int l = 0; l < VW; l++)
        t[l] = e4m3_to_f32(p[i + l]);
    return VLOAD(0, t);
}
inline floatv ldv_e5m2(__global const uchar *p, ulong i) {
    float t[VW];
    for (int l = 0; l < VW; l++)
        t[l] = e5m2_to_f32(p[i + l]);
    return VLOAD(0, t);
}
#endif

#if defined(K_gemm_tuned) || defined(K_gemm_packed)
#ifdef K_gemm_packed
#define VWN 16 /* store_block's vectors: the packed kernel's sixteen columns */
#endif
#if VWN == 1
typedef float realn;
#define LDL(p, i) ((p)[i])
#define STP(v, p) ((p)[0] = (v))
#else
typedef CAT(float, VWN) realn;
#define LDL(p, i) CAT(vload, VWN)(0, (p) + (i))
#define STP(v, p) CAT(vstore, VWN)((v), 0, (p))
#endif

/* GEMM's epilogue (ABI 1.5) in the store, as gemm.cl's gemm_epilogue computes it from the
 * f32 result: r = alpha * acc (+ beta * C_old), v = r + bias[j] (bias_p not NULL),
 * pre = round(v) (pre_p not NULL), out = round(f(v)), f by act = 1 + ampx_act (0: none),
 * gelu whole vectors (common.cl's act_gelu), the others lane by lane. */
#if VWN > 1
ACT_GELU_FNS(realn, _n)
#else
#define act_gelu_n act_gelu_ep
#endif
ACT_GELU_FNS(float, _ep)

/* Lanes [0, nl) of VWN elements of a tensor of dtype dt from element i (0 past nl), and
 * their store: whole rows VW elements at a time with the dtype picked once per row (storing
 * C element by element through st_elem cost more than the products at k = 128), partial
 * rows element by element. */
#define INLINE inline __attribute__((always_inline))
INLINE floatv ld_vec(__global const uchar *p, int dt, ulong i) {
    return dt == DT_F32 ? ldv_f32(p, i) : dt == DT_BF16 ? ldv_bf16(p, i) : ldv_f16(p, i);
}
INLINE void st_vec(__global uchar *p, int dt, ulong i, floatv x) {
    if (dt == DT_F32)
        stv_f32(p, i, x);
    else if (dt == DT_BF16)
        stv_bf16(p, i, x);
    else
        stv_f16(p, i, x);
}
/* A row as one or two floatv where VWN is VW or 2 VW (no round trip through memory, which
 * PoCL made a store-forwarding stall), else through an array. */
#if VWN == VW
#define ROW_PARTS(r, F) F(r, 0)
#define ROW_JOIN(lo, hi) (lo)
#elif VWN == 2 * VW
#define ROW_PARTS(r, F) F((r).lo, 0), F((r).hi, VW)
#define ROW_JOIN(lo, hi) ((realn)((lo), (hi)))
#endif
INLINE realn ld_row(__global const uchar *p, int dt, ulong i, uint nl) {
#ifdef ROW_PARTS
    if (nl == VWN) return ROW_JOIN(ld_vec(p, dt, i), ld_vec(p, dt, i + (VWN - VW)));
#endif
    float t[VWN];
    for (uint l = 0; l < VWN; l++)
        t[l] = l < nl ? ld_elem(p, dt, i + l) : 0.0f;
    return LDL(t, 0);
}
INLINE void st_row(__global uchar *p, int dt, ulong i, realn r, uint nl) {
#ifdef ROW_PARTS
    if (nl == VWN) {
#define ST_PART(x, o) st_vec(p, dt, i + (o), (x))
        ROW_PARTS(r, ST_PART);
        return;
    }
#endif
    float t[VWN];
    STP(r, t);
    for (uint l = 0; l < nl; l++)
        st_elem(p, dt, i + l, t[l]);
}

/* Lanes [0, nl) of one row's VWN results r, from element ci of C (column j0). */
INLINE void store_block(realn r, uint nl, ulong ci, ulong j0, float beta, __global const uchar *c,
                        int c_dt, __global uchar *out, int out_dt, __global const uchar *bias_p,
                        ulong bias_o, int bias_dt, __global uchar *pre_p, ulong pre_o, int pre_dt,
                        uint act) {
    if (beta != 0.0f) r = r + beta * ld_row(c, c_dt, ci, nl);
    if (bias_p) r = r + ld_row(bias_p + bias_o, bias_dt, j0, nl);
    if (pre_p) st_row(pre_p + pre_o, pre_dt, ci, r, nl);
    if (act == 1 + AMPX_KM_ACT_GELU) {
        r = act_gelu_n(r);
    } else if (act) {
        float t[VWN];
        STP(r, t);
        for (uint l = 0; l < VWN; l++)
            t[l] = (float)ampx_km_act_f((int)act - 1, t[l]);
        r = LDL(t, 0);
    }
    st_row(out, out_dt, ci, r, nl);
}

#endif

#ifdef K_gemm_tuned

#define MWI (MWG / MDIMC)
#define NVI (NWG / (NDIMC * VWN))
#define WGS (MDIMC * NDIMC)

/* Local layouts: As[i * KWG + p] when A is not transposed (its rows run along k), else
 * As[p * MWG + i]; Bs[p * NWG + j] always (the inner loop reads vectors along n). */
#define A_AT(i, p) (ta ? (p)*MWG + (i) : (i)*KWG + (p))

/* Stages the MWG x KWG slice of op(A) at (row0, k0) and the KWG x NWG slice of op(B) at
 * (k0, col0). A whole tile (full) moves VW elements per load along the operand's own rows
 * (stored as they are, except B transposed, whose vectors are spread over VW rows of Bs);
 * an edge tile moves one element per load, 0 outside the matrix. */
#define VEC_OK (KWG % VW == 0 && MWG % VW == 0 && NWG % VW == 0)
#define STAGE_SCALAR(X, Xs, XWG, r0, lim, ld, base, along_k, AT)                                   \
    for (uint e = tid; e < KWG * XWG; e += WGS) {                                                  \
        uint p = along_k ? e % KWG : e / XWG, i = along_k ? e / KWG : e % XWG;                     \
        ulong gi = r0 + i, gp = k0 + p;                                                            \
        float v = 0.0f;                                                                            \
        if (gi < lim && gp < k) v = LD(X, base + (along_k ? gi * ld + gp : gp * ld + gi));         \
        Xs[AT(i, p)] = v;                                                                          \
    }
#define B_AT(j, p) ((p)*NWG + (j))

inline void stage_vec_a(__global const uchar *A, __local float *As, ulong base, ulong lda,
                        ulong row0, ulong k0, int ta, uint tid) {
    if (!ta) { /* rows of A along k: As[i][p .. p + VW) */
        for (uint e = tid; e < MWG * KWG / VW; e += WGS) {
            uint i = e / (KWG / VW), p = e % (KWG / VW) * VW;
            VSTORE(CAT(ldv_, T_a)(A, base + (row0 + i) * lda + k0 + p), 0, As + i * KWG + p);
        }
    } else { /* rows of A^T along m: As[p][i .. i + VW) */
        for (uint e = tid; e < KWG * MWG / VW; e += WGS) {
            uint p = e / (MWG / VW), i = e % (MWG / VW) * VW;
            VSTORE(CAT(ldv_, T_a)(A, base + (k0 + p) * lda + row0 + i), 0, As + p * MWG + i);
        }
    }
}

inline void stage_vec_b(__global const uchar *B, __local float *Bs, ulong base, ulong ldb,
                        ulong col0, ulong k0, int tb, uint tid) {
    if (!tb) { /* rows of B along n: Bs[p][j .. j + VW) */
        for (uint e = tid; e < KWG * NWG / VW; e += WGS) {
            uint p = e / (NWG / VW), j = e % (NWG / VW) * VW;
            VSTORE(CAT(ldv_, T_b)(B, base + (k0 + p) * ldb + col0 + j), 0, Bs + p * NWG + j);
        }
    } else { /* rows of B^T along k: Bs[p .. p + VW)[j] */
        for (uint e = tid; e < NWG * KWG / VW; e += WGS) {
            uint j = e / (KWG / VW), p = e % (KWG / VW) * VW;
            float t[VW];
            VSTORE(CAT(ldv_, T_b)(B, base + (col0 + j) * ldb + k0 + p), 0, t);
            for (int l = 0; l < VW; l++)
                Bs[(p + l) * NWG + j] = t[l];
        }
    }
}

/* part += the products of slice rows p < P_END of the staged tiles */
#define SLICE_SUMS(P_END)                                                                          \
    for (uint p = 0; p < (P_END); p++) {                                                           \
        realn bv[NVI];                                                                             \
        _Pragma("unroll") for (int v = 0; v < NVI; v++) bv[v] =                                    \
            LDL(Bs, p * NWG + (tx + NDIMC * v) * VWN);                                             \
        _Pragma("unroll") for (int w = 0; w < MWI; w++) {                                          \
            realn av = (realn)(As[A_AT(ty + MDIMC * w, p)]);                                       \
            _Pragma("unroll") for (int v = 0; v < NVI; v++) part[w][v] =                           \
                mad(av, bv[v], part[w][v]);                                                        \
        }                                                                                          \
    }

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void
gemm_tuned(CTENSOR(a), CTENSOR(b), __global const uchar *c_p, ulong c_o, int c_dt,
           __global uchar *out_p, ulong out_o, int out_dt, ulong m, ulong n, ulong k, ulong lda,
           ulong ldb, ulong ldc, ulong sa, ulong sb, ulong sc, int ta, int tb, float alpha,
           float beta, ulong batch0, __global const uchar *dq_a_p, ulong dq_a_o,
           __global const uchar *dq_b_p, ulong dq_b_o, __global const uchar *bias_p, ulong bias_o,
           int bias_dt, __global uchar *pre_p, ulong pre_o, int pre_dt, uint act) {
    __local float As[KWG * MWG];
    __local float Bs[KWG * NWG];
    const uint tx = get_local_id(0), ty = get_local_id(1), tid = ty * NDIMC + tx;
    const ulong bt   = batch0 + get_global_id(2);
    const ulong row0 = (ulong)get_group_id(1) * MWG, col0 = (ulong)get_group_id(0) * NWG;
    const ulong abase = bt * sa, bbase = bt * sb, cbase = bt * sc;
    const float al = dq_a_p ? alpha * (((__global const float *)(dq_a_p + dq_a_o))[0] *
                                       ((__global const float *)(dq_b_p + dq_b_o))[0])
                            : alpha;
    realn acc[MWI][NVI];
    for (int w = 0; w < MWI; w++)
        for (int v = 0; v < NVI; v++)
            acc[w][v] = (realn)(0.0f);
    const int rows_in = row0 + MWG <= m, cols_in = col0 + NWG <= n;
    for (ulong k0 = 0; k0 < k; k0 += KWG) {
        if (VEC_OK && rows_in && k0 + KWG <= k)
            stage_vec_a(a_p + a_o, As, abase, lda, row0, k0, ta, tid);
        else
            STAGE_SCALAR(a, As, MWG, row0, m, lda, abase, !ta, A_AT)
        if (VEC_OK && cols_in && k0 + KWG <= k)
            stage_vec_b(b_p + b_o, Bs, bbase, ldb, col0, k0, tb, tid);
        else
            STAGE_SCALAR(b, Bs, NWG, col0, n, ldb, bbase, tb, B_AT)
        barrier(CLK_LOCAL_MEM_FENCE);
        realn part[MWI][NVI]; /* this slice's sums (see the top) */
        for (int w = 0; w < MWI; w++)
            for (int v = 0; v < NVI; v++)
                part[w][v] = (realn)(0.0f);
        /* the last slice stops at k: its rows past k are zeros, whose products add nothing
         * (a whole slice keeps its constant trip count) */
        if (k0 + KWG <= k)
            SLICE_SUMS(KWG)
        else
            SLICE_SUMS((uint)(k - k0))
        for (int w = 0; w < MWI; w++)
            for (int v = 0; v < NVI; v++)
                acc[w][v] += part[w][v];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < MWI; w++) {
        ulong i = row0 + ty + MDIMC * w;
        if (i >= m) break;
        for (int v = 0; v < NVI; v++) {
            ulong j0 = col0 + (tx + NDIMC * v) * VWN;
            if (j0 >= n) break;
            store_block(al * acc[w][v], (uint)min((ulong)VWN, n - j0), cbase + i * ldc + j0, j0,
                        beta, c_p + c_o, c_dt, out_p + out_o, out_dt, bias_p, bias_o, bias_dt,
                        pre_p, pre_o, pre_dt, act);
        }
    }
}
#endif

/* The packed form for CPU devices (gemm=packed, auto there; plugins/opencl/gemm_packed.c),
 * a CPU BLAS's packed panels and register block without local memory or barriers: PoCL runs
 * a work-group's items one after the other and keeps what lives across a barrier in memory,
 * while one item looping over k with its block in registers is what its vectorizer does best.
 * gemm_pack (-DT_x, -DPW) copies op(A) (PW = MR) and op(B)^T (PW = NR) into f32 panels, each
 * element widened once, exactly; gemm_packed (-DMR, -DNR) multiplies them, one MR x NR block
 * of C per item in MR * NR / 16 float16 accumulators, and stores through store_block. */
#ifdef K_gemm_pack
/* X' is the rows x k matrix (A: m x k; B^T: n x k), element (i, p) at X[i * ld + p] when
 * along_k, else X[p * ld + i], in batch batch0 + z at z * sx. Panel ip holds its rows
 * ip PW .. ip PW + PW - 1 interleaved along k: P[((z np + ip) k + p) PW + l] = X'[ip PW + l][p],
 * 0 past `rows` (np = the number of panels). Item (c, ip, z) moves p in [c KC, c KC + KC),
 * VW at a time (KC = PACK_RUN VW, PACK_RUN from the host, which sizes the launch by it:
 * items of one VW cost more to start than to run). */
inline void pack_chunk(__global const uchar *x_p, ulong x_o, __global float *d, ulong base,
                       ulong p0, ulong i0, uint kn, uint rn, ulong ld, int along_k) {
    if (along_k) { /* PW rows of X, VW consecutive elements of each */
        for (uint l = 0; l < PW; l++) {
            float t[VW];
            if (l < rn && kn == VW) {
                VSTORE(LDV(x, base + (i0 + l) * ld + p0), 0, t);
            } else {
                for (uint q = 0; q < VW; q++)
                    t[q] = l < rn && q < kn ? LD(x, base + (i0 + l) * ld + p0 + q) : 0.0f;
            }
            for (uint q = 0; q < kn; q++)
                d[q * PW + l] = t[q];
        }
    } else { /* VW rows of X, PW consecutive elements of each */
        for (uint q = 0; q < kn; q++) {
            const ulong src = base + (p0 + q) * ld + i0;
            if (PW % VW == 0 && rn == PW) {
                for (uint l = 0; l < PW; l += VW)
                    VSTORE(LDV(x, src + l), 0, d + q * PW + l);
            } else {
                for (uint l = 0; l < PW; l++)
                    d[q * PW + l] = l < rn ? LD(x, src + l) : 0.0f;
            }
        }
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_pack(CTENSOR(x), __global float *P, ulong rows, ulong k, ulong ld, ulong sx, int along_k,
          ulong batch0) {
    const ulong c0 = get_global_id(0) * (PACK_RUN * VW), ip = get_global_id(1);
    const ulong z = get_global_id(2), base = (batch0 + z) * sx, i0 = ip * PW;
    const ulong np    = (rows + PW - 1) / PW;
    const uint rn     = (uint)min((ulong)PW, rows - i0);
    __global float *d = P + (z * np + ip) * k * PW;
    for (ulong p0 = c0; p0 < k && p0 < c0 + PACK_RUN * VW; p0 += VW)
        pack_chunk(x_p, x_o, d + p0 * PW, base, p0, i0, (uint)min((ulong)VW, k - p0), rn, ld,
                   along_k);
}
#endif

#ifdef K_gemm_packed
#define NV (NR / 16)
/* Item (ib, jp, z): rows ib MR .. of C, columns jp NR .., batch batch0 + z, from A's panel
 * ib and B's panel jp of that batch (pa_s, pb_s floats apart; 0: one panel set for all).
 * Each k step loads NV vectors of B's panel, broadcasts MR elements of A's and does MR NV
 * fused multiply-adds (GP_FMA: fma where the device has it, else mad), in k order. The loops
 * over the block are unrolled so the accumulators stay in registers (left rolled, PoCL kept
 * them in memory: 80 GFLOP/s instead of 220 at 1024^3 f32). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
gemm_packed(__global const float *pa, ulong pa_s, __global const float *pb, ulong pb_s,
            __global const uchar *c_p, ulong c_o, int c_dt, __global uchar *out_p, ulong out_o,
            int out_dt, ulong m, ulong n, ulong k, ulong ldc, ulong sc, float alpha, float beta,
            ulong batch0, __global const uchar *dq_a_p, ulong dq_a_o, __global const uchar *dq_b_p,
            ulong dq_b_o, __global const uchar *bias_p, ulong bias_o, int bias_dt,
            __global uchar *pre_p, ulong pre_o, int pre_dt, uint act) {
    const ulong ib = get_global_id(0), jp = get_global_id(1), z = get_global_id(2);
    __global const float *ap = pa + z * pa_s + ib * k * MR;
    __global const float *bp = pb + z * pb_s + jp * k * NR;
    float16 acc[MR][NV];
    _Pragma("unroll") for (int r = 0; r < MR; r++) {
        _Pragma("unroll") for (int v = 0; v < NV; v++) acc[r][v] = (float16)(0.0f);
    }
    for (ulong p = 0; p < k; p++) {
        float16 bv[NV];
        _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = vload16(v, bp + p * NR);
        _Pragma("unroll") for (int r = 0; r < MR; r++) {
            float16 av = (float16)(ap[p * MR + r]);
            _Pragma("unroll") for (int v = 0; v < NV; v++) {
                acc[r][v] = GP_FMA(av, bv[v], acc[r][v]);
            }
        }
    }
    const float al    = dq_a_p ? alpha * (((__global const float *)(dq_a_p + dq_a_o))[0] *
                                       ((__global const float *)(dq_b_p + dq_b_o))[0])
                               : alpha;
    const ulong cbase = (batch0 + z) * sc;
    for (int r = 0; r < MR; r++) {
        ulong i = ib * MR + r;
        if (i >= m) break;
        for (int v = 0; v < NV; v++) {
            ulong j0 = jp * NR + v * 16;
            if (j0 >= n) break;
            store_block(al * acc[r][v], (uint)min((ulong)16, n - j0), cbase + i * ldc + j0, j0,
                        beta, c_p + c_o, c_dt, out_p + out_o, out_dt, bias_p, bias_o, bias_dt,
                        pre_p, pre_o, pre_dt, act);
        }
    }
}
#endif
