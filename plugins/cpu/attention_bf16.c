/* attention_bf16.c — ATTN_FWD / ATTN_BWD on the AVX512-BF16 path when q, k, v (and, in the
 * backward, do) are bf16: every product of the op runs on vdpbf16ps, bf16 pairs multiplied
 * exactly and summed into f32, at twice the rate of the f32 kernel in attention.c (which
 * widens the operands to f32 first). The algorithm is attention.c's (online softmax over key
 * tiles, lse saved, the backward recomputing p tile by tile from lse and delta); what differs
 * is the layout and one rounding.
 *
 * Layout: the scores are formed transposed, S^T = K Q^T (a key tile by a query tile), so that
 * the operand to re-pack is Q, once per work item, rather than every key tile. The softmax
 * then runs down the columns of S^T: sixteen query rows per vector, their running max and sum
 * in vectors too. The products take their left operand as bf16 pairs broadcast from natural
 * rows (K and V as stored, p and ds as computed) and their right operand in pair-interleaved
 * form ("row pairs": element c of rows 2r and 2r+1 in one 32-bit word), built with one
 * zero-extension and one shift per sixteen words.
 *
 * Rounding: the probabilities p (with dropout, p') are rounded to bf16 before P V and
 * P'^T dO, and ds before dS K and dS^T Q, as a composite attention rounds its bf16
 * probabilities and score gradients; lse, the running sums and every accumulator stay f32,
 * and l sums the unrounded p. The ABI allows this rounding for bf16 operands (backend.h,
 * ATTN_FWD) and conformance holds the op to it. bf16 inputs below 2^-126 count as zero and
 * subnormal partial sums are flushed (vdpbf16ps's fixed DAZ/FTZ; see avx512.c). */
#include <math.h>
#include <string.h>

#include "cpu.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#include "avx2_math.h"

#define AB_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))
#define AB_INLINE AB_FN static inline __attribute__((always_inline))

#define AB_BQ 32 /* query rows per tile: the columns of S^T, two vectors */
#define AB_BK 64 /* keys per tile */
#define AB_NB 32 /* head dims padded to a multiple */

typedef struct ab_job {
    ampx_attn_args a;
    uint64_t hdp;  /* head_dim rounded up to AB_NB */
    uint64_t tq;   /* seq rounded up to AB_BQ (backward) */
    uint64_t n_qt; /* query tiles per (batch, head) */
    uint64_t qt0;  /* the first computed: the one holding row q_first */
    ampx_context *ctx;
} ab_job;

// ---------------------------------------------------------------------------------------
// The micro-kernel and the packing

/* A bf16 pair read as one 32-bit word from tiles written as bf16 elements. */
typedef uint32_t ab_pair __attribute__((may_alias));

/* c[i ldc + j] += sum_{p < kp} a[i sa + p sp] . b[p ldb + j] for i < m, j < n (n a multiple
 * of 32), where a and b hold bf16 pairs (the lower half first in the sum's order) and . is
 * the dot product of two pairs. Blocks of eight rows by 32 columns stay in sixteen
 * registers while p runs: two loads of b, eight broadcasts of a, sixteen vdpbf16ps. */
