/* bpe_train.c — learning a byte-level BPE's merges (minbpe's algorithm, made incremental).
 *
 * The texts are pre-split (pretok.h) and the distinct chunks ("words") counted; merges never
 * cross a chunk, so the pair counts are sums over the words of each adjacent pair, weighted
 * by the word's count. Each merge takes the pair of the largest count, ties going to the
 * smallest left id and then the smallest right id (deterministic whatever the hash order),
 * rewrites only the words that hold it and updates only the counts of the pairs it touched:
 *   - every pair has a list of the words it occurs in (entries may go stale: a word is
 *     checked when it is visited; a word appears in a pair's list once per time the pair
 *     was created in it, and a per-merge stamp visits it once);
 *   - a max-heap of (count, pair) with lazy deletion: a count that changes is pushed anew
 *     and an entry that no longer matches its pair's count is dropped when it comes up.
 * A visited word has all its pairs' counts taken out and the rewritten word's put back, so
 * the counts stay exact in every case (runs like "aaaa", a pair next to itself); only pairs
 * whose count differs at the end of the merge are pushed. A pair whose token would be longer
 * than 255 bytes (llm.c's tokenizer file holds no longer one) is never merged: it is passed
 * over and the next pair taken. */
#include <stdlib.h>
#include <string.h>

#include "text/bpe.h"
#include "text/pretok.h"

typedef struct pair_slot {
    uint32_t a, b;
    int64_t count, before; /* before: the count when this merge first touched it */
    uint32_t stamp;        /* the merge (1-based) that last touched it */
    int too_long;          /* its token would be over BPE_MAX_TOKEN_LEN bytes: never merged */
    uint32_t *words, n_words, cap_words;
} pair_slot;

typedef struct heap_entry {
    int64_t count;
    uint32_t slot;
} heap_entry;

typedef struct trainer {
    uint32_t *tok; /* the words' tokens, each word at w_off with w_len tokens */
    size_t *w_off;
    uint32_t *w_len, *w_stamp;
    int64_t *w_count;
    size_t n_words;
    pair_slot *pairs;
    size_t n_pairs, cap_pairs;
    uint32_t *pkey, *pval; /* pair (a << 16 | b) -> slot, open addressing */
    size_t pcap;
    heap_entry *heap;
    size_t nh, cap_heap;
    uint32_t *touched;
    size_t n_touched, cap_touched;
    int oom;
} trainer;

#define NO_KEY 0xFFFFFFFFu

// ---------------------------------------------------------------------------------------
// Pairs: slots by key, the heap

static size_t phash(uint32_t key, size_t cap) {
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static int grow_keys(trainer *tr) {
    size_t cap  = tr->pcap ? 2 * tr->pcap : 1 << 14;
    uint32_t *k = malloc(cap * sizeof *k), *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return -1;
    }
    memset(k, 0xFF, cap * sizeof *k);
    for (size_t i = 0; i < tr->pcap; i++) {
        if (tr->pkey[i] == NO_KEY) continue;
        size_t s = phash(tr->pkey[i], cap);
        while (k[s] != NO_KEY)
            s = (s + 1) & (cap - 1);
        k[s] = tr->pkey[i], v[s] = tr->pval[i];
    }
    free(tr->pkey), free(tr->pval);
    tr->pkey = k, tr->pval = v, tr->pcap = cap;
    return 0;
}

/* The slot of pair (a, b), created when absent; UINT32_MAX when out of memory. */
static uint32_t slot_of(trainer *tr, uint32_t a, uint32_t b) {
    if (2 * (tr->n_pairs + 1) > tr->pcap && grow_keys(tr)) return UINT32_MAX;
    uint32_t key = a << 16 | b;
    size_t s     = phash(key, tr->pcap);
    while (tr->pkey[s] != NO_KEY) {
        if (tr->pkey[s] == key) return tr->pval[s];
        s = (s + 1) & (tr->pcap - 1);
    }
    if (tr->n_pairs == tr->cap_pairs) {
        size_t cap   = tr->cap_pairs ? 2 * tr->cap_pairs : 1 << 12;
        pair_slot *p = realloc(tr->pairs, cap * sizeof *p);
        if (!p) return UINT32_MAX;
        tr->pairs = p, tr->cap_pairs = cap;
    }
    pair_slot *p = &tr->pairs[tr->n_pairs];
    memset(p, 0, sizeof *p);
    p->a = a, p->b = b;
    tr->pkey[s] = key, tr->pval[s] = (uint32_t)tr->n_pairs;
    return (uint32_t)tr->n_pairs++;
}

/* x comes out of the heap before y: a larger count, then the smaller (a, b). */
static int before(const trainer *tr, heap_entry x, heap_entry y) {
    if (x.count != y.count) return x.count > y.count;
    const pair_slot *p = &tr->pairs[x.slot], *q = &tr->pairs[y.slot];
    return p->a != q->a ? p->a < q->a : p->b < q->b;
}

