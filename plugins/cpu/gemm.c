/* gemm.c — batched, strided GEMM: C_b = alpha * op(A_b) * op(B_b) + beta * C_b.
 *
 * Cache-blocked in the Goto style: C is cut into MC x NC tiles (the unit of parallel work,
 * over tiles and batches); for each KC-deep slice of k, an MC x KC panel of op(A) and a
 * KC x NC panel of op(B) are packed into per-thread f32 workspace (bf16 and f16 widen
 * exactly, transposes are resolved while packing), and the ISA micro-kernel accumulates
 * their product into an f32 tile. Only after the whole k range is the tile combined with
 * C: v = alpha * acc + beta * c in f32, rounded once to C's dtype. With beta == 0, C is
 * never read, so NaN poison in C cannot leak into the result.
 */
#include <string.h>

#include "cpu.h"
#include "gemm_epilogue.h"

#if CPU_HAVE_AVX2_TABLE
#include <immintrin.h>

#include "avx2_math.h" /* cpu_avx2_ld8: eight elements widened exactly to f32 */
#endif

#define GEMM_MC 64
#define GEMM_NC 256
#define GEMM_KC 256
/* The deepest k block of the shared packs (gemm_sliver): one micro-kernel call sums up to
 * this many k products in registers. Each k block costs a round trip of the accumulator
 * block through the tile's workspace and the kernel's start and end; with GEMM_KC blocks
 * that cost 2048^3 and 4096^3 about 4% (434 -> 453 and 432 -> 447 GFLOP/s, 2 threads,
 * alternated; docs/CPU.md). The packs are the same size either way, and a sliver of 4096 k
 * streams from L2 and L3 at the kernel's pace. */
#ifndef GEMM_KC_DEEP
#define GEMM_KC_DEEP 4096
#endif
/* The widest C tile any table uses (cpu_kernels.nc). */
#define GEMM_NC_MAX 256

/* GEMM runs on the pool from 128^3 multiply-adds on (32 x CPU_PAR_MIN): below, one thread
 * at the AVX-512 kernel's 250+ GFLOP/s needs under 16 us, which the pool's wake-up (a
 * condition variable) and the uneven split of so few tiles eat up; measured at 64x128x128
 * (1M multiply-adds): 13 us on one thread, 21 us on two (loaded machine). */
#define GEMM_PAR_MIN (128u * 128u * 128u)
#define GEMM_PAR_SCALE (GEMM_PAR_MIN / CPU_PAR_MIN)
_Static_assert(GEMM_PAR_MIN % CPU_PAR_MIN == 0, "GEMM_PAR_MIN must be a multiple of CPU_PAR_MIN");

// ---------------------------------------------------------------------------------------
// Driver

typedef struct gemm_job {
    ampx_gemm_args a;
    const cpu_kernels *kern;
    const void *A, *B;
    void *C;
    uint64_t tiles_m, tiles_n;
    uint64_t batch0; /* first batch of this launch */
    ampx_context *ctx;
    cpu_gemm_epi epi; /* bias, pre_act, activation (gemm_epilogue.c) */
} gemm_job;

/* op(X)[r0 .. r0+nr) x [c0 .. c0+nc) -> dst (nr x nc, row-major f32), for X = A or B of one
 * batch: X starts at element base with leading dimension ld; with trans, X is stored
 * transposed (op(X)[r][c] = X[c][r]). */
static void pack_panel(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld, int trans,
                       uint64_t r0, uint64_t nr, uint64_t c0, uint64_t nc, float *dst) {
    if (!trans) {
        for (uint64_t r = 0; r < nr; r++)
            cpu_load_f32(dst + r * nc, X, dt, base + (r0 + r) * ld + c0, nc);
    } else {
        for (uint64_t c = 0; c < nc; c++) {
            uint64_t row = base + (c0 + c) * ld + r0;
            for (uint64_t r = 0; r < nr; r++)
                dst[r * nc + c] = cpu_ld(X, dt, row + r);
        }
    }
}

/* One row of C's tile where beta is not 0: r = alpha * r + beta * C (C's n elements at off,
 * through buf) in f32; returns the factor left for cpu_gemm_epi_store to apply to r: alpha
 * when beta is 0 (r untouched), else 1, whose product is exact (the same bits). */
static float gemm_row_alpha(const ampx_gemm_args *g, float *r, float *buf, const void *C,
                            uint64_t off, uint64_t n) {
    if (g->beta == 0.0f) return g->alpha;
    cpu_load_f32(buf, C, g->c.dtype, off, n);
    for (uint64_t jj = 0; jj < n; jj++)
        r[jj] = g->alpha * r[jj] + g->beta * buf[jj];
    return 1.0f;
}

static void gemm_tile_task(void *arg, uint64_t item, unsigned tid) {
    const gemm_job *j       = arg;
    const ampx_gemm_args *g = &j->a;
    uint64_t b              = j->batch0 + item / (j->tiles_m * j->tiles_n);
    uint64_t t              = item % (j->tiles_m * j->tiles_n);
    uint64_t i0             = (t / j->tiles_n) * GEMM_MC;
    uint64_t j0             = (t % j->tiles_n) * GEMM_NC;
    uint64_t mc             = g->m - i0 < GEMM_MC ? g->m - i0 : GEMM_MC;
    uint64_t nc             = g->n - j0 < GEMM_NC ? g->n - j0 : GEMM_NC;

    float *acc = j->ctx->thread_ws[tid].p;
    float *pa  = acc + GEMM_MC * GEMM_NC;
    float *pb  = pa + GEMM_MC * GEMM_KC;
    memset(acc, 0, sizeof(float) * GEMM_MC * GEMM_NC);
    for (uint64_t p0 = 0; p0 < g->k; p0 += GEMM_KC) {
        uint64_t kc = g->k - p0 < GEMM_KC ? g->k - p0 : GEMM_KC;
        pack_panel(j->A, g->a.dtype, b * g->stride_a, g->lda, g->trans_a, i0, mc, p0, kc, pa);
        pack_panel(j->B, g->b.dtype, b * g->stride_b, g->ldb, g->trans_b, p0, kc, j0, nc, pb);
        j->kern->gemm_tile(mc, nc, kc, pa, pb, acc, GEMM_NC);
    }

    /* C = alpha * acc + beta * C in f32, one rounding to C's dtype. */
    float crow[GEMM_NC];
    uint64_t cbase = b * g->stride_c;
    for (uint64_t i = 0; i < mc; i++) {
        float *r     = acc + i * GEMM_NC;
        uint64_t off = cbase + (i0 + i) * g->ldc + j0;
        cpu_gemm_epi_store(&j->epi, r, gemm_row_alpha(g, r, crow, j->C, off, nc), j->C, g->c.dtype,
                           off, j0, nc);
    }
}

