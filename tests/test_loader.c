/* test_loader.c — the loader against real files that fail in every way it must report:
 * missing, not a shared object, wrong architecture, no entry symbol, wrong ABI major, probe
 * unavailable, ops failing mid-run, an op table from an older minor version. Each failure
 * must be one line naming the file and the reason, never a crash. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ampx/ampx.h"
#include "test_tmp.h"

#define PLUGIN(name) AMPX_TEST_PLUGIN_DIR "/lib" name ".so"
#define STR_(x) #x
#define STR(x) STR_(x)

static char err[2048];

/* The wrapper test plugins wrap the real CPU plugin; ctest sets its path, and so does this,
 * so the binary also runs by hand. */
__attribute__((constructor)) static void inner_plugin_default(void) {
    setenv("AMPX_TEST_INNER_PLUGIN", AMPX_TEST_CPU_PLUGIN, 0);
}

/* Opens spec expecting failure; returns the status and leaves the message in err. */
static ampx_status open_fails(const char *spec) {
    ampx_backend *be = (ampx_backend *)0x1;
    err[0]           = '\0';
    ampx_status st   = ampx_backend_open(spec, NULL, 0, &be, err, sizeof err);
    cr_assert_neq(st, AMPX_OK, "%s opened but should not have", spec);
    cr_assert_null(be, "a failed open must leave *out NULL");
    cr_assert_null(strchr(err, '\n'), "message is one line: %s", err);
    return st;
}

