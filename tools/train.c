/* train.c — `ampx train`, `ampx eval` and `ampx policy`.
 *
 *   ampx train MODEL.json [--backend B] [--backend-opt k=v]... [--policy F] [--steps N]
 *              [--batch N] [--seed S] [--log-every N] [--metrics F.jsonl]
 *              [--checkpoint F] [--checkpoint-every N] [--resume F] [--quiet]
 *              [--trace F.json [--trace-steps A:B]] [--monitor [N]]
 *   mpirun -np N ampx train MODEL.json ...  (data-parallel: docs/DISTRIBUTED.md)
 *   ampx eval MODEL.json --checkpoint F [--backend B] [--policy F]
 *   ampx policy MODEL.json [--policy F]
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ampx/inject.h"
#include "ampx/train.h"
#include "cli.h"

typedef struct run_opts {
    const char *model, *backend, *policy, *metrics, *checkpoint, *resume, *trace;
    int64_t trace_first, trace_last, monitor;
    cli_backend_opts bopts;
    const char *init_from; /* --init-from W.safetensors */
    int transpose_linear;
    const char *sets[64]; /* --set PATH=VALUE, in order */
    int n_sets;
    int64_t steps, batch, seed, log_every, ckpt_every, eval_every, keep;
    int quiet;
} run_opts;

static void usage(const char *cmd, FILE *f) {
    if (!strcmp(cmd, "policy"))
        fprintf(f, "usage: ampx policy MODEL.json [--policy FILE] [--set PATH=VALUE]...\n"
                   "Prints every tensor's resolved dtype and why, every cast inserted, the scaler\n"
                   "and the optimizer state dtypes.\n");
    else if (!strcmp(cmd, "eval"))
        fprintf(
            f,
            "usage: ampx eval MODEL.json --checkpoint FILE [--backend B] [--backend-opt k=v]...\n"
            "                 [--policy FILE] [--set PATH=VALUE]...\n"
            "Held-out accuracy and loss of a checkpoint.\n");
    else
        fprintf(
            f,
            "usage: ampx train MODEL.json [options]\n"
            "  --backend B          cpu (default), opencl, cuda or a plugin path\n"
            "  --backend-opt k=v    a backend option (repeatable)\n"
            "  --policy FILE        JSON with \"policy\" and/or \"scaler\" replacing the model's\n"
            "  --set PATH=VALUE     override a key of the model file (repeatable), e.g.\n"
            "                       --set optimizer.lr=3e-4 --set train.batch=128\n"
            "  --steps N            total steps of the run (a resumed run stops at the same step)\n"
            "  --batch N            examples per micro-batch\n"
            "  --seed S             initialization, data and shuffling seed\n"
            "  --log-every N        steps between reads of the device's step records\n"
            "  --eval-every N       steps between validation evaluations (0: at the end only)\n"
            "  --metrics F.jsonl    one JSON object per step\n"
            "  --checkpoint F       write a safetensors checkpoint at the end (and every\n"
            "                       --checkpoint-every N steps)\n"
            "  --keep K             with --checkpoint-every: keep the last K periodic "
            "checkpoints,\n"
            "                       each named by its step (F.step000100.safetensors)\n"
            "  --resume F           continue from a checkpoint\n"
            "  --init-from W        start from plain safetensors weights (names and shapes\n"
            "                       checked; a dense weight is [in, out])\n"
            "  --transpose-linear   with --init-from: dense weights are PyTorch's [out, in]\n"
            "  --trace F.json       a Chrome trace-event timeline (Perfetto, chrome://tracing)\n"
            "  --trace-steps A:B    trace steps A..B only (1-based, inclusive; default: all)\n"
            "  --monitor [N]        gradient health every N steps (default 10): per-layer table,\n"
            "                       per-tensor metrics lines, warnings naming the layer\n"
            "  --quiet              only the summary\n"
            "  --max-input-bytes N  read files of up to N bytes (default 1 GiB, 16 MiB for\n"
            "                       JSON; also $AMPX_MAX_INPUT_BYTES)\n");
}

// ---------------------------------------------------------------------------------------
// The options of train, eval and policy: one table; eval and policy refuse the train-only ones.

enum { TRAIN_ONLY = 1 };

static int opt_set(void *opts, int argc, char **argv, const char *v) {
    run_opts *o = opts;
    if (o->n_sets == (int)(sizeof o->sets / sizeof o->sets[0])) {
        fprintf(stderr, "%s: at most %d --set flags\n", argv[0], o->n_sets);
        return -1;
    }
    if (!strchr(v, '=') || v[0] == '=') {
        fprintf(stderr, "%s: --set '%s': expected PATH=VALUE\n", argv[0], v);
        return -1;
    }
    o->sets[o->n_sets++] = v;
    return 0;
}