// ---------------------------------------------------------------------------------------
// Sliver driver (tables with a gemm_micro: AVX2 and up)
//
// op(A) of one batch is packed once into mr-row slivers and op(B) into nr-column slivers,
// both cut into k blocks (kcb deep: gemm_set_kblock) and widened to f32 (bf16 and f16
// exactly). Slivers of block p0 start at p0 * mpad (A) and p0 * npad (B), sliver s of the
// block at s * mr * kc. When both operands are bf16 and the table has a gemm_micro_bf16, the
// packs keep the raw bf16 bits instead, two consecutive k per 32-bit slot (k = 2q high,
// 2q+1 low; cpu.h): the same offsets in 32-bit slots, each block filling the first half of
// its space. Blocks are an even depth, so a pair never straddles two blocks; only the last
// pair of an odd k pads a zero. The shared packs use blocks of up to GEMM_KC_DEEP, the
// per-tile and per-batch packs blocks of GEMM_KC (their blocks live in L2).
// Then each C tile (at most the table's mc x nc, the slivers shared out evenly, more tiles
// when that gives every thread the same work) runs the whole k range, block after block, in
// a per-thread f32 accumulator; on the last block the micro-kernels write whole blocks of C
// themselves (alpha * acc + beta * C, rounded once) and only the tile's partial edge blocks
// go through the accumulator. When C is one row of tiles, each tile packs its own B block
// of each k block into its thread's workspace just before using it (no other tile reads
// it); one column of tiles does the same with op(A). The packs the tiles share are made by
// the tiles that need them, the first time they do (sliver_shared_task, kblock_ready), not
// in a pass over the operands before the arithmetic. A narrow
// C (n far below nr) is computed transposed (gemm_narrow). Each element's k products are
// summed in order 0 .. k-1 whatever the tiling, the thread count or whether the batch was
// packed by one thread or by all. docs/CPU.md describes the design and its measurements.

_Static_assert(GEMM_KC % 2 == 0 && GEMM_KC_DEEP % 2 == 0, "bf16 pairs must not straddle k blocks");

typedef struct sliver_job {
    ampx_gemm_args a;
    const cpu_kernels *kern;
    const void *A, *B;
    void *C;
    ampx_context *ctx;
    uint64_t mc_max, nc_max; /* the largest C tile of one item (the accumulator's size) */
    uint64_t ldacc;          /* the accumulator's row stride (nc_max) */
    uint64_t mpad, npad;     /* m and n rounded up to mr and nr */
    uint64_t slv_a, slv_b;   /* slivers of op(A) and op(B) */
    uint64_t tiles_m, tiles_n;
    uint64_t batch; /* the batch of a shared-pack launch */
    uint64_t kcb;   /* the k block: of the packs' layout and of one micro-kernel call */
    int pairs;      /* bf16 k-pair packs and gemm_micro_bf16 */
    int b_inner;    /* each tile packs its own B block per k block (one row of tiles) */
    int a_inner;    /* each tile packs its own A block per k block (one column of tiles) */
    int c_trans;    /* the product computed is C^T (narrow n: cpu_gemm swapped the operands) */
    int c_fused;    /* the micro-kernels write whole blocks of C (f32, not transposed) */
    float *pa, *pb; /* shared packs (one batch), or NULL: per-thread */
    /* shared packs, packed by the tiles that read them: per panel 0 not packed, 1 being
     * packed, 2 packed. Several rows and columns of tiles: tiles_m panels of op(A), then
     * tiles_n of op(B), every k block; one row (column) of tiles: one panel per k block of
     * op(A) (op(B)), all of its slivers */
    _Atomic int *panel;
    cpu_gemm_epi epi; /* bias, pre_act, activation: applied in tile_epilogue, so c_fused is 0 */
} sliver_job;

#include "gemm_pack.h"

/* op(X)[i][p] = X[base + i*ld + p] (contiguous along k): packs one sliver, index rows
 * r0 .. r0+w (the first `rows` real, the rest zero), of the k block [p0, p0+kc) into dst,
 * element [p*w + r]. Groups of four rows are read eight k at a time (widened on the way)
 * and transposed in registers; the rows of w % 4 and the k tail go one element at a time. */
GEMM_PAIRS_FN static void pack_kmajor(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
                                      uint64_t p0, uint64_t kc, uint64_t r0, uint64_t rows,
                                      unsigned w, float *dst) {
    unsigned r = 0;
#if CPU_HAVE_AVX2_TABLE
    uint64_t kc8 = kc - kc % 8;
    for (; r + 4 <= w; r += 4) {
        uint64_t src[4];
        int real[4];
        for (unsigned i = 0; i < 4; i++) {
            real[i] = r + i < rows;
            src[i]  = base + (r0 + r + i) * ld + p0;
        }
        const __m256 z = _mm256_setzero_ps();
        if (real[3]) {
            for (uint64_t p = 0; p < kc8; p += 8)
                gemm_t4x8(gemm_ld8(X, dt, src[0] + p), gemm_ld8(X, dt, src[1] + p),
                          gemm_ld8(X, dt, src[2] + p), gemm_ld8(X, dt, src[3] + p), dst + p * w + r,
                          w);
        } else {
            for (uint64_t p = 0; p < kc8; p += 8)
                gemm_t4x8(real[0] ? gemm_ld8(X, dt, src[0] + p) : z,
                          real[1] ? gemm_ld8(X, dt, src[1] + p) : z,
                          real[2] ? gemm_ld8(X, dt, src[2] + p) : z, z, dst + p * w + r, w);
        }
        for (uint64_t p = kc8; p < kc; p++)
            for (unsigned i = 0; i < 4; i++)
                dst[p * w + r + i] = real[i] ? cpu_ld(X, dt, src[i] + p) : 0.0f;
    }
#endif
    for (; r < w; r++) {
        uint64_t src = base + (r0 + r) * ld + p0;
        for (uint64_t p = 0; p < kc; p++)
            dst[p * w + r] = r < rows ? cpu_ld(X, dt, src + p) : 0.0f;
    }
}

