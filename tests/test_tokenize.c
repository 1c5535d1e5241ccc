/* test_tokenize.c — the byte-level BPE of core/src/text: the fast encoder against a
 * straightforward one written here (minbpe's loop: find the adjacent pair of lowest merge rank,
 * merge it everywhere, again), exact round trips text -> ids -> text on tests/text/odd.txt
 * (invalid UTF-8, NUL, long runs of spaces, CRLF, non-Latin scripts), the trainer against one
 * that recounts every pair after each merge, GPT-2's pre-split on strings whose chunks the
 * regular expression gives, and the refusals of the tokenizer and token file readers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/ampx.h"

#define ODD_TXT AMPX_SOURCE_DIR "/tests/text/odd.txt"

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Text with the statistics of words: syllables, spaces, punctuation, digits, newlines. */
static unsigned char *gen_text(uint64_t seed, size_t n) {
    static const char *const syl[] = {"the", "an", "ing", "er", "qu", "st", "o",  "a",
                                      "e",   "th", "re",  "is", "on", "ly", "ck", "x"};
    static const char *const pun[] = {" ",   " ",  " ",   " ",   ", ", ". ",   "\n",
                                      "'s ", "  ", "!? ", " 12", " 3", "\r\n", "\t"};
    unsigned char *b               = malloc(n + 16);
    size_t at                      = 0;
    while (at < n) {
        seed          = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r    = (uint32_t)(seed >> 33);
        const char *s = r % 3 ? syl[r % 16] : pun[(r >> 8) % 14];
        for (; *s && at < n; s++)
            b[at++] = (unsigned char)((r >> 20) % 9 == 0 && *s >= 'a' ? *s - 32 : *s);
    }
    return b;
}

// ---------------------------------------------------------------------------------------
// The straightforward encoder: per chunk, merge the lowest-rank pair everywhere, repeat

typedef struct ranks {
    uint32_t vocab;
    int32_t *r; /* vocab x vocab, -1: no merge */
} ranks;

static ranks ranks_of(const ampx_tokenizer *t) {
    ranks k = {ampx_tokenizer_vocab(t), NULL};
    k.r     = malloc(sizeof *k.r * k.vocab * k.vocab);
    memset(k.r, 0xFF, sizeof *k.r * k.vocab * k.vocab);
    for (uint32_t i = ampx_tokenizer_n_merges(t); i-- > 0;) {
        uint32_t a, b;
        ampx_tokenizer_merge(t, i, &a, &b);
        k.r[a * k.vocab + b] = (int32_t)i;
    }
    return k;
}

static size_t ref_encode(const ranks *k, const unsigned char *s, size_t n, uint32_t *out) {
    size_t total = 0;
    uint32_t *t  = malloc(sizeof *t * (n + 1));
    for (size_t i = 0, end; i < n; i = end) {
        end      = ampx_pretokenize_next(s, n, i);
        size_t m = end - i;
        cr_assert(end > i && end <= n);
        for (size_t j = 0; j < m; j++)
            t[j] = s[i + j];
        for (;;) {
            int32_t best = -1;
            for (size_t j = 0; j + 1 < m; j++) {
                int32_t r = k->r[t[j] * k->vocab + t[j + 1]];
                if (r >= 0 && (best < 0 || r < best)) best = r;
            }
            if (best < 0) break;
            size_t w = 0;
            for (size_t j = 0; j < m;) {
                if (j + 1 < m && k->r[t[j] * k->vocab + t[j + 1]] == best)
                    t[w++] = 256 + (uint32_t)best, j += 2;
                else
                    t[w++] = t[j++];
            }
            m = w;
        }
        memcpy(out + total, t, sizeof *t * m);
        total += m;
    }
    free(t);
    return total;
}

