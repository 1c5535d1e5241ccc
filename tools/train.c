/* train.c — `ampx train`, `ampx eval` and `ampx policy`.
 *
 *   ampx train MODEL.json [--backend B] [--backend-opt k=v]... [--policy F] [--steps N]
 *              [--batch N] [--seed S] [--log-every N] [--metrics F.jsonl]
 *              [--checkpoint F] [--checkpoint-every N] [--resume F] [--quiet]
 *              [--trace F.json [--trace-steps A:B]] [--monitor [N]] [--forensics]
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
#include <stdio_ext.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ampx/inject.h"
#include "ampx/train.h"
#include "cli.h"
#include "keeper.h"
#include "progress.h"

typedef struct run_opts {
    const char *model, *backend, *policy, *metrics, *checkpoint, *resume, *trace;
    int64_t trace_first, trace_last, monitor;
    cli_backend_opts bopts;
    const char *init_from; /* --init-from W.safetensors */
    int transpose_linear;
    cli_sets sets;   /* --set PATH=VALUE, in order */
    cli_sets places; /* --place GLOB=BACKEND, in order */
    int64_t steps, batch, accumulate, seed, log_every, ckpt_every, eval_every, keep, zero;
    int quiet, forensics;
} run_opts;

static void usage(const char *cmd, FILE *f) {
    if (!strcmp(cmd, "policy"))
        fprintf(f, "usage: ampx policy MODEL.json [--policy FILE] [--set PATH=VALUE]...\n"
                   "                   [--backend A,B [--place GLOB=BACKEND]... [--placement M]]\n"
                   "Prints every tensor's resolved dtype and why, every cast inserted, the scaler\n"
                   "and the optimizer state dtypes; with --backend, where each node of a step\n"
                   "runs on that backend list, why, and the bytes copied between backends.\n"
                   "ampx policy --search MODEL.json finds the cheapest policy whose short run\n"
                   "stays within a tolerance of f32 ('ampx policy --search --help').\n");
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
            "  --backend B          cpu (default), opencl, cuda or a plugin path; or an ordered\n"
            "                       list (./libvendor.so,cpu): each node on the first that takes "
            "it\n"
            "  --backend-opt k=v    a backend option (repeatable; NAME.k=v for one of a list)\n"
            "  --place GLOB=B       run the nodes whose names match on backend B of the list\n"
            "  --placement M        first (default), strict (no fallback) or measured\n"
            "  --policy FILE        JSON with \"policy\" and/or \"scaler\" replacing the model's\n"
            "  --set PATH=VALUE     override a key of the model file (repeatable), e.g.\n"
            "                       --set optimizer.lr=3e-4 --set train.batch=128\n"
            "  --steps N            total steps of the run (a resumed run stops at the same step)\n"
            "  --batch N            examples per micro-batch\n"
            "  --accumulate N       micro-batches per step (gradients summed, one update)\n"
            "  --zero 1             data parallel: each rank keeps 1/N of the optimizer state\n"
            "  --seed S             initialization, data and shuffling seed\n"
            "  --log-every N        steps between reads of the device's step records\n"
            "  --eval-every N       steps between validation evaluations (0: at the end only)\n"
            "  --metrics F.jsonl    one JSON object per step\n"
            "  --checkpoint F       write a safetensors checkpoint at the end (and on SIGINT or\n"
            "                       SIGTERM); one run at a time per F (a lock on F.lock)\n"
            "  --checkpoint-every N with --checkpoint: also write one every N steps\n"
            "  --keep K             with --checkpoint-every: keep the last K periodic "
            "checkpoints,\n"
            "                       each named by its step (F.step000100.safetensors); a run\n"
            "                       resumed from F's files goes on rotating them\n"
            "  --resume F           continue from a checkpoint\n"
            "  --init-from W        start from plain safetensors weights (names and shapes\n"
            "                       checked; a dense weight is [in, out])\n"
            "  --transpose-linear   with --init-from: dense weights are PyTorch's [out, in]\n"
            "  --trace F.json       a Chrome trace-event timeline (Perfetto, chrome://tracing)\n"
            "  --trace-steps A:B    trace steps A..B only (1-based, inclusive; default: all)\n"
            "  --monitor [N]        gradient health every N steps (default 10): per-layer table,\n"
            "                       per-tensor metrics lines, warnings naming the layer\n"
            "  --forensics          on every step, where the first non-finite value of a\n"
            "                       skipped step came from (a largest-|x| scan of each output)\n"
            "  --quiet              only the summary\n"
            "  --max-input-bytes N  read files of up to N bytes (default 1 GiB, 16 MiB for\n"
            "                       JSON; also $AMPX_MAX_INPUT_BYTES)\n");
}