/* The bf16 pair form of pack_kmajor: slot [q*w + r] holds elements p0+2q (high half) and
 * p0+2q+1 (low half) of row r, raw bits. Read as 32-bit words, a pair is the little-endian
 * word with its halves swapped (a rotate by 16), so groups of four rows take the same
 * register transpose as f32. */
GEMM_PAIRS_FN static void pack_kmajor_pairs(const uint16_t *X, uint64_t base, uint64_t ld,
                                            uint64_t p0, uint64_t kc, uint64_t r0, uint64_t rows,
                                            unsigned w, uint32_t *dst) {
    uint64_t q2 = kc / 2;
    unsigned r  = 0;
#if CPU_HAVE_AVX2_TABLE
    uint64_t q8 = q2 - q2 % 8;
    for (; r + 4 <= w; r += 4) {
        const uint16_t *src[4];
        int real[4];
        for (unsigned i = 0; i < 4; i++) {
            real[i] = r + i < rows;
            src[i]  = real[i] ? X + base + (r0 + r + i) * ld + p0 : X; /* X: not read */
        }
        __m256 v[4];
        for (uint64_t q = 0; q < q8; q += 8) {
            for (unsigned i = 0; i < 4; i++) {
                v[i] = _mm256_setzero_ps();
                if (!real[i]) continue;
                __m256i x = _mm256_loadu_si256((const __m256i *)(src[i] + 2 * q));
                x         = _mm256_or_si256(_mm256_slli_epi32(x, 16), _mm256_srli_epi32(x, 16));
                v[i]      = _mm256_castsi256_ps(x);
            }
            gemm_t4x8(v[0], v[1], v[2], v[3], (float *)(dst + q * w + r), w);
        }
        for (unsigned i = 0; i < 4; i++) {
            for (uint64_t q = q8; q < q2; q++)
                dst[q * w + r + i] =
                    real[i] ? (uint32_t)src[i][2 * q] << 16 | src[i][2 * q + 1] : 0u;
            if (kc % 2) dst[q2 * w + r + i] = real[i] ? (uint32_t)src[i][kc - 1] << 16 : 0u;
        }
    }
#endif
    for (; r < w; r++) {
        if (r < rows) {
            const uint16_t *src = X + base + (r0 + r) * ld + p0;
            for (uint64_t q = 0; q < q2; q++)
                dst[q * w + r] = (uint32_t)src[2 * q] << 16 | src[2 * q + 1];
            if (kc % 2) dst[q2 * w + r] = (uint32_t)src[kc - 1] << 16;
        } else {
            for (uint64_t q = 0; q < q2 + kc % 2; q++)
                dst[q * w + r] = 0;
        }
    }
}

/* op(X)[i][p] = X[base + p*ld + i] (contiguous along the index dimension): packs ns <=
 * GEMM_STRIP slivers from index i0 (the first len indices real) of the k block [p0, p0+kc)
 * into dst, sliver t at dst + t*w*kc, reading ns * w contiguous elements per k step; k is
 * the operand's depth (the prefetch stays inside it). */
GEMM_PAIRS_FN static void pack_imajor(const void *X, ampx_dtype dt, uint64_t base, uint64_t ld,
                                      uint64_t k, uint64_t p0, uint64_t kc, uint64_t i0,
                                      uint64_t len, uint64_t ns, unsigned w, float *dst) {
    size_t es = ampx_dtype_size(dt);
    for (uint64_t p = 0; p < kc; p++) {
        /* rows are ld apart: the hardware prefetcher does not follow, so ask for the row
         * GEMM_PREFETCH_ROWS ahead (only rows inside the operand) */
        if (p0 + p + GEMM_PREFETCH_ROWS < k) {
            const char *ahead =
                (const char *)X + (base + (p0 + p + GEMM_PREFETCH_ROWS) * ld + i0) * es;
            for (uint64_t off = 0; off < len * es; off += 64)
                __builtin_prefetch(ahead + off);
        }
        /* each sliver's w values of this k step, widened straight into the pack */
        for (uint64_t t = 0; t < ns; t++) {
            uint64_t c0 = t * w, cn = len > c0 ? (len - c0 < w ? len - c0 : w) : 0;
            float *d     = dst + t * w * kc + p * w;
            uint64_t src = base + (p0 + p) * ld + i0 + c0, i = 0;
#if CPU_HAVE_AVX2_TABLE
            for (; i + 8 <= cn; i += 8)
                _mm256_storeu_ps(d + i, gemm_ld8(X, dt, src + i));
            for (; i + 4 <= cn; i += 4)
                _mm_storeu_ps(d + i, gemm_ld4(X, dt, src + i));
#endif
            for (; i < cn; i++)
                d[i] = cpu_ld(X, dt, src + i);
            for (; i < w; i++)
                d[i] = 0.0f;
        }
    }
}

/* The bf16 pair form of pack_imajor: rows p0+2q and p0+2q+1 are interleaved into one row of
 * 32-bit slots (2q high, 2q+1 low; an odd kc's last row pairs with zeros). */
