/* test_token_order.c — the sequential and shuffled orders of token windows (data/text.c,
 * data/shuffle.c) against a reference written here as llm.c's dataloader is: a stateful
 * loader (reset, advance, next_batch) over shards with its own MT19937, whose batches are
 * compared offset by offset with what text_draw reads for the same micro-batch index. The
 * tokens are their own positions, so a window's first id is where it was read. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "data/shuffle.h"

// ---------------------------------------------------------------------------------------
// The reference generator: Matsumoto and Nishimura's genrand_int32, as published

typedef struct ref_mt {
    uint32_t mt[624];
    int mti;
} ref_mt;

static void ref_seed(ref_mt *r, uint32_t s) {
    r->mt[0] = s;
    for (r->mti = 1; r->mti < 624; r->mti++)
        r->mt[r->mti] =
            1812433253u * (r->mt[r->mti - 1] ^ (r->mt[r->mti - 1] >> 30)) + (uint32_t)r->mti;
}

static uint32_t ref_u32(ref_mt *r) {
    static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
    uint32_t y;
    if (r->mti >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y         = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + 397] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < 623; kk++) {
            y         = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y          = (r->mt[623] & 0x80000000u) | (r->mt[0] & 0x7fffffffu);
        r->mt[623] = r->mt[396] ^ (y >> 1) ^ mag01[y & 1u];
        r->mti     = 0;
    }
    y = r->mt[r->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

static void ref_permute(int *a, int n, ref_mt *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(ref_u32(r) % (uint32_t)(i + 1)), x = a[i];
        a[i] = a[j], a[j] = x;
    }
}

// ---------------------------------------------------------------------------------------
// The reference loader: llmc/dataloader.h's state machine over shards in memory

typedef struct ref_loader {
    const int64_t *start; /* shard s: tokens [start[s], start[s + 1]) */
    int n_shards, rank, world, shuffle;
    int64_t B, T, samples;
    int shard_idx, sample_idx;
    int shard_order[8], *intra;
    ref_mt rng;
} ref_loader;

static void ref_load_shard(ref_loader *l) {
    int s         = l->shuffle ? l->shard_order[l->shard_idx] : l->shard_idx;
    int64_t n     = l->start[s + 1] - l->start[s];
    l->samples    = (n - 1) / (l->world * l->B * l->T);
    l->sample_idx = 0;
    if (!l->shuffle) return;
    free(l->intra);
    l->intra = malloc(sizeof(int) * (size_t)l->samples);
    for (int i = 0; i < l->samples; i++)
        l->intra[i] = i;
    ref_permute(l->intra, (int)l->samples, &l->rng);
}

static void ref_reset(ref_loader *l) {
    l->shard_idx = 0;
    if (l->shuffle) ref_permute(l->shard_order, l->n_shards, &l->rng);
    ref_load_shard(l);
}

static void ref_init(ref_loader *l, const int64_t *start, int n_shards, int64_t B, int64_t T,
                     int rank, int world, int shuffle) {
    *l = (ref_loader){.start    = start,
                      .n_shards = n_shards,
                      .rank     = rank,
                      .world    = world,
                      .shuffle  = shuffle,
                      .B        = B,
                      .T        = T};
    ref_seed(&l->rng, 42u + (uint32_t)rank);
    for (int s = 0; s < n_shards; s++)
        l->shard_order[s] = s;
    ref_reset(l);
}

/* The next batch's first token position in the concatenated stream. */
static int64_t ref_next(ref_loader *l) {
    if (l->sample_idx >= l->samples) {
        if (l->shard_idx == l->n_shards - 1) {
            ref_reset(l);
        } else {
            l->shard_idx++;
            ref_load_shard(l);
        }
    }
    int s      = l->shuffle ? l->shard_order[l->shard_idx] : l->shard_idx;
    int64_t i  = l->shuffle ? l->intra[l->sample_idx] : l->sample_idx;
    int64_t at = l->start[s] + i * l->world * l->B * l->T + l->rank * l->B * l->T;
    l->sample_idx++;
    return at;
}

