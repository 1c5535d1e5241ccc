/* bench.c — `ampx bench`: how fast a backend runs one op, through the public API only, so
 * it measures every backend (cpu, opencl, cuda, a vendor's plugin) the same way.
 *
 *   ampx bench gemm --backend B --dtype bf16|f16|f32 --m M --n N --k K [--trans-a]
 *                   [--trans-b] [--batch N] [--warmup W] [--reps R] [--json]
 *   ampx bench op NAME --backend B --dtype D --n N [--cols C] [--warmup W] [--reps R] [--json]
 *
 * Each repetition is timed with CLOCK_MONOTONIC around enqueue + synchronize; after the
 * warm-up runs the median is reported (and min and max). GEMM reports GFLOP/s (2 m n k
 * batch flops) and checks 16 entries of C against a double-precision product, so a fast
 * wrong kernel cannot pass unnoticed. Memory-bound ops report GB/s of the bytes the op must
 * move, beside a buffer copy of the same size timed in the same run (the machine's
 * bandwidth as this backend sees it). With --json the last line of stdout is one JSON
 * object.
 */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "ampx/ampx.h"
#include "cli.h"

#define BENCH_MAX_REPS 1000

// ---------------------------------------------------------------------------------------
// Shared state and helpers

typedef struct bench {
    ampx_backend *be;
    const ampx_backend_iface *t;
    ampx_context *ctx;
    ampx_buffer *bufs[16];
    int n_bufs;
    char err[2048];
} bench;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* splitmix64: the benchmark's data, the same on every run. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_unit(uint64_t *s) { /* uniform in [-1, 1) */
    return (float)((double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* Allocates a buffer of n elements of dt filled with uniform [-1, 1) values rounded to dt
 * (or zeros); 0 on success, else a message in b->err. */
static int bench_tensor(bench *b, ampx_dtype dt, uint64_t n, int zero, uint64_t seed,
                        ampx_tensor *out) {
    size_t es = ampx_dtype_size(dt);
    if (n > (uint64_t)(SIZE_MAX / 8) || b->n_bufs >= (int)(sizeof b->bufs / sizeof b->bufs[0])) {
        snprintf(b->err, sizeof b->err, "tensor of %llu elements is too large",
                 (unsigned long long)n);
        return -1;
    }
    ampx_buffer *buf = NULL;
    if (b->t->buffer_alloc(b->ctx, n * es, &buf) != AMPX_OK) {
        snprintf(b->err, sizeof b->err, "cannot allocate %llu bytes on the device: %s",
                 (unsigned long long)(n * es), ampx_backend_last_error(b->be));
        return -1;
    }
    b->bufs[b->n_bufs++] = buf;
    *out                 = (ampx_tensor){buf, 0, dt};
    const uint64_t chunk = 1u << 20;
    void *host           = malloc(chunk * es);
    if (!host) {
        snprintf(b->err, sizeof b->err, "out of host memory");
        return -1;
    }
    uint64_t s = seed;
    for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
        uint64_t len = n - i0 < chunk ? n - i0 : chunk;
        for (uint64_t i = 0; i < len; i++) {
            float v = zero ? 0.0f : rng_unit(&s);
            if (dt == AMPX_F32)
                ((float *)host)[i] = v;
            else if (dt == AMPX_BF16)
                ((uint16_t *)host)[i] = ampx_f32_to_bf16(v);
            else if (dt == AMPX_F16)
                ((uint16_t *)host)[i] = ampx_f32_to_f16(v);
            else if (ampx_dtype_is_fp8(dt))
                ((uint8_t *)host)[i] = ampx_f32_to_fp8(v, dt, 1);
            else
                ((int32_t *)host)[i] = 0;
        }
        if (b->t->buffer_write(b->ctx, buf, i0 * es, host, len * es) != AMPX_OK) {
            snprintf(b->err, sizeof b->err, "buffer_write failed: %s",
                     ampx_backend_last_error(b->be));
            free(host);
            return -1;
        }
    }
    free(host);
    return 0;
}

static void bench_close(bench *b) {
    if (b->t)
        for (int i = 0; i < b->n_bufs; i++)
            b->t->buffer_free(b->ctx, b->bufs[i]);
    ampx_backend_close(b->be);
}

/* The device's name and the kernel path: the "isa=..." word of its description when there
 * is one, else the description. */
static void bench_device(bench *b, char *name, size_t name_cap, char *kernel, size_t kcap) {
    ampx_device_info info = {.size = sizeof info};
    name[0] = kernel[0] = '\0';
    if (ampx_backend_device_info(b->be, &info) != AMPX_OK) return;
    snprintf(name, name_cap, "%s", info.name);
    const char *isa = strstr(info.description, "isa=");
    if (isa) {
        size_t len = strcspn(isa + 4, " ,;()");
        snprintf(kernel, kcap, "%.*s", (int)len, isa + 4);
    } else {
        snprintf(kernel, kcap, "%s", info.description);
    }
}

typedef ampx_status (*bench_fn)(bench *b, void *arg);

typedef struct timing {
    double median_s, min_s, max_s;
    int reps;
} timing;

/* Runs fn warmup times, then reps times (reps 0: at least 5 and until 1 s has passed),
 * each timed around enqueue + synchronize. 0 on success, else a message in b->err. */
static int bench_time(bench *b, bench_fn fn, void *arg, int warmup, int reps, timing *out) {
    static double times[BENCH_MAX_REPS];
    for (int i = 0; i < warmup; i++)
        if (fn(b, arg) != AMPX_OK || b->t->synchronize(b->ctx) != AMPX_OK) goto fail;
    int n        = 0;
    double start = now_s();
    while (n < BENCH_MAX_REPS && (reps > 0 ? n < reps : (n < 5 || now_s() - start < 1.0))) {
        double t0 = now_s();
        if (fn(b, arg) != AMPX_OK || b->t->synchronize(b->ctx) != AMPX_OK) goto fail;
        times[n++] = now_s() - t0;
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    out->reps     = n;
    out->min_s    = times[0];
    out->max_s    = times[n - 1];
    out->median_s = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    return 0;
fail:
    snprintf(b->err, sizeof b->err, "the op failed: %s", ampx_backend_last_error(b->be));
    return -1;
}

static int bench_open(bench *b, const char *backend, const char **opts, uint32_t n_opts) {
    memset(b, 0, sizeof *b);
    if (ampx_backend_open(backend, opts, n_opts, &b->be, b->err, sizeof b->err) != AMPX_OK)
        return -1;
    b->t   = ampx_backend_iface_of(b->be);
    b->ctx = ampx_backend_context(b->be);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Options: one struct and one table per benchmark

typedef struct bench_opts {
    const char *backend;
    cli_backend_opts bopts;
    ampx_dtype dt;
    int64_t m, n, k, batch, cols, warmup, reps; /* reps 0: at least 5, for 1 s */
    int trans_a, trans_b, json;
    int tune;   /* bench gemm --tune: the backend option tune=yes (OpenCL) */
    int fp8_ok; /* bench gemm: --dtype e4m3|e5m2 (fp8 operands, a bf16 C, GEMM_FP8) */
} bench_opts;

static int opt_dtype(void *opts, int argc, char **argv, const char *v) {
    bench_opts *o = opts;
    if (ampx_dtype_parse(v, &o->dt) != 0 ||
        !(ampx_dtype_is_float(o->dt) || (ampx_dtype_is_fp8(o->dt) && o->fp8_ok))) {
        fprintf(stderr, "%s: --dtype '%s': expected bf16, f16 or f32%s\n", argv[0], v,
                o->fp8_ok ? ", e4m3 or e5m2" : "");
        return -1;
    }
    return 0;
}

/* --warmup 0, or a count in [1, 1000] */
static int opt_warmup(void *opts, int argc, char **argv, const char *v) {
    bench_opts *o = opts;
    if (strcmp(v, "0") == 0) {
        o->warmup = 0;
        return 0;
    }
    return cli_parse_int(argv[0], "--warmup", v, 1, 1000, &o->warmup);
}

#define BOPT(field) offsetof(bench_opts, field)
static const cli_opt gemm_table[] = {
    CLI_OPT_STRING("backend", 'b', BOPT(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'o', BOPT(bopts)),
    CLI_OPT_CALL("dtype", 'd', opt_dtype, 0),
    CLI_OPT_INT("m", 'm', BOPT(m), 1, 1 << 20, 0),
    CLI_OPT_INT("n", 'n', BOPT(n), 1, 1 << 20, 0),
    CLI_OPT_INT("k", 'k', BOPT(k), 1, 1 << 20, 0),
    CLI_OPT_INT("batch", 'B', BOPT(batch), 1, 1 << 20, 0),
    CLI_OPT_FLAG("trans-a", 'A', BOPT(trans_a), 0),
    CLI_OPT_FLAG("trans-b", 'T', BOPT(trans_b), 0),
    CLI_OPT_CALL("warmup", 'w', opt_warmup, 0),
    CLI_OPT_INT("reps", 'r', BOPT(reps), 1, BENCH_MAX_REPS, 0),
    CLI_OPT_FLAG("json", 'j', BOPT(json), 0),
    CLI_OPT_FLAG("tune", 'U', BOPT(tune), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};
static const cli_opt op_table[] = {
    CLI_OPT_STRING("backend", 'b', BOPT(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'o', BOPT(bopts)),
    CLI_OPT_CALL("dtype", 'd', opt_dtype, 0),
    CLI_OPT_INT("n", 'n', BOPT(n), 1, 1ll << 31, 0),
    CLI_OPT_INT("cols", 'c', BOPT(cols), 1, 1 << 24, 0),
    CLI_OPT_CALL("warmup", 'w', opt_warmup, 0),
    CLI_OPT_INT("reps", 'r', BOPT(reps), 1, BENCH_MAX_REPS, 0),
    CLI_OPT_FLAG("json", 'j', BOPT(json), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

static void print_json_line(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* One failure line (and, with --json, a JSON object saying so); returns 1. */
static int bench_fail(bench *b, int json, const char *what, const char *msg) {
    fprintf(stderr, "ampx bench %s: %s\n", what, msg);
    if (json) { /* the caller reads stdout: say it there too */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "ok", 0);
        cJSON_AddStringToObject(o, "error", msg);
        print_json_line(o);
    }
    if (b) bench_close(b);
    return 1;
}

// ---------------------------------------------------------------------------------------
// ampx bench gemm

static ampx_status run_gemm(bench *b, void *arg) {
    return b->t->ops->gemm(b->ctx, arg);
}

static ampx_status run_gemm_fp8(bench *b, void *arg) {
    return b->t->ops->gemm_fp8(b->ctx, arg);
}

static float host_elem(const void *p, ampx_dtype dt, uint64_t i) {
    if (dt == AMPX_F32) return ((const float *)p)[i];
    if (ampx_dtype_is_fp8(dt)) return ampx_fp8_to_f32(((const uint8_t *)p)[i], dt);
    if (dt == AMPX_BF16) return ampx_bf16_to_f32(((const uint16_t *)p)[i]);
    return ampx_f16_to_f32(((const uint16_t *)p)[i]);
}

/* Reads element i of t (one element) into *v. */
static int read_elem(bench *b, const ampx_tensor *t, uint64_t i, float *v) {
    unsigned char raw[4];
    size_t es = ampx_dtype_size(t->dtype);
    if (b->t->buffer_read(b->ctx, t->buf, t->offset + i * es, raw, es) != AMPX_OK) return -1;
    *v = host_elem(raw, t->dtype, 0);
    return 0;
}

/* Compares 16 entries of C (from one run with beta 0) with a double-precision product:
 * returns the largest |c - ref| / sum |a||b|, the GEMM error measure of the conformance. */
static int gemm_check(bench *b, const ampx_gemm_args *g, double *max_err) {
    uint64_t s = 12345;
    *max_err   = 0.0;
    for (int e = 0; e < 16; e++) {
        uint64_t bt = rng_next(&s) % g->batch, i = rng_next(&s) % g->m, j = rng_next(&s) % g->n;
        double ref = 0.0, mag = 0.0;
        for (uint64_t p = 0; p < g->k; p++) {
            uint64_t ia = bt * g->stride_a + (g->trans_a ? p * g->lda + i : i * g->lda + p);
            uint64_t ib = bt * g->stride_b + (g->trans_b ? j * g->ldb + p : p * g->ldb + j);
            float x, y;
            if (read_elem(b, &g->a, ia, &x) || read_elem(b, &g->b, ib, &y)) return -1;
            ref += (double)x * (double)y;
            mag += fabs((double)x * (double)y);
        }
        float c;
        if (read_elem(b, &g->c, bt * g->stride_c + i * g->ldc + j, &c)) return -1;
        double err = fabs((double)c - ref) / (mag > 0 ? mag : 1.0);
        if (err > *max_err) *max_err = err;
    }
    return 0;
}

static void gemm_usage(void) {
    printf("usage: ampx bench gemm --backend B [--backend-opt k=v]... --dtype D\n"
           "                       --m M --n N --k K [--trans-a] [--trans-b] [--batch N]\n"
           "                       [--warmup W] [--reps R] [--json] [--tune]\n\n"
           "D is bf16, f16 or f32 (A, B and C in it, GEMM), or e4m3 or e5m2 (A and B in it,\n"
           "C bf16, GEMM_FP8 with both factors 1).\n"
           "Times C = op(A) op(B) (f32 accumulation), after W\n"
           "warm-up runs (default 2), R timed runs (default: at least 5, for 1 s), and\n"
           "prints the median time and GFLOP/s (2 m n k batch / median). 16 entries of C\n"
           "are checked against a double-precision product. --json: the last line is\n"
           "one JSON object (gflops, ms, dtype, m, n, k, batch, kernel, ...).\n"
           "--tune (opencl): first search the tiled kernel's parameters for this device\n"
           "unless its cache folder has them (backend option tune=yes; tune=force searches\n"
           "again), store them there and use them (docs/OPENCL.md).\n");
}

/* One GEMM of the options' shape: dense row-major operands, beta 0 (the tensors are
 * allocated later). */
static ampx_gemm_args gemm_args(const bench_opts *o) {
    uint64_t m = (uint64_t)o->m, n = (uint64_t)o->n, k = (uint64_t)o->k;
    return (ampx_gemm_args){.size     = sizeof(ampx_gemm_args),
                            .trans_a  = (uint32_t)o->trans_a,
                            .trans_b  = (uint32_t)o->trans_b,
                            .m        = m,
                            .n        = n,
                            .k        = k,
                            .batch    = (uint64_t)o->batch,
                            .lda      = o->trans_a ? m : k,
                            .ldb      = o->trans_b ? k : n,
                            .ldc      = n,
                            .stride_a = m * k,
                            .stride_b = k * n,
                            .stride_c = m * n,
                            .alpha    = 1.0f,
                            .beta     = 0.0f};
}

/* The result lines (and the JSON object) of a timed and checked GEMM; closes b; the exit
 * status. */
static int gemm_report(bench *b, const bench_opts *o, const timing *tm, double max_err) {
    char dev[256], kernel[512];
    bench_device(b, dev, sizeof dev, kernel, sizeof kernel);
    ampx_dtype dt = o->dt;
    double flops  = 2.0 * (double)o->m * (double)o->n * (double)o->k * (double)o->batch;
    double gflops = flops / tm->median_s * 1e-9;
    /* f32 accumulation over k terms: a correct kernel stays within a small multiple of
     * k * u(f32) of the magnitude, and within u(dtype) when C is rounded to bf16/f16. */
    double u_c   = dt == AMPX_F32 ? 0x1p-24 : dt == AMPX_F16 ? 0x1p-11 : 0x1p-8; /* fp8: C bf16 */
    double bound = 2.0 * ((double)o->k * 0x1p-24 + u_c) + 1e-6;
    int ok       = max_err <= bound;
    printf("gemm %s %llux%llux%llu%s%s batch %llu on %s (%s), kernel %s\n", ampx_dtype_name(dt),
           (unsigned long long)o->m, (unsigned long long)o->n, (unsigned long long)o->k,
           o->trans_a ? " tA" : "", o->trans_b ? " tB" : "", (unsigned long long)o->batch,
           b->t->name, dev, kernel);
    printf("  median %.3f ms (min %.3f, max %.3f, %d reps)  %.1f GFLOP/s  check %s (max err "
           "%.2e)\n",
           tm->median_s * 1e3, tm->min_s * 1e3, tm->max_s * 1e3, tm->reps, gflops,
           ok ? "ok" : "FAILED", max_err);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "bench", "gemm");
        cJSON_AddStringToObject(j, "backend", b->t->name);
        cJSON_AddStringToObject(j, "device", dev);
        cJSON_AddStringToObject(j, "kernel", kernel);
        cJSON_AddStringToObject(j, "dtype", ampx_dtype_name(dt));
        cJSON_AddNumberToObject(j, "m", (double)o->m);
        cJSON_AddNumberToObject(j, "n", (double)o->n);
        cJSON_AddNumberToObject(j, "k", (double)o->k);
        cJSON_AddNumberToObject(j, "batch", (double)o->batch);
        cJSON_AddBoolToObject(j, "trans_a", o->trans_a);
        cJSON_AddBoolToObject(j, "trans_b", o->trans_b);
        cJSON_AddNumberToObject(j, "ms", tm->median_s * 1e3);
        cJSON_AddNumberToObject(j, "ms_min", tm->min_s * 1e3);
        cJSON_AddNumberToObject(j, "ms_max", tm->max_s * 1e3);
        cJSON_AddNumberToObject(j, "reps", tm->reps);
        cJSON_AddNumberToObject(j, "gflops", gflops);
        cJSON_AddNumberToObject(j, "max_err", max_err);
        cJSON_AddBoolToObject(j, "ok", ok);
        print_json_line(j);
    }
    bench_close(b);
    if (!ok) fprintf(stderr, "ampx bench gemm: result check failed (max err %.2e)\n", max_err);
    return ok ? 0 : 1;
}

static int cmd_bench_gemm(int argc, char **argv) {
    bench_opts o = {.dt = AMPX_F32, .batch = 1, .warmup = 2, .fp8_ok = 1};
    cli_parser p = {"b:o:d:m:n:k:B:ATw:r:jh", gemm_table, 0, NULL};
    int rc       = cli_parse_opts(&p, argc, argv, &o);
    if (rc == CLI_HELP_ASKED) {
        gemm_usage();
        return 0;
    }
    if (rc) return EXIT_USAGE;
    if (optind < argc) {
        fprintf(stderr, "ampx bench gemm: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (!o.backend || !*o.backend || !o.m || !o.n || !o.k) {
        fprintf(stderr, "ampx bench gemm: --backend, --m, --n and --k are required\n");
        return EXIT_USAGE;
    }
    /* --tune: the OpenCL backend's option tune=yes, first, so that a tune= of --backend-opt
     * (tune=force) wins; any other backend names it unknown */
    if (o.tune) {
        if (o.bopts.n >= MAX_BACKEND_OPTS) {
            fprintf(stderr, "ampx bench gemm: --tune: too many --backend-opt\n");
            return EXIT_USAGE;
        }
        memmove(o.bopts.v + 1, o.bopts.v, o.bopts.n * sizeof o.bopts.v[0]);
        o.bopts.v[0] = "tune=yes";
        o.bopts.n++;
    }

    bench b;
    if (bench_open(&b, o.backend, o.bopts.v, o.bopts.n)) {
        char msg[2100];
        snprintf(msg, sizeof msg, "%s", b.err);
        return bench_fail(NULL, o.json, "gemm", msg);
    }
    ampx_dtype dt     = o.dt;
    int fp8           = ampx_dtype_is_fp8(dt);
    ampx_dtype dts[3] = {dt, dt, fp8 ? AMPX_BF16 : dt};
    if (!ampx_backend_supports(b.be, fp8 ? AMPX_OP_GEMM_FP8 : AMPX_OP_GEMM, dts, 3)) {
        char msg[256];
        snprintf(msg, sizeof msg, "backend %s does not support %s in %s", b.t->name,
                 fp8 ? "gemm_fp8" : "gemm", ampx_dtype_name(dt));
        return bench_fail(&b, o.json, "gemm", msg);
    }
    ampx_gemm_fp8_args g8 = {.size = sizeof g8};
    ampx_gemm_args g      = gemm_args(&o);
    if (bench_tensor(&b, dt, g.m * g.k * g.batch, 0, 1, &g.a) ||
        bench_tensor(&b, dt, g.k * g.n * g.batch, 0, 2, &g.b) ||
        bench_tensor(&b, dts[2], g.m * g.n * g.batch, 1, 3, &g.c) ||
        (fp8 && (bench_tensor(&b, AMPX_F32, 1, 0, 4, &g8.a_scale_inv) ||
                 bench_tensor(&b, AMPX_F32, 1, 0, 5, &g8.b_scale_inv))))
        return bench_fail(&b, o.json, "gemm", b.err);
    if (fp8) { /* both factors 1 */
        float one = 1.0f;
        if (b.t->buffer_write(b.ctx, g8.a_scale_inv.buf, 0, &one, 4) ||
            b.t->buffer_write(b.ctx, g8.b_scale_inv.buf, 0, &one, 4))
            return bench_fail(&b, o.json, "gemm", "buffer_write failed");
        g8.gemm = g;
    }
    timing tm;
    if (bench_time(&b, fp8 ? run_gemm_fp8 : run_gemm, fp8 ? (void *)&g8 : (void *)&g, (int)o.warmup,
                   (int)o.reps, &tm))
        return bench_fail(&b, o.json, "gemm", b.err);
    double max_err;
    if (gemm_check(&b, &g, &max_err)) return bench_fail(&b, o.json, "gemm", "reading C failed");
    return gemm_report(&b, &o, &tm, max_err);
}

// ---------------------------------------------------------------------------------------
// ampx bench op NAME

typedef struct op_bench {
    const char *name;
    ampx_dtype dt;
    uint64_t n, cols;
    ampx_tensor x, y, z, p, m, v, flags, stats, counts, nans, sq, scalars, mean, rstd;
    uint64_t n_elems[1];
    ampx_tensor copy_dst;
} op_bench;

static ampx_status run_copy(bench *b, void *arg) {
    op_bench *o = arg;
    return b->t->buffer_copy(b->ctx, o->y.buf, 0, o->x.buf, 0, o->n * ampx_dtype_size(o->dt));
}

/* The ops, one function each: what it runs on the op_bench's tensors. */

static ampx_status run_cast(bench *b, void *arg) {
    op_bench *o      = arg;
    ampx_cast_args a = {.size = sizeof a, .n = o->n, .src = o->x, .dst = o->z};
    return b->t->ops->cast(b->ctx, &a);
}

static ampx_status run_add(bench *b, void *arg) {
    op_bench *o     = arg;
    ampx_add_args a = {.size  = sizeof a,
                       .rows  = o->n / o->cols,
                       .cols  = o->cols,
                       .alpha = 1.0f,
                       .beta  = 0.5f,
                       .a     = o->x,
                       .b     = o->m,
                       .y     = o->y};
    return b->t->ops->add(b->ctx, &a);
}

static ampx_status run_scale(bench *b, void *arg) {
    op_bench *o       = arg;
    ampx_scale_args a = {.size = sizeof a, .n = o->n, .alpha = 0.5f, .x = o->x, .y = o->y};
    return b->t->ops->scale(b->ctx, &a);
}

static ampx_status run_act(bench *b, op_bench *o, ampx_act act) {
    ampx_act_args a = {.size = sizeof a, .act = act, .n = o->n, .x = o->x, .y_or_dx = o->y};
    return b->t->ops->act_fwd(b->ctx, &a);
}

static ampx_status run_relu(bench *b, void *arg) {
    return run_act(b, arg, AMPX_ACT_RELU);
}

static ampx_status run_gelu(bench *b, void *arg) {
    return run_act(b, arg, AMPX_ACT_GELU);
}

static ampx_status run_gelu_bwd(bench *b, void *arg) { /* x and dy both the input */
    op_bench *o     = arg;
    ampx_act_args a = {
        .size = sizeof a, .act = AMPX_ACT_GELU, .n = o->n, .x = o->x, .dy = o->x, .y_or_dx = o->y};
    return b->t->ops->act_bwd(b->ctx, &a);
}

/* The row ops' arguments; the backwards read y (or x) and dy, both the op's input x here
 * (real values of D), and write dx; layer norm's mean and rstd come from one forward run by
 * op_alloc. */
static ampx_softmax_args softmax_of(const op_bench *o, int bwd) {
    return (ampx_softmax_args){.size    = sizeof(ampx_softmax_args),
                               .rows    = o->n / o->cols,
                               .cols    = o->cols,
                               .seq_q   = 1,
                               .scale   = 1.0f,
                               .x_or_y  = o->x,
                               .dy      = bwd ? o->x : (ampx_tensor){0},
                               .y_or_dx = o->y};
}

static ampx_layernorm_args layernorm_of(const op_bench *o, int bwd) {
    return (ampx_layernorm_args){.size    = sizeof(ampx_layernorm_args),
                                 .rows    = o->n / o->cols,
                                 .cols    = o->cols,
                                 .eps     = bwd ? 0.0f : 1e-5f,
                                 .x       = o->x,
                                 .mean    = o->mean,
                                 .rstd    = o->rstd,
                                 .dy      = bwd ? o->x : (ampx_tensor){0},
                                 .y_or_dx = o->y};
}

static ampx_status run_softmax(bench *b, void *arg) {
    ampx_softmax_args a = softmax_of(arg, 0);
    return b->t->ops->softmax_fwd(b->ctx, &a);
}

static ampx_status run_layernorm(bench *b, void *arg) {
    ampx_layernorm_args a = layernorm_of(arg, 0);
    return b->t->ops->layernorm_fwd(b->ctx, &a);
}

static ampx_status run_softmax_bwd(bench *b, void *arg) {
    ampx_softmax_args a = softmax_of(arg, 1);
    return b->t->ops->softmax_bwd(b->ctx, &a);
}

static ampx_status run_layernorm_bwd(bench *b, void *arg) {
    ampx_layernorm_args a = layernorm_of(arg, 1);
    return b->t->ops->layernorm_bwd(b->ctx, &a);
}

static ampx_status run_unscale_check(bench *b, void *arg) {
    op_bench *o               = arg;
    ampx_tensor_list one      = {1, &o->x, o->n_elems};
    ampx_unscale_check_args a = {
        .size = sizeof a, .grads = one, .flags = o->flags, .scalars = o->scalars};
    return b->t->ops->unscale_check(b->ctx, &a);
}

static ampx_status run_grad_stats(bench *b, void *arg) {
    op_bench *o            = arg;
    ampx_tensor_list one   = {1, &o->x, o->n_elems};
    ampx_grad_stats_args a = {
        .size = sizeof a, .target = o->dt, .grads = one, .stats = o->stats, .counts = o->counts};
    return b->t->ops->grad_stats(b->ctx, &a);
}

static ampx_status run_sum_squares(bench *b, void *arg) {
    op_bench *o             = arg;
    ampx_tensor_list one    = {1, &o->x, o->n_elems};
    ampx_sum_squares_args a = {.size = sizeof a, .x = one, .out = o->sq};
    return b->t->ops->sum_squares(b->ctx, &a);
}

static ampx_status run_abs_max(bench *b, void *arg) { /* the armed forensics' scan */
    op_bench *o          = arg;
    ampx_tensor_list one = {1, &o->x, o->n_elems};
    ampx_abs_max_args a  = {.size = sizeof a, .x = one, .out = o->sq};
    return b->t->ops->abs_max ? b->t->ops->abs_max(b->ctx, &a) : AMPX_ERR_UNSUPPORTED;
}

static ampx_status run_amp_pass(bench *b, void *arg) { /* a monitored step's: every output */
    op_bench *o          = arg;
    ampx_tensor_list one = {1, &o->x, o->n_elems};
    ampx_amp_pass_args a = {.size       = sizeof a,
                            .grads      = one,
                            .flags      = o->flags,
                            .scalars    = o->scalars,
                            .sq_sum     = o->sq,
                            .target     = o->dt,
                            .stats      = o->stats,
                            .counts     = o->counts,
                            .nan_counts = o->nans};
    return b->t->ops->amp_pass(b->ctx, &a);
}

/* what amp_pass replaces, in the trainer's order */
static ampx_status run_amp_separate(bench *b, void *arg) {
    op_bench *o                = arg;
    const ampx_backend_ops *op = b->t->ops;
    ampx_tensor_list one       = {1, &o->x, o->n_elems};
    ampx_grad_stats_args g     = {.size       = sizeof g,
                                  .target     = o->dt,
                                  .grads      = one,
                                  .stats      = o->stats,
                                  .counts     = o->counts,
                                  .nan_counts = o->nans};
    ampx_unscale_check_args u  = {
         .size = sizeof u, .grads = one, .flags = o->flags, .scalars = o->scalars};
    ampx_sum_squares_args q = {.size = sizeof q, .x = one, .out = o->sq};
    ampx_status st          = op->grad_stats(b->ctx, &g);
    if (!st) st = op->unscale_check(b->ctx, &u);
    if (!st) st = op->sum_squares(b->ctx, &q);
    return st;
}

static ampx_status run_sgd(bench *b, void *arg) {
    op_bench *o     = arg;
    ampx_sgd_args a = {.size         = sizeof a,
                       .momentum     = 0.9f,
                       .params       = {1, &o->p, o->n_elems},
                       .grads        = &o->x,
                       .momentum_buf = &o->m,
                       .copies       = o->dt != AMPX_F32 ? &o->y : NULL,
                       .scalars      = o->scalars};
    return b->t->ops->sgd(b->ctx, &a);
}

static ampx_status run_adamw(bench *b, void *arg) {
    op_bench *o       = arg;
    ampx_adamw_args a = {.size         = sizeof a,
                         .beta1        = 0.9f,
                         .beta2        = 0.999f,
                         .eps          = 1e-8f,
                         .weight_decay = 0.01f,
                         .params       = {1, &o->p, o->n_elems},
                         .grads        = &o->x,
                         .m            = &o->m,
                         .v            = &o->v,
                         .copies       = o->dt != AMPX_F32 ? &o->y : NULL,
                         .scalars      = o->scalars};
    return b->t->ops->adamw(b->ctx, &a);
}

static const struct {
    const char *name;
    bench_fn run;
} bench_ops[] = {
    {"copy", run_copy},
    {"cast", run_cast},
    {"add", run_add},
    {"scale", run_scale},
    {"relu", run_relu},
    {"gelu", run_gelu},
    {"gelu_bwd", run_gelu_bwd},
    {"softmax", run_softmax},
    {"layernorm", run_layernorm},
    {"softmax_bwd", run_softmax_bwd},
    {"layernorm_bwd", run_layernorm_bwd},
    {"unscale_check", run_unscale_check},
    {"grad_stats", run_grad_stats},
    {"sum_squares", run_sum_squares},
    {"abs_max", run_abs_max},
    {"amp_pass", run_amp_pass},
    {"amp_separate", run_amp_separate},
    {"sgd", run_sgd},
    {"adamw", run_adamw},
};

/* Bytes the op must read and write at least, for n elements of dtype size es. */
static double op_bytes(const char *name, uint64_t n, size_t es, ampx_dtype dt) {
    double N = (double)n, E = (double)es;
    size_t copy = dt != AMPX_F32 ? es : 0;
    if (!strcmp(name, "cast")) return N * (E + 4.0); /* dtype -> f32 (f32 -> bf16) */
    if (!strcmp(name, "add") || strstr(name, "_bwd")) return 3.0 * N * E;
    if (!strcmp(name, "grad_stats") || !strcmp(name, "sum_squares") || !strcmp(name, "abs_max"))
        return N * E;
    if (!strcmp(name, "sgd")) return N * (E + 16.0 + (double)copy);
    if (!strcmp(name, "adamw")) return N * (E + 24.0 + (double)copy);
    return 2.0 * N * E; /* copy, scale, activations, softmax, layernorm, unscale_check, amp_pass
                           and amp_separate (in place: read and written once at least) */
}

static void op_usage(void) {
    printf("usage: ampx bench op NAME --backend B [--backend-opt k=v]... [--dtype D]\n"
           "                          [--n N] [--cols C] [--warmup W] [--reps R] [--json]\n\n"
           "Times a memory-bound op on N elements (default 2^24; rows of C columns for\n"
           "add and the row ops) and reports GB/s of the bytes it must move, beside\n"
           "a buffer copy of N elements timed in the same run. NAME is one of:\n"
           "  copy cast add scale relu gelu gelu_bwd softmax layernorm softmax_bwd\n"
           "  layernorm_bwd unscale_check grad_stats sum_squares abs_max amp_pass\n"
           "  amp_separate sgd adamw\n"
           "(cast: D -> f32, or f32 -> bf16; sgd/adamw: f32 state, gradients in D, and a\n"
           "D working copy when D is not f32; amp_pass: unscale, check, sum of squares\n"
           "and statistics in one op (ABI 1.4); amp_separate: the same work as\n"
           "grad_stats, unscale_check and sum_squares, one after the other;\n"
           "the backwards: y (x) and dy both the input, dx written).\n");
}

/* The options and the op's name; 0 with *run set, CLI_HELP_ASKED after the help, or
 * EXIT_USAGE after one line. */
static int op_parse(int argc, char **argv, bench_opts *o, const char **name, bench_fn *run) {
    cli_parser p = {"b:o:d:n:c:w:r:jh", op_table, 0, NULL};
    int rc       = cli_parse_opts(&p, argc, argv, o);
    if (rc == CLI_HELP_ASKED) {
        op_usage();
        return rc;
    }
    if (rc) return EXIT_USAGE;
    if (optind >= argc) {
        fprintf(stderr, "ampx bench op: which op? (e.g. ampx bench op adamw --backend cpu)\n");
        return EXIT_USAGE;
    }
    *name = argv[optind++];
    *run  = NULL;
    for (size_t i = 0; i < sizeof bench_ops / sizeof bench_ops[0]; i++)
        if (!strcmp(*name, bench_ops[i].name)) *run = bench_ops[i].run;
    if (!*run) {
        fprintf(stderr, "ampx bench op: unknown op '%s' (see ampx bench op --help)\n", *name);
        return EXIT_USAGE;
    }
    if (optind < argc) {
        fprintf(stderr, "ampx bench op: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (!o->backend || !*o->backend) {
        fprintf(stderr, "ampx bench op: --backend is required (e.g. --backend cpu)\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* Every tensor an op may read or write, and the scalars block; 0, or -1 with b->err (or
 * a message in *why). */
static int op_alloc(bench *b, op_bench *o, const char **why) {
    ampx_dtype dt = o->dt;
    uint64_t n = o->n, rows = n / o->cols;
    *why = b->err;
    if (bench_tensor(b, dt, n, 0, 1, &o->x) || bench_tensor(b, dt, n, 1, 2, &o->y) ||
        bench_tensor(b, dt == AMPX_F32 ? AMPX_BF16 : AMPX_F32, n, 1, 3, &o->z) ||
        bench_tensor(b, AMPX_F32, n, 0, 4, &o->p) ||
        bench_tensor(b, !strcmp(o->name, "add") ? dt : AMPX_F32, n, 1, 5, &o->m) ||
        bench_tensor(b, AMPX_F32, n, 1, 6, &o->v) ||
        bench_tensor(b, AMPX_I32, 1, 1, 7, &o->flags) ||
        bench_tensor(b, AMPX_F32, 4, 1, 8, &o->stats) ||
        bench_tensor(b, AMPX_I32, 3, 1, 9, &o->counts) ||
        bench_tensor(b, AMPX_I32, 1, 1, 13, &o->nans) ||
        bench_tensor(b, AMPX_F32, 1, 1, 14, &o->sq) ||
        bench_tensor(b, AMPX_F32, 32, 1, 10, &o->scalars) ||
        bench_tensor(b, AMPX_F32, rows, 1, 11, &o->mean) ||
        bench_tensor(b, AMPX_F32, rows, 1, 12, &o->rstd))
        return -1;
    if (!strcmp(o->name, "layernorm_bwd") && run_layernorm(b, o) != AMPX_OK) {
        *why = "the layer norm forward that gives the backward its statistics failed";
        return -1;
    }
    if (!strcmp(o->name, "amp_pass") && !ampx_backend_op_slot(b->be, AMPX_OP_AMP_PASS)) {
        *why = "the backend has no amp_pass (ABI 1.4)";
        return -1;
    }
    ampx_scalars sc = {.scale           = 1.0f,
                       .mode            = AMPX_SCALER_DYNAMIC,
                       .growth_factor   = 2.0f,
                       .backoff_factor  = 0.5f,
                       .growth_interval = 2000,
                       .hysteresis      = 1,
                       .hysteresis_left = 1,
                       .max_scale       = INFINITY,
                       .lr_base         = 1e-3f};
    if (b->t->buffer_write(b->ctx, o->scalars.buf, 0, &sc, sizeof sc) != AMPX_OK) {
        *why = "cannot write the scalars block";
        return -1;
    }
    return 0;
}

/* The result lines (and the JSON object) of a timed op beside the copy; closes b. */
static int op_report(bench *b, const op_bench *o, int json, const timing *tc, const timing *to) {
    char dev[256], kernel[512];
    bench_device(b, dev, sizeof dev, kernel, sizeof kernel);
    size_t es      = ampx_dtype_size(o->dt);
    double bytes   = op_bytes(o->name, o->n, es, o->dt);
    double gbs     = bytes / to->median_s * 1e-9;
    double copy_gb = 2.0 * (double)o->n * (double)es / tc->median_s * 1e-9;
    printf("op %s %s n=%llu on %s (%s), kernel %s\n", o->name, ampx_dtype_name(o->dt),
           (unsigned long long)o->n, b->t->name, dev, kernel);
    printf("  median %.3f ms (%d reps)  %.2f GB/s  copy %.2f GB/s  ratio %.2f\n",
           to->median_s * 1e3, to->reps, gbs, copy_gb, gbs / copy_gb);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "bench", "op");
        cJSON_AddStringToObject(j, "op", o->name);
        cJSON_AddStringToObject(j, "backend", b->t->name);
        cJSON_AddStringToObject(j, "device", dev);
        cJSON_AddStringToObject(j, "kernel", kernel);
        cJSON_AddStringToObject(j, "dtype", ampx_dtype_name(o->dt));
        cJSON_AddNumberToObject(j, "n", (double)o->n);
        cJSON_AddNumberToObject(j, "ms", to->median_s * 1e3);
        cJSON_AddNumberToObject(j, "bytes", bytes);
        cJSON_AddNumberToObject(j, "gbs", gbs);
        cJSON_AddNumberToObject(j, "copy_gbs", copy_gb);
        cJSON_AddNumberToObject(j, "ratio_to_copy", gbs / copy_gb);
        print_json_line(j);
    }
    bench_close(b);
    return 0;
}

static int cmd_bench_op(int argc, char **argv) {
    bench_opts opt = {.dt = AMPX_F32, .n = 1ll << 24, .cols = 1024, .warmup = 2};
    const char *name;
    bench_fn run;
    int rc = op_parse(argc, argv, &opt, &name, &run);
    if (rc) return rc == CLI_HELP_ASKED ? 0 : rc;
    uint64_t n = (uint64_t)opt.n, cols = (uint64_t)opt.cols;
    if (n % cols) n -= n % cols; /* whole rows */
    if (n == 0) n = cols;

    bench b;
    if (bench_open(&b, opt.backend, opt.bopts.v, opt.bopts.n)) {
        char msg[2100];
        snprintf(msg, sizeof msg, "%s", b.err);
        return bench_fail(NULL, opt.json, "op", msg);
    }
    op_bench o = {.name = name, .dt = opt.dt, .n = n, .cols = cols, .n_elems = {n}};
    const char *why;
    if (op_alloc(&b, &o, &why)) return bench_fail(&b, opt.json, "op", why);

    /* The copy reference and the op, alternated three times; each keeps its best median. */
    timing tc = {0}, to = {0};
    for (int round = 0; round < 3; round++) {
        timing t1, t2;
        if (bench_time(&b, run_copy, &o, (int)opt.warmup, (int)opt.reps, &t1) ||
            bench_time(&b, run, &o, (int)opt.warmup, (int)opt.reps, &t2))
            return bench_fail(&b, opt.json, "op", b.err);
        if (round == 0 || t1.median_s < tc.median_s) tc = t1;
        if (round == 0 || t2.median_s < to.median_s) to = t2;
    }
    return op_report(&b, &o, opt.json, &tc, &to);
}

// ---------------------------------------------------------------------------------------

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: ampx bench gemm --backend B --dtype D --m M --n N --k K [...]\n"
                   "       ampx bench op NAME --backend B [--dtype D] [--n N] [...]\n"
                   "(ampx bench gemm --help, ampx bench op --help for every option)\n");
        return argc < 2 ? EXIT_USAGE : 0;
    }
    char name[64];
    snprintf(name, sizeof name, "ampx bench %s", argv[1]);
    argv[1] = name;
    if (!strcmp(argv[1] + 11, "gemm")) return cmd_bench_gemm(argc - 1, argv + 1);
    if (!strcmp(argv[1] + 11, "op")) return cmd_bench_op(argc - 1, argv + 1);
    fprintf(stderr, "ampx bench: unknown benchmark '%s' (gemm or op)\n", argv[1] + 11);
    return EXIT_USAGE;
}
