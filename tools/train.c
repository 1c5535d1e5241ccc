/* train.c — `ampx train`, `ampx eval` and `ampx policy`.
 *
 *   ampx train MODEL.json [--backend B] [--backend-opt k=v]... [--policy F] [--steps N]
 *              [--batch N] [--seed S] [--log-every N] [--metrics F.jsonl]
 *              [--checkpoint F] [--checkpoint-every N] [--resume F] [--quiet]
 *   ampx eval MODEL.json --checkpoint F [--backend B] [--policy F]
 *   ampx policy MODEL.json [--policy F]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ampx/train.h"
#include "cli.h"

typedef struct run_opts {
    const char *model, *backend, *policy, *metrics, *checkpoint, *resume;
    const char *bopts[MAX_BACKEND_OPTS];
    uint32_t n_bopts;
    int64_t steps, batch, seed, log_every, ckpt_every;
    int quiet;
} run_opts;

static int parse_i64(const char *prog, const char *flag, const char *s, int64_t lo, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo) {
        fprintf(stderr, "%s: %s '%s': expected an integer >= %lld\n", prog, flag, s, (long long)lo);
        return -1;
    }
    *out = v;
    return 0;
}

static void usage(const char *cmd, FILE *f) {
    if (!strcmp(cmd, "policy"))
        fprintf(f, "usage: ampx policy MODEL.json [--policy FILE]\n"
                   "Prints every tensor's resolved dtype and why, every cast inserted, the scaler\n"
                   "and the optimizer state dtypes.\n");
    else if (!strcmp(cmd, "eval"))
        fprintf(
            f,
            "usage: ampx eval MODEL.json --checkpoint FILE [--backend B] [--backend-opt k=v]...\n"
            "                 [--policy FILE]\n"
            "Held-out accuracy and loss of a checkpoint.\n");
    else
        fprintf(
            f,
            "usage: ampx train MODEL.json [options]\n"
            "  --backend B          cpu (default), opencl, cuda or a plugin path\n"
            "  --backend-opt k=v    a backend option (repeatable)\n"
            "  --policy FILE        JSON with \"policy\" and/or \"scaler\" replacing the model's\n"
            "  --steps N            total steps of the run (a resumed run stops at the same step)\n"
            "  --batch N            examples per micro-batch\n"
            "  --seed S             initialization, data and shuffling seed\n"
            "  --log-every N        steps between reads of the device's step records\n"
            "  --metrics F.jsonl    one JSON object per step\n"
            "  --checkpoint F       write a safetensors checkpoint at the end (and every\n"
            "                       --checkpoint-every N steps)\n"
            "  --resume F           continue from a checkpoint\n"
            "  --quiet              only the summary\n");
}

static int parse_run(int argc, char **argv, const char *cmd, run_opts *o) {
    static struct option lopts[] = {{"backend", required_argument, 0, 'b'},
                                    {"backend-opt", required_argument, 0, 'o'},
                                    {"policy", required_argument, 0, 'p'},
                                    {"steps", required_argument, 0, 's'},
                                    {"batch", required_argument, 0, 'B'},
                                    {"seed", required_argument, 0, 'S'},
                                    {"log-every", required_argument, 0, 'l'},
                                    {"metrics", required_argument, 0, 'm'},
                                    {"checkpoint", required_argument, 0, 'c'},
                                    {"checkpoint-every", required_argument, 0, 'C'},
                                    {"resume", required_argument, 0, 'r'},
                                    {"quiet", no_argument, 0, 'q'},
                                    {"help", no_argument, 0, 'h'},
                                    {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->steps = o->batch = o->seed = o->log_every = -1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        int train_only = strchr("sBSlmCrq", c) != NULL;
        if (train_only && strcmp(cmd, "train")) {
            fprintf(stderr, "%s: option '%s' is for ampx train\n", argv[0], argv[optind - 1]);
            return EXIT_USAGE;
        }
        switch (c) {
        case 'b': o->backend = optarg; break;
        case 'o':
            if (cli_parse_backend_opt(optarg, o->bopts, &o->n_bopts)) return EXIT_USAGE;
            break;
        case 'p': o->policy = optarg; break;
        case 's':
            if (parse_i64(argv[0], "--steps", optarg, 1, &o->steps)) return EXIT_USAGE;
            break;
        case 'B':
            if (parse_i64(argv[0], "--batch", optarg, 1, &o->batch)) return EXIT_USAGE;
            break;
        case 'S':
            if (parse_i64(argv[0], "--seed", optarg, 0, &o->seed)) return EXIT_USAGE;
            break;
        case 'l':
            if (parse_i64(argv[0], "--log-every", optarg, 1, &o->log_every)) return EXIT_USAGE;
            break;
        case 'C':
            if (parse_i64(argv[0], "--checkpoint-every", optarg, 1, &o->ckpt_every))
                return EXIT_USAGE;
            break;
        case 'm': o->metrics = optarg; break;
        case 'c': o->checkpoint = optarg; break;
        case 'r': o->resume = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(cmd, stdout); exit(0);
        default: usage(cmd, stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "%s: expected one MODEL.json%s\n", argv[0],
                optind < argc - 1 ? " (extra arguments)" : "");
        usage(cmd, stderr);
        return EXIT_USAGE;
    }
    o->model = argv[optind];
    if (!strcmp(cmd, "eval") && !o->checkpoint) {
        fprintf(stderr, "%s: --checkpoint FILE is required\n", argv[0]);
        return EXIT_USAGE;
    }
    if (!strcmp(cmd, "policy") && (o->backend || o->n_bopts)) {
        fprintf(stderr, "%s: the policy is resolved without a backend; drop --backend\n", argv[0]);
        return EXIT_USAGE;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------

typedef struct progress {
    FILE *metrics;
    int tty, quiet;
    int64_t total, skipped;
    double t0;
    float last_scale;
    double last_loss;
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
                    "%sstep %lld: skipped, non-finite gradients in %s; loss scale %g -> %g\n",
                    p->tty ? "\r\033[K" : "", (long long)r->step,
                    r->overflow[0] ? r->overflow : "(unnamed)", (double)p->last_scale,
                    (double)r->scale);
    }
    p->last_scale = r->scale;
    if (!r->skipped) p->last_loss = r->loss;
    return 0;
}

static void show_progress(progress *p, int64_t step, int64_t start) {
    if (p->quiet) return;
    double el = now_s() - p->t0, rate = el > 0 ? (double)(step - start) / el : 0;
    double eta = rate > 0 ? (double)(p->total - step) / rate : 0;
    if (p->tty)
        fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %.4f  scale %g  %.0f steps/s  ETA %.0fs",
                (long long)step, (long long)p->total, p->last_loss, (double)p->last_scale, rate,
                eta);
    else
        printf("step %lld/%lld loss %.4f scale %g steps/s %.1f eta_s %.0f\n", (long long)step,
               (long long)p->total, p->last_loss, (double)p->last_scale, rate, eta);
    fflush(stdout);
}

static void print_line(void *user, const char *line) {
    (void)user;
    puts(line);
}

/* Loads the model and opens the backend; prints one line and returns non-zero on failure. */
static int open_all(const char *prog, run_opts *o, ampx_model **m, ampx_backend **be) {
    char err[1024];
    if (ampx_model_load(o->model, o->policy, m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (!be) return 0;
    ampx_train_config *tc = ampx_model_train_config(*m);
    if (o->steps > 0) tc->steps = o->steps;
    if (o->batch > 0) tc->batch = o->batch;
    if (o->seed >= 0) tc->seed = (uint64_t)o->seed;
    if (o->log_every > 0) tc->log_every = o->log_every;
    const char *spec = o->backend ? o->backend : "cpu";
    if (ampx_backend_open(spec, o->bopts, o->n_bopts, be, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        ampx_model_free(*m);
        return 1;
    }
    return 0;
}

int cli_train(int argc, char **argv) {
    run_opts o;
    int rc = parse_run(argc, argv, "train", &o);
    if (rc) return rc;
    ampx_model *m;
    ampx_backend *be;
    if (open_all(argv[0], &o, &m, &be)) return 1;
    char err[1024];
    ampx_trainer *t       = NULL;
    progress p            = {.tty = isatty(2), .quiet = o.quiet};
    ampx_train_config *tc = ampx_model_train_config(m);
    p.total               = tc->steps;
    rc                    = 1;
    if (ampx_trainer_create(m, be, &t, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto out;
    }
    if (o.resume && ampx_trainer_load(t, o.resume, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto out;
    }
    if (o.metrics && !(p.metrics = fopen(o.metrics, o.resume ? "a" : "w"))) {
        perror(o.metrics);
        goto out;
    }
    ampx_scalars sc;
    ampx_trainer_scalars(t, &sc);
    p.last_scale  = sc.scale;
    int64_t start = ampx_trainer_step(t);
    if (!o.quiet) {
        uint64_t peak, flat;
        ampx_trainer_memory(t, &peak, &flat);
        printf("training %s on %s: steps %lld..%lld, batch %lld x %lld, %d parameter tensors; "
               "activation memory %.1f KiB planned (%.1f KiB without reuse)\n",
               ampx_model_name(m), ampx_backend_path(be), (long long)start, (long long)tc->steps,
               (long long)tc->batch, (long long)tc->accumulate, ampx_trainer_n_params(t),
               (double)peak / 1024, (double)flat / 1024);
        fflush(stdout);
    }
    p.t0           = now_s();
    int64_t every  = o.ckpt_every > 0 ? o.ckpt_every : tc->log_every;
    ampx_status st = AMPX_OK;
    while (ampx_trainer_step(t) < tc->steps && !st) {
        int64_t next = ampx_trainer_step(t) + every;
        if (next > tc->steps) next = tc->steps;
        st = ampx_trainer_run(t, next, on_record, &p);
        if (p.metrics) fflush(p.metrics);
        if (!st) show_progress(&p, ampx_trainer_step(t), start);
        if (!st && o.checkpoint && o.ckpt_every > 0 &&
            ampx_trainer_save(t, o.checkpoint, err, sizeof err)) {
            fprintf(stderr, "%s%s: %s\n", p.tty ? "\n" : "", argv[0], err);
            goto out;
        }
    }
    if (p.tty && !o.quiet) fputc('\n', stderr);
    if (st) {
        fprintf(stderr, "%s: %s\n", argv[0], ampx_trainer_error(t));
        goto out;
    }
    double secs = now_s() - p.t0;
    if (o.checkpoint && ampx_trainer_save(t, o.checkpoint, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto out;
    }
    ampx_eval_result ev;
    if (ampx_trainer_evaluate(t, &ev)) {
        fprintf(stderr, "%s: %s\n", argv[0], ampx_trainer_error(t));
        goto out;
    }
    ampx_trainer_scalars(t, &sc);
    printf("done: step %lld, %d applied, %d skipped, %.2f s (%.0f steps/s); final loss scale %g\n",
           (long long)ampx_trainer_step(t), sc.applied_steps, sc.skipped_steps, secs,
           secs > 0 ? (double)(ampx_trainer_step(t) - start) / secs : 0.0, (double)sc.scale);
    printf("held-out accuracy %.2f%% (loss %.4f) on %lld examples\n", 100 * ev.accuracy, ev.loss,
           (long long)ev.examples);
    rc = 0;
out:
    if (p.metrics) fclose(p.metrics);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
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
        printf("step %lld: held-out accuracy %.2f%% (loss %.4f) on %lld examples\n",
               (long long)ampx_trainer_step(t), 100 * ev.accuracy, ev.loss, (long long)ev.examples);
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
