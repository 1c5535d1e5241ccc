/* predict.c — `ampx predict`: a trained feature model's output for every row of a CSV file.
 *
 *   ampx predict MODEL.json --checkpoint F --input X.csv [-o out.csv] [--backend B]
 *                [--set PATH=VALUE]...
 *
 * Each row holds the model's F features (its f32 inputs' slices in declaration order), or F
 * and a class label as its last column, as the training CSV does: then the accuracy goes to
 * standard error too. A first line that is not numbers is a header. Out: for a classifier
 * "class,p0,p1,..." (the most likely class and every class's probability), for an mse model
 * "y0,y1,..." (the predictions), one line per row. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx predict MODEL.json --checkpoint FILE --input X.csv [-o out.csv]\n"
               "                    [--backend B] [--backend-opt k=v]... [--set PATH=VALUE]...\n"
               "The model's output for every row of X.csv: class and probabilities, or the\n"
               "predictions of an mse model. --set overrides a key of the model file, as for\n"
               "ampx train (--set train.batch=256).\n");
}

/* One CSV field as a finite decimal f32: no hex, no inf or nan, nothing after it. */
static int parse_field(const char *s, float *out) {
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || strpbrk(s, "xXpPiInN")) return -1;
    char *end;
    errno   = 0;
    float v = strtof(s, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end == s || *end || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Splits line (its end of line removed) into at most cap fields; their count. */
static int split(char *line, char **fields, int cap) {
    int n                       = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = line; n < cap;) {
        fields[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma) break;
        *comma = 0;
        p      = comma + 1;
    }
    return n;
}

// ---------------------------------------------------------------------------------------
// The rows of the input, a batch at a time

typedef struct predictor {
    const char *prog, *in, *outp;
    ampx_model *m;
    ampx_backend *be;
    ampx_trainer *t;
    FILE *fin, *fout;
    ampx_output *out; /* -o, written whole or not at all */
    char *line, **fields;
    size_t cap;
    float *x, *y;    /* a batch's features [B, F] and outputs [B, C] */
    int32_t *lb;     /* its labels, when the rows have them */
    float *tg;       /* a regression's targets [B, C], when the rows have them */
    int64_t F, C, B; /* features, outputs, rows per batch */
    int64_t L;       /* the label columns of a labelled row: 1, or C targets of a regression */
    int64_t lineno, rows, total, correct;
    double se, ae;    /* a regression's summed squared and absolute errors */
    int64_t labelled; /* -1 until the first row says whether rows carry a label */
    int header_done, is_class;
} predictor;

/* The model, the backend, the trained weights, the files and the batch buffers; 0, or -1
 * after one line. */
