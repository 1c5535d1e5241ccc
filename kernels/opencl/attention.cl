/* attention.cl — ATTN_FWD and ATTN_BWD (backend.h), one work item per query row (forward,
 * dq) or key row (dk, dv), grid-stride over [batch, heads, seq].
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
        ulong i = row % seq, bh = row / seq, b = bh / heads, h = bh % heads;
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
        ulong i = row % seq, bh = row / seq, b = bh / heads, h = bh % heads;
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
        ulong j = row % seq, bh = row / seq, b = bh / heads, h = bh % heads;
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
