/* bpe_io.c — the files of tokenizing: ampx's JSON tokenizer file, llm.c's tokenizer file
 * (gpt2_tokenizer.bin, for decoding), and llm.c's token files. Every file read is untrusted:
 * each field is checked and a refusal is one line naming the file and the field.
 *
 * ampx's tokenizer file (docs/LANGUAGE_MODELS.md):
 *   {"format": "ampx-bpe", "version": 1, "pre_split": "gpt2", "vocab_size": 4096,
 *    "eot": 4095, "merges": [[32, 116], [104, 101], ...]}
 * merge i makes token 256 + i; vocab_size is 256 + merges + 1 and eot the last id.
 *
 * llm.c's tokenizer file (llmc/tokenizer.h, written by train_gpt2.py's write_tokenizer): a
 * header of 256 uint32 (magic 20240328, version 1 or 2, the vocabulary size, in version 2
 * the end-of-text id; version 1 means GPT-2's 50257 tokens and end-of-text 50256), then per
 * token one uint8 length (at least 1) and that many bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/input.h"
#include "config/json.h"
#include "config/schema.h"
#include "text/bpe.h"

#define LLMC_TOKENIZER_MAGIC 20240328u
#define LLMC_TOKENS_MAGIC 20240520
#define LLMC_MAX_VOCAB (1u << 22)

// ---------------------------------------------------------------------------------------
// ampx's JSON file

/* Merge i's two ids from its JSON value: an array of two integers naming earlier tokens. */
static int read_merge(jctx *c, const json_value *v, uint32_t i, uint32_t out[2]) {
    if (v->type != JSON_ARRAY || v->n_items != 2)
        return jerr(c, v, "expected a merge: an array of two token ids");
    for (int k = 0; k < 2; k++) {
        const json_value *x = v->items[k];
        if (x->type != JSON_NUMBER || x->num != floor(x->num) || x->num < 0 || x->num >= 256.0 + i)
            return jerr(c, x,
                        "expected a token id in [0, %u): merge %u makes token %u from "
                        "earlier tokens",
                        256 + i, i, 256 + i);
        out[k] = (uint32_t)x->num;
    }
    return 0;
}

/* The most JSON values a tokenizer file holds: the root, its six members, the merges array's
 * members of BPE_MAX_VOCAB - 257 merges of three values each (the pair and its two ids). */
#define BPE_JSON_MAX_VALUES (7 + 3 * (uint64_t)BPE_MAX_VOCAB)

static ampx_tokenizer *read_json(const char *path, const char *text, ampx_err e) {
    static const char *const keys[]    = {"format", "version", "pre_split", "vocab_size",
                                          "eot",    "merges",  NULL};
    static const char *const formats[] = {"ampx-bpe", NULL}, *const splits[] = {"gpt2", NULL};
    /* counted before parsing: a file of 10^7 merges is refused in one pass, not after the
     * parser spent ~110 bytes on each of its values */
    uint64_t n_values = json_count_values(text);
    if (n_values > BPE_JSON_MAX_VALUES) {
        err_set(e,
                "%s: %llu JSON values, more than the %llu a tokenizer of at most %u tokens holds "
                "(three per merge)",
                path, (unsigned long long)n_values, (unsigned long long)BPE_JSON_MAX_VALUES,
                BPE_MAX_VOCAB);
        return NULL;
    }
    json_value *root = json_parse(text, path, e);
    if (!root) return NULL;
    jctx c     = {.file = path, .err = e};
    int format = 0, split = 0;
    int64_t version = 0, vocab = 0, eot = 0;
    uint32_t(*merges)[2] = NULL;
    ampx_tokenizer *t    = NULL;
    if (jkeys(&c, root, keys) || jenum(&c, root, "format", 1, formats, &format) ||
        jint(&c, root, "version", 1, 1, 1, &version) ||
        jenum(&c, root, "pre_split", 1, splits, &split) ||
        jint(&c, root, "vocab_size", 1, 257, BPE_MAX_VOCAB, &vocab) ||
        jint(&c, root, "eot", 1, 0, BPE_MAX_VOCAB, &eot))
        goto out;
    const json_value *m = json_get(root, "merges"), *ev = json_get(root, "eot");
    if (eot != vocab - 1) {
        jerr(&c, ev, "expected %lld: the end-of-text token is the last of vocab_size %lld",
             (long long)(vocab - 1), (long long)vocab);
        goto out;
    }
    if (!m) {
        jmissing(&c, root, "merges");
        goto out;
    }
    if (m->type != JSON_ARRAY || m->n_items != (size_t)vocab - 257) {
        jerr(&c, m,
             "expected an array of %lld merges (vocab_size %lld less 256 bytes and the "
             "end-of-text token), found %s%zu",
             (long long)vocab - 257, (long long)vocab,
             m->type == JSON_ARRAY ? "" : "no array: ", m->type == JSON_ARRAY ? m->n_items : 0);
        goto out;
    }
    if (!(merges = malloc(sizeof *merges * (m->n_items + 1)))) {
        err_set(e, "%s: out of memory", path);
        goto out;
    }
    for (uint32_t i = 0; i < m->n_items; i++)
        if (read_merge(&c, m->items[i], i, merges[i])) goto out;
    t      = bpe_from_merges(merges, (uint32_t)m->n_items, path, e);
    merges = NULL;
out:
    free(merges);
    json_free(root);
    return t;
}

