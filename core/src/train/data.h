/* data.h — training and held-out examples in host memory: the embedded spirals, MNIST IDX
 * files, CSV files. */
#ifndef AMPX_DATA_H
#define AMPX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "config/model.h"

typedef struct dataset {
    int64_t n_train, n_test, features;
    float *x_train, *x_test;   /* row-major [n][features] */
    int32_t *y_train, *y_test; /* [n] in [0, classes) */
} dataset;

/* Loads what the model's "data" names; features must match the model's input and labels
 * its classes. Errors are one line naming the file (and line for CSV). */
int data_load(const ampx_model *m, dataset *d, char *err, size_t cap);
void data_free(dataset *d);

/* A uniform double in [0, 1) from a counter: the data and initializers' only randomness. */
double data_uniform(uint64_t seed, uint64_t i);

#endif
