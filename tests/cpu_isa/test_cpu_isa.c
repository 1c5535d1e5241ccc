/* test_cpu_isa.c — the CPU backend's run-time ISA dispatch.
 *
 * - caps: `isa=` and AMPX_CPU_ISA select the path, device_info reports it, a cap above
 *   the machine falls back to the best path it has, bad values are one clear error;
 * - converters: every ISA path converts bf16/f16 <-> f32 bit-identically to dtype.h (every
 *   16-bit pattern; every f32 exponent and sign with the rounding-relevant low bits);
 * - GEMM on every path the machine runs gives the same bits for 1, 2 and 3 threads and
 *   from run to run (the sliver driver's per-batch and per-thread packing both); the avx2
 *   and avx512 kernels give the same bits, and so does avx512bf16 on bf16 inputs, except
 *   that it counts subnormal bf16 inputs as zero (tested as documented);
 * - the memory-bound ops give the same bits on every path.
 * A path the CPU lacks is skipped with a message saying so.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"

// ---------------------------------------------------------------------------------------
// Helpers

/* Opens the CPU backend with the options; NULL (and err set) on failure. */
static ampx_backend *open_cpu(const char *opt1, const char *opt2, char *err, size_t cap) {
    const char *opts[2] = {opt1, opt2};
    uint32_t n          = opt2 ? 2 : opt1 ? 1 : 0;
    ampx_backend *be    = NULL;
    if (ampx_backend_open("cpu", opts, n, &be, err, cap) != AMPX_OK) return NULL;
    return be;
}

/* The word after "isa=" in the backend's description. */
static void isa_in_use(ampx_backend *be, char *out, size_t cap) {
    ampx_device_info info       = {.size = sizeof info};
    const ampx_backend_iface *t = ampx_backend_iface_of(be);
    cr_assert_eq(t->device_info(ampx_backend_context(be), &info), AMPX_OK);
    const char *p = strstr(info.description, "isa=");
    cr_assert_not_null(p, "device_info does not report the ISA path: %s", info.description);
    size_t len = strcspn(p + 4, " ,;()");
    snprintf(out, cap, "%.*s", (int)len, p + 4);
}

/* The paths with a kernel table, lowest to highest (amx runs the avx512bf16 table). */
static const char *const paths[] = {"portable", "avx2", "avx512", "avx512bf16"};
#define N_PATHS (sizeof paths / sizeof paths[0])

/* The rank in paths[] of the best table this machine should run, from the compiler's own
 * cpuid probe (independent of the plugin's detection). */
static int best_rank(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
        !__builtin_cpu_supports("f16c"))
        return 0;
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
        return 1;
    return __builtin_cpu_supports("avx512bf16") ? 3 : 2;
#else
    return 0;
#endif
}

static const char *expected_best(void) {
    return paths[best_rank()];
}

static int path_rank(const char *name) {
    for (size_t i = 0; i < N_PATHS; i++)
        if (strcmp(name, paths[i]) == 0) return (int)i;
    return (int)N_PATHS; /* amx, auto: above every table */
}

/* Whether this machine runs the table `name` (and everything below it). */
static int machine_has(const char *name) {
    return path_rank(name) <= best_rank();
}

static int machine_has_avx2(void) {
    return machine_has("avx2");
}

/* Skips the test (saying why) when the machine lacks the path. */
#define NEED_PATH(name)                                                                            \
    do {                                                                                           \
        if (!machine_has(name))                                                                    \
            cr_skip_test("skipped: this CPU (or its OS) lacks the %s path (best: %s)", name,       \
                         expected_best());                                                         \
    } while (0)

// ---------------------------------------------------------------------------------------
// Caps and reporting

Test(caps, default_is_best_path) {
    char err[512], isa[32];
    unsetenv("AMPX_CPU_ISA");
    ampx_backend *be = open_cpu(NULL, NULL, err, sizeof err);
    cr_assert_not_null(be, "%s", err);
    isa_in_use(be, isa, sizeof isa);
    cr_expect_str_eq(isa, expected_best());
    ampx_backend_close(be);
}

Test(caps, option_caps_the_path) {
    static const char *const caps[] = {"portable", "avx2", "avx512", "avx512bf16", "amx", "auto"};
    unsetenv("AMPX_CPU_ISA");
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char err[512], isa[32], opt[32];
        snprintf(opt, sizeof opt, "isa=%s", caps[i]);
        ampx_backend *be = open_cpu(opt, NULL, err, sizeof err);
        cr_assert_not_null(be, "%s: %s", caps[i], err);
        isa_in_use(be, isa, sizeof isa);
        /* the cap's table where the machine has it, else the best it has (amx and auto:
         * the best table, avx512bf16 at most) */
        int r            = path_rank(caps[i]) < best_rank() ? path_rank(caps[i]) : best_rank();
        const char *want = paths[r];
        cr_expect_str_eq(isa, want, "%s runs isa=%s, expected %s", opt, isa, want);
        ampx_backend_close(be);
    }
}

Test(caps, environment_caps_the_path) {
    char err[512], isa[32];
    setenv("AMPX_CPU_ISA", "portable", 1);
    ampx_backend *be = open_cpu(NULL, NULL, err, sizeof err);
    cr_assert_not_null(be, "%s", err);
    isa_in_use(be, isa, sizeof isa);
    cr_expect_str_eq(isa, "portable");
    ampx_backend_close(be);
    /* both caps apply: the option cannot raise what the environment lowered */
    be = open_cpu("isa=avx2", NULL, err, sizeof err);
    cr_assert_not_null(be, "%s", err);
    isa_in_use(be, isa, sizeof isa);
    cr_expect_str_eq(isa, "portable");
    ampx_backend_close(be);
    setenv("AMPX_CPU_ISA", "auto", 1);
    be = open_cpu("isa=portable", NULL, err, sizeof err);
    cr_assert_not_null(be, "%s", err);
    isa_in_use(be, isa, sizeof isa);
    cr_expect_str_eq(isa, "portable");
    ampx_backend_close(be);
}

Test(caps, bad_environment_is_one_error) {
    char err[512] = "";
    setenv("AMPX_CPU_ISA", "avx9000", 1);
    ampx_backend *be = open_cpu(NULL, NULL, err, sizeof err);
    cr_expect_null(be);
    cr_expect(strstr(err, "AMPX_CPU_ISA=avx9000") != NULL, "message: %s", err);
    cr_expect(strstr(err, "portable") != NULL, "the message lists the choices: %s", err);
    ampx_backend_close(be);
}

Test(caps, bad_option_is_one_error) {
    char err[512] = "";
    unsetenv("AMPX_CPU_ISA");
    ampx_backend *be = open_cpu("isa=sse9", NULL, err, sizeof err);
    cr_expect_null(be);
    cr_expect(strstr(err, "isa=sse9") != NULL, "message: %s", err);
    ampx_backend_close(be);
}

// ---------------------------------------------------------------------------------------
// Converters: the cast op on each path against dtype.h

typedef struct dev {
    ampx_backend *be;
    const ampx_backend_iface *t;
    ampx_context *ctx;
} dev;

static dev open_dev(const char *isa_opt, const char *threads_opt) {
    char err[512];
    unsetenv("AMPX_CPU_ISA");
    dev d = {open_cpu(isa_opt, threads_opt, err, sizeof err), NULL, NULL};
    cr_assert_not_null(d.be, "%s", err);
    d.t   = ampx_backend_iface_of(d.be);
    d.ctx = ampx_backend_context(d.be);
    return d;
}

static ampx_buffer *upload(dev *d, const void *src, uint64_t bytes) {
    ampx_buffer *b = NULL;
    cr_assert_eq(d->t->buffer_alloc(d->ctx, bytes, &b), AMPX_OK);
    if (src) cr_assert_eq(d->t->buffer_write(d->ctx, b, 0, src, bytes), AMPX_OK);
    return b;
}

static void cast_on(dev *d, ampx_dtype sdt, const void *src, ampx_dtype ddt, void *dst,
                    uint64_t n) {
    ampx_buffer *bs  = upload(d, src, n * ampx_dtype_size(sdt));
    ampx_buffer *bd  = upload(d, NULL, n * ampx_dtype_size(ddt));
    ampx_cast_args a = {.size = sizeof a, .n = n, .src = {bs, 0, sdt}, .dst = {bd, 0, ddt}};
    cr_assert_eq(d->t->ops->cast(d->ctx, &a), AMPX_OK, "%s", ampx_backend_last_error(d->be));
    cr_assert_eq(d->t->buffer_read(d->ctx, bd, 0, dst, n * ampx_dtype_size(ddt)), AMPX_OK);
    d->t->buffer_free(d->ctx, bs);
    d->t->buffer_free(d->ctx, bd);
}