AB_INLINE void ab_mm(uint64_t m, uint64_t n, uint64_t kp, const ab_pair *a, uint64_t sa,
                     uint64_t sp, const uint32_t *b, uint64_t ldb, float *c, uint64_t ldc) {
    for (uint64_t j = 0; j < n; j += 32) {
        uint64_t i = 0;
        for (; i + 8 <= m; i += 8) {
            __m512 x[8][2];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                x[r][0] = _mm512_loadu_ps(c + (i + r) * ldc + j);
                x[r][1] = _mm512_loadu_ps(c + (i + r) * ldc + j + 16);
            }
            const ab_pair *ap = a + i * sa;
            for (uint64_t p = 0; p < kp; p++) {
                __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * ldb + j);
                __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * ldb + j + 16);
#pragma GCC unroll 8
                for (int r = 0; r < 8; r++) {
                    __m512bh ar = (__m512bh)_mm512_set1_epi32((int)ap[r * sa + p * sp]);
                    x[r][0]     = _mm512_dpbf16_ps(x[r][0], ar, b0);
                    x[r][1]     = _mm512_dpbf16_ps(x[r][1], ar, b1);
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                _mm512_storeu_ps(c + (i + r) * ldc + j, x[r][0]);
                _mm512_storeu_ps(c + (i + r) * ldc + j + 16, x[r][1]);
            }
        }
        for (; i < m; i++) {
            __m512 x0 = _mm512_loadu_ps(c + i * ldc + j),
                   x1 = _mm512_loadu_ps(c + i * ldc + j + 16);
            for (uint64_t p = 0; p < kp; p++) {
                __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[i * sa + p * sp]);
                x0 = _mm512_dpbf16_ps(x0, ar, (__m512bh)_mm512_loadu_si512(b + p * ldb + j));
                x1 = _mm512_dpbf16_ps(x1, ar, (__m512bh)_mm512_loadu_si512(b + p * ldb + j + 16));
            }
            _mm512_storeu_ps(c + i * ldc + j, x0);
            _mm512_storeu_ps(c + i * ldc + j + 16, x1);
        }
    }
}

/* One row pair: dst[c] = r0[c] | r1[c] << 16 for c < n, 0 for n <= c < npad (npad a multiple
 * of 16); a NULL row reads as zeros. */
AB_INLINE void ab_pair_rows(const uint16_t *r0, const uint16_t *r1, uint64_t n, uint64_t npad,
                            uint32_t *dst) {
    for (uint64_t c = 0; c < npad; c += 16) {
        __mmask16 m = c >= n ? 0 : cpu_avx512_mask16(n - c);
        __m256i h0  = r0 ? _mm256_maskz_loadu_epi16(m, r0 + c) : _mm256_setzero_si256();
        __m256i h1  = r1 ? _mm256_maskz_loadu_epi16(m, r1 + c) : _mm256_setzero_si256();
        __m512i w   = _mm512_or_si512(_mm512_cvtepu16_epi32(h0),
                                      _mm512_slli_epi32(_mm512_cvtepu16_epi32(h1), 16));
        _mm512_storeu_si512(dst + c, w);
    }
}

/* A bf16 row of n elements into dst, zero up to npad. */
static inline void ab_copy_row(const uint16_t *src, uint64_t n, uint64_t npad, uint16_t *dst) {
    memcpy(dst, src, n * sizeof *dst);
    memset(dst + n, 0, (npad - n) * sizeof *dst);
}

/* Element index of position t, head h of batch b in a [B, T, ld] operand. */
static inline uint64_t ab_at(const ampx_attn_args *a, uint64_t b, uint64_t t, uint64_t h,
                             uint64_t ld) {
    return (b * a->seq + t) * ld + h * a->head_dim;
}

static inline const uint16_t *ab_row(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ld,
                                     uint64_t b, uint64_t t, uint64_t h) {
    return (const uint16_t *)cpu_ptr(x) + ab_at(a, b, t, h, ld);
}

/* Rows [t0, t0 + n) of one head of x transposed by pairs: dst[(c / 2) ld + r] holds elements
 * c and c + 1 (c even) of row t0 + r, which are the row's 32-bit word c / 2 (an odd head_dim's
 * last word keeps only its lower half); dst is zeroed first over hdp / 2 rows of ld words. */
