/* bpe.c — a byte-level BPE tokenizer's vocabulary and its encoder (bpe.h).
 *
 * Encoding is exact against the merge order: within a pre-split chunk, the adjacent pair of
 * lowest merge rank is merged first, and of equal ranks the leftmost (minbpe's and GPT-2's
 * rule). The chunk is a linked list of tokens and a min-heap of (rank, position) holds every
 * adjacent pair that has a merge; an entry whose tokens changed since it was pushed is
 * dropped when it comes up. A merge only makes pairs with its new token, whose ranks are
 * above its own (a merge names earlier tokens only), so the heap's order is the rule's. Chunks
 * repeat (words), so encoded chunks are kept in a cache. */
#include "text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "text/pretok.h"

#define CACHE_MAX_CHUNKS (1u << 20) /* cached chunks */
#define CACHE_MAX_IDS (1u << 24)    /* ids of cached chunks together */
#define CACHE_MAX_CHUNK_BYTES 256   /* longer chunks are not cached */
#define RANK_NONE 0xFFFFFFFFu

// ---------------------------------------------------------------------------------------
// Building: token bytes and the rank table

static uint32_t rank_hash(uint32_t key, size_t cap) {
    return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & (uint32_t)(cap - 1);
}

/* The rank of pair (a, b), or RANK_NONE. */
static inline uint32_t rank_of(const ampx_tokenizer *t, uint32_t a, uint32_t b) {
    uint32_t key = a << 16 | b;
    for (size_t s = rank_hash(key, t->rank_cap);; s = (s + 1) & (t->rank_cap - 1)) {
        if (t->rank_key[s] == key) return t->rank_val[s];
        if (t->rank_key[s] == RANK_NONE) return RANK_NONE;
    }
}

/* 0; -1 when out of memory; 1 + i when merge i repeats an earlier merge's pair. */
static int build_ranks(ampx_tokenizer *t) {
    size_t cap = 16;
    while (cap < 2 * (size_t)t->n_merges + 2)
        cap *= 2;
    t->rank_cap = cap;
    t->rank_key = malloc(cap * sizeof *t->rank_key);
    t->rank_val = malloc(cap * sizeof *t->rank_val);
    if (!t->rank_key || !t->rank_val) return -1;
    memset(t->rank_key, 0xFF, cap * sizeof *t->rank_key);
    for (uint32_t i = 0; i < t->n_merges; i++) {
        uint32_t key = t->merges[i][0] << 16 | t->merges[i][1];
        size_t s     = rank_hash(key, cap);
        while (t->rank_key[s] != RANK_NONE && t->rank_key[s] != key)
            s = (s + 1) & (cap - 1);
        if (t->rank_key[s] == key) return (int)i + 1; /* a repeated pair */
        t->rank_key[s] = key;
        t->rank_val[s] = i;
    }
    return 0;
}

ampx_tokenizer *bpe_from_vocab(uint32_t vocab, uint32_t eot, uint64_t *off, uint32_t *len,
                               unsigned char *bytes) {
    ampx_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(off), free(len), free(bytes);
        return NULL;
    }
    t->vocab = vocab, t->eot = eot, t->decode_only = 1;
    t->tok_off = off, t->tok_len = len, t->bytes = bytes;
    return t;
}

ampx_tokenizer *bpe_from_merges(uint32_t (*merges)[2], uint32_t n_merges, const char *what,
                                ampx_err e) {
    ampx_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(merges);
        err_set(e, "%s: out of memory", what);
        return NULL;
    }
    t->merges = merges, t->n_merges = n_merges;
    t->vocab = 256 + n_merges + 1, t->eot = 256 + n_merges;
    uint64_t total = 256 + sizeof BPE_EOT_TEXT - 1;
    t->tok_off     = malloc(sizeof *t->tok_off * t->vocab);
    t->tok_len     = malloc(sizeof *t->tok_len * t->vocab);
    if (!t->tok_off || !t->tok_len) goto oom;
    for (uint32_t i = 0; i < 256; i++)
        t->tok_len[i] = 1;
    for (uint32_t i = 0; i < n_merges; i++) {
        uint32_t a = merges[i][0], b = merges[i][1], id = 256 + i;
        if (a >= id || b >= id) {
            err_set(e, "%s: merge %u makes token %u from %u and %u, not both earlier tokens", what,
                    i, id, a, b);
            goto fail;
        }
        total += (uint64_t)t->tok_len[a] + t->tok_len[b];
        if (total > BPE_MAX_TOKEN_BYTES) {
            err_set(e, "%s: merge %u: the tokens' bytes add up to more than %u", what, i,
                    BPE_MAX_TOKEN_BYTES);
            goto fail;
        }
        t->tok_len[id] = t->tok_len[a] + t->tok_len[b];
    }
    t->tok_len[t->eot] = sizeof BPE_EOT_TEXT - 1;
    if (!(t->bytes = malloc(total))) goto oom;
    uint64_t at = 0;
    for (uint32_t i = 0; i < t->vocab; i++) {
        t->tok_off[i] = at;
        if (i < 256)
            t->bytes[at] = (unsigned char)i;
        else if (i == t->eot)
            memcpy(t->bytes + at, BPE_EOT_TEXT, t->tok_len[i]);
        else {
            uint32_t a = merges[i - 256][0], b = merges[i - 256][1];
            memcpy(t->bytes + at, t->bytes + t->tok_off[a], t->tok_len[a]);
            memcpy(t->bytes + at + t->tok_len[a], t->bytes + t->tok_off[b], t->tok_len[b]);
        }
        at += t->tok_len[i];
    }
    int dup = build_ranks(t);
    if (dup < 0) goto oom;
    if (dup > 0) {
        uint32_t i = (uint32_t)dup - 1;
        err_set(e, "%s: merge %u repeats the pair (%u, %u) of merge %u", what, i, merges[i][0],
                merges[i][1], rank_of(t, merges[i][0], merges[i][1]));
        goto fail;
    }
    return t;
