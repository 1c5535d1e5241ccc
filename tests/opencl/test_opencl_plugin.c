/* test_opencl_plugin.c — the OpenCL plugin's own contract, beyond conformance: the probe,
 * device selection and its errors, option parsing, the on-disk program cache (the second
 * context loads the binary instead of building), allocation failure, that every failure
 * is one ERROR line and a status, never a crash, and the exact results of DROPOUT (the mask
 * of dtype.h's hash) and PERMUTE (a transpose in every dtype pair) against dtype.h itself.
 *
 * The plugin is opened with dlopen and driven through its table directly, with a log
 * callback that records every line, so the DEBUG lines of the program cache can be seen.
 * Every test points the cache at its own temporary directory.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ampx/backend.h"
#include "ampx/dtype.h"
#include "../test_tmp.h"

// ---------------------------------------------------------------------------------------
// Fixture: the plugin, a log that keeps every line, a fresh cache directory

typedef struct log_rec {
    char lines[64][1024];
    ampx_log_level level[64];
    int n;
} log_rec;

static void *lib;
static const ampx_backend_iface *be;
static log_rec rec;
static char cache_dir[256];

static void record(void *user, ampx_log_level level, const char *msg) {
    log_rec *r = user;
    if (r->n < 64) {
        snprintf(r->lines[r->n], sizeof r->lines[r->n], "%s", msg);
        r->level[r->n] = level;
        r->n++;
    }
}

static int count_lines(ampx_log_level level, const char *needle) {
    int c = 0;
    for (int i = 0; i < rec.n; i++)
        if (rec.level[i] == level && (!needle || strstr(rec.lines[i], needle))) c++;
    return c;
}

static const char *first_error(void) {
    for (int i = 0; i < rec.n; i++)
        if (rec.level[i] == AMPX_LOG_ERROR) return rec.lines[i];
    return "(none)";
}

static void setup(void) {
    lib = dlopen(AMPX_TEST_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "dlopen: %s", dlerror());
    ampx_backend_entry_fn entry = (ampx_backend_entry_fn)dlsym(lib, AMPX_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(entry);
    be = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    cr_assert_not_null(be);
    char reason[512] = "";
    cr_assert_eq(be->probe(reason, sizeof reason), AMPX_OK, "probe: %s", reason);
    cr_assert_not_null(test_mkdtemp(cache_dir, sizeof cache_dir, "ampx-ocl-cache"));
    memset(&rec, 0, sizeof rec);
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void teardown(void) {
    remove_tree(cache_dir);
    /* The plugin stays loaded: the OpenCL runtime keeps threads (rule 1 of the loader). */
}

TestSuite(opencl, .init = setup, .fini = teardown);

/* create() with these options (the cache option added unless given); returns the status. */
static ampx_status create_with(const char *const *opts, uint32_t n, ampx_context **ctx) {
    ampx_host h = {.size      = sizeof h,
                   .abi_major = AMPX_ABI_MAJOR,
                   .abi_minor = AMPX_ABI_MINOR,
                   .log       = record,
                   .log_user  = &rec,
                   .options   = opts,
                   .n_options = n};
    return be->create(&h, ctx);
}

static ampx_status create_cached(const char *extra, ampx_context **ctx) {
    char cache_opt[300];
    snprintf(cache_opt, sizeof cache_opt, "cache=%s", cache_dir);
    const char *opts[2] = {cache_opt, extra};
    return create_with(opts, extra ? 2 : 1, ctx);
}

static int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (l > s && !strcmp(e->d_name + l - s, suffix)) n++;
    }
    closedir(d);
    return n;
}

// ---------------------------------------------------------------------------------------
// Probe and device selection

Test(opencl, probe_names_the_default_device) {
    char reason[512] = "";
    cr_assert_eq(be->probe(reason, sizeof reason), AMPX_OK);
    cr_expect(strstr(reason, "default 0:") != NULL, "probe reason: %s", reason);
    cr_expect_null(strchr(reason, '\n'), "one line: %s", reason);
}