// ---------------------------------------------------------------------------------------
// Datasets of tokens that are their own positions

static dataset shards(const int64_t *sizes, int n, int64_t T, int order) {
    dataset d        = {0};
    d.n_shards       = n;
    d.window         = T;
    d.sequential     = order != DATA_ORDER_RANDOM;
    d.shard_start    = malloc(sizeof(int64_t) * (size_t)(n + 1));
    d.shard_start[0] = 0;
    for (int s = 0; s < n; s++)
        d.shard_start[s + 1] = d.shard_start[s] + sizes[s];
    d.n_tokens_train = d.shard_start[n];
    d.tokens_train   = malloc(sizeof(uint16_t) * (size_t)(d.n_tokens_train + 1));
    for (int64_t i = 0; i <= d.n_tokens_train; i++)
        d.tokens_train[i] = (uint16_t)i;
    if (order == DATA_ORDER_SHUFFLED) d.shuffle = calloc(1, sizeof *d.shuffle);
    d.shuffle_seed = 42;
    return d;
}

static void drop(dataset *d) {
    if (d->shuffle) chunk_order_free(d->shuffle);
    free(d->shuffle), free(d->shard_start), free(d->tokens_train);
}

/* Micro-batch `key` of rank r of `world`, batch B: the first position read, the rest of the
 * windows checked to be contiguous from it (ids and their labels one on). */
static int64_t draw_at(const dataset *d, uint64_t key, int64_t B, int rank, int world) {
    int64_t T    = d->window;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(B * T)),
            *lab = malloc(sizeof(int32_t) * (size_t)(B * T));
    cr_assert_eq(text_draw(d, 0, key, B * world, B * rank, B, ids, lab), 0);
    int64_t at = ids[0];
    for (int64_t k = 0; k < B * T; k++) {
        cr_assert_eq(ids[k], at + k, "key %llu: id %lld is %d", (unsigned long long)key,
                     (long long)k, ids[k]);
        cr_assert_eq(lab[k], at + k + 1);
    }
    free(ids), free(lab);
    return at;
}

// ---------------------------------------------------------------------------------------

/* The generator's published values: llm.c's rand.h (and torch.manual_seed(137)) list the
 * first five words of seed 137; C++'s std::mt19937 requires its 10000th word of the default
 * seed 5489 to be 4123659995. */
Test(order, mt19937_reference_values) {
    static const uint32_t want[5] = {4053805790u, 2173880614u, 380293709u, 1237255315u,
                                     2986595568u};
    mt19937 g;
    ref_mt r;
    mt19937_seed(&g, 137);
    ref_seed(&r, 137);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(mt19937_u32(&g), want[i], "word %d", i);
        cr_assert_eq(ref_u32(&r), want[i], "reference word %d", i);
    }
    mt19937_seed(&g, 5489);
    uint32_t last = 0;
    for (int i = 0; i < 10000; i++)
        last = mt19937_u32(&g);
    cr_assert_eq(last, 4123659995u);
}

/* Three epochs of three shards of different sizes, one rank and two, against the reference
 * loader: shuffled and not, every micro-batch reads where llm.c's would. */
static void against_reference(int order, int world) {
    static const int64_t sizes[3] = {300, 401, 517};
    int64_t B = 3, T = 4;
    dataset d         = shards(sizes, 3, T, order);
    int64_t per_epoch = 0;
    for (int s = 0; s < 3; s++)
        per_epoch += (sizes[s] - 1) / (world * B * T);
    for (int r = 0; r < world; r++) {
        ref_loader l;
        ref_init(&l, d.shard_start, 3, B, T, r, world, order == DATA_ORDER_SHUFFLED);
        for (uint64_t key = 0; key < (uint64_t)(3 * per_epoch); key++) {
            int64_t want = ref_next(&l);
            cr_assert_eq(draw_at(&d, key, B, r, world), want, "rank %d of %d, key %llu", r, world,
                         (unsigned long long)key);
        }
        free(l.intra);
    }
    drop(&d);
}

Test(order, sequential_matches_llmc) {
    against_reference(DATA_ORDER_SEQUENTIAL, 1);
    against_reference(DATA_ORDER_SEQUENTIAL, 2);
}

