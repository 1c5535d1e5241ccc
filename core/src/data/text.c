/* text.c — token streams for language models: the bytes of a text file (vocabulary 256),
 * llm.c's token files (a header of 256 int32: magic 20240520, version 1, token count; then
 * the tokens as uint16), and a generated text task that needs nothing on disk. Training
 * windows are drawn from the stream with the seed; the held-out windows are fixed, evenly
 * spaced over the validation stream, so every evaluation reads the same positions. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"
#include "ampx/dtype.h"
#include "base/error.h"
#include "config/input.h"
#include "data/data.h"
#include "data/shuffle.h"

#define TOKENS_MAGIC 20240520
#define TOKENS_VERSION 1

int data_is_tokens(const settings *cfg) {
    data_source s = cfg->data.source;
    return s == DATA_TEXT || s == DATA_TOKENS || s == DATA_EMBEDDED_TEXT;
}

/* A whole regular file into memory, within the input cap (config/input.h). */
static unsigned char *slurp(const char *path, size_t *len, ampx_err e) {
    return (unsigned char *)input_read(path, input_max_bytes(), len, e);
}

static uint16_t *bytes_to_tokens(const unsigned char *b, size_t n) {
    uint16_t *t = malloc(sizeof *t * (n + 1));
    for (size_t i = 0; t && i < n; i++)
        t[i] = b[i];
    return t;
}

/* llm.c's format, every header field checked against the file's size. */
uint16_t *text_tokens_parse(const char *path, const unsigned char *b, size_t len, int64_t vocab,
                            int64_t *n, ampx_err e) {
    int32_t h[256];
    uint16_t *t = NULL;
    if (len < sizeof h) {
        err_set(e, "%s: %zu bytes, shorter than the 1024-byte header of a token file", path, len);
        return NULL;
    }
    memcpy(h, b, sizeof h);
    if (h[0] != TOKENS_MAGIC) {
        err_set(e, "%s: not a token file (magic %d, expected %d)", path, h[0], TOKENS_MAGIC);
        return NULL;
    }
    if (h[1] != TOKENS_VERSION) {
        err_set(e, "%s: token file version %d; version %d is read", path, h[1], TOKENS_VERSION);
        return NULL;
    }
    uint64_t body = len - sizeof h;
    if (h[2] < 0 || body != 2 * (uint64_t)(uint32_t)h[2]) {
        err_set(e, "%s: the header declares %d tokens but %llu bytes follow it (%s)", path, h[2],
                (unsigned long long)body, body % 2 ? "an odd count" : "2 bytes per token");
        return NULL;
    }
    *n = h[2];
    if (!(t = malloc(sizeof *t * ((size_t)*n + 1)))) {
        err_set(e, "%s: out of memory", path);
        return NULL;
    }
    memcpy(t, b + sizeof h, 2 * (size_t)*n);
    for (int64_t i = 0; i < *n; i++)
        if (t[i] >= vocab) {
            err_set(e, "%s: token %lld is %u, outside the model's vocabulary of %lld", path,
                    (long long)i, t[i], (long long)vocab);
            free(t);
            return NULL;
        }
    return t;
}

static uint16_t *read_token_file(const char *path, int64_t vocab, int64_t *n, ampx_err e) {
    size_t len;
    unsigned char *b = slurp(path, &len, e);
    if (!b) return NULL;
    uint16_t *t = text_tokens_parse(path, b, len, vocab, n, e);
    free(b);
    return t;
}

// ---------------------------------------------------------------------------------------
// The embedded text task: lines of a small procedural language with structure a small
// model can learn and the loss shows: agreement (a plural subject takes a plain verb, a
// singular one an -s), counting (the next number word follows from the last), recall (the
// answer repeats the object named earlier in the line: attention), and sums of digits.

typedef struct gen {
    uint64_t seed, i;
    char *out;
    size_t n, cap;
} gen;

static uint32_t pick(gen *g, uint32_t k) {
    return (uint32_t)(data_uniform(g->seed, g->i++) * k);
}

static void put(gen *g, const char *s) {
    size_t l = strlen(s);
    if (g->n + l > g->cap) l = g->cap - g->n;
    memcpy(g->out + g->n, s, l);
    g->n += l;
}

static const char *const nouns[]   = {"cat",  "dog",   "bird", "fox",   "horse", "wolf",
                                      "frog", "mouse", "bear", "otter", "crow",  "goat"};
