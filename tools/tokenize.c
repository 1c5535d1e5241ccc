/* tokenize.c — `ampx tokenize`: a byte-level BPE (GPT-2's pre-split and merges) learned from
 * text, text into llm.c's token files that `ampx train` reads, and token files back to text.
 *
 *   ampx tokenize train --vocab N --out tok.json [--llmc-out gpt2_tokenizer.bin] CORPUS...
 *   ampx tokenize encode --tokenizer tok.json --out train.bin [--val-fraction F --val-out
 *                        val.bin] [--separator S] TEXT...
 *   ampx tokenize decode --tokenizer FILE [--out FILE] TOKENS.bin...
 *
 * Documents: each input file is one, or, with --separator, each file is cut after every
 * occurrence of the separator (which stays at the end of its document, as llm.c's
 * tinyshakespeare.py does with "\n\n"). The end-of-text token goes before every document
 * (llm.c's convention). The validation split is the last fraction F of the token stream. */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampx/ampx.h"
#include "cli.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU time: what one core spent, whatever else the machine runs. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A whole file under the input rules (a regular file, within the input cap); NULL after one
 * line. */
static unsigned char *slurp(const char *cmd, const char *path, size_t *len) {
    char err[1200];
    char *b = ampx_input_read(path, 0, len, err, sizeof err);
    if (!b) fprintf(stderr, "ampx tokenize %s: %s\n", cmd, err);
    return (unsigned char *)b;
}

typedef struct tok_opts {
    const char *out, *llmc_out, *tokenizer, *val_out, *separator;
    int64_t vocab;
    double val_fraction;
} tok_opts;

static int opt_fraction(void *opts, int argc, char **argv, const char *v) {
    char *end;
    errno    = 0;
    double f = strtod(v, &end);
    if (!*v || *end || errno || !(f >= 0 && f < 1)) {
        fprintf(stderr, "%s: --val-fraction '%s': expected a number in [0, 1)\n", argv[0], v);
        return -1;
    }
    ((tok_opts *)opts)->val_fraction = f;
    return 0;
}

#define TOK(field) offsetof(tok_opts, field)
static const cli_opt tok_table[] = {
    CLI_OPT_INT("vocab", 'v', TOK(vocab), 257, 65536, 0),
    CLI_OPT_STRING("out", 'o', TOK(out), 0),
    CLI_OPT_STRING("llmc-out", 'L', TOK(llmc_out), 0),
    CLI_OPT_STRING("tokenizer", 't', TOK(tokenizer), 0),
    CLI_OPT_CALL("val-fraction", 'f', opt_fraction, 0),
    CLI_OPT_STRING("val-out", 'V', TOK(val_out), 0),
    CLI_OPT_STRING("separator", 's', TOK(separator), 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: ampx tokenize train --vocab N --out TOK.json [--llmc-out FILE] CORPUS...\n"
            "       ampx tokenize encode --tokenizer TOK.json --out TRAIN.bin [--val-fraction F\n"
            "                            --val-out VAL.bin] [--separator S] TEXT...\n"
            "       ampx tokenize decode --tokenizer FILE [--out FILE] TOKENS.bin...\n"
            "\n"
            "A byte-level BPE with GPT-2's pre-split: 256 byte tokens, N - 257 merges, and the\n"
            "end-of-text token N - 1.\n"
            "  train   learn the merges from the corpus files; --out writes ampx's JSON file,\n"
            "          --llmc-out also llm.c's tokenizer file (decodes only)\n"
            "  encode  text files into llm.c's token file (uint16 ids) for `ampx train`: one\n"
            "          document per file, or cut after each --separator (\\n and \\t are read\n"
            "          as escapes); the end-of-text token before each document; the last\n"
            "          --val-fraction of the tokens into --val-out\n"
            "  decode  token files back to text (on stdout, or --out); the end-of-text token\n"
            "          prints as its bytes (<|endoftext|>); --tokenizer takes either file\n");
}

static int parse(int argc, char **argv, tok_opts *o) {
    cli_parser p = {"h", tok_table, 0, NULL};
    return cli_parse_or_usage(&p, argc, argv, o, usage);
}

/* No output is an input (--tokenizer, the files named after the options) or another output;
 * 0, or 1 after one line. */
static int check_files(const char *cmd, const tok_opts *o, int argc, char **argv) {
    int n                 = argc - optind;
    ampx_file_role out[3] = {
        {o->out, "--out"}, {o->llmc_out, "--llmc-out"}, {o->val_out, "--val-out"}};
    ampx_file_role *in = calloc((size_t)n + 1, sizeof *in);
    char err[1200]     = "out of memory";
    int bad            = !in;
    if (in) {
        in[0] = (ampx_file_role){o->tokenizer, "--tokenizer"};
        for (int i = 0; i < n; i++)
            in[i + 1] = (ampx_file_role){argv[optind + i], "an input file"};
        bad = ampx_check_outputs(out, 3, in, n + 1, err, sizeof err) != AMPX_OK;
    }
    if (bad) fprintf(stderr, "ampx tokenize %s: %s\n", cmd, err);
    free(in);
    return bad;
}