Test(opencl, device_by_index_and_by_name) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached("device=0:0", &ctx), AMPX_OK, "%s", first_error());
    ampx_device_info info = {.size = sizeof info};
    cr_assert_eq(be->device_info(ctx, &info), AMPX_OK);
    cr_expect(strstr(info.description, "0:0") != NULL, "%s", info.description);
    cr_expect(strstr(info.description, "[selected]") != NULL, "%s", info.description);
    be->destroy(ctx);

    /* a case-insensitive part of "platform device": the device's own name */
    char want[160];
    snprintf(want, sizeof want, "device=%s", info.name);
    for (char *p = want + 7; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    ctx = NULL;
    cr_assert_eq(create_cached(want, &ctx), AMPX_OK, "%s: %s", want, first_error());
    be->destroy(ctx);
}

Test(opencl, bad_device_option_is_one_clear_error) {
    ampx_context *ctx = (ampx_context *)0x1;
    cr_assert_eq(create_cached("device=7:3", &ctx), AMPX_ERR_INVALID);
    cr_expect_null(ctx, "a failed create leaves *out NULL");
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, NULL), 1, "exactly one ERROR line");
    cr_expect(strstr(first_error(), "device=7:3 matches no device (have: 0:0") != NULL, "%s",
              first_error());

    memset(&rec, 0, sizeof rec);
    cr_assert_eq(create_cached("device=no-such-accelerator", &ctx), AMPX_ERR_INVALID);
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, "matches no device"), 1, "%s", first_error());
}

Test(opencl, unknown_and_malformed_options_are_rejected) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached("threads=2", &ctx), AMPX_ERR_INVALID);
    cr_expect(strstr(first_error(), "unknown option 'threads'") != NULL, "%s", first_error());
    memset(&rec, 0, sizeof rec);
    cr_assert_eq(create_cached("gemm=fastest", &ctx), AMPX_ERR_INVALID);
    cr_expect(strstr(first_error(), "gemm=fastest") != NULL, "%s", first_error());
    memset(&rec, 0, sizeof rec);
    cr_assert_eq(create_cached("device", &ctx), AMPX_ERR_INVALID);
    cr_expect(strstr(first_error(), "not key=value") != NULL, "%s", first_error());
    cr_expect_null(ctx);
}

// ---------------------------------------------------------------------------------------
// Program cache

/* Scales 3 floats by 2 in ctx (the typed scale kernel) and checks the result. */
static void scale_three(ampx_context *ctx) {
    ampx_buffer *b = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, 12, &b), AMPX_OK);
    float x[3] = {1.0f, -2.5f, 3.0f}, y[3] = {0};
    cr_assert_eq(be->buffer_write(ctx, b, 0, x, sizeof x), AMPX_OK);
    ampx_scale_args sa = {
        .size = sizeof sa, .n = 3, .alpha = 2.0f, .x = {b, 0, AMPX_F32}, .y = {b, 0, AMPX_F32}};
    cr_assert_eq(be->ops->scale(ctx, &sa), AMPX_OK, "%s", first_error());
    cr_assert_eq(be->buffer_read(ctx, b, 0, y, sizeof y), AMPX_OK);
    cr_expect(y[0] == 2.0f && y[1] == -5.0f && y[2] == 6.0f, "%g %g %g", y[0], y[1], y[2]);
    be->buffer_free(ctx, b);
}

/* Runs a kernel of the main program (buffer_fill), which is built on first use. */
static void use_main_program(ampx_context *ctx) {
    ampx_buffer *b = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, 16, &b), AMPX_OK);
    cr_assert_eq(be->buffer_fill(ctx, b, 0, 16, 0, 4), AMPX_OK, "%s", first_error());
    cr_assert_eq(be->synchronize(ctx), AMPX_OK, "%s", first_error());
    be->buffer_free(ctx, b);
}

Test(opencl, create_builds_no_program) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    ampx_device_info info = {.size = sizeof info};
    cr_assert_eq(be->device_info(ctx, &info), AMPX_OK);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 0);
    cr_expect_eq(count_files(cache_dir, ".bin"), 0, "nothing compiled by create and describe");
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 1);
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 1, "built once");
    be->destroy(ctx);
}

