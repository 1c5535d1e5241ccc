/* bytemap.c — byte strings to dense indices (bytemap.h). */
#include "text/bytemap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const unsigned char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static int64_t lookup(const bytemap *m, const unsigned char *key, size_t len, uint64_t h,
                      size_t *slot) {
    size_t mask = m->cap - 1;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        uint32_t v = m->slots[s];
        *slot      = s;
        if (!v) return -1;
        size_t i = v - 1;
        if (m->hashes[i] == h && m->key_len[i] == len &&
            (len == 0 || !memcmp(m->keys + m->key_off[i], key, len)))
            return (int64_t)i;
    }
}

int64_t bytemap_find(const bytemap *m, const unsigned char *key, size_t len) {
    size_t slot;
    if (!m->cap) return -1;
    return lookup(m, key, len, fnv1a(key, len), &slot);
}

/* Doubles the slots (a load of at most one half keeps probes short). */
static int grow_slots(bytemap *m) {
    size_t cap  = m->cap ? 2 * m->cap : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < m->n; i++) {
        size_t j = (size_t)m->hashes[i] & (cap - 1);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)(i + 1);
    }
    free(m->slots);
    m->slots = s, m->cap = cap;
    return 0;
}

static int grow_arrays(bytemap *m) {
    size_t c    = m->n_cap ? 2 * m->n_cap : 1024;
    uint64_t *h = realloc(m->hashes, c * sizeof *h);
    if (h) m->hashes = h;
    size_t *o = realloc(m->key_off, c * sizeof *o);
    if (o) m->key_off = o;
    uint32_t *l = realloc(m->key_len, c * sizeof *l);
    if (l) m->key_len = l;
    if (!h || !o || !l) return -1;
    m->n_cap = c;
    return 0;
}

int64_t bytemap_insert(bytemap *m, const unsigned char *key, size_t len, int *added) {
    *added = 0;
    if (len > UINT32_MAX || m->n >= UINT32_MAX - 1) return -1;
    if (2 * (m->n + 1) > m->cap && grow_slots(m)) return -1;
    uint64_t h = fnv1a(key, len);
    size_t slot;
    int64_t i = lookup(m, key, len, h, &slot);
    if (i >= 0) return i;
    if (m->n == m->n_cap && grow_arrays(m)) return -1;
    if (m->keys_n + len > m->keys_cap) {
        size_t c = m->keys_cap ? m->keys_cap : 1 << 16;
        while (c < m->keys_n + len)
            c *= 2;
        unsigned char *k = realloc(m->keys, c);
        if (!k) return -1;
        m->keys = k, m->keys_cap = c;
    }
    if (len) memcpy(m->keys + m->keys_n, key, len);
    m->hashes[m->n]  = h;
    m->key_off[m->n] = m->keys_n;
    m->key_len[m->n] = (uint32_t)len;
    m->keys_n += len;
    m->slots[slot] = (uint32_t)(m->n + 1);
    *added         = 1;
    return (int64_t)m->n++;
}

const unsigned char *bytemap_key(const bytemap *m, size_t i, size_t *len) {
    *len = m->key_len[i];
    return m->keys + m->key_off[i];
}

void bytemap_free(bytemap *m) {
    free(m->slots), free(m->hashes), free(m->key_off), free(m->key_len), free(m->keys);
    memset(m, 0, sizeof *m);
}
