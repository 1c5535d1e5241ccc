/* attention.cl — ATTN_FWD and ATTN_BWD (backend.h). Two sets of kernels: the tiled ones at
 * the end of the file (heads of up to AT_HMAX columns, when the device's local memory holds
 * their tiles; attention.c chooses per kernel), and these, one work item per query row
 * (forward, dq) or key row (dk, dv), grid-stride over [batch, heads, seq].
 *
 * The forward keeps the online softmax of its row in f32 (running max m, sum l of
 * exp(s - m), the context accumulator rescaled by exp(m_old - m_new)) over tiles of
 * ATTN_TK keys whose scores sit in private memory, so nothing of size seq x seq exists. The
 * context accumulator holds ATTN_CW columns; a wider head runs the pass once per block of
 * ATTN_CW columns (the scores recomputed). The backward recomputes p = exp(s - lse) from the
 * forward's lse: attn_bwd_dq writes delta = do . o and dq, then attn_bwd_dkv (enqueued after
 * it on the same queue) reads delta and writes dk and dv. The dropout mask is DROPOUT's hash
 * of the element index of the [B, H, T, T] probabilities (common.cl's hash32). */

#define ATTN_TK 32 /* keys whose scores one pass keeps */
#define ATTN_CW 64 /* context columns one pass accumulates */

/* Element of position t, head h, column c of batch b in a [B, T, ld] operand. */
inline ulong attn_at(ulong b, ulong t, ulong h, ulong c, ulong seq, ulong hd, ulong ld) {
    return (b * seq + t) * ld + h * hd + c;
}

/* The dropout factor of probability (row, j): dscale when kept, 0 when dropped, 1 without
 * dropout. row indexes [B, H, T]. */
inline float attn_keep(ulong row, ulong j, ulong seq, ulong seed, ulong offset, uint thr,
                       float dscale) {
    if (thr == 0) return 1.0f;
    return hash32(seed, offset + row * seq + j) >= thr ? dscale : 0.0f;
}

__kernel void attn_fwd(CTENSOR(q), CTENSOR(k), CTENSOR(v), TENSOR(o), FARG(lse_t), ulong batch,
                       ulong heads, ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v,
                       ulong ld_o, uint causal, float scale, uint thr, float dscale, ulong seed,
                       ulong offset) {
    __global float *lse = F32P(lse_t);
    ulong rows          = batch * heads * seq;
    for (ulong row = GID; row < rows; row += GSIZE) {
        ulong i, h, bh = udivmod(row, seq, &i), b = udivmod(bh, heads, &h);
        ulong kend = causal ? i + 1 : seq;
        for (ulong c0 = 0; c0 < hd; c0 += ATTN_CW) {
            ulong nc = hd - c0 < ATTN_CW ? hd - c0 : ATTN_CW;
            float acc[ATTN_CW], s[ATTN_TK];
            for (ulong c = 0; c < nc; c++)
                acc[c] = 0.0f;
            float m = -INFINITY, l = 0.0f;
            for (ulong j0 = 0; j0 < kend; j0 += ATTN_TK) {
                ulong nk = kend - j0 < ATTN_TK ? kend - j0 : ATTN_TK;
                float mx = -INFINITY;
                for (ulong jj = 0; jj < nk; jj++) {
                    float d = 0.0f;
                    for (ulong c = 0; c < hd; c++)
                        d += LD(q, attn_at(b, i, h, c, seq, hd, ld_q)) *
                             LD(k, attn_at(b, j0 + jj, h, c, seq, hd, ld_k));
                    s[jj] = d * scale;
                    mx    = fmax(mx, s[jj]);
                }
                float mn = fmax(m, mx), alpha = m == -INFINITY ? 0.0f : exp(m - mn);
                for (ulong c = 0; c < nc; c++)
                    acc[c] *= alpha;
                l *= alpha;
                for (ulong jj = 0; jj < nk; jj++) {
                    float p = exp(s[jj] - mn);
                    l += p;
                    p *= attn_keep(row, j0 + jj, seq, seed, offset, thr, dscale);
                    for (ulong c = 0; c < nc; c++)
                        acc[c] += p * LD(v, attn_at(b, j0 + jj, h, c0 + c, seq, hd, ld_v));
                }
                m = mn;
            }
            float inv = 1.0f / l;
            for (ulong c = 0; c < nc; c++)
                ST(o, attn_at(b, i, h, c0 + c, seq, hd, ld_o), acc[c] * inv);
            if (c0 == 0) lse[row] = m + log(l);
        }
    }
}

