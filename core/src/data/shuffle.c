/* shuffle.c — llm.c's shuffled sequential order: the MT19937 generator and the walk through
 * the epochs' shard and chunk permutations (shuffle.h). */
#include "data/shuffle.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// MT19937 (Matsumoto and Nishimura, 1998): init_genrand seeding, 32-bit output

#define MT_M 397

void mt19937_seed(mt19937 *g, uint32_t seed) {
    g->state[0] = seed;
    for (uint32_t i = 1; i < MT19937_N; i++) {
        uint32_t p  = g->state[i - 1];
        g->state[i] = 1812433253u * (p ^ (p >> 30)) + i;
    }
    g->next = MT19937_N;
}

/* The next 624 words: each from the top bit of one word and the low 31 of the next, shifted,
 * xor-ed with the word 397 on and with the twist matrix's row when the low bit is set. */
static void regenerate(mt19937 *g) {
    uint32_t *s = g->state;
    for (int i = 0; i < MT19937_N; i++) {
        uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT19937_N] & 0x7fffffffu);
        s[i]       = s[(i + MT_M) % MT19937_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->next = 0;
}

uint32_t mt19937_u32(mt19937 *g) {
    if (g->next >= MT19937_N) regenerate(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// ---------------------------------------------------------------------------------------
// The walk

/* llm.c's random_permutation: a Fisher-Yates shuffle from the top, j = u32 % (i + 1). The
 * modulo's bias (at most n / 2^32) is llm.c's and is kept, so the orders agree. */
static void permute_int(int *a, int n, mt19937 *g) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(mt19937_u32(g) % (uint32_t)(i + 1));
        int x = a[i];
        a[i] = a[j], a[j] = x;
    }
}

static void permute_i64(int64_t *a, int64_t n, mt19937 *g) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(mt19937_u32(g) % (uint32_t)(i + 1));
        int64_t x = a[i];
        a[i] = a[j], a[j] = x;
    }
}

/* Back to before the first epoch: the seed, the shards in the glob's order. */
static void rewind_walk(chunk_order *o) {
    mt19937_seed(&o->rng, o->seed);
    for (int s = 0; s < o->n_shards; s++)
        o->shard[s] = s;
    o->epoch = -1;
    o->at    = o->n_shards - 1;
    o->base  = o->per_epoch;
}

/* The next shard of the walk: past the last one, a new epoch and its shard order; then the
 * shard's chunk order, from the identity. The same draws in the same order as llm.c's
 * dataloader_reset and dataloader_advance_. */
static void step_walk(chunk_order *o) {
    if (o->at == o->n_shards - 1) {
        o->epoch++;
        o->at   = 0;
        o->base = 0;
        permute_int(o->shard, o->n_shards, &o->rng);
    } else {
        o->base += o->chunks[o->shard[o->at]];
        o->at++;
    }
    int64_t n = o->chunks[o->shard[o->at]];
    for (int64_t i = 0; i < n; i++)
        o->chunk[i] = i;
    permute_i64(o->chunk, n, &o->rng);
}

int chunk_order_init(chunk_order *o, int n, const int64_t *chunks, uint32_t seed) {
    memset(o, 0, sizeof *o);
    o->n_shards = n;
    o->seed     = seed;
    o->chunks   = malloc(sizeof(int64_t) * (size_t)n);
    o->shard    = malloc(sizeof(int) * (size_t)n);
    if (!o->chunks || !o->shard) goto fail;
    for (int s = 0; s < n; s++) {
        o->chunks[s] = chunks[s];
        o->per_epoch += chunks[s];
        if (chunks[s] > o->max_chunks) o->max_chunks = chunks[s];
    }
    if (!(o->chunk = malloc(sizeof(int64_t) * (size_t)o->max_chunks))) goto fail;
    rewind_walk(o);
    return 0;
fail:
    chunk_order_free(o);
    return -1;
}

void chunk_order_free(chunk_order *o) {
    free(o->chunks), free(o->shard), free(o->chunk);
    memset(o, 0, sizeof *o);
}

void chunk_order_at(chunk_order *o, uint64_t key, int *shard, int64_t *chunk) {
    int64_t e = (int64_t)(key / (uint64_t)o->per_epoch);
    int64_t i = (int64_t)(key % (uint64_t)o->per_epoch);
    if (o->epoch > e || (o->epoch == e && i < o->base)) rewind_walk(o);
    while (o->epoch < e || i >= o->base + o->chunks[o->shard[o->at]])
        step_walk(o);
    *shard = o->shard[o->at];
    *chunk = o->chunk[i - o->base];
}
