/* ampx.c — the `ampx` command: the only part of ampx that talks to the user.
 *
 *   ampx backends [--json]
 *   ampx conformance --backend B [--backend-opt k=v]... [--op NAME] [--quick] [--seed S] [--json]
 *
 * Exit status: 0 on success, 1 when the work failed (a plugin did not load, a conformance
 * case failed, a file was refused, a run diverged or applied no step, output could not be
 * written), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ampx/ampx.h"
#include "cli.h"

#define MAX_PLUGINS 64

static const char *prog = "ampx";

static void usage_main(FILE *f) {
    fprintf(f, "usage: ampx <command> [options]\n"
               "\n"
               "commands:\n"
               "  backends      list backend plugins, their devices and op x dtype support\n"
               "  conformance   check a backend's ops against the double-precision reference\n"
               "  train         train a JSON model with mixed precision and loss scaling\n"
               "  eval          held-out accuracy of a checkpoint\n"
               "  policy        print every tensor's resolved dtype and every cast\n"
               "  generate      sample text from a trained token model\n"
               "  export        a checkpoint's weights as a plain safetensors file\n"
               "  predict       a trained model's classes and probabilities for CSV rows\n"
               "  diff          two backends on the same training step, op by op\n"
               "  tokenize      learn a byte-level BPE; text to token files and back\n"
               "  bench         time GEMM (GFLOP/s) or a memory-bound op (GB/s) on a backend\n"
               "  trace-summary time per op, dtype and phase of a trace from train --trace\n"
               "  plot          draw a run's metrics (loss, scale, lr, grad norm) to PNG/SVG/PDF\n"
               "\n"
               "options:\n"
               "  -h, --help     show this help (also: ampx <command> --help)\n"
               "  -V, --version  print the version and the plugin ABI version\n"
               "\n"
               "exit status:\n"
               "  0  success\n"
               "  1  the work failed: a file was refused, a plugin failed, a conformance case\n"
               "     failed, a run diverged or applied no step, output could not be written\n"
               "  2  usage: an unknown command or option, a bad option value, a malformed\n"
               "     AMPX_* number in the environment, closed stdout\n"
               "  70 a backend plugin called exit() inside a call (the line before names it)\n"
               "\n"
               "'ampx help COMMAND' (or 'ampx COMMAND --help') shows a command's options.\n"
               "\n"
               "A backend is a name (cpu, opencl, cuda: libampx-NAME.so on $AMPX_PLUGIN_PATH or\n"
               "beside ampx) or a path to a plugin (./libvendor.so). Backend options come from\n"
               "--backend-opt key=value and from $AMPX_BACKEND_OPTS (comma-separated; a piece\n"
               "without = continues the value before it). A plugin's create() must return\n"
               "within $AMPX_CREATE_TIMEOUT_S seconds (120; 0: no limit).\n");
}

/* Prints the JSON document to stdout and frees it. */
static void print_json(cJSON *doc) {
    char *s = cJSON_Print(doc);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    cJSON_Delete(doc);
}

// ---------------------------------------------------------------------------------------
// Support matrix: for each op, whether its float operands all in f32, all in bf16 or all
// in f16 are supported, and how many of the op's dtype combinations. An operand is one of
// the float dtypes, except the fp8 positions of the ABI 1.7 ops, which take e4m3 or e5m2
// as their headings say (FP8_QUANTIZE: exactly one of src and dst fp8; GEMM_FP8: A and B).

static const ampx_dtype float_dtypes[3] = {AMPX_F32, AMPX_BF16, AMPX_F16};
static const ampx_dtype any_dtypes[5]   = {AMPX_F32, AMPX_BF16, AMPX_F16, AMPX_E4M3, AMPX_E5M2};

typedef struct op_support {
    int uniform[3]; /* f32, bf16, f16: every float operand in it (fp8 ones e4m3 or e5m2) */
    uint32_t combos_ok, combos_total;
} op_support;