static void check_converters(const char *isa_opt) {
    dev d = open_dev(isa_opt, NULL);
    /* every 16-bit pattern, widened from bf16 and from f16 */
    uint16_t *h = malloc(65536 * sizeof *h);
    uint32_t *w = malloc(65536 * sizeof *w);
    cr_assert(h && w);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int f16 = 0; f16 < 2; f16++) {
        cast_on(&d, f16 ? AMPX_F16 : AMPX_BF16, h, AMPX_F32, w, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t want =
                ampx_f32_bits(f16 ? ampx_f16_to_f32((uint16_t)i) : ampx_bf16_to_f32((uint16_t)i));
            cr_assert_eq(w[i], want, "%s: %s 0x%04x -> 0x%08x, dtype.h 0x%08x", isa_opt,
                         f16 ? "f16" : "bf16", i, w[i], want);
        }
    }
    free(h);
    free(w);

    /* f32 -> bf16/f16: every sign, exponent and top mantissa bits (the upper 16 bits),
     * times low halves at and around every rounding boundary of both formats */
    static const uint16_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000,
                                    0x2001, 0x3000, 0x5555, 0x7fff, 0x8000, 0x8001, 0xaaaa,
                                    0xc000, 0xdfff, 0xe000, 0xefff, 0xf000, 0xf001, 0xffff};
    const uint64_t n_low = sizeof lows / sizeof lows[0], n = 65536 * n_low;
    uint32_t *x = malloc(n * sizeof *x);
    uint16_t *y = malloc(n * sizeof *y);
    cr_assert(x && y);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (uint32_t)(i / n_low) << 16 | lows[i % n_low];
    for (int f16 = 0; f16 < 2; f16++) {
        cast_on(&d, AMPX_F32, x, f16 ? AMPX_F16 : AMPX_BF16, y, n);
        for (uint64_t i = 0; i < n; i++) {
            float v       = ampx_f32_from_bits(x[i]);
            uint16_t want = f16 ? ampx_f32_to_f16(v) : ampx_f32_to_bf16(v);
            cr_assert_eq(y[i], want, "%s: f32 0x%08x -> %s 0x%04x, dtype.h 0x%04x", isa_opt, x[i],
                         f16 ? "f16" : "bf16", y[i], want);
        }
    }
    /* short lengths: the masked last vector and the scalar tails of every path (the lengths
     * above are multiples of every vector and chunk) */
    static const uint64_t tails[] = {1, 3, 7, 8, 9, 15, 17, 31, 33, 4095, 4097, 8191};
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++)
        for (int f16 = 0; f16 < 2; f16++) {
            uint64_t m = tails[t], at = 4096 * 7 + 13 * t; /* an odd start in the patterns */
            cast_on(&d, AMPX_F32, x + at, f16 ? AMPX_F16 : AMPX_BF16, y, m);
            cast_on(&d, f16 ? AMPX_F16 : AMPX_BF16, y, AMPX_F32, x, m);
            for (uint64_t i = 0; i < m; i++) {
                uint32_t src  = (uint32_t)((at + i) / n_low) << 16 | lows[(at + i) % n_low];
                uint16_t mid  = f16 ? ampx_f32_to_f16(ampx_f32_from_bits(src))
                                    : ampx_f32_to_bf16(ampx_f32_from_bits(src));
                uint32_t want = ampx_f32_bits(f16 ? ampx_f16_to_f32(mid) : ampx_bf16_to_f32(mid));
                cr_assert_eq(y[i], mid, "%s: n=%llu f32 0x%08x -> %s 0x%04x, dtype.h 0x%04x",
                             isa_opt, (unsigned long long)m, src, f16 ? "f16" : "bf16", y[i], mid);
                cr_assert_eq(x[i], want, "%s: n=%llu %s 0x%04x -> 0x%08x, dtype.h 0x%08x", isa_opt,
                             (unsigned long long)m, f16 ? "f16" : "bf16", mid, x[i], want);
            }
            for (uint64_t i = 0; i < m; i++) /* restore the patterns overwritten above */
                x[i] = (uint32_t)(i / n_low) << 16 | lows[i % n_low];
        }
    free(x);
    free(y);
    ampx_backend_close(d.be);
}

Test(converters, portable_matches_dtype_h) {
    check_converters("isa=portable");
}

Test(converters, avx2_matches_dtype_h) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_converters("isa=avx2");
}

Test(converters, avx512_matches_dtype_h) {
    NEED_PATH("avx512");
    check_converters("isa=avx512");
}

Test(converters, avx512bf16_matches_dtype_h) {
    NEED_PATH("avx512bf16");
    check_converters("isa=avx512bf16");
}

// ---------------------------------------------------------------------------------------
// GEMM: the same bits for any thread count and from run to run, on each path

typedef struct gemm_case {
    uint64_t m, n, k, batch;
    uint32_t ta, tb;
    ampx_dtype dt;
    float beta;
    int subnormal;   /* A: 1 every 5th element a subnormal (+-2^-130), 2 those 0, 3 all
                      * subnormal; 4: every 7th element of C NaN, +-inf or near the largest;
                      * 5 (f16): one NaN in every third row of op(A), signalling or quiet,
                      * either sign, a payload of its own */
    uint64_t n_used; /* when not 0: the product of the first n_used columns of B and C only */
} gemm_case;

/* Runs the case on a fresh context and returns C's bytes (malloc'd). */
static unsigned char *gemm_run(const char *isa_opt, const char *threads_opt, const gemm_case *c,
                               uint64_t *c_bytes) {
    dev d       = open_dev(isa_opt, threads_opt);
    size_t es   = ampx_dtype_size(c->dt);
    uint64_t na = c->m * c->k * c->batch, nb = c->k * c->n * c->batch, nc = c->m * c->n * c->batch;
    float *tmp = malloc((na > nb ? (na > nc ? na : nc) : (nb > nc ? nb : nc)) * sizeof(float));
    void *raw  = malloc((na > nb ? (na > nc ? na : nc) : (nb > nc ? nb : nc)) * es);
    cr_assert(tmp && raw);
    uint64_t s = 99;
    ampx_buffer *bufs[3];
    uint64_t counts[3] = {na, nb, nc};
    for (int t = 0; t < 3; t++) {
        for (uint64_t i = 0; i < counts[t]; i++) {
            s += 0x9e3779b97f4a7c15ull;
            tmp[i] = (float)((double)(ampx_hash32(s, i) >> 8) / 8388608.0 - 1.0);
            if (t == 2 && c->subnormal == 4 && i % 7 == 0) /* C: NaN, inf, near the top */
                tmp[i] = i % 3 == 0 ? NAN
                         : i % 3 == 1
                             ? (i % 2 ? INFINITY : -INFINITY)
                             : (c->dt == AMPX_F16 ? 65504.0f : 3.389e38f) * (i % 2 ? 1.0f : -1.0f);
            if (t == 0 && c->subnormal && c->subnormal != 4 && (i % 5 == 0 || c->subnormal == 3))
                tmp[i] = c->subnormal == 2 ? 0.0f : tmp[i] < 0 ? -0x1p-130f : 0x1p-130f;
        }
        cast_on(&d, AMPX_F32, tmp, c->dt, raw, counts[t]);
        if (t == 0 && c->subnormal == 5 && c->dt == AMPX_F16)
            for (uint64_t b = 0; b < c->batch; b++)
                for (uint64_t i = 0; i < c->m; i += 3) {
                    uint64_t p = (i * 7 + b) % c->k, e = b * c->m * c->k;
                    e += c->ta ? p * c->m + i : i * c->k + p;
                    /* 0x7c00 | payload: signalling when bit 9 is clear */
                    ((uint16_t *)raw)[e] =
                        (uint16_t)((i % 2 ? 0x8000u : 0u) | 0x7c00u | (i % 4 < 2 ? 0x200u : 0u) |
                                   (1u + i % 0x1ffu));
                }
        bufs[t] = upload(&d, raw, counts[t] * es);
    }
    ampx_gemm_args g = {.size     = sizeof g,
                        .trans_a  = c->ta,
                        .trans_b  = c->tb,
                        .m        = c->m,
                        .n        = c->n_used ? c->n_used : c->n,
                        .k        = c->k,
                        .batch    = c->batch,
                        .lda      = c->ta ? c->m : c->k,
                        .ldb      = c->tb ? c->k : c->n,
                        .ldc      = c->n,
                        .stride_a = c->m * c->k,
                        .stride_b = c->k * c->n,
                        .stride_c = c->m * c->n,
                        .alpha    = 0.75f,
                        .beta     = c->beta,
                        .a        = {bufs[0], 0, c->dt},
                        .b        = {bufs[1], 0, c->dt},
                        .c        = {bufs[2], 0, c->dt}};
    cr_assert_eq(d.t->ops->gemm(d.ctx, &g), AMPX_OK, "%s", ampx_backend_last_error(d.be));
    *c_bytes           = nc * es;
    unsigned char *out = malloc(*c_bytes);
    cr_assert_eq(d.t->buffer_read(d.ctx, bufs[2], 0, out, *c_bytes), AMPX_OK);
    for (int t = 0; t < 3; t++)
        d.t->buffer_free(d.ctx, bufs[t]);
    free(tmp);
    free(raw);
    ampx_backend_close(d.be);
    return out;
}