oom:
    err_set(e, "%s: out of memory", what);
fail:
    ampx_tokenizer_free(t);
    return NULL;
}

// ---------------------------------------------------------------------------------------
// The public accessors

AMPX_API void ampx_tokenizer_free(ampx_tokenizer *t) {
    if (!t) return;
    free(t->merges), free(t->tok_off), free(t->tok_len), free(t->bytes);
    free(t->rank_key), free(t->rank_val);
    bytemap_free(&t->cache);
    free(t->cache_off), free(t->cache_len), free(t->cache_ids);
    free(t->s_tok), free(t->s_next), free(t->s_prev), free(t->s_heap);
    free(t);
}

AMPX_API uint32_t ampx_tokenizer_vocab(const ampx_tokenizer *t) {
    return t->vocab;
}

AMPX_API uint32_t ampx_tokenizer_eot(const ampx_tokenizer *t) {
    return t->eot;
}

AMPX_API uint32_t ampx_tokenizer_n_merges(const ampx_tokenizer *t) {
    return t->n_merges;
}

AMPX_API int ampx_tokenizer_can_encode(const ampx_tokenizer *t) {
    return !t->decode_only;
}

AMPX_API void ampx_tokenizer_merge(const ampx_tokenizer *t, uint32_t i, uint32_t *a, uint32_t *b) {
    *a = i < t->n_merges ? t->merges[i][0] : 0;
    *b = i < t->n_merges ? t->merges[i][1] : 0;
}

AMPX_API const unsigned char *ampx_tokenizer_token(const ampx_tokenizer *t, uint32_t id,
                                                   size_t *len) {
    if (id >= t->vocab) return NULL;
    *len = t->tok_len[id];
    return t->bytes + t->tok_off[id];
}

AMPX_API size_t ampx_pretokenize_next(const unsigned char *s, size_t n, size_t i) {
    return pretok_next(s, n, i);
}

// ---------------------------------------------------------------------------------------
// Encoding one chunk: a heap of (rank << 32 | position) over a linked list of tokens

static int push_ids(ampx_token_buf *out, const uint32_t *ids, size_t n) {
    if (out->n + n > out->cap) {
        size_t cap = out->cap ? out->cap : 1024;
        while (cap < out->n + n)
            cap *= 2;
        uint32_t *p = realloc(out->ids, cap * sizeof *p);
        if (!p) return -1;
        out->ids = p, out->cap = cap;
    }
    memcpy(out->ids + out->n, ids, n * sizeof *ids);
    out->n += n;
    return 0;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i    = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i    = c;
    }
    h[i] = v;
    return top;
}

static int scratch(ampx_tokenizer *t, size_t n) {
    if (n <= t->s_cap) return 0;
    size_t cap = t->s_cap ? t->s_cap : 256;
    while (cap < n)
        cap *= 2;
    free(t->s_tok), free(t->s_next), free(t->s_prev), free(t->s_heap);
    t->s_tok  = malloc(cap * sizeof *t->s_tok);
    t->s_next = malloc(cap * sizeof *t->s_next);
    t->s_prev = malloc(cap * sizeof *t->s_prev);
    t->s_heap = malloc(cap * sizeof *t->s_heap);
    t->s_cap  = t->s_tok && t->s_next && t->s_prev && t->s_heap ? cap : 0;
    return t->s_cap ? 0 : -1;
}

#define DEAD 0xFFFFFFFFu