/* Whether dt is one of the op's combinations: the float dtypes in every position (as the
 * table always counted them), fp8 ones where an fp8 op's heading puts them. */
static int combo_of_op(uint32_t op, const ampx_dtype *dt, uint32_t n) {
    uint32_t n8 = 0;
    for (uint32_t i = 0; i < n; i++)
        n8 += (uint32_t)ampx_dtype_is_fp8(dt[i]);
    if (op == AMPX_OP_FP8_QUANTIZE) return n8 == 1;
    if (op == AMPX_OP_GEMM_FP8)
        return n8 == 2 && ampx_dtype_is_fp8(dt[0]) && ampx_dtype_is_fp8(dt[1]);
    return n8 == 0;
}

static void support_of(const ampx_backend *be, uint32_t op, op_support *s) {
    uint32_t n = ampx_op_n_dtypes(op), all = 1;
    ampx_dtype dt[4];
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < n; i++)
        all *= 5;
    for (uint32_t c = 0; c < all; c++) {
        uint32_t r = c;
        for (uint32_t i = 0; i < n; i++, r /= 5)
            dt[i] = any_dtypes[r % 5];
        if (!combo_of_op(op, dt, n)) continue;
        s->combos_total++;
        if (!ampx_backend_supports(be, op, dt, n)) continue;
        s->combos_ok++;
        for (int d = 0; d < 3; d++) { /* a column: every float operand in its dtype */
            int uniform = 1;
            for (uint32_t i = 0; i < n; i++)
                uniform &= ampx_dtype_is_fp8(dt[i]) || dt[i] == float_dtypes[d];
            s->uniform[d] |= uniform;
        }
    }
}

// ---------------------------------------------------------------------------------------
// ampx backends

/* One plugin's entry of ampx backends --json: be is NULL when it did not open. */
static cJSON *plugin_json(const ampx_plugin_info *p, ampx_backend *be, const ampx_device_info *info,
                          const char *reason) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON_AddStringToObject(o, "path", p->path);
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
    cJSON_AddStringToObject(o, "abi", p->loadable ? abi : "");
    cJSON_AddBoolToObject(o, "loadable", p->loadable);
    cJSON_AddBoolToObject(o, "available", be != NULL);
    if (!be) {
        cJSON_AddStringToObject(o, "reason", reason);
        return o;
    }
    cJSON *d = cJSON_AddObjectToObject(o, "device");
    cJSON_AddStringToObject(d, "name", info->name);
    cJSON_AddStringToObject(d, "description", info->description);
    cJSON_AddNumberToObject(d, "memory_bytes", (double)info->memory_bytes);
    cJSON_AddNumberToObject(d, "threads", info->n_threads);
    cJSON *ops = cJSON_AddObjectToObject(o, "ops");
    for (uint32_t op = 0; op < AMPX_OP_COUNT; op++) {
        op_support s;
        support_of(be, op, &s);
        cJSON *e = cJSON_AddObjectToObject(ops, ampx_op_name(op));
        for (int k = 0; k < 3; k++)
            cJSON_AddBoolToObject(e, ampx_dtype_name(float_dtypes[k]), s.uniform[k]);
        cJSON_AddNumberToObject(e, "combos_supported", s.combos_ok);
        cJSON_AddNumberToObject(e, "combos_total", s.combos_total);
    }
    return o;
}