static void ab_pack_transposed(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ldx,
                               uint64_t b, uint64_t h, uint64_t t0, uint64_t n, uint64_t hdp,
                               uint32_t *dst, uint64_t ld) {
    uint64_t hd = a->head_dim, words = hd / 2;
    memset(dst, 0, hdp / 2 * ld * sizeof *dst);
    for (uint64_t r = 0; r < n; r++) {
        const uint16_t *s = ab_row(a, x, ldx, b, t0 + r, h);
        for (uint64_t w = 0; w < words; w++) {
            uint32_t v;
            memcpy(&v, s + 2 * w, sizeof v);
            dst[w * ld + r] = v;
        }
        if (hd & 1) dst[words * ld + r] = s[hd - 1];
    }
}

/* Rows [t0, t0 + n) of one head of x as row pairs: dst[r hdp + c] = x[t0 + 2r][c] |
 * x[t0 + 2r + 1][c] << 16, over npairs pairs (rows past n read as zero). */
AB_INLINE void ab_pack_pairs(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ldx,
                             uint64_t b, uint64_t h, uint64_t t0, uint64_t n, uint64_t npairs,
                             uint64_t hdp, uint32_t *dst) {
    for (uint64_t r = 0; r < npairs; r++) {
        const uint16_t *r0 = 2 * r < n ? ab_row(a, x, ldx, b, t0 + 2 * r, h) : NULL;
        const uint16_t *r1 = 2 * r + 1 < n ? ab_row(a, x, ldx, b, t0 + 2 * r + 1, h) : NULL;
        ab_pair_rows(r0, r1, a->head_dim, hdp, dst + r * hdp);
    }
}

/* The dropout multipliers of query rows [i, i + 16) against key j: dropout_scale where
 * kept, 0 where dropped and for rows past the sequence. */
AB_INLINE __m512 ab_keep(const ampx_attn_args *a, uint64_t bh, uint64_t i, uint64_t j) {
    float k[16] = {0};
    for (uint64_t r = 0; r < 16 && i + r < a->seq; r++) {
        uint64_t e = a->offset + (bh * a->seq + i + r) * a->seq + j;
        k[r]       = ampx_hash32(a->seed, e) >= a->dropout_threshold ? a->dropout_scale : 0.0f;
    }
    return _mm512_loadu_ps(k);
}

/* Lanes r < 16 of query rows i + r that see key j: inside the sequence, and j <= i + r when
 * causal. */
AB_INLINE __mmask16 ab_visible(const ampx_attn_args *a, uint64_t i, uint64_t j) {
    __mmask16 m = i >= a->seq ? 0 : cpu_avx512_mask16(a->seq - i);
    if (a->causal) m &= j <= i ? 0xffff : (j - i >= 16 ? 0 : (__mmask16)(0xffffu << (j - i)));
    return m;
}

/* Sixteen f32 lanes rounded to bf16 (vcvtneps2bf16: subnormals to zero, nearest even). */
AB_INLINE __m256i ab_bf16(__m512 v) {
    return (__m256i)_mm512_cvtneps_pbh(v);
}

// ---------------------------------------------------------------------------------------
// ATTN_FWD: one (batch, head, query tile)

/* The online softmax's step down the columns of one S^T tile (nk keys by AB_BQ queries, row
 * stride AB_BQ): st becomes the tile's p' (exp(scale s - m_new), dropout applied, 0 where
 * masked), m and l move to the new max (alpha: the factor the context rows take), and pp
 * receives p' rounded to bf16 as row pairs over the keys. */