/* s = scale q_i . k_j, p = exp(s - lse_i), dp = do_i . v_j, and ds = scale p (keep dp - delta);
 * *pd = keep p, dv's weight. */
inline float attn_ds(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(dout), ulong b, ulong h, ulong i,
                     ulong j, ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o,
                     float scale, float lse_i, float delta_i, float keep, float *pd) {
    float d = 0.0f, dp = 0.0f;
    for (ulong c = 0; c < hd; c++) {
        d += LD(q, attn_at(b, i, h, c, seq, hd, ld_q)) * LD(k, attn_at(b, j, h, c, seq, hd, ld_k));
        dp += LD(dout, attn_at(b, i, h, c, seq, hd, ld_o)) *
              LD(v, attn_at(b, j, h, c, seq, hd, ld_v));
    }
    float p = exp(d * scale - lse_i);
    *pd     = keep * p;
    return scale * p * (keep * dp - delta_i);
}

__kernel void attn_bwd_dq(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(o), CTENSOR(dout),
                          FARG(lse_t), FARG(delta_t), TENSOR(dq), ulong batch, ulong heads,
                          ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o,
                          ulong ld_dq, uint causal, float scale, uint thr, float dscale, ulong seed,
                          ulong offset) {
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    ulong rows = batch * heads * seq;
    for (ulong row = GID; row < rows; row += GSIZE) {
        ulong i, h, bh = udivmod(row, seq, &i), b = udivmod(bh, heads, &h);
        float di = 0.0f;
        for (ulong c = 0; c < hd; c++)
            di += LD(dout, attn_at(b, i, h, c, seq, hd, ld_o)) *
                  LD(o, attn_at(b, i, h, c, seq, hd, ld_o));
        delta[row] = di;
        ulong kend = causal ? i + 1 : seq;
        for (ulong c0 = 0; c0 < hd; c0 += ATTN_CW) {
            ulong nc = hd - c0 < ATTN_CW ? hd - c0 : ATTN_CW;
            float acc[ATTN_CW];
            for (ulong c = 0; c < nc; c++)
                acc[c] = 0.0f;
            for (ulong j = 0; j < kend; j++) {
                float pd, keep = attn_keep(row, j, seq, seed, offset, thr, dscale);
                float ds = attn_ds(q_p, q_o, q_dt, k_p, k_o, k_dt, v_p, v_o, v_dt, dout_p, dout_o,
                                   dout_dt, b, h, i, j, seq, hd, ld_q, ld_k, ld_v, ld_o, scale,
                                   lse[row], di, keep, &pd);
                for (ulong c = 0; c < nc; c++)
                    acc[c] += ds * LD(k, attn_at(b, j, h, c0 + c, seq, hd, ld_k));
            }
            for (ulong c = 0; c < nc; c++)
                ST(dq, attn_at(b, i, h, c0 + c, seq, hd, ld_dq), acc[c]);
        }
    }
}

__kernel void attn_bwd_dkv(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(dout), FARG(lse_t),
                           FARG(delta_t), TENSOR(dk), TENSOR(dv), ulong batch, ulong heads,
                           ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o,
                           ulong ld_dk, ulong ld_dv, uint causal, float scale, uint thr,
                           float dscale, ulong seed, ulong offset) {
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    ulong rows = batch * heads * seq;
    for (ulong row = GID; row < rows; row += GSIZE) {
        ulong j, h, bh = udivmod(row, seq, &j), b = udivmod(bh, heads, &h);
        for (ulong c0 = 0; c0 < hd; c0 += ATTN_CW) {
            ulong nc = hd - c0 < ATTN_CW ? hd - c0 : ATTN_CW;
            float ak[ATTN_CW], av[ATTN_CW];
            for (ulong c = 0; c < nc; c++)
                ak[c] = av[c] = 0.0f;
            for (ulong i = causal ? j : 0; i < seq; i++) {
                ulong qrow = bh * seq + i;
                float pd, keep = attn_keep(qrow, j, seq, seed, offset, thr, dscale);
                float ds = attn_ds(q_p, q_o, q_dt, k_p, k_o, k_dt, v_p, v_o, v_dt, dout_p, dout_o,
                                   dout_dt, b, h, i, j, seq, hd, ld_q, ld_k, ld_v, ld_o, scale,
                                   lse[qrow], delta[qrow], keep, &pd);
                for (ulong c = 0; c < nc; c++) {
                    ak[c] += ds * LD(q, attn_at(b, i, h, c0 + c, seq, hd, ld_q));
                    av[c] += pd * LD(dout, attn_at(b, i, h, c0 + c, seq, hd, ld_o));
                }
            }
            for (ulong c = 0; c < nc; c++) {
                ST(dk, attn_at(b, j, h, c0 + c, seq, hd, ld_dk), ak[c]);
                ST(dv, attn_at(b, j, h, c0 + c, seq, hd, ld_dv), av[c]);
            }
        }
    }
}