/* --monitor, --monitor=N, or --monitor N when the next word is a number */
static int opt_monitor(void *opts, int argc, char **argv, const char *n) {
    run_opts *o = opts;
    if (!n && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9') n = argv[optind++];
    o->monitor = 10;
    return n ? cli_parse_int(argv[0], "--monitor", n, 1, 1 << 20, &o->monitor) : 0;
}

static int opt_trace_steps(void *opts, int argc, char **argv, const char *v) {
    run_opts *o = opts;
    long long a, b;
    char tail;
    if (sscanf(v, "%lld:%lld%c", &a, &b, &tail) != 2 || a < 1 || b < a) {
        fprintf(stderr, "%s: --trace-steps '%s': expected A:B with 1 <= A <= B\n", argv[0], v);
        return -1;
    }
    o->trace_first = a, o->trace_last = b;
    return 0;
}

static int opt_max_input_bytes(void *opts, int argc, char **argv, const char *v) {
    int64_t max;
    if (cli_parse_int(argv[0], "--max-input-bytes", v, 1, INT64_MAX, &max)) return -1;
    ampx_set_max_input_bytes((uint64_t)max);
    return 0;
}

#define RUN(field) offsetof(run_opts, field)
static const cli_opt run_table[] = {
    CLI_OPT_STRING("backend", 'b', RUN(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'o', RUN(bopts)),
    CLI_OPT_STRING("policy", 'p', RUN(policy), 0),
    CLI_OPT_INT("steps", 's', RUN(steps), 1, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_INT("batch", 'B', RUN(batch), 1, 1 << 20, TRAIN_ONLY),
    CLI_OPT_INT("seed", 'S', RUN(seed), 0, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_INT("log-every", 'l', RUN(log_every), 1, 1 << 20, TRAIN_ONLY),
    CLI_OPT_INT("eval-every", 'E', RUN(eval_every), 0, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_CALL("set", 'Z', opt_set, 0),
    CLI_OPT_INT("keep", 'K', RUN(keep), 1, 1000, TRAIN_ONLY),
    CLI_OPT_STRING("init-from", 'I', RUN(init_from), TRAIN_ONLY),
    CLI_OPT_FLAG("transpose-linear", 'L', RUN(transpose_linear), TRAIN_ONLY),
    CLI_OPT_STRING("metrics", 'm', RUN(metrics), TRAIN_ONLY),
    CLI_OPT_STRING("checkpoint", 'c', RUN(checkpoint), 0),
    CLI_OPT_INT("checkpoint-every", 'C', RUN(ckpt_every), 1, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_STRING("resume", 'r', RUN(resume), TRAIN_ONLY),
    CLI_OPT_FLAG("quiet", 'q', RUN(quiet), TRAIN_ONLY),
    CLI_OPT_STRING("trace", 'T', RUN(trace), TRAIN_ONLY),
    CLI_OPT_CALL("trace-steps", 'W', opt_trace_steps, TRAIN_ONLY),
    CLI_OPT_CALL_OPT("monitor", 'M', opt_monitor, TRAIN_ONLY),
    CLI_OPT_CALL("max-input-bytes", 'X', opt_max_input_bytes, 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

/* The checks across options, once they are all read; 0 or EXIT_USAGE after one line. */
static int check_run(const char *prog, const char *cmd, const run_opts *o) {
    const char *msg = NULL;
    if (o->transpose_linear && !o->init_from)
        msg = "--transpose-linear applies to --init-from";
    else if (o->init_from && o->resume)
        msg = "--init-from starts a run, --resume continues one: give one";
    else if (o->keep && !o->ckpt_every)
        msg = "--keep K needs --checkpoint-every N (and --checkpoint F)";
    else if (o->trace_first && !o->trace)
        msg = "--trace-steps needs --trace FILE";
    else if (!strcmp(cmd, "eval") && !o->checkpoint)
        msg = "--checkpoint FILE is required";
    else if (!strcmp(cmd, "policy") && (o->backend || o->bopts.n))
        msg = "the policy is resolved without a backend; drop --backend";
    if (!msg) return 0;
    fprintf(stderr, "%s: %s\n", prog, msg);
    return EXIT_USAGE;
}

static int parse_run(int argc, char **argv, const char *cmd, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = o->batch = o->seed = o->log_every = o->eval_every = -1;
    cli_parser p = {"h", run_table, strcmp(cmd, "train") ? TRAIN_ONLY : 0u, "ampx train"};
    int rc       = cli_parse_opts(&p, argc, argv, o);
    if (rc == CLI_HELP_ASKED) {
        usage(cmd, stdout);
        exit(0);
    }
    if (rc == CLI_BAD_OPTION) {
        usage(cmd, stderr);
        return EXIT_USAGE;
    }
    if (rc) return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "%s: expected one MODEL.json%s\n", argv[0],
                optind < argc - 1 ? " (extra arguments)" : "");
        usage(cmd, stderr);
        return EXIT_USAGE;
    }
    o->model = argv[optind];
    return check_run(argv[0], cmd, o);
}

// ---------------------------------------------------------------------------------------

typedef struct progress {
    FILE *metrics;
    int tty, quiet;
    int64_t total, skipped;
    double t0;
    float last_scale, min_scale;
    double last_loss;
    int64_t applied_in_interval, last_applied_step;
    /* the latest monitored step of the interval, for the per-layer table */
    ampx_tensor_health health[512];
    char names[512][64], layers[512][64];
    int n_health;
    int64_t health_step;
    double health_scale;
    char warned[64][96]; /* warnings already shown (by tensor and kind) */
    int n_warned;
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void json_num(FILE *f, const char *key, double v) {
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.9g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

static void json_str(FILE *f, const char *key, const char *v) {
    fprintf(f, ",\"%s\":\"", key);
    for (; *v; v++)
        if (*v == '"' || *v == '\\')
            fprintf(f, "\\%c", *v);
        else if ((unsigned char)*v >= 0x20)
            fputc(*v, f);
    fputc('"', f);
}

/* A monitor warning, shown the first time for its tensor and kind. */
static void on_warning(void *user, const char *line) {
    progress *p = user;
    char key[96];
    const char *kind = strstr(line, "minimum") ? "min" : strstr(line, "vanish") ? "van" : "und";
    snprintf(key, sizeof key, "%s %.80s", kind, line + 9);
    char *sp = strchr(key + 4, ' ');
    if (sp) *sp = 0;
    for (int i = 0; i < p->n_warned; i++)
        if (!strcmp(p->warned[i], key)) return;
    if (p->n_warned < 64) snprintf(p->warned[p->n_warned++], sizeof p->warned[0], "%s", key);
    fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", line);
}

static void monitor_record(progress *p, const ampx_step_record *r) {
    if (p->metrics)
        for (int i = 0; i < r->n_health; i++) {
            const ampx_tensor_health *h = &r->health[i];
            fprintf(p->metrics, "{\"step\":%lld", (long long)r->step);
            json_str(p->metrics, "tensor", h->name);
            json_str(p->metrics, "layer", h->layer);
            json_str(p->metrics, "dtype", ampx_dtype_name(h->compute));
            json_num(p->metrics, "max_abs", h->max_abs);
            json_num(p->metrics, "rms", h->rms);
            json_num(p->metrics, "norm", h->rms * sqrt((double)h->n)); /* L2, unscaled */
            json_num(p->metrics, "zero_frac", h->zero_frac);
            json_num(p->metrics, "underflow_frac", h->underflow_frac);
            fprintf(p->metrics, ",\"inf\":%lld", (long long)h->inf);
            if (h->nan >= 0)
                fprintf(p->metrics, ",\"nan\":%lld", (long long)h->nan);
            else
                fprintf(p->metrics, ",\"nan\":null");
            json_num(p->metrics, "scale", r->monitor_scale);
            fprintf(p->metrics, "}\n");
        }
    int n = r->n_health < 512 ? r->n_health : 512;
    for (int i = 0; i < n; i++) {
        p->health[i] = r->health[i];
        snprintf(p->names[i], sizeof p->names[i], "%s", r->health[i].name);
        snprintf(p->layers[i], sizeof p->layers[i], "%s", r->health[i].layer);
        p->health[i].name  = p->names[i];
        p->health[i].layer = p->layers[i];
    }
    p->n_health     = n;
    p->health_step  = r->step;
    p->health_scale = r->monitor_scale;
    if (!p->quiet) {
        ampx_health_limits lim;
        ampx_health_defaults(&lim);
        ampx_health_warnings(r->health, r->n_health, &lim, r->monitor_scale, p->min_scale,
                             on_warning, p);
    }
}

/* The per-layer table of the latest monitored step: the layer's tensors combined. */
static void show_health(progress *p) {
    if (p->quiet || !p->n_health) return;
    FILE *f = p->tty ? stderr : stdout;
    if (p->tty) fputs("\r\033[K", f);
    fprintf(f, "gradient health at step %lld (loss scale %g; max|g| and rms unscaled):\n",
            (long long)p->health_step, p->health_scale);
    fprintf(f, "  %-16s %-5s %10s %10s %10s %7s %9s %6s %6s\n", "layer", "dtype", "max|g|", "rms",
            "norm", "zeros", "underflow", "inf", "nan");
    for (int i = 0; i < p->n_health; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++)
            dup |= !strcmp(p->layers[k], p->layers[i]);
        if (dup) continue;
        double mx = 0, sq = 0, n = 0, z = 0, u = 0;
        long long inf = 0, nan = 0;
        int nan_known = 1;
        for (int k = i; k < p->n_health; k++) {
            const ampx_tensor_health *h = &p->health[k];
            if (strcmp(p->layers[k], p->layers[i])) continue;
            if (h->max_abs > mx) mx = h->max_abs;
            sq += h->rms * h->rms * (double)h->n;
            n += (double)h->n;
            z += h->zero_frac * (double)h->n;
            u += h->underflow_frac * (double)h->n;
            inf += h->inf;
            if (h->nan < 0) nan_known = 0;
            nan += h->nan > 0 ? h->nan : 0;
        }
        char nan_s[24];
        snprintf(nan_s, sizeof nan_s, nan_known ? "%lld" : "?", nan);
        fprintf(f, "  %-16s %-5s %10.3e %10.3e %10.3e %6.2f%% %8.3f%% %6lld %6s\n", p->layers[i],
                ampx_dtype_name(p->health[i].compute), mx, n ? sqrt(sq / n) : 0, sqrt(sq),
                n ? 100 * z / n : 0, n ? 100 * u / n : 0, inf, nan_s);
    }
    p->n_health = 0;
}

/* An f32 written exactly: its decimal expansion in full (2^31 is 2147483648, 1.1^k * 2^16
 * rounded to f32 keeps every digit), so a reader compares bit for bit with PyTorch. */
static void json_f32_exact(FILE *f, const char *key, float v) {
    if (!isfinite(v)) {
        fprintf(f, ",\"%s\":null", key);
        return;
    }
    int e = 0;
    frexpf(v, &e); /* v = m 2^e, 0.5 <= |m| < 1: 24 significant bits end at 2^(e - 24) */
    int frac = e < 24 ? 24 - e : 0;
    if (frac > 160) frac = 160;
    char buf[256];
    snprintf(buf, sizeof buf, "%.*f", frac, (double)v);
    if (strchr(buf, '.')) {
        size_t n = strlen(buf);
        while (buf[n - 1] == '0')
            buf[--n] = '\0';
        if (buf[n - 1] == '.') buf[--n] = '\0';
    }
    fprintf(f, ",\"%s\":%s", key, buf);
}

static int on_record(void *user, const ampx_step_record *r) {
    progress *p = user;
    if (p->metrics) {
        fprintf(p->metrics, "{\"step\":%lld", (long long)r->step);
        json_num(p->metrics, "loss", r->loss);
        json_f32_exact(p->metrics, "scale", r->scale);
        fprintf(p->metrics, ",\"skipped\":%s", r->skipped ? "true" : "false");
        json_num(p->metrics, "lr", r->lr);
        json_num(p->metrics, "grad_norm", r->grad_norm);
        json_num(p->metrics, "time_ms", r->time_ms);
        fprintf(p->metrics, "}\n");
    }
    if (r->skipped) {
        p->skipped++;
        if (!p->quiet)
            fprintf(stderr,
                    "%sstep %lld: skipped, non-finite gradients in %s; loss scale %g -> %g%s%s\n",
                    p->tty ? "\r\033[K" : "", (long long)r->step,
                    r->overflow[0] ? r->overflow : "(unnamed)", (double)p->last_scale,
                    (double)r->scale,
                    r->first_nonfinite && r->first_nonfinite[0] ? "; first non-finite: " : "",
                    r->first_nonfinite ? r->first_nonfinite : "");
    }
    if (r->warning && r->warning[0])
        fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", r->warning);
    if (r->health) monitor_record(p, r);
    p->last_scale = r->scale;
    if (!r->skipped) {
        p->last_loss = r->loss;
        p->applied_in_interval++;
        p->last_applied_step = r->step;
    }
    return 0;
}

/* The progress line. An interval with no applied step shows no loss (a loss of a skipped
 * step is not the model's, and the last applied one would be stale). */
static void show_progress(progress *p, int64_t step, int64_t start) {
    if (p->quiet) return;
    show_health(p);
    double el = now_s() - p->t0, rate = el > 0 ? (double)(step - start) / el : 0;
    double eta = rate > 0 ? (double)(p->total - step) / rate : 0;
    char loss[96];
    if (p->applied_in_interval)
        snprintf(loss, sizeof loss, "%.4f", p->last_loss);
    else if (p->last_applied_step)
        snprintf(loss, sizeof loss, "- (no step applied since step %lld)",
                 (long long)p->last_applied_step);
    else
        snprintf(loss, sizeof loss, "- (no step applied yet)");
    p->applied_in_interval = 0;
    if (p->tty)
        fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %s  scale %g  %.0f steps/s  ETA %.0fs",
                (long long)step, (long long)p->total, loss, (double)p->last_scale, rate, eta);
    else
        printf("step %lld/%lld loss %s scale %g steps/s %.1f eta_s %.0f\n", (long long)step,
               (long long)p->total, loss, (double)p->last_scale, rate, eta);
    fflush(stdout);
}

/* A validation evaluation: a metrics line and a progress line. Token models also get the
 * loss in bits per token (bits per byte for byte-level text). */
static int validate(progress *p, ampx_trainer *t, ampx_eval_result *ev) {
    if (ampx_trainer_evaluate(t, ev)) return -1;
    int64_t step = ampx_trainer_step(t);
    if (p->metrics) {
        fprintf(p->metrics, "{\"step\":%lld", (long long)step);
        json_num(p->metrics, "val_loss", ev->loss);
        if (ev->accuracy >= 0) json_num(p->metrics, "val_accuracy", ev->accuracy);
        fprintf(p->metrics, "}\n");
    }
    if (!p->quiet) {
        if (p->tty) fprintf(stderr, "\r\033[K");
        printf("step %lld: val_loss %.4f", (long long)step, ev->loss);
        if (ampx_trainer_window(t)) printf(" (%.4f bits per token)", ev->loss / log(2.0));
        if (ev->accuracy >= 0) printf(" val_accuracy %.2f%%", 100 * ev->accuracy);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

/* F with a tag before its .safetensors extension: run.safetensors -> run.best.safetensors. */
static void ckpt_name(const char *base, const char *tag, char *out, size_t cap) {
    size_t n = strlen(base), ext = strlen(".safetensors");
    if (n > ext && !strcmp(base + n - ext, ".safetensors"))
        snprintf(out, cap, "%.*s.%s.safetensors", (int)(n - ext), base, tag);
    else
        snprintf(out, cap, "%s.%s", base, tag);
}

/* The checkpoints of a run: the last K periodic ones named by step, and the best by
 * validation loss. Only files this run wrote are removed. */
typedef struct ckpt_keeper {
    char kept[1001][4096];
    int64_t n, keep;
    double best;
} ckpt_keeper;

static int save_periodic(ckpt_keeper *k, ampx_trainer *t, const char *base, char *err, size_t cap) {
    if (!k->keep) return ampx_trainer_save(t, base, err, cap) ? -1 : 0;
    char tag[32], path[4096];
    snprintf(tag, sizeof tag, "step%06lld", (long long)ampx_trainer_step(t));
    ckpt_name(base, tag, path, sizeof path);
    if (k->n > 0 && !strcmp(k->kept[k->n - 1], path)) return 0; /* this step's is there */
    if (ampx_trainer_save(t, path, err, cap)) return -1;
    snprintf(k->kept[k->n++], sizeof k->kept[0], "%s", path);
    if (k->n > k->keep) {
        unlink(k->kept[0]);
        memmove(k->kept[0], k->kept[1], sizeof k->kept[0] * (size_t)(k->n - 1));
        k->n--;
    }
    return 0;
}

/* After a validation: the best checkpoint so far, when this one is better. */
static int save_best(ckpt_keeper *k, ampx_trainer *t, const char *base, double loss, char *err,
                     size_t cap) {
    if (!base || !(loss < k->best)) return 0;
    char path[4096];
    ckpt_name(base, "best", path, sizeof path);
    if (ampx_trainer_save(t, path, err, cap)) return -1;
    k->best = loss;
    return 0;
}

static void print_line(void *user, const char *line) {
    (void)user;
    puts(line);
}

// ---------------------------------------------------------------------------------------
// Data-parallel runs: rank 0 alone writes metrics, checkpoints, the trace and the progress
// line; every rank's error reaches the terminal with its rank, and ends the whole job.

static ampx_dist *g_dist;

/* One error line, naming the rank in a data-parallel run, which it then ends (every rank:
 * the others would wait for this one forever). */
static void report(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const char *prog, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_dist)
        fprintf(stderr, "%s: rank %d of %d: %s\n", prog, ampx_dist_rank(g_dist),
                ampx_dist_size(g_dist), msg);
    else
        fprintf(stderr, "%s: %s\n", prog, msg);
    if (g_dist) ampx_dist_abort(g_dist, 1);
}

/* Fault injection for the tests (docs/DISTRIBUTED.md), each STEP[@RANK] (on rank RANK
 * only when given): AMPX_INJECT_NONFINITE makes gradient 0 of step STEP non-finite,
 * AMPX_INJECT_NONFINITE_UPDATE weight 0 after the update of step STEP. */
static void inject_from_env(ampx_trainer *t, int rank) {
    static const char *const vars[] = {"AMPX_INJECT_NONFINITE", "AMPX_INJECT_NONFINITE_UPDATE"};
    for (int i = 0; i < 2; i++) {
        const char *e = getenv(vars[i]);
        long long step, at = -1;
        if (!e || sscanf(e, "%lld@%lld", &step, &at) < 1 || (at >= 0 && at != rank)) continue;
        if (i == 0)
            ampx_trainer_inject_nonfinite(t, step, 0);
        else
            ampx_trainer_inject_nonfinite_update(t, step, 0);
    }
}

/* The command line's settings over the model file's. */
static void apply_overrides(const run_opts *o, ampx_train_config *tc) {
    if (o->steps > 0) tc->steps = o->steps;
    if (o->batch > 0) tc->batch = o->batch;
    if (o->seed >= 0) tc->seed = (uint64_t)o->seed;
    if (o->log_every > 0) tc->log_every = o->log_every;
    if (o->eval_every >= 0) tc->eval_every = o->eval_every;
    if (o->monitor > 0) tc->monitor_every = o->monitor;
}

/* Loads the model and opens the backend; prints one line and returns non-zero on failure. */
static int open_all(const char *prog, run_opts *o, ampx_model **m, ampx_backend **be) {
    char err[1024];
    if (ampx_model_load_with(o->model, o->policy, o->sets, o->n_sets, m, err, sizeof err)) {
        report(prog, "%s", err);
        return 1;
    }
    if (!be) return 0;
    apply_overrides(o, ampx_model_train_config(*m));
    const char *spec = o->backend ? o->backend : "cpu";
    if (ampx_backend_open(spec, o->bopts.v, o->bopts.n, be, err, sizeof err)) {
        report(prog, "%s", err);
        ampx_model_free(*m);
        return 1;
    }
    /* a backend without a fused op (an ABI 1.4 plugin has no ATTN_FWD) gets the model with
     * those layers as their composites; the overrides above are applied again */
    uint64_t ops = ampx_backend_op_mask(*be);
    if (ops != AMPX_ALL_OPS) {
        ampx_model_free(*m);
        if (ampx_model_load_for(o->model, o->policy, o->sets, o->n_sets, ops, m, err, sizeof err)) {
            report(prog, "%s", err);
            ampx_backend_close(*be);
            *be = NULL;
            return 1;
        }
        apply_overrides(o, ampx_model_train_config(*m));
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// ampx train: open, start, the loop of intervals, finish, the summary

/* One run of ampx train: what its parts share. */
typedef struct train_run {
    const char *prog;
    run_opts o;
    int rank, world;
    ampx_model *m;
    ampx_backend *be;
    ampx_trainer *t;
    ampx_train_config *tc;
    ckpt_keeper *keeper;
    progress p;
    ampx_scalars sc;
    int64_t start;         /* the step the run starts from (a resumed run's checkpoint) */
    int32_t applied_start; /* applied steps before it */
    double secs;
    ampx_eval_result ev;
    char err[1024];
} train_run;

/* The checkpoint path, the keeper, the model and the backend; 0, or 1 after one line with
 * nothing left open. */
static int train_open(train_run *r) {
    run_opts *o = &r->o;
    r->rank = ampx_dist_rank(g_dist), r->world = ampx_dist_size(g_dist);
    if (r->rank) o->quiet = 1, o->metrics = NULL, o->trace = NULL; /* rank 0 speaks for the job */
    /* a checkpoint folder that takes no file is found now, not after the run */
    if (o->checkpoint && ampx_checkpoint_check_path(o->checkpoint, r->err, sizeof r->err)) {
        report(r->prog, "%s", r->err);
        return 1;
    }
    r->keeper = calloc(1, sizeof *r->keeper);
    if (!r->keeper) {
        report(r->prog, "out of memory");
        return 1;
    }
    r->keeper->keep = o->keep;
    r->keeper->best = INFINITY;
    if (open_all(r->prog, o, &r->m, &r->be)) {
        free(r->keeper);
        r->keeper = NULL;
        return 1;
    }
    return 0;
}

static void print_start(const train_run *r) {
    const ampx_train_config *tc = r->tc;
    uint64_t peak, flat;
    ampx_trainer_memory(r->t, &peak, &flat);
    printf("training %s on %s: steps %lld..%lld, batch %lld x %lld, %d parameter tensors; "
           "activation memory %.1f KiB planned (%.1f KiB without reuse)\n",
           ampx_model_name(r->m), ampx_backend_path(r->be), (long long)r->start,
           (long long)tc->steps, (long long)tc->batch, (long long)tc->accumulate,
           ampx_trainer_n_params(r->t), (double)peak / 1024, (double)flat / 1024);
    if (r->world > 1) {
        uint64_t gbytes;
        int buckets;
        ampx_trainer_gradient_layout(r->t, &gbytes, &buckets);
        printf("data-parallel over %d ranks (%s): batch %lld per rank, global batch %lld; "
               "gradients %.2f MiB in %d all-reduce bucket%s (%s)\n",
               r->world, ampx_dist_engine(), (long long)tc->batch,
               (long long)(tc->batch * tc->accumulate * r->world), (double)gbytes / 1048576.0,
               buckets, buckets == 1 ? "" : "s", ampx_trainer_dist_path(r->t));
    }
    fflush(stdout);
}

/* The trainer, its starting weights, the metrics file and the trace; 0, or -1 after one
 * line. */
static int train_start(train_run *r) {
    run_opts *o = &r->o;
    char *err   = r->err;
    r->p        = (progress){.tty = isatty(2), .quiet = o->quiet};
    r->tc       = ampx_model_train_config(r->m);
    r->p.total  = r->tc->steps;
    if (ampx_trainer_create_dist(r->m, r->be, g_dist, &r->t, err, sizeof r->err)) {
        report(r->prog, "%s", err);
        return -1;
    }
    ampx_trainer *t = r->t;
    /* rank 0 reads the checkpoint or the weights and hands its state to the others */
    if (r->rank == 0 &&
        ((o->resume && ampx_trainer_load(t, o->resume, err, sizeof r->err)) ||
         (o->init_from &&
          ampx_trainer_init_from(t, o->init_from, o->transpose_linear, err, sizeof r->err)))) {
        report(r->prog, "%s", err);
        return -1;
    }
    if ((o->resume || o->init_from) && ampx_trainer_sync(t)) {
        report(r->prog, "%s", ampx_trainer_error(t));
        return -1;
    }
    inject_from_env(t, r->rank);
    if (o->metrics && !(r->p.metrics = fopen(o->metrics, o->resume ? "a" : "w"))) {
        report(r->prog, "%s: %s", o->metrics, strerror(errno));
        return -1;
    }
    ampx_trainer_scalars(t, &r->sc);
    r->p.last_scale = r->sc.scale;
    r->p.min_scale  = r->sc.min_scale;
    r->start        = ampx_trainer_step(t);
    if (o->trace &&
        ampx_trainer_trace(t, o->trace, o->trace_first ? o->trace_first : r->start + 1,
                           o->trace_first ? o->trace_last : r->tc->steps, err, sizeof r->err)) {
        report(r->prog, "%s", err);
        return -1;
    }
    r->applied_start = r->sc.applied_steps;
    if (!o->quiet) print_start(r);
    return 0;
}

/* The validation and the checkpoints due after an interval; 0, or -1 after one line. */
static int after_interval(train_run *r) {
    run_opts *o     = &r->o;
    ampx_trainer *t = r->t;
    int64_t step = ampx_trainer_step(t), steps = r->tc->steps, eval_every = r->tc->eval_every;
    if (eval_every > 0 && step % eval_every == 0 && step < steps) {
        if (validate(&r->p, t, &r->ev)) {
            report(r->prog, "%s", ampx_trainer_error(t));
            return -1;
        }
        if (r->rank == 0 &&
            save_best(r->keeper, t, o->checkpoint, r->ev.loss, r->err, sizeof r->err)) {
            report(r->prog, "%s", r->err);
            return -1;
        }
    }
    if (o->checkpoint && r->rank == 0 && o->ckpt_every > 0 &&
        (step % o->ckpt_every == 0 || step == steps) &&
        save_periodic(r->keeper, t, o->checkpoint, r->err, sizeof r->err)) {
        if (r->p.tty) fputc('\n', stderr);
        report(r->prog, "%s", r->err);
        return -1;
    }
    return 0;
}

/* The steps, in intervals ending at each log, checkpoint and validation point; 0, or -1
 * after one line. */
static int train_loop(train_run *r) {
    run_opts *o                 = &r->o;
    ampx_trainer *t             = r->t;
    const ampx_train_config *tc = r->tc;
    r->p.t0                     = now_s();
    int64_t every               = o->ckpt_every > 0 ? o->ckpt_every : tc->log_every;
    ampx_status st              = AMPX_OK;
    while (ampx_trainer_step(t) < tc->steps && !st) {
        int64_t now = ampx_trainer_step(t), next = now + every;
        /* stop at the next validation point too */
        if (tc->eval_every > 0 && next > (now / tc->eval_every + 1) * tc->eval_every)
            next = (now / tc->eval_every + 1) * tc->eval_every;
        if (next > tc->steps) next = tc->steps;
        st = ampx_trainer_run(t, next, on_record, &r->p);
        if (r->p.metrics && (fflush(r->p.metrics) != 0 || ferror(r->p.metrics))) {
            if (r->p.tty) fputc('\n', stderr);
            report(r->prog, "%s: write error: %s", o->metrics, strerror(errno ? errno : EIO));
            return -1;
        }
        if (!st) show_progress(&r->p, ampx_trainer_step(t), r->start);
        if (ferror(stdout)) {
            report(r->prog, "write error on standard output: %s", strerror(errno ? errno : EIO));
            return -1;
        }
        if (!st && after_interval(r)) return -1;
    }
    if (r->p.tty && !o->quiet) fputc('\n', stderr);
    if (st) {
        report(r->prog, "%s", ampx_trainer_error(t));
        return -1;
    }
    return 0;
}

/* A run that applied no step, the trace, the final evaluation, the checkpoint and the
 * metrics file; 0, or -1 after one line. */
static int train_finish(train_run *r) {
    run_opts *o     = &r->o;
    ampx_trainer *t = r->t;
    ampx_trainer_scalars(t, &r->sc);
    /* a run that trained nothing failed: its weights are the ones it started from */
    if (ampx_trainer_step(t) > r->start && r->sc.applied_steps == r->applied_start) {
        report(r->prog,
               "no step of this run was applied: all %lld had non-finite gradients; the weights "
               "are the ones it started from",
               (long long)(ampx_trainer_step(t) - r->start));
        return -1;
    }
    r->secs = now_s() - r->p.t0;
    if (o->trace) {
        if (ampx_trainer_trace_close(t, r->err, sizeof r->err)) {
            report(r->prog, "%s", r->err);
            return -1;
        }
        if (!o->quiet) printf("trace written to %s (open it in ui.perfetto.dev)\n", o->trace);
    }
    if (ampx_trainer_window(t) ? validate(&r->p, t, &r->ev) != 0
                               : ampx_trainer_evaluate(t, &r->ev) != AMPX_OK) {
        report(r->prog, "%s", ampx_trainer_error(t));
        return -1;
    }
    /* weights that compute no loss are not written over a checkpoint */
    if (!isfinite(r->ev.loss)) {
        fprintf(stderr,
                "%s: the held-out loss is %g: the weights overflowed (lower the learning rate)%s\n",
                r->prog, r->ev.loss, o->checkpoint ? "; the checkpoint was not written" : "");
        return -1;
    }
    if (o->checkpoint && r->rank == 0 &&
        (ampx_trainer_save(t, o->checkpoint, r->err, sizeof r->err) ||
         (r->tc->eval_every > 0 &&
          save_best(r->keeper, t, o->checkpoint, r->ev.loss, r->err, sizeof r->err)))) {
        report(r->prog, "%s", r->err);
        return -1;
    }
    if (r->p.metrics) {
        int bad      = fclose(r->p.metrics) != 0;
        r->p.metrics = NULL;
        if (bad) {
            fprintf(stderr, "%s: %s: write error: %s\n", r->prog, o->metrics, strerror(errno));
            return -1;
        }
    }
    ampx_trainer_scalars(t, &r->sc);
    return 0;
}

static void print_summary(const train_run *r) {
    ampx_trainer *t            = r->t;
    const ampx_scalars *sc     = &r->sc;
    const ampx_eval_result *ev = &r->ev;
    double secs                = r->secs;
    printf("done: step %lld, %d applied, %d skipped, %.2f s (%.0f steps/s); final loss scale %g\n",
           (long long)ampx_trainer_step(t), sc->applied_steps, sc->skipped_steps, secs,
           secs > 0 ? (double)(ampx_trainer_step(t) - r->start) / secs : 0.0, (double)sc->scale);
    if (ampx_trainer_window(t))
        printf("validation loss %.4f nats per token (%.4f bits), next-token accuracy %.2f%% on "
               "%lld positions\n",
               ev->loss, ev->loss / log(2.0), 100 * ev->accuracy, (long long)ev->examples);
    else
        printf("held-out accuracy %.2f%% (loss %.4f) on %lld examples\n", 100 * ev->accuracy,
               ev->loss, (long long)ev->examples);
    if (r->world > 1)
        printf("gradient all-reduce: %.1f%% of the run's time on rank 0 (%.0f ms, %s)\n",
               secs > 0 ? 100 * ampx_trainer_comm_ms(t) / (secs * 1e3) : 0.0,
               ampx_trainer_comm_ms(t), ampx_trainer_dist_path(t));
    if (r->world > 1)
        printf("communicator: %.1f ms on rank 0 (the all-reduces, the start's broadcasts, the "
               "checks at each log interval)\n",
               ampx_dist_comm_ms(g_dist));
}

int cli_train(int argc, char **argv) {
    train_run r = {.prog = argv[0]};
    int rc      = parse_run(argc, argv, "train", &r.o);
    if (rc) return rc;
    if (ampx_dist_init(&g_dist, r.err, sizeof r.err)) {
        fprintf(stderr, "%s: %s\n", argv[0], r.err);
        return 1;
    }
    if (train_open(&r)) return 1;
    rc = train_start(&r) || train_loop(&r) || train_finish(&r) ? 1 : 0;
    if (rc == 0 && r.rank == 0) print_summary(&r);
    if (r.p.metrics) fclose(r.p.metrics);
    ampx_trainer_free(r.t);
    ampx_backend_close(r.be);
    ampx_model_free(r.m);
    free(r.keeper);
    if (!rc) ampx_dist_finalize(g_dist);
    g_dist = NULL;
    return rc;
}

int cli_eval(int argc, char **argv) {
    run_opts o;
    int rc = parse_run(argc, argv, "eval", &o);
    if (rc) return rc;
    ampx_model *m;
    ampx_backend *be;
    if (open_all(argv[0], &o, &m, &be)) return 1;
    char err[1024];
    ampx_trainer *t = NULL;
    ampx_eval_result ev;
    rc = 1;
    if (ampx_trainer_create(m, be, &t, err, sizeof err) ||
        ampx_trainer_load(t, o.checkpoint, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
    } else if (ampx_trainer_evaluate(t, &ev)) {
        fprintf(stderr, "%s: %s\n", argv[0], ampx_trainer_error(t));
    } else {
        if (ampx_trainer_window(t))
            printf("step %lld: validation loss %.4f nats per token (%.4f bits), next-token "
                   "accuracy %.2f%% on %lld positions\n",
                   (long long)ampx_trainer_step(t), ev.loss, ev.loss / log(2.0), 100 * ev.accuracy,
                   (long long)ev.examples);
        else
            printf("step %lld: held-out accuracy %.2f%% (loss %.4f) on %lld examples\n",
                   (long long)ampx_trainer_step(t), 100 * ev.accuracy, ev.loss,
                   (long long)ev.examples);
        rc = 0;
    }
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}

int cli_policy(int argc, char **argv) {
    run_opts o;
    int rc = parse_run(argc, argv, "policy", &o);
    if (rc) return rc;
    ampx_model *m;
    if (open_all(argv[0], &o, &m, NULL)) return 1;
    ampx_model_describe(m, print_line, NULL);
    ampx_model_free(m);
    return 0;
}
