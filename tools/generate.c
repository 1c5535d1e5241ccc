/* generate.c — `ampx generate`: samples text from a trained token model, one token at a
 * time, printing each as it comes.
 *
 *   ampx generate MODEL.json --checkpoint F [--prompt TEXT] [--tokens N] [--temperature T]
 *                 [--top-k K] [--seed S] [--samples N] [--shift N] [--no-cache]
 *                 [--tokenizer FILE] [--eot ID] [--backend B] [--backend-opt k=v]...
 *
 * The model reads a fixed window of T tokens; the prompt and what is sampled are kept in a
 * window, and the next token is drawn from the logits at the last filled position (a causal
 * model's positions after it do not change them). Once the window is full, its oldest
 * --shift tokens (default T/2) are dropped. Each token is one position's forward through the
 * KV cache (ampx_trainer_logits_last: the earlier positions' rows stay on the device); a
 * shifted window is computed whole once (learned positions move every row), and --no-cache
 * computes the whole window for every token: the same logits, the same text.
 * Byte-level models (vocabulary 256) print bytes; larger vocabularies print token ids, or
 * with --tokenizer (ampx's JSON file or llm.c's tokenizer file) each token's bytes as it
 * arrives: the prompt is then encoded with it (the JSON file; llm.c's decodes only), without
 * --prompt the window starts from the end-of-text token, as llm.c does, and a sampled
 * end-of-text token ends the sample (--eot ID names that token without a tokenizer, for raw
 * GPT-2 ids 50256, or another one with it). --samples N draws N samples, each from the prompt, the
 * second and later keyed apart, separated by a line "---". The speed (tokens per second) goes
 * to stderr. Temperature 0 is greedy and deterministic; otherwise sampling is keyed by --seed. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
               "  --samples N          samples to draw, each from the prompt (default 1)\n"
               "  --shift N            tokens dropped from a full window (default: half of it)\n"
               "  --no-cache           compute the whole window for every token (no KV cache;\n"
               "                       the same text, slower)\n"
               "  --quiet              no speed line on stderr\n"
               "  --tokenizer FILE     decode tokens (and encode --prompt) with ampx's JSON\n"
               "                       tokenizer or llm.c's tokenizer file (decodes only); a\n"
               "                       sampled end-of-text token ends the sample\n"
               "  --eot ID             the token id that ends a sample (default: the\n"
               "                       tokenizer's end-of-text; none without one)\n"
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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

// ---------------------------------------------------------------------------------------
// Options

typedef struct gen_opts {
    const char *checkpoint, *prompt, *backend, *tokenizer;
    cli_backend_opts bopts;
    double tokens, temperature, top_k, seed, samples, shift, eot; /* eot -1: the tokenizer's */
    int no_cache, quiet;
} gen_opts;

/* A number in [lo, hi], a whole one when whole is set; one line when it is not */
static int number(const char *flag, const char *s, double lo, double hi, int whole, double *out) {
    if (parse_num(flag, s, lo, hi, out)) return -1;
    if (whole && *out != floor(*out)) {
        fprintf(stderr, "ampx generate: %s '%s': expected a whole number\n", flag, s);
        return -1;
    }
    return 0;
}

static int opt_tokens(void *opts, int argc, char **argv, const char *v) {
    return number("--tokens", v, 0, 1e7, 1, &((gen_opts *)opts)->tokens);
}

static int opt_temperature(void *opts, int argc, char **argv, const char *v) {
    return number("--temperature", v, 0, 100, 0, &((gen_opts *)opts)->temperature);
}

static int opt_top_k(void *opts, int argc, char **argv, const char *v) {
    return number("--top-k", v, 0, 1 << 24, 1, &((gen_opts *)opts)->top_k);
}

static int opt_seed(void *opts, int argc, char **argv, const char *v) {
    return number("--seed", v, 0, 4294967295.0, 1, &((gen_opts *)opts)->seed);
}

static int opt_samples(void *opts, int argc, char **argv, const char *v) {
    return number("--samples", v, 1, 1e6, 1, &((gen_opts *)opts)->samples);
}

/* the window's size bounds it: checked once the model is read */
static int opt_shift(void *opts, int argc, char **argv, const char *v) {
    return number("--shift", v, 1, 1e9, 1, &((gen_opts *)opts)->shift);
}

/* the vocabulary bounds it: checked once the model is read */
static int opt_eot(void *opts, int argc, char **argv, const char *v) {
    return number("--eot", v, 0, 1 << 24, 1, &((gen_opts *)opts)->eot);
}