static void check_thread_invariance(const char *isa_opt) {
    static const gemm_case cases[] = {
        {300, 260, 270, 1, 0, 0, AMPX_F32, 0.0f, 0, 0},  /* several tiles, two k blocks */
        {129, 300, 257, 2, 1, 1, AMPX_BF16, 0.5f, 0, 0}, /* shared packs per batch, transposed */
        {37, 29, 41, 7, 0, 1, AMPX_F16, -1.25f, 0, 0},   /* many small batches: per-thread packs */
        {5, 1000, 600, 1, 1, 0, AMPX_F32, 1.0f, 0, 0},   /* short and wide */
        {40, 2000, 300, 2, 0, 1, AMPX_BF16, 0.5f, 0, 0}, /* one row of tiles: B packed per tile */
        {700, 100, 300, 1, 1, 0, AMPX_F16, 0.5f, 0, 0}, /* one column of tiles: A packed per tile */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t b1, b2, b3, b4;
        unsigned char *r1 = gemm_run(isa_opt, "threads=1", &cases[i], &b1);
        unsigned char *r2 = gemm_run(isa_opt, "threads=2", &cases[i], &b2);
        unsigned char *r3 = gemm_run(isa_opt, "threads=3", &cases[i], &b3);
        unsigned char *r4 = gemm_run(isa_opt, "threads=2", &cases[i], &b4);
        cr_expect(memcmp(r1, r2, b1) == 0, "%s case %zu: threads=1 and threads=2 differ", isa_opt,
                  i);
        cr_expect(memcmp(r1, r3, b1) == 0, "%s case %zu: threads=1 and threads=3 differ", isa_opt,
                  i);
        cr_expect(memcmp(r2, r4, b2) == 0, "%s case %zu: two runs differ", isa_opt, i);
        free(r1);
        free(r2);
        free(r3);
        free(r4);
    }
}

Test(gemm, portable_same_bits_any_thread_count, .timeout = 120) {
    check_thread_invariance("isa=portable");
}

Test(gemm, avx2_same_bits_any_thread_count, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_thread_invariance("isa=avx2");
}

Test(gemm, avx512_same_bits_any_thread_count, .timeout = 120) {
    NEED_PATH("avx512");
    check_thread_invariance("isa=avx512");
}

Test(gemm, avx512bf16_same_bits_any_thread_count, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_thread_invariance("isa=avx512bf16");
}

/* Compares C of one case under two paths bit for bit; returns 1 when they are the same. */
static int same_c(const char *isa1, const gemm_case *c1, const char *isa2, const gemm_case *c2) {
    uint64_t b1, b2;
    unsigned char *r1 = gemm_run(isa1, NULL, c1, &b1);
    unsigned char *r2 = gemm_run(isa2, NULL, c2, &b2);
    int same          = b1 == b2 && memcmp(r1, r2, b1) == 0;
    free(r1);
    free(r2);
    return same;
}

/* Cases that reach both pack forms of each operand, odd k, several k blocks and tiles, and
 * a C tile cut smaller than the table's for the second thread. */
static const gemm_case path_cases[] = {
    {300, 260, 270, 1, 0, 0, AMPX_BF16, 0.0f, 0, 0},
    {129, 300, 257, 2, 1, 1, AMPX_BF16, 0.5f, 0, 0},
    {37, 29, 41, 7, 0, 1, AMPX_BF16, -1.25f, 0, 0},
    {5, 1000, 601, 1, 1, 0, AMPX_BF16, 1.0f, 0, 0},
    {64, 128, 128, 3, 0, 0, AMPX_BF16, 0.0f, 0, 0},
    {300, 260, 270, 1, 1, 0, AMPX_F32, 0.0f, 0, 0},
    {129, 300, 257, 2, 0, 1, AMPX_F16, 0.5f, 0, 0},
    /* one row of C tiles: every tile packs its own B blocks (batched: per batch); 250 rows
     * are one row on AVX-512 (up to 1.5 mc), not on avx2 */
    {250, 300, 270, 1, 0, 1, AMPX_F16, 0.5f, 0, 0},
    {100, 700, 333, 1, 0, 1, AMPX_BF16, 0.0f, 0, 0},
    {40, 2000, 300, 2, 1, 0, AMPX_BF16, 0.5f, 0, 0},
    /* C holding NaN, inf and values that round to inf, read with beta (the micro-kernels'
     * own rounding to bf16 and f16) */
    {150, 100, 70, 1, 0, 0, AMPX_BF16, 1.0f, 4, 0},
    {150, 100, 70, 1, 1, 1, AMPX_F16, 1.0f, 4, 0},
    /* one column of C tiles: every tile packs its own A blocks */
    {700, 100, 300, 1, 0, 1, AMPX_BF16, 0.0f, 0, 0},
    {2100, 128, 129, 1, 1, 1, AMPX_F32, -0.5f, 0, 0},
};

/* Bits alone cannot catch a packing or tiling mistake that every sliver path shares, so
 * each path's f32 C is compared with the portable path's (an independent driver: whole
 * panels, multiply then add) within rounding: |diff| <= 1e-4 (|c| + 1) for k <= 2100
 * terms in [-1, 1] (the FMA and the multiply-add orders differ by about k 2^-24 |terms|),
 * where one wrong sliver or block gives errors of order 1. */
static void check_against_portable(const char *isa_opt) {
    for (size_t i = 0; i < sizeof path_cases / sizeof path_cases[0]; i++) {
        gemm_case c = path_cases[i];
        c.dt        = AMPX_F32;
        uint64_t b1, b2, bad = 0;
        float *r1    = (float *)gemm_run("isa=portable", NULL, &c, &b1);
        float *r2    = (float *)gemm_run(isa_opt, NULL, &c, &b2);
        double worst = 0.0;
        for (uint64_t e = 0; e < b1 / sizeof(float); e++) {
            if (r1[e] == r2[e] || (isnan(r1[e]) && isnan(r2[e]))) continue; /* inf, NaN */
            double d = fabs((double)r1[e] - (double)r2[e]) / (fabs((double)r1[e]) + 1.0);
            if (d > worst) worst = d;
            bad += !(d <= 1e-4);
        }
        cr_expect_eq(bad, 0u, "%s case %zu: %llu entries off the portable path (worst %g)", isa_opt,
                     i, (unsigned long long)bad, worst);
        free(r1);
        free(r2);
    }
}

Test(gemm, avx2_matches_portable, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_against_portable("isa=avx2");
}

Test(gemm, avx512_matches_portable, .timeout = 120) {
    NEED_PATH("avx512");
    check_against_portable("isa=avx512");
}

/* The AVX2 and AVX-512 f32 kernels both sum each element's products in k order with one
 * fused multiply-add each: the same bits, whatever the tile shapes. */
Test(gemm, avx512_same_bits_as_avx2, .timeout = 120) {
    NEED_PATH("avx512");
    for (size_t i = 0; i < sizeof path_cases / sizeof path_cases[0]; i++)
        cr_expect(same_c("isa=avx2", &path_cases[i], "isa=avx512", &path_cases[i]),
                  "case %zu: avx2 and avx512 differ", i);
}

/* vdpbf16ps adds the two products of a pair one after the other (fused, the pair's high
 * half first, where the packing puts the lower k): for normal values the bf16 kernel gives
 * the bits of the f32 kernel on widened operands. f16 and f32 inputs run the f32 kernel. */
Test(gemm, avx512bf16_same_bits_as_avx512, .timeout = 120) {
    NEED_PATH("avx512bf16");
    for (size_t i = 0; i < sizeof path_cases / sizeof path_cases[0]; i++)
        cr_expect(same_c("isa=avx512", &path_cases[i], "isa=avx512bf16", &path_cases[i]),
                  "case %zu: avx512 and avx512bf16 differ", i);
}

