/* attention.c — ATTN_FWD / ATTN_BWD: multi-head attention in one op, FlashAttention-style.
 *
 * q, k, v are read where the QKV projection wrote them ([B, T, 3D] rows, or any row stride)
 * and the context is written where the output projection reads it, so no head split or merge
 * copies exist. Nothing of size T x T is ever formed: the forward walks the keys in tiles of
 * ATTN_BK and keeps, per query row, a running max m and sum l of exp(s - m) in f32 (the
 * online softmax), rescaling the f32 context accumulator by exp(m_old - m_new) when the max
 * grows; it saves lse = m + log l per row. The backward recomputes p = exp(s - lse) tile by
 * tile, so it needs only lse and delta = rowsum(do * o) (the identity
 * sum_j p'_ij dp'_ij = do_i . o_i, which holds with dropout too, as o_i = sum_j p'_ij v_j).
 *
 * Dropout multiplies p by the counter-based mask of DROPOUT on the element index of the
 * [B, H, T, T] probabilities, so the fused op drops exactly what the composite does; the
 * softmax's sum l is of the undropped p.
 *
 * Work items: the forward takes (batch, head, query tile of ATTN_BQ rows); the backward takes
 * (batch, head) and walks the key tiles in order, accumulating dq in a per-thread f32 array,
 * so no two items share an output and the result does not depend on the thread count.
 * Operands are widened to f32 into per-thread tiles; every product runs through one
 * register-blocked micro-kernel (attn_mm) written with GCC vector types and compiled three
 * times: portable, AVX2+FMA and AVX-512 (the vector copies contract multiply-adds into FMA,
 * so their bits differ from the portable copy's within the conformance tolerance). On the
 * AVX512-BF16 path with bf16 operands, attention_bf16.c runs the op on bf16 dot products. */
#include <math.h>
#include <string.h>

#include "cpu.h"

#define ATTN_BQ 32 /* query rows per tile */
#define ATTN_BK 64 /* keys per tile */
#define ATTN_NB 32 /* columns per micro-kernel block: padded head dims are a multiple */

typedef float attn_vec __attribute__((vector_size(64)));
typedef float attn_vec8 __attribute__((vector_size(32)));

typedef struct attn_job {
    ampx_attn_args a;
    uint64_t hdp;  /* head_dim rounded up to ATTN_NB */
    uint64_t n_qt; /* query tiles per (batch, head) */
    uint64_t qt0;  /* the first computed: the one holding row q_first */
    ampx_context *ctx;
} attn_job;

// ---------------------------------------------------------------------------------------
// The micro-kernel and the row helpers (inlined into each ISA copy)

/* The micro-kernel's body for one vector type V of W floats: c[i ldc + j] += sum_{p < k}
 * a[i sa + p sp] b[p ldb + j] for i < m, j < n, in blocks of four rows by 2W columns that stay
 * in registers while p runs (eight accumulators, two rows of b, one broadcast); a is
 * broadcast, so a may be read transposed. Each element of c sums over p in order, whatever
 * W, so both widths give the same bits. */
#define ATTN_MM_BODY(V, W)                                                                         \
    for (uint64_t j = 0; j < n; j += 2 * (W)) {                                                    \
        uint64_t i = 0;                                                                            \
        for (; i + 4 <= m; i += 4) {                                                               \
            V *c0 = (V *)(c + i * ldc + j), *c1 = (V *)(c + (i + 1) * ldc + j);                    \
            V *c2 = (V *)(c + (i + 2) * ldc + j), *c3 = (V *)(c + (i + 3) * ldc + j);              \
            V x00 = c0[0], x01 = c0[1], x10 = c1[0], x11 = c1[1];                                  \
            V x20 = c2[0], x21 = c2[1], x30 = c3[0], x31 = c3[1];                                  \
            const float *ap = a + i * sa;                                                          \
            for (uint64_t p = 0; p < k; p++) {                                                     \
                const V *bp = (const V *)(b + p * ldb + j);                                        \
                V b0 = bp[0], b1 = bp[1];                                                          \
                float a0 = ap[p * sp], a1 = ap[sa + p * sp], a2 = ap[2 * sa + p * sp];             \
                float a3 = ap[3 * sa + p * sp];                                                    \
                x00 += a0 * b0, x01 += a0 * b1, x10 += a1 * b0, x11 += a1 * b1;                    \
                x20 += a2 * b0, x21 += a2 * b1, x30 += a3 * b0, x31 += a3 * b1;                    \
            }                                                                                      \
            c0[0] = x00, c0[1] = x01, c1[0] = x10, c1[1] = x11;                                    \
            c2[0] = x20, c2[1] = x21, c3[0] = x30, c3[1] = x31;                                    \
        }                                                                                          \
        for (; i < m; i++) {                                                                       \
            V *c0 = (V *)(c + i * ldc + j);                                                        \
            V x0 = c0[0], x1 = c0[1];                                                              \
            for (uint64_t p = 0; p < k; p++) {                                                     \
                const V *bp = (const V *)(b + p * ldb + j);                                        \
                float a0    = a[i * sa + p * sp];                                                  \
                x0 += a0 * bp[0], x1 += a0 * bp[1];                                                \
            }                                                                                      \
            c0[0] = x0, c0[1] = x1;                                                                \
        }                                                                                          \
    }