AMPX_API int ampx_tokenizer_save(const ampx_tokenizer *t, const char *path, char *err,
                                 size_t err_cap) {
    ampx_err e = ERR(err, err_cap);
    if (t->decode_only)
        return err_set(e, "%s: this tokenizer (from llm.c's file) has no merges to write", path);
    ampx_output *o;
    if (ampx_output_open(path, &o, err, err_cap)) return -1;
    FILE *f = ampx_output_stream(o);
    fprintf(f,
            "{\n  \"format\": \"ampx-bpe\",\n  \"version\": 1,\n  \"pre_split\": \"gpt2\",\n"
            "  \"vocab_size\": %u,\n  \"eot\": %u,\n  \"merges\": [",
            t->vocab, t->eot);
    for (uint32_t i = 0; i < t->n_merges; i++)
        fprintf(f, "%s\n    [%u, %u]", i ? "," : "", t->merges[i][0], t->merges[i][1]);
    fprintf(f, "%s]\n}\n", t->n_merges ? "\n  " : "");
    return ampx_output_commit(o, err, err_cap) ? -1 : 0; /* renamed into place when whole */
}

// ---------------------------------------------------------------------------------------
// llm.c's tokenizer file

static uint32_t u32_at(const unsigned char *b, size_t i) {
    uint32_t v;
    memcpy(&v, b + 4 * i, 4);
    return v;
}

/* The header's fields; 0 or -1 with the field named. */
static int llmc_header(const char *path, const unsigned char *b, size_t len, uint32_t *vocab,
                       uint32_t *eot, ampx_err e) {
    if (len < 1024)
        return err_set(e,
                       "%s: %zu bytes, shorter than the 1024-byte header of llm.c's tokenizer "
                       "file",
                       path, len);
    uint32_t version = u32_at(b, 1);
    *vocab           = u32_at(b, 2);
    if (version != 1 && version != 2)
        return err_set(e,
                       "%s: the header's version is %u; llm.c's tokenizer versions 1 and 2 "
                       "are read",
                       path, version);
    if (*vocab == 0 || *vocab > LLMC_MAX_VOCAB)
        return err_set(e, "%s: the header's vocab_size is %u; expected 1 to %u", path, *vocab,
                       LLMC_MAX_VOCAB);
    if (version == 1 && *vocab != 50257)
        return err_set(e,
                       "%s: the header's vocab_size is %u; version 1 is GPT-2's 50257 tokens "
                       "(version 2 names its own end-of-text token)",
                       path, *vocab);
    *eot = version == 1 ? 50256 : u32_at(b, 3);
    if (*eot >= *vocab)
        return err_set(e, "%s: the header's eot_token is %u, outside the vocabulary of %u", path,
                       *eot, *vocab);
    if ((uint64_t)len - 1024 < 2 * (uint64_t)*vocab)
        return err_set(e,
                       "%s: the header's vocab_size %u needs at least %llu bytes of tokens; "
                       "%zu follow the header",
                       path, *vocab, 2 * (unsigned long long)*vocab, len - 1024);
    return 0;
}

static ampx_tokenizer *read_llmc(const char *path, const unsigned char *b, size_t len, ampx_err e) {
    uint32_t vocab = 0, eot = 0;
    if (llmc_header(path, b, len, &vocab, &eot, e)) return NULL;
    uint64_t *off        = malloc(sizeof *off * vocab);
    uint32_t *tl         = malloc(sizeof *tl * vocab);
    unsigned char *bytes = malloc(len - 1024);
    if (!off || !tl || !bytes) {
        err_set(e, "%s: out of memory", path);
        goto fail;
    }
    size_t at = 1024, n = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (at >= len) {
            err_set(e, "%s: the file ends at token %u of the header's vocab_size %u", path, i,
                    vocab);
            goto fail;
        }
        uint32_t l = b[at];
        if (l == 0) {
            err_set(e, "%s: token %u (byte %zu) has length 0; every token has a byte at least",
                    path, i, at);
            goto fail;
        }
        if (l > len - at - 1) {
            err_set(e, "%s: token %u (byte %zu) of %u bytes runs past the end of the file", path, i,
                    at, l);
            goto fail;
        }
        memcpy(bytes + n, b + at + 1, l);
        off[i] = n, tl[i] = l;
        n += l, at += 1 + l;
    }
    if (at != len) {
        err_set(e, "%s: %zu bytes follow the last of the header's %u tokens", path, len - at,
                vocab);
        goto fail;
    }
    ampx_tokenizer *t = bpe_from_vocab(vocab, eot, off, tl, bytes);
    if (!t) err_set(e, "%s: out of memory", path);
    return t;