/* vdpbf16ps treats subnormal bf16 inputs as zero (DAZ; docs/CPU.md): with every 5th element
 * of A subnormal, the bf16 kernel gives the bits of the f32 kernel on A with those elements
 * set to zero; with all of A subnormal, C is zero on the bf16 kernel and not on the f32
 * kernel (which keeps subnormals: C ~ k 2^-131 is a bf16 subnormal). */
Test(gemm, avx512bf16_subnormal_inputs_count_as_zero, .timeout = 120) {
    NEED_PATH("avx512bf16");
    for (uint32_t t = 0; t < 2; t++) {
        gemm_case sub  = {67, 45, 99, 1, t, t, AMPX_BF16, 0.0f, 1, 0};
        gemm_case zero = sub, all = sub;
        zero.subnormal = 2;
        all.subnormal  = 3;
        cr_expect(same_c("isa=avx512bf16", &sub, "isa=avx512", &zero),
                  "trans %u: subnormal inputs do not count as zero", t);
        uint64_t b1, b2, nz1 = 0, nz2 = 0;
        uint16_t *r1 = (uint16_t *)gemm_run("isa=avx512bf16", NULL, &all, &b1);
        uint16_t *r2 = (uint16_t *)gemm_run("isa=avx512", NULL, &all, &b2);
        for (uint64_t i = 0; i < b1 / 2; i++) {
            nz1 += (r1[i] & 0x7fff) != 0;
            nz2 += (r2[i] & 0x7fff) != 0;
        }
        cr_expect_eq(nz1, 0u, "trans %u: %llu entries of C are not zero", t,
                     (unsigned long long)nz1);
        cr_expect_gt(nz2, b2 / 4, "trans %u: the f32 kernel lost the subnormal products", t);
        free(r1);
        free(r2);
    }
}

/* A narrow C (n = 1 .. 8, far below the sliver width) is computed as C^T = op(B)^T op(A)^T
 * and written back transposed. Each element still sums its k products in order with one
 * rounding each, so the narrow product's columns have the bits of the same columns of a
 * wide product (n = 64, not swapped) over the same buffers: the narrow run sees B and C
 * through ldb and ldc of the wide one. Every transpose, dtype, beta, one and several k
 * blocks, k below the fused-store depth, batches. */