GEMM_PAIRS_FN static void pack_imajor_pairs(const uint16_t *X, uint64_t base, uint64_t ld,
                                            uint64_t k, uint64_t p0, uint64_t kc, uint64_t i0,
                                            uint64_t len, uint64_t ns, unsigned w, uint32_t *dst) {
    uint32_t tmp[GEMM_STRIP * GEMM_NR_MAX];
    for (uint64_t p = 0; p < kc; p += 2) {
        if (p0 + p + GEMM_PREFETCH_ROWS + 1 < k) {
            const uint16_t *ahead = X + base + (p0 + p + GEMM_PREFETCH_ROWS) * ld + i0;
            for (uint64_t off = 0; off < len; off += 32) {
                __builtin_prefetch(ahead + off);
                __builtin_prefetch(ahead + ld + off);
            }
        }
        const uint16_t *hi = X + base + (p0 + p) * ld + i0;
        if (p + 1 < kc) {
            const uint16_t *lo = hi + ld;
            for (uint64_t i = 0; i < len; i++)
                tmp[i] = (uint32_t)hi[i] << 16 | lo[i];
        } else {
            for (uint64_t i = 0; i < len; i++)
                tmp[i] = (uint32_t)hi[i] << 16;
        }
        for (uint64_t i = len; i < ns * w; i++)
            tmp[i] = 0;
        for (uint64_t t = 0; t < ns; t++)
            memcpy(dst + t * w * kc + (p / 2) * w, tmp + t * w, w * sizeof(uint32_t));
    }
}

/* One operand of a batch as the packers see it. */
typedef struct pack_src {
    const void *X;
    ampx_dtype dt;
    uint64_t base, ld, k;
    int imajor;     /* contiguous along the index dimension (B, or A transposed) */
    unsigned w;     /* sliver width: mr or nr */
    uint64_t count; /* m or n */
} pack_src;

static pack_src pack_src_of(const sliver_job *j, int is_b, uint64_t b) {
    const ampx_gemm_args *g = &j->a;
    pack_src p;
    p.X      = is_b ? j->B : j->A;
    p.dt     = is_b ? g->b.dtype : g->a.dtype;
    p.base   = b * (is_b ? g->stride_b : g->stride_a);
    p.ld     = is_b ? g->ldb : g->lda;
    p.k      = g->k;
    p.imajor = is_b ? !g->trans_b : (int)g->trans_a;
    p.w      = is_b ? j->kern->nr : j->kern->mr;
    p.count  = is_b ? g->n : g->m;
    return p;
}

/* Packs slivers s0 .. s0+ns of the k block [p0, p0+kc) into dst (sliver s0 at dst, the
 * next ones w * kc floats apart), as f32 or as bf16 pairs. */
static void pack_slivers(const sliver_job *j, const pack_src *o, uint64_t p0, uint64_t kc,
                         uint64_t s0, uint64_t ns, float *dst) {
    unsigned w = o->w;
    if (o->imajor) {
        for (uint64_t t0 = 0; t0 < ns; t0 += GEMM_STRIP) {
            uint64_t n1 = ns - t0 < GEMM_STRIP ? ns - t0 : GEMM_STRIP;
            uint64_t i0 = (s0 + t0) * w, len = o->count - i0 < n1 * w ? o->count - i0 : n1 * w;
            float *d = dst + t0 * w * kc;
            if (j->pairs && ampx_dtype_is_fp8(o->dt))
                cpu_pack_imajor_pairs8(o->X, o->dt, o->base, o->ld, o->k, p0, kc, i0, len, n1, w,
                                       (uint32_t *)d);
            else if (j->pairs)
                pack_imajor_pairs(o->X, o->base, o->ld, o->k, p0, kc, i0, len, n1, w,
                                  (uint32_t *)d);
            else
                pack_imajor(o->X, o->dt, o->base, o->ld, o->k, p0, kc, i0, len, n1, w, d);
        }
    } else {
        for (uint64_t t = 0; t < ns; t++) {
            uint64_t r0 = (s0 + t) * w, rows = o->count - r0 < w ? o->count - r0 : w;
            float *d = dst + t * w * kc;
            if (j->pairs && ampx_dtype_is_fp8(o->dt))
                cpu_pack_kmajor_pairs8(o->X, o->dt, o->base, o->ld, p0, kc, r0, rows, w,
                                       (uint32_t *)d);
            else if (j->pairs)
                pack_kmajor_pairs(o->X, o->base, o->ld, p0, kc, r0, rows, w, (uint32_t *)d);
            else
                pack_kmajor(o->X, o->dt, o->base, o->ld, p0, kc, r0, rows, w, d);
        }
    }
}

/* Pack items of one operand: one per sliver when it is k-contiguous, else one per strip. */
static uint64_t pack_items(uint64_t slivers, int imajor) {
    return imajor ? cpu_div_up(slivers, GEMM_STRIP) : slivers;
}

/* Packs slivers [s0, s0+ns) of op(A) (is_b 0) or op(B) of batch b, every k block, into the
 * whole-operand pack dst_all: block p0 at p0 * pad, sliver s of it at s * w * kc. */
static void pack_range(const sliver_job *j, int is_b, uint64_t b, uint64_t s0, uint64_t ns,
                       float *dst_all) {
    pack_src o   = pack_src_of(j, is_b, b);
    uint64_t pad = is_b ? j->npad : j->mpad;
    for (uint64_t p0 = 0; p0 < j->a.k; p0 += j->kcb) {
        uint64_t kc = j->a.k - p0 < j->kcb ? j->a.k - p0 : j->kcb;
        pack_slivers(j, &o, p0, kc, s0, ns, dst_all + p0 * pad + s0 * o.w * kc);
    }
}

/* Packs item `it` (pack_items) of op(A) (is_b 0) or op(B) of batch b into dst_all. */
static void pack_item(const sliver_job *j, int is_b, uint64_t b, uint64_t it, float *dst_all) {
    uint64_t slv = is_b ? j->slv_b : j->slv_a;
    int imajor   = is_b ? !j->a.trans_b : (int)j->a.trans_a;
    uint64_t s0  = imajor ? it * GEMM_STRIP : it;
    pack_range(j, is_b, b, s0, imajor ? (slv - s0 < GEMM_STRIP ? slv - s0 : GEMM_STRIP) : 1,
               dst_all);
}

/* C = alpha * acc + beta * C in f32, one rounding to C's dtype, for rows [r0, r1) and
 * columns [c0, c1) of the tile at (i0, j0); with c_trans the product is C^T: its element
 * (r, c) is C's element (c, r). */
