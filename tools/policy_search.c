/* policy_search.c — `ampx policy --search`: the cheapest precision policy whose short run
 * stays within a tolerance of an f32 run from the same seed.
 *
 *   ampx policy --search MODEL.json [--budget STEPS] [--tolerance T] [-o POLICY.json]
 *               [--backend B] [--backend-opt k=v]... [--set PATH=VALUE]...
 *
 * Runs, each of STEPS steps from the same weights and rows: f32 (the reference), then from
 * the cheapest up: (with --fp8) the products of weights in fp8 under mixed_bf16; every product and
 * the output layer in bf16 with the elementwise classes (activation, add, mul, dropout) in bf16
 * too; mixed_bf16 (the output layer and the elementwise ops as torch.autocast leaves them);
 * mixed_f16 with dynamic loss scaling. The first within the tolerance is chosen. When none is, the
 * products that must stay f32 are found one at a time under mixed_bf16 by bisection over the
 * products in execution order (the shortest prefix kept in f32 that passes ends at one that must
 * stay), each costing about log2(products) runs. A second f32 run from the next seed is the
 * yardstick of how much a run's figures move anyway: a run is within the tolerance when its mean
 * loss over the last fifth of the run and its held-out loss are at most (1 + T + v) times the
 * reference's, v twice the yardstick's relative distance from the reference on that figure
 * (two runs may sit on either side of a third), and
 * it skipped no more than 5% of its steps (at least 2). Each product's weight drift,
 * ||W - W_f32|| / ||W_f32 - W_0||, is reported. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/train.h"
#include "cli.h"

#define MAX_PRODUCTS 512

typedef struct search_opts {
    const char *model, *out, *backend;
    cli_backend_opts bopts;
    int64_t budget;
    double tol;
    const char *sets[60];
    int n_sets, search, fp8;
} search_opts;

typedef struct outcome {
    int ok;            /* the run finished */
    double tail, eval; /* mean loss over the last fifth of the steps; held-out loss */
    int64_t skipped;
    double seconds;
    float **w; /* per parameter: the weights after the run (NULL when not kept) */
    char error[300];
} outcome;

typedef struct search {
    const search_opts *o;
    ampx_backend *be;
    int n_params, runs;
    char **param_names;
    uint64_t *param_sizes;
    float **w0; /* the initial weights */
    outcome ref;
    double var_tail, var_eval; /* twice how far an f32 run of the next seed is from ref */
    uint64_t seed;
    const char *products[MAX_PRODUCTS];
    int n_products;
    double seconds;
} search;

static void usage(FILE *f) {
    fprintf(f, "usage: ampx policy --search MODEL.json [--budget STEPS] [--tolerance T]\n"
               "                   [-o POLICY.json] [--backend B] [--backend-opt k=v]...\n"
               "                   [--set PATH=VALUE]... [--fp8]\n"
               "Trains STEPS steps (default: the model's, at most 400) in f32, then under cheaper\n"
               "policies from the same seed, and writes the cheapest whose loss stays within T\n"
               "(default 0.02: 2%%) of the f32 run's, with a report of every run. --fp8 tries\n"
               "the products of weights in fp8 (policy.fp8, hybrid) under mixed_bf16 first.\n");
}

static int opt_set(void *opts, int argc, char **argv, const char *v) {
    (void)argc;
    search_opts *o = opts;
    if (o->n_sets == (int)(sizeof o->sets / sizeof o->sets[0]) || !strchr(v, '=') || v[0] == '=') {
        fprintf(stderr, "%s: --set '%s': expected PATH=VALUE\n", argv[0], v);
        return -1;
    }
    o->sets[o->n_sets++] = v;
    return 0;
}

static int opt_tol(void *opts, int argc, char **argv, const char *v) {
    (void)argc;
    search_opts *o = opts;
    char *end;
    o->tol = strtod(v, &end);
    if (*end || !(o->tol > 0 && o->tol < 10)) {
        fprintf(stderr, "%s: --tolerance '%s': expected a number in (0, 10)\n", argv[0], v);
        return -1;
    }
    return 0;
}

