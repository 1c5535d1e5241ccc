/* attention_items.cl — the tiled attention kernels of attention.cl in the form for CPU
 * devices: one work item per AT_B rows of one (batch, head), in work-groups of one item.
 *
 * PoCL runs a work-group's items one after the other between barriers and keeps each
 * private value that lives across a barrier in memory, one copy per item; with AT_B items
 * per group the accumulators of the tiled kernels went through memory on every update.
 * Here one item stages each tile alone (into the same __local tiles, sized by attention.c)
 * and computes its AT_B rows AT_R at a time, so each staged element it loads into a register
 * serves AT_R rows (register blocking), and no barrier is needed. Each row's sums keep the
 * tiled kernels' order exactly (dot products over the columns in order, the context and
 * gradient sums over keys or queries in order), with the same exp, so the two forms give the
 * same bits. */

/* The kernels' bodies are built only where the plugin will launch them (AMPX_ITEM_KERNELS,
 * defined with -D where ocl_row_items holds): their private arrays (48-64 KB per item)
 * could make a GPU driver refuse, or build slowly, the whole main program. */

#define AT_R 4 /* rows per register block */

/* The AT_B scores of the AT_R private rows at r (row k at r + k hp) against the transposed
 * tile t, unscaled: s[2 k] and s[2 k + 1] are row k's two halves. */
inline void at_dots_r(const float *r, __local const float *t, ulong hp, float16 *s) {
    float16 a[2 * AT_R];
    _Pragma("unroll") for (int k = 0; k < 2 * AT_R; k++) a[k] = (float16)(0.0f);
    for (ulong c = 0; c < hp; c++) {
        float16 t0 = vload16(0, t + c * AT_B), t1 = vload16(0, t + c * AT_B + 16);
        _Pragma("unroll") for (int k = 0; k < AT_R; k++) {
            float x = r[k * hp + c];
            a[2 * k] += x * t0;
            a[2 * k + 1] += x * t1;
        }
    }
    _Pragma("unroll") for (int k = 0; k < 2 * AT_R; k++) s[k] = a[k];
}

/* dst[0 .. hp) = elements base .. base + n - 1 of x (dtype dt), widened, then zeros: the
 * dtype chosen once per row rather than per element (ld_elem), so each loop is one
 * conversion. */
inline void at_row(__global const uchar *p, int dt, ulong base, ulong n, ulong hp, float *dst) {
    ulong c = 0;
    if (dt == DT_BF16)
        for (; c < n; c++)
            dst[c] = bf16_to_f32(((__global const ushort *)p)[base + c]);
    else if (dt == DT_F16)
        for (; c < n; c++)
            dst[c] = f16_to_f32(((__global const ushort *)p)[base + c]);
    else
        for (; c < n; c++)
            dst[c] = ((__global const float *)p)[base + c];
    for (; c < hp; c++)
        dst[c] = 0.0f;
}

/* Rows i0 .. i0 + AT_B - 1 of x (zeros past seq or hd) into the private rows dst[r * hp + c]. */
#define AT_ROWS(x, dst, i0, ld)                                                                    \
    for (ulong r = 0; r < AT_B; r++)                                                               \
        at_row(x##_p + x##_o, x##_dt, (b * seq + (i0) + r) * (ld) + h * hd,                        \
               (i0) + r < seq ? hd : 0, hp, (dst) + r * hp);

/* AT_STAGE of one work item: rows j0 .. j0 + AT_B - 1 of x into the tile dst_t (transposed)
 * and/or dst_r (rows), each row widened once by at_row. The transposing copy is kept scalar:
 * vectorized, it becomes a scatter (slow on Zen 4; the backward measured faster without). */
#define AT_STAGE_ITEM(x, dst_t, dst_r, j0, ld)                                                     \
    for (ulong jj = 0; jj < AT_B; jj++) {                                                          \
        float row_[AT_HMAX];                                                                       \
        at_row(x##_p + x##_o, x##_dt, (b * seq + (j0) + jj) * (ld) + h * hd,                       \
               (j0) + jj < seq ? hd : 0, hp, row_);                                                \
        if (dst_r) {                                                                               \
            for (ulong c = 0; c < hp; c++)                                                         \
                ((__local float *)(dst_r))[jj * hp + c] = row_[c];                                 \
        }                                                                                          \
        if (dst_t) {                                                                               \
            __local float *t_ = (__local float *)(dst_t);                                          \
            _Pragma("clang loop vectorize(disable)") for (ulong c = 0; c < hp; c++) {              \
                t_[c * AT_B + jj] = row_[c];                                                       \
            }                                                                                      \
        }                                                                                          \
    }

