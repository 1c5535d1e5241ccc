/* shuffle.h — llm.c's shuffled sequential order (llmc/dataloader.h with should_shuffle): a
 * Mersenne Twister MT19937 (32-bit, init_genrand seeding: the generator of llm.c's rand.h
 * and of torch.manual_seed), and the walk that maps a micro-batch index to the shard and the
 * chunk of it that micro-batch reads. Every epoch permutes the order of the shards (the
 * previous epoch's order permuted again, as llm.c does in place); entering a shard permutes
 * its chunks (from the identity). Each permutation is llm.c's random_permutation: for i from
 * n - 1 down to 1, swap i with next() % (i + 1). */
#ifndef AMPX_SHUFFLE_H
#define AMPX_SHUFFLE_H

#include <stdint.h>

#define MT19937_N 624

typedef struct mt19937 {
    uint32_t state[MT19937_N];
    int next; /* the next word of state to temper; MT19937_N: regenerate first */
} mt19937;

void mt19937_seed(mt19937 *g, uint32_t seed);
uint32_t mt19937_u32(mt19937 *g);

/* Where one rank's walk through the shuffled epochs stands. The order is a function of the
 * seed and the shards' chunk counts alone; the walk is a cache that makes drawing the next
 * micro-batch O(1) and jumping backwards (a resume in a fresh process starts at key 0 too)
 * a replay from the start. */
typedef struct chunk_order {
    int n_shards;
    int64_t *chunks;   /* [n_shards] chunks per shard, in the glob's order */
    int64_t per_epoch; /* their sum: micro-batches per epoch */
    int64_t max_chunks;
    uint32_t seed;
    mt19937 rng;
    int64_t epoch;  /* the walk's epoch (-1: before the first) */
    int at;         /* the walk's position in the epoch's shard order */
    int64_t base;   /* micro-batches of the epoch before position `at` */
    int *shard;     /* [n_shards] the epoch's shard order */
    int64_t *chunk; /* [max_chunks] the chunk order of shard[at] */
} chunk_order;

/* Sets up the walk over n shards of chunks[i] chunks each (every one at least 1), seeded
 * with `seed`; 0, or -1 when out of memory. */
int chunk_order_init(chunk_order *o, int n, const int64_t *chunks, uint32_t seed);
void chunk_order_free(chunk_order *o);
/* The shard (index in the glob's order) and the chunk within it that micro-batch `key`
 * reads: key / per_epoch is its epoch, key % per_epoch its place in that epoch. */
void chunk_order_at(chunk_order *o, uint64_t key, int *shard, int64_t *chunk);

#endif