/* ---- The tiled kernels (head_dim <= AT_HMAX, local memory permitting; attention.c picks).
 * (attention_items.cl has their form for CPU devices, one work item per AT_B rows.)
 * A work-group of AT_B items takes AT_B rows of one (batch, head): queries for the forward
 * and dq, keys for dk and dv. It stages the other side AT_B rows at a time in local memory
 * as f32 (each element widened once per work-group, not once per row), and each item then
 * computes its AT_B scores with vectors along the staged rows: 16 lanes, so the staged
 * operand of the dot products is stored transposed ([column][row]) and read with vload16.
 * Columns are padded with zeros to hp, a multiple of 16. Each sum keeps the order of the
 * kernels above (dot products over the columns in order, the context and gradient sums
 * over keys or queries in order), so the two agree but for exp's last bits. */

#define AT_B 32     /* rows per work-group, and rows per staged tile */
#define AT_HMAX 128 /* the widest head the tiled kernels take */

/* Over the 16-column vectors of a head: a loop of constant trip count, unrolled, so that the
 * accumulators stay in registers (a loop to hp / 16 would keep them in memory). */
#define AT_FOR_CV(cv)                                                                              \
    _Pragma("unroll") for (int cv = 0; cv < AT_HMAX / 16; cv++) if (cv < (int)(hp / 16))

/* s where row j0 + lane is at most lim, -inf elsewhere. */
inline float16 at_mask(float16 s, long j0, long lim) {
    int16 j = (int16)((int)j0) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return select(s, (float16)(-INFINITY), j > (int16)((int)lim));
}

inline float at_max16(float16 a) {
    float8 b = fmax(a.lo, a.hi);
    float4 c = fmax(b.lo, b.hi);
    float2 d = fmax(c.lo, c.hi);
    return fmax(d.x, d.y);
}

/* dst_t[c * AT_B + jj] (transposed) and/or dst_r[jj * hp + c] (rows) = element (row j0 + jj,
 * column c) of x, 0 past seq or hd; the work-group's items share the copy, item li taking
 * columns li, li + AT_B, ... (no division per element). */
#define AT_STAGE(x, dst_t, dst_r, j0, ld)                                                          \
    for (ulong jj = 0; jj < AT_B; jj++) {                                                          \
        ulong j = (j0) + jj, base = (b * seq + j) * (ld) + h * hd;                                 \
        for (ulong c = get_local_id(0); c < hp; c += AT_B) {                                       \
            float val = j < seq && c < hd ? LD(x, base + c) : 0.0f;                                \
            if (dst_t) ((__local float *)(dst_t))[c * AT_B + jj] = val;                            \
            if (dst_r) ((__local float *)(dst_r))[jj * hp + c] = val;                              \
        }                                                                                          \
    }

/* The AT_B scores of private row r against the transposed tile t, unscaled. */
inline void at_dots(const float *r, __local const float *t, ulong hp, float16 *s0, float16 *s1) {
    float16 a = (float16)(0.0f), z = (float16)(0.0f);
    for (ulong c = 0; c < hp; c++) {
        a += r[c] * vload16(0, t + c * AT_B);
        z += r[c] * vload16(0, t + c * AT_B + 16);
    }
    *s0 = a;
    *s1 = z;
}