AB_INLINE void ab_fwd_cols(const ab_job *j, uint64_t bh, uint64_t i0, uint64_t j0, uint64_t nk,
                           float *st, float *m, float *l, float *alpha, uint32_t *pp) {
    const ampx_attn_args *a = &j->a;
    const __m512 ninf = _mm512_set1_ps(-INFINITY), scale = _mm512_set1_ps(a->scale);
    for (uint64_t g = 0; g < AB_BQ; g += 16) {
        __m512 mx = ninf;
        for (uint64_t r = 0; r < nk; r++) {
            __mmask16 vis = ab_visible(a, i0 + g, j0 + r);
            __m512 s = _mm512_mask_mul_ps(ninf, vis, _mm512_loadu_ps(st + r * AB_BQ + g), scale);
            _mm512_storeu_ps(st + r * AB_BQ + g, s);
            mx = _mm512_max_ps(mx, s);
        }
        __m512 mold = _mm512_loadu_ps(m + g), mnew = _mm512_max_ps(mold, mx);
        /* rows with nothing visible yet keep m = -inf, and take exp(-inf - 0) = 0 */
        __m512 msafe = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mnew, ninf, _CMP_EQ_OQ), mnew,
                                            _mm512_setzero_ps());
        __m512 al = cpu_avx512_exp_neg_ps(_mm512_sub_ps(mold, msafe)), sum = _mm512_setzero_ps();
        for (uint64_t r = 0; r < nk; r++) {
            __m512 p =
                cpu_avx512_exp_neg_ps(_mm512_sub_ps(_mm512_loadu_ps(st + r * AB_BQ + g), msafe));
            sum = _mm512_add_ps(sum, p);
            if (a->dropout_threshold) p = _mm512_mul_ps(p, ab_keep(a, bh, i0 + g, j0 + r));
            _mm512_storeu_ps(st + r * AB_BQ + g, p);
        }
        _mm512_storeu_ps(l + g, _mm512_fmadd_ps(_mm512_loadu_ps(l + g), al, sum));
        _mm512_storeu_ps(m + g, mnew);
        _mm512_storeu_ps(alpha + g, al);
    }
    for (uint64_t q = 0; 2 * q < nk; q++) {
        uint16_t h[2][AB_BQ];
        for (uint64_t g = 0; g < AB_BQ; g += 16) {
            _mm256_storeu_si256((__m256i *)(h[0] + g),
                                ab_bf16(_mm512_loadu_ps(st + 2 * q * AB_BQ + g)));
            __m256i h1 = 2 * q + 1 < nk ? ab_bf16(_mm512_loadu_ps(st + (2 * q + 1) * AB_BQ + g))
                                        : _mm256_setzero_si256();
            _mm256_storeu_si256((__m256i *)(h[1] + g), h1);
        }
        ab_pair_rows(h[0], h[1], AB_BQ, AB_BQ, pp + q * AB_BQ);
    }
}

AB_FN static void ab_fwd_task(void *arg, uint64_t item, unsigned tid) {
    const ab_job *j         = arg;
    const ampx_attn_args *a = &j->a;
    uint64_t hdp = j->hdp, hd = a->head_dim, tiles = j->n_qt - j->qt0, bh = item / tiles;
    uint64_t b = bh / a->heads, h = bh % a->heads, i0 = (j->qt0 + item % tiles) * AB_BQ;
    uint64_t nq  = a->seq - i0 < AB_BQ ? a->seq - i0 : AB_BQ;
    uint32_t *qt = j->ctx->thread_ws[tid].p, *kr = qt + hdp / 2 * AB_BQ, *vv = kr + AB_BK * hdp / 2;
    uint32_t *pp = vv + AB_BK / 2 * hdp;
    float *st = (float *)(pp + AB_BK / 2 * AB_BQ), *o = st + AB_BK * AB_BQ, *m = o + AB_BQ * hdp;
    float *l = m + AB_BQ, *alpha = l + AB_BQ;
    ab_pack_transposed(a, &a->q, a->ld_q, b, h, i0, nq, hdp, qt, AB_BQ);
    memset(o, 0, AB_BQ * hdp * sizeof *o);
    for (uint64_t r = 0; r < AB_BQ; r++)
        m[r] = -INFINITY, l[r] = 0.0f;
    uint64_t kend = a->causal ? i0 + nq : a->seq;
    for (uint64_t j0 = 0; j0 < kend; j0 += AB_BK) {
        uint64_t nk = kend - j0 < AB_BK ? kend - j0 : AB_BK, np = (nk + 1) / 2;
        for (uint64_t r = 0; r < nk; r++)
            ab_copy_row(ab_row(a, &a->k, a->ld_k, b, j0 + r, h), hd, hdp, (uint16_t *)kr + r * hdp);
        ab_pack_pairs(a, &a->v, a->ld_v, b, h, j0, nk, np, hdp, vv);
        memset(st, 0, nk * AB_BQ * sizeof *st);
        ab_mm(nk, AB_BQ, hdp / 2, kr, hdp / 2, 1, qt, AB_BQ, st, AB_BQ);
        ab_fwd_cols(j, bh, i0, j0, nk, st, m, l, alpha, pp);
        for (uint64_t r = 0; r < nq; r++)
            if (alpha[r] != 1.0f)
                for (uint64_t c = 0; c < hdp; c++)
                    o[r * hdp + c] *= alpha[r];
        ab_mm(nq, hdp, np, pp, 1, AB_BQ, vv, hdp, o, hdp);
    }
    float *lse = (float *)cpu_ptr(&a->lse) + bh * a->seq + i0;
    for (uint64_t r = 0; r < nq; r++) {
        float inv = 1.0f / l[r];
        for (uint64_t c = 0; c < hd; c++)
            o[r * hdp + c] *= inv;
        lse[r] = m[r] + logf(l[r]);
        cpu_store_f32(cpu_ptr(&a->o), a->o.dtype, ab_at(a, b, i0 + r, h, a->ld_o), o + r * hdp, hd);
    }
}

