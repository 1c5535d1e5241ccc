/* metrics_file.c — reading the metrics file of a run (metrics_file.h). */
#include "metrics_file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(series *s, double x, double y) {
    if (s->n == s->cap) {
        if (s->cap > (1 << 28)) return -1;
        int cap   = s->cap ? 2 * s->cap : 256;
        double *a = realloc(s->x, (size_t)cap * sizeof *a);
        if (!a) return -1;
        s->x      = a;
        double *b = realloc(s->y, (size_t)cap * sizeof *b);
        if (!b) return -1;
        s->y = b, s->cap = cap;
    }
    s->x[s->n] = x, s->y[s->n++] = y;
    return 0;
}

static void drop(series *s) {
    free(s->x), s->x = NULL;
    free(s->y), s->y = NULL;
    s->n = s->cap = 0;
}

void metrics_free(metrics_run *r) {
    drop(&r->loss), drop(&r->val), drop(&r->scale), drop(&r->lr), drop(&r->gnorm);
    drop(&r->skipped), drop(&r->headroom);
    for (int l = 0; l < METRICS_MAX_LAYERS; l++)
        drop(&r->heat[l]), drop(&r->fp8_scale[l]), drop(&r->fp8_amax[l]);
}

static int num(const cJSON *o, const char *k, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(x)) return 0;
    *v = x->valuedouble;
    return 1;
}

/* A monitor line: the layer's max |g| at this step (the largest of the step's tensors). */
static int add_monitor(metrics_run *r, const cJSON *o, const char *layer, double step) {
    int i = 0;
    while (i < r->n_layers && strcmp(r->layers[i], layer))
        i++;
    if (i == r->n_layers && i < METRICS_MAX_LAYERS)
        snprintf(r->layers[r->n_layers++], sizeof r->layers[0], "%s", layer);
    if (i == r->n_layers) return 0; /* past the layers a heat map shows */
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(o, "max_abs");
    double m        = cJSON_IsNumber(mx) ? mx->valuedouble : NAN;
    series *s       = &r->heat[i];
    if (s->n && s->x[s->n - 1] == step) {
        if (m > s->y[s->n - 1] || isnan(m)) s->y[s->n - 1] = m;
        return 0;
    }
    return push(s, step, m);
}

/* An fp8 line: the tensor's scale and amax at this step (a missing or null one: NaN). */
static int add_fp8(metrics_run *r, const cJSON *o, const char *tensor, double step) {
    int i = 0;
    while (i < r->n_fp8 && strcmp(r->fp8[i], tensor))
        i++;
    if (i == r->n_fp8 && i < METRICS_MAX_LAYERS)
        snprintf(r->fp8[r->n_fp8++], sizeof r->fp8[0], "%s", tensor);
    if (i == r->n_fp8) return 0; /* past the tensors a map shows */
    double sc = NAN, am = NAN;
    num(o, "scale", &sc), num(o, "amax", &am);
    return push(&r->fp8_scale[i], step, sc) || push(&r->fp8_amax[i], step, am) ? -1 : 0;
}

/* One line (NUL-terminated, n bytes): 0, 1 when it is not a metrics line, -1 out of memory. */
static int parse_line(metrics_run *r, const char *line, size_t n) {
    cJSON *o = cJSON_ParseWithLength(line, n);
    double step, v;
    if (!cJSON_IsObject(o) || !num(o, "step", &step)) {
        cJSON_Delete(o);
        return 1;
    }
    int oom            = 0;
    const cJSON *layer = cJSON_GetObjectItemCaseSensitive(o, "layer");
    const cJSON *fp8   = cJSON_GetObjectItemCaseSensitive(o, "fp8_tensor");
    if (cJSON_IsString(layer)) {
        oom = add_monitor(r, o, layer->valuestring, step);
    } else if (cJSON_IsString(fp8)) {
        oom = add_fp8(r, o, fp8->valuestring, step);
    } else {
        if (num(o, "loss", &v)) oom |= push(&r->loss, step, v);
        if (num(o, "val_loss", &v)) oom |= push(&r->val, step, v);
        if (num(o, "scale", &v)) oom |= push(&r->scale, step, v);
        if (num(o, "lr", &v)) oom |= push(&r->lr, step, v);
        if (num(o, "grad_norm", &v)) oom |= push(&r->gnorm, step, v);
        if (num(o, "headroom_bits", &v)) oom |= push(&r->headroom, step, v);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "skipped")))
            oom |= push(&r->skipped, step, 0);
    }
    cJSON_Delete(o);
    return oom ? -1 : 0;
}

int metrics_parse(metrics_run *r, const char *text, size_t len, const char *name, char *err,
                  size_t cap) {
    long lineno = 0;
    char *line  = NULL;
    size_t lcap = 0;
    int rc      = 0;
    for (size_t at = 0; at < len && !rc;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n       = nl ? (size_t)(nl - (text + at)) : len - at;
        lineno++;
        if (n + 1 > lcap) {
            char *b = realloc(line, n + 1);
            if (!b) {
                snprintf(err, cap, "%s: out of memory", name);
                rc = -1;
                break;
            }
            line = b, lcap = n + 1;
        }
        memcpy(line, text + at, n);
        line[n] = 0;
        at += n + 1;
        if (strlen(line) == n && line[strspn(line, " \t\r")] == 0) continue; /* blank */
        int k = strlen(line) == n ? parse_line(r, line, n) : 1;              /* NUL: not JSON */
        if (k > 0)
            snprintf(err, cap, "%s:%ld: not a metrics line (a JSON object with \"step\")", name,
                     lineno);
        else if (k < 0)
            snprintf(err, cap, "%s: out of memory", name);
        rc = k ? -1 : 0;
    }
    free(line);
    if (!rc && !r->loss.n && !r->scale.n)
        snprintf(err, cap, "%s: no step lines (written by ampx train --metrics)", name), rc = -1;
    return rc;
}
