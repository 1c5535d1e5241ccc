/* data.h — training and held-out examples in host memory: the embedded spirals, MNIST IDX
 * files, CSV files. Each example is `features` f32 values (the model's f32 inputs, in
 * declaration order, take consecutive slices of them) and one i32 class. */
#ifndef AMPX_DATA_H
#define AMPX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "config/settings.h"

typedef struct dataset {
    int64_t n_train, n_test, features;
    float *x_train, *x_test;   /* row-major [n][features] */
    int32_t *y_train, *y_test; /* [n] in [0, classes) */
} dataset;

/* What the model reads: its data settings, the f32 values per example and the classes. */
typedef struct data_request {
    const settings *cfg;
    int64_t features, classes;
    const char *input_name; /* for messages: the input(s) the features go to */
} data_request;

/* Loads what the model's "data" names; features must match the model's inputs and labels
 * its classes. Errors are one line naming the file (and line for CSV). */
int data_load(const data_request *m, dataset *d, char *err, size_t cap);
void data_free(dataset *d);

/* The readers on bytes in memory (for the fuzz harnesses; data_load reads the files). */
int data_csv_parse(const data_request *m, const char *path, const char *text, size_t len, float **x,
                   int32_t **y, int64_t *n, char *err, size_t cap);
/* Checks an IDX file's magic and that its dims (into dims) give its size exactly. */
int data_idx_check(const char *path, uint32_t magic, const unsigned char *buf, size_t len,
                   int64_t dims[3], char *err, size_t cap);

/* A uniform double in [0, 1) from a counter: the data and initializers' only randomness. */
double data_uniform(uint64_t seed, uint64_t i);

#endif