// ---------------------------------------------------------------------------------------
// train

static int cmd_train(int argc, char **argv) {
    tok_opts o = {0};
    int rc     = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.vocab || !o.out || optind >= argc || o.tokenizer || o.val_out || o.separator) {
        fprintf(stderr, "ampx tokenize train: expected --vocab N, --out FILE and corpus files "
                        "(and none of --tokenizer, --val-out, --separator)\n");
        return EXIT_USAGE;
    }
    if (check_files("train", &o, argc, argv)) return 1;
    size_t n              = (size_t)(argc - optind);
    unsigned char **texts = calloc(n, sizeof *texts);
    size_t *lens = calloc(n, sizeof *lens), total = 0;
    ampx_tokenizer *t = NULL;
    char err[1024];
    rc = 1;
    for (size_t i = 0; texts && lens && i < n; i++) {
        if (!(texts[i] = slurp("train", argv[optind + (int)i], &lens[i]))) goto out;
        total += lens[i];
    }
    double t0 = now_s(), c0 = cpu_s();
    ampx_tokenizer_stats st;
    if (ampx_tokenizer_train((const unsigned char *const *)texts, lens, n, (uint32_t)o.vocab, &t,
                             &st, err, sizeof err)) {
        fprintf(stderr, "ampx tokenize train: %s\n", err);
        goto out;
    }
    double dt = now_s() - t0, dc = cpu_s() - c0;
    if (ampx_tokenizer_save(t, o.out, err, sizeof err) ||
        (o.llmc_out && ampx_tokenizer_save_llmc(t, o.llmc_out, err, sizeof err))) {
        fprintf(stderr, "ampx tokenize train: %s\n", err);
        goto out;
    }
    fprintf(stderr,
            "ampx tokenize train: %zu bytes, %llu chunks (%llu distinct): %u merges in %.2f s "
            "(%.2f s of CPU), vocabulary %u (end-of-text %u) -> %s\n",
            total, (unsigned long long)st.chunks, (unsigned long long)st.unique_chunks, st.merges,
            dt, dc, ampx_tokenizer_vocab(t), ampx_tokenizer_eot(t), o.out);
    if (st.merges < (uint32_t)o.vocab - 257)
        fprintf(stderr,
                "ampx tokenize train: warning: no pair was left after %u merges: the "
                "vocabulary is %u, not %lld\n",
                st.merges, ampx_tokenizer_vocab(t), (long long)o.vocab);
    rc = 0;
out:
    for (size_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts), free(lens);
    ampx_tokenizer_free(t);
    return rc;
}

// ---------------------------------------------------------------------------------------
// encode

/* The separator with \n, \t, \r and \\ read as escapes (in place). */
static size_t unescape(char *s) {
    size_t k = 0;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (c == '\\' && s[i + 1]) {
            char d = s[++i];
            c      = d == 'n' ? '\n' : d == 't' ? '\t' : d == 'r' ? '\r' : d;
        }
        s[k++] = c;
    }
    s[k] = 0;
    return k;
}

/* One file's documents, each after an end-of-text token, into out. */
static int encode_file(ampx_tokenizer *t, const unsigned char *b, size_t len, const char *sep,
                       size_t sep_len, ampx_token_buf *out, size_t *docs, char *err, size_t cap) {
    uint32_t eot = ampx_tokenizer_eot(t);
    size_t at    = 0;
    do {
        size_t end = len;
        if (sep_len) {
            const unsigned char *hit = memmem(b + at, len - at, sep, sep_len);
            if (hit) end = (size_t)(hit - b) + sep_len;
        }
        if (out->n == out->cap) {
            size_t c    = out->cap ? 2 * out->cap : 1 << 16;
            uint32_t *p = realloc(out->ids, c * sizeof *p);
            if (!p) return snprintf(err, cap, "out of memory"), -1;
            out->ids = p, out->cap = c;
        }
        out->ids[out->n++] = eot;
        if (ampx_tokenizer_encode(t, b + at, end - at, out, err, cap)) return -1;
        (*docs)++;
        at = end;
    } while (at < len);
    return 0;
}

