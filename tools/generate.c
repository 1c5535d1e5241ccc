/* generate.c — `ampx generate`: samples text from a trained token model, one token at a
 * time, printing each as it comes.
 *
 *   ampx generate MODEL.json --checkpoint F [--prompt TEXT] [--tokens N] [--temperature T]
 *                 [--top-k K] [--seed S] [--backend B] [--backend-opt k=v]...
 *
 * The model reads a fixed window of T tokens; the prompt and what is sampled are kept in a
 * window cropped from the left once it is full, and the next token is drawn from the logits
 * at the last filled position (a causal model's positions after it do not change them).
 * Byte-level models (vocabulary 256) print bytes; larger vocabularies print token ids.
 * Temperature 0 is greedy and deterministic; otherwise sampling is keyed by --seed. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx generate MODEL.json --checkpoint FILE [options]\n"
               "  --prompt TEXT        text to continue (default: a newline)\n"
               "  --tokens N           tokens to sample (default 256)\n"
               "  --temperature T      0 for greedy; default 0.8\n"
               "  --top-k K            sample among the K most likely tokens (0: all; default 40)\n"
               "  --seed S             sampling seed (default 1)\n"
               "  --backend B          cpu (default), opencl, cuda or a plugin path\n"
               "  --backend-opt k=v    a backend option (repeatable)\n");
}

static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno    = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, "ampx generate: %s '%s': expected a number in [%g, %g]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The next token from one position's logits. */
static int32_t sample(const float *logits, int64_t v, double temperature, int64_t top_k,
                      uint64_t seed, uint64_t i, double *work) {
    int64_t best = 0;
    for (int64_t j = 1; j < v; j++)
        if (logits[j] > logits[best]) best = j;
    if (temperature <= 0) return (int32_t)best;
    /* keep the top_k largest: a threshold from a partial selection */
    double cut = -INFINITY;
    if (top_k > 0 && top_k < v) {
        for (int64_t j = 0; j < v; j++)
            work[j] = logits[j];
        for (int64_t k = 0; k < top_k; k++) {
            int64_t m = k;
            for (int64_t j = k + 1; j < v; j++)
                if (work[j] > work[m]) m = j;
            double tmp = work[k];
            work[k] = work[m], work[m] = tmp;
        }
        cut = work[top_k - 1];
    }
    double total = 0, mx = logits[best];
    for (int64_t j = 0; j < v; j++) {
        work[j] = logits[j] >= cut ? exp(((double)logits[j] - mx) / temperature) : 0;
        total += work[j];
    }
    uint32_t hi = ampx_hash32(seed, 2 * i), lo = ampx_hash32(seed, 2 * i + 1);
    double u   = ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) / 9007199254740992.0;
    double acc = 0, target = u * total;
    for (int64_t j = 0; j < v; j++) {
        acc += work[j];
        if (acc > target && work[j] > 0) return (int32_t)j;
    }
    return (int32_t)best;
}

int cli_generate(int argc, char **argv) {
    static struct option lopts[] = {{"checkpoint", required_argument, 0, 'c'},
                                    {"prompt", required_argument, 0, 'p'},
                                    {"tokens", required_argument, 0, 'n'},
                                    {"temperature", required_argument, 0, 't'},
                                    {"top-k", required_argument, 0, 'k'},
                                    {"seed", required_argument, 0, 's'},
                                    {"backend", required_argument, 0, 'b'},
                                    {"backend-opt", required_argument, 0, 'o'},
                                    {"help", no_argument, 0, 'h'},
                                    {0, 0, 0, 0}};
    const char *ckpt = NULL, *prompt = "\n", *backend = "cpu", *bopts[MAX_BACKEND_OPTS];
    uint32_t n_bopts = 0;
    double tokens = 256, temperature = 0.8, top_k = 40, seed = 1;
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, "h", lopts)) != -1) {
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n':
            if (parse_num("--tokens", optarg, 0, 1e7, &tokens) || tokens != floor(tokens))
                return EXIT_USAGE;
            break;
        case 't':
            if (parse_num("--temperature", optarg, 0, 100, &temperature)) return EXIT_USAGE;
            break;
        case 'k':
            if (parse_num("--top-k", optarg, 0, 1 << 24, &top_k) || top_k != floor(top_k))
                return EXIT_USAGE;
            break;
        case 's':
            if (parse_num("--seed", optarg, 0, 4294967295.0, &seed) || seed != floor(seed))
                return EXIT_USAGE;
            break;
        case 'b': backend = optarg; break;
        case 'o':
            if (cli_parse_backend_opt(optarg, bopts, &n_bopts)) return EXIT_USAGE;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !ckpt) {
        fprintf(stderr, "ampx generate: expected one MODEL.json and --checkpoint FILE\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    char err[1024];
    ampx_model *m    = NULL;
    ampx_backend *be = NULL;
    ampx_trainer *t  = NULL;
    float *logits    = NULL;
    int32_t *ids     = NULL;
    double *work     = NULL;
    int rc           = 1;
    if (ampx_model_load(argv[optind], NULL, &m, err, sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        return 1;
    }
    ampx_model_train_config(m)->batch = 1;
    if (ampx_backend_open(backend, bopts, n_bopts, &be, err, sizeof err) ||
        ampx_trainer_create_sampler(m, be, &t, err, sizeof err) ||
        ampx_trainer_load(t, ckpt, err, sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        goto out;
    }
    int64_t T = ampx_trainer_window(t), V = ampx_trainer_vocab(t);
    logits = malloc(sizeof *logits * (size_t)(T * V));
    ids    = calloc((size_t)T, sizeof *ids);
    work   = malloc(sizeof *work * (size_t)V);
    if (!logits || !ids || !work) {
        fprintf(stderr, "ampx generate: out of memory\n");
        goto out;
    }
    /* the prompt's bytes are its tokens (byte-level); the window keeps the last T */
    int64_t len = 0, plen = (int64_t)strlen(prompt);
    if (plen == 0) prompt = "\n", plen = 1;
    for (int64_t i = plen > T ? plen - T : 0; i < plen; i++)
        ids[len++] = (unsigned char)prompt[i];
    for (int64_t i = 0; i < len; i++)
        if (ids[i] >= V) ids[i] = 0;
    if (V == 256) fputs(prompt, stdout);
    for (int64_t k = 0; k < (int64_t)tokens; k++) {
        if (ampx_trainer_logits(t, ids, 1, logits)) {
            fprintf(stderr, "\nampx generate: %s\n", ampx_trainer_error(t));
            goto out;
        }
        int32_t next = sample(logits + (len - 1) * V, V, temperature, (int64_t)top_k,
                              (uint64_t)seed, (uint64_t)k, work);
        if (V == 256)
            putchar(next);
        else
            printf(" %d", next);
        fflush(stdout);
        if (len == T) {
            memmove(ids, ids + 1, sizeof *ids * (size_t)(T - 1));
            len--;
        }
        ids[len++] = next;
    }
    putchar('\n');
    rc = fflush(stdout) ? 1 : 0;
out:
    free(logits), free(ids), free(work);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}