/* acc rows r0 .. r0 + AT_R - 1 (private, stride hp) times scale_k, then plus w[k][jj] * the
 * tile row jj (tile rows of stride hp) for jj in [lo_k, hi_k), in jj order. */
inline void at_accumulate(float *acc, ulong r0, ulong hp, const float *scale_k, float w[AT_R][AT_B],
                          const long *lo, const long *hi, __local const float *tile) {
    long jlo = lo[0], jhi = hi[0];
    _Pragma("unroll") for (int k = 1; k < AT_R; k++) {
        jlo = min(jlo, lo[k]);
        jhi = max(jhi, hi[k]);
    }
    for (ulong cv = 0; cv < hp / 16; cv++) {
        float16 a[AT_R];
        _Pragma("unroll") for (int k = 0; k < AT_R; k++) a[k] =
            vload16(cv, acc + (r0 + k) * hp) * scale_k[k];
        for (long jj = jlo; jj < jhi; jj++) {
            float16 x = vload16(cv, tile + jj * hp);
            _Pragma("unroll") for (int k = 0; k < AT_R; k++) if (jj >= lo[k] && jj < hi[k]) a[k] +=
                w[k][jj] * x;
        }
        _Pragma("unroll") for (int k = 0; k < AT_R; k++) vstore16(a[k], cv, acc + (r0 + k) * hp);
    }
}

/* This item's (batch, head) and first row for block g of AT_B rows. */
#define AT_BLOCK(g)                                                                                \
    ulong hp = (hd + 15) / 16 * 16, blocks = (seq + AT_B - 1) / AT_B;                              \
    ulong blk, h, bh = udivmod((g), blocks, &blk), i0 = blk * AT_B, b = udivmod(bh, heads, &h)

__kernel void attn_fwd_items(CTENSOR(q), CTENSOR(k), CTENSOR(v), TENSOR(o), FARG(lse_t),
                             ulong batch, ulong heads, ulong seq, ulong hd, ulong ld_q, ulong ld_k,
                             ulong ld_v, ulong ld_o, uint causal, float scale, uint thr,
                             float dscale, ulong seed, ulong offset, __local float *kt,
                             __local float *vr) {
#ifdef AMPX_ITEM_KERNELS
    __global float *lse = F32P(lse_t);
    float qr[AT_B * AT_HMAX], acc[AT_B * AT_HMAX], m[AT_B], l[AT_B];
    ulong groups = batch * heads * ((seq + AT_B - 1) / AT_B);
    for (ulong g = GID; g < groups; g += GSIZE) {
        AT_BLOCK(g);
        AT_ROWS(q, qr, i0, ld_q)
        for (ulong x = 0; x < AT_B * hp; x++)
            acc[x] = 0.0f;
        for (ulong r = 0; r < AT_B; r++)
            m[r] = -INFINITY, l[r] = 0.0f;
        ulong last = causal && i0 + AT_B < seq ? i0 + AT_B : seq; /* keys the block needs */
        for (ulong j0 = 0; j0 < last; j0 += AT_B) {
            AT_STAGE_ITEM(k, kt, 0, j0, ld_k)
            AT_STAGE_ITEM(v, 0, vr, j0, ld_v)
            for (ulong r0 = 0; r0 < AT_B && i0 + r0 < seq; r0 += AT_R) {
                float16 s[2 * AT_R];
                float pp[AT_R][AT_B], alpha[AT_R], lr[AT_R];
                long lo[AT_R], nk[AT_R];
                at_dots_r(qr + r0 * hp, kt, hp, s);
                _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) {
                    ulong i    = i0 + r0 + kk;
                    long lim   = causal && i < seq ? (long)i : (long)seq - 1;
                    float16 s0 = at_mask(s[2 * kk] * scale, (long)j0, lim);
                    float16 s1 = at_mask(s[2 * kk + 1] * scale, (long)j0 + 16, lim);
                    float mx = fmax(at_max16(s0), at_max16(s1)), mo = m[r0 + kk];
                    float mn  = fmax(mo, mx);
                    alpha[kk] = mo == -INFINITY ? 0.0f : exp(mo - mn);
                    lo[kk]    = 0;
                    nk[kk]    = lim - (long)j0 + 1 < AT_B ? lim - (long)j0 + 1 : AT_B;
                    vstore16(exp(s0 - mn), 0, pp[kk]);
                    vstore16(exp(s1 - mn), 0, pp[kk] + 16);
                    lr[kk]     = l[r0 + kk] * alpha[kk];
                    m[r0 + kk] = mn;
                }
                /* the AT_R sums in one loop (each in key order): their additions overlap,
                 * where one row's chain of AT_B dependent additions would wait on each */
                for (long jj = 0; jj < AT_B; jj++)
                    _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) if (jj < nk[kk]) lr[kk] +=
                        pp[kk][jj];
                if (thr) { /* dropout: p times its keep factor after the sum */
                    _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) {
                        ulong row = bh * seq + i0 + r0 + kk;
                        for (long jj = 0; jj < nk[kk]; jj++)
                            pp[kk][jj] *= attn_keep(row, j0 + jj, seq, seed, offset, thr, dscale);
                    }
                }
                _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) l[r0 + kk] = lr[kk];
                at_accumulate(acc, r0, hp, alpha, pp, lo, nk, vr);
            }
        }
        for (ulong r = 0; r < AT_B && i0 + r < seq; r++) {
            float inv = 1.0f / l[r];
            for (ulong c = 0; c < hd; c++)
                ST(o, attn_at(b, i0 + r, h, c, seq, hd, ld_o), acc[r * hp + c] * inv);
            lse[bh * seq + i0 + r] = m[r] + log(l[r]);
        }
    }