fail:
    free(off), free(tl), free(bytes);
    return NULL;
}

AMPX_API int ampx_tokenizer_save_llmc(const ampx_tokenizer *t, const char *path, char *err,
                                      size_t err_cap) {
    ampx_err e = ERR(err, err_cap);
    for (uint32_t i = 0; i < t->vocab; i++)
        if (t->tok_len[i] > 255 || t->tok_len[i] == 0)
            return err_set(e,
                           "%s: token %u is %u bytes long; llm.c's tokenizer file holds 1 to "
                           "255 bytes a token",
                           path, i, t->tok_len[i]);
    uint32_t h[256] = {LLMC_TOKENIZER_MAGIC, 2, t->vocab, t->eot};
    ampx_output *o;
    if (ampx_output_open(path, &o, err, err_cap)) return -1;
    FILE *f = ampx_output_stream(o);
    fwrite(h, sizeof h, 1, f);
    for (uint32_t i = 0; i < t->vocab; i++) {
        fputc((int)t->tok_len[i], f);
        fwrite(t->bytes + t->tok_off[i], 1, t->tok_len[i], f);
    }
    return ampx_output_commit(o, err, err_cap) ? -1 : 0; /* renamed into place when whole */
}

// ---------------------------------------------------------------------------------------
// Either file

/* The cap for path: llm.c's binary file (its magic first) has the input cap; ampx's JSON file
 * the 16 MiB of every JSON file unless the input cap was set, so the file's size is checked
 * before it is read. 0 after a message in e. */
static uint64_t tokenizer_cap(const char *path, ampx_err e) {
    uint64_t size;
    FILE *f = input_open(path, input_max_bytes(), &size, e);
    if (!f) return 0;
    unsigned char head[4] = {0};
    size_t got            = fread(head, 1, sizeof head, f);
    fclose(f);
    if ((got == 4 && u32_at(head, 0) == LLMC_TOKENIZER_MAGIC) || input_max_is_set())
        return input_max_bytes();
    if (size > JSON_MAX_FILE_BYTES) {
        err_set(e,
                "%s: %llu bytes, more than the %llu MiB a JSON tokenizer file may be (one of "
                "%u tokens is about 1 MiB; raise the input limit with --max-input-bytes or "
                "AMPX_MAX_INPUT_BYTES)",
                path, (unsigned long long)size, JSON_MAX_FILE_BYTES >> 20, BPE_MAX_VOCAB);
        return 0;
    }
    return JSON_MAX_FILE_BYTES;
}

AMPX_API int ampx_tokenizer_load(const char *path, ampx_tokenizer **out, char *err,
                                 size_t err_cap) {
    ampx_err e = ERR(err, err_cap);
    size_t len;
    *out         = NULL;
    uint64_t cap = tokenizer_cap(path, e);
    if (!cap) return -1;
    char *b = input_read(path, cap, &len, ERR(err, err_cap));
    if (!b) return -1;
    const unsigned char *u = (const unsigned char *)b;
    if (len >= 4 && u32_at(u, 0) == LLMC_TOKENIZER_MAGIC) {
        *out = read_llmc(path, u, len, e);
    } else {
        size_t i = 0;
        while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
            i++;
        if (i == len || b[i] != '{')
            err_set(e,
                    "%s: neither ampx's JSON tokenizer file (an object) nor llm.c's "
                    "tokenizer file (magic %u)",
                    path, LLMC_TOKENIZER_MAGIC);
        else if (strlen(b) != len)
            err_set(e, "%s: a NUL byte at offset %zu: not a JSON tokenizer file", path, strlen(b));
        else
            *out = read_json(path, b, e);
    }
    free(b);
    return *out ? 0 : -1;
}

// ---------------------------------------------------------------------------------------
// llm.c's token files

AMPX_API int ampx_token_file_write(const char *path, const uint32_t *ids, size_t n, char *err,
                                   size_t err_cap) {
    ampx_err e = ERR(err, err_cap);
    if (n > 0x7FFFFFFF)
        return err_set(e, "%s: %zu tokens; a token file holds at most 2^31 - 1", path, n);
    int32_t h[256] = {LLMC_TOKENS_MAGIC, 1, (int32_t)n};
    ampx_output *o;
    if (ampx_output_open(path, &o, err, err_cap)) return -1;
    FILE *f = ampx_output_stream(o);
    fwrite(h, sizeof h, 1, f);
    uint16_t buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < 4096 && i < n; k++, i++) {
            if (ids[i] > 0xFFFF) {
                ampx_output_discard(o);
                return err_set(e, "%s: token %zu is %u: token files hold ids below 65536", path, i,
                               ids[i]);
            }
            buf[k] = (uint16_t)ids[i];
        }
        fwrite(buf, sizeof *buf, k, f);
    }
    return ampx_output_commit(o, err, err_cap) ? -1 : 0; /* renamed into place when whole */
}
