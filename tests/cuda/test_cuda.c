/* test_cuda.c — the CUDA plugin through its ABI, with or without a GPU.
 *
 * Everywhere (CI has the toolkit but no GPU and no driver): the plugin loads with dlopen as
 * the host loads it, exports only its entry, fills every slot of the v1 table, refuses
 * another ABI major, and its supports() table is exactly the ABI's (every float dtype in
 * every slot, dtable f32 only). Without a usable device the probe returns UNAVAILABLE with
 * one line that says why, and create() fails the same way with one ERROR line, never a crash.
 *
 * With a device (the probe says OK) the device tests run instead: buffers round-trip, fill
 * and copy (overlapping too), argument errors are caught on the host with one ERROR line, and
 * a few ops whose results are exact are checked bit for bit (the full numerics are
 * `ampx conformance --backend cuda`, run by tests/cuda/cli.sh). Without a device those tests
 * are skipped with the probe's reason.
 */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ampx/backend.h"

// ---------------------------------------------------------------------------------------
// The log

static struct {
    int n_error, n_other;
    char last[1024];
} g_log;

static void on_log(void *user, ampx_log_level level, const char *msg) {
    (void)user;
    if (level == AMPX_LOG_ERROR)
        g_log.n_error++;
    else
        g_log.n_other++;
    snprintf(g_log.last, sizeof g_log.last, "%s", msg ? msg : "(null)");
}

static void log_reset(void) {
    memset(&g_log, 0, sizeof g_log);
}