static void check_narrow(const char *isa_opt) {
    static const struct {
        uint64_t m, k, batch, n_used;
        float beta;
    } shapes[] = {
        {200, 300, 1, 4, 0.0f}, {257, 600, 1, 3, 0.5f}, {100, 4, 1, 4, 0.0f},
        {130, 77, 3, 1, -1.0f}, {37, 41, 5, 8, 0.5f},
    };
    static const ampx_dtype dts[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (uint32_t t = 0; t < 4; t++)
            for (size_t d = 0; d < 3; d++) {
                gemm_case wide   = {shapes[i].m, 64,     shapes[i].k, shapes[i].batch,
                                    t & 1,       t >> 1, dts[d],      shapes[i].beta,
                                    0,           0};
                gemm_case narrow = wide;
                narrow.n_used    = shapes[i].n_used;
                uint64_t bw, bn;
                unsigned char *rw = gemm_run(isa_opt, NULL, &wide, &bw);
                unsigned char *rn = gemm_run(isa_opt, NULL, &narrow, &bn);
                size_t es         = ampx_dtype_size(dts[d]);
                uint64_t bad      = 0;
                for (uint64_t r = 0; r < wide.m * wide.batch; r++)
                    bad += memcmp(rw + r * 64 * es, rn + r * 64 * es, narrow.n_used * es) != 0;
                cr_expect_eq(bad, 0u, "%s shape %zu trans %u dtype %zu: %llu rows differ", isa_opt,
                             i, t, d, (unsigned long long)bad);
                free(rw);
                free(rn);
            }
}

Test(gemm, portable_narrow_same_bits_as_wide, .timeout = 120) {
    check_narrow("isa=portable");
}

Test(gemm, avx2_narrow_same_bits_as_wide, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_narrow("isa=avx2");
}

Test(gemm, avx512_narrow_same_bits_as_wide, .timeout = 120) {
    NEED_PATH("avx512");
    check_narrow("isa=avx512");
}

Test(gemm, avx512bf16_narrow_same_bits_as_wide, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_narrow("isa=avx512bf16");
}

/* f16 NaN inputs: a row of op(A) holding one NaN (signalling or quiet, either sign, its own
 * payload) gives NaN across its row of C with that NaN's sign and payload, quieted (each
 * product and sum keeps its one NaN operand, quieted), so every sliver path has the
 * portable path's bits there; the packs may widen a signalling NaN to its quiet form. Both
 * transposes of A (both pack forms), several k blocks, beta. */
static void check_f16_nan(const char *isa_opt) {
    for (uint32_t ta = 0; ta < 2; ta++) {
        gemm_case c = {100, 70, 300, 2, ta, 0, AMPX_F16, 0.5f, 5, 0};
        uint64_t b1, b2, nans = 0, bad = 0;
        uint16_t *r1 = (uint16_t *)gemm_run("isa=portable", NULL, &c, &b1);
        uint16_t *r2 = (uint16_t *)gemm_run(isa_opt, NULL, &c, &b2);
        for (uint64_t e = 0; e < b1 / 2; e++) {
            int nan1 = (r1[e] & 0x7fffu) > 0x7c00u, nan2 = (r2[e] & 0x7fffu) > 0x7c00u;
            nans += nan1;
            bad += nan1 != nan2 || (nan1 && r1[e] != r2[e]);
        }
        cr_expect_eq(nans, 2u * 34u * 70u, "%s ta %u: %llu NaN in C", isa_opt, ta,
                     (unsigned long long)nans);
        cr_expect_eq(bad, 0u, "%s ta %u: %llu NaN entries differ from the portable path", isa_opt,
                     ta, (unsigned long long)bad);
        free(r1);
        free(r2);
    }
}

Test(gemm, avx2_f16_nan_inputs_as_portable, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_f16_nan("isa=avx2");
}

Test(gemm, avx512_f16_nan_inputs_as_portable, .timeout = 120) {
    NEED_PATH("avx512");
    check_f16_nan("isa=avx512");
}

/* Shared packs cut k into blocks of up to GEMM_KC_DEEP (4096; here 2152 and 2150), the
 * per-tile packs into blocks of GEMM_KC (256). The split does not change an element's sum:
 * the first 40 columns of a 300 x 260 product (several rows and columns of tiles, shared
 * packs) have the bits of a 300 x 40 product over the same buffers (one column of tiles:
 * A packed per tile in 256-deep blocks, B up front), for every transpose and dtype, with
 * beta; and the deep product has the same bits on one thread and on two. */
static void check_deep_k(const char *isa_opt) {
    static const ampx_dtype dts[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (uint32_t t = 0; t < 4; t++)
        for (size_t d = 0; d < 3; d++) {
            gemm_case full = {300, 260, 4302, 1, t & 1, t >> 1, dts[d], 0.5f, 0, 0};
            gemm_case part = full;
            part.n_used    = 40;
            uint64_t bf, bp, b1;
            unsigned char *rf = gemm_run(isa_opt, "threads=2", &full, &bf);
            unsigned char *rp = gemm_run(isa_opt, "threads=2", &part, &bp);
            size_t es         = ampx_dtype_size(dts[d]);
            uint64_t bad      = 0;
            for (uint64_t r = 0; r < full.m; r++)
                bad += memcmp(rf + r * full.n * es, rp + r * full.n * es, part.n_used * es) != 0;
            cr_expect_eq(bad, 0u, "%s trans %u dtype %zu: %llu rows differ", isa_opt, t, d,
                         (unsigned long long)bad);
            if (t == 0) {
                unsigned char *r1 = gemm_run(isa_opt, "threads=1", &full, &b1);
                cr_expect(memcmp(r1, rf, bf) == 0, "%s dtype %zu: threads=1 and 2 differ", isa_opt,
                          d);
                free(r1);
            }
            free(rf);
            free(rp);
        }
}

Test(gemm, avx2_deep_k_blocks_same_bits_as_shallow, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_deep_k("isa=avx2");
}

Test(gemm, avx512_deep_k_blocks_same_bits_as_shallow, .timeout = 120) {
    NEED_PATH("avx512");
    check_deep_k("isa=avx512");
}

Test(gemm, avx512bf16_deep_k_blocks_same_bits_as_shallow, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_deep_k("isa=avx512bf16");
}

// ---------------------------------------------------------------------------------------
// Memory-bound ops: the AVX2 copies of the chunk loops use the same IEEE operations as the
// portable ones (ISO C, no contraction), so every path gives the same bits.

/* Runs one op on fresh data (NaN, inf, zeros and subnormals sprinkled in) under isa_opt and
 * returns the bytes of every buffer afterwards. */
static unsigned char *elementwise_run(const char *isa_opt, const char *opname, ampx_dtype dt,
                                      size_t *bytes_out) {
    enum { N = 70001, NB = 8 };
    dev d      = open_dev(isa_opt, NULL);
    float *src = malloc(N * sizeof *src);
    void *raw  = malloc(N * 4);
    cr_assert(src && raw);
    ampx_buffer *b[NB];
    ampx_dtype dts[NB] = {dt, dt, dt, AMPX_F32, AMPX_F32, AMPX_F32, AMPX_BF16, AMPX_I32};
    for (int t = 0; t < NB; t++) {
        for (uint64_t i = 0; i < N; i++) {
            uint32_t h = ampx_hash32(7 + (uint64_t)t, i);
            src[i]     = (float)((double)(h >> 8) / 4194304.0 - 2.0);
            if (h % 997 == 0) src[i] = ampx_f32_from_bits(0x7fc00001u); /* NaN */
            if (h % 991 == 0) src[i] = -INFINITY;
            if (h % 983 == 0) src[i] = 0.0f;
            if (h % 977 == 0) src[i] = 1e-40f; /* f32 subnormal */
        }
        if (t >= 3 && t <= 5) /* optimizer state: finite, v >= 0 */
            for (uint64_t i = 0; i < N; i++)
                src[i] = t == 5 ? (float)(ampx_hash32(t, i) >> 8) / 16777216.0f
                                : (float)((double)(ampx_hash32(t, i) >> 8) / 8388608.0 - 1.0);
        if (dts[t] == AMPX_I32) memset(src, 0, N * 4);
        if (dts[t] == AMPX_I32 || dts[t] == AMPX_F32)
            memcpy(raw, src, N * 4);
        else
            cast_on(&d, AMPX_F32, src, dts[t], raw, N);
        b[t] = upload(&d, raw, N * ampx_dtype_size(dts[t]));
    }
    ampx_scalars sc = {.scale         = 1024.0f,
                       .mode          = AMPX_SCALER_DYNAMIC,
                       .lr_base       = 0.01f,
                       .applied_steps = 3,
                       .hysteresis    = 1,
                       .max_scale     = INFINITY};
    ampx_buffer *sb = upload(&d, &sc, sizeof sc);
    ampx_tensor T[NB];
    for (int t = 0; t < NB; t++)
        T[t] = (ampx_tensor){b[t], 0, dts[t]};
    ampx_tensor S              = {sb, 0, AMPX_F32};
    uint64_t n_elems[1]        = {N};
    ampx_tensor_list one       = {1, &T[0], n_elems};
    ampx_tensor_list params    = {1, &T[3], n_elems};
    const ampx_backend_ops *op = d.t->ops;
    ampx_status st             = AMPX_ERR_INVALID;
    if (!strcmp(opname, "add")) {
        ampx_add_args a = {sizeof a, 0, N / 7, 7, 0.75f, -1.5f, T[0], T[1], T[2]};
        st              = op->add(d.ctx, &a);
    } else if (!strcmp(opname, "mul")) {
        ampx_mul_args a = {sizeof a, 1, N / 7, 7, T[0], T[1], T[2]};
        st              = op->mul(d.ctx, &a);
    } else if (!strcmp(opname, "scale")) {
        ampx_scale_args a = {.size = sizeof a, .n = N, .alpha = 0.3f, .x = T[0], .y = T[2]};
        st                = op->scale(d.ctx, &a);
    } else if (!strcmp(opname, "relu") || !strcmp(opname, "relu_bwd")) {
        ampx_act_args a = {
            .size = sizeof a, .act = AMPX_ACT_RELU, .n = N, .x = T[0], .dy = T[1], .y_or_dx = T[2]};
        st = !strcmp(opname, "relu") ? op->act_fwd(d.ctx, &a) : op->act_bwd(d.ctx, &a);
    } else if (!strncmp(opname, "gelu", 4) || !strncmp(opname, "sigmoid", 7) ||
               !strncmp(opname, "silu", 4)) { /* NAME or NAME_bwd */
        uint32_t act    = opname[0] == 'g'                       ? AMPX_ACT_GELU
                          : opname[1] == 'i' && opname[2] == 'g' ? AMPX_ACT_SIGMOID
                                                                 : AMPX_ACT_SILU;
        ampx_act_args a = {
            .size = sizeof a, .act = act, .n = N, .x = T[0], .dy = T[1], .y_or_dx = T[2]};
        st = strstr(opname, "_bwd") ? op->act_bwd(d.ctx, &a) : op->act_fwd(d.ctx, &a);
    } else if (!strcmp(opname, "unscale_check")) {
        ampx_unscale_check_args a = {.size = sizeof a, .grads = one, .flags = T[7], .scalars = S};
        st                        = op->unscale_check(d.ctx, &a);
    } else if (!strcmp(opname, "grad_stats")) {
        ampx_tensor st4 = {b[4], 0, AMPX_F32}, cn = {b[7], 16, AMPX_I32}, nc = {b[7], 64, AMPX_I32};
        ampx_grad_stats_args a = {sizeof a, AMPX_BF16, one, st4, cn, nc};
        st                     = op->grad_stats(d.ctx, &a);
    } else if (!strcmp(opname, "sum_squares") || !strcmp(opname, "amp_pass") ||
               !strcmp(opname, "amp_pass_finite")) {
        /* amp_pass over g and two f32 state tensors (with NaN and inf from g), or over the
         * finite state tensors alone, so that the square sum is compared as a number too */
        int finite             = strcmp(opname, "amp_pass");
        ampx_tensor gl[3]      = {T[0], T[3], T[5]};
        uint64_t ns[3]         = {N, N, N - 3};
        ampx_dtype targets[3]  = {AMPX_F16, AMPX_BF16, AMPX_F32};
        ampx_tensor_list grads = {finite ? 2 : 3, finite ? gl + 1 : gl, ns};
        ampx_tensor sq = {b[4], 0, AMPX_F32}, st4 = {b[4], 64, AMPX_F32};
        ampx_tensor cn = {b[7], 16, AMPX_I32}, nc = {b[7], 64, AMPX_I32};
        if (!strcmp(opname, "sum_squares")) {
            ampx_sum_squares_args a = {sizeof a, 0, grads, sq};
            st                      = op->sum_squares(d.ctx, &a);
        } else {
            ampx_amp_pass_args a = {.size       = sizeof a,
                                    .grads      = grads,
                                    .flags      = T[7],
                                    .scalars    = S,
                                    .sq_sum     = sq,
                                    .targets    = targets,
                                    .stats      = st4,
                                    .counts     = cn,
                                    .nan_counts = nc};
            st                   = op->amp_pass(d.ctx, &a);
        }
    } else if (!strcmp(opname, "sgd")) {
        ampx_tensor g   = T[1];
        ampx_sgd_args a = {.size         = sizeof a,
                           .nesterov     = 1,
                           .momentum     = 0.9f,
                           .dampening    = 0.1f,
                           .weight_decay = 0.01f,
                           .params       = params,
                           .grads        = &g,
                           .momentum_buf = &T[4],
                           .copies       = &T[6],
                           .scalars      = S};
        st              = op->sgd(d.ctx, &a);
    } else if (!strcmp(opname, "adamw")) {
        ampx_tensor g     = T[1];
        ampx_adamw_args a = {.size         = sizeof a,
                             .beta1        = 0.9f,
                             .beta2        = 0.999f,
                             .eps          = 1e-8f,
                             .weight_decay = 0.01f,
                             .params       = params,
                             .grads        = &g,
                             .m            = &T[4],
                             .v            = &T[5],
                             .copies       = &T[6],
                             .scalars      = S};
        st                = op->adamw(d.ctx, &a);
    }
    cr_assert_eq(st, AMPX_OK, "%s %s: %s", isa_opt, opname, ampx_backend_last_error(d.be));
    size_t total = sizeof sc;
    for (int t = 0; t < NB; t++)
        total += N * ampx_dtype_size(dts[t]);
    unsigned char *out = malloc(total), *p = out;
    for (int t = 0; t < NB; t++) {
        size_t nb = N * ampx_dtype_size(dts[t]);
        cr_assert_eq(d.t->buffer_read(d.ctx, b[t], 0, p, nb), AMPX_OK);
        p += nb;
        d.t->buffer_free(d.ctx, b[t]);
    }
    cr_assert_eq(d.t->buffer_read(d.ctx, sb, 0, p, sizeof sc), AMPX_OK);
    d.t->buffer_free(d.ctx, sb);
    free(src);
    free(raw);
    ampx_backend_close(d.be);
    *bytes_out = total;
    return out;
}

/* The AVX-512 tables run their own (512-bit) copies of the chunk loops: checked too. */
static void check_elementwise(const char *isa_opt) {
    static const char *const ops[] = {
        "add",           "mul",        "scale",       "relu",     "relu_bwd",
        "unscale_check", "grad_stats", "sum_squares", "amp_pass", "amp_pass_finite",
        "sgd",           "adamw"};
    static const ampx_dtype dts[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < 3; k++) {
            size_t np, na;
            unsigned char *p = elementwise_run("isa=portable", ops[o], dts[k], &np);
            unsigned char *a = elementwise_run(isa_opt, ops[o], dts[k], &na);
            cr_assert_eq(np, na);
            size_t first = np;
            for (size_t i = 0; i < np && first == np; i++)
                if (p[i] != a[i]) first = i;
            cr_expect_eq(first, np, "%s %s: portable and %s differ from byte %zu", ops[o],
                         ampx_dtype_name(dts[k]), isa_opt, first);
            free(p);
            free(a);
        }
}

Test(elementwise, avx2_same_bits_as_portable, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_elementwise("isa=avx2");
}

/* gelu, sigmoid and silu: the AVX-512 paths run sixteen lanes of the AVX2 path's f32
 * operations (the portable path evaluates them in double: other bits). On the AVX512-BF16
 * path bf16 outputs are rounded by vcvtneps2bf16, which reads f32 subnormals as zero: the
 * subnormal dy sprinkled into the data give subnormal backward results, whose bf16 bits must
 * still be dtype.h's. */
static void check_transcendentals(const char *isa_opt) {
    static const char *const ops[] = {"gelu",        "gelu_bwd", "sigmoid",
                                      "sigmoid_bwd", "silu",     "silu_bwd"};
    static const ampx_dtype dts[]  = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < 3; k++) {
            size_t na, nb;
            unsigned char *a = elementwise_run("isa=avx2", ops[o], dts[k], &na);
            unsigned char *b = elementwise_run(isa_opt, ops[o], dts[k], &nb);
            cr_assert_eq(na, nb);
            size_t first = na;
            for (size_t i = 0; i < na && first == na; i++)
                if (a[i] != b[i]) first = i;
            cr_expect_eq(first, na, "%s %s: avx2 and %s differ from byte %zu", ops[o],
                         ampx_dtype_name(dts[k]), isa_opt, first);
            free(a);
            free(b);
        }
}

Test(elementwise, transcendentals_avx512_same_bits_as_avx2, .timeout = 120) {
    NEED_PATH("avx512");
    check_transcendentals("isa=avx512");
}

Test(elementwise, transcendentals_avx512bf16_same_bits_as_avx2, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_transcendentals("isa=avx512bf16");
}

Test(elementwise, avx512bf16_same_bits_as_portable, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_elementwise("isa=avx512bf16");
}

// ---------------------------------------------------------------------------------------
// Row kernels (softmax forward and backward, log-softmax, causal and pre-scaled softmax,
// softmax-cross-entropy, layernorm forward and backward): the AVX-512 paths run the AVX2
// path's f32 operations sixteen lanes at a time, reading and writing bf16 and f16 in
// registers where the AVX2 path widens into f32 scratch, so every output has the AVX2
// path's bits (the portable path works in double: other bits). A wrong rounding in a
// converter, a lane order that differs or a mishandled row tail shows as a differing byte.

/* Widths around every vector and tail length, one past SOFTMAX_CACHED_COLS (16384). */
static const uint64_t row_shapes[][2] = {{3, 1},  {5, 7},  {4, 8},   {4, 15},   {4, 16},
                                         {3, 17}, {3, 37}, {2, 100}, {3, 1029}, {1, 20000}};

#define ROWS_MAXN 20000 /* elements per tensor region of rows_run_as' output */
#define ROWS_ST 160     /* its statistics region: mean, rstd, labels, loss */

/* Host-side conversions with dtype.h (independent of the plugin). */
static void host_narrow(const float *src, ampx_dtype dt, void *dst, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (dt == AMPX_F32)
            ((float *)dst)[i] = src[i];
        else
            ((uint16_t *)dst)[i] =
                dt == AMPX_BF16 ? ampx_f32_to_bf16(src[i]) : ampx_f32_to_f16(src[i]);
}

/* Runs one row op (or activation) on fresh data (NaN, inf and subnormals in a few rows) of
 * dtype dt under isa_opt over every shape and returns the bytes of every buffer afterwards.
 * With via_f32 the op runs in f32 on the values of dt widened exactly, and its f32 outputs
 * are rounded to dt on the host: what a bf16/f16 op must give when it computes in f32 and
 * rounds each output once. */
static unsigned char *rows_run_as(const char *isa_opt, const char *opname, ampx_dtype dt,
                                  int via_f32, size_t *bytes_out) {
    enum { MAXN = ROWS_MAXN, NB = 7, ST_BYTES = ROWS_ST }; /* st: mean, rstd, labels, loss */
    dev d              = open_dev(isa_opt, NULL);
    size_t es          = ampx_dtype_size(dt);
    ampx_dtype rdt     = via_f32 ? AMPX_F32 : dt; /* the dtype the op runs on */
    size_t res         = ampx_dtype_size(rdt);
    size_t per         = (size_t)MAXN * (es * 3 + 4 * 4) + ST_BYTES;
    size_t nshape      = sizeof row_shapes / sizeof row_shapes[0];
    unsigned char *out = malloc(per * nshape), *p = out;
    float *src = malloc(MAXN * sizeof *src);
    void *raw  = malloc(MAXN * 4);
    float *rd  = malloc(MAXN * 4);
    cr_assert(out && src && raw && rd);
    for (size_t s = 0; s < nshape; s++) {
        uint64_t rows = row_shapes[s][0], cols = row_shapes[s][1], n = rows * cols;
        ampx_buffer *b[NB]; /* x, dy, y in dt; gamma, beta, dgamma, dbeta f32 */
        for (int t = 0; t < NB; t++) {
            int f32    = t >= 3;
            uint64_t m = f32 ? cols : n;
            for (uint64_t i = 0; i < m; i++) {
                uint32_t h = ampx_hash32(31 + (uint64_t)t + 8 * s, i);
                src[i]     = (float)((double)(h >> 8) / 1048576.0 - 8.0);
                if (!f32 && i / cols == 1) { /* row 1 holds the specials */
                    if (h % 97 == 0) src[i] = ampx_f32_from_bits(0x7fc00001u);
                    if (h % 89 == 0) src[i] = -INFINITY;
                    if (h % 83 == 0) src[i] = 1e-40f;
                }
                /* NAME_tiny: dy near the bottom of the f32 range, so that the gradients
                 * are partly subnormal (a rounding that flushes them shows) */
                if (t == 1 && strstr(opname, "_tiny")) src[i] *= 0x1p-124f;
            }
            if (f32) {
                memcpy(raw, src, m * 4);
            } else {
                host_narrow(src, dt, raw, m);
                if (via_f32) { /* the same values, widened exactly */
                    uint16_t *h = raw;
                    for (uint64_t i = 0; i < m; i++)
                        rd[i] = dt == AMPX_F32    ? src[i]
                                : dt == AMPX_BF16 ? ampx_bf16_to_f32(h[i])
                                                  : ampx_f16_to_f32(h[i]);
                    memcpy(raw, rd, m * 4);
                }
            }
            b[t] = upload(&d, raw, m * (f32 ? 4 : res));
        }
        static const unsigned char zeros[ST_BYTES];
        ampx_buffer *st = upload(&d, zeros, ST_BYTES); /* mean, rstd, labels, loss */
        int32_t labels[4];
        for (uint64_t r = 0; r < 4; r++)
            labels[r] = r == 2 ? -100 : (int32_t)((r * 7919u + 3) % cols);
        cr_assert_eq(d.t->buffer_write(d.ctx, st, 128, labels, sizeof labels), AMPX_OK);
        ampx_tensor X = {b[0], 0, rdt}, DY = {b[1], 0, rdt}, Y = {b[2], 0, rdt};
        ampx_tensor G = {b[3], 0, AMPX_F32}, BE = {b[4], 0, AMPX_F32};
        ampx_tensor DG = {b[5], 0, AMPX_F32}, DB = {b[6], 0, AMPX_F32};
        ampx_tensor MEAN = {st, 0, AMPX_F32}, RSTD = {st, 64, AMPX_F32};
        const ampx_backend_ops *op = d.t->ops;
        ampx_status rc             = AMPX_ERR_INVALID;
        if (!strncmp(opname, "softmax", 7) || !strncmp(opname, "log_softmax", 11)) {
            int bwd             = strstr(opname, "_bwd") != NULL;
            int causal          = strstr(opname, "causal") != NULL;
            ampx_softmax_args a = {.size    = sizeof a,
                                   .causal  = (uint32_t)causal,
                                   .log     = opname[0] == 'l',
                                   .rows    = rows,
                                   .cols    = cols,
                                   .seq_q   = causal ? rows : 1,
                                   .scale   = causal ? 0.37f : 1.0f,
                                   .x_or_y  = X,
                                   .dy      = DY,
                                   .y_or_dx = strstr(opname, "inplace") ? X : Y};
            if (causal && cols < rows) a.seq_q = cols;
            if (causal && rows % a.seq_q) a.causal = 0;
            rc = bwd ? op->softmax_bwd(d.ctx, &a) : op->softmax_fwd(d.ctx, &a);
        } else if (!strcmp(opname, "xent")) {
            uint64_t xr              = rows < 4 ? rows : 4;
            ampx_softmax_xent_args a = {.size         = sizeof a,
                                        .ignore_index = -100,
                                        .rows         = xr,
                                        .cols         = cols,
                                        .grad_scale   = 0.75f,
                                        .logits       = X,
                                        .labels       = {st, 128, AMPX_I32},
                                        .loss         = {st, 144, AMPX_F32},
                                        .dlogits      = Y};
            rc                       = op->softmax_xent(d.ctx, &a);
        } else if (!strncmp(opname, "gelu", 4) || !strncmp(opname, "sigmoid", 7) ||
                   !strncmp(opname, "silu", 4)) { /* NAME or NAME_bwd over the whole tensor */
            uint32_t act    = opname[0] == 'g'                       ? AMPX_ACT_GELU
                              : opname[1] == 'i' && opname[2] == 'g' ? AMPX_ACT_SIGMOID
                                                                     : AMPX_ACT_SILU;
            ampx_act_args a = {
                .size = sizeof a, .act = act, .n = n, .x = X, .dy = DY, .y_or_dx = Y};
            rc = strstr(opname, "_bwd") ? op->act_bwd(d.ctx, &a) : op->act_fwd(d.ctx, &a);
        } else if (!strncmp(opname, "layernorm", 9)) { /* layernorm, layernorm_bwd(_tiny) */
            ampx_layernorm_args a = {.size    = sizeof a,
                                     .rows    = rows,
                                     .cols    = cols,
                                     .eps     = 1e-5f,
                                     .x       = X,
                                     .gamma   = G,
                                     .beta    = BE,
                                     .mean    = MEAN,
                                     .rstd    = RSTD,
                                     .y_or_dx = Y};
            rc                    = op->layernorm_fwd(d.ctx, &a);
            if (rc == AMPX_OK && opname[9]) {
                a.beta   = (ampx_tensor){0};
                a.dy     = DY;
                a.dgamma = DG;
                a.dbeta  = DB;
                rc       = op->layernorm_bwd(d.ctx, &a);
            }
        }
        cr_assert_eq(rc, AMPX_OK, "%s %s: %s", isa_opt, opname, ampx_backend_last_error(d.be));
        memset(p, 0, per);
        unsigned char *q = p;
        for (int t = 0; t < NB; t++) {
            if (t < 3 && via_f32) { /* round the f32 results to dt on the host */
                cr_assert_eq(d.t->buffer_read(d.ctx, b[t], 0, rd, n * 4), AMPX_OK);
                host_narrow(rd, dt, q, n);
            } else {
                size_t nb = (t >= 3 ? cols * 4 : n * es);
                cr_assert_eq(d.t->buffer_read(d.ctx, b[t], 0, q, nb), AMPX_OK);
            }
            q += (size_t)MAXN * (t >= 3 ? 4 : es);
            d.t->buffer_free(d.ctx, b[t]);
        }
        cr_assert_eq(d.t->buffer_read(d.ctx, st, 0, q, ST_BYTES), AMPX_OK);
        d.t->buffer_free(d.ctx, st);
        p += per;
    }
    free(src);
    free(raw);
    free(rd);
    ampx_backend_close(d.be);
    *bytes_out = per * nshape;
    return out;
}

static unsigned char *rows_run(const char *isa_opt, const char *opname, ampx_dtype dt,
                               size_t *bytes_out) {
    return rows_run_as(isa_opt, opname, dt, 0, bytes_out);
}

static int is_nan_bits(const unsigned char *p, size_t w, ampx_dtype dt) {
    uint32_t u = 0;
    memcpy(&u, p, w);
    if (w == 4) return (u & 0x7fffffffu) > 0x7f800000u;
    return dt == AMPX_BF16 ? (u & 0x7fffu) > 0x7f80u : (u & 0x7fffu) > 0x7c00u;
}

/* The first byte where two outputs of rows_run_as (dtype dt) differ, n if none: elements
 * compare by their bits, except that two NaNs are equal (a row with a NaN is NaN throughout,
 * and which NaN operand a commutative add returns depends on the operand order the compiler
 * picks). */
static size_t rows_first_difference(const unsigned char *a, const unsigned char *b, size_t n,
                                    ampx_dtype dt) {
    size_t es = ampx_dtype_size(dt), per = (size_t)ROWS_MAXN * (es * 3 + 16) + ROWS_ST;
    for (size_t i = 0; i < n;) {
        size_t w = i % per < (size_t)ROWS_MAXN * es * 3 ? es : 4;
        if (memcmp(a + i, b + i, w) && !(is_nan_bits(a + i, w, dt) && is_nan_bits(b + i, w, dt)))
            return i;
        i += w;
    }
    return n;
}

static void check_rows_same_bits(const char *isa_a, const char *isa_b) {
    static const char *const ops[] = {"softmax",
                                      "log_softmax",
                                      "softmax_causal",
                                      "log_softmax_causal",
                                      "softmax_inplace",
                                      "log_softmax_inplace",
                                      "softmax_bwd",
                                      "log_softmax_bwd",
                                      "softmax_causal_bwd",
                                      "xent",
                                      "layernorm",
                                      "layernorm_bwd",
                                      "softmax_bwd_tiny",
                                      "layernorm_bwd_tiny"};
    static const ampx_dtype dts[]  = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < 3; k++) {
            size_t na, nb;
            unsigned char *a = rows_run(isa_a, ops[o], dts[k], &na);
            unsigned char *b = rows_run(isa_b, ops[o], dts[k], &nb);
            cr_assert_eq(na, nb);
            size_t first = rows_first_difference(a, b, na, dts[k]);
            cr_expect_eq(first, na, "%s %s: %s and %s differ from byte %zu", ops[o],
                         ampx_dtype_name(dts[k]), isa_a, isa_b, first);
            free(a);
            free(b);
        }
}

