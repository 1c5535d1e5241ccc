/* data.c — the data a model trains on: the embedded spirals (generated from the seed, so
 * `ampx train models/mlp.json` needs no files), MNIST IDX files and CSV files. */
#include "train/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"

double data_uniform(uint64_t seed, uint64_t i) {
    uint32_t hi = ampx_hash32(seed ^ 0x9E3779B97F4A7C15ull, i);
    uint32_t lo = ampx_hash32(seed + 0x632BE59BD9B4E019ull, i);
    return ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) / 9007199254740992.0;
}

static double normal(uint64_t seed, uint64_t i) {
    double u1 = data_uniform(seed, 2 * i), u2 = data_uniform(seed, 2 * i + 1);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

static int alloc_split(dataset *d, int64_t n_train, int64_t n_test, int64_t features) {
    d->n_train  = n_train;
    d->n_test   = n_test;
    d->features = features;
    d->x_train  = malloc(sizeof(float) * (size_t)(n_train * features + 1));
    d->x_test   = malloc(sizeof(float) * (size_t)(n_test * features + 1));
    d->y_train  = malloc(sizeof(int32_t) * (size_t)(n_train + 1));
    d->y_test   = malloc(sizeof(int32_t) * (size_t)(n_test + 1));
    return d->x_train && d->x_test && d->y_train && d->y_test ? 0 : -1;
}

// ---------------------------------------------------------------------------------------
// Embedded: K interleaved spiral arms in the plane, a task no linear model solves. Example
// i has class i mod K, radius t and angle 2 pi (c / K + turns t) + noise; features beyond
// the first two are Gaussian distractors. The last test_fraction of examples is held out.

static int load_spirals(const data_request *m, dataset *d, char *err, size_t cap) {
    const data_config *c = &m->cfg->data;
    int64_t n = c->samples, k = m->classes, f = m->features;
    if (f < 2) {
        snprintf(err, cap,
                 "%s: the embedded spirals have 2 features (or more with distractors); input "
                 "\"%s\" has %lld",
                 m->cfg->file, m->input_name, (long long)f);
        return -1;
    }
    int64_t n_test = (int64_t)((double)n * c->test_fraction);
    if (alloc_split(d, n - n_test, n_test, f)) {
        snprintf(err, cap, "%s: out of memory for %lld examples", m->cfg->file, (long long)n);
        return -1;
    }
    uint64_t seed = m->cfg->train.seed * 0x100000001B3ull + 17;
    for (int64_t i = 0; i < n; i++) {
        int32_t cls  = (int32_t)(i % k);
        double t     = data_uniform(seed, (uint64_t)i);
        double angle = 6.283185307179586 * ((double)cls / (double)k + c->turns * t) +
                       c->noise * normal(seed + 1, (uint64_t)i);
        int test    = i >= n - n_test;
        int64_t row = test ? i - (n - n_test) : i;
        float *x    = (test ? d->x_test : d->x_train) + row * f;
        x[0]        = (float)(t * cos(angle));
        x[1]        = (float)(t * sin(angle));
        for (int64_t j = 2; j < f; j++)
            x[j] = (float)(0.5 * normal(seed + 2 + (uint64_t)j, (uint64_t)i));
        (test ? d->y_test : d->y_train)[row] = cls;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// MNIST IDX: big-endian magic 0x00000803 (ubyte images n x rows x cols) and 0x00000801
// (ubyte labels n). Pixels are scaled to [0, 1].

static unsigned char *read_all(const char *path, size_t *len, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char *buf = NULL;
    size_t n = 0, c = 0;
    for (;;) {
        if (n + 65536 > c) {
            c                 = c ? c * 2 : 1 << 20;
            unsigned char *nb = realloc(buf, c);
            if (!nb) {
                free(buf);
                fclose(f);
                snprintf(err, cap, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, c - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, cap, "%s: read error", path);
        return NULL;
    }
    *len = n;
    return buf;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int idx_open(const char *path, uint32_t magic, unsigned char **buf, size_t *len,
                    int64_t dims[3], char *err, size_t cap) {
    *buf = read_all(path, len, err, cap);
    if (!*buf) return -1;
    int nd = (int)(magic & 0xFF);
    if (*len >= 2 && (*buf)[0] == 0x1F && (*buf)[1] == 0x8B) {
        snprintf(err, cap, "%s: gzip-compressed; decompress it first (gunzip)", path);
        return -1;
    }
    if (*len < 4 || be32(*buf) != magic) {
        snprintf(err, cap, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)", path,
                 nd == 3 ? "image" : "label", *len >= 4 ? be32(*buf) : 0, magic);
        return -1;
    }
    if (*len < 4 + 4 * (size_t)nd) {
        snprintf(err, cap, "%s: truncated IDX header (%zu bytes)", path, *len);
        return -1;
    }
    uint64_t need = 1;
    for (int i = 0; i < nd; i++) {
        dims[i] = be32(*buf + 4 + 4 * i);
        need *= (uint64_t)dims[i];
    }
    if (dims[0] == 0 || need != *len - 4 - 4 * (size_t)nd) {
        snprintf(
            err, cap,
            "%s: the header says %lld items (%llu data bytes) but the file holds %zu data bytes",
            path, (long long)dims[0], (unsigned long long)need, *len - 4 - 4 * (size_t)nd);
        return -1;
    }
    return 0;
}

static int load_idx_pair(const data_request *m, const char *images, const char *labels, float **x,
                         int32_t **y, int64_t *n, char *err, size_t cap) {
    unsigned char *ib = NULL, *lb = NULL;
    size_t il, ll;
    int64_t idim[3], ldim[3];
    int rc = -1;
    if (idx_open(images, 0x00000803, &ib, &il, idim, err, cap)) goto out;
    if (idx_open(labels, 0x00000801, &lb, &ll, ldim, err, cap)) goto out;
    int64_t f = idim[1] * idim[2];
    if (f != m->features) {
        snprintf(err, cap,
                 "%s: images are %lldx%lld = %lld features but input \"%s\" of %s has %lld", images,
                 (long long)idim[1], (long long)idim[2], (long long)f, m->input_name, m->cfg->file,
                 (long long)m->features);
        goto out;
    }
    if (ldim[0] != idim[0]) {
        snprintf(err, cap, "%s: %lld labels for %lld images in %s", labels, (long long)ldim[0],
                 (long long)idim[0], images);
        goto out;
    }
    *n = idim[0];
    *x = malloc(sizeof(float) * (size_t)(*n * f));
    *y = malloc(sizeof(int32_t) * (size_t)*n);
    if (!*x || !*y) {
        snprintf(err, cap, "%s: out of memory", images);
        goto out;
    }
    for (int64_t i = 0; i < *n * f; i++)
        (*x)[i] = (float)ib[16 + i] / 255.0f;
    for (int64_t i = 0; i < *n; i++) {
        int32_t l = lb[8 + i];
        if (l >= m->classes) {
            snprintf(err, cap, "%s: label %d of example %lld is not below the model's %lld classes",
                     labels, l, (long long)i, (long long)m->classes);
            goto out;
        }
        (*y)[i] = l;
    }
    rc = 0;
out:
    free(ib);
    free(lb);
    return rc;
}

static int load_mnist(const data_request *m, dataset *d, char *err, size_t cap) {
    const data_config *c = &m->cfg->data;
    d->features          = m->features;
    return load_idx_pair(m, c->train_images, c->train_labels, &d->x_train, &d->y_train, &d->n_train,
                         err, cap) ||
           load_idx_pair(m, c->test_images, c->test_labels, &d->x_test, &d->y_test, &d->n_test, err,
                         cap);
}

// ---------------------------------------------------------------------------------------
// CSV: numbers separated by commas, one example per line, the label an integer column
// (the last by default). A first line with a field that is not a number is a header.

static int csv_read(const data_request *m, const char *path, float **x, int32_t **y, int64_t *n,
                    char *err, size_t cap) {
    size_t len;
    unsigned char *buf = read_all(path, &len, err, cap);
    if (!buf) return -1;
    char *text = realloc(buf, len + 1);
    if (!text) {
        free(buf);
        snprintf(err, cap, "%s: out of memory", path);
        return -1;
    }
    text[len] = 0;
    int64_t f = m->features, cols = f + 1;
    int64_t labcol   = m->cfg->data.label_column < 0 ? cols - 1 : m->cfg->data.label_column;
    int64_t rows_cap = 1024, rows = 0;
    int rc = -1;
    *x     = malloc(sizeof(float) * (size_t)(rows_cap * f));
    *y     = malloc(sizeof(int32_t) * (size_t)rows_cap);
    if (!*x || !*y) {
        snprintf(err, cap, "%s: out of memory", path);
        goto out;
    }
    if (labcol >= cols) {
        snprintf(
            err, cap,
            "%s: label_column %lld is past the %lld columns (features + label) the model reads",
            path, (long long)labcol, (long long)cols);
        goto out;
    }
    int line_no = 0;
    char *save  = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (ll == 0) continue;
        if (rows == rows_cap) {
            rows_cap *= 2;
            float *nx   = realloc(*x, sizeof(float) * (size_t)(rows_cap * f));
            int32_t *ny = realloc(*y, sizeof(int32_t) * (size_t)rows_cap);
            if (nx) *x = nx;
            if (ny) *y = ny;
            if (!nx || !ny) {
                snprintf(err, cap, "%s: out of memory", path);
                goto out;
            }
        }
        int64_t col = 0, fi = 0;
        int header_line = 0;
        char *p         = line;
        for (;;) {
            char *end = strchr(p, ',');
            if (end) *end = 0;
            while (*p == ' ' || *p == '\t')
                p++;
            char *stop;
            errno    = 0;
            double v = strtod(p, &stop);
            while (*stop == ' ' || *stop == '\t')
                stop++;
            if (stop == p || *stop || errno == ERANGE || !isfinite(v)) {
                if (line_no == 1 && m->cfg->data.header != 0) {
                    header_line = 1;
                    break;
                }
                snprintf(err, cap, "%s:%d: column %lld: \"%.40s\" is not a number%s", path, line_no,
                         (long long)col + 1, p,
                         line_no == 1 ? " (set \"header\": true if this line is a header)" : "");
                goto out;
            }
            if (col < cols) {
                if (col == labcol) {
                    if (v != floor(v) || v < 0 || v >= (double)m->classes) {
                        snprintf(err, cap, "%s:%d: label %g is not an integer in [0, %lld)", path,
                                 line_no, v, (long long)m->classes);
                        goto out;
                    }
                    (*y)[rows] = (int32_t)v;
                } else {
                    (*x)[rows * f + fi++] = (float)v;
                }
            }
            col++;
            if (!end) break;
            p = end + 1;
        }
        if (header_line) continue;
        if (line_no == 1 && m->cfg->data.header == 1) continue;
        if (col != cols) {
            snprintf(err, cap,
                     "%s:%d: expected %lld columns (%lld features and a label), found %lld", path,
                     line_no, (long long)cols, (long long)f, (long long)col);
            goto out;
        }
        rows++;
    }
    if (rows == 0) {
        snprintf(err, cap, "%s: no examples", path);
        goto out;
    }
    *n = rows;
    rc = 0;
out:
    free(text);
    if (rc) {
        free(*x), free(*y);
        *x = NULL, *y = NULL;
    }
    return rc;
}

static int load_csv(const data_request *m, dataset *d, char *err, size_t cap) {
    const data_config *c = &m->cfg->data;
    d->features          = m->features;
    float *x;
    int32_t *y;
    int64_t n;
    if (csv_read(m, c->train_csv, &x, &y, &n, err, cap)) return -1;
    if (c->test_csv) {
        d->x_train = x, d->y_train = y, d->n_train = n;
        return csv_read(m, c->test_csv, &d->x_test, &d->y_test, &d->n_test, err, cap);
    }
    /* No test file: a seeded permutation, the last test_fraction held out. */
    int64_t n_test = (int64_t)((double)n * c->test_fraction);
    if (n_test < 1 || n - n_test < 1) {
        snprintf(err, cap, "%s: %lld examples are too few to hold out %g of them", c->train_csv,
                 (long long)n, c->test_fraction);
        free(x), free(y);
        return -1;
    }
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm || alloc_split(d, n - n_test, n_test, d->features)) {
        free(perm), free(x), free(y);
        snprintf(err, cap, "%s: out of memory", c->train_csv);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(data_uniform(m->cfg->train.seed + 99, (uint64_t)i) * (double)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int64_t i = 0; i < n; i++) {
        int test    = i >= n - n_test;
        int64_t row = test ? i - (n - n_test) : i;
        memcpy((test ? d->x_test : d->x_train) + row * d->features, x + perm[i] * d->features,
               sizeof(float) * (size_t)d->features);
        (test ? d->y_test : d->y_train)[row] = y[perm[i]];
    }
    free(perm), free(x), free(y);
    return 0;
}

int data_load(const data_request *m, dataset *d, char *err, size_t cap) {
    memset(d, 0, sizeof *d);
    int rc = data_is_tokens(m->cfg)                 ? text_load(m, d, err, cap)
             : m->cfg->data.source == DATA_EMBEDDED ? load_spirals(m, d, err, cap)
             : m->cfg->data.source == DATA_MNIST    ? load_mnist(m, d, err, cap)
                                                    : load_csv(m, d, err, cap);
    if (rc) data_free(d);
    return rc;
}

void data_free(dataset *d) {
    free(d->x_train), free(d->x_test), free(d->y_train), free(d->y_test);
    free(d->tokens_train), free(d->tokens_val), free(d->ids_test);
    memset(d, 0, sizeof *d);
}