static void assert_mentions(const char *what) {
    cr_assert(strstr(err, what) != NULL, "message '%s' does not mention '%s'", err, what);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

// ---------------------------------------------------------------------------------------
// Files that are not plugins

Test(loader, missing_file) {
    open_fails("./no/such/libampx-nothing.so");
    assert_mentions("./no/such/libampx-nothing.so");
    assert_mentions("No such file");
}

Test(loader, not_a_shared_object) {
    char path[512];
    int fd = test_mkstemp(path, sizeof path, "ampx-test-notso");
    cr_assert_geq(fd, 0);
    close(fd);
    write_file(path, "this is text, not ELF\n", 22);
    open_fails(path);
    assert_mentions(path);
    assert_mentions("cannot load backend: not an ELF shared object");
    unlink(path);
}

Test(loader, wrong_architecture) {
    /* The real CPU plugin with its ELF e_machine changed to AArch64 (183). */
    FILE *f = fopen(AMPX_TEST_CPU_PLUGIN, "rb");
    cr_assert_not_null(f);
    static unsigned char buf[1 << 24];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_gt(n, 64);
    buf[18] = 183;
    buf[19] = 0;
    char path[512];
    int fd = test_mkstemp(path, sizeof path, "ampx-test-arch");
    cr_assert_geq(fd, 0);
    close(fd);
    write_file(path, buf, n);
    open_fails(path);
    assert_mentions(path);
    assert_mentions("wrong architecture: built for AArch64");
    unlink(path);
}

Test(loader, directory_is_not_a_plugin) {
    open_fails("/tmp/");
    assert_mentions("not a regular file");
}

Test(loader, no_entry_symbol) {
    open_fails(PLUGIN("no_entry"));
    assert_mentions(PLUGIN("no_entry"));
    assert_mentions("ampx_backend_entry");
}

Test(loader, entry_symbol_that_is_data) {
    open_fails(PLUGIN("data_entry"));
    assert_mentions(PLUGIN("data_entry"));
    assert_mentions("'ampx_backend_entry' is not a function");
}

// ---------------------------------------------------------------------------------------
// Plugins that load but must be refused

Test(loader, wrong_abi_major) {
    open_fails(PLUGIN("wrong_major"));
    assert_mentions(PLUGIN("wrong_major"));
    assert_mentions("plugin speaks 2.7");
    assert_mentions("host speaks " STR(AMPX_ABI_MAJOR) "." STR(AMPX_ABI_MINOR));
}

Test(loader, probe_unavailable) {
    cr_assert_eq(open_fails(PLUGIN("unavailable")), AMPX_ERR_UNAVAILABLE);
    assert_mentions(PLUGIN("unavailable"));
    assert_mentions("test device is switched off");
}

Test(loader, unknown_name) {
    setenv("AMPX_PLUGIN_PATH", "/tmp", 1);
    open_fails("definitely-not-a-backend");
    assert_mentions("libampx-definitely-not-a-backend.so");
    assert_mentions("not found");
}

Test(loader, bad_name) {
    open_fails("CPU!");
    assert_mentions("CPU!");
}

Test(loader, scoped_environment_options) {
    ampx_backend *be = NULL;
    /* an option scoped to another backend never reaches cpu, which would refuse it */
    setenv("AMPX_BACKEND_OPTS", "opencl.device=0:1,threads=1", 1);
    ampx_status st = ampx_backend_open(AMPX_TEST_CPU_PLUGIN, NULL, 0, &be, err, sizeof err);
    cr_assert_eq(st, AMPX_OK, "%s", err);
    ampx_device_info di = {.size = sizeof di};
    ampx_backend_iface_of(be)->device_info(ampx_backend_context(be), &di);
    cr_assert_eq(di.n_threads, 1, "threads=1 from the environment was not applied");
    ampx_backend_close(be);
    /* one scoped to cpu does reach it */
    setenv("AMPX_BACKEND_OPTS", "cpu.no_such_option=1", 1);
    st = ampx_backend_open(AMPX_TEST_CPU_PLUGIN, NULL, 0, &be, err, sizeof err);
    unsetenv("AMPX_BACKEND_OPTS");
    cr_assert_neq(st, AMPX_OK);
    assert_mentions("no_such_option");
}

Test(loader, environment_values_with_commas) {
    ampx_backend *be = NULL;
    /* opencl.gemm_params=64,64,16,8,8,4 is one entry, left out here: its pieces without '='
     * go with it, and threads=2 after them still arrives */
    setenv("AMPX_BACKEND_OPTS", "opencl.gemm_params=64,64,16,8,8,4,threads=2", 1);
    ampx_status st = ampx_backend_open(AMPX_TEST_CPU_PLUGIN, NULL, 0, &be, err, sizeof err);
    cr_assert_eq(st, AMPX_OK, "%s", err);
    ampx_device_info di = {.size = sizeof di};
    ampx_backend_iface_of(be)->device_info(ampx_backend_context(be), &di);
    cr_expect_eq(di.n_threads, 2, "threads=2 after a value with commas was not applied");
    ampx_backend_close(be);
    /* one that reaches cpu arrives whole: its value with the comma in the message */
    setenv("AMPX_BACKEND_OPTS", "threads=1,2", 1);
    st = ampx_backend_open(AMPX_TEST_CPU_PLUGIN, NULL, 0, &be, err, sizeof err);
    unsetenv("AMPX_BACKEND_OPTS");
    cr_assert_neq(st, AMPX_OK);
    assert_mentions("1,2");
}

Test(loader, bad_option_is_refused) {
    ampx_backend *be   = NULL;
    const char *opts[] = {"no_such_option=1"};
    ampx_status st     = ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 1, &be, err, sizeof err);
    cr_assert_neq(st, AMPX_OK);
    cr_assert_null(be);
    assert_mentions("no_such_option");
}

// ---------------------------------------------------------------------------------------
// Plugins that load

Test(loader, by_name_on_plugin_path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", AMPX_TEST_CPU_PLUGIN);
    *strrchr(dir, '/') = '\0';
    setenv("AMPX_PLUGIN_PATH", dir, 1);
    ampx_backend *be = NULL;
    cr_assert_eq(ampx_backend_open("cpu", NULL, 0, &be, err, sizeof err), AMPX_OK, "%s", err);
    cr_assert_str_eq(ampx_backend_iface_of(be)->name, "cpu");
    ampx_dtype f32x3[3] = {AMPX_F32, AMPX_F32, AMPX_F32};
    cr_assert(ampx_backend_supports(be, AMPX_OP_GEMM, f32x3, 3));
    ampx_backend_close(be);

    ampx_plugin_info list[16];
    size_t n  = ampx_plugin_list(list, 16);
    int found = 0;
    for (size_t i = 0; i < n && i < 16; i++)
        if (!strcmp(list[i].name, "cpu")) {
            found = 1;
            cr_assert(list[i].loadable && list[i].available, "%s", list[i].reason);
            cr_assert_eq(list[i].abi_major, AMPX_ABI_MAJOR);
        }
    cr_assert(found, "ampx_plugin_list does not list cpu");
}

