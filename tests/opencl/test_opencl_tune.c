/* test_opencl_tune.c — the tiled GEMM's parameters per device (plugins/opencl/gemm_tune.c):
 * a tuning run (tune=yes, with the two-candidate grid tune_grid=tiny so the test stays
 * short) writes gemm-<key>.params into the cache folder, a second process reads it instead of
 * tuning again, and a truncated, corrupt, foreign or out-of-range file is named in one WARN
 * line, never trusted, and replaced by the next tuning run. Where the parameters came from is
 * the "(tuned)", "(file)", "(defaults)" or "(option)" of the device description.
 *
 * Each context is created in a child process (a fork of this one, which never starts OpenCL
 * itself, so no runtime threads are lost to fork): it exits with a code that says where its
 * parameters came from, how many WARN lines named the parameter file, or that create
 * failed and with how many ERROR lines. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ampx/backend.h"
#include "../test_tmp.h"

static char cache_dir[256];
static int n_warn, n_error; /* in the child: WARN lines naming the parameter file, ERRORs */

static void record(void *user, ampx_log_level level, const char *msg) {
    (void)user;
    if (level == AMPX_LOG_WARN && strstr(msg, "gemm parameter file")) n_warn++;
    if (level == AMPX_LOG_ERROR) n_error++;
}

static void setup(void) {
    cr_assert_not_null(test_mkdtemp(cache_dir, sizeof cache_dir, "ampx-ocl-tune"));
}

static void teardown(void) {
    DIR *d = opendir(cache_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[600];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(cache_dir);
}

TestSuite(opencl_tune, .init = setup, .fini = teardown, .timeout = 300);

/* Exit codes: where the parameters came from, + WARN1 per WARN line about the file (at most
 * 2); FAILED + the number of ERROR lines (at most 9) when create failed. */
enum { FROM_TUNED = 1, FROM_FILE, FROM_DEFAULTS, FROM_OPTION, FROM_NONE, WARN1 = 10, FAILED = 50 };

/* When set, a context whose description lacks it counts as FROM_NONE. */
static const char *must_have;

/* In the child: creates a context with the cache option and `extra` (NULL-terminated). */
static int create_here(const char *const *extra) {
    void *lib = dlopen(AMPX_TEST_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return FAILED;
    ampx_backend_entry_fn entry  = (ampx_backend_entry_fn)dlsym(lib, AMPX_BACKEND_ENTRY_SYMBOL);
    const ampx_backend_iface *be = entry ? entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR) : NULL;
    if (!be) return FAILED;
    char cache_opt[300];
    snprintf(cache_opt, sizeof cache_opt, "cache=%s", cache_dir);
    const char *opts[8] = {cache_opt};
    uint32_t n          = 1;
    for (int i = 0; extra && extra[i] && n < 8; i++)
        opts[n++] = extra[i];
    ampx_host h       = {.size      = sizeof h,
                         .abi_major = AMPX_ABI_MAJOR,
                         .abi_minor = AMPX_ABI_MINOR,
                         .log       = record,
                         .options   = opts,
                         .n_options = n};
    ampx_context *ctx = NULL;
    if (be->create(&h, &ctx) != AMPX_OK) return FAILED + (n_error < 9 ? n_error : 9);
    ampx_device_info info = {.size = sizeof info};
    int from              = FAILED;
    if (be->device_info(ctx, &info) == AMPX_OK && !n_error)
        from = strstr(info.description, "(tuned)")      ? FROM_TUNED
               : strstr(info.description, "(file)")     ? FROM_FILE
               : strstr(info.description, "(defaults)") ? FROM_DEFAULTS
               : strstr(info.description, "(option)")   ? FROM_OPTION
                                                        : FROM_NONE;
    if (from != FAILED && must_have && !strstr(info.description, must_have)) from = FROM_NONE;
    be->destroy(ctx);
    return from == FAILED ? from : from + WARN1 * (n_warn < 2 ? n_warn : 2);
}

/* create_here in a child process; its exit code. */
static int create_in_child(const char *const *extra) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(create_here(extra));
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The one gemm-*.params file of the cache folder into path[cap]; 0 when there is exactly one. */
static int params_file(char *path, size_t cap) {
    DIR *d = opendir(cache_dir);
    int n  = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (!strncmp(e->d_name, "gemm-", 5) && l > 7 && !strcmp(e->d_name + l - 7, ".params")) {
            snprintf(path, cap, "%s/%s", cache_dir, e->d_name);
            n++;
        }
    }
    if (d) closedir(d);
    return n == 1 ? 0 : -1;
}

/* Files of the cache folder whose names end in suffix. */
static int count_suffix(const char *suffix) {
    DIR *d = opendir(cache_dir);
    int n  = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), k = strlen(suffix);
        if (l > k && !strcmp(e->d_name + l - k, suffix)) n++;
    }
    if (d) closedir(d);
    return n;
}