Test(opencl, second_context_loads_the_cached_binary) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 1);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program loaded from the disk cache"), 0);
    cr_expect_eq(count_files(cache_dir, ".bin"), 1, "one cache file in %s", cache_dir);
    be->destroy(ctx);

    memset(&rec, 0, sizeof rec);
    ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 0,
                 "the second context must not build");
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program loaded from the disk cache"), 1);
    cr_expect_eq(count_files(cache_dir, ".bin"), 1);

    /* and the loaded program runs */
    scale_three(ctx);
    be->destroy(ctx);
}

/* A context that runs the typed scale kernel on 3 floats; returns the scale lines of the log
 * that say how its program was got. */
static void scale_in_new_context(int *built, int *loaded) {
    memset(&rec, 0, sizeof rec);
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    scale_three(ctx);
    be->destroy(ctx);
    *built  = count_lines(AMPX_LOG_DEBUG, "typed/scale.cl scale x=f32,y=f32 built");
    *loaded = count_lines(AMPX_LOG_DEBUG, "typed/scale.cl scale x=f32,y=f32 loaded from the disk");
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, NULL), 0, "%s", first_error());
}

/* Typed programs: on GPUs stored when first compiled; on CPU devices when compiled by a
 * second context (the first leaves a .once file); either way the third context loads. */
Test(opencl, typed_program_is_cached_by_the_second_build_on_cpus) {
    int built = 0, loaded = 0;
    scale_in_new_context(&built, &loaded);
    cr_expect_eq(built, 1);
    int cpu = count_files(cache_dir, ".once") == 1;
    cr_expect_eq(count_files(cache_dir, ".bin"), cpu ? 1 : 2, "main program%s",
                 cpu ? "" : ", scale");
    scale_in_new_context(&built, &loaded);
    cr_expect_eq(built, cpu ? 1 : 0);
    cr_expect_eq(loaded, cpu ? 0 : 1);
    cr_expect_eq(count_files(cache_dir, ".bin"), 2);
    cr_expect_eq(count_files(cache_dir, ".once"), 0);
    scale_in_new_context(&built, &loaded);
    cr_expect_eq(built, 0);
    cr_expect_eq(loaded, 1, "the third context loads scale from the disk cache");

    /* a corrupt binary is rebuilt, never trusted; garbage in a .once file is never read */
    DIR *d = opendir(cache_dir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
        if (!strstr(e->d_name, ".bin")) continue;
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f, "%s", path);
        fputs("not a program binary", f);
        fclose(f);
        snprintf(path + strlen(path) - 4, 8, ".once");
        f = fopen(path, "wb");
        cr_assert_not_null(f, "%s", path);
        fputs("\xff\xfe garbage", f);
        fclose(f);
    }
    closedir(d);
    scale_in_new_context(&built, &loaded);
    cr_expect_eq(built, 1, "a corrupt scale binary is compiled again");
    cr_expect_eq(loaded, 0);
    scale_in_new_context(&built, &loaded);
    cr_expect_eq(loaded, 1, "and replaced");
}

Test(opencl, corrupt_cache_file_is_rebuilt) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    be->destroy(ctx);
    DIR *d = opendir(cache_dir);
    cr_assert_not_null(d);
    struct dirent *e;
    char path[600] = "";
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".bin")) snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
    closedir(d);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    fputs("not a program binary", f);
    fclose(f);

    memset(&rec, 0, sizeof rec);
    ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 1);
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, NULL), 0, "a bad cache file is not an error");
    be->destroy(ctx);
}

Test(opencl, cache_off_writes_nothing) {
    const char *opts[1] = {"cache=off"};
    ampx_context *ctx   = NULL;
    cr_assert_eq(create_with(opts, 1, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_DEBUG, "program built from source"), 1);
    cr_expect_eq(count_files(cache_dir, ".bin"), 0);
    be->destroy(ctx);
}