/* c += a b as above, n a multiple of ATTN_NB, b and c 64-byte aligned with ldb and ldc
 * multiples of 16. 64-byte vectors on the AVX-512 paths; 32-byte ones elsewhere, where GCC
 * would split each 64-byte vector in two and the sixteen accumulators would spill. */
CPU_INLINE void attn_mm(uint64_t m, uint64_t n, uint64_t k, const float *a, uint64_t sa,
                        uint64_t sp, const float *b, uint64_t ldb, float *c, uint64_t ldc) {
    if (cpu_tls_kern->isa >= CPU_ISA_AVX512) {
        ATTN_MM_BODY(attn_vec, 16)
    } else {
        ATTN_MM_BODY(attn_vec8, 8)
    }
}

/* exp(x) for x <= 0 (or -inf) in place: Cephes' expf (k = round(x log2 e) by the 1.5 2^23
 * trick, r = x - k ln 2 in two parts, a degree-5 polynomial, 2^k in the exponent bits),
 * written so the loop vectorises. Below -87.33654 (and -inf) it gives 0. */
CPU_INLINE void attn_exp_neg(float *x, uint64_t n) {
    for (uint64_t j = 0; j < n; j++) {
        float v    = x[j] < -87.33654f ? -87.33654f : x[j];
        float fx   = v * 1.44269504088896341f + 12582912.0f;
        float kf   = fx - 12582912.0f;
        uint32_t e = (ampx_f32_bits(fx) - 0x4b400000u + 127u) << 23;
        float r    = v - kf * 0.693359375f - kf * -2.12194440e-4f;
        float p    = 1.9875691500E-4f;
        p          = p * r + 1.3981999507E-3f;
        p          = p * r + 8.3334519073E-3f;
        p          = p * r + 4.1665795894E-2f;
        p          = p * r + 1.6666665459E-1f;
        p          = p * r + 5.0000001201E-1f;
        float y    = (p * r * r + r + 1.0f) * ampx_f32_from_bits(e);
        x[j]       = x[j] < -87.33654f ? 0.0f : y;
    }
}

/* The dropout multiplier of keys [j0, j0 + n) of query row `row` (its index in [B H T]):
 * dropout_scale where kept, 0 where dropped. */
CPU_INLINE void attn_keep(const ampx_attn_args *a, uint64_t row, uint64_t j0, uint64_t n,
                          float *keep) {
    uint64_t e0 = a->offset + row * a->seq + j0;
    for (uint64_t j = 0; j < n; j++)
        keep[j] = ampx_hash32(a->seed, e0 + j) >= a->dropout_threshold ? a->dropout_scale : 0.0f;
}

/* Element index of position t, head h of batch b in a [B, T, ld] operand. */
static inline uint64_t attn_at(const ampx_attn_args *a, uint64_t b, uint64_t t, uint64_t h,
                               uint64_t ld) {
    return (b * a->seq + t) * ld + h * a->head_dim;
}

/* Rows [t0, t0 + n) of one head of operand x, widened to f32 into dst (row stride ld_dst,
 * columns past head_dim zero), or transposed into dst[c ld_dst + r] when `trans`. */