// ---------------------------------------------------------------------------------------
// The options of train, eval and policy: one table; eval and policy refuse the train-only ones.

enum { TRAIN_ONLY = 1 };

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

/* --placement MODE: the model file's placement.mode */
static int opt_placement(void *opts, int argc, char **argv, const char *v) {
    run_opts *o = opts;
    static char set[64]; /* one --placement: the last one given is the one that counts */
    if (strlen(v) > 32) {
        fprintf(stderr, "%s: --placement '%.40s': expected first, strict or measured\n", argv[0],
                v);
        return -1;
    }
    snprintf(set, sizeof set, "placement.mode=%s", v);
    for (int i = 0; i < o->sets.n; i++)
        if (o->sets.v[i] == set) return 0; /* already listed: it now reads the new mode */
    return cli_parse_set(argv[0], set, &o->sets);
}

static int opt_place(void *opts, int argc, char **argv, const char *v) {
    run_opts *o = opts;
    if (o->places.n == MAX_SETS) {
        fprintf(stderr, "%s: more than %d --place rules\n", argv[0], MAX_SETS);
        return -1;
    }
    o->places.v[o->places.n++] = v;
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
    CLI_OPT_INT("accumulate", 'A', RUN(accumulate), 1, 1 << 16, TRAIN_ONLY),
    CLI_OPT_INT("zero", 'z', RUN(zero), 0, 1, TRAIN_ONLY),
    CLI_OPT_INT("seed", 'S', RUN(seed), 0, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_INT("log-every", 'l', RUN(log_every), 1, 1 << 20, TRAIN_ONLY),
    CLI_OPT_INT("eval-every", 'E', RUN(eval_every), 0, INT32_MAX, TRAIN_ONLY),
    CLI_OPT_SET("set", 'Z', RUN(sets)),
    CLI_OPT_CALL("placement", 'P', opt_placement, 0),
    CLI_OPT_CALL("place", 'G', opt_place, 0),
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
    CLI_OPT_FLAG("forensics", 'F', RUN(forensics), TRAIN_ONLY),
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
    else if (!strcmp(cmd, "policy") && o->bopts.n && !o->backend)
        msg = "--backend-opt needs --backend (the placement on that backend list)";
    else if (o->places.n && !(o->backend && strchr(o->backend, ',')))
        msg = "--place needs --backend with a list of backends (./libvendor.so,cpu)";
    if (!msg) return 0;
    fprintf(stderr, "%s: %s\n", prog, msg);
    return EXIT_USAGE;
}

static int parse_run(int argc, char **argv, const char *cmd, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = o->batch = o->accumulate = o->seed = o->log_every = o->eval_every = o->zero = -1;
    cli_parser p = {"h", run_table, strcmp(cmd, "train") ? TRAIN_ONLY : 0u, "ampx train"};
    int rc       = cli_parse_opts(&p, argc, argv, o);
    if (rc == CLI_HELP_ASKED) { /* the caller exits 0 (or 1 when stdout fails) */
        usage(cmd, stdout);
        return CLI_HELP_ASKED;
    }
    if (rc == CLI_BAD_OPTION) {
        cli_try_help(argv[0]);
        return EXIT_USAGE;
    }
    if (rc) return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "%s: expected one MODEL.json%s\n", argv[0],
                optind < argc - 1 ? " (extra arguments)" : "");
        cli_try_help(argv[0]);
        return EXIT_USAGE;
    }
    o->model = argv[optind];
    return check_run(argv[0], cmd, o);
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
    if (o->accumulate > 0) tc->accumulate = o->accumulate;
    if (o->zero >= 0) tc->zero = (int)o->zero;
    tc->skip_init  = o->init_from || o->resume;
    tc->start_from = o->resume ? o->resume : o->init_from;
    if (o->seed >= 0) tc->seed = (uint64_t)o->seed;
    if (o->log_every > 0) tc->log_every = o->log_every;
    if (o->eval_every >= 0) tc->eval_every = o->eval_every;
    if (o->monitor > 0) tc->monitor_every = o->monitor;
    if (o->forensics) tc->forensics = 1;
}

