/* inputs.c — the graph's inputs over the data: which input reads which features (or the
 * labels, their one-hot code, the token ids), the held-out rows uploaded once, each epoch's
 * shuffle of the training set written once per epoch, and token windows drawn per
 * micro-batch. A micro-batch then only moves the executor's first row (x.row0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/trainer.h"
#include "exec/inputs.h"

/* Points the graph's inputs at the training or the held-out buffers. */
void inputs_bind(ampx_trainer *t, int test) {
    for (int i = 0; i < t->g.n_inputs; i++)
        t->own[t->g.inputs[i]] = test ? t->in.test[i] : t->in.train[i];
}

/* Host rows [0, n) of x/y laid out as graph input i: a slice of the features, the labels,
 * or the one-hot encoding of the labels (an f32 regression target). */
static const void *input_rows(ampx_trainer *t, int i, const float *x, const int32_t *y, int64_t n,
                              uint64_t *bytes) {
    const g_value *v = &t->g.values[t->g.inputs[i]];
    int64_t e = g_elems(v), f = t->in.data.features, off = t->in.offset[i];
    *bytes = (uint64_t)(n * e) * 4;
    if (off == -1) return y;
    for (int64_t r = 0; r < n; r++)
        for (int64_t k = 0; k < e; k++)
            t->in.host[r * e + k] = off == -2 ? (float)(y[r] == k) : x[r * f + off + k];
    return t->in.host;
}

/* Token data: one i32 token input [T] and the i32 labels [T], the tokens that follow. */
static ampx_status map_tokens(ampx_trainer *t, data_request *req) {
    const g_graph *g  = &t->g;
    const char *file  = t->m->cfg.file;
    int ids           = -1;
    const g_value *lv = &g->values[g->labels];
    if (lv->dtype != AMPX_I32)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: token data trains a softmax cross-entropy over i32 labels", file);
    for (int i = 0; i < g->n_inputs; i++) {
        const g_value *v = &g->values[g->inputs[i]];
        if (g->inputs[i] == g->labels) {
            t->in.offset[i] = -1;
        } else if (v->dtype == AMPX_I32 && ids < 0) {
            t->in.offset[i] = -3;
            ids             = i;
        } else {
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: input \"%s\": token data feeds one i32 token input and the labels",
                           file, v->name);
        }
    }
    if (ids < 0)
        return tr_fail(
            t, AMPX_ERR_INVALID,
            "%s: token data needs an i32 token input (\"dtype\": \"i32\", \"shape\": [T])", file);
    const g_value *iv = &g->values[g->inputs[ids]];
    if (g_elems(iv) != g_elems(lv))
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: tokens \"%s\" hold %lld positions but labels \"%s\" %lld: the labels "
                       "are the next token at every position",
                       file, iv->name, (long long)g_elems(iv), lv->name, (long long)g_elems(lv));
    req->cfg        = &t->m->cfg;
    req->features   = 0;
    req->input_name = iv->name;
    req->classes    = g->classes;
    req->window     = g_elems(iv);
    t->in.tokens    = 1;
    return AMPX_OK;
}

/* Maps the inputs onto the data: f32 inputs take consecutive features in declaration order,
 * the labels input the class, an f32 target of the mean squared error its one-hot code (or,
 * from CSV, its real-valued target columns, stored after the features). */
ampx_status inputs_map(ampx_trainer *t, data_request *req) {
    const g_graph *g = &t->g;
    int64_t f        = 0;
    static _Thread_local char names[512]; /* req->input_name: per thread, as trainers are */
    names[0] = 0;
    memset(req, 0, sizeof *req);
    if (data_is_tokens(&t->m->cfg)) return map_tokens(t, req);
    for (int i = 0; i < g->n_inputs; i++) {
        const g_value *v = &g->values[g->inputs[i]];
        if (g->inputs[i] == g->labels) {
            if (v->dtype == AMPX_I32 && g_elems(v) != 1)
                return tr_fail(t, AMPX_ERR_INVALID,
                               "%s: labels \"%s\" hold %lld values per example; the embedded, "
                               "MNIST and CSV readers give one class per example",
                               t->m->cfg.file, v->name, (long long)g_elems(v));
            t->in.offset[i] = v->dtype == AMPX_I32 ? -1 : -2;
            continue;
        }
        if (v->dtype == AMPX_I32)
            return tr_fail(t, AMPX_ERR_INVALID,
                           "%s: i32 input \"%s\" is not the loss's labels; the embedded, MNIST "
                           "and CSV readers give one class per example (token inputs read a "
                           "text, tokens or embedded_text source)",
                           t->m->cfg.file, v->name);
        t->in.offset[i] = f;
        f += g_elems(v);
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s\"%s\"", len ? " + " : "", v->name);
    }
    req->cfg        = &t->m->cfg;
    req->features   = f;
    req->input_name = names;
    if (g->values[g->labels].dtype != AMPX_I32 && t->m->cfg.data.source == DATA_CSV) {
        /* regression: the targets are CSV columns, after the features in each row */
        req->targets = g_elems(&g->values[g->labels]);
        req->classes = 0;
        for (int i = 0; i < g->n_inputs; i++)
            if (g->inputs[i] == g->labels) t->in.offset[i] = f;
        return AMPX_OK;
    }
    if (g->values[g->labels].dtype == AMPX_I32)
        req->classes = g->classes;
    else
        req->classes = g_elems(&g->values[g->labels]);
    if (req->classes < 2)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "%s: an mse target of %lld values cannot be a class code of this data",
                       t->m->cfg.file, (long long)req->classes);
    return AMPX_OK;
}