// ---------------------------------------------------------------------------------------
// ATTN_BWD: one (batch, head)

/* The per-(batch, head) operands of the backward, in the thread's workspace. */
typedef struct ab_bwd_ws {
    uint32_t *qt, *dot;    /* q and do transposed by pairs: hdp / 2 rows of tq */
    uint32_t *qv, *dov;    /* q and do as row pairs: tq / 2 rows of hdp */
    uint32_t *kr, *vr;     /* the key tile's k and v rows, bf16: AB_BK rows of hdp / 2 */
    uint32_t *kv;          /* its k as row pairs: AB_BK / 2 rows of hdp */
    uint32_t *pt, *dst;    /* p' and ds of a tile, bf16 rows: AB_BK rows of AB_BQ / 2 */
    uint32_t *dsv;         /* ds as row pairs over the keys: AB_BK / 2 rows of AB_BQ */
    float *dq, *dk, *dv;   /* f32 accumulators: tq rows, AB_BK rows, AB_BK rows of hdp */
    float *st, *dpt;       /* s^T and dp^T of a tile: AB_BK rows of AB_BQ */
    float *lse, *delta;    /* tq each, 0 past seq */
    float *row_o, *row_do; /* hdp each */
} ab_bwd_ws;

static uint64_t ab_bwd_words(uint64_t hdp, uint64_t tq) {
    return 2 * hdp / 2 * tq + 2 * tq / 2 * hdp + 2 * AB_BK * hdp / 2 + AB_BK / 2 * hdp +
           2 * AB_BK * AB_BQ / 2 + AB_BK / 2 * AB_BQ + tq * hdp + 2 * AB_BK * hdp +
           2 * AB_BK * AB_BQ + 2 * tq + 2 * hdp;
}

