/* infer.c — forward passes outside a step: the held-out evaluation, a token model's logits,
 * a feature model's predictions, and the gradients of one batch (for checks against finite
 * differences). Each runs the executor over rows of the graph's inputs with run_rows() and
 * reads the logits back with read_logits(); the step's executor settings are put back after,
 * so a run goes on as if nothing had happened (the training rows on the device are reloaded
 * on the next step when they were overwritten). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "exec/trainer.h"
#include "exec/inputs.h"
#include "infer/kvcache.h"

/* Runs the graph over rows [row0, row0 + rows) of the training (test: held-out) input
 * buffers: the forward nodes, and the backward ones when training. The loss goes to
 * eval_loss. */
static ampx_status run_rows(ampx_trainer *t, int test, int training, uint64_t row0, uint64_t rows) {
    inputs_bind(t, test);
    t->x.training = training;
    t->x.micro    = 0;
    t->x.loss     = tr_tensor(t->eval_loss, 0, AMPX_F32);
    t->x.row0     = row0;
    t->x.rows     = rows;
    return tr_micro_batch(t);
}

/* The executor as the step uses it. */
static void run_done(ampx_trainer *t) {
    inputs_bind(t, 0);
    t->x.training = 1;
    t->x.rows     = (uint64_t)t->B;
}

/* n logits of the last run from element first, widened to f32 into out (n f32). Read as stored (f16
 * and bf16 take the first half of out), then widened in place from the last element down:
 * element k's 4 bytes overlap only stored elements 2k and 2k+1, already read. Widening is
 * exact. */
static ampx_status tr_read_logits(ampx_trainer *t, uint64_t first, uint64_t n, float *out) {
    const g_graph *g = &t->g;
    ampx_dtype ld    = g->values[g->logits].dtype;
    ampx_tensor lt   = exec_tensor(&t->x, g->logits);
    ampx_status st =
        tr_check(t,
                 t->ifc->buffer_read(t->ctx, lt.buf, lt.offset + first * ampx_dtype_size(ld), out,
                                     n * ampx_dtype_size(ld)),
                 "buffer_read");
    if (st || ld == AMPX_F32) return st;
    const uint16_t *raw = (const uint16_t *)out;
    for (uint64_t k = n; k-- > 0;)
        out[k] = ld == AMPX_BF16 ? ampx_bf16_to_f32(raw[k]) : ampx_f16_to_f32(raw[k]);
    return AMPX_OK;
}

static ampx_status read_logits(ampx_trainer *t, uint64_t n, float *out) {
    return tr_read_logits(t, 0, n, out);
}

static ampx_status read_loss(ampx_trainer *t, float *loss) {
    return tr_check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, 0, loss, 4), "buffer_read");
}

/* The index of the largest of c values (the first of equals). */
static int64_t argmax(const float *v, uint64_t c) {
    int64_t best = 0;
    float bv     = -INFINITY;
    for (uint64_t j = 0; j < c; j++)
        if (v[j] > bv) bv = v[j], best = (int64_t)j;
    return best;
}

/* The offset in the data rows of the real-valued targets (CSV regression), or -1. */
static int64_t target_offset(const ampx_trainer *t) {
    for (int i = 0; i < t->g.n_inputs; i++)
        if (t->g.inputs[i] == t->g.labels && t->g.values[t->g.labels].dtype != AMPX_I32)
            return t->in.offset[i] >= 0 ? t->in.offset[i] : -1;
    return -1;
}

/* Per target column k of c: sums over the held-out rows of the error, its square and
 * absolute value, and of the target and its square (for R^2), in double. */
typedef struct reg_sums {
    double *se, *ae, *y, *y2;
} reg_sums;

static void reg_add(reg_sums *s, const float *pred, const float *x, int64_t stride, int64_t off,
                    uint64_t rows, uint64_t c) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t k = 0; k < c; k++) {
            double y = x[(int64_t)r * stride + off + (int64_t)k], e = pred[r * c + k] - y;
            s->se[k] += e * e, s->ae[k] += fabs(e), s->y[k] += y, s->y2[k] += y * y;
        }
}