static void heap_push(trainer *tr, heap_entry v) {
    if (tr->nh == tr->cap_heap) {
        size_t cap    = tr->cap_heap ? 2 * tr->cap_heap : 1 << 12;
        heap_entry *h = realloc(tr->heap, cap * sizeof *h);
        if (!h) {
            tr->oom = 1;
            return;
        }
        tr->heap = h, tr->cap_heap = cap;
    }
    size_t i = tr->nh++;
    while (i > 0 && before(tr, v, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i           = (i - 1) / 2;
    }
    tr->heap[i] = v;
}

static heap_entry heap_pop(trainer *tr) {
    heap_entry top = tr->heap[0], v = tr->heap[--tr->nh];
    size_t i = 0, n = tr->nh;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(tr, tr->heap[c + 1], tr->heap[c])) c++;
        if (!before(tr, tr->heap[c], v)) break;
        tr->heap[i] = tr->heap[c];
        i           = c;
    }
    if (n) tr->heap[i] = v;
    return top;
}

static void add_word(trainer *tr, pair_slot *p, uint32_t w) {
    if (p->n_words && p->words[p->n_words - 1] == w) return;
    if (p->n_words == p->cap_words) {
        uint32_t cap = p->cap_words ? 2 * p->cap_words : 4;
        uint32_t *ws = realloc(p->words, cap * sizeof *ws);
        if (!ws) {
            tr->oom = 1;
            return;
        }
        p->words = ws, p->cap_words = cap;
    }
    p->words[p->n_words++] = w;
}

/* count(a, b) += delta within merge stamp; the word joins the pair's list when listed. */
static void count_pair(trainer *tr, uint32_t a, uint32_t b, int64_t delta, uint32_t stamp,
                       uint32_t w, int list) {
    uint32_t s = slot_of(tr, a, b);
    if (s == UINT32_MAX) {
        tr->oom = 1;
        return;
    }
    pair_slot *p = &tr->pairs[s];
    if (stamp && p->stamp != stamp) {
        p->stamp = stamp, p->before = p->count;
        if (tr->n_touched == tr->cap_touched) {
            size_t cap  = tr->cap_touched ? 2 * tr->cap_touched : 1024;
            uint32_t *t = realloc(tr->touched, cap * sizeof *t);
            if (!t) {
                tr->oom = 1;
                return;
            }
            tr->touched = t, tr->cap_touched = cap;
        }
        tr->touched[tr->n_touched++] = s;
    }
    p->count += delta;
    if (list) add_word(tr, p, w);
}

// ---------------------------------------------------------------------------------------
// Merging

/* Rewrites word w with (a, b) -> x, its pairs' counts updated within merge stamp. */
static void merge_word(trainer *tr, uint32_t w, uint32_t a, uint32_t b, uint32_t x,
                       uint32_t stamp) {
    uint32_t *t = tr->tok + tr->w_off[w], n = tr->w_len[w], k = 0;
    int64_t c = tr->w_count[w];
    int found = 0;
    for (uint32_t j = 0; j + 1 < n && !found; j++)
        found = t[j] == a && t[j + 1] == b;
    if (!found) return; /* a stale entry of the pair's list */
    for (uint32_t j = 0; j + 1 < n; j++)
        count_pair(tr, t[j], t[j + 1], -c, stamp, w, 0);
    for (uint32_t j = 0; j < n;) {
        if (j + 1 < n && t[j] == a && t[j + 1] == b)
            t[k++] = x, j += 2;
        else
            t[k++] = t[j++];
    }
    tr->w_len[w] = k;
    for (uint32_t j = 0; j + 1 < k; j++)
        count_pair(tr, t[j], t[j + 1], c, stamp, w, t[j] == x || t[j + 1] == x);
}

/* Merge number m (token 256 + m) of the pair in slot s. */
static void merge(trainer *tr, uint32_t s, uint32_t m) {
    uint32_t a = tr->pairs[s].a, b = tr->pairs[s].b, stamp = m + 1;
    uint32_t *words = tr->pairs[s].words, n = tr->pairs[s].n_words;
    tr->pairs[s].words = NULL, tr->pairs[s].n_words = tr->pairs[s].cap_words = 0;
    tr->n_touched = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t w = words[i];
        if (tr->w_stamp[w] == stamp) continue;
        tr->w_stamp[w] = stamp;
        merge_word(tr, w, a, b, 256 + m, stamp);
    }
    free(words);
    for (size_t i = 0; i < tr->n_touched; i++) {
        pair_slot *p = &tr->pairs[tr->touched[i]];
        if (p->count != p->before && p->count > 0)
            heap_push(tr, (heap_entry){p->count, tr->touched[i]});
    }
}

// ---------------------------------------------------------------------------------------
// Training