static const char *const verbs[]   = {"see", "chase", "follow", "watch", "find", "help", "meet"};
static const char *const adjs[]    = {"red", "small", "old", "quick", "green", "lazy", "brave"};
static const char *const names[]   = {"ada", "bob", "cy", "dora", "eli", "fay", "gus", "hal"};
static const char *const things[]  = {"ball", "book", "cup", "hat", "kite", "lamp", "key", "box"};
static const char *const numbers[] = {"one", "two",   "three", "four", "five",
                                      "six", "seven", "eight", "nine", "ten"};
#define COUNT(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

static void noun_phrase(gen *g, int plural) {
    put(g, pick(g, 2) ? "the " : (plural ? "some " : "a "));
    if (pick(g, 2)) {
        put(g, adjs[pick(g, COUNT(adjs))]);
        put(g, " ");
    }
    put(g, nouns[pick(g, COUNT(nouns))]);
    if (plural) put(g, "s");
}

static void line(gen *g) {
    char buf[64];
    switch (pick(g, 4)) {
    case 0: { /* agreement */
        int plural = (int)pick(g, 2);
        noun_phrase(g, plural);
        put(g, " ");
        put(g, verbs[pick(g, COUNT(verbs))]);
        if (!plural) put(g, "s");
        put(g, " ");
        noun_phrase(g, (int)pick(g, 2));
        put(g, ".\n");
        break;
    }
    case 1: { /* counting */
        uint32_t first = pick(g, 5), len = 3 + pick(g, 3);
        put(g, "count:");
        for (uint32_t k = 0; k < len; k++) {
            put(g, " ");
            put(g, numbers[first + k]);
        }
        put(g, ".\n");
        break;
    }
    case 2: { /* recall */
        const char *who = names[pick(g, COUNT(names))], *adj = adjs[pick(g, COUNT(adjs))];
        const char *what = things[pick(g, COUNT(things))];
        snprintf(buf, sizeof buf, "%s has a %s %s. ", who, adj, what);
        put(g, buf);
        snprintf(buf, sizeof buf, "what does %s have? a %s %s.\n", who, adj, what);
        put(g, buf);
        break;
    }
    default: { /* sums */
        uint32_t a = pick(g, 10), b = pick(g, 10);
        snprintf(buf, sizeof buf, "%u + %u = %u.\n", a, b, a + b);
        put(g, buf);
    }
    }
}

static uint16_t *generate(uint64_t seed, size_t bytes, int64_t *n) {
    gen g = {.seed = seed, .out = malloc(bytes + 1), .cap = bytes};
    if (!g.out) return NULL;
    while (g.n < g.cap)
        line(&g);
    uint16_t *t = bytes_to_tokens((unsigned char *)g.out, g.n);
    *n          = (int64_t)g.n;
    free(g.out);
    return t;
}

// ---------------------------------------------------------------------------------------
// Loading

/* Splits the last fraction of a stream off as validation (a copy; the stream shrinks). */
static int split_tail(dataset *d, double fraction) {
    int64_t nv = (int64_t)((double)d->n_tokens_train * fraction);
    if (!(d->tokens_val = malloc(sizeof(uint16_t) * (size_t)(nv + 1)))) return -1;
    memcpy(d->tokens_val, d->tokens_train + (d->n_tokens_train - nv),
           sizeof(uint16_t) * (size_t)nv);
    d->n_tokens_val = nv;
    d->n_tokens_train -= nv;
    return 0;
}

static uint16_t *load_stream(const data_request *m, const char *path, int64_t *n, ampx_err e) {
    if (m->cfg->data.source == DATA_TOKENS) return read_token_file(path, m->classes, n, e);
    size_t len;
    unsigned char *b = slurp(path, &len, e);
    if (!b) return NULL;
    uint16_t *t = bytes_to_tokens(b, len);
    free(b);
    if (!t) err_set(e, "%s: out of memory", path);
    *n = (int64_t)len;
    return t;
}

/* The training stream: one file, or for llm.c token files a glob of shards (llm.c's
 * fineweb_train_*.bin) concatenated in the glob's (sorted) order, each shard's start kept. */