CPU_INLINE void attn_load(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ld, uint64_t b,
                          uint64_t h, uint64_t t0, uint64_t n, float *dst, uint64_t ld_dst,
                          int trans, float *row) {
    uint64_t hd = a->head_dim;
    for (uint64_t r = 0; r < n; r++) {
        float *d = trans ? row : dst + r * ld_dst;
        cpu_load_f32(d, cpu_ptr(x), x->dtype, attn_at(a, b, t0 + r, h, ld), hd);
        if (trans)
            for (uint64_t c = 0; c < hd; c++)
                dst[c * ld_dst + r] = d[c];
    }
}

// ---------------------------------------------------------------------------------------
// ATTN_FWD: one (batch, head, query tile)

/* One query row's step of the online softmax over a tile of keys: s (ATTN_BK scores of q.k)
 * becomes the tile's probabilities exp(scale s - m_new) (dropout applied), and m, l and the
 * context row are rescaled to the new max. Keys past nk and, when causal, past the row's
 * own position are masked. */
CPU_INLINE void attn_fwd_row(const attn_job *j, uint64_t row, uint64_t i, uint64_t j0, uint64_t nk,
                             float *s, float *m, float *l, float *o, float *keep) {
    const ampx_attn_args *a = &j->a;
    uint64_t vis            = nk;
    if (a->causal) vis = i < j0 ? 0 : (i - j0 + 1 < nk ? i - j0 + 1 : nk);
    float mx = -INFINITY;
    for (uint64_t c = 0; c < vis; c++) {
        s[c] *= a->scale;
        mx = s[c] > mx ? s[c] : mx;
    }
    if (vis == 0 || mx == -INFINITY) { /* nothing visible here: the tile adds nothing */
        memset(s, 0, ATTN_BK * sizeof *s);
        return;
    }
    float mnew  = mx > *m ? mx : *m;
    float alpha = *m == -INFINITY ? 0.0f : expf(*m - mnew);
    for (uint64_t c = 0; c < vis; c++)
        s[c] -= mnew;
    attn_exp_neg(s, vis);
    memset(s + vis, 0, (ATTN_BK - vis) * sizeof *s);
    float sum = 0.0f;
    for (uint64_t c = 0; c < vis; c++)
        sum += s[c];
    *l = *l * alpha + sum;
    *m = mnew;
    if (alpha != 1.0f)
        for (uint64_t c = 0; c < j->hdp; c++)
            o[c] *= alpha;
    if (a->dropout_threshold) {
        attn_keep(a, row, j0, vis, keep);
        for (uint64_t c = 0; c < vis; c++)
            s[c] *= keep[c];
    }
}