/* The distinct chunks of the texts and their counts, as the trainer's words. */
static int count_chunks(trainer *tr, const unsigned char *const *texts, const size_t *lens,
                        size_t n, ampx_tokenizer_stats *st) {
    bytemap m       = {0};
    int64_t *counts = NULL;
    size_t cap      = 0;
    for (size_t f = 0; f < n; f++)
        for (size_t i = 0, end; i < lens[f]; i = end) {
            end = pretok_next(texts[f], lens[f], i);
            int added;
            int64_t k = bytemap_insert(&m, texts[f] + i, end - i, &added);
            if (k < 0) goto oom;
            if ((size_t)k == cap) {
                cap        = cap ? 2 * cap : 1 << 12;
                int64_t *c = realloc(counts, cap * sizeof *c);
                if (!c) goto oom;
                counts = c;
            }
            if (added) counts[k] = 0;
            counts[k]++;
            st->chunks++;
        }
    st->unique_chunks = m.n;
    tr->n_words       = m.n;
    tr->tok           = malloc(sizeof *tr->tok * (m.keys_n + 1));
    tr->w_off         = malloc(sizeof *tr->w_off * (m.n + 1));
    tr->w_len         = malloc(sizeof *tr->w_len * (m.n + 1));
    tr->w_stamp       = calloc(m.n + 1, sizeof *tr->w_stamp);
    tr->w_count       = counts;
    counts            = NULL;
    if (!tr->tok || !tr->w_off || !tr->w_len || !tr->w_stamp) goto oom;
    for (size_t i = 0; i < m.keys_n; i++)
        tr->tok[i] = m.keys[i];
    memcpy(tr->w_off, m.key_off, sizeof *tr->w_off * m.n);
    memcpy(tr->w_len, m.key_len, sizeof *tr->w_len * m.n);
    bytemap_free(&m);
    return 0;
oom:
    bytemap_free(&m);
    free(counts);
    return -1;
}

static void trainer_free(trainer *tr) {
    for (size_t i = 0; i < tr->n_pairs; i++)
        free(tr->pairs[i].words);
    free(tr->pairs), free(tr->pkey), free(tr->pval), free(tr->heap), free(tr->touched);
    free(tr->tok), free(tr->w_off), free(tr->w_len), free(tr->w_stamp), free(tr->w_count);
}

AMPX_API int ampx_tokenizer_train(const unsigned char *const *texts, const size_t *lens, size_t n,
                                  uint32_t vocab_size, ampx_tokenizer **out,
                                  ampx_tokenizer_stats *stats, char *err, size_t err_cap) {
    ampx_err e             = ERR(err, err_cap);
    ampx_tokenizer_stats s = {0};
    trainer tr             = {0};
    *out                   = NULL;
    if (vocab_size < 257 || vocab_size > BPE_MAX_VOCAB)
        return err_set(e,
                       "a vocabulary of %u tokens: expected 257 (the bytes and end-of-text) "
                       "to %u",
                       vocab_size, BPE_MAX_VOCAB);
    uint32_t want = vocab_size - 257, m = 0;
    uint32_t(*merges)[2] = malloc(sizeof *merges * (want + 1));
    uint32_t *tlen       = malloc(sizeof *tlen * (256 + want + 1)); /* each token's bytes */
    if (!merges || !tlen || count_chunks(&tr, texts, lens, n, &s)) goto oom;
    for (uint32_t i = 0; i < 256; i++)
        tlen[i] = 1;
    for (size_t w = 0; w < tr.n_words; w++) {
        const uint32_t *t = tr.tok + tr.w_off[w];
        for (uint32_t j = 0; j + 1 < tr.w_len[w]; j++)
            count_pair(&tr, t[j], t[j + 1], tr.w_count[w], 0, (uint32_t)w, 1);
    }
    for (size_t i = 0; i < tr.n_pairs; i++)
        heap_push(&tr, (heap_entry){tr.pairs[i].count, (uint32_t)i});
    if (tr.oom) goto oom;
    while (m < want && tr.nh) {
        heap_entry top = heap_pop(&tr);
        pair_slot *p   = &tr.pairs[top.slot];
        if (top.count != p->count || top.count <= 0 || p->too_long) continue; /* stale */
        if (tlen[p->a] + tlen[p->b] > BPE_MAX_TOKEN_LEN) {
            p->too_long = 1;
            continue;
        }
        tlen[256 + m] = tlen[p->a] + tlen[p->b];
        merges[m][0] = p->a, merges[m][1] = p->b;
        merge(&tr, top.slot, m);
        m++;
        if (tr.oom) goto oom;
    }
    trainer_free(&tr);
    free(tlen);
    s.merges = m;
    if (stats) *stats = s;
    *out = bpe_from_merges(merges, m, "training", e);
    return *out ? 0 : -1;
oom:
    trainer_free(&tr);
    free(merges), free(tlen);
    return err_set(e, "training: out of memory");
}