Test(rows, avx512_same_bits_as_avx2, .timeout = 120) {
    NEED_PATH("avx512");
    check_rows_same_bits("isa=avx2", "isa=avx512");
}

Test(rows, avx512bf16_same_bits_as_avx2, .timeout = 120) {
    NEED_PATH("avx512bf16");
    check_rows_same_bits("isa=avx2", "isa=avx512bf16");
}

// ---------------------------------------------------------------------------------------
// The AMP pass on bf16 and f16 gradients (UNSCALE_CHECK, GRAD_STATS, AMP_PASS with and
// without unscaling): the AVX-512 paths read the gradients where they lie and unscale,
// round, check and square them in registers; the portable and AVX2 paths go through an f32
// chunk. The gradients are finite (so the square sum is compared as a number), the scale 3
// (so unscaling rounds) and the lengths leave tails of every size; in the _huge runs one
// f32 or bf16 tensor holds values whose squares overflow f32 (the double re-sum of a
// block's lane, and the check's scan of the values once the square sum is inf).

static unsigned char *amp_bits_run(const char *isa_opt, const char *opname, ampx_dtype dt,
                                   size_t *bytes_out) {
    enum { NT = 4, NMAX = 70001 };
    static const uint64_t ns[NT] = {NMAX, 4096 + 15, 37, 1000};
    dev d                        = open_dev(isa_opt, NULL);
    int huge                     = strstr(opname, "huge") && dt != AMPX_F16;
    float *src                   = malloc(NMAX * sizeof *src);
    void *raw                    = malloc(NMAX * 4);
    cr_assert(src && raw);
    ampx_buffer *b[NT];
    ampx_tensor T[NT];
    for (int t = 0; t < NT; t++) {
        for (uint64_t i = 0; i < ns[t]; i++) {
            uint32_t h = ampx_hash32(101 + (uint64_t)t, i);
            double mag = ldexp(1.0, (int)(h % 40) - 30); /* 2^-30 .. 2^9, below f16's max */
            src[i]     = (float)(((double)(h >> 8) / 8388608.0 - 1.0) * mag);
            if (h % 211 == 0) src[i] = 0.0f;
            if (huge && t == 3 && h % 101 == 0) src[i] = 3e30f; /* square > FLT_MAX */
        }
        cast_on(&d, AMPX_F32, src, dt, raw, ns[t]);
        b[t] = upload(&d, raw, ns[t] * ampx_dtype_size(dt));
        T[t] = (ampx_tensor){b[t], 0, dt};
    }
    ampx_scalars sc = {.scale = 3.0f,
                       .mode  = strstr(opname, "noscale") ? AMPX_SCALER_NONE : AMPX_SCALER_DYNAMIC,
                       .max_scale = INFINITY};
    ampx_buffer *sb = upload(&d, &sc, sizeof sc);
    static const unsigned char zeros[512];
    ampx_buffer *ob = upload(&d, zeros, sizeof zeros); /* flags, sq, stats, counts, nans */
    ampx_tensor S = {sb, 0, AMPX_F32}, FL = {ob, 0, AMPX_I32}, SQ = {ob, 32, AMPX_F32};
    ampx_tensor ST = {ob, 64, AMPX_F32}, CN = {ob, 192, AMPX_I32}, NC = {ob, 320, AMPX_I32};
    ampx_tensor_list grads     = {NT, T, ns};
    ampx_dtype targets[NT]     = {AMPX_BF16, AMPX_F16, AMPX_F32, AMPX_BF16};
    const ampx_backend_ops *op = d.t->ops;
    ampx_status rc;
    if (!strcmp(opname, "unscale_check")) {
        ampx_unscale_check_args a = {.size = sizeof a, .grads = grads, .flags = FL, .scalars = S};
        rc                        = op->unscale_check(d.ctx, &a);
    } else if (!strncmp(opname, "grad_stats", 10)) {
        ampx_grad_stats_args a = {sizeof a, AMPX_F16, grads, ST, CN, NC};
        rc                     = op->grad_stats(d.ctx, &a);
    } else {
        ampx_amp_pass_args a = {.size       = sizeof a,
                                .grads      = grads,
                                .flags      = FL,
                                .scalars    = S,
                                .sq_sum     = SQ,
                                .targets    = targets,
                                .stats      = ST,
                                .counts     = CN,
                                .nan_counts = NC};
        rc                   = op->amp_pass(d.ctx, &a);
    }
    cr_assert_eq(rc, AMPX_OK, "%s %s: %s", isa_opt, opname, ampx_backend_last_error(d.be));
    size_t total = sizeof sc + sizeof zeros;
    for (int t = 0; t < NT; t++)
        total += ns[t] * ampx_dtype_size(dt);
    unsigned char *out = malloc(total), *p = out;
    cr_assert(out);
    for (int t = 0; t < NT; t++) {
        size_t nb = ns[t] * ampx_dtype_size(dt);
        cr_assert_eq(d.t->buffer_read(d.ctx, b[t], 0, p, nb), AMPX_OK);
        p += nb;
        d.t->buffer_free(d.ctx, b[t]);
    }
    cr_assert_eq(d.t->buffer_read(d.ctx, sb, 0, p, sizeof sc), AMPX_OK);
    cr_assert_eq(d.t->buffer_read(d.ctx, ob, 0, p + sizeof sc, sizeof zeros), AMPX_OK);
    d.t->buffer_free(d.ctx, sb);
    d.t->buffer_free(d.ctx, ob);
    free(src);
    free(raw);
    ampx_backend_close(d.be);
    *bytes_out = total;
    return out;
}