/* Encodes text both ways and decodes it: the ids agree and the bytes come back. */
static void check_text(ampx_tokenizer *t, const ranks *k, const unsigned char *s, size_t n) {
    char err[512];
    ampx_token_buf buf = {0};
    cr_assert_eq(ampx_tokenizer_encode(t, s, n, &buf, err, sizeof err), 0, "%s", err);
    uint32_t *ref = malloc(sizeof *ref * (n + 1));
    size_t nr     = ref_encode(k, s, n, ref);
    cr_assert_eq(buf.n, nr, "fast %zu ids, reference %zu", buf.n, nr);
    for (size_t i = 0; i < nr; i++)
        cr_assert_eq(buf.ids[i], ref[i], "id %zu: fast %u, reference %u", i, buf.ids[i], ref[i]);
    /* again: now from the chunk cache */
    size_t first = buf.n;
    cr_assert_eq(ampx_tokenizer_encode(t, s, n, &buf, err, sizeof err), 0, "%s", err);
    cr_assert_eq(buf.n, 2 * first);
    cr_assert_eq(memcmp(buf.ids, buf.ids + first, sizeof *buf.ids * first), 0);
    unsigned char *back = malloc(n + 1);
    size_t at           = 0;
    for (size_t i = 0; i < first; i++) {
        size_t len;
        const unsigned char *b = ampx_tokenizer_token(t, buf.ids[i], &len);
        cr_assert(b && at + len <= n, "id %zu", i);
        cr_assert_neq(buf.ids[i], ampx_tokenizer_eot(t));
        memcpy(back + at, b, len);
        at += len;
    }
    cr_assert_eq(at, n);
    cr_assert_eq(memcmp(back, s, n), 0, "the round trip changed the text");
    free(back), free(ref), free(buf.ids);
}

static ampx_tokenizer *train_on(const unsigned char *s, size_t n, uint32_t vocab) {
    char err[512];
    ampx_tokenizer *t             = NULL;
    const unsigned char *texts[1] = {s};
    cr_assert_eq(ampx_tokenizer_train(texts, &n, 1, vocab, &t, NULL, err, sizeof err), 0, "%s",
                 err);
    return t;
}

Test(bpe, fast_encoder_matches_reference_on_odd_text) {
    size_t n, ng = 60000;
    unsigned char *odd = read_all(ODD_TXT, &n), *gen = gen_text(7, ng);
    unsigned char *both = malloc(n + ng);
    memcpy(both, odd, n), memcpy(both + n, gen, ng);
    /* trained on the odd text itself (its own chunks merge far), and on other text */
    ampx_tokenizer *ts[2] = {train_on(both, n + ng, 1200), train_on(gen, ng, 900)};
    for (int i = 0; i < 2; i++) {
        ranks k = ranks_of(ts[i]);
        check_text(ts[i], &k, odd, n);
        check_text(ts[i], &k, gen, ng);
        /* a chunk too long for the cache: a run of spaces, then a word */
        unsigned char *sp = malloc(5001);
        memset(sp, ' ', 5000), sp[5000] = 'x';
        check_text(ts[i], &k, sp, 5001);
        check_text(ts[i], &k, sp, 4999);
        free(sp), free(k.r);
        ampx_tokenizer_free(ts[i]);
    }
    free(odd), free(gen), free(both);
}

// ---------------------------------------------------------------------------------------
// The trainer against one that recounts every pair after each merge

typedef struct word {
    uint32_t *t;
    size_t n;
    int64_t count;
} word;

typedef struct span {
    const unsigned char *s;
    size_t n;
} span;

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

/* The merges a full recount per merge learns: largest count, ties to the smallest (a, b), no
 * token longer than 255 bytes. */