__kernel __attribute__((reqd_work_group_size(AT_B, 1, 1))) void
attn_fwd_tiled(CTENSOR(q), CTENSOR(k), CTENSOR(v), TENSOR(o), FARG(lse_t), ulong batch, ulong heads,
               ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o, uint causal,
               float scale, uint thr, float dscale, ulong seed, ulong offset, __local float *kt,
               __local float *vr) {
    __global float *lse = F32P(lse_t);
    ulong hp = (hd + 15) / 16 * 16, blocks = (seq + AT_B - 1) / AT_B;
    ulong blk, h, bh = udivmod(get_group_id(0), blocks, &blk), i0 = blk * AT_B;
    ulong b = udivmod(bh, heads, &h), i = i0 + get_local_id(0), row = bh * seq + i;
    int live = i < seq;
    long lim = causal && live ? (long)i : (long)seq - 1; /* this row's last key */
    float qr[AT_HMAX], pp[AT_B], out[AT_HMAX];
    float16 acc[AT_HMAX / 16];
    for (ulong c = 0; c < hp; c++)
        qr[c] = live && c < hd ? LD(q, attn_at(b, i, h, c, seq, hd, ld_q)) : 0.0f;
    AT_FOR_CV(cv)
    acc[cv] = (float16)(0.0f);
    float m = -INFINITY, l = 0.0f;
    ulong last = causal && i0 + AT_B < seq ? i0 + AT_B : seq; /* keys the group needs */
    for (ulong j0 = 0; j0 < last; j0 += AT_B) {
        barrier(CLK_LOCAL_MEM_FENCE);
        AT_STAGE(k, kt, 0, j0, ld_k)
        AT_STAGE(v, 0, vr, j0, ld_v)
        barrier(CLK_LOCAL_MEM_FENCE);
        float16 s0, s1;
        at_dots(qr, kt, hp, &s0, &s1);
        s0       = at_mask(s0 * scale, (long)j0, lim);
        s1       = at_mask(s1 * scale, (long)j0 + 16, lim);
        float mx = fmax(at_max16(s0), at_max16(s1));
        float mn = fmax(m, mx), alpha = m == -INFINITY ? 0.0f : exp(m - mn);
        long nk = lim - (long)j0 + 1 < AT_B ? lim - (long)j0 + 1 : AT_B;
        vstore16(exp(s0 - mn), 0, pp);
        vstore16(exp(s1 - mn), 0, pp + 16);
        AT_FOR_CV(cv)
        acc[cv] *= alpha;
        l *= alpha;
        for (long jj = 0; jj < nk; jj++) {
            float p = pp[jj];
            l += p;
            p *= attn_keep(row, j0 + jj, seq, seed, offset, thr, dscale);
            AT_FOR_CV(cv)
            acc[cv] += p * vload16(cv, vr + jj * hp);
        }
        m = mn;
    }
    if (!live) return;
    float inv = 1.0f / l;
    AT_FOR_CV(cv)
    vstore16(acc[cv], cv, out);
    for (ulong c = 0; c < hd; c++)
        ST(o, attn_at(b, i, h, c, seq, hd, ld_o), out[c] * inv);
    lse[row] = m + log(l);
}

__kernel __attribute__((reqd_work_group_size(AT_B, 1, 1))) void
attn_bwd_dq_tiled(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(o), CTENSOR(dout), FARG(lse_t),
                  FARG(delta_t), TENSOR(dq), ulong batch, ulong heads, ulong seq, ulong hd,
                  ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o, ulong ld_dq, uint causal,
                  float scale, uint thr, float dscale, ulong seed, ulong offset, __local float *kt,
                  __local float *vt, __local float *kr) {
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    ulong hp = (hd + 15) / 16 * 16, blocks = (seq + AT_B - 1) / AT_B;
    ulong blk, h, bh = udivmod(get_group_id(0), blocks, &blk), i0 = blk * AT_B;
    ulong b = udivmod(bh, heads, &h), i = i0 + get_local_id(0), row = bh * seq + i;
    int live = i < seq;
    long lim = causal && live ? (long)i : (long)seq - 1;
    float qr[AT_HMAX], dor[AT_HMAX], pds[AT_B], out[AT_HMAX];
    float16 acc[AT_HMAX / 16];
    float di = 0.0f;
    for (ulong c = 0; c < hp; c++) {
        qr[c]  = live && c < hd ? LD(q, attn_at(b, i, h, c, seq, hd, ld_q)) : 0.0f;
        dor[c] = live && c < hd ? LD(dout, attn_at(b, i, h, c, seq, hd, ld_o)) : 0.0f;
        if (live && c < hd) di += dor[c] * LD(o, attn_at(b, i, h, c, seq, hd, ld_o));
    }
    if (live) delta[row] = di;
    float lse_i = live ? lse[row] : 0.0f;
    AT_FOR_CV(cv)
    acc[cv]    = (float16)(0.0f);
    ulong last = causal && i0 + AT_B < seq ? i0 + AT_B : seq;
    for (ulong j0 = 0; j0 < last; j0 += AT_B) {
        barrier(CLK_LOCAL_MEM_FENCE);
        AT_STAGE(k, kt, kr, j0, ld_k)
        AT_STAGE(v, vt, 0, j0, ld_v)
        barrier(CLK_LOCAL_MEM_FENCE);
        float16 s0, s1, d0, d1;
        at_dots(qr, kt, hp, &s0, &s1);
        at_dots(dor, vt, hp, &d0, &d1);
        vstore16(exp(s0 * scale - lse_i), 0, pds);
        vstore16(exp(s1 * scale - lse_i), 0, pds + 16);
        float dps[AT_B];
        vstore16(d0, 0, dps);
        vstore16(d1, 0, dps + 16);
        long nk = lim - (long)j0 + 1 < AT_B ? lim - (long)j0 + 1 : AT_B;
        for (long jj = 0; jj < nk; jj++) {
            float keep = attn_keep(row, j0 + jj, seq, seed, offset, thr, dscale);
            float ds   = scale * pds[jj] * (keep * dps[jj] - di);
            AT_FOR_CV(cv)
            acc[cv] += ds * vload16(cv, kr + jj * hp);
        }
    }
    if (!live) return;
    AT_FOR_CV(cv)
    vstore16(acc[cv], cv, out);
    for (ulong c = 0; c < hd; c++)
        ST(dq, attn_at(b, i, h, c, seq, hd, ld_dq), out[c]);
}

