/* diff.c — `ampx diff`: two backends (or one plugin with two sets of options) on the same
 * training step, op by op, then over a short run.
 *
 *   ampx diff MODEL.json --backend A [--backend-opt k=v]... --backend B [--backend-opt k=v]...
 *             [--steps N] [--policy P] [--set PATH=VALUE]... [--all]
 *
 * Both trainers start from the same weights (the seed draws them on the host) and the same
 * rows. The first step runs node by node, each node on B from A's tensors, and every output
 * is compared against what the two backends' dtypes allow (core/src/train/diff.c); the first
 * output beyond it is named. Then two fresh trainers run N steps (default 20) each, and the
 * losses and the weights are compared. Exit 0 when every output agrees, 1 when one does not
 * or on an error, 2 on a command-line error. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/diff.h"
#include "ampx/train.h"
#include "cli.h"

typedef struct diff_opts {
    const char *model, *policy;
    const char *backend[2];
    cli_backend_opts bopts[2];
    int n_backends, all;
    int64_t steps;
    cli_sets sets; /* --set PATH=VALUE, in order */
} diff_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: ampx diff MODEL.json --backend A [--backend-opt k=v]...\n"
            "                 --backend B [--backend-opt k=v]... [--steps N] [--policy P]\n"
            "                 [--set PATH=VALUE]... [--all]\n"
            "Runs the next training step on both backends op by op, each op on B from A's\n"
            "tensors, and compares every output against what its dtypes allow; then N steps\n"
            "(default 20) on each, comparing losses and weights. A --backend-opt applies to the\n"
            "--backend before it (cpu --backend-opt isa=avx2 against cpu). --all lists every\n"
            "output, not only those that differ. Exit 0: they agree; 1: an output differs\n"
            "beyond its tolerance (named), or an error.\n");
}

static int opt_backend(void *opts, int argc, char **argv, const char *v) {
    (void)argc;
    diff_opts *o = opts;
    if (o->n_backends == 2) {
        fprintf(stderr, "%s: --backend given more than twice\n", argv[0]);
        return -1;
    }
    o->backend[o->n_backends++] = v;
    return 0;
}

static int opt_backend_opt(void *opts, int argc, char **argv, const char *v) {
    (void)argc;
    diff_opts *o = opts;
    if (!o->n_backends) {
        fprintf(stderr, "%s: --backend-opt '%s' comes before any --backend\n", argv[0], v);
        return -1;
    }
    cli_backend_opts *b = &o->bopts[o->n_backends - 1];
    return cli_parse_backend_opt(v, b->v, &b->n);
}

#define DOPT(f) offsetof(diff_opts, f)
static const cli_opt diff_table[] = {
    CLI_OPT_CALL("backend", 'b', opt_backend, 0),
    CLI_OPT_CALL("backend-opt", 'O', opt_backend_opt, 0),
    CLI_OPT_INT("steps", 'n', DOPT(steps), 1, 1000000, 0),
    CLI_OPT_STRING("policy", 'p', DOPT(policy), 0),
    CLI_OPT_SET("set", 'Z', DOPT(sets)),
    CLI_OPT_FLAG("all", 'a', DOPT(all), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

/* "cpu (isa=avx2)" */
static void backend_label(const diff_opts *o, int k, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "%s", o->backend[k]);
    for (uint32_t i = 0; i < o->bopts[k].n && n < cap; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : " (", o->bopts[k].v[i]);
        if (n > cap) n = cap;
    }
    if (o->bopts[k].n && n < cap) snprintf(buf + n, cap - n, ")");
}

// ---------------------------------------------------------------------------------------
// The two trainers

typedef struct pair {
    ampx_backend *be[2];
    ampx_model *m;
    ampx_trainer *t[2];
} pair;

static void pair_free(pair *p) {
    for (int k = 0; k < 2; k++) {
        ampx_trainer_free(p->t[k]);
        p->t[k] = NULL;
    }
    ampx_model_free(p->m);
    p->m = NULL;
}