Test(opencl, cache_dir_from_environment) {
    setenv("AMPX_OPENCL_CACHE_DIR", cache_dir, 1);
    ampx_context *ctx = NULL;
    cr_assert_eq(create_with(NULL, 0, &ctx), AMPX_OK, "%s", first_error());
    use_main_program(ctx);
    be->destroy(ctx);
    cr_expect_eq(count_files(cache_dir, ".bin"), 1, "cache file in $AMPX_OPENCL_CACHE_DIR");
}

// ---------------------------------------------------------------------------------------
// Errors: allocation, bad arguments

Test(opencl, huge_allocation_is_a_clean_error) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    memset(&rec, 0, sizeof rec);
    ampx_buffer *b = (ampx_buffer *)0x1;
    cr_expect_eq(be->buffer_alloc(ctx, 1ull << 62, &b), AMPX_ERR_NO_MEMORY);
    cr_expect_null(b);
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, "CL_DEVICE_MAX_MEM_ALLOC_SIZE"), 1, "%s",
                 first_error());
    be->destroy(ctx);
}

Test(opencl, out_of_bounds_tensor_is_refused_before_enqueue) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    ampx_buffer *b = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, 16, &b), AMPX_OK);
    memset(&rec, 0, sizeof rec);
    ampx_scale_args sa = {
        .size = sizeof sa, .n = 5, .alpha = 1.0f, .x = {b, 0, AMPX_F32}, .y = {b, 0, AMPX_F32}};
    cr_expect_eq(be->ops->scale(ctx, &sa), AMPX_ERR_INVALID);
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, "overruns its buffer of 16 bytes"), 1, "%s",
                 first_error());
    cr_expect_eq(be->synchronize(ctx), AMPX_OK);
    be->buffer_free(ctx, b);
    be->destroy(ctx);
}

Test(opencl, overlapping_copy_behaves_like_memmove) {
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    ampx_buffer *b = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, 8, &b), AMPX_OK);
    unsigned char in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    cr_assert_eq(be->buffer_write(ctx, b, 0, in, 8), AMPX_OK);
    cr_assert_eq(be->buffer_copy(ctx, b, 2, b, 0, 6), AMPX_OK, "%s", first_error());
    cr_assert_eq(be->buffer_read(ctx, b, 0, out, 8), AMPX_OK);
    unsigned char want[8] = {1, 2, 1, 2, 3, 4, 5, 6};
    cr_expect_arr_eq(out, want, 8);
    /* a 2-byte fill at an odd offset */
    cr_assert_eq(be->buffer_fill(ctx, b, 1, 4, 0xbeef, 2), AMPX_OK);
    cr_assert_eq(be->buffer_read(ctx, b, 0, out, 8), AMPX_OK);
    unsigned char want2[8] = {1, 0xef, 0xbe, 0xef, 0xbe, 4, 5, 6};
    cr_expect_arr_eq(out, want2, 8);
    be->buffer_free(ctx, b);
    be->destroy(ctx);
}

// ---------------------------------------------------------------------------------------
// GEMM shapes the conformance suite does not try: a weight shared by every batch (stride 0),
// and a single batch with zero strides, on each GEMM path.