/* `call` fails with `want` and logs exactly one ERROR line containing `needle`. */
#define EXPECT_ERR(want, needle, call)                                                             \
    do {                                                                                           \
        log_reset();                                                                               \
        ampx_status got_ = (call);                                                                 \
        cr_expect_eq(got_, (want), "%s returned %d, want %d (log: %s)", #call, got_, (want),       \
                     g_log.last);                                                                  \
        cr_expect_eq(g_log.n_error, 1, "%s logged %d ERROR lines", #call, g_log.n_error);          \
        cr_expect(strstr(g_log.last, (needle)) != NULL, "%s logged '%s', want '%s'", #call,        \
                  g_log.last, (needle));                                                           \
        cr_expect(strchr(g_log.last, '\n') == NULL, "%s logged more than one line", #call);        \
    } while (0)

#define EXPECT_OK(call)                                                                            \
    do {                                                                                           \
        log_reset();                                                                               \
        ampx_status got_ = (call);                                                                 \
        cr_assert_eq(got_, AMPX_OK, "%s returned %d (log: %s)", #call, got_, g_log.last);          \
    } while (0)

// ---------------------------------------------------------------------------------------
// Loading

static void *g_dl;
static const ampx_backend_iface *I;
static const ampx_backend_ops *O;
static ampx_context *C;
static char g_reason[512];
static ampx_status g_probe;

static void load_plugin(void) {
    g_dl = dlopen(AMPX_TEST_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(g_dl, "dlopen %s: %s", AMPX_TEST_CUDA_PLUGIN, dlerror());
    void *sym = dlsym(g_dl, AMPX_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(sym, "no %s in %s", AMPX_BACKEND_ENTRY_SYMBOL, AMPX_TEST_CUDA_PLUGIN);
    ampx_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    I = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    cr_assert_not_null(I);
    O           = I->ops;
    g_reason[0] = '\0';
    g_probe     = I->probe(g_reason, sizeof g_reason);
    log_reset();
}

static void unload_plugin(void) {
    if (C) I->destroy(C);
    C = NULL;
    if (g_dl) dlclose(g_dl);
    g_dl = NULL;
}

static ampx_host host_with(const char *const *options, uint32_t n_options) {
    ampx_host h = {sizeof h, AMPX_ABI_MAJOR, AMPX_ABI_MINOR, on_log, NULL, options, n_options};
    return h;
}

/* Loads the plugin and, when the probe says a device is usable, creates a context; else the
 * calling test is skipped with the probe's reason. */
static void open_or_skip(void) {
    load_plugin();
    if (g_probe != AMPX_OK) cr_skip_test("no usable CUDA device here: %s", g_reason);
    ampx_host h = host_with(NULL, 0);
    cr_assert_eq(I->create(&h, &C), AMPX_OK, "create: %s", g_log.last);
    log_reset();
}

// ---------------------------------------------------------------------------------------
// Everywhere: the table, the symbol, supports(), the refusal

TestSuite(cuda_plugin, .init = load_plugin, .fini = unload_plugin);

Test(cuda_plugin, exports_only_the_entry) {
    /* hidden visibility: internal symbols are not reachable with dlsym */
    cr_expect_null(dlsym(g_dl, "cu_gemm"));
    cr_expect_null(dlsym(g_dl, "cuk_gemm_native"));
    cr_expect_null(dlsym(g_dl, "cu_fail"));
}

Test(cuda_plugin, table_is_complete) {
    cr_expect_eq(I->abi_major, AMPX_ABI_MAJOR);
    cr_expect_eq(I->size, sizeof(ampx_backend_iface));
    cr_expect_str_eq(I->name, "cuda");
    cr_expect(I->probe && I->create && I->destroy && I->device_info && I->supports &&
              I->buffer_alloc && I->buffer_free && I->buffer_write && I->buffer_read &&
              I->buffer_copy && I->buffer_fill && I->synchronize);
    cr_assert_not_null(O);
    cr_expect_eq(O->size, sizeof(ampx_backend_ops));
    void (*const *slot)(void) = (void (*const *)(void))((const char *)O + 8);
    for (unsigned op = 0; op < AMPX_OP_COUNT; op++)
        cr_expect_not_null(slot[op], "op %u has no slot", op);
}

Test(cuda_plugin, entry_refuses_other_major) {
    void *sym = dlsym(g_dl, AMPX_BACKEND_ENTRY_SYMBOL);
    ampx_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    cr_expect_null(entry(AMPX_ABI_MAJOR + 1, 0));
}

/* The probe's answer is one non-empty line either way; without a device it is UNAVAILABLE
 * and names what is missing. */
Test(cuda_plugin, probe_says_one_line) {
    cr_expect(g_probe == AMPX_OK || g_probe == AMPX_ERR_UNAVAILABLE, "probe returned %d", g_probe);
    cr_expect(g_reason[0] != '\0', "probe gave no reason");
    cr_expect(strchr(g_reason, '\n') == NULL, "probe reason has a newline: %s", g_reason);
    if (g_probe != AMPX_OK) {
        int named = strstr(g_reason, "no NVIDIA driver") || strstr(g_reason, "driver too old") ||
                    strstr(g_reason, "no CUDA device") || strstr(g_reason, "cuInit failed") ||
                    strstr(g_reason, "cuDeviceGetCount failed") ||
                    strstr(g_reason, "no CUDA device of compute capability");
        cr_expect(named, "probe reason names no cause: %s", g_reason);
        /* a tiny reason buffer truncates, never overflows */
        char small[8];
        memset(small, 'x', sizeof small);
        I->probe(small, 4);
        cr_expect_eq(small[3], '\0');
        cr_expect_eq(small[4], 'x');
    }
}

Test(cuda_plugin, create_without_device_fails_cleanly) {
    if (g_probe == AMPX_OK) cr_skip_test("a CUDA device is usable here");
    ampx_host h       = host_with(NULL, 0);
    ampx_context *ctx = (ampx_context *)&h; /* must be reset to NULL */
    EXPECT_ERR(AMPX_ERR_UNAVAILABLE, "cuda: ", I->create(&h, &ctx));
    cr_expect_null(ctx);
    cr_expect(strstr(g_log.last, g_reason) != NULL, "create logged '%s', probe said '%s'",
              g_log.last, g_reason);
    I->destroy(NULL); /* a no-op */
}

Test(cuda_plugin, create_null_arguments) {
    ampx_context *ctx = NULL;
    log_reset();
    cr_expect_eq(I->create(NULL, &ctx), AMPX_ERR_INVALID);
    ampx_host h = host_with(NULL, 0);
    EXPECT_ERR(AMPX_ERR_INVALID, "out is NULL", I->create(&h, NULL));
    ampx_host other = h;
    other.abi_major = AMPX_ABI_MAJOR + 1;
    EXPECT_ERR(AMPX_ERR_UNSUPPORTED, "host speaks ABI", I->create(&other, &ctx));
}

/* The ABI's dtype rules per op heading, independently of the plugin's own table. */
static int abi_allows(unsigned op, const ampx_dtype *dt, unsigned n) {
    if (op == AMPX_OP_FP8_QUANTIZE) /* ABI 1.7: exactly one side fp8 */
        return n == 2 &&
               (ampx_dtype_is_fp8(dt[0]) ? ampx_dtype_is_float(dt[1])
                                         : ampx_dtype_is_float(dt[0]) && ampx_dtype_is_fp8(dt[1]));
    if (op == AMPX_OP_GEMM_FP8) /* fp8 A and B, a float C */
        return n == 3 && ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_fp8(dt[1]) &&
               ampx_dtype_is_float(dt[2]);
    for (unsigned i = 0; i < n; i++)
        if (!ampx_dtype_is_float(dt[i])) return 0;
    if (op == AMPX_OP_EMBEDDING_BWD) return dt[1] == AMPX_F32;
    return 1;
}

static unsigned n_dtypes_of(unsigned op) {
    switch (op) {
    case AMPX_OP_GEMM:
    case AMPX_OP_GEMM_FP8:
    case AMPX_OP_ADD:
    case AMPX_OP_MUL:
    case AMPX_OP_ACT_BWD:
    case AMPX_OP_SOFTMAX_BWD:
    case AMPX_OP_LAYERNORM_BWD:
    case AMPX_OP_BATCHNORM_BWD: return 3;
    case AMPX_OP_ATTN_BWD: return 4;
    case AMPX_OP_SUM_SQUARES:
    case AMPX_OP_ABS_MAX:
    case AMPX_OP_UNSCALE_CHECK:
    case AMPX_OP_GRAD_STATS:
    case AMPX_OP_AMP_PASS:
    case AMPX_OP_SGD:
    case AMPX_OP_ADAMW: return 1;
    case AMPX_OP_SCALER_UPDATE:
    case AMPX_OP_FP8_SCALE_UPDATE: return 0;
    default: return 2;
    }
}

Test(cuda_plugin, supports_every_float_dtype) {
    for (unsigned op = 0; op < AMPX_OP_COUNT; op++) {
        unsigned n = n_dtypes_of(op), combos = 1;
        for (unsigned i = 0; i < n; i++)
            combos *= AMPX_DTYPE_COUNT;
        for (unsigned c = 0; c < combos; c++) {
            ampx_dtype dt[4];
            unsigned x = c;
            for (unsigned i = 0; i < n; i++, x /= AMPX_DTYPE_COUNT)
                dt[i] = (ampx_dtype)(x % AMPX_DTYPE_COUNT);
            int got = I->supports(NULL, op, dt, n, AMPX_SHAPE_ANY);
            cr_expect_eq(got, abi_allows(op, dt, n), "supports(op %u, combo %u) = %d", op, c, got);
        }
        ampx_dtype f32[4] = {AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32};
        if (n > 0) cr_expect_eq(I->supports(NULL, op, f32, n - 1, AMPX_SHAPE_ANY), 0);
        /* shape class 1 is GEMM's epilogue (ABI 1.5), which GEMM claims (and GEMM_FP8, for
         * fp8 operands); no other op */
        cr_expect_eq(I->supports(NULL, op, f32, n, AMPX_SHAPE_GEMM_EPILOGUE), op == AMPX_OP_GEMM);
        ampx_dtype fp8[3] = {AMPX_E4M3, AMPX_E5M2, AMPX_BF16};
        if (n == 3)
            cr_expect_eq(I->supports(NULL, op, fp8, n, AMPX_SHAPE_GEMM_EPILOGUE),
                         op == AMPX_OP_GEMM_FP8);
        cr_expect_eq(I->supports(NULL, op, f32, n, AMPX_SHAPE_GEMM_EPILOGUE + 1), 0);
    }
    cr_expect_eq(I->supports(NULL, AMPX_OP_COUNT, NULL, 0, AMPX_SHAPE_ANY), 0);
}

// ---------------------------------------------------------------------------------------
// With a device

TestSuite(cuda_device, .fini = unload_plugin);

Test(cuda_device, device_info) {
    open_or_skip();
    ampx_device_info info = {.size = sizeof info};
    EXPECT_OK(I->device_info(C, &info));
    cr_expect(info.name[0] != '\0');
    cr_expect(strstr(info.description, "compute capability") != NULL, "%s", info.description);
    cr_expect_gt(info.memory_bytes, 0);
}

Test(cuda_device, options) {
    open_or_skip();
    ampx_context *ctx     = NULL;
    const char *bad_key[] = {"threads=2"}, *bad_dev[] = {"device=99999"},
               *bad_gemm[] = {"gemm=fast"}, *good[] = {"device=0", "gemm=native"};
    ampx_host h = host_with(bad_key, 1);
    EXPECT_ERR(AMPX_ERR_INVALID, "unknown option 'threads'", I->create(&h, &ctx));
    h = host_with(bad_dev, 1);
    EXPECT_ERR(AMPX_ERR_INVALID, "device=99999", I->create(&h, &ctx));
    h = host_with(bad_gemm, 1);
    EXPECT_ERR(AMPX_ERR_INVALID, "gemm=fast", I->create(&h, &ctx));
    h = host_with(good, 2);
    EXPECT_OK(I->create(&h, &ctx));
    I->destroy(ctx);
}

Test(cuda_device, buffers_round_trip) {
    open_or_skip();
    ampx_buffer *b = NULL, *z = NULL;
    unsigned char in[1000], out[1000];
    for (int i = 0; i < 1000; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    EXPECT_OK(I->buffer_alloc(C, 1000, &b));
    EXPECT_OK(I->buffer_alloc(C, 0, &z));
    EXPECT_OK(I->buffer_write(C, b, 0, in, 1000));
    EXPECT_OK(I->buffer_read(C, b, 0, out, 1000));
    cr_expect_arr_eq(in, out, 1000);
    /* overlapping copy within one buffer: memmove semantics */
    EXPECT_OK(I->buffer_copy(C, b, 10, b, 0, 500));
    EXPECT_OK(I->buffer_read(C, b, 0, out, 1000));
    cr_expect_arr_eq(out + 10, in, 500);
    /* fill with a 2-byte pattern at an odd offset */
    EXPECT_OK(I->buffer_fill(C, b, 1, 6, 0xabcd, 2));
    EXPECT_OK(I->buffer_read(C, b, 0, out, 8));
    unsigned char want[6] = {0xcd, 0xab, 0xcd, 0xab, 0xcd, 0xab};
    cr_expect_arr_eq(out + 1, want, 6);
    EXPECT_ERR(AMPX_ERR_INVALID, "overruns", I->buffer_write(C, b, 999, in, 2));
    EXPECT_ERR(AMPX_ERR_INVALID, "overruns", I->buffer_read(C, z, 0, out, 1));
    EXPECT_ERR(AMPX_ERR_INVALID, "pattern_bytes", I->buffer_fill(C, b, 0, 6, 0, 3));
    EXPECT_OK(I->synchronize(C));
    I->buffer_free(C, b);
    I->buffer_free(C, z);
}

Test(cuda_device, out_of_memory_names_the_size) {
    open_or_skip();
    ampx_buffer *b = NULL;
    EXPECT_ERR(AMPX_ERR_NO_MEMORY, "bytes", I->buffer_alloc(C, 1ull << 60, &b));
    cr_expect_null(b);
    EXPECT_OK(I->synchronize(C)); /* not a sticky error */
}

/* SCALE is one f32 product rounded once: exact, compared bit for bit with dtype.h. */
Test(cuda_device, scale_bf16_exact) {
    open_or_skip();
    enum { N = 1031 };
    float x[N];
    uint16_t y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - 500) * 0.37f + 1e-3f * (float)i;
    ampx_buffer *bx = NULL, *by = NULL;
    EXPECT_OK(I->buffer_alloc(C, sizeof x, &bx));
    EXPECT_OK(I->buffer_alloc(C, sizeof y, &by));
    EXPECT_OK(I->buffer_write(C, bx, 0, x, sizeof x));
    ampx_scale_args a = {.size  = sizeof a,
                         .n     = N,
                         .alpha = 1.0f / 3.0f,
                         .x     = {bx, 0, AMPX_F32},
                         .y     = {by, 0, AMPX_BF16}};
    EXPECT_OK(O->scale(C, &a));
    EXPECT_OK(I->buffer_read(C, by, 0, y, sizeof y));
    for (int i = 0; i < N; i++)
        cr_expect_eq(y[i], ampx_f32_to_bf16(a.alpha * x[i]), "element %d", i);
    a.n = N + 1;
    EXPECT_ERR(AMPX_ERR_INVALID, "scale: x", O->scale(C, &a));
    I->buffer_free(C, bx);
    I->buffer_free(C, by);
}

/* The loss-scaling path on the device: an inf in one tensor flags it and sets found_inf; the
 * optimizer then writes nothing; scaler_update backs off the scale. */
Test(cuda_device, skipped_step_changes_nothing) {
    open_or_skip();
    float g0[4] = {1024, -2048, 512, 0}, g1[3] = {1, INFINITY, 2}, p[4] = {1, 2, 3, 4};
    ampx_scalars s;
    memset(&s, 0, sizeof s);
    s.scale = 1024.0f, s.mode = AMPX_SCALER_DYNAMIC, s.growth_factor = 2.0f;
    s.backoff_factor = 0.5f, s.growth_interval = 2000, s.hysteresis = 1, s.hysteresis_left = 1;
    s.max_scale = INFINITY, s.lr_base = 0.1f;
    ampx_buffer *b = NULL;
    EXPECT_OK(I->buffer_alloc(C, 512, &b));
    EXPECT_OK(I->buffer_write(C, b, 0, g0, sizeof g0));
    EXPECT_OK(I->buffer_write(C, b, 16, g1, sizeof g1));
    EXPECT_OK(I->buffer_write(C, b, 32, p, sizeof p));
    EXPECT_OK(I->buffer_write(C, b, 128, &s, sizeof s));
    EXPECT_OK(I->buffer_fill(C, b, 64, 8, 0x7f7f7f7f, 4)); /* flags, poisoned */
    ampx_tensor grads[2]      = {{b, 0, AMPX_F32}, {b, 16, AMPX_F32}};
    uint64_t n[2]             = {4, 3};
    ampx_unscale_check_args u = {.size    = sizeof u,
                                 .grads   = {2, grads, n},
                                 .flags   = {b, 64, AMPX_I32},
                                 .scalars = {b, 128, AMPX_F32}};
    EXPECT_OK(O->unscale_check(C, &u));
    ampx_tensor params[1] = {{b, 32, AMPX_F32}};
    ampx_sgd_args sgd     = {.size    = sizeof sgd,
                             .params  = {1, params, n},
                             .grads   = grads,
                             .scalars = {b, 128, AMPX_F32}};
    EXPECT_OK(O->sgd(C, &sgd));
    ampx_scaler_update_args su = {.size = sizeof su, .scalars = {b, 128, AMPX_F32}};
    EXPECT_OK(O->scaler_update(C, &su));
    float gout[4], pout[4];
    int32_t flags[2];
    ampx_scalars sout;
    EXPECT_OK(I->buffer_read(C, b, 0, gout, sizeof gout));
    EXPECT_OK(I->buffer_read(C, b, 32, pout, sizeof pout));
    EXPECT_OK(I->buffer_read(C, b, 64, flags, sizeof flags));
    EXPECT_OK(I->buffer_read(C, b, 128, &sout, sizeof sout));
    float want_g[4] = {1, -2, 0.5f, 0};
    cr_expect_arr_eq(gout, want_g, sizeof gout);
    cr_expect_arr_eq(pout, p, sizeof pout, "a skipped step changed the parameters");
    cr_expect_eq(flags[0], 0);
    cr_expect_eq(flags[1], 1);
    cr_expect_eq(sout.found_inf, 0);
    cr_expect_eq(sout.last_found_inf, 1);
    cr_expect_eq(sout.scale, 512.0f);
    cr_expect_eq(sout.skipped_steps, 1);
    cr_expect_eq(sout.applied_steps, 0);
    cr_expect_eq(sout.lr, 0.0f, "a skipped step wrote lr");
    I->buffer_free(C, b);
}

/* AMP_PASS (ABI 1.4) against the three ops it stands for, bit for bit: 37 tensors (more than
 * one launch group), f32 and bf16, of 0 to 100003 elements, one with an inf, a scale whose
 * inverse is inexact; gradients, flags, statistics, counts, NaN counts, the square sum and the
 * scalars block must all agree. */
Test(cuda_device, amp_pass_same_bits_as_separate_ops) {
    open_or_skip();
    enum { T = 37, MAXN = 100003 };
    uint64_t n[T], off[T], bytes = 0;
    ampx_tensor ga[T], gb[T];
    for (int t = 0; t < T; t++) {
        n[t]   = t == 3 ? 0 : t == 9 ? MAXN : (uint64_t)(t * 977 % 4099) + 1;
        off[t] = bytes;
        bytes += (n[t] * 4 + 255) / 256 * 256;
    }
    float *host = malloc(bytes);
    cr_assert_not_null(host);
    for (uint64_t i = 0; i < bytes / 4; i++)
        host[i] = (float)((double)(ampx_hash32(5, i) >> 8) / 16384.0 - 512.0);
    host[off[11] / 4 + 2] = INFINITY;
    ampx_scalars s;
    memset(&s, 0, sizeof s);
    s.scale = 3.0f, s.mode = AMPX_SCALER_DYNAMIC;
    ampx_buffer *ba = NULL, *bb = NULL, *oa = NULL, *ob = NULL;
    EXPECT_OK(I->buffer_alloc(C, bytes, &ba));
    EXPECT_OK(I->buffer_alloc(C, bytes, &bb));
    uint64_t ob_bytes = 512 + 4 * 9 * T;
    EXPECT_OK(I->buffer_alloc(C, ob_bytes, &oa));
    EXPECT_OK(I->buffer_alloc(C, ob_bytes, &ob));
    ampx_buffer *gbuf[2] = {ba, bb}, *obuf[2] = {oa, ob};
    for (int k = 0; k < 2; k++) {
        EXPECT_OK(I->buffer_write(C, gbuf[k], 0, host, bytes));
        EXPECT_OK(I->buffer_fill(C, obuf[k], 0, ob_bytes, 0x7f7f7f7f, 4));
        EXPECT_OK(I->buffer_write(C, obuf[k], 0, &s, sizeof s));
    }
    for (int t = 0; t < T; t++) {
        ampx_dtype dt = t % 2 ? AMPX_BF16 : AMPX_F32;
        ga[t]         = (ampx_tensor){ba, off[t], dt};
        gb[t]         = (ampx_tensor){bb, off[t], dt};
    }
    /* outputs at: scalars 0, sq 256, flags 512, stats 512 + 4T, counts 512 + 20T, nans 512 + 32T */
#define OUT(b, at, dt) ((ampx_tensor){b, at, dt})
    ampx_grad_stats_args g    = {sizeof g,
                                 AMPX_BF16,
                                 {T, ga, n},
                                 OUT(oa, 512 + 4 * T, AMPX_F32),
                                 OUT(oa, 512 + 20 * T, AMPX_I32),
                                 OUT(oa, 512 + 32 * T, AMPX_I32)};
    ampx_unscale_check_args u = {.size    = sizeof u,
                                 .grads   = {T, ga, n},
                                 .flags   = OUT(oa, 512, AMPX_I32),
                                 .scalars = OUT(oa, 0, AMPX_F32)};
    ampx_sum_squares_args q   = {sizeof q, 0, {T, ga, n}, OUT(oa, 256, AMPX_F32)};
    EXPECT_OK(O->grad_stats(C, &g));
    EXPECT_OK(O->unscale_check(C, &u));
    EXPECT_OK(O->sum_squares(C, &q));
    ampx_amp_pass_args f = {.size       = sizeof f,
                            .grads      = {T, gb, n},
                            .flags      = OUT(ob, 512, AMPX_I32),
                            .scalars    = OUT(ob, 0, AMPX_F32),
                            .sq_sum     = OUT(ob, 256, AMPX_F32),
                            .target     = AMPX_BF16,
                            .stats      = OUT(ob, 512 + 4 * T, AMPX_F32),
                            .counts     = OUT(ob, 512 + 20 * T, AMPX_I32),
                            .nan_counts = OUT(ob, 512 + 32 * T, AMPX_I32)};
#undef OUT
    EXPECT_OK(O->amp_pass(C, &f));
    unsigned char *ra = malloc(bytes), *rb = malloc(bytes), xa[512 + 4 * 9 * T], xb[sizeof xa];
    cr_assert(ra && rb);
    EXPECT_OK(I->buffer_read(C, ba, 0, ra, bytes));
    EXPECT_OK(I->buffer_read(C, bb, 0, rb, bytes));
    EXPECT_OK(I->buffer_read(C, oa, 0, xa, sizeof xa));
    EXPECT_OK(I->buffer_read(C, ob, 0, xb, sizeof xb));
    cr_expect(memcmp(ra, rb, bytes) == 0, "the unscaled gradients differ");
    cr_expect(memcmp(xa, xb, sizeof xa) == 0, "flags, statistics, square sum or scalars differ");
    ampx_scalars sa;
    memcpy(&sa, xa, sizeof sa);
    cr_expect_eq(sa.found_inf, 1, "the inf was not found");
    int32_t flag11;
    memcpy(&flag11, xa + 512 + 4 * 11, 4);
    cr_expect_eq(flag11, 1);
    free(ra);
    free(rb);
    free(host);
    I->buffer_free(C, ba);
    I->buffer_free(C, bb);
    I->buffer_free(C, oa);
    I->buffer_free(C, ob);
}
