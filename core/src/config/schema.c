/* schema.c — positioned errors and typed getters over the JSON tree: every message is one
 * line "FILE:LINE:COL: $.path: message", unknown keys and values get a did-you-mean. */
#include "config/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/edit_distance.h"
#include "base/error.h"

// ---------------------------------------------------------------------------------------
// Positioned errors and typed getters

void jplace(const jctx *c, const json_value *v, char *buf, size_t cap) {
    char path[256];
    json_path(v, path, sizeof path);
    if (v->line < 0 && -1 - v->line < c->n_sets) /* a value from the command line */
        snprintf(buf, cap, "--set %s: %s", c->sets[-1 - v->line], path);
    else
        snprintf(buf, cap, "%s:%d:%d: %s", c->file, v->line, v->col, path);
}

int jerr(jctx *c, const json_value *v, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    char place[512];
    jplace(c, v, place, sizeof place);
    ampx_err e = c->err;
    err_set(e, "%s: ", place);
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap); /* keys and names come from the file: kept on one line */
    va_end(ap);
    return -1;
}

const char *jwhere(const jctx *c, int line, char *buf, size_t cap) {
    if (line < 0 && -1 - line < c->n_sets)
        snprintf(buf, cap, "--set %s", c->sets[-1 - line]);
    else
        snprintf(buf, cap, "line %d", line);
    return buf;
}

const char *did_you_mean(const char *word, const char *const *choices) {
    const char *best = NULL;
    size_t best_d    = 99;
    for (const char *const *c = choices; *c; c++) {
        size_t d = edit_distance(word, *c);
        if (d < best_d) best_d = d, best = *c;
    }
    size_t len = strlen(word);
    return best && best_d <= (len < 5 ? 1 : len / 3 + 1) ? best : NULL;
}

static void join_choices(const char *const *choices, char *buf, size_t cap) {
    buf[0] = 0;
    for (const char *const *c = choices; *c; c++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", c == choices ? "" : ", ", *c);
    }
}

int jkeys(jctx *c, const json_value *obj, const char *const *allowed) {
    if (obj->type != JSON_OBJECT)
        return jerr(c, obj, "expected an object, found %s", json_type_name(obj->type));
    for (size_t i = 0; i < obj->n_items; i++) {
        const json_value *m = obj->items[i];
        int ok              = 0;
        for (const char *const *a = allowed; *a; a++)
            if (!strcmp(*a, m->key)) ok = 1;
        if (ok) continue;
        const char *near = did_you_mean(m->key, allowed);
        char list[512];
        join_choices(allowed, list, sizeof list);
        /* Place the message at the key, not the value. */
        json_value at = *m;
        at.line       = m->key_line;
        at.col        = m->key_col;
        if (near) return jerr(c, &at, "unknown key \"%s\" (did you mean \"%s\"?)", m->key, near);
        return jerr(c, &at, "unknown key \"%s\" (expected one of: %s)", m->key, list);
    }
    return 0;
}

int jmissing(jctx *c, const json_value *obj, const char *key) {
    return jerr(c, obj, "missing required key \"%s\"", key);
}

int jint(jctx *c, const json_value *obj, const char *key, int required, int64_t lo, int64_t hi,
         int64_t *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? jmissing(c, obj, key) : 0;
    /* every refusal says the range: a size past it is not "not a positive integer" */
    const char *what = lo >= 1 ? "a positive integer" : "an integer";
    if (v->type != JSON_NUMBER || v->num != floor(v->num))
        return jerr(c, v, "expected %s in [%lld, %lld]", what, (long long)lo, (long long)hi);
    if (v->num < (double)lo || v->num > (double)hi) {
        return jerr(c, v, "expected %s in [%lld, %lld], found %.17g", what, (long long)lo,
                    (long long)hi, v->num);
    }
    *out = (int64_t)v->num;
    return 0;
}

int jnum(jctx *c, const json_value *obj, const char *key, int required, double lo, double hi,
         double *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? jmissing(c, obj, key) : 0;
    if (v->type != JSON_NUMBER)
        return jerr(c, v, "expected a number, found %s", json_type_name(v->type));
    if (v->num < lo || v->num > hi)
        return jerr(c, v, "expected a number in [%g, %g], found %.17g", lo, hi, v->num);
    *out = v->num;
    return 0;
}

int jbool(jctx *c, const json_value *obj, const char *key, int *out) {
    const json_value *v = json_get(obj, key);
    if (!v) return 0;
    if (v->type != JSON_BOOL)
        return jerr(c, v, "expected true or false, found %s", json_type_name(v->type));
    *out = v->boolean;
    return 0;
}

int jstr(jctx *c, const json_value *obj, const char *key, int required, const char **out) {
    const json_value *v = json_get(obj, key);
    if (!v) return required ? jmissing(c, obj, key) : 0;
    if (v->type != JSON_STRING)
        return jerr(c, v, "expected a string, found %s", json_type_name(v->type));
    *out = v->str;
    return 0;
}

int jenum(jctx *c, const json_value *obj, const char *key, int required, const char *const *choices,
          int *out) {
    const char *s = NULL;
    if (jstr(c, obj, key, required, &s)) return -1;
    if (!s) return 0;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(choices[i], s)) {
            *out = i;
            return 0;
        }
    const json_value *v = json_get(obj, key);
    const char *near    = did_you_mean(s, choices);
    char list[512];
    join_choices(choices, list, sizeof list);
    if (near) return jerr(c, v, "unknown value \"%s\" (did you mean \"%s\"?)", s, near);
    return jerr(c, v, "unknown value \"%s\" (expected one of: %s)", s, list);
}

int parse_dtype(const char *s, ampx_dtype *out) {
    static const struct {
        const char *name;
        ampx_dtype d;
    } names[] = {{"f32", AMPX_F32},     {"float32", AMPX_F32},   {"fp32", AMPX_F32},
                 {"bf16", AMPX_BF16},   {"bfloat16", AMPX_BF16}, {"f16", AMPX_F16},
                 {"float16", AMPX_F16}, {"fp16", AMPX_F16},      {"half", AMPX_F16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].d;
            return 0;
        }
    return -1;
}