#endif
}

__kernel void attn_bwd_dq_items(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(o), CTENSOR(dout),
                                FARG(lse_t), FARG(delta_t), TENSOR(dq), ulong batch, ulong heads,
                                ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v, ulong ld_o,
                                ulong ld_dq, uint causal, float scale, uint thr, float dscale,
                                ulong seed, ulong offset, __local float *kt, __local float *vt,
                                __local float *kr) {
#ifdef AMPX_ITEM_KERNELS
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    float qr[AT_B * AT_HMAX], dor[AT_B * AT_HMAX], acc[AT_B * AT_HMAX], di[AT_B], li[AT_B];
    float one[AT_R] = {1.0f, 1.0f, 1.0f, 1.0f};
    ulong groups    = batch * heads * ((seq + AT_B - 1) / AT_B);
    for (ulong g = GID; g < groups; g += GSIZE) {
        AT_BLOCK(g);
        AT_ROWS(q, qr, i0, ld_q)
        AT_ROWS(dout, dor, i0, ld_o)
        for (ulong r = 0; r < AT_B; r++) {
            ulong i = i0 + r;
            float d = 0.0f;
            if (i < seq)
                for (ulong c = 0; c < hd; c++)
                    d += dor[r * hp + c] * LD(o, attn_at(b, i, h, c, seq, hd, ld_o));
            if (i < seq) delta[bh * seq + i] = d;
            di[r] = d;
            li[r] = i < seq ? lse[bh * seq + i] : 0.0f;
        }
        for (ulong x = 0; x < AT_B * hp; x++)
            acc[x] = 0.0f;
        ulong last = causal && i0 + AT_B < seq ? i0 + AT_B : seq;
        for (ulong j0 = 0; j0 < last; j0 += AT_B) {
            AT_STAGE_ITEM(k, kt, kr, j0, ld_k)
            AT_STAGE_ITEM(v, vt, 0, j0, ld_v)
            for (ulong r0 = 0; r0 < AT_B && i0 + r0 < seq; r0 += AT_R) {
                float16 s[2 * AT_R], d[2 * AT_R];
                float ds[AT_R][AT_B];
                long lo[AT_R], nk[AT_R];
                at_dots_r(qr + r0 * hp, kt, hp, s);
                at_dots_r(dor + r0 * hp, vt, hp, d);
                _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) {
                    ulong i = i0 + r0 + kk, row = bh * seq + i;
                    long lim = causal && i < seq ? (long)i : (long)seq - 1;
                    float pds[AT_B], dps[AT_B];
                    vstore16(exp(s[2 * kk] * scale - li[r0 + kk]), 0, pds);
                    vstore16(exp(s[2 * kk + 1] * scale - li[r0 + kk]), 0, pds + 16);
                    vstore16(d[2 * kk], 0, dps);
                    vstore16(d[2 * kk + 1], 0, dps + 16);
                    lo[kk] = 0;
                    nk[kk] = lim - (long)j0 + 1 < AT_B ? lim - (long)j0 + 1 : AT_B;
                    for (long jj = 0; jj < nk[kk]; jj++) {
                        float keep = attn_keep(row, j0 + jj, seq, seed, offset, thr, dscale);
                        ds[kk][jj] = scale * pds[jj] * (keep * dps[jj] - di[r0 + kk]);
                    }
                }
                at_accumulate(acc, r0, hp, one, ds, lo, nk, kr);
            }
        }
        for (ulong r = 0; r < AT_B && i0 + r < seq; r++)
            for (ulong c = 0; c < hd; c++)
                ST(dq, attn_at(b, i0 + r, h, c, seq, hd, ld_dq), acc[r * hp + c]);
    }