/* The chunk's tokens into t->s_tok, in order; their count. */
static size_t merge_chunk(ampx_tokenizer *t, const unsigned char *s, uint32_t n) {
    uint32_t *tok = t->s_tok, *next = t->s_next, *prev = t->s_prev;
    uint64_t *heap = t->s_heap;
    size_t nh      = 0;
    for (uint32_t i = 0; i < n; i++) {
        tok[i] = s[i], next[i] = i + 1, prev[i] = i - 1; /* prev[0] wraps: none */
        uint32_t r = i + 1 < n ? rank_of(t, s[i], s[i + 1]) : RANK_NONE;
        if (r != RANK_NONE) heap_push(heap, &nh, (uint64_t)r << 32 | i);
    }
    while (nh) {
        uint64_t top = heap_pop(heap, &nh);
        uint32_t r = (uint32_t)(top >> 32), i = (uint32_t)top, j = next[i];
        /* stale: i was merged into its left, or its pair is no longer merges[r] */
        if (tok[i] == DEAD || j >= n || tok[i] != t->merges[r][0] || tok[j] != t->merges[r][1])
            continue;
        tok[i] = 256 + r, tok[j] = DEAD;
        next[i] = next[j];
        if (next[j] < n) prev[next[j]] = i;
        uint32_t p = prev[i], q = next[i];
        if (p < n && (r = rank_of(t, tok[p], tok[i])) != RANK_NONE)
            heap_push(heap, &nh, (uint64_t)r << 32 | p);
        if (q < n && (r = rank_of(t, tok[i], tok[q])) != RANK_NONE)
            heap_push(heap, &nh, (uint64_t)r << 32 | i);
    }
    size_t k = 0;
    for (uint32_t i = 0; i < n; i = next[i])
        tok[k++] = tok[i];
    return k;
}

/* Keeps a chunk's ids in the cache while there is room. */
static void cache_put(ampx_tokenizer *t, const unsigned char *s, size_t n, const uint32_t *ids,
                      size_t k) {
    if (t->cache.n >= CACHE_MAX_CHUNKS || t->cache_ids_n + k > CACHE_MAX_IDS) return;
    if (t->cache.n == t->cache_cap) {
        size_t cap  = t->cache_cap ? 2 * t->cache_cap : 4096;
        uint64_t *o = realloc(t->cache_off, cap * sizeof *o);
        if (o) t->cache_off = o;
        uint32_t *l = realloc(t->cache_len, cap * sizeof *l);
        if (l) t->cache_len = l;
        if (!o || !l) return;
        t->cache_cap = cap;
    }
    if (t->cache_ids_n + k > t->cache_ids_cap) {
        size_t cap  = t->cache_ids_cap ? 2 * t->cache_ids_cap : 1 << 16;
        uint32_t *p = realloc(t->cache_ids, cap * sizeof *p);
        if (!p) return;
        t->cache_ids = p, t->cache_ids_cap = cap;
    }
    int added;
    int64_t i = bytemap_insert(&t->cache, s, n, &added);
    if (i < 0 || !added) return;
    t->cache_off[i] = t->cache_ids_n;
    t->cache_len[i] = (uint32_t)k;
    memcpy(t->cache_ids + t->cache_ids_n, ids, k * sizeof *ids);
    t->cache_ids_n += k;
}

static int encode_chunk(ampx_tokenizer *t, const unsigned char *s, size_t n, ampx_token_buf *out,
                        ampx_err e) {
    if (n == 1) {
        uint32_t id = s[0];
        return push_ids(out, &id, 1) ? err_set(e, "out of memory") : 0;
    }
    int cacheable = n <= CACHE_MAX_CHUNK_BYTES;
    if (cacheable) {
        int64_t i = bytemap_find(&t->cache, s, n);
        if (i >= 0)
            return push_ids(out, t->cache_ids + t->cache_off[i], t->cache_len[i])
                       ? err_set(e, "out of memory")
                       : 0;
    }
    if (n >= 0x7FFFFFFF)
        return err_set(e, "a pre-split chunk of %zu bytes is over the encoder's 2 GiB", n);
    if (scratch(t, n)) return err_set(e, "out of memory for a chunk of %zu bytes", n);
    size_t k = merge_chunk(t, s, (uint32_t)n);
    if (cacheable) cache_put(t, s, n, t->s_tok, k);
    return push_ids(out, t->s_tok, k) ? err_set(e, "out of memory") : 0;
}

AMPX_API int ampx_tokenizer_encode(ampx_tokenizer *t, const unsigned char *text, size_t len,
                                   ampx_token_buf *out, char *err, size_t err_cap) {
    ampx_err e = ERR(err, err_cap);
    if (t->decode_only)
        return err_set(e, "this tokenizer (llm.c's file) has no merges: it decodes only");
    for (size_t i = 0, end; i < len; i = end) {
        end = pretok_next(text, len, i);
        if (encode_chunk(t, text + i, end - i, out, e)) return -1;
    }
    return 0;
}