/* The host staging of the data: the shuffled copy of the training set, and one input's rows
 * as the device gets them (the widest input over the larger split, or a micro-batch's ids
 * and labels). */
ampx_status inputs_alloc(ampx_trainer *t) {
    uint64_t f = (uint64_t)t->in.data.features, widest = f + 1;
    for (int i = 0; i < t->g.n_inputs; i++)
        if ((uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) > widest)
            widest = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]);
    int64_t most = t->in.data.n_train > t->in.data.n_test ? t->in.data.n_train : t->in.data.n_test;
    if (t->in.tokens) most = 2 * t->B; /* ids and labels of one micro-batch */
    t->in.shuffle_x = malloc(sizeof(float) * (size_t)(t->in.data.n_train * (int64_t)f + 1));
    t->in.shuffle_y = malloc(sizeof(int32_t) * (size_t)(t->in.data.n_train + 1));
    t->in.host      = malloc(sizeof(float) * (size_t)((uint64_t)most * widest + 1));
    if (!t->in.shuffle_x || !t->in.shuffle_y || !t->in.host)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the training set");
    return AMPX_OK;
}

ampx_status inputs_upload(ampx_trainer *t) {
    ampx_status st;
    if (t->in.tokens) {
        /* the fixed held-out windows; the training buffers hold one micro-batch */
        uint64_t bytes = (uint64_t)(t->in.data.n_test * t->in.data.window) * 4;
        for (int i = 0; i < t->g.n_inputs; i++) {
            const void *src = t->in.offset[i] == -3 ? t->in.data.ids_test : t->in.data.y_test;
            if ((st = tr_upload(t, &t->in.test[i], src, bytes)) ||
                (st = tr_alloc_zero(t, (uint64_t)(t->B * t->in.data.window) * 4, &t->in.train[i])))
                return st;
        }
        return AMPX_OK;
    }
    for (int i = 0; i < t->g.n_inputs; i++) {
        uint64_t bytes;
        const void *src =
            input_rows(t, i, t->in.data.x_test, t->in.data.y_test, t->in.data.n_test, &bytes);
        if ((st = tr_upload(t, &t->in.test[i], src, bytes))) return st;
        uint64_t per = (uint64_t)g_elems(&t->g.values[t->g.inputs[i]]) * 4;
        if ((st = tr_alloc_zero(t, (uint64_t)t->in.data.n_train * per, &t->in.train[i]))) return st;
    }
    return AMPX_OK;
}

void inputs_free(ampx_trainer *t) {
    for (int i = 0; i < G_MAX_INPUTS; i++) {
        if (t->in.train[i]) t->ifc->buffer_free(t->ctx, t->in.train[i]);
        if (t->in.test[i]) t->ifc->buffer_free(t->ctx, t->in.test[i]);
    }
    data_free(&t->in.data);
    free(t->in.shuffle_x);
    free(t->in.shuffle_y);
    free(t->in.host);
    free(t->in.batch_x);
    free(t->in.batch_y);
}

// ---------------------------------------------------------------------------------------
// Per micro-batch

/* Writes host rows x/y (n of them) into the training buffers of every input. */
ampx_status inputs_write_rows(ampx_trainer *t, const float *x, const int32_t *y, int64_t n) {
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->g.n_inputs && !st; i++) {
        uint64_t bytes;
        const void *src = input_rows(t, i, x, y, n, &bytes);
        st              = tr_check(t, t->ifc->buffer_write(t->ctx, t->in.train[i], 0, src, bytes),
                                   "buffer_write");
    }
    return st;
}

/* Puts epoch e's shuffle of the training set on the device (one write per input and epoch). */
static ampx_status load_epoch(ampx_trainer *t, int64_t e) {
    if (t->in.epoch_on_device == e) return AMPX_OK;
    int64_t n = t->in.data.n_train, f = t->in.data.features;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
    if (!perm) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t seed =
        t->m->cfg.train.seed * 0x9E3779B97F4A7C15ull + (uint64_t)e * 0x2545F4914F6CDD1Dull;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(data_uniform(seed, (uint64_t)i) * (double)(i + 1));
        int64_t x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(t->in.shuffle_x + i * f, t->in.data.x_train + perm[i] * f,
               sizeof(float) * (size_t)f);
        t->in.shuffle_y[i] = t->in.data.y_train[perm[i]];
    }
    free(perm);
    ampx_status st = inputs_write_rows(t, t->in.shuffle_x, t->in.shuffle_y, n);
    if (!st) t->in.epoch_on_device = e;
    return st;
}