static void tile_epilogue(const sliver_job *j, uint64_t b, uint64_t i0, uint64_t j0, float *acc,
                          uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1) {
    const ampx_gemm_args *g = &j->a;
    uint64_t cbase = b * g->stride_c, nc = c1 - c0;
    float crow[GEMM_NC_MAX];
    if (c0 >= c1) return;
    for (uint64_t i = r0; i < r1; i++) {
        float *r = acc + i * j->ldacc + c0;
        if (j->c_trans) {
            for (uint64_t jj = 0; jj < nc; jj++) {
                uint64_t off = cbase + (j0 + c0 + jj) * g->ldc + i0 + i;
                float v      = g->alpha * r[jj];
                if (g->beta != 0.0f) v = v + g->beta * cpu_ld(j->C, g->c.dtype, off);
                if (j->epi.on) v = cpu_gemm_epi_one(&j->epi, v, off, i0 + i);
                cpu_st(j->C, g->c.dtype, off, v);
            }
            continue;
        }
        uint64_t off = cbase + (i0 + i) * g->ldc + j0 + c0;
        cpu_gemm_epi_store(&j->epi, r, gemm_row_alpha(g, r, crow, j->C, off, nc), j->C, g->c.dtype,
                           off, j0 + c0, nc);
    }
}

/* Where tile `tile` lies: slivers [sa0, sa0+sm) of op(A) and [sb0, sb0+sn) of op(B), C
 * rows [i0, i0+mc) and columns [j0, j0+nc); its whole mr x nr blocks are rows [0, fm) and
 * columns [0, fn) of blocks when the micro-kernels write C (c_fused), else none. Tile (tm, tn)
 * covers slivers [tm * slv_a / tiles_m, (tm + 1) * slv_a / tiles_m) of op(A), likewise for
 * op(B): tiles differ by one sliver at most. */
typedef struct tile_geom {
    uint64_t sa0, sm, sb0, sn, i0, j0, mc, nc, fm, fn;
} tile_geom;

static tile_geom tile_geom_of(const sliver_job *j, uint64_t tile) {
    const ampx_gemm_args *g = &j->a;
    unsigned mr = j->kern->mr, nr = j->kern->nr;
    uint64_t tm = tile / j->tiles_n, tn = tile % j->tiles_n;
    uint64_t sa1 = (tm + 1) * j->slv_a / j->tiles_m, sb1 = (tn + 1) * j->slv_b / j->tiles_n;
    tile_geom t;
    t.sa0 = tm * j->slv_a / j->tiles_m;
    t.sb0 = tn * j->slv_b / j->tiles_n;
    t.sm = sa1 - t.sa0, t.sn = sb1 - t.sb0;
    t.i0 = t.sa0 * mr, t.j0 = t.sb0 * nr;
    t.mc = (sa1 * mr < g->m ? sa1 * mr : g->m) - t.i0;
    t.nc = (sb1 * nr < g->n ? sb1 * nr : g->n) - t.j0;
    t.fm = j->c_fused && g->k > 0 ? t.mc / mr : 0;
    t.fn = j->c_fused && g->k > 0 ? t.nc / nr : 0;
    return t;
}

/* The k block [p0, p0+kc) of a tile of batch b: ab and bb are the tile's first A and B
 * slivers of the block (sliver s at s * mr * kc), acc its accumulator (row stride ldacc).
 * On the last block the whole blocks are written to C by the micro-kernels. */
static void tile_kblock(const sliver_job *j, uint64_t b, const tile_geom *t, uint64_t p0,
                        uint64_t kc, const float *ab, const float *bb, float *acc, uint64_t ldacc) {
    const ampx_gemm_args *g = &j->a;
    unsigned mr = j->kern->mr, nr = j->kern->nr;
    int last     = p0 + kc == g->k;
    uint64_t c00 = b * g->stride_c + t->i0 * g->ldc + t->j0; /* C's element at (0, 0) */
    for (uint64_t tt = 0; tt < t->sn; tt++)
        for (uint64_t s = 0; s < t->sm; s++) {
            uint64_t e     = c00 + s * mr * g->ldc + tt * nr;
            cpu_gemm_out o = {(char *)j->C + e * ampx_dtype_size(g->c.dtype), g->ldc, g->alpha,
                              g->beta, g->c.dtype};
            const cpu_gemm_out *out = last && s < t->fm && tt < t->fn ? &o : NULL;
            float *acc_st           = acc + s * mr * ldacc + tt * nr;
            if (j->pairs)
                j->kern->gemm_micro_bf16(kc, (const uint32_t *)(ab + s * mr * kc),
                                         (const uint32_t *)(bb + tt * nr * kc), acc_st, ldacc,
                                         p0 == 0, out);
            else
                j->kern->gemm_micro(kc, ab + s * mr * kc, bb + tt * nr * kc, acc_st, ldacc, p0 == 0,
                                    out);
        }
}

/* The blocks of a finished tile that went through acc (its accumulator at the tile's
 * (0, 0)): all of them, or the partial ones at the edges. */
static void tile_finish(const sliver_job *j, uint64_t b, const tile_geom *t, float *acc) {
    if (j->a.k == 0) memset(acc, 0, sizeof(float) * j->mc_max * j->ldacc);
    tile_epilogue(j, b, t->i0, t->j0, acc, 0, t->fm * j->kern->mr, t->fn * j->kern->nr, t->nc);
    tile_epilogue(j, b, t->i0, t->j0, acc, t->fm * j->kern->mr, t->mc, 0, t->nc);
}

/* Claims a shared panel: 1 when it was free and the caller is now to pack it (then to mark
 * it packed with panel_done), 0 when another tile has packed or is packing it. */
static int panel_claim(_Atomic int *flag) {
    int idle = 0;
    return atomic_compare_exchange_strong(flag, &idle, 1);
}

static void panel_done(_Atomic int *flag) {
    atomic_store_explicit(flag, 2, memory_order_release);
}

/* One row (column) of tiles: returns once k block q of op(A) (op(B)), which every tile
 * reads, is packed. The first tile to need block q or q + 1 and find it unclaimed packs it,
 * so while one thread packs block q the other packs q + 1 instead of waiting; no pass
 * over the whole operand comes first. */