/* One plugin's lines of ampx backends: be is NULL when it did not open. */
static void plugin_print(const ampx_plugin_info *p, ampx_backend *be, const ampx_device_info *info,
                         const char *state, const char *reason) {
    printf("\n%-8s %s\n", p->name, p->path);
    if (p->loadable)
        printf("  ABI %u.%u, %s", p->abi_major, p->abi_minor, state);
    else
        printf("  %s", state);
    if (!be) {
        printf(": %s\n", reason);
        return;
    }
    putchar('\n');
    printf("  device: %s\n", info->name);
    if (info->description[0]) printf("  %s\n", info->description);
    if (info->memory_bytes) printf("  memory: %.1f GiB\n", (double)info->memory_bytes / (1u << 30));
    printf("  %-14s %-4s %-4s %-4s %s\n", "op", "f32", "bf16", "f16",
           "dtype combinations (columns: every float operand in that dtype)");
    for (uint32_t op = 0; op < AMPX_OP_COUNT; op++) {
        op_support s;
        support_of(be, op, &s);
        if (ampx_op_n_dtypes(op) == 0) /* e.g. scaler_update: no tensor dtypes */
            printf("  %-14s %-14s %u/%u\n", ampx_op_name(op), "(no dtypes)", s.combos_ok,
                   s.combos_total);
        else
            printf("  %-14s %-4s %-4s %-4s %u/%u\n", ampx_op_name(op), s.uniform[0] ? "yes" : "-",
                   s.uniform[1] ? "yes" : "-", s.uniform[2] ? "yes" : "-", s.combos_ok,
                   s.combos_total);
    }
}

/* One plugin's entry, as a child process writes it: opened (create()), described, closed. */
typedef struct entry_job {
    const ampx_plugin_info *p;
    int json;
} entry_job;

static void entry_in_child(void *arg) {
    const entry_job *j    = arg;
    ampx_backend *be      = NULL;
    char err[1024]        = "";
    ampx_device_info info = {.size = sizeof info};
    if (j->p->available && ampx_backend_open(j->p->path, NULL, 0, &be, err, sizeof err) == AMPX_OK)
        ampx_backend_device_info(be, &info);
    const char *state  = !j->p->loadable         ? "not loadable"
                         : j->p->available && be ? "available"
                                                 : "unavailable";
    const char *reason = j->p->reason[0] ? j->p->reason : err;
    if (j->json) {
        cJSON *o = plugin_json(j->p, be, &info, reason);
        char *t  = cJSON_PrintUnformatted(o);
        if (t) fputs(t, stdout);
        free(t);
        cJSON_Delete(o);
    } else {
        plugin_print(j->p, be, &info, state, reason);
    }
    ampx_backend_close(be);
}

/* Why a child's entry came to nothing: the host's line naming the plugin call it died in
 * (the last stderr line starting "ampx: "; a sanitizer's report may follow it), else its
 * last line, else how it ended. */