static ab_bwd_ws ab_bwd_layout(void *p, uint64_t hdp, uint64_t tq) {
    ab_bwd_ws w;
    uint32_t *u = p;
    w.qt        = u, u += hdp / 2 * tq;
    w.dot       = u, u += hdp / 2 * tq;
    w.qv        = u, u += tq / 2 * hdp;
    w.dov       = u, u += tq / 2 * hdp;
    w.kr        = u, u += AB_BK * hdp / 2;
    w.vr        = u, u += AB_BK * hdp / 2;
    w.kv        = u, u += AB_BK / 2 * hdp;
    w.pt        = u, u += AB_BK * AB_BQ / 2;
    w.dst       = u, u += AB_BK * AB_BQ / 2;
    w.dsv       = u, u += AB_BK / 2 * AB_BQ;
    float *f    = (float *)u;
    w.dq        = f, f += tq * hdp;
    w.dk        = f, f += AB_BK * hdp;
    w.dv        = f, f += AB_BK * hdp;
    w.st        = f, f += AB_BK * AB_BQ;
    w.dpt       = f, f += AB_BK * AB_BQ;
    w.lse       = f, f += tq;
    w.delta     = f, f += tq;
    w.row_o     = f, f += hdp;
    w.row_do    = f;
    return w;
}

/* p' and ds of a tile, down its columns: from s^T (st) and dp^T (dpt), p = exp(scale s -
 * lse) (0 where masked), p' = keep p, ds = scale p (keep dp - delta); both rounded to bf16
 * into pt and dst (natural rows), and ds as row pairs over the keys into dsv. */
AB_INLINE void ab_bwd_cols(const ab_job *j, const ab_bwd_ws *w, uint64_t bh, uint64_t i0,
                           uint64_t j0, uint64_t nk) {
    const ampx_attn_args *a = &j->a;
    const __m512 scale      = _mm512_set1_ps(a->scale);
    for (uint64_t r = 0; r < nk; r++)
        for (uint64_t g = 0; g < AB_BQ; g += 16) {
            __mmask16 vis = ab_visible(a, i0 + g, j0 + r);
            __m512 x      = _mm512_fmsub_ps(_mm512_loadu_ps(w->st + r * AB_BQ + g), scale,
                                            _mm512_loadu_ps(w->lse + i0 + g));
            __m512 p      = _mm512_maskz_mov_ps(vis, cpu_avx512_exp_neg_ps(x));
            __m512 dp     = _mm512_loadu_ps(w->dpt + r * AB_BQ + g);
            if (a->dropout_threshold) {
                __m512 keep = ab_keep(a, bh, i0 + g, j0 + r);
                dp          = _mm512_mul_ps(dp, keep);
                _mm256_storeu_si256((__m256i *)((uint16_t *)w->pt + r * AB_BQ + g),
                                    ab_bf16(_mm512_mul_ps(p, keep)));
            } else {
                _mm256_storeu_si256((__m256i *)((uint16_t *)w->pt + r * AB_BQ + g), ab_bf16(p));
            }
            __m512 ds = _mm512_mul_ps(_mm512_mul_ps(scale, p),
                                      _mm512_sub_ps(dp, _mm512_loadu_ps(w->delta + i0 + g)));
            _mm256_storeu_si256((__m256i *)((uint16_t *)w->dst + r * AB_BQ + g), ab_bf16(ds));
        }
    const uint16_t *d16 = (const uint16_t *)w->dst;
    for (uint64_t q = 0; 2 * q < nk; q++)
        ab_pair_rows(d16 + 2 * q * AB_BQ, 2 * q + 1 < nk ? d16 + (2 * q + 1) * AB_BQ : NULL, AB_BQ,
                     AB_BQ, w->dsv + q * AB_BQ);
}