static void kblock_ready(const sliver_job *j, uint64_t b, uint64_t q) {
    int is_b     = j->a_inner;
    pack_src o   = pack_src_of(j, is_b, b);
    uint64_t pad = is_b ? j->npad : j->mpad, blocks = cpu_div_up(j->a.k, j->kcb);
    for (uint64_t r = q; r < q + 2 && r < blocks; r++) {
        if (!panel_claim(&j->panel[r])) continue;
        uint64_t p0 = r * j->kcb, kc = j->a.k - p0 < j->kcb ? j->a.k - p0 : j->kcb;
        pack_slivers(j, &o, p0, kc, 0, is_b ? j->slv_b : j->slv_a,
                     (is_b ? j->pb : j->pa) + p0 * pad);
        panel_done(&j->panel[r]);
    }
    cpu_spin_until(&j->panel[q], 2);
}

/* One tile of C in batch b from the packs: the whole k range, then C = alpha*acc + beta*C.
 * With c_fused, the last k block of every whole mr x nr block writes C itself (the same
 * operations as tile_epilogue); only the partial blocks at the tile's edges go through acc. */
static void sliver_tile(const sliver_job *j, uint64_t b, uint64_t tile, const float *pa,
                        const float *pb, float *acc) {
    pack_src ob = pack_src_of(j, 1, b), oa = pack_src_of(j, 0, b);
    /* b_inner / a_inner: the tile's own kc x nc or mc x kc block, after the accumulator */
    float *p_own = acc + j->mc_max * j->ldacc;
    tile_geom t  = tile_geom_of(j, tile);
    unsigned mr = j->kern->mr, nr = j->kern->nr;
    for (uint64_t p0 = 0; p0 < j->a.k; p0 += j->kcb) {
        uint64_t kc     = j->a.k - p0 < j->kcb ? j->a.k - p0 : j->kcb;
        const float *ab = p_own, *bb = p_own;
        /* b_inner / a_inner: pack this tile's block now, it is used by this tile alone */
        if (j->b_inner)
            pack_slivers(j, &ob, p0, kc, t.sb0, t.sn, p_own);
        else
            bb = pb + p0 * j->npad + t.sb0 * nr * kc;
        if (j->a_inner)
            pack_slivers(j, &oa, p0, kc, t.sa0, t.sm, p_own);
        else
            ab = pa + p0 * j->mpad + t.sa0 * mr * kc;
        if (j->b_inner || j->a_inner) kblock_ready(j, b, p0 / j->kcb);
        tile_kblock(j, b, &t, p0, kc, ab, bb, acc, j->ldacc);
    }
    tile_finish(j, b, &t, acc);
}

/* Packs panel p of op(A) (is_b 0: the rows of tile row p) or of op(B) (the columns of tile
 * column p), every k block, unless another tile has claimed it. */
static void panel_get(const sliver_job *j, int is_b, uint64_t p) {
    _Atomic int *flag = &j->panel[is_b ? j->tiles_m + p : p];
    if (!panel_claim(flag)) return;
    tile_geom t = tile_geom_of(j, is_b ? p : p * j->tiles_n);
    pack_range(j, is_b, j->batch, is_b ? t.sb0 : t.sa0, is_b ? t.sn : t.sm, is_b ? j->pb : j->pa);
    panel_done(flag);
}

/* Several rows and columns of tiles, one batch: each tile first packs the panels it reads
 * (its rows of op(A), its columns of op(B)) that no tile has claimed yet; when another tile
 * is still packing one of them, it packs the next tile row's (column's) panel meanwhile,
 * then waits (a packer never waits, so the wait ends), then computes. The two threads start
 * a tile row together, so one packs this row's op(A) panel and the other the next row's.
 * No pass over both operands comes first: the packing of later panels runs while other
 * tiles compute, and a tile reads the panels it packed from the cache. */
static void sliver_shared_task(void *arg, uint64_t item, unsigned tid) {
    const sliver_job *j = arg;
    uint64_t tm = item / j->tiles_n, tn = item % j->tiles_n;
    _Atomic int *fa = &j->panel[tm], *fb = &j->panel[j->tiles_m + tn];
    panel_get(j, 0, tm);
    panel_get(j, 1, tn);
    if (atomic_load_explicit(fa, memory_order_acquire) != 2 && tm + 1 < j->tiles_m)
        panel_get(j, 0, tm + 1);
    if (atomic_load_explicit(fb, memory_order_acquire) != 2 && tn + 1 < j->tiles_n)
        panel_get(j, 1, tn + 1);
    cpu_spin_until(fa, 2);
    cpu_spin_until(fb, 2);
    sliver_tile(j, j->batch, item, j->pa, j->pb, j->ctx->thread_ws[tid].p);
}

static void sliver_tile_task(void *arg, uint64_t item, unsigned tid) {
    const sliver_job *j = arg;
    sliver_tile(j, j->batch, item, j->pa, j->pb, j->ctx->thread_ws[tid].p);
}

/* Per-thread packs: one item is one whole batch (many small products). */
static void sliver_batch_task(void *arg, uint64_t b, unsigned tid) {
    const sliver_job *j = arg;
    float *acc          = j->ctx->thread_ws[tid].p;
    float *pa           = acc + j->mc_max * j->ldacc;
    float *pb           = pa + j->mpad * j->a.k;
    for (uint64_t it = 0; it < pack_items(j->slv_a, j->a.trans_a); it++)
        pack_item(j, 0, b, it, pa);
    for (uint64_t it = 0; it < pack_items(j->slv_b, !j->a.trans_b); it++)
        pack_item(j, 1, b, it, pb);
    for (uint64_t t = 0; t < j->tiles_m * j->tiles_n; t++)
        sliver_tile(j, b, t, pa, pb, acc);
}

/* A batch whose packs fit in this many floats is packed by the thread that computes it. */
#define GEMM_PRIVATE_PACK_MAX (256u * 1024u)

/* How far (in halves) a tile may grow past the table's mc to keep C one row of tiles. */
#ifndef GEMM_ONE_ROW_STRETCH
#define GEMM_ONE_ROW_STRETCH 3
#endif

/* The C tiles: as few as the table's mc x nc allow, then more (one more row or column of
 * tiles at a time, across the longer side of a tile) until a launch of `launches` products
 * gives every thread the same number of tiles (at least two), or sixteen each, or the tiles
 * are one sliver. The slivers are shared out evenly (sliver_tile), so tiles differ by one
 * sliver at most and equal counts are equal work. Only the cut of C changes; each element
 * is computed the same way. */