static void check_shared_weight_gemm(const char *path_opt, ampx_dtype dt) {
    enum { M = 5, N = 19, K = 7, BATCH = 3 };
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(path_opt, &ctx), AMPX_OK, "%s", first_error());
    float a[M * K], b[BATCH * K * N], c[BATCH * M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 7) % 11) - 5.0f; /* small integers: exact in bf16 and f16 */
    for (int i = 0; i < BATCH * K * N; i++)
        b[i] = (float)((i * 5) % 9) - 4.0f;
    size_t es = ampx_dtype_size(dt);
    uint16_t tmp[BATCH * K * N];
    ampx_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, sizeof a / 4 * es, &ba), AMPX_OK);
    cr_assert_eq(be->buffer_alloc(ctx, sizeof b / 4 * es, &bb), AMPX_OK);
    cr_assert_eq(be->buffer_alloc(ctx, sizeof c / 4 * es, &bc), AMPX_OK);
    if (dt == AMPX_F32) {
        cr_assert_eq(be->buffer_write(ctx, ba, 0, a, sizeof a), AMPX_OK);
        cr_assert_eq(be->buffer_write(ctx, bb, 0, b, sizeof b), AMPX_OK);
    } else {
        for (int i = 0; i < M * K; i++)
            tmp[i] = dt == AMPX_BF16 ? ampx_f32_to_bf16(a[i]) : ampx_f32_to_f16(a[i]);
        cr_assert_eq(be->buffer_write(ctx, ba, 0, tmp, M * K * 2), AMPX_OK);
        for (int i = 0; i < BATCH * K * N; i++)
            tmp[i] = dt == AMPX_BF16 ? ampx_f32_to_bf16(b[i]) : ampx_f32_to_f16(b[i]);
        cr_assert_eq(be->buffer_write(ctx, bb, 0, tmp, BATCH * K * N * 2), AMPX_OK);
    }
    ampx_gemm_args g  = {.size     = sizeof g,
                         .m        = M,
                         .n        = N,
                         .k        = K,
                         .batch    = BATCH,
                         .lda      = K,
                         .ldb      = N,
                         .ldc      = N,
                         .stride_a = 0, /* one A for every batch */
                         .stride_b = K * N,
                         .stride_c = M * N,
                         .alpha    = 1.0f,
                         .beta     = 0.0f,
                         .a        = {ba, 0, dt},
                         .b        = {bb, 0, dt},
                         .c        = {bc, 0, AMPX_F32}};
    ampx_buffer *bc32 = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, sizeof c, &bc32), AMPX_OK);
    g.c.buf = bc32;
    cr_assert_eq(be->ops->gemm(ctx, &g), AMPX_OK, "%s", first_error());
    cr_assert_eq(be->buffer_read(ctx, bc32, 0, c, sizeof c), AMPX_OK, "%s", first_error());
    for (int t = 0; t < BATCH; t++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float want = 0.0f; /* small integers: every sum is exact */
                for (int p = 0; p < K; p++)
                    want += a[i * K + p] * b[t * K * N + p * N + j];
                cr_expect_eq(c[t * M * N + i * N + j], want, "%s %s batch %d C[%d][%d]: %g != %g",
                             path_opt, ampx_dtype_name(dt), t, i, j, c[t * M * N + i * N + j],
                             want);
            }
    /* batch 1 with every stride 0 */
    g.batch    = 1;
    g.stride_b = 0;
    g.stride_c = 0;
    cr_assert_eq(be->ops->gemm(ctx, &g), AMPX_OK, "%s", first_error());
    cr_assert_eq(be->synchronize(ctx), AMPX_OK, "%s", first_error());
    be->buffer_free(ctx, ba);
    be->buffer_free(ctx, bb);
    be->buffer_free(ctx, bc);
    be->buffer_free(ctx, bc32);
    be->destroy(ctx);
}