static int load_train(const data_request *m, dataset *d, ampx_err e) {
    const char *pat = m->cfg->data.text_train;
    glob_t gl       = {0};
    int shards      = m->cfg->data.source == DATA_TOKENS && strpbrk(pat, "*?[");
    if (shards && (glob(pat, 0, NULL, &gl) != 0 || gl.gl_pathc == 0)) {
        err_set(e, "%s: no file matches", pat);
        globfree(&gl);
        return -1;
    }
    int n = shards ? (int)gl.gl_pathc : 1, rc = 0;
    if (!(d->shard_start = malloc(sizeof(int64_t) * (size_t)(n + 1)))) rc = -1;
    d->n_tokens_train = 0;
    for (int i = 0; i < n && !rc; i++) {
        int64_t k;
        uint16_t *t = load_stream(m, shards ? gl.gl_pathv[i] : pat, &k, e), *all;
        if (!t || !(all = realloc(d->tokens_train,
                                  sizeof(uint16_t) * (size_t)(d->n_tokens_train + k + 1)))) {
            if (t) err_set(e, "%s: out of memory", pat);
            free(t);
            rc = -1;
            break;
        }
        memcpy(all + d->n_tokens_train, t, sizeof(uint16_t) * (size_t)k);
        free(t);
        d->tokens_train   = all;
        d->shard_start[i] = d->n_tokens_train;
        d->n_tokens_train += k;
        d->shard_start[i + 1] = d->n_tokens_train;
    }
    d->n_shards = rc ? 0 : n;
    globfree(&gl);
    return rc;
}

int text_load(const data_request *m, dataset *d, ampx_err e) {
    const data_config *c = &m->cfg->data;
    const char *file     = m->cfg->file;
    int64_t T            = m->window;
    d->window            = T;
    if (c->source != DATA_TOKENS && m->classes < 256) {
        err_set(e, "%s: byte-level text has 256 token values; the labels have %lld classes", file,
                (long long)m->classes);
        return -1;
    }
    if (c->source == DATA_EMBEDDED_TEXT) {
        int64_t nv      = (int64_t)((double)c->text_bytes * c->val_fraction);
        d->tokens_train = generate(0x7E57, (size_t)c->text_bytes, &d->n_tokens_train);
        d->tokens_val   = generate(0x7E58, (size_t)(nv > 4 * T ? nv : 4 * T), &d->n_tokens_val);
        if (!d->tokens_train || !d->tokens_val) {
            err_set(e, "%s: out of memory for the generated text", file);
            return -1;
        }
    } else {
        if (load_train(m, d, e)) return -1;
        if (c->text_val) {
            if (!(d->tokens_val = load_stream(m, c->text_val, &d->n_tokens_val, e))) return -1;
        } else if (split_tail(d, c->val_fraction)) {
            err_set(e, "%s: out of memory", c->text_train);
            return -1;
        }
    }
    const char *vn = c->text_val ? c->text_val : c->text_train ? c->text_train : file;
    if (d->n_tokens_train < T + 1) {
        err_set(e, "%s: %lld training tokens are too few for one window of %lld + 1",
                c->text_train ? c->text_train : file, (long long)d->n_tokens_train, (long long)T);
        return -1;
    }
    if (d->n_tokens_val < T + 1) {
        err_set(e, "%s: %lld validation tokens are too few for one window of %lld + 1", vn,
                (long long)d->n_tokens_val, (long long)T);
        return -1;
    }
    /* fixed held-out windows, evenly spaced (non-overlapping when the stream allows) */
    int64_t k = c->eval_windows, room = d->n_tokens_val - 1 - T;
    if (k > room / T + 1) k = room / T + 1;
    d->n_test   = k;
    d->ids_test = malloc(sizeof(int32_t) * (size_t)(k * T));
    d->y_test   = malloc(sizeof(int32_t) * (size_t)(k * T));
    if (!d->ids_test || !d->y_test) {
        err_set(e, "%s: out of memory", vn);
        return -1;
    }
    for (int64_t w = 0; w < k; w++) {
        int64_t off = k > 1 ? w * (room / (k - 1)) : 0;
        for (int64_t t = 0; t < T; t++) {
            d->ids_test[w * T + t] = d->tokens_val[off + t];
            d->y_test[w * T + t]   = d->tokens_val[off + t + 1];
        }
    }
    d->n_train      = d->n_tokens_train - T; /* window positions */
    d->sequential   = c->order != DATA_ORDER_RANDOM;
    d->shuffle_seed = (uint32_t)c->shuffle_seed;
    if (c->order == DATA_ORDER_SHUFFLED && !(d->shuffle = calloc(1, sizeof *d->shuffle))) {
        err_set(e, "%s: out of memory", c->text_train ? c->text_train : file);
        return -1;
    }
    if (d->sequential && !d->shard_start) {
        /* one stream (text, generated text, a validation split): one shard */
        if (!(d->shard_start = malloc(sizeof(int64_t) * 2))) return -1;
        d->shard_start[0] = 0, d->shard_start[1] = d->n_tokens_train, d->n_shards = 1;
    }
    return 0;
}