__kernel __attribute__((reqd_work_group_size(AT_B, 1, 1))) void
attn_bwd_dkv_tiled(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(dout), FARG(lse_t), FARG(delta_t),
                   TENSOR(dk), TENSOR(dv), ulong batch, ulong heads, ulong seq, ulong hd,
                   ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o, ulong ld_dk, ulong ld_dv,
                   uint causal, float scale, uint thr, float dscale, ulong seed, ulong offset,
                   __local float *qt, __local float *dt, __local float *qr_, __local float *dr) {
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    __local float lt[AT_B], et[AT_B];
    ulong hp = (hd + 15) / 16 * 16, blocks = (seq + AT_B - 1) / AT_B;
    ulong blk, h, bh = udivmod(get_group_id(0), blocks, &blk), j0g = blk * AT_B;
    ulong b = udivmod(bh, heads, &h), j = j0g + get_local_id(0);
    int live = j < seq;
    float kr[AT_HMAX], vr[AT_HMAX], ps[AT_B], dps[AT_B], out[AT_HMAX];
    float16 ak[AT_HMAX / 16], av[AT_HMAX / 16];
    for (ulong c = 0; c < hp; c++) {
        kr[c] = live && c < hd ? LD(k, attn_at(b, j, h, c, seq, hd, ld_k)) : 0.0f;
        vr[c] = live && c < hd ? LD(v, attn_at(b, j, h, c, seq, hd, ld_v)) : 0.0f;
    }
    AT_FOR_CV(cv)
    ak[cv] = av[cv] = (float16)(0.0f);
    for (ulong i0 = causal ? j0g : 0; i0 < seq; i0 += AT_B) {
        barrier(CLK_LOCAL_MEM_FENCE);
        AT_STAGE(q, qt, qr_, i0, ld_q)
        AT_STAGE(dout, dt, dr, i0, ld_o)
        if (get_local_id(0) < AT_B) {
            ulong ii            = i0 + get_local_id(0);
            lt[get_local_id(0)] = ii < seq ? lse[bh * seq + ii] : 0.0f;
            et[get_local_id(0)] = ii < seq ? delta[bh * seq + ii] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float16 s0, s1, d0, d1;
        at_dots(kr, qt, hp, &s0, &s1);
        at_dots(vr, dt, hp, &d0, &d1);
        vstore16(exp(s0 * scale - vload16(0, lt)), 0, ps);
        vstore16(exp(s1 * scale - vload16(0, lt + 16)), 0, ps + 16);
        vstore16(d0, 0, dps);
        vstore16(d1, 0, dps + 16);
        /* queries i0 + ii with i >= j (causal) and i < seq */
        long first = causal && j > i0 ? (long)(j - i0) : 0;
        long end   = seq - i0 < AT_B ? (long)(seq - i0) : AT_B;
        if (!live) end = 0;
        for (long ii = first; ii < end; ii++) {
            ulong qrow = bh * seq + i0 + ii;
            float keep = attn_keep(qrow, j, seq, seed, offset, thr, dscale);
            float pd = keep * ps[ii], ds = scale * ps[ii] * (keep * dps[ii] - et[ii]);
            AT_FOR_CV(cv) {
                ak[cv] += ds * vload16(cv, qr_ + ii * hp);
                av[cv] += pd * vload16(cv, dr + ii * hp);
            }
        }
    }
    if (!live) return;
    AT_FOR_CV(cv)
    vstore16(ak[cv], cv, out);
    for (ulong c = 0; c < hd; c++)
        ST(dk, attn_at(b, j, h, c, seq, hd, ld_dk), out[c]);
    AT_FOR_CV(cv)
    vstore16(av[cv], cv, out);
    for (ulong c = 0; c < hd; c++)
        ST(dv, attn_at(b, j, h, c, seq, hd, ld_dv), out[c]);
}