static void sliver_tiles(sliver_job *j, unsigned threads, uint64_t launches) {
    unsigned mr = j->kern->mr, nr = j->kern->nr;
    /* Up to 1.5 times the table's mc stays one row of tiles (256 rows on AVX-512: the MLP
     * shapes), whose B blocks are packed by the tile that uses them (gemm_sliver). */
    uint64_t sm_max = j->kern->mc / mr;
    if (j->slv_a <= sm_max * GEMM_ONE_ROW_STRETCH / 2) sm_max = j->slv_a;
    j->tiles_m = cpu_div_up(j->slv_a, sm_max);
    j->tiles_n = cpu_div_up(j->slv_b, j->kern->nc / nr);
    for (;;) {
        uint64_t t = j->tiles_m * j->tiles_n * launches;
        if (threads < 2 || (t >= 2u * threads && t % threads == 0) || t >= 16u * threads) break;
        uint64_t h = cpu_div_up(j->slv_a, j->tiles_m) * mr,
                 w = cpu_div_up(j->slv_b, j->tiles_n) * nr;
        int can_n = j->tiles_n < j->slv_b, can_m = j->tiles_m < j->slv_a;
        if (can_n && (!can_m || w >= h))
            j->tiles_n++;
        else if (can_m)
            j->tiles_m++;
        else
            break;
    }
    j->mc_max = cpu_div_up(j->slv_a, j->tiles_m) * mr;
    j->nc_max = cpu_div_up(j->slv_b, j->tiles_n) * nr;
}

/* The micro-kernels write C themselves when the last k block is at least this deep. Below,
 * the kernel is all stores, and scattered 12-row stores to a C whose rows are 4 KiB apart
 * (n = 1024 f32) alias in L1 and in the store buffer: 256x1024x4 took 70 us that way on one
 * thread and 39 us through the accumulator and whole-row stores; from k = 16 the fused
 * stores win (51 us against 70). */
#define GEMM_FUSE_MIN_KC 16

/* The share of a tile's rows (or columns) that are real when count of them are cut in
 * slivers of w. */
static double sliver_fill(uint64_t count, unsigned w) {
    return (double)count / (double)(cpu_div_up(count, w) * w);
}

/* Narrow C (n far below nr, m not): the 12 x 32 (or 6 x 16) block would be mostly padding
 * across n, so the driver computes C^T = op(B)^T op(A)^T instead, n across the mr rows of a
 * sliver and m across its nr columns, and writes the tile back transposed. Each element
 * still sums its k products in order with one fused multiply-add each: the same bits. */
static int gemm_narrow(const cpu_kernels *kern, uint64_t m, uint64_t n) {
    double fill      = sliver_fill(m, kern->mr) * sliver_fill(n, kern->nr);
    double fill_swap = sliver_fill(n, kern->mr) * sliver_fill(m, kern->nr);
    return fill_swap > 1.5 * fill;
}

/* Sets the k block (j->kcb) for k blocks of at most max_kc (even): the blocks of k are made
 * equal (the last one at most two shorter), and whether the micro-kernels write C follows
 * from the last block's depth. */
static void gemm_set_kblock(sliver_job *j, uint64_t max_kc) {
    const ampx_gemm_args *g = &j->a;
    uint64_t blocks = g->k ? cpu_div_up(g->k, max_kc) : 1, kc = cpu_div_up(g->k, blocks);
    if (blocks > 1) kc += kc % 2; /* a bf16 pair never straddles two blocks */
    j->kcb           = kc ? kc : max_kc;
    uint64_t kc_last = g->k % j->kcb ? g->k % j->kcb : j->kcb;
    j->c_fused       = !j->c_trans && !j->epi.on && kc_last >= GEMM_FUSE_MIN_KC &&
                 (g->c.dtype == AMPX_F32 || j->kern->micro_out_16);
}