/* The model for the ops both backends have, and a trainer of it on each. */
static int pair_make(const char *prog, const diff_opts *o, pair *p) {
    char err[1024];
    uint64_t ops = ampx_backend_op_mask(p->be[0]) & ampx_backend_op_mask(p->be[1]);
    if (ampx_model_load_for(o->model, o->policy, o->sets.v, o->sets.n, ops, &p->m, err,
                            sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    ampx_model_train_config(p->m)->steps = o->steps;
    for (int k = 0; k < 2; k++)
        if (ampx_trainer_create(p->m, p->be[k], &p->t[k], err, sizeof err)) {
            fprintf(stderr, "%s: %s: %s\n", prog, o->backend[k], err);
            return -1;
        }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Op by op

typedef struct report {
    int all, shown, first_beyond;
    ampx_diff_entry first; /* the first beyond its tolerance */
    char first_value[128], first_node[128], first_op[32], first_phase[16];
} report;

static int on_entry(void *user, const ampx_diff_entry *e) {
    report *r = user;
    if (e->beyond && r->first_beyond < 0) {
        r->first_beyond = e->index;
        r->first        = *e;
        snprintf(r->first_value, sizeof r->first_value, "%s", e->value);
        snprintf(r->first_node, sizeof r->first_node, "%s", e->node);
        snprintf(r->first_op, sizeof r->first_op, "%s", e->op);
        snprintf(r->first_phase, sizeof r->first_phase, "%s", e->phase);
    }
    if (!r->all && !e->differ) return 0;
    if (!r->shown++)
        printf("%4s  %-28s %-14s %-8s %-5s %9s %9s %10s %9s %9s %9s\n", "#", "tensor", "op",
               "phase", "dtype", "elements", "differ", "max|a-b|", "ulps@max", "rel", "tol");
    printf("%4d  %-28.28s %-14.14s %-8s %-5s %9llu %9llu %10.3g %9.3g %9.2e %9.2e%s\n", e->index,
           e->value, e->op, e->phase, ampx_dtype_name(e->dtype), (unsigned long long)e->n,
           (unsigned long long)e->differ, e->max_abs, e->max_ulps, e->norm_rel, e->tol,
           e->beyond ? "  BEYOND" : "");
    return 0;
}

// ---------------------------------------------------------------------------------------
// N steps

typedef struct losses {
    double *v;
    int64_t n, cap;
} losses;

static int on_record(void *user, const ampx_step_record *r) {
    losses *l = user;
    if (l->n < l->cap) l->v[l->n++] = r->skipped ? NAN : r->loss;
    return 0;
}

/* How far apart the parameters are: normwise over all of them, and the tensor furthest
 * apart (normwise relative to its own size). */
static int weights_apart(pair *p, double *all, double *worst, const char **which) {
    double d2all = 0, a2all = 0;
    *worst = 0, *which = "";
    for (int i = 0; i < ampx_trainer_n_params(p->t[0]); i++) {
        uint64_t n = ampx_trainer_param_size(p->t[0], i);
        float *a = malloc(n * 4 + 4), *b = malloc(n * 4 + 4);
        int bad =
            !a || !b || ampx_trainer_get(p->t[0], i, 0, a) || ampx_trainer_get(p->t[1], i, 0, b);
        double d2 = 0, a2 = 0;
        for (uint64_t k = 0; k < n && !bad; k++)
            d2 += ((double)a[k] - b[k]) * ((double)a[k] - b[k]), a2 += (double)a[k] * a[k];
        free(a), free(b);
        if (bad) return -1;
        d2all += d2, a2all += a2;
        double rel = d2 == 0 ? 0 : sqrt(d2) / fmax(sqrt(a2), 1e-300);
        if (rel > *worst) *worst = rel, *which = ampx_trainer_param_name(p->t[0], i);
    }
    *all = d2all == 0 ? 0 : sqrt(d2all) / fmax(sqrt(a2all), 1e-300);
    return 0;
}

static int run_steps(const char *prog, const diff_opts *o, pair *p) {
    int64_t n = ampx_model_train_config(p->m)->steps;
    if (n < 1) { /* no steps compare nothing: never report that as agreement */
        fprintf(stderr, "%s: a run of %lld steps compares nothing\n", prog, (long long)n);
        return -1;
    }
    losses l[2];
    for (int k = 0; k < 2; k++) {
        l[k] = (losses){calloc((size_t)n + 1, sizeof(double)), 0, n};
        if (!l[k].v || ampx_trainer_run(p->t[k], n, on_record, &l[k])) {
            fprintf(stderr, "%s: %s: %s\n", prog, o->backend[k],
                    l[k].v ? ampx_trainer_error(p->t[k]) : "out of memory");
            free(l[0].v), free(k ? l[1].v : NULL);
            return -1;
        }
    }
    double worst_loss = 0;
    for (int64_t i = 0; i < l[0].n && i < l[1].n; i++) {
        if (isnan(l[0].v[i]) && isnan(l[1].v[i])) continue; /* a step both skipped */
        double d = fabs(l[0].v[i] - l[1].v[i]) / fmax(fabs(l[0].v[i]), 1e-30);
        if (d > worst_loss || isnan(d)) worst_loss = d;
    }
    double all, ww;
    const char *which;
    int rc = weights_apart(p, &all, &ww, &which);
    if (!rc)
        printf("after %lld steps: loss %.6g and %.6g (relative difference at most %.2e over the "
               "run); weights %.2e apart (normwise), the most %s (%.2e)\n",
               (long long)n, l[0].n ? l[0].v[l[0].n - 1] : NAN, l[1].n ? l[1].v[l[1].n - 1] : NAN,
               worst_loss, all, *which ? which : "none", ww);
    free(l[0].v), free(l[1].v);
    return rc;
}

int cli_diff(int argc, char **argv) {
    diff_opts o       = {.steps = 20}; /* as --help and docs/DIFF.md say */
    cli_parser parser = {"b:O:n:p:ah", diff_table, 0, NULL};
    int rc            = cli_parse_or_usage(&parser, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (optind != argc - 1 || o.n_backends != 2) {
        fprintf(stderr, "%s: %s\n", argv[0],
                optind != argc - 1 ? "expected one MODEL.json" : "expected two --backend");
        cli_try_help(argv[0]);
        return EXIT_USAGE;
    }
    o.model = argv[optind];
    pair p  = {{NULL, NULL}, NULL, {NULL, NULL}};
    char err[1024], label[2][256];
    for (int k = 0; k < 2; k++) {
        backend_label(&o, k, label[k], sizeof label[k]);
        if (ampx_backend_open(o.backend[k], o.bopts[k].v, o.bopts[k].n, &p.be[k], err,
                              sizeof err)) {
            fprintf(stderr, "%s: %s\n", argv[0], err);
            ampx_backend_close(p.be[0]);
            return EXIT_FAILED;
        }
    }
    report r   = {.all = o.all, .first_beyond = -1};
    int beyond = 0;
    rc         = EXIT_FAILED;
    if (pair_make(argv[0], &o, &p)) goto done;
    printf("ampx diff: %s on %s and %s\nthe first step, op by op, each from the same inputs:\n",
           ampx_model_name(p.m), label[0], label[1]);
    if (ampx_diff_step(p.t[0], p.t[1], on_entry, &r, &beyond, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto done;
    }
    if (!r.shown) printf("every output has the same bits on both\n");
    pair_free(&p);
    if (pair_make(argv[0], &o, &p) || run_steps(argv[0], &o, &p)) goto done;
    if (beyond)
        printf("DIFFER: %d output%s beyond %s tolerance; the first: #%d \"%s\" of node \"%s\" "
               "(%s, %s, %s): relative %.2e > %.2e, max |a-b| %.3g (%.3g ulps), %llu of %llu "
               "elements differ\n",
               beyond, beyond == 1 ? "" : "s", beyond == 1 ? "its" : "their", r.first_beyond,
               r.first_value, r.first_node, r.first_op, r.first_phase,
               ampx_dtype_name(r.first.dtype), r.first.norm_rel, r.first.tol, r.first.max_abs,
               r.first.max_ulps, (unsigned long long)r.first.differ, (unsigned long long)r.first.n);
    else
        printf("agree: every output within what its dtypes allow\n");
    rc = beyond ? EXIT_FAILED : 0;
done:
    pair_free(&p);
    for (int k = 0; k < 2; k++)
        ampx_backend_close(p.be[k]);
    return rc;
}