/* The --place rules on a loaded model; 0, or 1 after one line. */
static int apply_places(const char *prog, const run_opts *o, ampx_model *m) {
    char err[512];
    for (int i = 0; i < o->places.n; i++)
        if (ampx_model_place(m, o->places.v[i], err, sizeof err)) {
            report(prog, "%s", err);
            return 1;
        }
    return 0;
}

/* Loads the model and opens the backend; prints one line and returns non-zero on failure. */
static int open_all(const char *prog, run_opts *o, ampx_model **m, ampx_backend **be) {
    char err[1024];
    if (ampx_model_load_with(o->model, o->policy, o->sets.v, o->sets.n, m, err, sizeof err)) {
        report(prog, "%s", err);
        return 1;
    }
    if (apply_places(prog, o, *m)) {
        ampx_model_free(*m);
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
        if (ampx_model_load_for(o->model, o->policy, o->sets.v, o->sets.n, ops, m, err,
                                sizeof err)) {
            report(prog, "%s", err);
            ampx_backend_close(*be);
            *be = NULL;
            return 1;
        }
        if (apply_places(prog, o, *m)) {
            ampx_model_free(*m);
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
    ckpt_keeper keeper;
    int lock_fd; /* the checkpoint's lock, held for the run's life; -1: none */
    progress p;
    ampx_scalars sc;
    int64_t start;         /* the step the run starts from (a resumed run's checkpoint) */
    int32_t applied_start; /* applied steps before it */
    double secs;
    ampx_eval_result ev;
    int stopped; /* data parallel: every rank stopped for a signal after the same step */
    char err[1024];
} train_run;

/* The keeper's files among the inputs in[1..n_in) (all but --resume, in[0]: a run resumed
 * from one of F's files continues it): F.best when the run validates, and with --keep each
 * input named as one of F's periodic files (F.stepN.safetensors, any N: N is read from the
 * name) against that file. 0, or 1 after one line. */
static int check_kept(train_run *r, const ampx_file_role *in, int n_in) {
    const run_opts *o = &r->o;
    char best[4096], stem[4096], path[4096];
    ckpt_name(o->checkpoint, "best", best, sizeof best);
    ampx_file_role out = {best, "--checkpoint's best file"};
    if (ampx_model_train_config(r->m)->eval_every > 0 &&
        ampx_check_outputs(&out, 1, in + 1, n_in - 1, r->err, sizeof r->err))
        goto bad;
    if (!o->keep) return 0;
    /* the basename of F's periodic file of step 0, split around its six digits */
    ckpt_step_name(o->checkpoint, 0, stem, sizeof stem);
    const char *name   = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
    const char *digits = NULL; /* the last ".step000000": F's own name may hold one */
    for (const char *at = name; (at = strstr(at, ".step000000")); at++)
        digits = at + 5;
    size_t pre = (size_t)(digits - name), post = strlen(digits + 6);
    for (int j = 1; j < n_in; j++) {
        if (!in[j].path) continue;
        const char *b = strrchr(in[j].path, '/') ? strrchr(in[j].path, '/') + 1 : in[j].path;
        size_t n = strlen(b), k = pre;
        if (n < pre + 6 + post || strncmp(b, name, pre) || strcmp(b + n - post, digits + 6))
            continue;
        while (k < n - post && b[k] >= '0' && b[k] <= '9')
            k++;
        if (k != n - post) continue;
        ckpt_step_name(o->checkpoint, strtoll(b + pre, NULL, 10), path, sizeof path);
        out = (ampx_file_role){path, "--checkpoint's periodic file"};
        if (ampx_check_outputs(&out, 1, in + j, 1, r->err, sizeof r->err)) goto bad;
    }
    return 0;
bad:
    report(r->prog, "%s", r->err);
    return 1;
}

/* No output of the run is one of its inputs (the model, its data, the policy, the weights it
 * starts from) or another output; a checkpoint resumed and written again is the one run
 * continued. 0, or 1 after one line. */
static int check_files(train_run *r) {
    const run_opts *o     = &r->o;
    ampx_file_role out[3] = {
        {o->checkpoint, "--checkpoint"}, {o->metrics, "--metrics"}, {o->trace, "--trace"}};
    ampx_file_role in[16] = {
        {o->resume, "--resume"}, {o->policy, "--policy"}, {o->init_from, "--init-from"}};
    /* --resume F --checkpoint F continues the run F holds: the one input an output may be
     * (--metrics or --trace naming F is still refused, as the same file as --checkpoint) */
    if (ampx_check_outputs(out, 1, in, 1, NULL, 0)) in[0].path = NULL;
    int n_in = 3 + ampx_model_inputs(r->m, in + 3, 13);
    if (ampx_check_outputs(out, 3, in, n_in, r->err, sizeof r->err)) {
        report(r->prog, "%s", r->err);
        return 1;
    }
    return o->checkpoint ? check_kept(r, in, n_in) : 0;
}

// ---------------------------------------------------------------------------------------
// The files a run writes: its checkpoint path locked for the run's life, every name checked
// before the first step, SIGINT and SIGTERM ending it with a checkpoint.

/* The checkpoint path's lock (keeper.c), held until the process ends; 0, or -1 after one
 * line. */
static int lock_checkpoint(train_run *r) {
    if (!keeper_lock(r->o.checkpoint, &r->lock_fd, r->err, sizeof r->err)) return 0;
    report(r->prog, "%s", r->err);
    return -1;
}

/* Every name the run will write, before its first step: the checkpoint, its periodic files
 * up to the last step's, the best checkpoint, and the temporary name of each (a name that
 * is too long is found now, not at the first periodic checkpoint). 0, or -1 after one line. */
static int check_names(train_run *r) {
    const run_opts *o = &r->o;
    char path[4096];
    if (!o->checkpoint) return 0;
    if (ampx_checkpoint_check_path(o->checkpoint, r->err, sizeof r->err)) goto bad;
    if (o->keep) {
        ckpt_step_name(o->checkpoint, r->tc->steps, path, sizeof path);
        if (ampx_checkpoint_check_path(path, r->err, sizeof r->err)) goto bad;
    }
    if (r->tc->eval_every > 0) {
        ckpt_name(o->checkpoint, "best", path, sizeof path);
        if (ampx_checkpoint_check_path(path, r->err, sizeof r->err)) goto bad;
    }
    return 0;
bad:
    report(r->prog, "%s", r->err);
    return -1;
}

/* SIGINT and SIGTERM: the step in progress finishes, a checkpoint is saved, the run exits
 * with 128 + the signal. A second signal ends the process at once. */
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    if (g_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    g_signal = sig;
}

static void catch_signals(ampx_trainer *t, int stop_in_run) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    for (int i = 0; i < 2; i++) { /* a signal ignored when the run started stays ignored */
        struct sigaction was;
        int sig = i ? SIGTERM : SIGINT;
        if (sigaction(sig, NULL, &was) == 0 && was.sa_handler != SIG_IGN) sigaction(sig, &sa, NULL);
    }
    if (stop_in_run) ampx_trainer_stop_on(t, &g_signal);
}

/* The run after a signal: its checkpoint, one line; -1. In a data-parallel run every rank
 * comes here after the same step (signal_agreed): ZeRO-1's state is gathered, rank 0 saves
 * and speaks, and the job is not aborted (every rank ends with 128 + the signal). */
static int interrupted(train_run *r) {
    ampx_trainer *t = r->t;
    const char *ck  = r->o.checkpoint;
    const char *sig = g_signal == SIGINT ? "SIGINT" : "SIGTERM";
    if (r->p.tty && !r->o.quiet) fputc('\n', stderr);
    if (r->world > 1 && ck && ampx_trainer_gather_state(t)) ck = NULL;
    if (r->rank != 0) return -1;
    if (ck && ampx_trainer_save(t, ck, r->err, sizeof r->err)) {
        fprintf(stderr, "%s: stopped by %s at step %lld; the checkpoint was not written: %s\n",
                r->prog, sig, (long long)ampx_trainer_step(t), r->err);
        return -1;
    }
    fprintf(stderr, "%s: stopped by %s at step %lld%s%s%s\n", r->prog, sig,
            (long long)ampx_trainer_step(t), ck ? ": checkpoint written to " : " (no --checkpoint)",
            ck ? ck : "", ck ? "; continue with --resume" : "");
    return -1;
}

/* Whether the run stops for a signal now. One process: its own flag (ampx_trainer_stop_on
 * ended the run after the step in progress). Data parallel: the ranks agree, at the end of
 * each interval, on the largest signal any rank got (mpirun forwards SIGTERM to every rank,
 * not at the same moment), so all stop after the same step. */
static int signal_agreed(train_run *r) {
    if (r->world == 1) return g_signal != 0;
    int sig = g_signal;
    if (ampx_dist_max_int(g_dist, &sig)) return 0;
    if (sig) g_signal = sig, r->stopped = 1;
    return sig != 0;
}

/* The checkpoint path checked and locked, the model and the backend; 0, or 1 after one line
 * with nothing left open. */
static int train_open(train_run *r) {
    run_opts *o = &r->o;
    r->rank = ampx_dist_rank(g_dist), r->world = ampx_dist_size(g_dist);
    r->lock_fd = -1;
    if (r->rank) o->quiet = 1, o->metrics = NULL, o->trace = NULL; /* rank 0 speaks for the job */
    /* a checkpoint folder that takes no file is found now, not after the run */
    if (o->checkpoint && ampx_checkpoint_check_path(o->checkpoint, r->err, sizeof r->err)) {
        report(r->prog, "%s", r->err);
        return 1;
    }
    if (open_all(r->prog, o, &r->m, &r->be)) {
        r->m = NULL, r->be = NULL; /* open_all closed what it opened */
        return 1;
    }
    r->tc = ampx_model_train_config(r->m);
    if (check_files(r) || check_names(r)) return 1;
    if (o->checkpoint && r->rank == 0 && lock_checkpoint(r)) return 1;
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
    ampx_model_describe_memory(r->m, print_line, NULL);
    ampx_trainer_placement(r->t, 0, print_line, NULL);
    if (r->world > 1) {
        uint64_t gbytes;
        int buckets;
        ampx_trainer_gradient_layout(r->t, &gbytes, &buckets);
        printf("data-parallel over %d ranks (%s): batch %lld per rank, global batch %lld; "
               "gradients %.2f MiB in %d all-reduce bucket%s (%s)\n",
               r->world, ampx_dist_engine(), (long long)tc->batch,
               (long long)(tc->batch * tc->accumulate * r->world), (double)gbytes / 1048576.0,
               buckets, buckets == 1 ? "" : "s", ampx_trainer_dist_path(r->t));
        uint64_t wbytes, sbytes;
        ampx_trainer_param_bytes(r->t, &wbytes, &sbytes);
        printf("parameters on each rank: weights %.2f MiB, optimizer state %.2f MiB%s\n",
               (double)wbytes / 1048576.0, (double)sbytes / 1048576.0,
               tc->zero ? " (ZeRO-1: this rank's shard of the state, and of the f32 masters of "
                          "parameters with working copies)"
                        : "");
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
    if (r->rank == 0 && o->resume && ampx_trainer_notice(t)[0])
        fprintf(stderr, "%s: note: %s\n", r->prog, ampx_trainer_notice(t));
    if ((o->resume || o->init_from) && ampx_trainer_sync(t)) {
        report(r->prog, "%s", ampx_trainer_error(t));
        return -1;
    }
    if (o->resume && ampx_trainer_step(t) >= r->tc->steps) { /* before any file is opened */
        report(r->prog,
               "%s is at step %lld and the run ends at step %lld: nothing to train (steps "
               "count from the start of the run; give --steps N with N > %lld)",
               o->resume, (long long)ampx_trainer_step(t), (long long)r->tc->steps,
               (long long)ampx_trainer_step(t));
        return -1;
    }
    inject_from_env(t, r->rank);
    if (o->checkpoint) keeper_start(&r->keeper, t, o->checkpoint, o->resume, o->keep);
    if (o->metrics &&
        progress_metrics_open(&r->p, o->metrics, o->resume ? ampx_trainer_step(t) : -1, err,
                              sizeof r->err)) {
        report(r->prog, "%s", err);
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
    catch_signals(t, r->world == 1); /* ranks agree on a stop at each interval's end */
    if (!o->quiet) print_start(r);
    return 0;
}

/* A metrics file that takes no more lines (a full disk, a file size limit): one warning, and
 * training goes on (the checkpoints are what a run must not lose; docs/RELIABILITY.md). */
static void metrics_lost(train_run *r, int err) {
    if (r->p.tty) fputc('\n', stderr);
    fprintf(stderr,
            "%s: warning: %s: write error: %s at step %lld; no more metrics lines are written "
            "(the file ends at a whole line): training goes on\n",
            r->prog, r->o.metrics, strerror(err ? err : EIO), (long long)ampx_trainer_step(r->t));
    progress_metrics_drop(&r->p);
}

/* The metrics lines written so far appended to the file (on failure: metrics_lost). */
static void flush_metrics(train_run *r) {
    if (r->p.metrics && progress_metrics_flush(&r->p) != 0) metrics_lost(r, errno);
}

/* Under --zero 1, every rank's shard of the optimizer state to rank 0 before it saves (every
 * rank calls it at the same points); 0, or -1 after one line. */
static int gather_state(train_run *r) {
    if (!ampx_trainer_gather_state(r->t)) return 0;
    report(r->prog, "%s", ampx_trainer_error(r->t));
    return -1;
}

/* The validation and the checkpoints due after an interval; 0, or -1 after one line. */
static int after_interval(train_run *r) {
    run_opts *o     = &r->o;
    ampx_trainer *t = r->t;
    int64_t step = ampx_trainer_step(t), steps = r->tc->steps, eval_every = r->tc->eval_every;
    if (eval_every > 0 && step % eval_every == 0 && step < steps) {
        if (progress_validate(&r->p, t, &r->ev)) {
            report(r->prog, "%s", ampx_trainer_error(t));
            return -1;
        }
        flush_metrics(r); /* the checkpoint's lines are on disk before it */
        if (o->checkpoint && gather_state(r)) return -1;
        if (r->rank == 0 && o->checkpoint &&
            keeper_save_best(&r->keeper, t, r->ev.loss, r->err, sizeof r->err)) {
            report(r->prog, "%s", r->err);
            return -1;
        }
    }
    int due = o->checkpoint && o->ckpt_every > 0 && (step % o->ckpt_every == 0 || step == steps);
    if (due && gather_state(r)) return -1;
    if (due && r->rank == 0 && keeper_save_periodic(&r->keeper, t, r->err, sizeof r->err)) {
        if (r->p.tty) fputc('\n', stderr);
        report(r->prog, "%s", r->err);
        return -1;
    }
    return 0;
}

/* Standard output that takes no more lines (a full disk, a closed pipe) stops the run: one
 * process saves its checkpoint first, so the steps trained are not lost; -1 after one line. */
static int stdout_lost(train_run *r, int err) {
    const char *ck = r->world == 1 ? r->o.checkpoint : NULL;
    int saved      = ck && !ampx_trainer_save(r->t, ck, r->err, sizeof r->err);
    report(r->prog, "write error on standard output: %s%s%s", strerror(err ? err : EIO),
           saved ? "; checkpoint written to " : "", saved ? ck : "");
    __fpurge(stdout); /* said once: the lines that did not get out are dropped */
    clearerr(stdout);
    return -1;
}

/* The steps, in intervals ending at each log, checkpoint and validation point; 0, or -1
 * after one line. */
static int train_loop(train_run *r) {
    run_opts *o                 = &r->o;
    ampx_trainer *t             = r->t;
    const ampx_train_config *tc = r->tc;
    r->p.t0                     = progress_now();
    int64_t every               = o->ckpt_every > 0 ? o->ckpt_every : tc->log_every;
    ampx_status st              = AMPX_OK;
    while (ampx_trainer_step(t) < tc->steps && !st) {
        int64_t now = ampx_trainer_step(t), next = now + every;
        /* stop at the next validation point too */
        if (tc->eval_every > 0 && next > (now / tc->eval_every + 1) * tc->eval_every)
            next = (now / tc->eval_every + 1) * tc->eval_every;
        if (next > tc->steps) next = tc->steps;
        st = ampx_trainer_run(t, next, progress_record, &r->p);
        flush_metrics(r);
        if (!st && signal_agreed(r)) return interrupted(r);
        if (!st) progress_show(&r->p, ampx_trainer_step(t), r->start);
        if (ferror(stdout)) return stdout_lost(r, errno);
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
    r->secs = progress_now() - r->p.t0;
    if (o->trace) { /* a trace that cannot be written (a full disk) costs the run nothing */
        if (ampx_trainer_trace_close(t, r->err, sizeof r->err))
            fprintf(stderr, "%s: warning: the trace was not written: %s; training goes on\n",
                    r->prog, r->err);
        else if (!o->quiet)
            printf("trace written to %s (open it in ui.perfetto.dev)\n", o->trace);
    }
    if (ampx_trainer_window(t) ? progress_validate(&r->p, t, &r->ev) != 0
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
    /* the best first: the checkpoint then holds the keeper's state after it */
    if (o->checkpoint && gather_state(r)) return -1;
    if (o->checkpoint && r->rank == 0 &&
        ((r->tc->eval_every > 0 &&
          keeper_save_best(&r->keeper, t, r->ev.loss, r->err, sizeof r->err)) ||
         ampx_trainer_save(t, o->checkpoint, r->err, sizeof r->err))) {
        report(r->prog, "%s", r->err);
        return -1;
    }
    /* many steps skipped, or the scale pinned at min_scale: a warning, the run succeeded */
    char warn[768];
    int verdict = ampx_trainer_health_end(t, warn, sizeof warn);
    if (verdict < 0) {
        report(r->prog, "%s", ampx_trainer_error(t));
        return -1;
    }
    if (verdict == 1 && r->rank == 0) progress_run_warning(&r->p, ampx_trainer_step(t), warn);
    if (r->p.metrics && progress_metrics_close(&r->p)) metrics_lost(r, errno);
    ampx_trainer_scalars(t, &r->sc);
    return 0;
}

static void print_summary(const train_run *r) {
    ampx_trainer *t            = r->t;
    const ampx_scalars *sc     = &r->sc;
    const ampx_eval_result *ev = &r->ev;
    double secs                = r->secs;
    printf("done: step %lld, %d applied, %d skipped, %.2f s (%.1f steps/s); final loss scale %s\n",
           (long long)ampx_trainer_step(t), sc->applied_steps, sc->skipped_steps, secs,
           secs > 0 ? (double)(ampx_trainer_step(t) - r->start) / secs : 0.0,
           progress_scale_text(sc->scale).s);
    progress_print_eval(t, ev);
    ampx_trainer_placement(t, 2, print_line, NULL);
    double copy_s;
    uint64_t copied = ampx_trainer_copies(t, &copy_s);
    if (copied) {
        double share = secs > 0 ? copy_s / secs : 0;
        printf("placement copies: %.1f MiB, %.1f%% of the run's time (%.0f ms)\n",
               (double)copied / 1048576.0, 100 * share, copy_s * 1e3);
        /* fallbacks that cost more than they save are what users of every framework ask about */
        if (share > 0.25)
            fprintf(stderr,
                    "%s: warning: the copies between the backends of the list took %.0f%% of the "
                    "run's time: the nodes that fell back (ampx policy MODEL --backend %s) cost "
                    "more than they move; place them together (--place GLOB=BACKEND) or "
                    "implement their ops\n",
                    r->prog, 100 * share, ampx_backend_path(r->be));
    }
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
    if (rc) return rc == CLI_HELP_ASKED ? 0 : rc;
    if (ampx_dist_init(&g_dist, r.err, sizeof r.err)) {
        fprintf(stderr, "%s: %s\n", argv[0], r.err);
        return 1;
    }
    /* a file size limit fails the write (EFBIG, reported) instead of killing the process */
    signal(SIGXFSZ, SIG_IGN);
    rc = train_open(&r) || train_start(&r) || train_loop(&r) || train_finish(&r) ? 1 : 0;
    if (rc && g_signal) rc = 128 + g_signal;
    if (rc == 0 && r.rank == 0) print_summary(&r);
    progress_metrics_close(&r.p); /* a failed run's lines so far */
    ampx_trainer_free(r.t);
    if (r.be) ampx_backend_close(r.be);
    ampx_model_free(r.m);
    keeper_unlock(r.o.checkpoint, r.lock_fd);
    if (!rc || r.stopped) ampx_dist_finalize(g_dist); /* a signal: every rank is here */
    g_dist = NULL;
    return rc;
}

int cli_eval(int argc, char **argv) {
    run_opts o;
    int rc = parse_run(argc, argv, "eval", &o);
    if (rc) return rc == CLI_HELP_ASKED ? 0 : rc;
    ampx_model *m;
    ampx_backend *be;
    if (open_all(argv[0], &o, &m, &be)) return 1;
    char err[1024];
    ampx_trainer *t = NULL;
    ampx_eval_result ev;
    rc                                    = 1;
    ampx_model_train_config(m)->skip_init = 1; /* the checkpoint overwrites every weight */
    if (ampx_trainer_create(m, be, &t, err, sizeof err) ||
        ampx_trainer_load(t, o.checkpoint, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
    } else if (ampx_trainer_evaluate(t, &ev)) {
        fprintf(stderr, "%s: %s\n", argv[0], ampx_trainer_error(t));
    } else {
        printf("step %lld: ", (long long)ampx_trainer_step(t));
        progress_print_eval(t, &ev);
        rc = 0;
    }
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}

int cli_policy(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--search")) return cli_policy_search(argc, argv);
    run_opts o;
    int rc = parse_run(argc, argv, "policy", &o);
    if (rc) return rc == CLI_HELP_ASKED ? 0 : rc;
    ampx_model *m;
    ampx_backend *be = NULL;
    if (open_all(argv[0], &o, &m, o.backend ? &be : NULL)) return 1;
    ampx_model_describe(m, print_line, NULL);
    ampx_model_describe_memory(m, print_line, NULL);
    rc = 0;
    if (be) { /* where each node runs on that backend (list), and what is copied */
        char err[1024];
        ampx_trainer *t                       = NULL;
        ampx_model_train_config(m)->skip_init = 1;
        if (ampx_trainer_create(m, be, &t, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", argv[0], err);
            rc = 1;
        } else {
            ampx_trainer_placement(t, 1, print_line, NULL);
        }
        ampx_trainer_free(t);
        ampx_backend_close(be);
    }
    ampx_model_free(m);
    return rc;
}