#define SOPT(f) offsetof(search_opts, f)
static const cli_opt search_table[] = {
    CLI_OPT_FLAG("search", 'S', SOPT(search), 0),
    CLI_OPT_FLAG("fp8", 'F', SOPT(fp8), 0),
    CLI_OPT_INT("budget", 'n', SOPT(budget), 10, 1000000, 0),
    CLI_OPT_CALL("tolerance", 't', opt_tol, 0),
    CLI_OPT_STRING("out", 'o', SOPT(out), 0),
    CLI_OPT_STRING("backend", 'b', SOPT(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'O', SOPT(bopts)),
    CLI_OPT_CALL("set", 'Z', opt_set, 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

// ---------------------------------------------------------------------------------------
// One run

typedef struct tail_acc {
    int64_t from, n, skipped;
    double sum;
} tail_acc;

static int on_record(void *user, const ampx_step_record *r) {
    tail_acc *a = user;
    if (r->skipped) a->skipped++;
    if (r->step > a->from && !r->skipped && isfinite(r->loss)) a->sum += r->loss, a->n++;
    return 0;
}

static void outcome_free(search *s, outcome *c) {
    for (int i = 0; c->w && i < s->n_params; i++)
        free(c->w[i]);
    free(c->w);
    c->w = NULL;
}

/* Trains the model under policy (a JSON value) and scaler (NULL: the model's); seed_plus
 * moves the model's seed (the yardstick run). */
static void run_seed(search *s, const char *policy, const char *scaler, outcome *c, float ***w0,
                     int seed_plus) {
    const search_opts *o = s->o;
    const char *sets[64];
    char sset[512], seed[64];
    size_t plen = strlen(policy) + 8;
    char *pset  = malloc(plen);
    int n       = 0;
    memset(c, 0, sizeof *c);
    c->tail = c->eval = NAN;
    if (!pset) {
        snprintf(c->error, sizeof c->error, "out of memory");
        return;
    }
    for (int i = 0; i < o->n_sets; i++)
        sets[n++] = o->sets[i];
    snprintf(pset, plen, "policy=%s", policy);
    sets[n++] = pset;
    if (scaler) snprintf(sset, sizeof sset, "scaler=%s", scaler), sets[n++] = sset;
    if (seed_plus)
        snprintf(seed, sizeof seed, "train.seed=%llu", (unsigned long long)(s->seed + 1)),
            sets[n++] = seed;
    s->runs++;
    ampx_model *m   = NULL;
    ampx_trainer *t = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (ampx_model_load_with(o->model, NULL, sets, n, &m, c->error, sizeof c->error)) goto done;
    ampx_train_config *tc = ampx_model_train_config(m);
    tc->steps             = o->budget;
    tc->eval_every        = 0;
    if (ampx_trainer_create(m, s->be, &t, c->error, sizeof c->error)) goto done;
    int np = ampx_trainer_n_params(t);
    if (w0 && !*w0) { /* the initial weights (the same for every run) and the names */
        *w0            = calloc((size_t)np, sizeof **w0);
        s->param_names = calloc((size_t)np, sizeof *s->param_names);
        s->param_sizes = calloc((size_t)np, sizeof *s->param_sizes);
        for (int i = 0; *w0 && s->param_names && s->param_sizes && i < np; i++) {
            s->param_sizes[i] = ampx_trainer_param_size(t, i);
            s->param_names[i] = strdup(ampx_trainer_param_name(t, i));
            if (((*w0)[i] = malloc(s->param_sizes[i] * 4))) ampx_trainer_get(t, i, 0, (*w0)[i]);
        }
        s->n_params = np;
    }
    tail_acc acc = {o->budget - o->budget / 5, 0, 0, 0};
    ampx_eval_result ev;
    if (ampx_trainer_run(t, o->budget, on_record, &acc) || ampx_trainer_evaluate(t, &ev)) {
        snprintf(c->error, sizeof c->error, "%s", ampx_trainer_error(t));
        goto done;
    }
    c->ok      = 1;
    c->tail    = acc.n ? acc.sum / (double)acc.n : NAN;
    c->eval    = ev.loss;
    c->skipped = acc.skipped;
    c->w       = calloc((size_t)np, sizeof *c->w);
    for (int i = 0; c->w && i < np; i++)
        if ((c->w[i] = malloc(ampx_trainer_param_size(t, i) * 4)))
            ampx_trainer_get(t, i, 0, c->w[i]);
done:
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    s->seconds += c->seconds;
    ampx_trainer_free(t);
    ampx_model_free(m);
    free(pset);
}

static void run(search *s, const char *policy, const char *scaler, outcome *c, float ***w0) {
    run_seed(s, policy, scaler, c, w0, 0);
}

/* Whether c is within the tolerance of the reference: its loss over the last fifth and its
 * held-out loss at most (1 + T + v) times the reference's, v twice how far the f32 run of
 * the next seed is on that figure; why not in why. */
static int within(const search *s, const outcome *c, char *why, size_t cap) {
    const outcome *r = &s->ref;
    double tt = s->o->tol + s->var_tail, te = s->o->tol + s->var_eval;
    int64_t skips = s->o->budget / 20 > 2 ? s->o->budget / 20 : 2;
    if (!c->ok) return snprintf(why, cap, "failed: %s", c->error), 0;
    if (!(c->tail <= r->tail * (1 + tt)))
        return snprintf(why, cap,
                        "its loss over the last fifth, %.4g, is %.1f%% above f32's %.4g (allowed "
                        "%.1f%%)",
                        c->tail, 100 * (c->tail / r->tail - 1), r->tail, 100 * tt),
               0;
    if (!(c->eval <= r->eval * (1 + te)))
        return snprintf(why, cap,
                        "its held-out loss, %.4g, is %.1f%% above f32's %.4g (allowed %.1f%%)",
                        c->eval, 100 * (c->eval / r->eval - 1), r->eval, 100 * te),
               0;
    if (c->skipped > skips)
        return snprintf(why, cap, "it skipped %lld of %lld steps", (long long)c->skipped,
                        (long long)s->o->budget),
               0;
    snprintf(why, cap, "within");
    return 1;
}

static void print_run(const search *s, const char *what, const outcome *c) {
    char why[400];
    int ref = c == &s->ref || strstr(what, "yardstick");
    int ok  = ref || within(s, c, why, sizeof why);
    printf("  %-46.46s %10.4g %10.4g %7lld %7.1fs  %s\n", what, c->tail, c->eval,
           (long long)c->skipped, c->seconds,
           ref  ? ""
           : ok ? "within"
                : why);
}

// ---------------------------------------------------------------------------------------
// The search

/* {"preset": "mixed_bf16", "overrides": {P0: "f32", ...}} for products [0, k) of keep; a
 * policy that does not fit in cap is cut to the products that do (and said so). */
static void keep_policy(const search *s, const int *keep, int n_keep, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "{\"preset\": \"mixed_bf16\""), tail = 4;
    int i = 0;
    for (; i < n_keep; i++) {
        size_t want = strlen(s->products[keep[i]]) + 24;
        if (n + want + tail >= cap) {
            fprintf(stderr,
                    "ampx policy --search: %d products kept in f32 make too long a "
                    "policy; the first %d are written\n",
                    n_keep, i);
            break;
        }
        n += (size_t)snprintf(buf + n, cap - n, "%s\"%s\": \"f32\"",
                              i ? ", " : ", \"overrides\": {", s->products[keep[i]]);
    }
    snprintf(buf + n, cap - n, "%s}", i ? "}" : "");
}

/* The products that must stay f32 under mixed_bf16, one at a time: the shortest prefix of
 * the rest that, kept in f32 with those found, passes ends at one. At most 8. Writes the
 * chosen policy into best. */
static int find_f32_products(search *s, char *best, size_t cap, outcome *chosen) {
    int keep[MAX_PRODUCTS], n_keep = 0;
    char pol[8192], why[400], label[128], passed[8192] = ""; /* the last run within */
    outcome last = {0};
    for (int round = 0; round < 8; round++) {
        keep_policy(s, keep, n_keep, pol, sizeof pol);
        outcome c;
        if (!strcmp(pol, passed)) { /* the bisection's last passing run was this policy */
            snprintf(best, cap, "%s", pol);
            *chosen = last;
            return 0;
        }
        run(s, pol, NULL, &c, NULL);
        snprintf(label, sizeof label, "mixed_bf16, %d product%s f32", n_keep,
                 n_keep == 1 ? "" : "s");
        print_run(s, label, &c);
        if (within(s, &c, why, sizeof why)) {
            snprintf(best, cap, "%s", pol);
            outcome_free(s, &last);
            *chosen = c;
            return 0;
        }
        outcome_free(s, &c);
        int rest[MAX_PRODUCTS], n_rest = 0;
        for (int i = 0; i < s->n_products && i < MAX_PRODUCTS; i++) {
            int kept = 0;
            for (int k = 0; k < n_keep; k++)
                kept |= keep[k] == i;
            if (!kept) rest[n_rest++] = i;
        }
        if (!n_rest) break;
        int lo = 1, hi = n_rest; /* the whole rest kept in f32 is (close to) the reference */
        char fail_why[400];
        snprintf(fail_why, sizeof fail_why, "%s", why);
        while (lo < hi) {
            int mid = (lo + hi) / 2, trial[MAX_PRODUCTS];
            memcpy(trial, keep, sizeof(int) * (size_t)n_keep);
            memcpy(trial + n_keep, rest, sizeof(int) * (size_t)mid);
            keep_policy(s, trial, n_keep + mid, pol, sizeof pol);
            run(s, pol, NULL, &c, NULL);
            snprintf(label, sizeof label, "  + %s ... %s f32", s->products[rest[0]],
                     s->products[rest[mid - 1]]);
            print_run(s, label, &c);
            if (within(s, &c, why, sizeof why)) {
                hi = mid;
                outcome_free(s, &last);
                last = c, c.w = NULL;
                snprintf(passed, sizeof passed, "%s", pol);
            } else
                lo = mid + 1, snprintf(fail_why, sizeof fail_why, "%s", why);
            outcome_free(s, &c);
        }
        keep[n_keep++] = rest[lo - 1];
        printf("  -> %s stays f32: with it in bf16 (the products before it in f32) %s\n",
               s->products[rest[lo - 1]], fail_why);
    }
    outcome_free(s, &last);
    keep_policy(s, keep, n_keep, pol, sizeof pol);
    snprintf(best, cap, "%s", pol);
    return -1;
}

/* The drift of each product's weight from the reference, relative to the reference's own
 * move from the initial weights. */
static void print_drift(const search *s, const outcome *c) {
    printf("weight drift against the f32 run (||W - W_f32|| / ||W_f32 - W_0||):\n");
    for (int i = 0; i < s->n_params && c->w && s->ref.w && s->w0 && s->param_names; i++) {
        const char *name = s->param_names[i];
        if (!name || !c->w[i] || !s->ref.w[i] || !s->w0[i]) continue;
        size_t len = strlen(name);
        if (len < 8 || strcmp(name + len - 7, ".weight")) continue;
        double d2 = 0, m2 = 0;
        for (uint64_t k = 0; k < s->param_sizes[i]; k++) {
            double a = c->w[i][k], r = s->ref.w[i][k], z = s->w0[i][k];
            d2 += (a - r) * (a - r), m2 += (r - z) * (r - z);
        }
        printf("  %-40s %.3g\n", name, m2 > 0 ? sqrt(d2 / m2) : 0.0);
    }
}

// ---------------------------------------------------------------------------------------

static const struct {
    const char *what, *policy, *scaler;
} candidates[] = {
    {"every product, the output and elementwise in bf16",
     "{\"preset\": \"mixed_bf16\", \"output\": \"bf16\", \"compute_ops\": "
     "[\"activation\", \"add\", \"mul\", \"dropout\"]}",
     NULL},
    {"mixed_bf16", "\"mixed_bf16\"", NULL},
    {"mixed_f16 (dynamic loss scaling)", "\"mixed_f16\"", "\"dynamic\""},
};

/* The model as written: its default budget and its products. */
static int read_model(const char *prog, search_opts *o, search *s) {
    char err[1024];
    ampx_model *m = NULL;
    if (ampx_model_load_with(o->model, NULL, o->sets, o->n_sets, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    s->seed = ampx_model_train_config(m)->seed;
    if (!o->budget) {
        int64_t steps = ampx_model_train_config(m)->steps;
        o->budget     = steps < 400 ? steps : 400;
    }
    ampx_dtype dts[MAX_PRODUCTS];
    const char *names[MAX_PRODUCTS];
    s->n_products = ampx_model_products(m, names, dts, MAX_PRODUCTS);
    if (s->n_products > MAX_PRODUCTS) s->n_products = MAX_PRODUCTS;
    for (int i = 0; i < s->n_products; i++)
        s->products[i] = strdup(names[i]);
    ampx_model_free(m);
    return 0;
}

/* The chosen policy as a --policy file, or on standard output. */
static int write_policy(const char *prog, const char *out, const char *policy, const char *scaler) {
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "%s: %s: cannot write\n", prog, out);
        return -1;
    }
    fprintf(f, "{\"policy\": %s%s%s}\n", policy, scaler ? ", \"scaler\": " : "",
            scaler ? scaler : "");
    if (out && fclose(f)) {
        fprintf(stderr, "%s: %s: write error\n", prog, out);
        return -1;
    }
    return 0;
}

static void search_free(search *s) {
    outcome_free(s, &s->ref);
    for (int i = 0; i < s->n_params; i++) {
        if (s->w0) free(s->w0[i]);
        if (s->param_names) free(s->param_names[i]);
    }
    free(s->w0), free(s->param_names), free(s->param_sizes);
    for (int i = 0; i < s->n_products; i++)
        free((void *)s->products[i]);
    ampx_backend_close(s->be);
}

int cli_policy_search(int argc, char **argv) {
    search_opts o     = {.tol = 0.02};
    cli_parser parser = {"o:h", search_table, 0, NULL};
    int rc            = cli_parse_or_usage(&parser, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "%s: expected one MODEL.json\n", argv[0]);
        cli_try_help(argv[0]);
        return EXIT_USAGE;
    }
    o.model  = argv[optind];
    search s = {.o = &o};
    char err[1024], chosen[8192] = "";
    const char *scaler = NULL;
    if (read_model(argv[0], &o, &s)) return EXIT_FAILED;
    if (ampx_backend_open(o.backend ? o.backend : "cpu", o.bopts.v, o.bopts.n, &s.be, err,
                          sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        search_free(&s);
        return EXIT_FAILED;
    }
    printf("policy search: %s, %lld steps a run, tolerance %.3g%% of the f32 run's losses\n",
           o.model, (long long)o.budget, 100 * o.tol);
    printf("  %-46s %10s %10s %7s %8s\n", "run", "loss tail", "held-out", "skipped", "time");
    run(&s, "\"f32\"", "\"none\"", &s.ref, &s.w0);
    print_run(&s, "f32 (the reference)", &s.ref);
    rc = EXIT_FAILED;
    if (!s.ref.ok) {
        fprintf(stderr, "%s: the f32 run failed: %s\n", argv[0], s.ref.error);
        goto done;
    }
    outcome yard;
    run_seed(&s, "\"f32\"", "\"none\"", &yard, NULL, 1);
    print_run(&s, "f32, the next seed (the yardstick)", &yard);
    if (yard.ok) {
        s.var_tail = 2 * fabs(yard.tail / s.ref.tail - 1);
        s.var_eval = 2 * fabs(yard.eval / s.ref.eval - 1);
    }
    outcome_free(&s, &yard);
    printf("  allowed above f32: %.1f%% on the loss over the last fifth, %.1f%% held out "
           "(%.3g%% + twice how far the next seed's f32 run is)\n",
           100 * (o.tol + s.var_tail), 100 * (o.tol + s.var_eval), 100 * o.tol);
    outcome best = {0};
    char why[400];
    if (o.fp8) { /* the products of weights in fp8 first: cheaper than any bf16 policy */
        static const char fp8[] = "{\"preset\": \"mixed_bf16\", \"fp8\": {\"format\": \"hybrid\"}}";
        outcome c;
        run(&s, fp8, NULL, &c, NULL);
        print_run(&s, "fp8 products (hybrid) under mixed_bf16", &c);
        if (within(&s, &c, why, sizeof why))
            snprintf(chosen, sizeof chosen, "%s", fp8), best = c;
        else
            outcome_free(&s, &c);
    }
    for (size_t k = 0; k < sizeof candidates / sizeof candidates[0] && !*chosen; k++) {
        outcome c;
        run(&s, candidates[k].policy, candidates[k].scaler, &c, NULL);
        print_run(&s, candidates[k].what, &c);
        if (within(&s, &c, why, sizeof why)) {
            snprintf(chosen, sizeof chosen, "%s", candidates[k].policy);
            scaler = candidates[k].scaler, best = c;
        } else
            outcome_free(&s, &c);
    }
    int found = 1;
    if (!*chosen) {
        printf("no whole-model policy is within the tolerance: the products that must stay f32\n");
        if (find_f32_products(&s, chosen, sizeof chosen, &best)) {
            printf("still beyond the tolerance with those in f32: no policy is written\n");
            found = 0;
        }
    }
    if (best.w) print_drift(&s, &best);
    printf("%d runs, %.1f s: %.2f times the f32 run\n%s: {\"policy\": %s%s%s}\n", s.runs, s.seconds,
           s.seconds / s.ref.seconds, found ? "chosen" : "last tried", chosen,
           scaler ? ", \"scaler\": " : "", scaler ? scaler : "");
    outcome_free(&s, &best);
    if (!found) {
        fprintf(stderr, "%s: no policy within the tolerance of the f32 run\n", argv[0]);
        rc = EXIT_FAILED;
    } else
        rc = o.out && write_policy(argv[0], o.out, chosen, scaler) ? EXIT_FAILED : 0;
done:
    search_free(&s);
    return rc;
}
