/* data.c — the data a model trains on: the embedded spirals (generated from the seed, so
 * `ampx train models/mlp.json` needs no files), MNIST IDX files and CSV files. */
#include "data/data.h"
#include "data/shuffle.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "ampx/train.h"
#include "base/error.h"
#include "config/input.h"
#include "config/json.h"

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

static int load_spirals(const data_request *m, dataset *d, ampx_err e) {
    const data_config *c = &m->cfg->data;
    int64_t n = c->samples, k = m->classes, f = m->features;
    if (f < 2) {
        err_set(e,
                "%s: the embedded spirals have 2 features (or more with distractors); input "
                "\"%s\" has %lld",
                m->cfg->file, m->input_name, (long long)f);
        return -1;
    }
    int64_t n_test = (int64_t)((double)n * c->test_fraction);
    if (alloc_split(d, n - n_test, n_test, f)) {
        err_set(e, "%s: out of memory for %lld examples", m->cfg->file, (long long)n);
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
// (ubyte labels n). Pixels are scaled to [0, 1]. The sizes in the header are untrusted: their
// product is computed with overflow checks and must be the file's data size exactly.

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int data_idx_check(const char *path, uint32_t magic, const unsigned char *buf, size_t len,
                   int64_t dims[3], ampx_err e) {
    int nd = (int)(magic & 0xFF);
    if (len >= 2 && buf[0] == 0x1F && buf[1] == 0x8B) {
        err_set(e, "%s: gzip-compressed; decompress it first (gunzip)", path);
        return -1;
    }
    if (len < 4 || be32(buf) != magic) {
        err_set(e, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)", path,
                nd == 3 ? "image" : "label", len >= 4 ? be32(buf) : 0, magic);
        return -1;
    }
    if (len < 4 + 4 * (size_t)nd) {
        err_set(e, "%s: truncated IDX header (%zu bytes)", path, len);
        return -1;
    }
    uint64_t need = 1, have = len - 4 - 4 * (size_t)nd;
    int overflow = 0;
    for (int i = 0; i < nd; i++) {
        dims[i] = be32(buf + 4 + 4 * i);
        overflow |= __builtin_mul_overflow(need, (uint64_t)dims[i], &need);
    }
    if (dims[0] == 0 || overflow || need != have) {
        char says[64];
        if (overflow)
            snprintf(says, sizeof says, "more than 2^64");
        else
            snprintf(says, sizeof says, "%llu", (unsigned long long)need);
        err_set(e,
                "%s: the header says %lld items (%s data bytes) but the file holds %llu data "
                "bytes",
                path, (long long)dims[0], says, (unsigned long long)have);
        return -1;
    }
    return 0;
}

static int idx_open(const char *path, uint32_t magic, unsigned char **buf, size_t *len,
                    int64_t dims[3], ampx_err e) {
    *buf = (unsigned char *)input_read(path, input_max_bytes(), len, e);
    if (!*buf) return -1;
    return data_idx_check(path, magic, *buf, *len, dims, e);
}

static int load_idx_pair(const data_request *m, const char *images, const char *labels, float **x,
                         int32_t **y, int64_t *n, ampx_err e) {
    unsigned char *ib = NULL, *lb = NULL;
    size_t il, ll;
    int64_t idim[3], ldim[3];
    int rc = -1;
    if (idx_open(images, 0x00000803, &ib, &il, idim, e)) goto out;
    if (idx_open(labels, 0x00000801, &lb, &ll, ldim, e)) goto out;
    /* idx_check bounded rows * cols * n by the file size: no overflow from here on */
    int64_t f = idim[1] * idim[2];
    if (f != m->features) {
        err_set(e, "%s: images are %lldx%lld = %lld features but input \"%s\" of %s has %lld",
                images, (long long)idim[1], (long long)idim[2], (long long)f, m->input_name,
                m->cfg->file, (long long)m->features);
        goto out;
    }
    if (ldim[0] != idim[0]) {
        err_set(e, "%s: %lld labels for %lld images in %s", labels, (long long)ldim[0],
                (long long)idim[0], images);
        goto out;
    }
    *n = idim[0];
    *x = malloc(sizeof(float) * (size_t)(*n * f));
    *y = malloc(sizeof(int32_t) * (size_t)*n);
    if (!*x || !*y) {
        err_set(e, "%s: out of memory", images);
        goto out;
    }
    for (int64_t i = 0; i < *n * f; i++)
        (*x)[i] = (float)ib[16 + i] / 255.0f;
    for (int64_t i = 0; i < *n; i++) {
        int32_t l = lb[8 + i];
        if (l >= m->classes) {
            err_set(e, "%s: label %d of example %lld is not below the model's %lld classes", labels,
                    l, (long long)i, (long long)m->classes);
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

static int load_mnist(const data_request *m, dataset *d, ampx_err e) {
    const data_config *c = &m->cfg->data;
    d->features          = m->features;
    return load_idx_pair(m, c->train_images, c->train_labels, &d->x_train, &d->y_train, &d->n_train,
                         e) ||
           load_idx_pair(m, c->test_images, c->test_labels, &d->x_test, &d->y_test, &d->n_test, e);
}

// ---------------------------------------------------------------------------------------
// CSV: decimal numbers separated by commas, one example per line (lines end in LF, CRLF or
// CR), the label an integer column (the last by default). Numbers are what a CSV writer
// prints: an optional sign, digits with an optional fraction, an optional exponent; hex,
// "inf", "nan" and values beyond f32's range are refused. With "header" unset, a first line
// is a header when none of its fields is empty and one of them is not a number.

/* The next line of text[*pos, len): its start, its length; *pos moves past its end. */
static int next_line(const char *text, size_t len, size_t *pos, const char **line, size_t *ll) {
    if (*pos >= len) return 0;
    size_t i = *pos;
    while (i < len && text[i] != '\n' && text[i] != '\r')
        i++;
    *line = text + *pos;
    *ll   = i - *pos;
    if (i < len) i += text[i] == '\r' && i + 1 < len && text[i + 1] == '\n' ? 2 : 1;
    *pos = i;
    return 1;
}

/* A decimal number in [s, s + n), blanks around it allowed. 1 and *v if it is one. */
static int csv_number(const char *s, size_t n, double *v) {
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (!digits) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t ed = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, ed++;
        if (!ed) return 0;
    }
    if (i != n || n > 320) return 0;
    char buf[330];
    memcpy(buf, s, n);
    buf[n] = 0;
    *v     = strtod(buf, NULL);
    return 1;
}

/* Whether blanks alone fill [s, s + n). */
static int csv_blank(const char *s, size_t n) {
    size_t b = 0;
    while (b < n && (s[b] == ' ' || s[b] == '\t'))
        b++;
    return b == n;
}

/* "auto" header detection: a header has no empty field and one that is not a number. */
static int csv_is_header(const char *line, size_t ll) {
    int empty = 0, text_field = 0;
    for (size_t a = 0, k = 0; k <= ll; k++)
        if (k == ll || line[k] == ',') {
            double v;
            if (csv_blank(line + a, k - a))
                empty = 1;
            else if (!csv_number(line + a, k - a, &v))
                text_field = 1;
            a = k + 1;
        }
    return text_field && !empty;
}

/* Room for twice the rows (at least 64) of f features and a label. */
static int csv_grow(const char *path, int64_t f, float **x, int32_t **y, int64_t *rows_cap,
                    ampx_err e) {
    int64_t nc = *rows_cap ? *rows_cap * 2 : 64;
    size_t xb;
    if (__builtin_mul_overflow((size_t)nc, (size_t)f * sizeof(float), &xb))
        return err_set(e, "%s: out of memory", path);
    float *nx   = realloc(*x, xb ? xb : 1);
    int32_t *ny = nx ? realloc(*y, sizeof(int32_t) * (size_t)nc) : NULL;
    if (nx) *x = nx;
    if (ny) *y = ny;
    if (!nx || !ny)
        return err_set(e, "%s: out of memory for %lld rows of %lld features", path, (long long)nc,
                       (long long)f);
    *rows_cap = nc;
    return 0;
}

/* Line line_no (ll bytes, cols fields) into its features x (f of them) and label *y. */
static int csv_row(const data_request *m, const char *path, const char *line, size_t ll,
                   int64_t line_no, int64_t labcol, float *x, int32_t *y, ampx_err e) {
    int64_t col = 0, fi = 0;
    for (size_t a = 0, k = 0; k <= ll; k++) {
        if (k < ll && line[k] != ',') continue;
        double v;
        int shown = (int)(k - a < 40 ? k - a : 40);
        if (!csv_number(line + a, k - a, &v)) {
            if (csv_blank(line + a, k - a))
                return err_set(e, "%s:%lld: column %lld is empty", path, (long long)line_no,
                               (long long)col + 1);
            return err_set(e, "%s:%lld: column %lld: \"%.*s\" is not a number%s", path,
                           (long long)line_no, (long long)col + 1, shown, line + a,
                           line_no == 1 ? " (set \"header\": true if this line is a header)" : "");
        }
        if (m->targets && col >= labcol && col < labcol + m->targets) {
            if (!(fabs(v) <= FLT_MAX))
                return err_set(e, "%s:%lld: target %.*s is out of the range of f32", path,
                               (long long)line_no, shown, line + a);
            x[m->features + (col - labcol)] = (float)v;
            *y                              = 0;
        } else if (col == labcol) {
            if (v != floor(v) || v < 0 || v >= (double)m->classes)
                return err_set(e, "%s:%lld: label %g is not an integer in [0, %lld)", path,
                               (long long)line_no, v, (long long)m->classes);
            *y = (int32_t)v;
        } else {
            if (!(fabs(v) <= FLT_MAX))
                return err_set(e, "%s:%lld: column %lld: %.*s is out of the range of f32", path,
                               (long long)line_no, (long long)col + 1, shown, line + a);
            x[fi++] = (float)v;
        }
        col++;
        a = k + 1;
    }
    return 0;
}

int data_csv_parse(const data_request *m, const char *path, const char *text, size_t len, float **x,
                   int32_t **y, int64_t *n, ampx_err e) {
    int64_t nt = m->targets ? m->targets : 1, f = m->features, cols = f + nt;
    int64_t labcol   = m->cfg->data.label_column < 0 ? cols - nt : m->cfg->data.label_column;
    int64_t rows_cap = 0, rows = 0;
    int rc = -1;
    *x = NULL, *y = NULL;
    if (labcol + nt > cols) {
        err_set(e, "%s: label_column %lld is past the %lld columns (features + %s) the model reads",
                path, (long long)labcol, (long long)cols, m->targets ? "targets" : "label");
        goto out;
    }
    if (memchr(text, 0, len)) {
        err_set(e, "%s: a NUL byte at offset %zu: not a text file", path,
                (size_t)((const char *)memchr(text, 0, len) - text));
        goto out;
    }
    size_t pos = 0, ll;
    const char *line;
    for (int64_t line_no = 1; next_line(text, len, &pos, &line, &ll); line_no++) {
        if (ll == 0) continue;
        /* a row of cols numbers holds at least 2 * cols - 1 bytes: count before allocating */
        int64_t fields = 1;
        for (size_t k = 0; k < ll; k++)
            fields += line[k] == ',';
        int header = line_no == 1 && m->cfg->data.header == 1;
        if (line_no == 1 && m->cfg->data.header == -1) header = csv_is_header(line, ll);
        if (header) continue;
        if (fields != cols) {
            char what[48] = "a label";
            if (m->targets) snprintf(what, sizeof what, "%lld targets", (long long)nt);
            err_set(e, "%s:%lld: expected %lld columns (%lld features and %s), found %lld", path,
                    (long long)line_no, (long long)cols, (long long)f, what, (long long)fields);
            goto out;
        }
        int64_t stride = f + m->targets;
        if (rows == rows_cap && csv_grow(path, stride, x, y, &rows_cap, e)) goto out;
        if (csv_row(m, path, line, ll, line_no, labcol, *x + rows * stride, *y + rows, e)) goto out;
        rows++;
    }
    if (rows == 0) {
        err_set(e, "%s: no examples", path);
        goto out;
    }
    *n = rows;
    rc = 0;
out:
    if (rc) {
        free(*x), free(*y);
        *x = NULL, *y = NULL;
    }
    return rc;
}

static int csv_read(const data_request *m, const char *path, float **x, int32_t **y, int64_t *n,
                    ampx_err e) {
    size_t len;
    char *text = input_read(path, input_max_bytes(), &len, e);
    if (!text) return -1;
    int rc = data_csv_parse(m, path, text, len, x, y, n, e);
    free(text);
    return rc;
}

static int load_csv(const data_request *m, dataset *d, ampx_err e) {
    const data_config *c = &m->cfg->data;
    d->features          = m->features + m->targets; /* regression targets after the features */
    float *x;
    int32_t *y;
    int64_t n;
    if (csv_read(m, c->train_csv, &x, &y, &n, e)) return -1;
    if (c->test_csv) {
        d->x_train = x, d->y_train = y, d->n_train = n;
        return csv_read(m, c->test_csv, &d->x_test, &d->y_test, &d->n_test, e);
    }
    /* No test file: a seeded permutation, the last test_fraction held out. */
    int64_t n_test = (int64_t)((double)n * c->test_fraction);
    if (n_test < 1 || n - n_test < 1) {
        err_set(e, "%s: %lld examples are too few to hold out %g of them", c->train_csv,
                (long long)n, c->test_fraction);
        free(x), free(y);
        return -1;
    }
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm || alloc_split(d, n - n_test, n_test, d->features)) {
        free(perm), free(x), free(y);
        err_set(e, "%s: out of memory", c->train_csv);
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

// ---------------------------------------------------------------------------------------
// The caller's arrays (ampx_model_set_data): copied, every value and class checked.

static int memory_rows(const data_request *m, const char *which, const float *x, const int32_t *y,
                       int64_t n, float *dx, int32_t *dy, ampx_err e) {
    const ampx_memory_data *md = m->cfg->data.memory;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t c = 0; c < md->row; c++) {
            float v = x[r * md->row + c];
            if (!isfinite(v))
                return err_set(e,
                               "in-memory data: x_%s row %lld column %lld is %g, "
                               "expected a finite number",
                               which, (long long)r, (long long)c, (double)v);
            dx[r * md->row + c] = v;
        }
        dy[r] = 0;
        if (m->targets) continue;
        if (y[r] < 0 || y[r] >= m->classes)
            return err_set(e,
                           "in-memory data: y_%s row %lld is %d, expected a "
                           "class in [0, %lld)",
                           which, (long long)r, y[r], (long long)m->classes);
        dy[r] = y[r];
    }
    return 0;
}

static int load_memory(const data_request *m, dataset *d, ampx_err e) {
    const ampx_memory_data *md = m->cfg->data.memory;
    int64_t want               = m->features + m->targets;
    if (md->row != want || want < 1)
        return err_set(e,
                       "in-memory data: rows of %lld values, but the model reads "
                       "%lld (%lld features of %s%s)",
                       (long long)md->row, (long long)want, (long long)m->features, m->input_name,
                       m->targets ? " and its regression targets" : "");
    if (md->n_train < 1 || md->n_test < 1 || !md->x_train || !md->x_test)
        return err_set(e,
                       "in-memory data: %lld training and %lld held-out rows; "
                       "both need at least one, with their x arrays",
                       (long long)md->n_train, (long long)md->n_test);
    if (md->n_train > INT64_MAX / 8 / want || md->n_test > INT64_MAX / 8 / want)
        return err_set(e,
                       "in-memory data: %lld and %lld rows of %lld values are "
                       "more than memory holds",
                       (long long)md->n_train, (long long)md->n_test, (long long)want);
    if (!m->targets && (!md->y_train || !md->y_test))
        return err_set(e, "in-memory data: a classifier needs y_train and y_test");
    if (alloc_split(d, md->n_train, md->n_test, want)) return err_set(e, "out of memory");
    if (memory_rows(m, "train", md->x_train, md->y_train, md->n_train, d->x_train, d->y_train, e))
        return -1;
    return memory_rows(m, "test", md->x_test, md->y_test, md->n_test, d->x_test, d->y_test, e);
}

int data_load(const data_request *m, dataset *d, ampx_err e) {
    memset(d, 0, sizeof *d);
    if (m->cfg->data.memory) {
        int rc = load_memory(m, d, e);
        if (rc) data_free(d);
        return rc;
    }
    int rc = data_is_tokens(m->cfg)                 ? text_load(m, d, e)
             : m->cfg->data.source == DATA_EMBEDDED ? load_spirals(m, d, e)
             : m->cfg->data.source == DATA_MNIST    ? load_mnist(m, d, e)
                                                    : load_csv(m, d, e);
    if (rc) data_free(d);
    if (rc && m->cfg->data.data_set[0] && strstr(e.msg, strerror(ENOENT))) {
        const char *set = m->cfg->data.data_set;
        err_add(e,
                " (a $DATA file: fetch \"%s\" with tools/data/%s.sh, or point "
                "AMPX_DATA_DIR at the folder that holds %s/)",
                set, set, set);
    }
    return rc;
}

void data_free(dataset *d) {
    free(d->x_train), free(d->x_test), free(d->y_train), free(d->y_test);
    free(d->tokens_train), free(d->tokens_val), free(d->ids_test), free(d->shard_start);
    if (d->shuffle) chunk_order_free(d->shuffle);
    free(d->shuffle);
    memset(d, 0, sizeof *d);
}
