/* data.h — training and held-out examples in host memory: the embedded spirals, MNIST IDX
 * files, CSV files. Each example is `features` f32 values (the model's f32 inputs, in
 * declaration order, take consecutive slices of them) and one i32 class. */
#ifndef AMPX_DATA_H
#define AMPX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "config/settings.h"

typedef struct dataset {
    int64_t n_train, n_test, features;
    float *x_train, *x_test;   /* row-major [n][features] */
    int32_t *y_train, *y_test; /* [n] in [0, classes); token data: [n_test][window] */
    /* Token streams (text, token files, embedded text): the model reads windows of `window`
     * tokens and, as labels, the tokens that follow each. Training windows are drawn from
     * tokens_train; the n_test held-out windows are fixed (ids_test, labels in y_test). */
    uint16_t *tokens_train, *tokens_val;
    /* the training shards (a glob of token files, in the glob's order) concatenated: shard
     * i starts at shard_start[i]; orders "sequential" and "shuffled" read them as llm.c's
     * dataloader (sequential is set for both) */
    int64_t *shard_start;
    int n_shards, sequential;
    /* order "shuffled": where the walk through the permuted epochs stands (data/shuffle.h),
     * set up at the first draw for that draw's chunk size and rank; a cache of a function of
     * the key, so drawing through a const dataset may update it (one trainer draws from one
     * thread) */
    struct chunk_order *shuffle;
    uint32_t shuffle_seed;
    int64_t n_tokens_train, n_tokens_val, window;
    int32_t *ids_test;
} dataset;

/* What the model reads: its data settings, the f32 values per example and the classes. */
typedef struct data_request {
    const settings *cfg;
    int64_t features, classes;
    const char *input_name; /* for messages: the input(s) the features go to */
    int64_t window;         /* token data: positions per example (the token input's size) */
    /* CSV regression: real-valued target columns per row (from label_column on), stored
     * after the features in x (rows of features + targets values); 0: one class per row */
    int64_t targets;
} data_request;

/* Whether the model's data source is a token stream (text, tokens, embedded_text). */
int data_is_tokens(const settings *cfg);
/* An llm.c token file held in memory (path: for messages): its tokens (free() them) and their
 * count, every header field and token checked; NULL with one line in err. */
uint16_t *text_tokens_parse(const char *path, const unsigned char *bytes, size_t len, int64_t vocab,
                            int64_t *n, ampx_err e);
/* Loads a token stream source (text.c); called by data_load. */
int text_load(const data_request *m, dataset *d, ampx_err e);
/* Windows [first, first + rows) of the key_rows windows of a draw keyed by `key` (a step's
 * micro-batch): `window` ids and their successors from a position drawn uniformly with the
 * seed. Rank r of N with batch b draws windows [r*b, (r+1)*b) of a key's N*b: together
 * the ranks read exactly the windows one process with batch N*b reads. Order "shuffled"
 * keeps llm.c's rule instead: rank r = first / rows walks its own permutations (seeded
 * shuffle_seed + r), reading part r of each chunk of key_rows windows once per epoch, so the
 * ranks' parts are disjoint and cover every chunk, but one micro-batch's parts come from
 * different chunks. Returns 0, or -1 when out of memory for the shuffled order. */
int text_draw(const dataset *d, uint64_t seed, uint64_t key, int64_t key_rows, int64_t first,
              int64_t rows, int32_t *ids, int32_t *labels);

/* Loads what the model's "data" names; features must match the model's inputs and labels
 * its classes. Errors are one line naming the file (and line for CSV). */
int data_load(const data_request *m, dataset *d, ampx_err e);
void data_free(dataset *d);

/* The readers on bytes in memory (for the fuzz harnesses; data_load reads the files). */
int data_csv_parse(const data_request *m, const char *path, const char *text, size_t len, float **x,
                   int32_t **y, int64_t *n, ampx_err e);
/* Checks an IDX file's magic and that its dims (into dims) give its size exactly. */
int data_idx_check(const char *path, uint32_t magic, const unsigned char *buf, size_t len,
                   int64_t dims[3], ampx_err e);

/* A uniform double in [0, 1) from a counter: the data and initializers' only randomness.
 * 53 random bits (27 of one hash word, 26 of another) over 2^53: every double in [0, 1) on
 * the 2^-53 grid is equally likely, and 1 is never returned. Inline here so that every
 * reader (data.c, text.c, the trainer) draws from the same stream without calling into
 * each other. */
static inline double data_uniform(uint64_t seed, uint64_t i) {
    uint32_t hi = ampx_hash32(seed ^ 0x9E3779B97F4A7C15ull, i);
    uint32_t lo = ampx_hash32(seed + 0x632BE59BD9B4E019ull, i);
    return ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) / 9007199254740992.0;
}

#endif