#endif
}

__kernel void attn_bwd_dkv_items(CTENSOR(q), CTENSOR(k), CTENSOR(v), CTENSOR(dout), FARG(lse_t),
                                 FARG(delta_t), TENSOR(dk), TENSOR(dv), ulong batch, ulong heads,
                                 ulong seq, ulong hd, ulong ld_q, ulong ld_k, ulong ld_v,
                                 ulong ld_o, ulong ld_dk, ulong ld_dv, uint causal, float scale,
                                 uint thr, float dscale, ulong seed, ulong offset,
                                 __local float *qt, __local float *dt, __local float *qr_,
                                 __local float *dr) {
#ifdef AMPX_ITEM_KERNELS
    __global float *lse = F32P(lse_t), *delta = F32P(delta_t);
    float kr[AT_B * AT_HMAX], vr[AT_B * AT_HMAX], ak[AT_B * AT_HMAX], av[AT_B * AT_HMAX];
    float lt[AT_B], et[AT_B], one[AT_R] = {1.0f, 1.0f, 1.0f, 1.0f};
    ulong groups = batch * heads * ((seq + AT_B - 1) / AT_B);
    for (ulong g = GID; g < groups; g += GSIZE) {
        AT_BLOCK(g); /* i0 is the block's first key here */
        ulong j0g = i0;
        AT_ROWS(k, kr, j0g, ld_k)
        AT_ROWS(v, vr, j0g, ld_v)
        for (ulong x = 0; x < AT_B * hp; x++)
            ak[x] = av[x] = 0.0f;
        for (ulong q0 = causal ? j0g : 0; q0 < seq; q0 += AT_B) {
            AT_STAGE_ITEM(q, qt, qr_, q0, ld_q)
            AT_STAGE_ITEM(dout, dt, dr, q0, ld_o)
            for (ulong ii = 0; ii < AT_B; ii++) {
                lt[ii] = q0 + ii < seq ? lse[bh * seq + q0 + ii] : 0.0f;
                et[ii] = q0 + ii < seq ? delta[bh * seq + q0 + ii] : 0.0f;
            }
            for (ulong r0 = 0; r0 < AT_B && j0g + r0 < seq; r0 += AT_R) {
                float16 s[2 * AT_R], d[2 * AT_R];
                float pdw[AT_R][AT_B], dsw[AT_R][AT_B];
                long lo[AT_R], hi[AT_R];
                at_dots_r(kr + r0 * hp, qt, hp, s);
                at_dots_r(vr + r0 * hp, dt, hp, d);
                _Pragma("unroll") for (int kk = 0; kk < AT_R; kk++) {
                    ulong j = j0g + r0 + kk;
                    float ps[AT_B], dps[AT_B];
                    vstore16(exp(s[2 * kk] * scale - vload16(0, lt)), 0, ps);
                    vstore16(exp(s[2 * kk + 1] * scale - vload16(0, lt + 16)), 0, ps + 16);
                    vstore16(d[2 * kk], 0, dps);
                    vstore16(d[2 * kk + 1], 0, dps + 16);
                    /* queries q0 + ii with i >= j (causal) and i < seq */
                    lo[kk] = causal && j > q0 ? (long)(j - q0) : 0;
                    hi[kk] = j >= seq ? 0 : seq - q0 < AT_B ? (long)(seq - q0) : AT_B;
                    for (long ii = lo[kk]; ii < hi[kk]; ii++) {
                        ulong qrow  = bh * seq + q0 + ii;
                        float keep  = attn_keep(qrow, j, seq, seed, offset, thr, dscale);
                        pdw[kk][ii] = keep * ps[ii];
                        dsw[kk][ii] = scale * ps[ii] * (keep * dps[ii] - et[ii]);
                    }
                }
                at_accumulate(ak, r0, hp, one, dsw, lo, hi, qr_);
                at_accumulate(av, r0, hp, one, pdw, lo, hi, dr);
            }
        }
        for (ulong r = 0; r < AT_B && j0g + r < seq; r++) {
            for (ulong c = 0; c < hd; c++)
                ST(dk, attn_at(b, j0g + r, h, c, seq, hd, ld_dk), ak[r * hp + c]);
            for (ulong c = 0; c < hd; c++)
                ST(dv, attn_at(b, j0g + r, h, c, seq, hd, ld_dv), av[r * hp + c]);
        }
    }
#endif
}