CPU_INLINE void attn_fwd_body(void *arg, uint64_t item, unsigned tid) {
    const attn_job *j       = arg;
    const ampx_attn_args *a = &j->a;
    uint64_t hdp = j->hdp, tiles = j->n_qt - j->qt0, bh = item / tiles;
    uint64_t qt = j->qt0 + item % tiles;
    uint64_t b = bh / a->heads, h = bh % a->heads, i0 = qt * ATTN_BQ;
    uint64_t nq = a->seq - i0 < ATTN_BQ ? a->seq - i0 : ATTN_BQ;
    float *q = j->ctx->thread_ws[tid].p, *kt = q + ATTN_BQ * hdp, *v = kt + hdp * ATTN_BK;
    float *s = v + ATTN_BK * hdp, *o = s + ATTN_BQ * ATTN_BK, *m = o + ATTN_BQ * hdp;
    float *l = m + ATTN_BQ, *row = l + ATTN_BQ, *keep = row + hdp + ATTN_BK;
    memset(q, 0, ATTN_BQ * hdp * sizeof *q);
    memset(kt, 0, hdp * ATTN_BK * sizeof *kt);
    memset(v, 0, ATTN_BK * hdp * sizeof *v);
    memset(o, 0, ATTN_BQ * hdp * sizeof *o);
    for (uint64_t r = 0; r < ATTN_BQ; r++)
        m[r] = -INFINITY, l[r] = 0.0f;
    attn_load(a, &a->q, a->ld_q, b, h, i0, nq, q, hdp, 0, row);
    uint64_t kend = a->causal ? i0 + nq : a->seq;
    for (uint64_t j0 = 0; j0 < kend; j0 += ATTN_BK) {
        uint64_t nk = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
        if (nk < ATTN_BK) { /* a partial tile: the rows and columns past nk read as 0 */
            memset(kt, 0, hdp * ATTN_BK * sizeof *kt);
            memset(v, 0, ATTN_BK * hdp * sizeof *v);
        }
        attn_load(a, &a->k, a->ld_k, b, h, j0, nk, kt, ATTN_BK, 1, row);
        attn_load(a, &a->v, a->ld_v, b, h, j0, nk, v, hdp, 0, row);
        memset(s, 0, ATTN_BQ * ATTN_BK * sizeof *s);
        attn_mm(nq, ATTN_BK, a->head_dim, q, hdp, 1, kt, ATTN_BK, s, ATTN_BK);
        for (uint64_t r = 0; r < nq; r++)
            attn_fwd_row(j, bh * a->seq + i0 + r, i0 + r, j0, nk, s + r * ATTN_BK, m + r, l + r,
                         o + r * hdp, keep);
        attn_mm(nq, hdp, nk, s, ATTN_BK, 1, v, hdp, o, hdp);
    }
    float *lse = (float *)cpu_ptr(&a->lse) + bh * a->seq + i0;
    for (uint64_t r = 0; r < nq; r++) {
        float inv = 1.0f / l[r];
        for (uint64_t c = 0; c < a->head_dim; c++)
            o[r * hdp + c] *= inv;
        lse[r] = m[r] + logf(l[r]);
        cpu_store_f32(cpu_ptr(&a->o), a->o.dtype, attn_at(a, b, i0 + r, h, a->ld_o), o + r * hdp,
                      a->head_dim);
    }
}

// ---------------------------------------------------------------------------------------
// ATTN_BWD: one (batch, head)

/* p, p' and ds of one query row against a key tile, in place of s (scores q.k) and dp
 * (do.v): s becomes p' = keep p (dv's weights) and dp becomes ds = scale p (keep dp - delta),
 * zero where masked. */
CPU_INLINE void attn_bwd_row(const attn_job *j, uint64_t row, uint64_t i, uint64_t j0, uint64_t nk,
                             float lse, float delta, float *s, float *dp, float *keep) {
    const ampx_attn_args *a = &j->a;
    uint64_t vis            = nk;
    if (a->causal) vis = i < j0 ? 0 : (i - j0 + 1 < nk ? i - j0 + 1 : nk);
    for (uint64_t c = 0; c < vis; c++)
        s[c] = s[c] * a->scale - lse;
    attn_exp_neg(s, vis);
    memset(s + vis, 0, (ATTN_BK - vis) * sizeof *s);
    memset(dp + vis, 0, (ATTN_BK - vis) * sizeof *dp);
    if (a->dropout_threshold) {
        attn_keep(a, row, j0, vis, keep);
        for (uint64_t c = 0; c < vis; c++) {
            dp[c] = a->scale * s[c] * (keep[c] * dp[c] - delta);
            s[c] *= keep[c];
        }
    } else {
        for (uint64_t c = 0; c < vis; c++)
            dp[c] = a->scale * s[c] * (dp[c] - delta);
    }
}

/* Stores rows [t0, t0 + n) of an f32 tile (row stride hdp) to one head of operand x. */
CPU_INLINE void attn_store(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ld, uint64_t b,
                           uint64_t h, uint64_t t0, uint64_t n, const float *src, uint64_t hdp) {
    for (uint64_t r = 0; r < n; r++)
        cpu_store_f32(cpu_ptr(x), x->dtype, attn_at(a, b, t0 + r, h, ld), src + r * hdp,
                      a->head_dim);
}