static void reg_result(const reg_sums *s, uint64_t c, int64_t n, ampx_eval_result *out) {
    double se = 0, ae = 0, r2 = 0;
    for (uint64_t k = 0; k < c; k++) {
        double sst = s->y2[k] - s->y[k] * s->y[k] / (double)n;
        se += s->se[k], ae += s->ae[k];
        r2 += sst > 0 ? 1 - s->se[k] / sst : (s->se[k] == 0 ? 1 : 0);
    }
    out->regression = 1;
    out->mse        = se / ((double)n * (double)c);
    out->mae        = ae / ((double)n * (double)c);
    out->r2         = r2 / (double)c;
}

/* The held-out regression figures (CSV targets), one forward per batch of rows. */
static ampx_status evaluate_regression(ampx_trainer *t, int64_t off, ampx_eval_result *out) {
    const g_graph *g = &t->g;
    int64_t n = t->in.data.n_test, stride = t->in.data.features;
    uint64_t c     = (uint64_t)g_elems(&g->values[g->logits]);
    float *pred    = malloc((size_t)((uint64_t)t->B * c * 4));
    double *sums   = calloc(4 * c, sizeof *sums);
    reg_sums s     = {sums, sums + c, sums + 2 * c, sums + 3 * c};
    double lsum    = 0;
    ampx_status st = pred && sums ? AMPX_OK : tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t r0 = 0; r0 < n && !st; r0 += t->B) {
        uint64_t rows = (uint64_t)(n - r0 < t->B ? n - r0 : t->B);
        float loss;
        if ((st = run_rows(t, 1, 0, (uint64_t)r0, rows)) || (st = read_logits(t, rows * c, pred)) ||
            (st = read_loss(t, &loss)))
            break;
        lsum += (double)loss * (double)rows;
        reg_add(&s, pred, t->in.data.x_test + r0 * stride, stride, off, rows, c);
    }
    run_done(t);
    if (!st) {
        out->examples = n, out->accuracy = -1, out->loss = n ? lsum / (double)n : 0;
        reg_result(&s, c, n, out);
    }
    free(pred), free(sums);
    return st;
}

static ampx_status evaluate(ampx_trainer *t, ampx_eval_result *out) {
    int64_t off = t->in.tokens ? -1 : target_offset(t);
    if (off >= 0) return evaluate_regression(t, off, out);
    const g_graph *g = &t->g;
    int64_t n = t->in.data.n_test, correct = 0;
    double loss_sum = 0;
    int classify    = g->values[g->labels].dtype == AMPX_I32;
    uint64_t c      = (uint64_t)g_last(&g->values[g->logits]);
    uint64_t pos    = classify ? (uint64_t)g_elems(&g->values[g->labels]) : 1;
    float *logits   = malloc((size_t)((uint64_t)t->B * pos * c * 4));
    if (!logits) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    for (int64_t r0 = 0; r0 < n && !st; r0 += t->B) {
        uint64_t rows = (uint64_t)(n - r0 < t->B ? n - r0 : t->B);
        float loss;
        if ((st = run_rows(t, 1, 0, (uint64_t)r0, rows)) ||
            (classify && (st = read_logits(t, rows * pos * c, logits))) ||
            (st = read_loss(t, &loss)))
            break;
        loss_sum += (double)loss * (double)rows;
        for (uint64_t r = 0; classify && r < rows * pos; r++)
            correct +=
                argmax(logits + r * c, c) == t->in.data.y_test[r0 * (int64_t)pos + (int64_t)r];
    }
    n *= (int64_t)pos; /* accuracy per position */
    free(logits);
    run_done(t);
    if (st) return st;
    out->examples = n;
    out->accuracy = !classify ? -1 : n ? (double)correct / (double)n : 0;
    out->loss     = n ? loss_sum / (double)(n / (int64_t)pos) : 0;
    return AMPX_OK;
}