/* Sequential order, llm.c's dataloader: a step's micro-batch `key` is one chunk of
 * key_rows x T + 1 contiguous tokens (the +1: the last window's labels), chunk i of a shard
 * at i * key_rows * T; rank r's windows start r * rows * T into the chunk (rows of T, each
 * row's labels the next T tokens). A shard of n tokens holds (n - 1) / (key_rows T) chunks;
 * unshuffled, after its last the next shard starts, after the last shard the first again (a
 * new epoch); shuffled, the walk of data/shuffle.c picks the shard and the chunk. The
 * position is a function of key alone, so a resumed run reads what a straight one would. */
static int draw_sequential(const dataset *d, uint64_t key, int64_t key_rows, int64_t first,
                           int64_t rows, int32_t *ids, int32_t *labels) {
    int64_t T = d->window, chunk = key_rows * T, per_epoch = 0, i = 0;
    int s = 0;
    for (int k = 0; k < d->n_shards; k++)
        per_epoch += (d->shard_start[k + 1] - d->shard_start[k] - 1) / chunk;
    if (per_epoch == 0) { /* never: the trainer refuses a shard shorter than one chunk */
        memset(ids, 0, sizeof *ids * (size_t)(rows * T));
        memset(labels, 0, sizeof *labels * (size_t)(rows * T));
        return 0;
    }
    if (d->shuffle) {
        chunk_order *o = d->shuffle;
        uint32_t seed  = d->shuffle_seed + (uint32_t)(rows ? first / rows : 0);
        int same       = o->chunks && o->seed == seed && o->n_shards == d->n_shards;
        for (int k = 0; same && k < d->n_shards; k++)
            same = o->chunks[k] == (d->shard_start[k + 1] - d->shard_start[k] - 1) / chunk;
        if (!same) { /* the first draw, or another chunk size or rank: a new walk */
            int64_t *n = malloc(sizeof(int64_t) * (size_t)d->n_shards);
            for (int k = 0; n && k < d->n_shards; k++)
                n[k] = (d->shard_start[k + 1] - d->shard_start[k] - 1) / chunk;
            chunk_order_free(o);
            int rc = n ? chunk_order_init(o, d->n_shards, n, seed) : -1;
            free(n);
            if (rc) return -1;
        }
        chunk_order_at(o, key, &s, &i);
    } else {
        i = (int64_t)(key % (uint64_t)per_epoch);
        for (;; s++) {
            int64_t in_shard = (d->shard_start[s + 1] - d->shard_start[s] - 1) / chunk;
            if (i < in_shard) break;
            i -= in_shard;
        }
    }
    const uint16_t *c = d->tokens_train + d->shard_start[s] + i * chunk + first * T;
    for (int64_t k = 0; k < rows * T; k++) {
        ids[k]    = c[k];
        labels[k] = c[k + 1];
    }
    return 0;
}

int text_draw(const dataset *d, uint64_t seed, uint64_t key, int64_t key_rows, int64_t first,
              int64_t rows, int32_t *ids, int32_t *labels) {
    if (d->sequential) return draw_sequential(d, key, key_rows, first, rows, ids, labels);
    int64_t T = d->window, span = d->n_tokens_train - T;
    for (int64_t r = 0; r < rows; r++) {
        uint64_t w  = key * (uint64_t)key_rows + (uint64_t)(first + r);
        int64_t off = (int64_t)(data_uniform(seed, w) * (double)span);
        if (off >= span) off = span - 1;
        for (int64_t t = 0; t < T; t++) {
            ids[r * T + t]    = d->tokens_train[off + t];
            labels[r * T + t] = d->tokens_train[off + t + 1];
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// The public reader (ampx tokenize decode): the same checks as training's

AMPX_API int ampx_token_file_read(const char *path, uint32_t vocab, uint16_t **ids, size_t *n,
                                  char *err, size_t err_cap) {
    int64_t count = 0;
    *ids          = read_token_file(path, vocab, &count, ERR(err, err_cap));
    *n            = *ids ? (size_t)count : 0;
    return *ids ? 0 : -1;
}