static int cmd_encode(int argc, char **argv) {
    tok_opts o = {0};
    int rc     = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.tokenizer || !o.out || optind >= argc || o.vocab || o.llmc_out ||
        (o.val_fraction > 0) != (o.val_out != NULL)) {
        fprintf(stderr, "ampx tokenize encode: expected --tokenizer FILE, --out FILE and text "
                        "files; --val-fraction F > 0 with --val-out FILE\n");
        return EXIT_USAGE;
    }
    if (check_files("encode", &o, argc, argv)) return 1;
    char *sep      = o.separator ? strdup(o.separator) : NULL;
    size_t sep_len = sep ? unescape(sep) : 0;
    char err[1024];
    ampx_tokenizer *t  = NULL;
    ampx_token_buf buf = {0};
    size_t bytes = 0, docs = 0;
    double secs = 0, cpu = 0;
    rc = 1;
    if (ampx_tokenizer_load(o.tokenizer, &t, err, sizeof err)) goto fail;
    for (int i = optind; i < argc; i++) {
        size_t len;
        unsigned char *b = slurp("encode", argv[i], &len);
        if (!b) goto out;
        double t0 = now_s(), c0 = cpu_s();
        int bad = encode_file(t, b, len, sep, sep_len, &buf, &docs, err, sizeof err);
        secs += now_s() - t0, cpu += cpu_s() - c0;
        bytes += len;
        free(b);
        if (bad) goto fail;
    }
    size_t n_val = (size_t)((double)buf.n * o.val_fraction), n_train = buf.n - n_val;
    if (ampx_token_file_write(o.out, buf.ids, n_train, err, sizeof err) ||
        (o.val_out && ampx_token_file_write(o.val_out, buf.ids + n_train, n_val, err, sizeof err)))
        goto fail;
    fprintf(stderr,
            "ampx tokenize encode: %zu bytes, %zu documents -> %zu tokens (%.2f bytes a token) "
            "in %.3f s, %.3f s of CPU (%.1f MB/s a core): %zu in %s",
            bytes, docs, buf.n, buf.n ? (double)bytes / (double)buf.n : 0.0, secs, cpu,
            cpu > 0 ? (double)bytes / cpu / 1e6 : 0.0, n_train, o.out);
    if (o.val_out) fprintf(stderr, ", %zu in %s", n_val, o.val_out);
    fputc('\n', stderr);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "ampx tokenize encode: %s\n", err);
out:
    free(sep), free(buf.ids);
    ampx_tokenizer_free(t);
    return rc;
}

// ---------------------------------------------------------------------------------------
// decode

static int cmd_decode(int argc, char **argv) {
    tok_opts o = {0};
    int rc     = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.tokenizer || optind >= argc || o.vocab || o.llmc_out || o.val_out || o.separator ||
        o.val_fraction > 0) {
        fprintf(stderr, "ampx tokenize decode: expected --tokenizer FILE and token files\n");
        return EXIT_USAGE;
    }
    if (check_files("decode", &o, argc, argv)) return 1;
    char err[1200];
    ampx_tokenizer *t = NULL;
    ampx_output *w    = NULL; /* --out, renamed into place once every file is decoded */
    FILE *f           = stdout;
    rc                = 1;
    if (ampx_tokenizer_load(o.tokenizer, &t, err, sizeof err)) {
        fprintf(stderr, "ampx tokenize decode: %s\n", err);
        return 1;
    }
    if (o.out && ampx_output_open(o.out, &w, err, sizeof err)) {
        fprintf(stderr, "ampx tokenize decode: %s\n", err);
        goto out;
    }
    if (w) f = ampx_output_stream(w);
    for (int i = optind; i < argc; i++) {
        uint16_t *ids;
        size_t n;
        if (ampx_token_file_read(argv[i], ampx_tokenizer_vocab(t), &ids, &n, err, sizeof err)) {
            fprintf(stderr,
                    "ampx tokenize decode: %s (a token file of this tokenizer's %u "
                    "tokens)\n",
                    err, ampx_tokenizer_vocab(t));
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            size_t len;
            const unsigned char *s = ampx_tokenizer_token(t, ids[k], &len);
            fwrite(s, 1, len, f);
        }
        free(ids);
    }
    rc = 0;
    if (w && ampx_output_commit(w, err, sizeof err)) {
        fprintf(stderr, "ampx tokenize decode: %s\n", err);
        rc = 1;
    }
    w = NULL;
out:
    ampx_output_discard(w);
    ampx_tokenizer_free(t);
    return rc;
}

int cli_tokenize(int argc, char **argv) {
    const char *sub = argc > 1 ? argv[1] : "";
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
        usage(stdout);
        return 0;
    }
    char name[64];
    snprintf(name, sizeof name, "ampx tokenize %s", sub);
    argv[1] = name;
    if (!strcmp(sub, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(sub, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(sub, "decode")) return cmd_decode(argc - 1, argv + 1);
    static const char *const subs[] = {"train", "encode", "decode"};
    const char *near                = *sub ? cli_nearest(sub, subs, 3) : NULL;
    if (!*sub)
        fprintf(stderr, "ampx tokenize: expected a subcommand: train, encode or decode\n");
    else if (near)
        fprintf(stderr, "ampx tokenize: unknown subcommand '%s' (did you mean '%s'?)\n", sub, near);
    else
        fprintf(stderr, "ampx tokenize: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return EXIT_USAGE;
}