static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

static void spit(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    fclose(f);
}

static const char *const tune_tiny[] = {"tune=yes", "tune_grid=tiny", NULL};

Test(opencl_tune, tuning_writes_a_file_that_a_second_process_reuses) {
    char path[600], first[512], again[512];
    cr_expect_eq(create_in_child(NULL), FROM_DEFAULTS, "no file, no tuning: defaults");
    cr_expect_neq(params_file(path, sizeof path), 0, "nothing written without tune=");
    cr_assert_eq(create_in_child(tune_tiny), FROM_TUNED);
    cr_assert_eq(params_file(path, sizeof path), 0, "one gemm-*.params in %s", cache_dir);
    size_t n = slurp(path, first, sizeof first);
    cr_expect(n > 0 && !strncmp(first, "ampx-opencl-gemm-params 2\nkey ", 30), "%s", first);
    cr_expect(strstr(first, "\nparams MWG=") != NULL, "%s", first);
    /* PoCL is a CPU device: the packed kernel's block was tuned too */
    unsigned mr = 0, nr = 0;
    const char *blk = strstr(first, "\nblock MR=");
    cr_expect(blk && sscanf(blk, "\nblock MR=%u NR=%u", &mr, &nr) == 2 && mr > 0 && nr >= 16, "%s",
              first);

    /* a second process with tune=yes reads the file and does not tune again */
    cr_expect_eq(create_in_child(tune_tiny), FROM_FILE);
    cr_expect_eq(create_in_child(NULL), FROM_FILE, "the file is used without tune= too");
    slurp(path, again, sizeof again);
    cr_expect_str_eq(again, first, "the file is left as it was");
    /* tune=force searches again whatever the file says, and stores no more programs: the
     * candidates are not kept on CPU devices (each binary costs PoCL its code once more) and
     * are the same programs on others */
    int bins                  = count_suffix(".bin");
    const char *const force[] = {"tune=force", "tune_grid=tiny", NULL};
    cr_expect_eq(create_in_child(force), FROM_TUNED);
    cr_expect_eq(count_suffix(".bin"), bins, "a second tuning run stored candidates");
}

/* Writes text over the tuned file (tuning first if there is none); a context then must fall back to
 * defaults with one WARN naming the file, and a tuning run must replace it with a file that loads
 * again. */
static void rejected_then_rebuilt(const char *what, const char *text, size_t n) {
    char path[600], now[512];
    int from = create_in_child(tune_tiny); /* tuned now, or the file of the last round */
    cr_assert(from == FROM_TUNED || from == FROM_FILE, "%s: %d", what, from);
    cr_assert_eq(params_file(path, sizeof path), 0);
    spit(path, text, n);

    cr_expect_eq(create_in_child(NULL), FROM_DEFAULTS + WARN1,
                 "%s: not trusted (defaults), one WARN naming the file, no ERROR", what);
    cr_expect_eq(create_in_child(tune_tiny), FROM_TUNED + WARN1, "%s: named again, rebuilt", what);
    slurp(path, now, sizeof now);
    cr_expect(!strncmp(now, "ampx-opencl-gemm-params 2\n", 26), "%s: %s", what, now);
    cr_expect_eq(create_in_child(NULL), FROM_FILE, "%s: the new file loads", what);
}

Test(opencl_tune, truncated_file_is_rejected_and_rebuilt) {
    char path[600], text[512];
    cr_assert_eq(create_in_child(tune_tiny), FROM_TUNED);
    cr_assert_eq(params_file(path, sizeof path), 0);
    size_t n = slurp(path, text, sizeof text);
    cr_assert_gt(n, 40);
    rejected_then_rebuilt("truncated", text, n - 9); /* cuts into the params or gflops line */
    rejected_then_rebuilt("empty", "", 0);
}

/* The tuned file's text with its line starting `start` replaced by `line` (a whole line with
 * its newline, or nothing), then rejected_then_rebuilt. */
static void with_line(const char *what, const char *start, const char *line) {
    char path[600], text[512], out[600];
    int from = create_in_child(tune_tiny);
    cr_assert(from == FROM_TUNED || from == FROM_FILE, "%s: %d", what, from);
    cr_assert_eq(params_file(path, sizeof path), 0);
    slurp(path, text, sizeof text);
    char *p = strstr(text, start), *end = p ? strchr(p + 1, '\n') : NULL;
    cr_assert(p && end, "%s", text);
    int n = snprintf(out, sizeof out, "%.*s%s%s", (int)(p + 1 - text), text, line, end + 1);
    rejected_then_rebuilt(what, out, (size_t)n);
}

