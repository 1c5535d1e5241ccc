/* overrides.c — `--set PATH=VALUE`: a key of the model file replaced (or added) before the
 * file is read, so the value is validated exactly as if the file held it. PATH is a JSON
 * path without the leading "$.": keys separated by dots, an array element as key[N]
 * ("optimizer.lr", "train.batch", "nodes[3].units"). VALUE is JSON ("3e-4", "true",
 * "[0.9, 0.95]", "{\"type\": \"constant\"}"), or else a string ("adamw"). The values carry
 * the flag's index as a negative line, so a message about them names the flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/schema.h"

static void mark(json_value *v, int line) {
    v->line = v->key_line = line;
    v->col = v->key_col = 0;
    for (size_t i = 0; i < v->n_items; i++)
        mark(v->items[i], line);
}

static json_value *new_value(json_type t) {
    json_value *v = calloc(1, sizeof *v);
    if (v) v->type = t;
    return v;
}

/* Puts v into obj under key, replacing a member of that name. */
static int put_member(json_value *obj, const char *key, json_value *v) {
    for (size_t i = 0; i < obj->n_items; i++)
        if (!strcmp(obj->items[i]->key, key)) {
            v->key             = obj->items[i]->key;
            obj->items[i]->key = NULL;
            json_free(obj->items[i]);
            obj->items[i] = v;
            v->parent = obj, v->index = i;
            return 0;
        }
    json_value **items = realloc(obj->items, (obj->n_items + 1) * sizeof *items);
    if (!items || !(v->key = strdup(key))) {
        if (items) obj->items = items;
        return -1;
    }
    obj->items               = items;
    obj->items[obj->n_items] = v;
    v->parent = obj, v->index = obj->n_items++;
    return 0;
}

/* Whether text is meant as JSON: it opens an array, object or string, or it is made of
 * number characters alone ("1e", "0.5.1"); "2024.csv" and "adamw" are strings. */
static int looks_like_json(const char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s && strchr("[{\"", *s)) return 1;
    size_t n = strspn(s, "0123456789+-.eE");
    return n > 0 && strspn(s + n, " \t") == strlen(s + n);
}

int json_apply_set(json_value *root, const char *set, int index, ampx_err e) {
    const char *eq = strchr(set, '=');
    if (!eq || eq == set) return err_set(e, "--set %s: expected PATH=VALUE", set);
    char path[256];
    if ((size_t)(eq - set) >= sizeof path) return err_set(e, "--set %s: the path is too long", set);
    snprintf(path, sizeof path, "%.*s", (int)(eq - set), set);
    /* every key of the path named: "a..b", ".a" and "a." would otherwise read as "a.b", "a" */
    size_t plen = strlen(path);
    if (path[0] == '.' || path[plen - 1] == '.' || strstr(path, ".."))
        return err_set(e,
                       "--set %s: the path '%s' has an empty key (keys are separated by one '.')",
                       set, path);
    /* the value: JSON, or else the text as a string; text meant as JSON ('1e', '[1,',
     * '{"a"', '"x') that does not parse is refused with the parse error */
    char perr[256];
    json_value *v = json_parse(eq + 1, "--set", ERR(perr, sizeof perr));
    if (!v && looks_like_json(eq + 1))
        return err_set(e, "--set %s: the value is not valid JSON: %s", set, perr);
    if (!v) {
        if (!(v = new_value(JSON_STRING)) || !(v->str = strdup(eq + 1))) {
            free(v);
            return err_set(e, "out of memory");
        }
    }
    mark(v, -1 - index);
    json_value *cur = root;
    char *save = NULL, *seg = strtok_r(path, ".", &save);
    while (seg) {
        char *next = strtok_r(NULL, ".", &save);
        long idx   = -1;
        char *br   = strchr(seg, '[');
        if (br) {
            char *end;
            idx = strtol(br + 1, &end, 10);
            if (end == br + 1 || *end != ']' || end[1] || idx < 0) {
                json_free(v);
                return err_set(e, "--set %s: '%s' is not KEY or KEY[N]", set, seg);
            }
            *br = 0;
        }
        if (!*seg || cur->type != JSON_OBJECT) {
            json_free(v);
            return err_set(e, "--set %s: '%s' is not a key of an object", set, seg);
        }
        json_value *child = json_get(cur, seg);
        if (idx >= 0) {
            if (!child || child->type != JSON_ARRAY || (size_t)idx >= child->n_items) {
                json_free(v);
                return err_set(e, "--set %s: %s has %zu items, no [%ld]", set, seg,
                               child && child->type == JSON_ARRAY ? child->n_items : (size_t)0,
                               idx);
            }
            if (!next) { /* replace the element */
                json_value *old   = child->items[idx];
                child->items[idx] = v;
                v->parent = child, v->index = (size_t)idx;
                json_free(old);
                return 0;
            }
            cur = child->items[idx];
        } else if (!next) {
            if (put_member(cur, seg, v)) {
                json_free(v);
                return err_set(e, "out of memory");
            }
            return 0;
        } else {
            if (!child) { /* a new object on the way */
                if (!(child = new_value(JSON_OBJECT)) || put_member(cur, seg, child)) {
                    free(child);
                    json_free(v);
                    return err_set(e, "out of memory");
                }
                mark(child, -1 - index);
            }
            cur = child;
        }
        seg = next;
    }
    json_free(v);
    return err_set(e, "--set %s: expected PATH=VALUE", set);
}