static void entry_failure(const ampx_plugin_info *p, const cli_child *r, int timeout_s, char *why,
                          size_t cap) {
    char ours[600] = "", last[600] = "";
    for (const char *line = r->err, *next; line && *line; line = next) {
        next  = strchr(line, '\n');
        int n = next ? (int)(next - line) : (int)strlen(line);
        if (next) next++;
        if (n == 0) continue;
        if (!strncmp(line, "ampx: ", 6)) snprintf(ours, sizeof ours, "%.*s", n - 6, line + 6);
        snprintf(last, sizeof last, "%.*s", n, line);
    }
    if (ours[0]) snprintf(last, sizeof last, "%s", ours);
    if (r->timed_out)
        snprintf(why, cap,
                 "%s: opening and describing did not finish within %d s (AMPX_PROBE_TIMEOUT_S)",
                 p->path, timeout_s);
    else if (last[0])
        snprintf(why, cap, "%s", last);
    else if (r->status != -1 && WIFSIGNALED(r->status))
        snprintf(why, cap, "%s: crashed while opening or describing (signal %d, %s)", p->path,
                 WTERMSIG(r->status), strsignal(WTERMSIG(r->status)));
    else
        snprintf(why, cap, "%s: exited while opening or describing (status %d)", p->path,
                 WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
}

/* One plugin's entry: made in a child process with a deadline, so a plugin whose create(),
 * device_info or supports crashes, aborts, exits or hangs is listed as failing, with the
 * reason, and the others are still listed. */
static void backend_entry(const ampx_plugin_info *p, int json, cJSON *arr) {
    const char *env = getenv("AMPX_PROBE_TIMEOUT_S");
    int timeout_s   = env && atoi(env) > 0 ? atoi(env) : 10;
    entry_job job   = {p, json};
    cli_child r;
    if (cli_run_child(entry_in_child, &job, timeout_s, &r) != 0) {
        r.status = -1; /* no child (fork or pipe failed): listed as failing, with why */
        r.err    = strdup("ampx: cannot start a process to open the plugin in");
    }
    int ok   = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && r.out;
    cJSON *o = ok && json ? cJSON_Parse(r.out) : NULL;
    if (ok && !json) fwrite(r.out, 1, r.n_out, stdout);
    if (o) cJSON_AddItemToArray(arr, o);
    if (!ok || (json && !o)) {
        char why[1200];
        entry_failure(p, &r, timeout_s, why, sizeof why);
        ampx_device_info info = {.size = sizeof info};
        ampx_plugin_info q    = *p;
        q.available           = 0;
        if (json)
            cJSON_AddItemToArray(arr, plugin_json(&q, NULL, &info, why));
        else
            plugin_print(&q, NULL, &info, "failing", why);
    }
    cli_child_free(&r);
}

typedef struct backends_opts {
    int json, options;
} backends_opts;

static const cli_opt backends_table[] = {
    CLI_OPT_FLAG("json", 'j', offsetof(backends_opts, json), 0),
    CLI_OPT_FLAG("options", 'O', offsetof(backends_opts, options), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

static int cmd_backends(int argc, char **argv) {
    backends_opts o   = {0};
    cli_parser parser = {"jh", backends_table, 0, NULL};
    int rc            = cli_parse_opts(&parser, argc, argv, &o);
    if (rc == CLI_HELP_ASKED) {
        printf("usage: ampx backends [--json | --options]\n\nLists every libampx-*.so found on "
               "the search path with its ABI version,\navailability (and why not), device, and "
               "op x dtype support.\n--options lists every performance switch (GEMM path, ISA "
               "cap, fusions, the AMP pass)\nwith its default.\n");
        return 0;
    }
    if (rc) return EXIT_USAGE;
    int json = o.json;
    if (o.options && optind == argc) return cli_print_options();
    if (optind < argc) {
        fprintf(stderr, "%s backends: unexpected argument '%s'\n", prog, argv[optind]);
        return EXIT_USAGE;
    }

    static ampx_plugin_info plugins[MAX_PLUGINS];
    size_t n = ampx_plugin_list(plugins, MAX_PLUGINS);
    if (n > MAX_PLUGINS) n = MAX_PLUGINS;
    char search[4096];
    ampx_plugin_search_path(search, sizeof search);

    cJSON *doc = json ? cJSON_CreateObject() : NULL, *arr = NULL;
    if (json) {
        cJSON_AddStringToObject(doc, "search_path", search);
        arr = cJSON_AddArrayToObject(doc, "backends");
    } else {
        printf("search path: %s\n", search[0] ? search : "(none)");
        if (n == 0) printf("no backends found\n");
    }
    for (size_t i = 0; i < n; i++)
        backend_entry(&plugins[i], json, arr);
    if (json) print_json(doc);
    return 0;
}

// ---------------------------------------------------------------------------------------
// ampx conformance

/* Results aggregated per (op, dtypes): the per-op table. */
typedef struct conf_row {
    uint32_t op;
    ampx_dtype dtypes[4];
    uint32_t n_dtypes;
    uint32_t passed, failed, unsupported;
    double worst; /* max err/tol over the cases */
    int refused;  /* dtypes the ABI forbids: the case checks that they are refused */
} conf_row;

typedef struct conf_state {
    conf_row *rows;
    size_t n_rows, cap_rows;
    cJSON *cases; /* --json: every case */
    int all;      /* --all: every row, unsupported and refused ones too */
} conf_state;

static void dtypes_str(const ampx_dtype *dt, uint32_t n, char *buf, size_t cap) {
    buf[0] = '\0';
    if (n == 0) snprintf(buf, cap, "-");
    for (uint32_t i = 0; i < n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i ? "," : "", ampx_dtype_name(dt[i]));
    }
}

static void on_case(void *user, const ampx_conf_case *c) {
    conf_state *s = user;
    conf_row *row = NULL;
    int refused   = strncmp(c->shape, "invalid dtypes", 14) == 0;
    for (size_t i = 0; i < s->n_rows; i++) {
        conf_row *r = &s->rows[i];
        if (r->op == c->op && r->n_dtypes == c->n_dtypes && r->refused == refused &&
            memcmp(r->dtypes, c->dtypes, sizeof(ampx_dtype) * c->n_dtypes) == 0)
            row = r;
    }
    if (!row) {
        if (s->n_rows == s->cap_rows) {
            size_t cap  = s->cap_rows ? 2 * s->cap_rows : 64;
            conf_row *r = realloc(s->rows, cap * sizeof *r);
            if (!r) return;
            s->rows     = r;
            s->cap_rows = cap;
        }
        row = &s->rows[s->n_rows++];
        memset(row, 0, sizeof *row);
        row->op       = c->op;
        row->n_dtypes = c->n_dtypes;
        row->refused  = refused;
        memcpy(row->dtypes, c->dtypes, sizeof(ampx_dtype) * c->n_dtypes);
    }
    char dts[64];
    dtypes_str(c->dtypes, c->n_dtypes, dts, sizeof dts);
    if (c->verdict == AMPX_CONF_PASS)
        row->passed++;
    else if (c->verdict == AMPX_CONF_FAIL)
        row->failed++;
    else
        row->unsupported++;
    if (c->verdict != AMPX_CONF_UNSUPPORTED && c->tol > 0 && c->err / c->tol > row->worst)
        row->worst = c->err / c->tol;
    if (c->verdict == AMPX_CONF_FAIL && !s->cases) {
        fprintf(stderr, "FAIL %s [%s] case %d: %s\n  %s\n", ampx_op_name(c->op), dts, c->index,
                c->shape, c->message);
        if (!c->measure[0])
            fprintf(stderr, "  (no error measured: the case failed before comparing values)\n");
        else if (!strcmp(c->measure, "exact"))
            fprintf(stderr, "  exact comparison: off by %.3g, any difference fails\n", c->err);
        else
            fprintf(stderr, "  %s error %.3g against tolerance %.3g (%.3g times it)\n", c->measure,
                    c->err, c->tol, c->tol > 0 ? c->err / c->tol : 0.0);
    }
    if (s->cases) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", ampx_op_name(c->op));
        cJSON_AddStringToObject(o, "dtypes", dts);
        cJSON_AddStringToObject(o, "shape", c->shape);
        cJSON_AddStringToObject(o, "verdict",
                                c->verdict == AMPX_CONF_PASS   ? "pass"
                                : c->verdict == AMPX_CONF_FAIL ? "fail"
                                                               : "unsupported");
        cJSON_AddNumberToObject(o, "case", c->index);
        cJSON_AddNumberToObject(o, "err", c->err);
        cJSON_AddNumberToObject(o, "tol", c->tol);
        if (c->measure[0]) cJSON_AddStringToObject(o, "measure", c->measure);
        if (c->message[0]) cJSON_AddStringToObject(o, "message", c->message);
        cJSON_AddItemToArray(s->cases, o);
    }
}

typedef struct conf_opts {
    const char *backend;
    cli_backend_opts bopts;
    int64_t seed;
    int32_t op; /* -1: every op */
    int quick, json, all;
} conf_opts;

static int opt_op(void *opts, int argc, char **argv, const char *v) {
    conf_opts *o = opts;
    uint32_t op;
    if (ampx_op_parse(v, &op) != 0) {
        fprintf(stderr, "%s conformance: --op '%s': unknown op (see ampx backends)\n", prog, v);
        return -1;
    }
    o->op = (int32_t)op;
    return 0;
}

#define CONF(field) offsetof(conf_opts, field)
static const cli_opt conf_table[] = {
    CLI_OPT_STRING("backend", 'b', CONF(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'o', CONF(bopts)),
    CLI_OPT_CALL("op", 'p', opt_op, 0),
    CLI_OPT_FLAG("quick", 'q', CONF(quick), 0),
    CLI_OPT_INT("seed", 's', CONF(seed), 0, INT64_MAX, 0),
    CLI_OPT_FLAG("json", 'j', CONF(json), 0),
    CLI_OPT_FLAG("all", 'a', CONF(all), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

static void conf_usage(void) {
    printf("usage: ampx conformance --backend B [--backend-opt k=v]... [--op NAME]\n"
           "                        [--quick] [--seed S] [--all] [--json]\n\n"
           "Runs every (op, dtype combination) the backend supports against the\n"
           "double-precision reference on random data with awkward shapes, poisoned\n"
           "outputs and guard regions. Prints a table of the supported combinations\n"
           "and a count of the unsupported ones (--all: every row, the probes that\n"
           "check unsupported and forbidden dtypes are refused too), or JSON with every\n"
           "case. A failing case prints its index, the element, the value and the\n"
           "expected one, and its error against the tolerance.\n\n"
           "Exits 0 when every case of every supported combination passed, at least one\n"
           "op ran, and (without --op) the backend supports the minimum set: the ops\n"
           "models/mlp.json needs, in f32. See docs/CONFORMANCE.md.\n");
}

/* What a conformance run found, for the report. */
typedef struct conf_result {
    ampx_backend *be;
    const ampx_conf_options *opt;
    const conf_state *st;
    const ampx_conf_summary *sum;
    ampx_status rs;
    int rc;
    ampx_device_info info;
} conf_result;

static void conf_print_json(cJSON *doc, const conf_result *r) {
    const ampx_conf_summary *sum = r->sum;
    cJSON_AddStringToObject(doc, "backend", ampx_backend_iface_of(r->be)->name);
    cJSON_AddStringToObject(doc, "path", ampx_backend_path(r->be));
    cJSON_AddStringToObject(doc, "device", r->info.name);
    cJSON *s = cJSON_AddObjectToObject(doc, "summary");
    cJSON_AddNumberToObject(s, "passed", sum->passed);
    cJSON_AddNumberToObject(s, "failed", sum->failed);
    cJSON_AddNumberToObject(s, "unsupported", sum->unsupported);
    cJSON_AddNumberToObject(s, "ops_run", sum->ops_run);
    cJSON_AddNumberToObject(s, "ops_passing", sum->ops_passing);
    if (r->opt->op < 0) cJSON_AddStringToObject(s, "minimum_set_missing", sum->missing);
    if (r->rs != AMPX_OK) cJSON_AddStringToObject(s, "error", ampx_backend_last_error(r->be));
    cJSON_AddBoolToObject(doc, "ok", r->rc == 0);
    print_json(doc);
}

/* The table's rows of one op; counts its unsupported combinations in *unsup. */
static void conf_print_op(const conf_state *st, uint32_t op, uint32_t *unsup) {
    for (size_t i = 0; i < st->n_rows; i++) {
        const conf_row *r = &st->rows[i];
        if (r->op != op) continue;
        int unsupported = !r->refused && r->passed + r->failed == 0;
        if (unsupported) (*unsup)++;
        if (!st->all && (unsupported || (r->refused && !r->failed))) continue;
        char dts[64];
        dtypes_str(r->dtypes, r->n_dtypes, dts, sizeof dts);
        if (r->refused) /* the case passes when the backend refuses these dtypes */
            strncat(dts, " refused", sizeof dts - strlen(dts) - 1);
        if (unsupported)
            printf("%-14s %-22s %6s %6s %9s  unsupported\n", ampx_op_name(op), dts, "-", "-", "-");
        else
            printf("%-14s %-22s %6u %6u %9.3f%s\n", ampx_op_name(op), dts, r->passed, r->failed,
                   r->worst, r->failed ? "  FAIL" : "");
    }
}

static void conf_print_table(const conf_result *r) {
    const ampx_conf_summary *sum = r->sum;
    int all_ops                  = r->opt->op < 0;
    printf("backend %s (%s) on %s\n", ampx_backend_iface_of(r->be)->name, ampx_backend_path(r->be),
           r->info.name);
    printf("%-14s %-22s %6s %6s %9s\n", "op", "dtypes", "pass", "fail", "worst/tol");
    /* unsupported combinations (and, without --all, the refused-dtypes probes) are
     * counted per op instead of listed */
    uint32_t unsup_rows[AMPX_OP_COUNT] = {0}, n_unsup = 0, unsup_ops = 0;
    for (uint32_t op = 0; op < AMPX_OP_COUNT; op++) {
        conf_print_op(r->st, op, &unsup_rows[op]);
        n_unsup += unsup_rows[op];
        unsup_ops += unsup_rows[op] > 0;
    }
    if (n_unsup > 0) {
        printf("unsupported: %u dtype combinations of %u ops (", n_unsup, unsup_ops);
        for (uint32_t op = 0, k = 0; op < AMPX_OP_COUNT; op++)
            if (unsup_rows[op])
                printf("%s%s %u", k++ ? ", " : "", ampx_op_name(op), unsup_rows[op]);
        printf(")%s\n", r->st->all ? "" : "; --all lists them");
    }
    if (r->rs != AMPX_OK)
        printf("conformance stopped: %s: %s\n", ampx_status_name(r->rs),
               ampx_backend_last_error(r->be));
    if (all_ops && sum->required_missing)
        printf("minimum set not supported: %s (in f32; a backend needs them to train "
               "models/mlp.json and to pass, docs/CONFORMANCE.md)\n",
               sum->missing);
    if (sum->ops_run == 0)
        printf("no op ran: the backend supports none of %s\n",
               all_ops ? "the ops" : "this op's dtype combinations");
    printf("%u passed, %u failed, %u unsupported; %u ops run, %u passing: %s\n", sum->passed,
           sum->failed, sum->unsupported, sum->ops_run, sum->ops_passing,
           r->rc == 0 ? "PASS" : "FAIL");
}

static int cmd_conformance(int argc, char **argv) {
    conf_opts o  = {.op = -1};
    cli_parser p = {"b:o:p:qs:jah", conf_table, 0, NULL};
    int rc       = cli_parse_opts(&p, argc, argv, &o);
    if (rc == CLI_HELP_ASKED) {
        conf_usage();
        return 0;
    }
    if (rc) return EXIT_USAGE;
    if (optind < argc) {
        fprintf(stderr, "%s conformance: unexpected argument '%s'\n", prog, argv[optind]);
        return EXIT_USAGE;
    }
    if (!o.backend || !*o.backend) {
        fprintf(stderr, "%s conformance: --backend is required (e.g. --backend cpu)\n", prog);
        return EXIT_USAGE;
    }

    char err[2048];
    ampx_backend *be = NULL;
    if (ampx_backend_open(o.backend, o.bopts.v, o.bopts.n, &be, err, sizeof err) != AMPX_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        if (o.json) { /* the caller reads stdout: say it there too */
            cJSON *doc = cJSON_CreateObject();
            cJSON_AddBoolToObject(doc, "ok", 0);
            cJSON_AddStringToObject(doc, "error", err);
            print_json(doc);
        }
        return 1;
    }
    ampx_conf_options opt = {.seed = (uint64_t)o.seed, .op = o.op, .quick = o.quick};
    conf_state st         = {.all = o.all};
    ampx_conf_summary sum = {0};
    cJSON *doc            = NULL;
    if (o.json) {
        doc      = cJSON_CreateObject();
        st.cases = cJSON_AddArrayToObject(doc, "cases");
    }
    conf_result r = {
        .be = be, .opt = &opt, .st = &st, .sum = &sum, .info = {.size = sizeof r.info}};
    r.rs = ampx_conformance_run(be, &opt, on_case, &st, &sum);
    r.rc = ampx_conformance_passed(r.rs, &sum, opt.op < 0) ? 0 : 1;
    if (ampx_backend_device_info(be, &r.info) != AMPX_OK) r.info.name[0] = '\0';
    if (o.json)
        conf_print_json(doc, &r);
    else
        conf_print_table(&r);
    free(st.rows);
    ampx_backend_close(be);
    return r.rc;
}

// ---------------------------------------------------------------------------------------

/* Files opened later must never land on fds 0-2 (a closed stdout would send progress lines
 * into the metrics file): a closed stdin or stderr is taken by /dev/null; a closed stdout is
 * refused, since the results would be lost. 0, or the exit status. */
static int check_std_fds(void) {
    int closed[3];
    for (int fd = 0; fd < 3; fd++)
        closed[fd] = fcntl(fd, F_GETFD) < 0 && errno == EBADF;
    for (int fd = 0; fd < 3; fd++)
        if (closed[fd] && open("/dev/null", fd ? O_WRONLY : O_RDONLY) != fd) return 1;
    if (closed[1]) {
        fprintf(stderr, "%s: standard output is closed (redirect it to /dev/null to discard it)\n",
                prog);
        return EXIT_USAGE;
    }
    return 0;
}

/* The exit status says whether the output got out: stdout is flushed and closed, and a write
 * error (a full disk, /dev/full, a closed pipe) makes the exit status 1. */
static int finish(int rc) {
    int bad = ferror(stdout);
    int err = bad ? EIO : 0;
    if (fflush(stdout) != 0) bad = 1, err = errno;
    if (fclose(stdout) != 0 && !bad) bad = 1, err = errno;
    if (bad) {
        fprintf(stderr, "%s: write error on standard output: %s\n", prog, strerror(err));
        if (rc == 0) rc = 1;
    }
    if ((fflush(stderr) != 0 || ferror(stderr)) && rc == 0) rc = 1;
    return rc;
}

static int run_command(int argc, char **argv);

int main(int argc, char **argv) {
    int rc = check_std_fds();
    if (rc) return rc;
    return finish(run_command(argc, argv));
}

static int run_command(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || (!strcmp(cmd, "help") && argc == 2)) {
        usage_main(stdout);
        return 0;
    }
    if (!strcmp(cmd, "help")) { /* ampx help COMMAND: that command's --help */
        if (argc > 3) {
            fprintf(stderr, "%s: help takes one command\n", prog);
            return EXIT_USAGE;
        }
        static char help_flag[] = "--help";
        char *args[]            = {argv[0], argv[2], help_flag, NULL};
        return run_command(3, args);
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("ampx %s (plugin ABI %d.%d)\n", AMPX_VERSION_STRING, AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
        return 0;
    }
    int rc = cli_check_env(prog);
    if (rc) return rc;
    /* getopt prefixes its messages with argv[0]: make that "ampx COMMAND" */
    char name[64];
    snprintf(name, sizeof name, "%s %s", prog, cmd);
    argv[1] = name;
    if (!strcmp(cmd, "backends")) return cmd_backends(argc - 1, argv + 1);
    if (!strcmp(cmd, "conformance")) return cmd_conformance(argc - 1, argv + 1);
    for (const cli_command *c = cli_commands; c->name; c++)
        if (!strcmp(cmd, c->name)) return c->run(argc - 1, argv + 1);
    const char *names[64] = {"backends", "conformance", "help"};
    size_t n              = 3;
    for (const cli_command *c = cli_commands; c->name && n < 64; c++)
        names[n++] = c->name;
    const char *near = cli_nearest(cmd, names, n);
    if (near)
        fprintf(stderr, "%s: unknown command '%s' (did you mean '%s'?)\n", prog, cmd, near);
    else
        fprintf(stderr, "%s: unknown command '%s' (try 'ampx --help')\n", prog, cmd);
    return EXIT_USAGE;
}