static int predict_open(predictor *pr, const char *model, const char *ckpt, const char *backend,
                        const cli_backend_opts *bopts, const cli_sets *sets) {
    char err[1024];
    /* the backend first: a layer it has no fused op for is built as its composite */
    int bad = ampx_backend_open(backend, bopts->v, bopts->n, &pr->be, err, sizeof err) ||
              ampx_model_load_for(model, NULL, sets->v, sets->n, ampx_backend_op_mask(pr->be),
                                  &pr->m, err, sizeof err);
    if (!bad) ampx_model_train_config(pr->m)->skip_init = 1; /* the checkpoint overwrites all */
    if (bad || ampx_trainer_create_predictor(pr->m, pr->be, &pr->t, err, sizeof err) ||
        ampx_trainer_load(pr->t, ckpt, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", pr->prog, err);
        return -1;
    }
    /* the input under the input rules (a FIFO or a device is refused without blocking); the
     * output to a temporary file, renamed over -o only once every row is written */
    if (!(pr->fin = ampx_input_open(pr->in, 0, NULL, err, sizeof err)) ||
        (pr->outp && ampx_output_open(pr->outp, &pr->out, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", pr->prog, err);
        return -1;
    }
    if (pr->out) pr->fout = ampx_output_stream(pr->out);
    int64_t F = pr->F = ampx_trainer_features(pr->t), C = pr->C = ampx_trainer_outputs(pr->t);
    int64_t B = pr->B = ampx_model_train_config(pr->m)->batch;
    pr->L             = ampx_trainer_targets(pr->t) ? C : 1;
    pr->fields        = malloc(sizeof *pr->fields * (size_t)(F + pr->L + 1));
    pr->tg            = malloc(sizeof *pr->tg * (size_t)(B * C + 1));
    pr->x             = malloc(sizeof *pr->x * (size_t)(B * F + 1));
    pr->y             = malloc(sizeof *pr->y * (size_t)(B * C + 1));
    pr->lb            = malloc(sizeof *pr->lb * (size_t)(B + 1));
    if (!pr->fields || !pr->x || !pr->y || !pr->lb || !pr->tg) {
        fprintf(stderr, "%s: out of memory\n", pr->prog);
        return -1;
    }
    return 0;
}

/* The nf fields of a row into the batch: features, then the label; 0, or -1 after one line. */
static int store_fields(predictor *pr, int nf) {
    for (int k = 0; k < nf; k++) {
        float v;
        if (parse_field(pr->fields[k], &v)) {
            fprintf(stderr, "%s: %s:%lld: column %d: \"%.40s\" is not a number\n", pr->prog, pr->in,
                    (long long)pr->lineno, k + 1, pr->fields[k]);
            return -1;
        } else if (k < pr->F)
            pr->x[pr->rows * pr->F + k] = v;
        else if (pr->L > 1 || ampx_trainer_targets(pr->t))
            pr->tg[pr->rows * pr->C + (k - pr->F)] = v;
        else if (v != floorf(v) || v < 0 || v >= (float)pr->C) {
            fprintf(stderr, "%s: %s:%lld: label %g is not a class in [0, %lld)\n", pr->prog, pr->in,
                    (long long)pr->lineno, (double)v, (long long)pr->C);
            return -1;
        } else
            pr->lb[pr->rows] = (int32_t)v;
    }
    return 0;
}

/* One line of the input: 0 when it added a row, 1 for a blank line or the header, -1 after
 * one line. */
static int read_row(predictor *pr) {
    int64_t F = pr->F;
    pr->lineno++;
    int64_t L = pr->L;
    int nf    = split(pr->line, pr->fields, (int)(F + L + 1));
    if (nf == 1 && !*pr->fields[0]) return 1; /* a blank line */
    float v;
    int numeric = 1;
    for (int k = 0; k < nf && numeric; k++)
        numeric = !parse_field(pr->fields[k], &v);
    if (!numeric && !pr->header_done && pr->lineno == 1) {
        pr->header_done = 1;
        return 1;
    }
    pr->header_done = 1;
    if (nf != F && nf != F + L) {
        fprintf(stderr,
                "%s: %s:%lld: %d columns; the model reads %lld features (and optionally %s)\n",
                pr->prog, pr->in, (long long)pr->lineno, nf, (long long)F,
                ampx_trainer_targets(pr->t) ? "its targets" : "a label");
        return -1;
    }
    if (pr->labelled < 0) pr->labelled = nf == F + L;
    if (pr->labelled != (nf == F + L)) {
        fprintf(stderr, "%s: %s:%lld: %d columns, the rows before it %lld\n", pr->prog, pr->in,
                (long long)pr->lineno, nf, (long long)(pr->labelled ? F + L : F));
        return -1;
    }
    if (store_fields(pr, nf)) return -1;
    pr->rows++;
    return 0;
}

/* The model's outputs for the rows of the batch, one line each (the header line before the
 * first); 0, or -1 after one line. */
static int write_rows(predictor *pr) {
    FILE *fout = pr->fout;
    int64_t C  = pr->C;
    if (ampx_trainer_predict(pr->t, pr->x, pr->rows, pr->y)) {
        fprintf(stderr, "%s: %s\n", pr->prog, ampx_trainer_error(pr->t));
        return -1;
    }
    if (pr->is_class < 0) {
        pr->is_class = ampx_trainer_classifier(pr->t);
        if (pr->is_class) fprintf(fout, "class");
        for (int64_t j = 0; j < C; j++)
            fprintf(fout, "%s%s%lld", j || pr->is_class ? "," : "", pr->is_class ? "p" : "y",
                    (long long)j);
        fprintf(fout, "\n");
    }
    for (int64_t r = 0; r < pr->rows; r++) {
        const float *o = pr->y + r * C;
        int64_t best   = 0;
        for (int64_t j = 1; j < C; j++)
            if (o[j] > o[best]) best = j;
        if (pr->is_class) fprintf(fout, "%lld", (long long)best);
        for (int64_t j = 0; j < C; j++)
            fprintf(fout, "%s%.6g", j || pr->is_class ? "," : "", (double)o[j]);
        fprintf(fout, "\n");
        if (pr->labelled == 1) pr->correct += best == pr->lb[r];
        for (int64_t j = 0; pr->labelled == 1 && ampx_trainer_targets(pr->t) && j < C; j++) {
            double e = (double)o[j] - (double)pr->tg[r * C + j];
            pr->se += e * e, pr->ae += fabs(e);
        }
    }
    pr->total += pr->rows;
    pr->rows = 0;
    return 0;
}

/* Every line of the input, a batch at a time; 0, or -1 after one line. */
static int predict_all(predictor *pr) {
    for (;;) {
        ssize_t len = getline(&pr->line, &pr->cap, pr->fin);
        if (len >= 0) {
            int rc = read_row(pr);
            if (rc < 0) return -1;
            if (rc > 0) continue;
        }
        if ((pr->rows == pr->B || (len < 0 && pr->rows > 0)) && write_rows(pr)) return -1;
        if (len < 0) break;
    }
    if (ferror(pr->fin)) {
        fprintf(stderr, "%s: %s: read error\n", pr->prog, pr->in);
        return -1;
    }
    if (pr->total == 0) {
        fprintf(stderr, "%s: %s: no rows\n", pr->prog, pr->in);
        return -1;
    }
    if (pr->labelled == 1 && pr->is_class == 1)
        fprintf(stderr, "accuracy %.2f%% on %lld labelled rows\n",
                100.0 * (double)pr->correct / (double)pr->total, (long long)pr->total);
    if (pr->labelled == 1 && ampx_trainer_targets(pr->t)) {
        double n = (double)pr->total * (double)pr->C;
        fprintf(stderr, "MSE %.6g, MAE %.6g on %lld rows with targets\n", pr->se / n, pr->ae / n,
                (long long)pr->total);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------

typedef struct predict_opts {
    const char *checkpoint, *input, *output, *backend;
    cli_backend_opts bopts;
    cli_sets sets; /* --set PATH=VALUE, in order */
} predict_opts;

#define OPT(field) offsetof(predict_opts, field)
static const cli_opt predict_table[] = {
    CLI_OPT_STRING("checkpoint", 'c', OPT(checkpoint), 0),
    CLI_OPT_STRING("input", 'i', OPT(input), 0),
    CLI_OPT_STRING("output", 'o', OPT(output), 0),
    CLI_OPT_STRING("backend", 'b', OPT(backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'O', OPT(bopts)),
    CLI_OPT_SET("set", 'Z', OPT(sets)),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

int cli_predict(int argc, char **argv) {
    predict_opts o = {.backend = "cpu"};
    cli_parser p   = {"o:h", predict_table, 0, NULL};
    int rc         = cli_parse_or_usage(&p, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (optind != argc - 1 || !o.checkpoint || !o.input) {
        fprintf(stderr, "%s: expected one MODEL.json, --checkpoint FILE and --input X.csv\n",
                argv[0]);
        return EXIT_USAGE;
    }
    ampx_file_role out   = {o.output, "-o"};
    ampx_file_role in[3] = {
        {o.input, "--input"}, {o.checkpoint, "--checkpoint"}, {argv[optind], "the model file"}};
    char err[1024];
    if (ampx_check_outputs(&out, 1, in, 3, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return EXIT_FAILED;
    }
    predictor pr = {.prog = argv[0], .in = o.input, .outp = o.output, .fout = stdout};
    pr.labelled  = -1;
    pr.is_class  = -1;
    rc           = EXIT_FAILED;
    if (!predict_open(&pr, argv[optind], o.checkpoint, o.backend, &o.bopts, &o.sets) &&
        !predict_all(&pr))
        rc = 0;
    if (rc == 0 && pr.out && ampx_output_commit(pr.out, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        rc = EXIT_FAILED;
    } else if (rc != 0) {
        ampx_output_discard(pr.out);
    }
    if (pr.fin) fclose(pr.fin);
    free(pr.line), free(pr.fields), free(pr.x), free(pr.y), free(pr.lb), free(pr.tg);
    ampx_trainer_free(pr.t);
    ampx_backend_close(pr.be);
    ampx_model_free(pr.m);
    return rc;
}