/* Token data: micro-batch `key`'s windows, drawn with the seed, into the training buffers. */
ampx_status inputs_write_windows(ampx_trainer *t, uint64_t key) {
    int32_t *ids = (int32_t *)t->in.host, *labels = ids + t->B * t->in.data.window;
    if (text_draw(&t->in.data, t->m->cfg.train.seed * 0xD1B54A32D192ED03ull + 5, key,
                  t->B * t->dp.world, t->B * t->dp.rank, t->B, ids, labels))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the shuffled order");
    ampx_status st = AMPX_OK;
    uint64_t bytes = (uint64_t)(t->B * t->in.data.window) * 4;
    for (int i = 0; i < t->g.n_inputs && !st; i++)
        st = tr_check(t,
                      t->ifc->buffer_write(t->ctx, t->in.train[i], 0,
                                           t->in.offset[i] == -3 ? ids : labels, bytes),
                      "buffer_write");
    return st;
}

// ---------------------------------------------------------------------------------------
// The caller's batches (ampx_trainer_set_batches)

int64_t ampx_trainer_row_values(const ampx_trainer *t) {
    return t->in.tokens ? 0 : t->in.data.features;
}

ampx_status ampx_trainer_set_batches(ampx_trainer *t, ampx_batch_fn fn, void *user) {
    if (t->in.tokens)
        return tr_fail(t, AMPX_ERR_UNSUPPORTED,
                       "a batch source gives rows of values: token models draw their windows");
    if (fn && !t->in.batch_x) {
        t->in.batch_x = calloc((size_t)(t->B * t->in.data.features) + 1, sizeof(float));
        t->in.batch_y = calloc((size_t)t->B + 1, sizeof(int32_t));
        if (!t->in.batch_x || !t->in.batch_y)
            return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for a batch");
    }
    t->in.batch_fn        = fn;
    t->in.batch_user      = user;
    t->in.epoch_on_device = -1; /* the training buffers now hold other rows */
    return AMPX_OK;
}

/* The classes a row's label takes when the data gives one (the labels input reads a class,
 * or an mse model's one-hot code of it); 0 for real-valued targets. */
static int64_t source_classes(const ampx_trainer *t) {
    for (int i = 0; i < t->g.n_inputs; i++)
        if (t->in.offset[i] == -1 || t->in.offset[i] == -2)
            return t->in.offset[i] == -1 ? t->g.classes : g_elems(&t->g.values[t->g.labels]);
    return 0;
}

/* Micro-batch `micro` from the caller's source, checked, into the training buffers. */
static ampx_status source_batch(ampx_trainer *t, int64_t micro) {
    int64_t f = t->in.data.features, classes = source_classes(t);
    int classify = classes > 0;
    if (t->in.batch_fn(t->in.batch_user, micro, t->B, t->in.batch_x,
                       classify ? t->in.batch_y : NULL))
        return tr_fail(t, AMPX_ERR_INVALID, "the batch source stopped at micro-batch %lld",
                       (long long)micro);
    for (int64_t r = 0; r < t->B; r++) {
        for (int64_t c = 0; c < f; c++)
            if (!isfinite(t->in.batch_x[r * f + c]))
                return tr_fail(t, AMPX_ERR_INVALID,
                               "batch source, micro-batch %lld: row %lld column %lld is not "
                               "finite",
                               (long long)micro, (long long)r, (long long)c);
        if (classify && (t->in.batch_y[r] < 0 || t->in.batch_y[r] >= classes))
            return tr_fail(t, AMPX_ERR_INVALID,
                           "batch source, micro-batch %lld: row %lld has class %d, not in [0, "
                           "%lld)",
                           (long long)micro, (long long)r, t->in.batch_y[r], (long long)classes);
    }
    inputs_bind(t, 0);
    t->x.row0 = 0;
    t->x.rows = (uint64_t)t->B;
    return inputs_write_rows(t, t->in.batch_x, t->in.batch_y, t->B);
}

ampx_status inputs_select_micro(ampx_trainer *t, int64_t global_micro) {
    if (t->in.batch_fn) return source_batch(t, global_micro);
    if (t->in.tokens) {
        inputs_bind(t, 0);
        t->x.row0 = 0;
        t->x.rows = (uint64_t)t->B;
        return inputs_write_windows(t, (uint64_t)global_micro);
    }
    /* rank r of N reads rows [r*B, (r+1)*B) of the global batch of N*B rows */
    ampx_status st = load_epoch(t, global_micro / t->in.micro_per_epoch);
    inputs_bind(t, 0);
    t->x.row0 =
        (uint64_t)(((global_micro % t->in.micro_per_epoch) * t->dp.world + t->dp.rank) * t->B);
    t->x.rows = (uint64_t)t->B;
    return st;
}