CPU_INLINE void attn_bwd_body(void *arg, uint64_t bh, unsigned tid) {
    const attn_job *j       = arg;
    const ampx_attn_args *a = &j->a;
    uint64_t hdp = j->hdp, T = a->seq, b = bh / a->heads, h = bh % a->heads;
    float *q = j->ctx->thread_ws[tid].p, *dO = q + T * hdp, *dq = dO + T * hdp;
    float *kr = dq + T * hdp, *kt = kr + ATTN_BK * hdp, *vt = kt + hdp * ATTN_BK;
    float *dk = vt + hdp * ATTN_BK, *dv = dk + ATTN_BK * hdp, *s = dv + ATTN_BK * hdp;
    float *dp = s + ATTN_BQ * ATTN_BK, *delta = dp + ATTN_BQ * ATTN_BK, *row = delta + T;
    float *keep = row + hdp + ATTN_BK;
    memset(q, 0, 3 * T * hdp * sizeof *q);
    attn_load(a, &a->q, a->ld_q, b, h, 0, T, q, hdp, 0, row);
    attn_load(a, &a->d_o, a->ld_o, b, h, 0, T, dO, hdp, 0, row);
    const float *lse = (const float *)cpu_ptr(&a->lse) + bh * T;
    float *delta_out = (float *)cpu_ptr(&a->delta) + bh * T;
    for (uint64_t i = 0; i < T; i++) { /* delta_i = do_i . o_i, o as stored */
        cpu_load_f32(row, cpu_ptr(&a->o), a->o.dtype, attn_at(a, b, i, h, a->ld_o), a->head_dim);
        float acc = 0.0f;
        for (uint64_t c = 0; c < a->head_dim; c++)
            acc += dO[i * hdp + c] * row[c];
        delta[i] = delta_out[i] = acc;
    }
    for (uint64_t j0 = 0; j0 < T; j0 += ATTN_BK) {
        uint64_t nk = T - j0 < ATTN_BK ? T - j0 : ATTN_BK;
        memset(kr, 0, 5 * ATTN_BK * hdp * sizeof *kr); /* kr, kt, vt, dk, dv */
        attn_load(a, &a->k, a->ld_k, b, h, j0, nk, kr, hdp, 0, row);
        attn_load(a, &a->k, a->ld_k, b, h, j0, nk, kt, ATTN_BK, 1, row);
        attn_load(a, &a->v, a->ld_v, b, h, j0, nk, vt, ATTN_BK, 1, row);
        for (uint64_t i0 = a->causal ? j0 / ATTN_BQ * ATTN_BQ : 0; i0 < T; i0 += ATTN_BQ) {
            uint64_t nq = T - i0 < ATTN_BQ ? T - i0 : ATTN_BQ;
            memset(s, 0, 2 * ATTN_BQ * ATTN_BK * sizeof *s);
            attn_mm(nq, ATTN_BK, a->head_dim, q + i0 * hdp, hdp, 1, kt, ATTN_BK, s, ATTN_BK);
            attn_mm(nq, ATTN_BK, a->head_dim, dO + i0 * hdp, hdp, 1, vt, ATTN_BK, dp, ATTN_BK);
            for (uint64_t r = 0; r < nq; r++)
                attn_bwd_row(j, bh * T + i0 + r, i0 + r, j0, nk, lse[i0 + r], delta[i0 + r],
                             s + r * ATTN_BK, dp + r * ATTN_BK, keep);
            attn_mm(nk, hdp, nq, s, 1, ATTN_BK, dO + i0 * hdp, hdp, dv, hdp);
            attn_mm(nk, hdp, nq, dp, 1, ATTN_BK, q + i0 * hdp, hdp, dk, hdp);
            attn_mm(nq, hdp, nk, dp, ATTN_BK, 1, kr, hdp, dq + i0 * hdp, hdp);
        }
        attn_store(a, &a->dk, a->ld_dk, b, h, j0, nk, dk, hdp);
        attn_store(a, &a->dv, a->ld_dv, b, h, j0, nk, dv, hdp);
    }
    attn_store(a, &a->dq, a->ld_dq, b, h, 0, T, dq, hdp);
}

// ---------------------------------------------------------------------------------------
// The three copies of each body and the entry points