static void with_params(const char *what, const char *params) {
    char line[160];
    snprintf(line, sizeof line, "%s\n", params);
    with_line(what, "\nparams ", line);
}

static void with_block(const char *what, const char *block) {
    with_line(what, "\nblock ", block);
}

Test(opencl_tune, file_block_is_used_unless_the_option_names_one) {
    char path[600], text[512], out[600];
    int from = create_in_child(tune_tiny);
    cr_assert(from == FROM_TUNED || from == FROM_FILE, "%d", from);
    cr_assert_eq(params_file(path, sizeof path), 0);
    slurp(path, text, sizeof text);
    char *p = strstr(text, "\nblock "), *end = p ? strchr(p + 1, '\n') : NULL;
    cr_assert(p && end, "%s", text);
    int n = snprintf(out, sizeof out, "%.*sblock MR=4 NR=64%s", (int)(p + 1 - text), text, end);
    spit(path, out, (size_t)n);
    must_have = "packed 4x64";
    cr_expect_eq(create_in_child(NULL), FROM_FILE, "the file's block");
    const char *const opt[] = {"gemm_block=6x16", NULL};
    must_have               = "packed 6x16";
    cr_expect_eq(create_in_child(opt), FROM_FILE, "the option's block over the file's");
    const char *const tiles[] = {"gemm_params=32,32,8,4,4,2", NULL};
    must_have                 = "packed 4x64";
    cr_expect_eq(create_in_child(tiles), FROM_OPTION, "gemm_params= keeps the file's block");
    must_have = NULL;
    /* a tuning run with the block given tunes the tiles and keeps the file's block */
    const char *const force[] = {"tune=force", "tune_grid=tiny", "gemm_block=6x16", NULL};
    cr_expect_eq(create_in_child(force), FROM_TUNED);
    slurp(path, text, sizeof text);
    cr_expect(strstr(text, "\nblock MR=4 NR=64\n") != NULL, "%s", text);
}

Test(opencl_tune, block_not_tuned_where_the_packed_kernel_would_not_run) {
    /* panels capped at 1 byte: every GEMM takes the tiled kernel, so timing blocks would time
     * it; the file gets no block */
    char path[600], text[512];
    setenv("AMPX_OPENCL_PACK_CAP", "1", 1);
    const char *const force[] = {"tune=force", "tune_grid=tiny", NULL};
    int from                  = create_in_child(force);
    unsetenv("AMPX_OPENCL_PACK_CAP");
    cr_assert_eq(from, FROM_TUNED);
    cr_assert_eq(params_file(path, sizeof path), 0);
    slurp(path, text, sizeof text);
    cr_expect(strstr(text, "\nblock MR=0 NR=0\n") != NULL, "%s", text);
}

Test(opencl_tune, corrupt_and_out_of_range_files_are_rejected) {
    rejected_then_rebuilt("garbage",
                          "\x7f"
                          "ELF\x01\x02 not parameters at all\n",
                          30);
    with_params("a zero", "params MWG=0 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4");
    with_params("huge tile", "params MWG=999999 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4");
    with_params("odd vector", "params MWG=64 NWG=63 KWG=16 MDIMC=16 NDIMC=16 VWN=3");
    with_params("not divisible", "params MWG=60 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4");
    with_params("too many registers", "params MWG=256 NWG=256 KWG=8 MDIMC=1 NDIMC=1 VWN=16");
    with_params("negative", "params MWG=-64 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4");
    with_params("fields swapped", "params NWG=64 MWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4");
    with_block("no block", "");
    with_block("odd block", "block MR=6 NR=20\n");
    with_block("too many accumulators", "block MR=16 NR=64\n");
    with_block("half a block", "block MR=0 NR=32\n");
}

Test(opencl_tune, file_of_another_key_is_rejected) {
    char path[600], text[512];
    cr_assert_eq(create_in_child(tune_tiny), FROM_TUNED);
    cr_assert_eq(params_file(path, sizeof path), 0);
    size_t n = slurp(path, text, sizeof text);
    char *k  = strstr(text, "key ");
    cr_assert_not_null(k);
    k[4] = k[4] == '0' ? '1' : '0'; /* another device, driver or kernel source */
    rejected_then_rebuilt("foreign key", text, n);
}

Test(opencl_tune, bad_gemm_params_option_is_one_clear_error) {
    const char *const bad[][2] = {{"gemm_params=64,64", NULL},
                                  {"gemm_params=64,64,16,16,16,3", NULL}};
    for (int i = 0; i < 2; i++)
        cr_expect_eq(create_in_child(bad[i]), FAILED + 1, "%s: one ERROR line", bad[i][0]);
    const char *const good[] = {"gemm_params=32,32,8,4,4,2", NULL};
    cr_expect_eq(create_in_child(good), FROM_OPTION);
}
