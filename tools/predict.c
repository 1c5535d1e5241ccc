/* predict.c — `ampx predict`: a trained feature model's output for every row of a CSV file.
 *
 *   ampx predict MODEL.json --checkpoint F --input X.csv [-o out.csv] [--backend B]
 *
 * Each row holds the model's F features (its f32 inputs' slices in declaration order), or F
 * and a class label as its last column, as the training CSV does: then the accuracy goes to
 * standard error too. A first line that is not numbers is a header. Out: for a classifier
 * "class,p0,p1,..." (the most likely class and every class's probability), for an mse model
 * "y0,y1,..." (the predictions), one line per row. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx predict MODEL.json --checkpoint FILE --input X.csv [-o out.csv]\n"
               "                    [--backend B] [--backend-opt k=v]...\n"
               "The model's output for every row of X.csv: class and probabilities, or the\n"
               "predictions of an mse model.\n");
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

int cli_predict(int argc, char **argv) {
    static struct option lopts[] = {{"checkpoint", required_argument, 0, 'c'},
                                    {"input", required_argument, 0, 'i'},
                                    {"output", required_argument, 0, 'o'},
                                    {"backend", required_argument, 0, 'b'},
                                    {"backend-opt", required_argument, 0, 'O'},
                                    {"help", no_argument, 0, 'h'},
                                    {0, 0, 0, 0}};
    const char *ckpt = NULL, *in = NULL, *outp = NULL, *backend = "cpu", *bopts[MAX_BACKEND_OPTS];
    uint32_t n_bopts = 0;
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, "o:h", lopts)) != -1) {
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'i': in = optarg; break;
        case 'o': outp = optarg; break;
        case 'b': backend = optarg; break;
        case 'O':
            if (cli_parse_backend_opt(optarg, bopts, &n_bopts)) return EXIT_USAGE;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !ckpt || !in) {
        fprintf(stderr, "%s: expected one MODEL.json, --checkpoint FILE and --input X.csv\n",
                argv[0]);
        return EXIT_USAGE;
    }
    char err[1024];
    int rc           = EXIT_FAILED;
    ampx_model *m    = NULL;
    ampx_backend *be = NULL;
    ampx_trainer *t  = NULL;
    FILE *fin = NULL, *fout = stdout;
    char *line = NULL, **fields = NULL;
    float *x = NULL, *y = NULL;
    int32_t *lb = NULL;
    size_t cap  = 0;
    if (ampx_model_load(argv[optind], NULL, &m, err, sizeof err) ||
        ampx_backend_open(backend, bopts, n_bopts, &be, err, sizeof err) ||
        ampx_trainer_create_predictor(m, be, &t, err, sizeof err) ||
        ampx_trainer_load(t, ckpt, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto out;
    }
    struct stat st;
    if (!(fin = fopen(in, "r")) || fstat(fileno(fin), &st) || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], in, fin ? "not a regular file" : strerror(errno));
        goto out;
    }
    if (outp && !(fout = fopen(outp, "w"))) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], outp, strerror(errno));
        fout = stdout;
        goto out;
    }
    int64_t F = ampx_trainer_features(t), C = ampx_trainer_outputs(t);
    int64_t B = ampx_model_train_config(m)->batch;
    fields    = malloc(sizeof *fields * (size_t)(F + 2));
    x         = malloc(sizeof *x * (size_t)(B * F + 1));
    y         = malloc(sizeof *y * (size_t)(B * C + 1));
    lb        = malloc(sizeof *lb * (size_t)(B + 1));
    if (!fields || !x || !y || !lb) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        goto out;
    }
    int64_t lineno = 0, rows = 0, total = 0, correct = 0, labelled = -1;
    ssize_t len;
    int header_done = 0, is_class = -1;
    for (;;) {
        len = getline(&line, &cap, fin);
        if (len >= 0) {
            lineno++;
            int nf = split(line, fields, (int)F + 2);
            if (nf == 1 && !*fields[0]) continue; /* a blank line */
            float v;
            int numeric = 1;
            for (int k = 0; k < nf && numeric; k++)
                numeric = !parse_field(fields[k], &v);
            if (!numeric && !header_done && lineno == 1) {
                header_done = 1;
                continue;
            }
            header_done = 1;
            if (nf != F && nf != F + 1) {
                fprintf(stderr,
                        "%s: %s:%lld: %d columns; the model reads %lld features (and "
                        "optionally a label)\n",
                        argv[0], in, (long long)lineno, nf, (long long)F);
                goto out;
            }
            if (labelled < 0) labelled = nf == F + 1;
            if (labelled != (nf == F + 1)) {
                fprintf(stderr, "%s: %s:%lld: %d columns, the rows before it %lld\n", argv[0], in,
                        (long long)lineno, nf, (long long)(labelled ? F + 1 : F));
                goto out;
            }
            for (int k = 0; k < nf; k++)
                if (parse_field(fields[k], &v)) {
                    fprintf(stderr, "%s: %s:%lld: column %d: \"%.40s\" is not a number\n", argv[0],
                            in, (long long)lineno, k + 1, fields[k]);
                    goto out;
                } else if (k < F)
                    x[rows * F + k] = v;
                else if (v != floorf(v) || v < 0 || v >= (float)C) {
                    fprintf(stderr, "%s: %s:%lld: label %g is not a class in [0, %lld)\n", argv[0],
                            in, (long long)lineno, (double)v, (long long)C);
                    goto out;
                } else
                    lb[rows] = (int32_t)v;
            rows++;
        }
        if (rows == B || (len < 0 && rows > 0)) {
            if (ampx_trainer_predict(t, x, rows, y)) {
                fprintf(stderr, "%s: %s\n", argv[0], ampx_trainer_error(t));
                goto out;
            }
            if (is_class < 0) {
                is_class = ampx_trainer_classifier(t);
                if (is_class) fprintf(fout, "class");
                for (int64_t j = 0; j < C; j++)
                    fprintf(fout, "%s%s%lld", j || is_class ? "," : "", is_class ? "p" : "y",
                            (long long)j);
                fprintf(fout, "\n");
            }
            for (int64_t r = 0; r < rows; r++) {
                const float *o = y + r * C;
                int64_t best   = 0;
                for (int64_t j = 1; j < C; j++)
                    if (o[j] > o[best]) best = j;
                if (is_class) fprintf(fout, "%lld", (long long)best);
                for (int64_t j = 0; j < C; j++)
                    fprintf(fout, "%s%.6g", j || is_class ? "," : "", (double)o[j]);
                fprintf(fout, "\n");
                if (labelled == 1) correct += best == lb[r];
            }
            total += rows;
            rows = 0;
        }
        if (len < 0) break;
    }
    if (ferror(fin)) {
        fprintf(stderr, "%s: %s: read error\n", argv[0], in);
        goto out;
    }
    if (total == 0) {
        fprintf(stderr, "%s: %s: no rows\n", argv[0], in);
        goto out;
    }
    if (labelled == 1 && is_class == 1)
        fprintf(stderr, "accuracy %.2f%% on %lld labelled rows\n",
                100.0 * (double)correct / (double)total, (long long)total);
    rc = 0;
out:
    if (fout != stdout && fclose(fout) != 0 && rc == 0) {
        fprintf(stderr, "%s: %s: write error: %s\n", argv[0], outp, strerror(errno));
        rc = EXIT_FAILED;
    }
    if (fin) fclose(fin);
    free(line), free(fields), free(x), free(y), free(lb);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}