static ampx_status gemm_sliver(ampx_context *ctx, const ampx_gemm_args *g, const void *A,
                               const void *B, void *C, uint64_t macs, int c_overlap) {
    sliver_job j;
    memset(&j, 0, sizeof j);
    j.a    = *g;
    j.kern = ctx->kern;
    j.A    = A;
    j.B    = B;
    j.C    = C;
    j.ctx  = ctx;
    cpu_gemm_epi_init(&j.epi, ctx->kern, g);
    if (gemm_narrow(j.kern, g->m, g->n)) { /* compute C^T = op(B)^T op(A)^T */
        ampx_gemm_args *s = &j.a;
        s->m = g->n, s->n = g->m;
        s->trans_a = !g->trans_b, s->trans_b = !g->trans_a;
        s->lda = g->ldb, s->ldb = g->lda;
        s->stride_a = g->stride_b, s->stride_b = g->stride_a;
        s->a = g->b, s->b = g->a;
        j.A = B, j.B = A;
        j.c_trans = 1;
    }
    g       = &j.a;
    j.pairs = j.kern->gemm_micro_bf16 &&
              ((g->a.dtype == AMPX_BF16 && g->b.dtype == AMPX_BF16) ||
               (ampx_dtype_is_fp8(g->a.dtype) && ampx_dtype_is_fp8(g->b.dtype)));
    j.mpad  = cpu_div_up(g->m, j.kern->mr) * j.kern->mr;
    j.npad  = cpu_div_up(g->n, j.kern->nr) * j.kern->nr;
    j.slv_a = j.mpad / j.kern->mr;
    j.slv_b = j.npad / j.kern->nr;
    if (j.kern->nc > GEMM_NC_MAX || j.kern->nr > GEMM_NR_MAX) /* wider than the row buffers */
        return cpu_fail(ctx, AMPX_ERR_INTERNAL, "gemm: %s tile width %u > %d", j.kern->name,
                        j.kern->nc, GEMM_NC_MAX);
    uint64_t pack_floats, pack_bytes;
    if (cpu_mul_u64(j.mpad + j.npad, g->k, &pack_floats) ||
        cpu_mul_u64(pack_floats, sizeof(float), &pack_bytes) || pack_bytes > SIZE_MAX / 2)
        return cpu_fail(ctx, AMPX_ERR_NO_MEMORY, "gemm: packed operands too large");
    uint64_t work = macs / GEMM_PAR_SCALE;
    /* the pool runs only from GEMM_PAR_MIN multiply-adds: below, one thread does it all */
    unsigned threads = work >= CPU_PAR_MIN ? ctx->n_threads : 1;

    if (g->batch > 1 && !c_overlap && pack_floats <= GEMM_PRIVATE_PACK_MAX) {
        sliver_tiles(&j, threads, g->batch);
        j.ldacc = j.nc_max;
        gemm_set_kblock(&j, GEMM_KC);
        CPU_TRY(cpu_reserve_thread_ws(ctx, "gemm",
                                      sizeof(float) * (j.mc_max * j.nc_max + pack_floats)));
        cpu_run(ctx, work, g->batch, sliver_batch_task, &j);
        return AMPX_OK;
    }
    sliver_tiles(&j, threads, 1);
    j.ldacc = j.nc_max;
    /* One row of C tiles: each B block is used by one tile, so that tile packs it into its
     * own workspace just before using it (no round trip of the packed B through memory),
     * and op(A) is shared. One column of tiles: the same for the A blocks. Otherwise the
     * tiles share the packs of both. */
    j.b_inner = j.tiles_m == 1;
    j.a_inner = !j.b_inner && j.tiles_n == 1;
    gemm_set_kblock(&j, j.b_inner || j.a_inner ? GEMM_KC : GEMM_KC_DEEP);
    uint64_t own_floats = j.b_inner ? j.nc_max * j.kcb : j.a_inner ? j.mc_max * j.kcb : 0;
    CPU_TRY(cpu_reserve_thread_ws(ctx, "gemm", sizeof(float) * (j.mc_max * j.nc_max + own_floats)));
    uint64_t shared_floats = j.b_inner ? j.mpad * g->k : j.a_inner ? j.npad * g->k : pack_floats;
    uint64_t panels = j.b_inner || j.a_inner ? cpu_div_up(g->k, j.kcb) : j.tiles_m + j.tiles_n;
    float *packs    = cpu_reserve_shared_ws(
           ctx, "gemm", sizeof(float) * (size_t)shared_floats + sizeof(_Atomic int) * panels);
    if (!packs) return AMPX_ERR_NO_MEMORY;
    j.pa = j.a_inner ? NULL : packs;
    j.pb = j.b_inner ? NULL : j.a_inner ? packs : packs + j.mpad * g->k;
    /* the tiles pack the shared operands themselves (sliver_shared_task, kblock_ready) */
    j.panel = (_Atomic int *)(void *)(packs + shared_floats);
    for (uint64_t b = 0; b < g->batch; b++) {
        j.batch = b;
        for (uint64_t p = 0; p < panels; p++)
            atomic_init(&j.panel[p], 0);
        cpu_run(ctx, work / g->batch, j.tiles_m * j.tiles_n,
                j.b_inner || j.a_inner ? sliver_tile_task : sliver_shared_task, &j);
    }
    return AMPX_OK;
}

/* a * b, or UINT64_MAX when that overflows. */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t p;
    return cpu_mul_u64(a, b, &p) ? UINT64_MAX : p;
}

ampx_status cpu_gemm(ampx_context *ctx, const ampx_gemm_args *args) {
    ampx_gemm_args g;
    CPU_TRY(ampx_kit_take_gemm(AMPX_KIT(ctx), args, &g, NULL));
    if (!ctx->epilogue && ampx_kit_gemm_epilogue(&g)) /* gemm_epilogue=0: as supports() says */
        return cpu_fail(ctx, AMPX_ERR_UNSUPPORTED, "gemm: epilogue off (gemm_epilogue=0)");
    return cpu_gemm_checked(ctx, &g);
}

ampx_status cpu_gemm_checked(ampx_context *ctx, const ampx_gemm_args *ga) {
    gemm_job j;
    memset(&j, 0, sizeof j);
    j.a                     = *ga;
    const ampx_gemm_args *g = &j.a;
    cpu_gemm_bias_grad(ctx, g); /* reads B only: before or after the product alike */
    if (g->m == 0 || g->n == 0 || g->batch == 0) return AMPX_OK;
    cpu_gemm_epi_init(&j.epi, ctx->kern, g);

    uint64_t macs   = mul_sat(mul_sat(mul_sat(g->m, g->n), g->k ? g->k : 1), g->batch);
    uint64_t c_span = (g->m - 1) * g->ldc + g->n;
    if (ctx->kern->gemm_micro)
        return gemm_sliver(ctx, g, cpu_ptr(&g->a), cpu_ptr(&g->b), cpu_ptr(&g->c), macs,
                           g->batch > 1 && g->stride_c < c_span);

    CPU_TRY(cpu_reserve_thread_ws(
        ctx, "gemm", sizeof(float) * (GEMM_MC * GEMM_NC + GEMM_MC * GEMM_KC + GEMM_KC * GEMM_NC)));
    j.kern         = ctx->kern;
    j.A            = cpu_ptr(&g->a);
    j.B            = cpu_ptr(&g->b);
    j.C            = cpu_ptr(&g->c);
    j.ctx          = ctx;
    j.tiles_m      = (g->m + GEMM_MC - 1) / GEMM_MC;
    j.tiles_n      = (g->n + GEMM_NC - 1) / GEMM_NC;
    uint64_t tiles = j.tiles_m * j.tiles_n;

    /* Small products run on this thread alone; waking the pool would cost more. GEMM goes
     * parallel from GEMM_PAR_MIN multiply-adds, which cpu_run's element threshold sees as
     * macs / GEMM_PAR_SCALE. The count saturates: a product past 2^64 is simply large. */
    uint64_t work = macs / GEMM_PAR_SCALE;

    /* Batches whose C matrices overlap (stride_c smaller than one C) run one after the
     * other, as the definition's "for b in [0, batch)" orders them. */
    if (g->batch == 1 || g->stride_c >= c_span) {
        cpu_run(ctx, work, tiles * g->batch, gemm_tile_task, &j);
    } else {
        for (uint64_t b = 0; b < g->batch; b++) {
            j.batch0 = b;
            cpu_run(ctx, work, tiles, gemm_tile_task, &j);
        }
    }
    return AMPX_OK;
}