#if CPU_HAVE_AVX2_TABLE
#define ATTN_TASK(name, body)                                                                      \
    static void name##_portable(void *arg, uint64_t item, unsigned tid) {                          \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    __attribute__((target("avx2,fma,f16c"),                                                        \
                   optimize("O3", "fp-contract=fast"))) static void name##_avx2(void *arg,         \
                                                                                uint64_t item,     \
                                                                                unsigned tid) {    \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma,f16c,"                      \
                          "prefer-vector-width=512"),                                              \
                   optimize("O3", "fp-contract=fast"))) static void name##_avx512(void *arg,       \
                                                                                  uint64_t item,   \
                                                                                  unsigned tid) {  \
        body(arg, item, tid);                                                                      \
    }                                                                                              \
    static void name(void *arg, uint64_t item, unsigned tid) {                                     \
        if (cpu_tls_kern->isa >= CPU_ISA_AVX512)                                                   \
            name##_avx512(arg, item, tid);                                                         \
        else if (cpu_tls_kern->isa >= CPU_ISA_AVX2)                                                \
            name##_avx2(arg, item, tid);                                                           \
        else                                                                                       \
            name##_portable(arg, item, tid);                                                       \
    }
#else
#define ATTN_TASK(name, body) CPU_ISA_CHUNK(name, body)
#endif

ATTN_TASK(attn_fwd_task, attn_fwd_body)
ATTN_TASK(attn_bwd_task, attn_bwd_body)

static uint64_t attn_hdp(uint64_t hd) {
    return cpu_div_up(hd, ATTN_NB) * ATTN_NB;
}

/* The op as supports() says: refused where the plugin does not claim it (option attention). */
static ampx_status attn_claimed(ampx_context *ctx, const char *op) {
    if (!ctx || ctx->attention) return AMPX_OK;
    return ampx_kit_fail(AMPX_KIT(ctx), AMPX_ERR_UNSUPPORTED,
                         "cpu: %s: not claimed on isa=%s (the composite is faster there; "
                         "attention=1 runs the fused kernel)",
                         op, ctx->kern->name);
}

ampx_status cpu_attn_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    attn_job j = {.ctx = ctx};
    CPU_TRY(attn_claimed(ctx, "attn_fwd"));
    CPU_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &j.a, 0));
    if (j.a.batch == 0) return AMPX_OK;
    if (cpu_attn_bf16_applies(ctx, &j.a, 0)) return cpu_attn_bf16_fwd(ctx, &j.a);
    j.hdp         = attn_hdp(j.a.head_dim);
    j.n_qt        = cpu_div_up(j.a.seq, ATTN_BQ);
    size_t floats = 2 * ATTN_BQ * j.hdp + 2 * j.hdp * ATTN_BK + ATTN_BQ * ATTN_BK + 2 * ATTN_BQ +
                    2 * (j.hdp + ATTN_BK);
    CPU_TRY(cpu_reserve_thread_ws(ctx, "attn_fwd", floats * sizeof(float)));
    /* the tiles from the one holding row q_first (its rows before it come out the same) */
    j.qt0          = j.a.q_first / ATTN_BQ < j.n_qt ? j.a.q_first / ATTN_BQ : j.n_qt - 1;
    uint64_t items = j.a.batch * j.a.heads * (j.n_qt - j.qt0);
    cpu_run(ctx, items * ATTN_BQ * j.a.seq * j.a.head_dim, items, attn_fwd_task, &j);
    return AMPX_OK;
}

ampx_status cpu_attn_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    attn_job j = {.ctx = ctx};
    CPU_TRY(attn_claimed(ctx, "attn_bwd"));
    CPU_TRY(ampx_kit_take_attn(AMPX_KIT(ctx), args, &j.a, 1));
    if (j.a.batch == 0) return AMPX_OK;
    if (cpu_attn_bf16_applies(ctx, &j.a, 1)) return cpu_attn_bf16_bwd(ctx, &j.a);
    j.hdp      = attn_hdp(j.a.head_dim);
    uint64_t T = j.a.seq;
    uint64_t floats;
    if (cpu_mul_u64(T, 3 * j.hdp + 1, &floats) ||
        __builtin_add_overflow(
            floats, 5 * ATTN_BK * j.hdp + 2 * ATTN_BQ * ATTN_BK + 2 * (j.hdp + ATTN_BK), &floats) ||
        floats > SIZE_MAX / sizeof(float))
        return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "attn_bwd: seq %llu needs too much workspace",
                        (unsigned long long)T);
    CPU_TRY(cpu_reserve_thread_ws(ctx, "attn_bwd", (size_t)floats * sizeof(float)));
    uint64_t items = j.a.batch * j.a.heads;
    cpu_run(ctx, items * T * T * j.a.head_dim, items, attn_bwd_task, &j);
    return AMPX_OK;
}