Test(opencl, gemm_shared_weight_every_path) {
    const char *paths[] = {"gemm=auto", "gemm=rows", "gemm=tiled", "gemm=convert", "gemm=packed"};
    const ampx_dtype dts[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
    for (int p = 0; p < 5; p++)
        for (int d = 0; d < 3; d++)
            check_shared_weight_gemm(paths[p], dts[d]);
}

// ---------------------------------------------------------------------------------------
// ABI 1.1 ops, against dtype.h itself: DROPOUT's mask is ampx_hash32 bit for bit (what the CPU
// and CUDA backends compute), PERMUTE transposes, in every pair of dtypes.

static const ampx_dtype float_dts[3] = {AMPX_F32, AMPX_BF16, AMPX_F16};

static void put(void *p, ampx_dtype dt, size_t i, float v) {
    if (dt == AMPX_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == AMPX_BF16 ? ampx_f32_to_bf16(v) : ampx_f32_to_f16(v);
}

static float get(const void *p, ampx_dtype dt, size_t i) {
    if (dt == AMPX_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == AMPX_BF16 ? ampx_bf16_to_f32(h) : ampx_f16_to_f32(h);
}

/* Element i of got and want: the same bits, or (where arithmetic or a conversion made it, and
 * a device may give any NaN) both NaN. */
static int same_elem(const void *got, const void *want, ampx_dtype dt, size_t i, int exact) {
    size_t es = ampx_dtype_size(dt);
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) == 0) return 1;
    return !exact && isnan(get(got, dt, i)) && isnan(get(want, dt, i));
}

Test(opencl, dropout_mask_is_the_hash_of_dtype_h) {
    enum { N = 1237 };
    const uint64_t seed = 0x5eedull, offset = UINT64_MAX - 600; /* the counter wraps */
    const uint32_t threshold = 0x4ccccccdu;                     /* rate 0.3 */
    const float scale        = (float)(1.0 / 0.7);
    ampx_context *ctx        = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    ampx_buffer *bx = NULL, *by = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, N * 4, &bx), AMPX_OK);
    cr_assert_eq(be->buffer_alloc(ctx, N * 4, &by), AMPX_OK);
    float xf[N];
    for (int i = 0; i < N; i++)
        xf[i] = (float)((i * 37) % 201 - 100) / 16.0f;
    xf[5] = NAN; /* dropped or not, by the mask alone */
    unsigned char x[N * 4], want[N * 4], got[N * 4];
    for (int xi = 0; xi < 3; xi++)
        for (int yi = 0; yi < 3; yi++) {
            ampx_dtype xdt = float_dts[xi], ydt = float_dts[yi];
            size_t yes = ampx_dtype_size(ydt);
            for (int i = 0; i < N; i++) {
                put(x, xdt, (size_t)i, xf[i]);
                int keep = ampx_hash32(seed, offset + (uint64_t)i) >= threshold;
                put(want, ydt, (size_t)i, keep ? get(x, xdt, (size_t)i) * scale : 0.0f);
            }
            cr_assert_eq(be->buffer_write(ctx, bx, 0, x, N * ampx_dtype_size(xdt)), AMPX_OK);
            ampx_dropout_args a = {.size      = sizeof a,
                                   .threshold = threshold,
                                   .n         = N,
                                   .seed      = seed,
                                   .offset    = offset,
                                   .scale     = scale,
                                   .x         = {bx, 0, xdt},
                                   .y         = {xdt == ydt ? bx : by, 0, ydt}}; /* in place */
            cr_assert_eq(be->ops->dropout(ctx, &a), AMPX_OK, "%s", first_error());
            cr_assert_eq(be->buffer_read(ctx, a.y.buf, 0, got, N * yes), AMPX_OK, "%s",
                         first_error());
            for (int i = 0; i < N; i++)
                if (!same_elem(got, want, ydt, (size_t)i, 0)) {
                    cr_expect_fail("dropout %s -> %s: element %d is %g, want %g",
                                   ampx_dtype_name(xdt), ampx_dtype_name(ydt), i,
                                   get(got, ydt, (size_t)i), get(want, ydt, (size_t)i));
                    break;
                }
        }
    be->buffer_free(ctx, bx);
    be->buffer_free(ctx, by);
    be->destroy(ctx);
}