ampx_status ampx_trainer_evaluate(ampx_trainer *t, ampx_eval_result *out) {
    memset(out, 0, sizeof *out);
    int claimed = tr_claim(t);
    if (claimed < 0) return AMPX_ERR_BUSY;
    ampx_status st = evaluate(t, out);
    tr_release(t, claimed);
    return st;
}

ampx_status ampx_trainer_logits(ampx_trainer *t, const int32_t *ids, int64_t rows, float *logits) {
    const g_graph *g = &t->g;
    if (!t->in.tokens)
        return tr_fail(t, AMPX_ERR_INVALID, "logits of token windows need a token model");
    if (rows < 1 || rows > t->B)
        return tr_fail(t, AMPX_ERR_INVALID, "%lld windows; at most the batch, %lld",
                       (long long)rows, (long long)t->B);
    uint64_t T = (uint64_t)t->in.data.window, c = (uint64_t)g_last(&g->values[g->logits]);
    uint64_t n     = (uint64_t)rows * T;
    ampx_status st = AMPX_OK;
    memset(t->in.host, 0, n * 4); /* the labels: any class will do, the loss is not read */
    for (int i = 0; i < g->n_inputs && !st; i++)
        st = tr_check(t,
                      t->ifc->buffer_write(t->ctx, t->in.train[i], 0,
                                           t->in.offset[i] == -3 ? (const void *)ids : t->in.host,
                                           n * 4),
                      "buffer_write");
    if (st) return st;
    st = run_rows(t, 0, 0, 0, (uint64_t)rows);
    if (!st) st = read_logits(t, n * c, logits);
    run_done(t);
    if (!st) kv_filled(t, ids, rows);
    return st;
}

/* The logits at position len - 1 of the window ids[0 .. len): through the KV cache where the
 * window shares a prefix with the last one (kvcache.c), else the whole forward. */
ampx_status ampx_trainer_logits_last(ampx_trainer *t, const int32_t *ids, int64_t len,
                                     float *logits) {
    int64_t T = ampx_trainer_window(t), same = 0;
    if (!t->in.tokens)
        return tr_fail(t, AMPX_ERR_INVALID, "logits of token windows need a token model");
    if (len < 1 || len > T)
        return tr_fail(t, AMPX_ERR_INVALID, "a window of %lld tokens; the model reads 1..%lld",
                       (long long)len, (long long)T);
    uint64_t V     = (uint64_t)ampx_trainer_vocab(t);
    ampx_status st = kv_advance(t, ids, len, &same);
    if (st || same > 0) return st ? st : tr_read_logits(t, (uint64_t)(len - 1) * V, V, logits);
    /* the whole forward (over the window padded with zeros), then its row len - 1 */
    int32_t *padded = calloc((size_t)T, sizeof *padded);
    float *all      = malloc(sizeof *all * (size_t)T * V);
    st              = padded && all ? AMPX_OK : tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    if (!st) {
        memcpy(padded, ids, sizeof *ids * (size_t)len);
        st = ampx_trainer_logits(t, padded, 1, all);
    }
    if (!st) memcpy(logits, all + (uint64_t)(len - 1) * V, sizeof *logits * V);
    free(padded), free(all);
    return st;
}