static void check_amp_same_bits(const char *isa_opt) {
    static const char *const ops[] = {"unscale_check", "grad_stats",    "grad_stats_huge",
                                      "amp_pass",      "amp_pass_huge", "amp_pass_noscale"};
    static const ampx_dtype dts[]  = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < 3; k++) {
            size_t np, na;
            unsigned char *p = amp_bits_run("isa=portable", ops[o], dts[k], &np);
            unsigned char *a = amp_bits_run(isa_opt, ops[o], dts[k], &na);
            cr_assert_eq(np, na);
            size_t first = np;
            for (size_t i = 0; i < np && first == np; i++)
                if (p[i] != a[i]) first = i;
            cr_expect_eq(first, np, "%s %s: portable and %s differ from byte %zu of %zu", ops[o],
                         ampx_dtype_name(dts[k]), isa_opt, first, np);
            free(p);
            free(a);
        }
}

Test(amp, avx2_same_bits_as_portable, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_amp_same_bits("isa=avx2");
}

Test(amp, avx512_same_bits_as_portable, .timeout = 120) {
    NEED_PATH("avx512");
    check_amp_same_bits("isa=avx512");
}

/* On every path, a bf16 or f16 row op or activation gives exactly the op in f32 on the
 * widened values with each output rounded once by dtype.h: the in-register converters of
 * the AVX2 and AVX-512 paths and the f32 chunks of the portable one round like dtype.h. */
