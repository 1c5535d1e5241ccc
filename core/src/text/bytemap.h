/* bytemap.h — a hash map from byte strings to dense indices 0, 1, 2 ... in order of first
 * insertion (open addressing, FNV-1a, the keys kept in one arena). The trainer counts the
 * pre-split chunks with it, the encoder caches encoded chunks with it. */
#ifndef AMPX_TEXT_BYTEMAP_H
#define AMPX_TEXT_BYTEMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct bytemap {
    uint32_t *slots;     /* index + 1 per slot, 0 empty; cap a power of two */
    size_t cap;          /* slots */
    uint64_t *hashes;    /* per index */
    size_t *key_off;     /* per index: offset of the key in keys */
    uint32_t *key_len;   /* per index */
    unsigned char *keys; /* the arena */
    size_t n, n_cap;     /* indices in use, allocated */
    size_t keys_n, keys_cap;
} bytemap;

/* The index of key, or -1 when absent. */
int64_t bytemap_find(const bytemap *m, const unsigned char *key, size_t len);
/* The index of key, inserted when absent (*added set to 1 then); -1 when out of memory or
 * when there are 2^32 - 2 keys already. */
int64_t bytemap_insert(bytemap *m, const unsigned char *key, size_t len, int *added);
/* The key of index i. */
const unsigned char *bytemap_key(const bytemap *m, size_t i, size_t *len);
void bytemap_free(bytemap *m);

#endif