/* y[k][j][i] = x[i][j][k] for x [3, 5, 7]; same dtypes copy the bits (a NaN payload too). */
Test(opencl, permute_transposes_in_every_dtype_pair) {
    enum { D0 = 3, D1 = 5, D2 = 7, N = D0 * D1 * D2 };
    ampx_context *ctx = NULL;
    cr_assert_eq(create_cached(NULL, &ctx), AMPX_OK, "%s", first_error());
    ampx_buffer *bx = NULL, *by = NULL;
    cr_assert_eq(be->buffer_alloc(ctx, N * 4, &bx), AMPX_OK);
    cr_assert_eq(be->buffer_alloc(ctx, N * 4, &by), AMPX_OK);
    unsigned char x[N * 4], want[N * 4], got[N * 4];
    for (int xi = 0; xi < 3; xi++)
        for (int yi = 0; yi < 3; yi++) {
            ampx_dtype xdt = float_dts[xi], ydt = float_dts[yi];
            size_t xes = ampx_dtype_size(xdt), yes = ampx_dtype_size(ydt);
            for (int e = 0; e < N; e++)
                put(x, xdt, (size_t)e, (float)(e * 131 % 1000) / 7.0f - 60.0f);
            if (xes == 4) { /* a signalling NaN with a payload: a copy keeps its bits */
                uint32_t snan = 0x7f800123u;
                memcpy(x + 4 * 11, &snan, 4);
            } else {
                uint16_t snan = xdt == AMPX_BF16 ? 0x7f81u : 0x7d23u;
                memcpy(x + 2 * 11, &snan, 2);
            }
            for (int i = 0; i < D0; i++)
                for (int j = 0; j < D1; j++)
                    for (int k = 0; k < D2; k++) {
                        size_t xe = (size_t)((i * D1 + j) * D2 + k);
                        size_t ye = (size_t)((k * D1 + j) * D0 + i);
                        if (xdt == ydt)
                            memcpy(want + ye * yes, x + xe * xes, yes);
                        else
                            put(want, ydt, ye, get(x, xdt, xe));
                    }
            cr_assert_eq(be->buffer_write(ctx, bx, 0, x, N * xes), AMPX_OK);
            cr_assert_eq(be->buffer_fill(ctx, by, 0, N * 4, 0xffffffffu, 4), AMPX_OK);
            ampx_permute_args a = {.size      = sizeof a,
                                   .ndim      = 3,
                                   .dims      = {D0, D1, D2},
                                   .x_strides = {D1 * D2, D2, 1},
                                   .y_strides = {1, D0, D0 * D1},
                                   .x         = {bx, 0, xdt},
                                   .y         = {by, 0, ydt}};
            cr_assert_eq(be->ops->permute(ctx, &a), AMPX_OK, "%s", first_error());
            cr_assert_eq(be->buffer_read(ctx, by, 0, got, N * yes), AMPX_OK, "%s", first_error());
            for (int e = 0; e < N; e++)
                if (!same_elem(got, want, ydt, (size_t)e, xdt == ydt)) {
                    cr_expect_fail("permute %s -> %s: y element %d is %g, want %g",
                                   ampx_dtype_name(xdt), ampx_dtype_name(ydt), e,
                                   get(got, ydt, (size_t)e), get(want, ydt, (size_t)e));
                    break;
                }
        }
    be->buffer_free(ctx, bx);
    be->buffer_free(ctx, by);
    be->destroy(ctx);
}

// ---------------------------------------------------------------------------------------
// No platform at all: the ICD loader pointed at an empty vendor directory (each Criterion
// test runs in its own process, so the loader initialises here for the first time).

TestSuite(opencl_none);

Test(opencl_none, probe_and_create_say_no_platform_in_one_line) {
    char dir[512];
    cr_assert_not_null(test_mkdtemp(dir, sizeof dir, "ampx-ocl-noicd"));
    setenv("OCL_ICD_VENDORS", dir, 1);
    void *h = dlopen(AMPX_TEST_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen: %s", dlerror());
    ampx_backend_entry_fn entry = (ampx_backend_entry_fn)dlsym(h, AMPX_BACKEND_ENTRY_SYMBOL);
    const ampx_backend_iface *t = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    char reason[512]            = "";
    cr_expect_eq(t->probe(reason, sizeof reason), AMPX_ERR_UNAVAILABLE);
    cr_expect(strstr(reason, "no OpenCL platform") != NULL, "%s", reason);
    cr_expect_null(strchr(reason, '\n'), "one line: %s", reason);

    memset(&rec, 0, sizeof rec);
    ampx_host host    = {.size      = sizeof host,
                         .abi_major = AMPX_ABI_MAJOR,
                         .abi_minor = AMPX_ABI_MINOR,
                         .log       = record,
                         .log_user  = &rec};
    ampx_context *ctx = NULL;
    cr_expect_eq(t->create(&host, &ctx), AMPX_ERR_UNAVAILABLE);
    cr_expect_null(ctx);
    cr_expect_eq(count_lines(AMPX_LOG_ERROR, "no OpenCL platform"), 1, "%s", first_error());
    rmdir(dir);
}