Test(order, shuffled_matches_llmc) {
    against_reference(DATA_ORDER_SHUFFLED, 1);
    against_reference(DATA_ORDER_SHUFFLED, 2);
}

/* Each epoch reads every chunk once (per rank: its part of every chunk once, the ranks'
 * parts disjoint), and the order differs from one epoch to the next and from the unshuffled
 * one. */
Test(order, shuffled_epochs_are_permutations) {
    static const int64_t sizes[3] = {250, 97, 400};
    int64_t B = 2, T = 4, world = 2, chunk = B * T * world, per_epoch = 0;
    for (int s = 0; s < 3; s++)
        per_epoch += (sizes[s] - 1) / chunk;
    dataset d = shards(sizes, 3, T, DATA_ORDER_SHUFFLED);
    int64_t n = d.n_tokens_train, *first = malloc(sizeof(int64_t) * (size_t)(2 * per_epoch));
    char *seen = malloc((size_t)n);
    for (int e = 0; e < 3; e++) {
        memset(seen, 0, (size_t)n);
        for (int r = 0; r < world; r++)
            for (int64_t k = 0; k < per_epoch; k++) {
                int64_t at = draw_at(&d, (uint64_t)(e * per_epoch + k), B, r, (int)world);
                int s      = 0;
                while (at >= d.shard_start[s + 1])
                    s++;
                int64_t in = at - d.shard_start[s];
                cr_assert_eq(in % chunk, r * B * T, "rank %d reads part %lld", r,
                             (long long)(in % chunk));
                cr_assert(in / chunk < (sizes[s] - 1) / chunk, "past the shard's last chunk");
                cr_assert_not(seen[at], "epoch %d reads %lld twice", e, (long long)at);
                seen[at] = 1;
                if (r == 0 && e < 2) first[e * per_epoch + k] = at;
            }
        int64_t count = 0;
        for (int64_t i = 0; i < n; i++)
            count += seen[i];
        cr_assert_eq(count, world * per_epoch, "epoch %d covers %lld of %lld parts", e,
                     (long long)count, (long long)(world * per_epoch));
    }
    cr_assert_neq(memcmp(first, first + per_epoch, sizeof(int64_t) * (size_t)per_epoch), 0,
                  "epochs 0 and 1 read in the same order");
    dataset q = shards(sizes, 3, T, DATA_ORDER_SEQUENTIAL);
    int same  = 1;
    for (int64_t k = 0; k < per_epoch; k++)
        same &= draw_at(&q, (uint64_t)k, B, 0, (int)world) == first[k];
    cr_assert_not(same, "shuffled epoch 0 is the sequential order");
    free(first), free(seen);
    drop(&d), drop(&q);
}

/* A fresh walk (a resumed process) at any key reads what the straight walk did, and so does
 * a walk sent backwards; another seed gives another order. */
Test(order, shuffled_resume_and_seed) {
    static const int64_t sizes[2] = {333, 201};
    int64_t B = 2, T = 3;
    dataset d = shards(sizes, 2, T, DATA_ORDER_SHUFFLED);
    int64_t straight[200];
    for (int k = 0; k < 200; k++)
        straight[k] = draw_at(&d, (uint64_t)k, B, 0, 1);
    for (int k = 0; k < 200; k += 37) {
        dataset fresh = shards(sizes, 2, T, DATA_ORDER_SHUFFLED);
        for (int j = k; j < 200; j += 11)
            cr_assert_eq(draw_at(&fresh, (uint64_t)j, B, 0, 1), straight[j], "resumed at %d", k);
        cr_assert_eq(draw_at(&fresh, 3, B, 0, 1), straight[3], "back to 3 from %d", k);
        drop(&fresh);
    }
    d.shuffle_seed = 7;
    int same       = 1;
    for (int k = 0; k < 200; k++)
        same &= draw_at(&d, (uint64_t)k, B, 0, 1) == straight[k];
    cr_assert_not(same, "seeds 42 and 7 give the same order");
    drop(&d);
}