static void check_rows_as_widened(const char *isa_opt) {
    static const char *const ops[] = {
        "softmax",         "log_softmax", "softmax_causal", "softmax_inplace", "softmax_bwd",
        "log_softmax_bwd", "xent",        "layernorm",      "layernorm_bwd",   "gelu",
        "gelu_bwd",        "sigmoid",     "silu_bwd"};
    static const ampx_dtype dts[] = {AMPX_BF16, AMPX_F16};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < 2; k++) {
            size_t na, nb;
            unsigned char *a = rows_run_as(isa_opt, ops[o], dts[k], 0, &na);
            unsigned char *b = rows_run_as(isa_opt, ops[o], dts[k], 1, &nb);
            cr_assert_eq(na, nb);
            size_t first = na;
            for (size_t i = 0; i < na && first == na; i++)
                if (a[i] != b[i]) first = i;
            cr_expect_eq(first, na, "%s %s on %s: differs from the f32 op rounded once, byte %zu",
                         ops[o], ampx_dtype_name(dts[k]), isa_opt, first);
            free(a);
            free(b);
        }
}

Test(rows, portable_16bit_is_f32_rounded_once, .timeout = 120) {
    check_rows_as_widened("isa=portable");
}

Test(rows, avx2_16bit_is_f32_rounded_once, .timeout = 120) {
    if (!machine_has_avx2()) cr_skip_test("skipped: this CPU lacks avx2+fma+f16c");
    check_rows_as_widened("isa=avx2");
}

Test(rows, avx512_16bit_is_f32_rounded_once, .timeout = 120) {
    NEED_PATH("avx512");
    check_rows_as_widened("isa=avx512");
}

// ---------------------------------------------------------------------------------------
// relu forward quiets a signalling NaN the same way on every path (x + x): the portable
// path once relied on a double round trip the compiler folds away, and returned it as is.

Test(elementwise, relu_quiets_signalling_nan_on_every_path) {
    enum { N = 37 }; /* a full vector and a masked tail on every path */
    float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - 18);
    x[3]  = ampx_f32_from_bits(0x7f800001u); /* signalling NaNs, both signs */
    x[20] = ampx_f32_from_bits(0xff800123u);
    x[36] = ampx_f32_from_bits(0x7fc00005u); /* quiet: kept */
    for (size_t p = 0; p < N_PATHS; p++) {
        if (!machine_has(paths[p])) continue;
        char opt[32];
        snprintf(opt, sizeof opt, "isa=%s", paths[p]);
        dev d           = open_dev(opt, NULL);
        ampx_buffer *bx = upload(&d, x, sizeof x), *by = upload(&d, NULL, sizeof y);
        ampx_act_args a = {.size    = sizeof a,
                           .act     = AMPX_ACT_RELU,
                           .n       = N,
                           .x       = {bx, 0, AMPX_F32},
                           .y_or_dx = {by, 0, AMPX_F32}};
        cr_assert_eq(d.t->ops->act_fwd(d.ctx, &a), AMPX_OK);
        cr_assert_eq(d.t->buffer_read(d.ctx, by, 0, y, sizeof y), AMPX_OK);
        for (int i = 0; i < N; i++) {
            uint32_t want = i == 3    ? 0x7fc00001u
                            : i == 20 ? 0xffc00123u
                            : i == 36 ? 0x7fc00005u
                                      : ampx_f32_bits(x[i] > 0.0f ? x[i] : 0.0f);
            cr_expect_eq(ampx_f32_bits(y[i]), want, "%s: relu(x[%d]) = 0x%08x, want 0x%08x",
                         paths[p], i, ampx_f32_bits(y[i]), want);
        }
        d.t->buffer_free(d.ctx, bx);
        d.t->buffer_free(d.ctx, by);
        ampx_backend_close(d.be);
    }
}