Test(loader, older_minor_op_table_reads_as_unsupported) {
    ampx_backend *be = NULL;
    cr_assert_eq(ampx_backend_open(PLUGIN("old_minor"), NULL, 0, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    ampx_dtype f32x3[3] = {AMPX_F32, AMPX_F32, AMPX_F32};
    cr_assert_not_null(ampx_backend_op_slot(be, AMPX_OP_GEMM));
    cr_assert_not_null(ampx_backend_op_slot(be, AMPX_OP_CAST));
    cr_assert_null(ampx_backend_op_slot(be, AMPX_OP_ADD), "slot past the table's size was read");
    cr_assert_null(ampx_backend_op_slot(be, AMPX_OP_ADAMW));
    cr_assert(ampx_backend_supports(be, AMPX_OP_GEMM, f32x3, 3));
    cr_assert(!ampx_backend_supports(be, AMPX_OP_ADD, f32x3, 3));
    /* ABI 1.2's profile slots lie past its table: read as NULL (the trace times on the host) */
    cr_assert_null(ampx_backend_iface_of(be)->profile_begin, "slot past the table's size was read");
    cr_assert_null(ampx_backend_iface_of(be)->profile_end);
    /* and so do ABI 1.3's native handles (the all-reduce then takes the host copy) */
    cr_assert_null(ampx_backend_iface_of(be)->buffer_native, "slot past the table's size was read");
    cr_assert_null(ampx_backend_iface_of(be)->stream_native);
    ampx_backend_close(be);
}

/* The kit's shell (ampx/kit/shell.h) from a list of two ops: those two slots and no other,
 * the backend table's fields, an entry that refuses another major, and timed wrappers that
 * record an op while profiling and pass it through otherwise. */
Test(loader, kit_shell_tables_from_a_partial_op_list) {
    void *lib = dlopen(PLUGIN("shell_partial"), RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    ampx_backend_entry_fn entry = (ampx_backend_entry_fn)dlsym(lib, AMPX_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(entry);
    cr_assert_null(dlsym(lib, "part_scale"), "only the entry point is exported");
    cr_assert_null(entry(AMPX_ABI_MAJOR + 1, 0));
    const ampx_backend_iface *t = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    cr_assert_not_null(t);
    cr_assert_eq(t->size, sizeof *t);
    cr_assert_eq(t->abi_major, AMPX_ABI_MAJOR);
    cr_assert_eq(t->abi_minor, AMPX_ABI_MINOR);
    cr_assert_str_eq(t->name, "shell_partial");
    cr_assert(t->probe && t->create && t->destroy && t->device_info && t->supports &&
              t->buffer_alloc && t->buffer_free && t->buffer_write && t->buffer_read &&
              t->buffer_copy && t->buffer_fill && t->synchronize && t->ops);
    cr_assert(t->profile_begin && t->profile_end);
    cr_assert(!t->buffer_native && !t->stream_native);
    cr_assert_eq(t->ops->size, sizeof *t->ops);
#define LISTED_(index, slot, OP, args, n_dtypes, f32)                                              \
    cr_assert_eq(t->ops->slot != NULL,                                                             \
                 AMPX_OP_##OP == AMPX_OP_SCALE || AMPX_OP_##OP == AMPX_OP_ABS_MAX, "slot %s",      \
                 #slot);
    AMPX_OPS(LISTED_)
#undef LISTED_
    ampx_host host = {
        .size = sizeof host, .abi_major = AMPX_ABI_MAJOR, .abi_minor = AMPX_ABI_MINOR};
    ampx_context *ctx = NULL;
    cr_assert_eq(t->create(&host, &ctx), AMPX_OK);
    ampx_scale_args a = {.size = sizeof a};
    uint32_t n_ops    = 99;
    cr_assert_eq(t->ops->scale(ctx, &a), AMPX_OK, "not profiling: the op runs");
    cr_assert_eq(t->ops->scale(ctx, NULL), AMPX_ERR_INVALID, "its status comes back");
    cr_assert_eq(t->profile_begin(ctx, 2), AMPX_OK);
    cr_assert_eq(t->ops->scale(ctx, &a), AMPX_OK);
    cr_assert_eq(t->ops->scale(ctx, NULL), AMPX_ERR_INVALID, "a failed op is not recorded");
    cr_assert_eq(t->ops->abs_max(ctx, &(ampx_abs_max_args){.size = sizeof(ampx_abs_max_args)}),
                 AMPX_OK);
    cr_assert_eq(t->ops->scale(ctx, &a), AMPX_OK, "past the capacity: runs, not recorded");
    cr_assert_eq(t->profile_end(ctx, NULL, 0, &n_ops), AMPX_OK);
    cr_assert_eq(n_ops, 2);
    t->destroy(ctx);
    dlclose(lib);
}

/* The op numbering of ABI 1.4 as the plugins built for it have it, written out once more by
 * hand. AMPX_OPS generates the enum, the slot table and the names from one line per op, so
 * a line renumbered or renamed there still compiles, and breaks every plugin built before
 * (an op's slot would be another op's). Ops are numbered once: this record only grows. */
Test(loader, op_numbers_names_and_slots_are_frozen) {
    static const struct {
        uint32_t op, number, n_dtypes;
        const char *name;
        size_t offset;
    } frozen[] = {
#define FROZEN(OP, n, name, nd) {AMPX_OP_##OP, n, nd, #name, offsetof(ampx_backend_ops, name)}
        FROZEN(GEMM, 0, gemm, 3),
        FROZEN(CAST, 1, cast, 2),
        FROZEN(ADD, 2, add, 3),
        FROZEN(MUL, 3, mul, 3),
        FROZEN(SCALE, 4, scale, 2),
        FROZEN(BIAS_GRAD, 5, bias_grad, 2),
        FROZEN(ACT_FWD, 6, act_fwd, 2),
        FROZEN(ACT_BWD, 7, act_bwd, 3),
        FROZEN(SOFTMAX_FWD, 8, softmax_fwd, 2),
        FROZEN(SOFTMAX_BWD, 9, softmax_bwd, 3),
        FROZEN(SOFTMAX_XENT, 10, softmax_xent, 2),
        FROZEN(LAYERNORM_FWD, 11, layernorm_fwd, 2),
        FROZEN(LAYERNORM_BWD, 12, layernorm_bwd, 3),
        FROZEN(BATCHNORM_FWD, 13, batchnorm_fwd, 2),
        FROZEN(BATCHNORM_BWD, 14, batchnorm_bwd, 3),
        FROZEN(EMBEDDING_FWD, 15, embedding_fwd, 2),
        FROZEN(EMBEDDING_BWD, 16, embedding_bwd, 2),
        FROZEN(REDUCE, 17, reduce, 2),
        FROZEN(SUM_SQUARES, 18, sum_squares, 1),
        FROZEN(UNSCALE_CHECK, 19, unscale_check, 1),
        FROZEN(GRAD_STATS, 20, grad_stats, 1),
        FROZEN(SCALER_UPDATE, 21, scaler_update, 0),
        FROZEN(SGD, 22, sgd, 1),
        FROZEN(ADAMW, 23, adamw, 1),
        FROZEN(DROPOUT, 24, dropout, 2), /* ABI 1.1 */
        FROZEN(PERMUTE, 25, permute, 2),
        FROZEN(AMP_PASS, 26, amp_pass, 1), /* ABI 1.4 */
        FROZEN(ATTN_FWD, 27, attn_fwd, 2), /* ABI 1.5 */
        FROZEN(ATTN_BWD, 28, attn_bwd, 4),
        FROZEN(IM2COL, 29, im2col, 2), /* ABI 1.6 */
        FROZEN(COL2IM, 30, col2im, 2),
        FROZEN(POOL2D_FWD, 31, pool2d_fwd, 2),
        FROZEN(POOL2D_BWD, 32, pool2d_bwd, 2),
        FROZEN(FP8_QUANTIZE, 33, fp8_quantize, 2), /* ABI 1.7 */
        FROZEN(GEMM_FP8, 34, gemm_fp8, 3),
        FROZEN(FP8_SCALE_UPDATE, 35, fp8_scale_update, 0),
        FROZEN(ABS_MAX, 36, abs_max, 1), /* ABI 1.8 */
#undef FROZEN
    };
    size_t n = sizeof frozen / sizeof frozen[0];
    cr_assert_geq(AMPX_OP_COUNT, n, "ops were removed");
    cr_assert_eq(AMPX_OP_COUNT_V1_0, 24);
    cr_assert_eq(AMPX_OP_COUNT_V1_1, 26);
    cr_assert_eq(AMPX_OP_COUNT_V1_4, 27);
    cr_assert_eq(AMPX_OP_COUNT_V1_5, 29);
    cr_assert_eq(AMPX_OP_COUNT_V1_6, 33);
    cr_assert_eq(AMPX_OP_COUNT_V1_7, 36);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(frozen[i].op, frozen[i].number, "%s renumbered", frozen[i].name);
        cr_assert_eq(frozen[i].offset, 8 + frozen[i].number * sizeof(void (*)(void)),
                     "the slot of %s moved", frozen[i].name);
        cr_assert_str_eq(ampx_op_name(frozen[i].number), frozen[i].name);
        cr_assert_eq(ampx_op_n_dtypes(frozen[i].number), frozen[i].n_dtypes, "%s", frozen[i].name);
    }
    cr_assert_eq(offsetof(ampx_backend_ops, gemm), 8, "the table starts with size, reserved");
}

/* A plugin built for ABI 1.3 loads; the 1.4 amp_pass slot past its op table reads as NULL
 * (the wrapper sets it there, so a loader that read beyond the table would see it). */
Test(loader, abi_1_3_plugin_has_no_amp_pass) {
    ampx_backend *be = NULL;
    cr_assert_eq(ampx_backend_open(PLUGIN("minor_1_3"), NULL, 0, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    cr_assert_eq(ampx_backend_iface_of(be)->abi_minor, 3);
    ampx_dtype f32 = AMPX_F32;
    cr_assert_not_null(ampx_backend_op_slot(be, AMPX_OP_UNSCALE_CHECK));
    cr_assert_not_null(ampx_backend_op_slot(be, AMPX_OP_PERMUTE));
    cr_assert_null(ampx_backend_op_slot(be, AMPX_OP_AMP_PASS),
                   "slot past the table's size was read");
    cr_assert(!ampx_backend_supports(be, AMPX_OP_AMP_PASS, &f32, 1));
    cr_assert(ampx_backend_supports(be, AMPX_OP_UNSCALE_CHECK, &f32, 1));
    /* its supports() (the cpu plugin's) claims the 1.5 GEMM epilogue, but the host never asks
     * a plugin of an older minor, so it never gets one */
    ampx_dtype f3[3] = {AMPX_F32, AMPX_F32, AMPX_F32};
    cr_assert_eq(ampx_backend_iface_of(be)->supports(ampx_backend_context(be), AMPX_OP_GEMM, f3, 3,
                                                     AMPX_SHAPE_GEMM_EPILOGUE),
                 1);
    cr_assert(!ampx_backend_gemm_epilogue(be, f3), "a 1.3 plugin was asked for the epilogue");
    ampx_backend_close(be);
    /* the cpu plugin itself speaks 1.4 and has it */
    cr_assert_eq(ampx_backend_open(AMPX_TEST_CPU_PLUGIN, NULL, 0, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    cr_assert_eq(ampx_backend_iface_of(be)->abi_minor, AMPX_ABI_MINOR);
    cr_assert_not_null(ampx_backend_op_slot(be, AMPX_OP_AMP_PASS));
    cr_assert(ampx_backend_supports(be, AMPX_OP_AMP_PASS, &f32, 1));
    cr_assert(ampx_backend_gemm_epilogue(be, f3));
    ampx_backend_close(be);
}

static void count_case(void *user, const ampx_conf_case *c) {
    (void)c;
    ++*(int *)user;
}

Test(loader, ops_failing_mid_run_are_reported_and_buffers_freed) {
    ampx_backend *be = NULL;
    cr_assert_eq(ampx_backend_open(PLUGIN("failing"), NULL, 0, &be, err, sizeof err), AMPX_OK, "%s",
                 err);
    ampx_conf_options opt = {.seed = 1, .op = -1, .quick = 1};
    ampx_conf_summary sum = {0};
    int seen              = 0;
    ampx_conformance_run(be, &opt, count_case, &seen, &sum);
    cr_assert_gt(sum.passed, 0, "the first ops should run and pass");
    cr_assert_gt(sum.failed, 0, "ops failing after the first calls must be reported");
    cr_assert(strstr(ampx_backend_last_error(be), "injected device fault"), "last error: %s",
              ampx_backend_last_error(be));
    ampx_device_info di = {.size = sizeof di};
    ampx_backend_iface_of(be)->device_info(ampx_backend_context(be), &di);
    cr_assert(strstr(di.description, "live_buffers=0 "), "host leaked buffers: %s", di.description);
    ampx_backend_close(be);
}