static uint32_t naive_train(const unsigned char *s, size_t n, uint32_t vocab, uint32_t (*m)[2]) {
    span *sp  = malloc(sizeof *sp * (n + 1));
    size_t ns = 0, nw = 0;
    for (size_t i = 0, end; i < n; i = end) {
        end      = ampx_pretokenize_next(s, n, i);
        sp[ns++] = (span){s + i, end - i};
    }
    qsort(sp, ns, sizeof *sp, span_cmp);
    word *w = malloc(sizeof *w * (ns + 1));
    for (size_t i = 0; i < ns; i++) {
        if (nw && !span_cmp(&sp[i], &sp[i - 1])) {
            w[nw - 1].count++;
            continue;
        }
        w[nw] = (word){malloc(sizeof(uint32_t) * sp[i].n), sp[i].n, 1};
        for (size_t j = 0; j < sp[i].n; j++)
            w[nw].t[j] = sp[i].s[j];
        nw++;
    }
    int64_t *c    = calloc((size_t)vocab * vocab, sizeof *c);
    uint32_t *len = malloc(sizeof *len * vocab), k = 0;
    for (uint32_t i = 0; i < 256; i++)
        len[i] = 1;
    for (; k < vocab - 257; k++) {
        int64_t best = 0;
        uint32_t ba = 0, bb = 0;
        for (size_t i = 0; i < nw; i++)
            for (size_t j = 0; j + 1 < w[i].n; j++)
                c[w[i].t[j] * vocab + w[i].t[j + 1]] += w[i].count;
        for (size_t i = 0; i < nw; i++)
            for (size_t j = 0; j + 1 < w[i].n; j++) {
                uint32_t a = w[i].t[j], b = w[i].t[j + 1];
                int64_t v = len[a] + len[b] > 255 ? 0 : c[a * vocab + b];
                if (v > best || (v == best && v > 0 && (a < ba || (a == ba && b < bb))))
                    best = v, ba = a, bb = b;
            }
        for (size_t i = 0; i < nw; i++)
            for (size_t j = 0; j + 1 < w[i].n; j++)
                c[w[i].t[j] * vocab + w[i].t[j + 1]] = 0;
        if (best == 0) break;
        m[k][0] = ba, m[k][1] = bb, len[256 + k] = len[ba] + len[bb];
        for (size_t i = 0; i < nw; i++) {
            size_t o = 0;
            for (size_t j = 0; j < w[i].n;) {
                if (j + 1 < w[i].n && w[i].t[j] == ba && w[i].t[j + 1] == bb)
                    w[i].t[o++] = 256 + k, j += 2;
                else
                    w[i].t[o++] = w[i].t[j++];
            }
            w[i].n = o;
        }
    }
    for (size_t i = 0; i < nw; i++)
        free(w[i].t);
    free(w), free(sp), free(c), free(len);
    return k;
}

static void check_trainer(const unsigned char *s, size_t n, uint32_t vocab) {
    uint32_t(*m)[2]   = malloc(sizeof *m * vocab);
    uint32_t nm       = naive_train(s, n, vocab, m);
    ampx_tokenizer *t = train_on(s, n, vocab);
    cr_assert_eq(ampx_tokenizer_n_merges(t), nm, "merges: %u, recounting: %u",
                 ampx_tokenizer_n_merges(t), nm);
    cr_assert_eq(ampx_tokenizer_vocab(t), 257 + nm);
    cr_assert_eq(ampx_tokenizer_eot(t), 256 + nm);
    for (uint32_t i = 0; i < nm; i++) {
        uint32_t a, b;
        ampx_tokenizer_merge(t, i, &a, &b);
        cr_assert(a == m[i][0] && b == m[i][1], "merge %u: (%u, %u), recounting (%u, %u)", i, a, b,
                  m[i][0], m[i][1]);
    }
    ampx_tokenizer_free(t);
    free(m);
}

Test(bpe, trainer_matches_a_full_recount) {
    size_t n;
    unsigned char *odd = read_all(ODD_TXT, &n), *gen = gen_text(11, 40000);
    check_trainer(gen, 40000, 700);
    check_trainer(odd, n, 800); /* runs out of pairs before 800 */
    const unsigned char runs[] = "aaaaaaa aaaa abababab aaab   ";
    check_trainer(runs, sizeof runs - 1, 300);
    free(odd), free(gen);
}

Test(bpe, trainer_refuses_bad_sizes) {
    char err[256];
    ampx_tokenizer *t      = NULL;
    const unsigned char *x = (const unsigned char *)"ab";
    size_t n               = 2;
    cr_assert_eq(ampx_tokenizer_train(&x, &n, 1, 256, &t, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "257"), "%s", err);
    cr_assert_eq(ampx_tokenizer_train(&x, &n, 1, 65537, &t, NULL, err, sizeof err), -1);
    cr_assert_null(t);
}

// ---------------------------------------------------------------------------------------
// GPT-2's pre-split: the chunks its regular expression gives ('|' between chunks)