/* Packs q and do, and computes delta_i = do_i . o_i (o as stored, both widened to f32). */
AB_FN static void ab_bwd_setup(const ab_job *j, const ab_bwd_ws *w, uint64_t bh) {
    const ampx_attn_args *a = &j->a;
    uint64_t T = a->seq, tq = j->tq, hdp = j->hdp, b = bh / a->heads, h = bh % a->heads;
    ab_pack_transposed(a, &a->q, a->ld_q, b, h, 0, T, hdp, w->qt, tq);
    ab_pack_transposed(a, &a->d_o, a->ld_o, b, h, 0, T, hdp, w->dot, tq);
    ab_pack_pairs(a, &a->q, a->ld_q, b, h, 0, T, tq / 2, hdp, w->qv);
    ab_pack_pairs(a, &a->d_o, a->ld_o, b, h, 0, T, tq / 2, hdp, w->dov);
    const float *lse = (const float *)cpu_ptr(&a->lse) + bh * T;
    float *delta_out = (float *)cpu_ptr(&a->delta) + bh * T;
    memset(w->lse, 0, 2 * tq * sizeof(float)); /* lse and delta */
    for (uint64_t i = 0; i < T; i++) {
        cpu_load_f32(w->row_o, cpu_ptr(&a->o), a->o.dtype, ab_at(a, b, i, h, a->ld_o), a->head_dim);
        cpu_load_f32(w->row_do, cpu_ptr(&a->d_o), a->d_o.dtype, ab_at(a, b, i, h, a->ld_o),
                     a->head_dim);
        float acc = 0.0f;
        for (uint64_t c = 0; c < a->head_dim; c++)
            acc += w->row_do[c] * w->row_o[c];
        w->delta[i] = delta_out[i] = acc;
        w->lse[i]                  = lse[i];
    }
    memset(w->dq, 0, tq * hdp * sizeof(float));
}

/* Rows [t0, t0 + n) of an f32 tile (row stride hdp) to one head of operand x. */
static void ab_store(const ampx_attn_args *a, const ampx_tensor *x, uint64_t ld, uint64_t b,
                     uint64_t h, uint64_t t0, uint64_t n, const float *src, uint64_t hdp) {
    for (uint64_t r = 0; r < n; r++)
        cpu_store_f32(cpu_ptr(x), x->dtype, ab_at(a, b, t0 + r, h, ld), src + r * hdp, a->head_dim);
}

AB_FN static void ab_bwd_task(void *arg, uint64_t bh, unsigned tid) {
    const ab_job *j         = arg;
    const ampx_attn_args *a = &j->a;
    uint64_t hdp = j->hdp, hd = a->head_dim, T = a->seq, tq = j->tq;
    uint64_t b = bh / a->heads, h = bh % a->heads;
    ab_bwd_ws w = ab_bwd_layout(j->ctx->thread_ws[tid].p, hdp, tq);
    ab_bwd_setup(j, &w, bh);
    for (uint64_t j0 = 0; j0 < T; j0 += AB_BK) {
        uint64_t nk = T - j0 < AB_BK ? T - j0 : AB_BK, np = (nk + 1) / 2;
        for (uint64_t r = 0; r < nk; r++) {
            ab_copy_row(ab_row(a, &a->k, a->ld_k, b, j0 + r, h), hd, hdp,
                        (uint16_t *)w.kr + r * hdp);
            ab_copy_row(ab_row(a, &a->v, a->ld_v, b, j0 + r, h), hd, hdp,
                        (uint16_t *)w.vr + r * hdp);
        }
        ab_pack_pairs(a, &a->k, a->ld_k, b, h, j0, nk, np, hdp, w.kv);
        memset(w.dk, 0, 2 * AB_BK * hdp * sizeof(float)); /* dk, dv */
        for (uint64_t i0 = a->causal ? j0 / AB_BQ * AB_BQ : 0; i0 < T; i0 += AB_BQ) {
            uint64_t nq = T - i0 < AB_BQ ? T - i0 : AB_BQ;
            memset(w.st, 0, 2 * AB_BK * AB_BQ * sizeof(float)); /* st, dpt */
            ab_mm(nk, AB_BQ, hdp / 2, w.kr, hdp / 2, 1, w.qt + i0, tq, w.st, AB_BQ);
            ab_mm(nk, AB_BQ, hdp / 2, w.vr, hdp / 2, 1, w.dot + i0, tq, w.dpt, AB_BQ);
            ab_bwd_cols(j, &w, bh, i0, j0, nk);
            ab_mm(nk, hdp, AB_BQ / 2, w.pt, AB_BQ / 2, 1, w.dov + i0 / 2 * hdp, hdp, w.dv, hdp);
            ab_mm(nk, hdp, AB_BQ / 2, w.dst, AB_BQ / 2, 1, w.qv + i0 / 2 * hdp, hdp, w.dk, hdp);
            ab_mm(nq, hdp, np, w.dsv, 1, AB_BQ, w.kv, hdp, w.dq + i0 * hdp, hdp);
        }
        ab_store(a, &a->dk, a->ld_dk, b, h, j0, nk, w.dk, hdp);
        ab_store(a, &a->dv, a->ld_dv, b, h, j0, nk, w.dv, hdp);
    }
    ab_store(a, &a->dq, a->ld_dq, b, h, 0, T, w.dq, hdp);
}