ampx_status ampx_trainer_predict(ampx_trainer *t, const float *x, int64_t rows, float *out) {
    const g_graph *g = &t->g;
    if (t->in.tokens)
        return tr_fail(t, AMPX_ERR_INVALID, "predictions of rows need a feature model");
    if (rows < 1 || rows > t->B)
        return tr_fail(t, AMPX_ERR_INVALID, "%lld rows; at most the batch, %lld", (long long)rows,
                       (long long)t->B);
    int32_t *zeros = calloc((size_t)rows, sizeof *zeros);
    /* a regression's data rows hold the targets after the features: zero ones here */
    int64_t off = target_offset(t), stride = t->in.data.features;
    float *wide = off >= 0 ? calloc((size_t)(rows * stride), sizeof *wide) : NULL;
    if (!zeros || (off >= 0 && !wide)) {
        free(zeros), free(wide);
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    }
    for (int64_t r = 0; wide && r < rows; r++)
        memcpy(wide + r * stride, x + r * off, sizeof(float) * (size_t)off);
    ampx_status st = inputs_write_rows(t, wide ? wide : x, zeros, rows);
    free(zeros), free(wide);
    if (st) return st;
    t->in.epoch_on_device = -1; /* the training rows there were overwritten */
    uint64_t c            = (uint64_t)g_elems(&g->values[g->logits]);
    st                    = run_rows(t, 0, 0, 0, (uint64_t)rows);
    if (!st) st = read_logits(t, (uint64_t)rows * c, out);
    run_done(t);
    /* a classifier's logits become its probabilities (softmax in double) */
    if (!st && g->values[g->labels].dtype == AMPX_I32)
        for (int64_t r = 0; r < rows; r++) {
            float *row = out + (uint64_t)r * c;
            double mx = -INFINITY, sum = 0;
            for (uint64_t j = 0; j < c; j++)
                mx = row[j] > mx ? row[j] : mx;
            for (uint64_t j = 0; j < c; j++)
                sum += exp((double)row[j] - mx);
            for (uint64_t j = 0; j < c; j++)
                row[j] = (float)(exp((double)row[j] - mx) / sum);
        }
    return st;
}

ampx_status ampx_trainer_gradients(ampx_trainer *t, int64_t first, double *loss) {
    ampx_status st;
    if (t->in.tokens) {
        /* the windows of a draw keyed apart from the steps' */
        st = first < 0 ? tr_fail(t, AMPX_ERR_INVALID, "no draw %lld", (long long)first)
                       : inputs_write_windows(t, (uint64_t)first | 1ull << 62);
    } else {
        if (first < 0 || first + t->B > t->in.data.n_train)
            return tr_fail(t, AMPX_ERR_INVALID, "rows %lld..%lld are outside the training set",
                           (long long)first, (long long)(first + t->B));
        /* unshuffled rows: written over the epoch's copy, which is reloaded on the next step */
        int64_t f = t->in.data.features;
        st = inputs_write_rows(t, t->in.data.x_train + first * f, t->in.data.y_train + first, t->B);
    }
    if (st) return st;
    t->in.epoch_on_device = -1;
    t->x.step             = (uint64_t)t->step;
    t->x.micro_batches    = 1;
    t->x.fp8_frozen       = 1; /* outside a step: the fp8 amaxes and counts stay the steps' */
    st                    = run_rows(t, 0, 1, 0, (uint64_t)t->B);
    t->x.fp8_frozen       = 0;
    t->x.micro_batches    = (uint64_t)t->A;
    float l               = 0;
    if (!st) st = read_loss(t, &l);
    *loss = l;
    return st;
}

int64_t ampx_trainer_window(const ampx_trainer *t) {
    return t->in.tokens ? t->in.data.window : 0;
}

double ampx_trainer_bytes_per_token(const ampx_trainer *t) {
    if (!t->in.tokens) return 0;
    const data_config *d = &t->m->cfg.data;
    return d->source == DATA_TOKENS ? d->bytes_per_token : 1;
}

int64_t ampx_trainer_vocab(const ampx_trainer *t) {
    return t->in.tokens ? (int64_t)g_last(&t->g.values[t->g.logits]) : 0;
}

int64_t ampx_trainer_features(const ampx_trainer *t) {
    if (t->in.tokens) return 0;
    int64_t off = target_offset(t); /* a regression's rows: the features, then the targets */
    return off >= 0 ? off : t->in.data.features;
}

int64_t ampx_trainer_outputs(const ampx_trainer *t) {
    return t->in.tokens ? 0 : g_elems(&t->g.values[t->g.logits]);
}

int64_t ampx_trainer_targets(const ampx_trainer *t) {
    return !t->in.tokens && target_offset(t) >= 0 ? g_elems(&t->g.values[t->g.labels]) : 0;
}

int ampx_trainer_classifier(const ampx_trainer *t) {
    return t->g.values[t->g.labels].dtype == AMPX_I32;
}