Test(bpe, pre_split_matches_gpt2_expression) {
    static const char *const cases[][2] = {
        {"Hello world", "Hello| world"},
        {"it's isn't we'll I'm they'd you're we've",
         "it|'s| isn|'t| we|'ll| I|'m| they|'d| you|'re| we|'ve"},
        {"'S 'Re o'clock", "'|S| '|Re| o|'|clock"},
        {"a  b", "a| | b"},
        {"a   \n\nb", "a|   \n|\n|b"},
        {"x \n", "x| \n"},
        {"end  ", "end|  "},
        {"12345 678 x9", "12345| 678| x|9"},
        {"!!! ??x", "!!!| ??|x"},
        {"\t\tword", "\t|\t|word"},
        {" \tz", " |\t|z"},
        {"\r\n\r\nline", "\r\n\r|\n|line"},
        {"caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve"},
        {"\xd0\x9f\xd1\x80\xd0\xb8 \xe4\xbd\xa0\xe5\xa5\xbd",
         "\xd0\x9f\xd1\x80\xd0\xb8| \xe4\xbd\xa0\xe5\xa5\xbd"},
        {"x\xc2\xa0y", "x|\xc2\xa0|y"}, /* NBSP is whitespace, not the optional space */
        {"\xc2\xbd\xc2\xb2 \xe2\x85\xab",
         "\xc2\xbd\xc2\xb2| \xe2\x85\xab"}, /* No, Nl are numbers */
        {"a\xff\xfe b", "a|\xff\xfe| b"},   /* invalid bytes are "other" */
        {"\xc3", "\xc3"},                   /* a truncated sequence */
        {"a\x01\x02z", "a|\x01\x02|z"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const unsigned char *s = (const unsigned char *)cases[c][0];
        size_t n               = strlen(cases[c][0]);
        char got[256]          = "";
        size_t g               = 0;
        for (size_t i = 0, end; i < n; i = end) {
            end = ampx_pretokenize_next(s, n, i);
            if (i) got[g++] = '|';
            memcpy(got + g, s + i, end - i);
            g += end - i;
        }
        got[g] = 0;
        cr_assert_str_eq(got, cases[c][1], "case %zu", c);
    }
    /* NUL is a byte like another */
    const unsigned char nul[] = {'a', 0, 0, 'b'};
    cr_assert_eq(ampx_pretokenize_next(nul, 4, 0), 1);
    cr_assert_eq(ampx_pretokenize_next(nul, 4, 1), 3);
}

// ---------------------------------------------------------------------------------------
// Files: ampx's JSON, llm.c's tokenizer file, llm.c's token files

static char *tmp_path(const char *name) {
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "%s/ampx-test-tokenize-%d-%s", P_tmpdir, (int)getpid(), name);
    return p;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

Test(bpe, files_round_trip) {
    size_t n;
    unsigned char *odd = read_all(ODD_TXT, &n);
    unsigned char *gen = gen_text(3, 30000);
    ampx_tokenizer *t = train_on(gen, 30000, 600), *j = NULL, *l = NULL;
    char err[512], *pj = tmp_path("tok.json"), *pl = tmp_path("tok.bin"), *pt = tmp_path("t.bin");
    /* a loaded file may hold a token too long for llm.c's file (the trainer makes none) */
    static const char longer[] = "{\"format\": \"ampx-bpe\", \"version\": 1, \"pre_split\": "
                                 "\"gpt2\", \"vocab_size\": 266, \"eot\": 265, \"merges\": "
                                 "[[32, 32], [256, 256], [257, 257], [258, 258], [259, 259], "
                                 "[260, 260], [261, 261], [262, 262], [263, 263]]}";
    write_bytes(pj, longer, sizeof longer - 1);
    ampx_tokenizer *runs = NULL;
    cr_assert_eq(ampx_tokenizer_load(pj, &runs, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_save_llmc(runs, pl, err, sizeof err), -1);
    cr_assert(strstr(err, "token 263 is 256 bytes long; llm.c's tokenizer file holds 1 to 255"),
              "%s", err);
    ampx_tokenizer_free(runs);
    /* the trainer passes over a pair that would make a token over 255 bytes (odd.txt has a
     * run of 300 spaces) */
    runs = train_on(odd, n, 600);
    for (uint32_t i = 0; i < ampx_tokenizer_vocab(runs); i++) {
        size_t len = 0;
        ampx_tokenizer_token(runs, i, &len);
        cr_assert_leq(len, 255, "token %u", i);
    }
    ampx_tokenizer_free(runs);
    cr_assert_eq(ampx_tokenizer_save(t, pj, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_load(pj, &j, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_vocab(j), ampx_tokenizer_vocab(t));
    cr_assert_eq(ampx_tokenizer_eot(j), ampx_tokenizer_eot(t));
    cr_assert_eq(ampx_tokenizer_n_merges(j), ampx_tokenizer_n_merges(t));
    for (uint32_t i = 0; i < ampx_tokenizer_n_merges(t); i++) {
        uint32_t a, b, c, d;
        ampx_tokenizer_merge(t, i, &a, &b), ampx_tokenizer_merge(j, i, &c, &d);
        cr_assert(a == c && b == d, "merge %u", i);
    }
    /* llm.c's file: the same bytes per token, decoding only */
    cr_assert_eq(ampx_tokenizer_save_llmc(t, pl, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_load(pl, &l, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_vocab(l), ampx_tokenizer_vocab(t));
    cr_assert_eq(ampx_tokenizer_eot(l), ampx_tokenizer_eot(t));
    cr_assert_not(ampx_tokenizer_can_encode(l));
    for (uint32_t i = 0; i < ampx_tokenizer_vocab(t); i++) {
        size_t la, lb;
        const unsigned char *a = ampx_tokenizer_token(t, i, &la),
                            *b = ampx_tokenizer_token(l, i, &lb);
        cr_assert(la == lb && !memcmp(a, b, la), "token %u", i);
    }
    cr_assert_null(ampx_tokenizer_token(l, ampx_tokenizer_vocab(l), &n));
    ampx_token_buf buf = {0};
    cr_assert_eq(ampx_tokenizer_encode(l, odd, 10, &buf, err, sizeof err), -1);
    cr_assert(strstr(err, "decodes only"), "%s", err);
    /* a token file: what is written is read back; ids past the vocabulary are refused */
    cr_assert_eq(ampx_tokenizer_encode(j, odd, n, &buf, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_token_file_write(pt, buf.ids, buf.n, err, sizeof err), 0, "%s", err);
    uint16_t *ids;
    size_t nr;
    cr_assert_eq(ampx_token_file_read(pt, ampx_tokenizer_vocab(j), &ids, &nr, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(nr, buf.n);
    for (size_t i = 0; i < nr; i++)
        cr_assert_eq(ids[i], buf.ids[i]);
    free(ids);
    cr_assert_eq(ampx_token_file_read(pt, 256, &ids, &nr, err, sizeof err), -1);
    cr_assert(strstr(err, "outside the model's vocabulary"), "%s", err);
    uint32_t big = 70000;
    cr_assert_eq(ampx_token_file_write(pt, &big, 1, err, sizeof err), -1);
    cr_assert(strstr(err, "below 65536"), "%s", err);
    remove(pj), remove(pl), remove(pt);
    free(buf.ids), free(odd), free(gen);
    ampx_tokenizer_free(t), ampx_tokenizer_free(j), ampx_tokenizer_free(l);
}

/* Loading text as a tokenizer fails with a message holding want. */
static void refused(const char *text, size_t n, const char *want) {
    char *p = tmp_path("bad"), err[512] = "";
    write_bytes(p, text, n);
    ampx_tokenizer *t = NULL;
    cr_assert_eq(ampx_tokenizer_load(p, &t, err, sizeof err), -1, "accepted: %.60s", text);
    cr_assert_null(t);
    cr_assert(strstr(err, want), "expected '%s' in: %s", want, err);
    cr_assert_null(strchr(err, '\n'), "not one line: %s", err);
    remove(p);
}

#define HEAD "{\"format\": \"ampx-bpe\", \"version\": 1, \"pre_split\": \"gpt2\", "

Test(bpe, json_refusals) {
    static const char *const cases[][2] = {
        {HEAD "\"vocab_size\": 258, \"eot\": 257, \"merges\": [[97, 98]]}", NULL},
        {HEAD "\"vocab_size\": 258, \"eot\": 257, \"merges\": [[97, 256]]}",
         ":1:106: $.merges[0][1]: expected a token id in [0, 256)"},
        {HEAD "\"vocab_size\": 259, \"eot\": 258, \"merges\": [[97, 98], [256, 256.5]]}",
         "$.merges[1][1]: expected a token id in [0, 257)"},
        {HEAD "\"vocab_size\": 259, \"eot\": 258, \"merges\": [[97, 98], [97, 98]]}",
         "merge 1 repeats the pair (97, 98) of merge 0"},
        {HEAD "\"vocab_size\": 259, \"eot\": 258, \"merges\": [[97, 98]]}",
         "$.merges: expected an array of 2 merges"},
        {HEAD "\"vocab_size\": 258, \"eot\": 3, \"merges\": [[97, 98]]}", "$.eot: expected 257"},
        {HEAD "\"vocab_size\": 70000, \"eot\": 3, \"merges\": []}", "$.vocab_size"},
        {HEAD "\"vocab_size\": 258, \"eot\": 257, \"merges\": [[97]]}",
         "$.merges[0]: expected a merge"},
        {HEAD "\"vocab_size\": 258, \"eot\": 257}", "merges"},
        {HEAD "\"vocab_size\": 258, \"eot\": 257, \"merges\": [[97, 98]], \"merge\": 1}",
         "$.merge"},
        {"{\"format\": \"bpe\", \"version\": 1}", "$.format"},
        {"{\"format\": \"ampx-bpe\", \"version\": 2}", "$.version"},
        {HEAD "\"vocab_size\": 258, \"eot\": 257, \"merges\": [[97, 98]],}", ":1:"},
        {"[1, 2]", "neither ampx's JSON tokenizer file"},
        {"", "neither"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (!cases[c][1]) { /* the well-formed one is read */
            char *p = tmp_path("good"), err[512];
            write_bytes(p, cases[c][0], strlen(cases[c][0]));
            ampx_tokenizer *t = NULL;
            cr_assert_eq(ampx_tokenizer_load(p, &t, err, sizeof err), 0, "%s", err);
            size_t len;
            const unsigned char *b = ampx_tokenizer_token(t, 256, &len);
            cr_assert(len == 2 && b[0] == 'a' && b[1] == 'b');
            ampx_tokenizer_free(t);
            remove(p);
            continue;
        }
        refused(cases[c][0], strlen(cases[c][0]), cases[c][1]);
    }
    static const char nul[] = "{\"format\": \"ampx-bpe\"}\0 trailing";
    refused(nul, sizeof nul - 1, "a NUL byte at offset 22");
}

/* An llm.c tokenizer file: the header, then tokens "a", "b", ... of length 1. */
static size_t llmc_file(unsigned char *b, uint32_t magic, uint32_t version, uint32_t vocab,
                        uint32_t eot, uint32_t tokens) {
    uint32_t h[256] = {magic, version, vocab, eot};
    memcpy(b, h, sizeof h);
    size_t at = sizeof h;
    for (uint32_t i = 0; i < tokens; i++)
        b[at++] = 1, b[at++] = (unsigned char)('a' + i % 26);
    return at;
}

Test(bpe, llmc_refusals) {
    static unsigned char b[1024 + 2 * 60000];
    size_t n = llmc_file(b, 20240328, 2, 10, 9, 10);
    char *p  = tmp_path("llmc"), err[512];
    write_bytes(p, b, n);
    ampx_tokenizer *t = NULL;
    cr_assert_eq(ampx_tokenizer_load(p, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_vocab(t), 10);
    cr_assert_eq(ampx_tokenizer_eot(t), 9);
    ampx_tokenizer_free(t);
    remove(p);
    refused((char *)b, 600, "600 bytes, shorter than the 1024-byte header");
    refused((char *)b + 4, 600, "neither"); /* no magic to go by */
    n = llmc_file(b, 20240328, 3, 10, 9, 10);
    refused((char *)b, n, "the header's version is 3");
    n = llmc_file(b, 20240328, 2, 0, 0, 0);
    refused((char *)b, n, "the header's vocab_size is 0");
    n = llmc_file(b, 20240328, 1, 10, 0, 10);
    refused((char *)b, n, "version 1 is GPT-2's 50257 tokens");
    n = llmc_file(b, 20240328, 1, 50257, 0, 50257);
    write_bytes(p, b, n);
    cr_assert_eq(ampx_tokenizer_load(p, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ampx_tokenizer_eot(t), 50256); /* version 1: GPT-2's */
    ampx_tokenizer_free(t);
    remove(p);
    n = llmc_file(b, 20240328, 2, 10, 10, 10);
    refused((char *)b, n, "the header's eot_token is 10");
    n = llmc_file(b, 20240328, 2, 10, 9, 9);
    refused((char *)b, n, "needs at least 20 bytes");
    n               = llmc_file(b, 20240328, 2, 10, 9, 10);
    b[1024 + 2 * 3] = 0;
    refused((char *)b, n, "token 3 (byte 1030) has length 0");
    n               = llmc_file(b, 20240328, 2, 10, 9, 10);
    b[1024 + 2 * 9] = 7;
    refused((char *)b, n, "token 9 (byte 1042) of 7 bytes runs past the end");
    n = llmc_file(b, 20240328, 2, 10, 9, 12);
    refused((char *)b, n, "4 bytes follow the last of the header's 10 tokens");
    n       = llmc_file(b, 20240328, 2, 10, 9, 10);
    b[1024] = 5; /* token 0 takes 5 bytes: the last token is cut */
    refused((char *)b, n, "the file ends at token");
}