// ---------------------------------------------------------------------------------------
// Entry points (attention.c calls them once it has taken and checked the arguments)

int cpu_attn_bf16_applies(const ampx_context *ctx, const ampx_attn_args *a, int bwd) {
    return ctx->kern->isa >= CPU_ISA_AVX512BF16 && a->q.dtype == AMPX_BF16 &&
           a->k.dtype == AMPX_BF16 && a->v.dtype == AMPX_BF16 &&
           (!bwd || a->d_o.dtype == AMPX_BF16) && a->seq < (1ull << 31);
}

ampx_status cpu_attn_bf16_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    ab_job j     = {.a = *args, .ctx = ctx};
    j.hdp        = cpu_div_up(j.a.head_dim, AB_NB) * AB_NB;
    j.n_qt       = cpu_div_up(j.a.seq, AB_BQ);
    size_t words = j.hdp / 2 * AB_BQ + AB_BK * j.hdp / 2 + AB_BK / 2 * j.hdp + AB_BK / 2 * AB_BQ +
                   AB_BK * AB_BQ + AB_BQ * j.hdp + 3 * AB_BQ;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "attn_fwd", words * 4));
    j.qt0          = j.a.q_first / AB_BQ < j.n_qt ? j.a.q_first / AB_BQ : j.n_qt - 1;
    uint64_t items = j.a.batch * j.a.heads * (j.n_qt - j.qt0);
    cpu_run(ctx, items * AB_BQ * j.a.seq * j.a.head_dim, items, ab_fwd_task, &j);
    return AMPX_OK;
}

ampx_status cpu_attn_bf16_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    ab_job j = {.a = *args, .ctx = ctx};
    j.hdp    = cpu_div_up(j.a.head_dim, AB_NB) * AB_NB;
    j.tq     = cpu_div_up(j.a.seq, AB_BQ) * AB_BQ;
    uint64_t words;
    if (cpu_mul_u64(j.tq, 4 * j.hdp + 2, &words) || words > SIZE_MAX / 8)
        return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "attn_bwd: seq %llu needs too much workspace",
                        (unsigned long long)j.a.seq);
    CPU_TRY(cpu_reserve_thread_ws(ctx, "attn_bwd", ab_bwd_words(j.hdp, j.tq) * 4));
    uint64_t items = j.a.batch * j.a.heads;
    cpu_run(ctx, items * j.a.seq * j.a.seq * j.a.head_dim, items, ab_bwd_task, &j);
    return AMPX_OK;
}

#else

int cpu_attn_bf16_applies(const ampx_context *ctx, const ampx_attn_args *a, int bwd) {
    (void)ctx, (void)a, (void)bwd;
    return 0;
}

ampx_status cpu_attn_bf16_fwd(ampx_context *ctx, const ampx_attn_args *args) {
    (void)args;
    return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "attn_fwd: no AVX512-BF16 path in this build");
}

ampx_status cpu_attn_bf16_bwd(ampx_context *ctx, const ampx_attn_args *args) {
    (void)args;
    return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "attn_bwd: no AVX512-BF16 path in this build");
}

#endif