#define GEN(field) offsetof(gen_opts, field)
static const cli_opt gen_table[] = {
    CLI_OPT_STRING("checkpoint", 'c', GEN(checkpoint), 0),
    CLI_OPT_STRING("prompt", 'p', GEN(prompt), 0),
    CLI_OPT_CALL("tokens", 'n', opt_tokens, 0),
    CLI_OPT_CALL("temperature", 't', opt_temperature, 0),
    CLI_OPT_CALL("top-k", 'k', opt_top_k, 0),
    CLI_OPT_CALL("seed", 's', opt_seed, 0),
    CLI_OPT_CALL("samples", 'S', opt_samples, 0),
    CLI_OPT_CALL("shift", 'w', opt_shift, 0),
    CLI_OPT_FLAG("no-cache", 'N', GEN(no_cache), 0),
    CLI_OPT_FLAG("quiet", 'q', GEN(quiet), 0),
    CLI_OPT_STRING("backend", 'b', GEN(backend), 0),
    CLI_OPT_STRING("tokenizer", 'T', GEN(tokenizer), 0),
    CLI_OPT_CALL("eot", 'e', opt_eot, 0),
    CLI_OPT_BACKEND("backend-opt", 'o', GEN(bopts)),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

// ---------------------------------------------------------------------------------------
// Sampling

static const char default_prompt[] = "\n";

/* The prompt's tokens with a tokenizer: its encoding, or the end-of-text token alone when no
 * prompt was given; the window keeps the last T. The count, or -1 after one line. */
static int64_t prompt_tokens(ampx_tokenizer *tok, const char *prompt, int64_t T, int32_t *ids) {
    ampx_token_buf buf = {0};
    char err[512];
    if (prompt == default_prompt) {
        ids[0] = (int32_t)ampx_tokenizer_eot(tok);
        return 1;
    }
    if (ampx_tokenizer_encode(tok, (const unsigned char *)prompt, strlen(prompt), &buf, err,
                              sizeof err)) {
        fprintf(stderr, "ampx generate: --prompt: %s\n", err);
        free(buf.ids);
        return -1;
    }
    int64_t n = (int64_t)buf.n, len = 0;
    for (int64_t i = n > T ? n - T : 0; i < n; i++)
        ids[len++] = (int32_t)buf.ids[i];
    free(buf.ids);
    return len;
}

/* The prompt's tokens into ids (T of them), its text printed when it is text; the count, or
 * -1 after one line. */
static int64_t prompt_window(const gen_opts *o, ampx_tokenizer *tok, int64_t T, int64_t V,
                             int32_t *ids) {
    const char *prompt = o->prompt;
    /* the prompt's bytes are its tokens (byte-level); the window keeps the last T */
    int64_t len = 0, plen = (int64_t)strlen(prompt);
    if (plen == 0) prompt = "\n", plen = 1;
    if (tok && (len = prompt_tokens(tok, o->prompt, T, ids)) < 0) return -1;
    for (int64_t i = plen > T ? plen - T : 0; !tok && i < plen; i++)
        ids[len++] = (unsigned char)prompt[i];
    for (int64_t i = 0; i < len; i++)
        if (ids[i] >= V) ids[i] = 0;
    if (V == 256 || (tok && o->prompt != default_prompt)) fputs(prompt, stdout);
    return len;
}

/* Prints token next as it arrives. */
static void put_token(ampx_tokenizer *tok, int64_t V, int32_t next) {
    size_t nb;
    const unsigned char *b = tok ? ampx_tokenizer_token(tok, (uint32_t)next, &nb) : NULL;
    if (tok)
        fwrite(b, 1, b ? nb : 0, stdout); /* ids past the tokenizer's (padding): nothing */
    else if (V == 256)
        putchar(next);
    else
        printf(" %d", next);
    fflush(stdout);
}

/* One sample: the prompt into the window, then up to o->tokens tokens sampled (keyed by
 * seed) and printed one by one; the tokens sampled, or -1 after one line. ids holds T
 * tokens, logits T x V (V with the cache), work V. */
static int64_t generate(ampx_trainer *t, const gen_opts *o, ampx_tokenizer *tok, uint64_t seed,
                        int32_t *ids, float *logits, double *work) {
    int64_t T = ampx_trainer_window(t), V = ampx_trainer_vocab(t);
    int64_t shift = (int64_t)o->shift, len = prompt_window(o, tok, T, V, ids), k = 0;
    int64_t eot = o->eot >= 0 ? (int64_t)o->eot : tok ? (int64_t)ampx_tokenizer_eot(tok) : -1;
    if (len < 0) return -1;
    for (; k < (int64_t)o->tokens; k++) {
        const float *row = logits + (o->no_cache ? (len - 1) * V : 0);
        if (o->no_cache ? ampx_trainer_logits(t, ids, 1, logits)
                        : ampx_trainer_logits_last(t, ids, len, logits)) {
            fprintf(stderr, "\nampx generate: %s\n", ampx_trainer_error(t));
            return -1;
        }
        int32_t next = sample(row, V, o->temperature, (int64_t)o->top_k, seed, (uint64_t)k, work);
        if (next == eot) break; /* the end of a text: not printed */
        put_token(tok, V, next);
        if (len == T) { /* full: the oldest shift tokens go */
            memmove(ids, ids + shift, sizeof *ids * (size_t)(T - shift));
            len -= shift;
        }
        ids[len++] = next;
    }
    putchar('\n');
    return k;
}

/* The samples, then their speed on stderr; the exit status. */
static int generate_all(ampx_trainer *t, const gen_opts *o, ampx_tokenizer *tok, int32_t *ids,
                        float *logits, double *work) {
    const char *why = "";
    int cached      = !o->no_cache && ampx_trainer_cache(t, &why);
    if (!o->no_cache && !cached && !o->quiet)
        fprintf(stderr,
                "ampx generate: no KV cache for this model (%s): every token computes "
                "the whole window\n",
                why);
    double t0 = now_s(), n = 0;
    for (int64_t s = 0; s < (int64_t)o->samples; s++) {
        if (s > 0) fputs("---\n", stdout);
        /* the first sample keyed by --seed itself, the others apart from it */
        uint64_t seed = s == 0 ? (uint64_t)o->seed : ampx_hash32((uint32_t)o->seed, (uint64_t)s);
        int64_t k     = generate(t, o, tok, seed, ids, logits, work);
        if (k < 0) return 1;
        n += (double)k;
    }
    double dt = now_s() - t0;
    if (fflush(stdout)) return 1; /* the text before the speed line, on a terminal too */
    if (!o->quiet)
        fprintf(stderr, "ampx generate: %.0f tokens in %.3f s: %.1f tokens/s (%s)\n", n, dt,
                dt > 0 ? n / dt : 0.0, cached ? "KV cache" : "whole window per token");
    return 0;
}

int cli_generate(int argc, char **argv) {
    gen_opts o   = {.prompt      = default_prompt,
                    .backend     = "cpu",
                    .tokens      = 256,
                    .temperature = 0.8,
                    .top_k       = 40,
                    .seed        = 1,
                    .samples     = 1,
                    .eot         = -1};
    cli_parser p = {"h", gen_table, 0, NULL};
    int rc       = cli_parse_or_usage(&p, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (optind != argc - 1 || !o.checkpoint) {
        fprintf(stderr, "ampx generate: expected one MODEL.json and --checkpoint FILE\n");
        cli_try_help("ampx generate");
        return EXIT_USAGE;
    }
    char err[1024];
    ampx_model *m    = NULL;
    ampx_backend *be = NULL;
    ampx_trainer *t  = NULL;
    float *logits    = NULL;
    int32_t *ids     = NULL;
    double *work     = NULL;
    rc               = 1;

    ampx_tokenizer *tok = NULL;
    if (o.tokenizer && ampx_tokenizer_load(o.tokenizer, &tok, err, sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        return 1;
    }
    /* the backend first: a layer it has no fused op for is built as its composite */
    if (ampx_backend_open(o.backend, o.bopts.v, o.bopts.n, &be, err, sizeof err) ||
        ampx_model_load_for(argv[optind], NULL, NULL, 0, ampx_backend_op_mask(be), &m, err,
                            sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        goto out;
    }
    ampx_model_train_config(m)->batch     = 1;
    ampx_model_train_config(m)->skip_init = 1; /* the checkpoint overwrites every weight */
    if (ampx_trainer_create_sampler(m, be, &t, err, sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        goto out;
    }
    int64_t T = ampx_trainer_window(t), V = ampx_trainer_vocab(t);
    if (o.eot >= (double)V) {
        fprintf(stderr, "ampx generate: --eot %.0f: outside the model's vocabulary of %lld\n",
                o.eot, (long long)V);
        goto out;
    }
    if (tok && ampx_tokenizer_vocab(tok) > V) {
        fprintf(stderr, "ampx generate: %s: %u tokens, more than the model's vocabulary of %lld\n",
                o.tokenizer, ampx_tokenizer_vocab(tok), (long long)V);
        goto out;
    }
    if (o.shift == 0) o.shift = T / 2 > 0 ? (double)(T / 2) : 1;
    if (o.shift > (double)T) {
        fprintf(stderr, "ampx generate: --shift %.0f: the window holds %lld tokens\n", o.shift,
                (long long)T);
        rc = EXIT_USAGE;
        goto out;
    }
    if (ampx_trainer_load(t, o.checkpoint, err, sizeof err)) {
        fprintf(stderr, "ampx generate: %s\n", err);
        goto out;
    }
    logits = malloc(sizeof *logits * (size_t)(T * V));
    ids    = calloc((size_t)T, sizeof *ids);
    work   = malloc(sizeof *work * (size_t)V);
    if (!logits || !ids || !work)
        fprintf(stderr, "ampx generate: out of memory\n");
    else
        rc = generate_all(t, &o, tok, ids, logits, work);
out:
    free(logits), free(ids), free(work);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    ampx_tokenizer_free(tok);
    return rc;
}
