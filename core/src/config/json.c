/* json.c — the position-tracking JSON reader (see json.h). */
#include "config/json.h"

#include "base/error.h"
#include "config/input.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64
/* A value takes ~110 bytes in memory for as little as 2 bytes of text: a model or policy file
 * holds a few thousand, and one of more than this many is refused before any is allocated
 * (unless the input cap was raised), so the parser's memory stays within ~115 MB. */
#define JSON_MAX_FILE_VALUES (1ull << 20)

typedef struct reader {
    const char *s, *file;
    size_t pos;
    int line, col;
    ampx_err err;
    int failed;
} reader;

static void fail_at(reader *r, int line, int col, const char *fmt, ...) {
    if (r->failed) return;
    r->failed  = 1;
    ampx_err e = r->err;
    err_set(e, "%s:%d:%d: ", r->file, line, col);
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap);
    va_end(ap);
}

#define FAIL(r, ...) fail_at((r), (r)->line, (r)->col, __VA_ARGS__)

static int peek(const reader *r) {
    return (unsigned char)r->s[r->pos];
}

static void advance(reader *r) {
    if (r->s[r->pos] == '\n') {
        r->line++;
        r->col = 1;
    } else {
        r->col++;
    }
    r->pos++;
}

static void skip_ws(reader *r) {
    for (;;) {
        int c = peek(r);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            advance(r);
        else
            return;
    }
}

static const char *describe(int c) {
    static char buf[16];
    if (c == 0) return "end of file";
    if (c >= 32 && c < 127)
        snprintf(buf, sizeof buf, "'%c'", c);
    else
        snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
}

static json_value *new_value(reader *r, json_type t) {
    json_value *v = calloc(1, sizeof *v);
    if (!v) {
        FAIL(r, "out of memory");
        return NULL;
    }
    v->type = t;
    v->line = r->line;
    v->col  = r->col;
    return v;
}

static int append_hex(reader *r, unsigned *out) {
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        int c = peek(r);
        u <<= 4;
        if (c >= '0' && c <= '9')
            u |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            u |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            u |= (unsigned)(c - 'A' + 10);
        else {
            FAIL(r, "expected a hex digit in \\u escape, found %s", describe(c));
            return -1;
        }
        advance(r);
    }
    *out = u;
    return 0;
}

static size_t put_utf8(char *d, unsigned cp) {
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not valid UTF-8: a stray
 * continuation byte, a truncated sequence, an overlong form, a surrogate or a code point
 * past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    size_t n;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL terminator */
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp < 0xE000))
        return 0;
    return n;
}

/* Reads a string starting at the opening quote; returns a malloc'd UTF-8 copy. */
static char *read_string(reader *r) {
    int line = r->line, col = r->col;
    advance(r); /* opening quote */
    size_t start = r->pos, len = 0;
    /* The decoded string is never longer than the raw text. */
    while (r->s[start + len] && r->s[start + len] != '"') {
        if (r->s[start + len] == '\\' && r->s[start + len + 1]) len++;
        len++;
    }
    char *out = malloc(len + 1);
    if (!out) {
        FAIL(r, "out of memory");
        return NULL;
    }
    size_t n = 0;
    for (;;) {
        int c = peek(r);
        if (c == 0) {
            fail_at(r, line, col, "unterminated string (end of file before the closing quote)");
            break;
        }
        if (c == '"') {
            advance(r);
            out[n] = 0;
            return out;
        }
        if (c < 0x20) {
            FAIL(r, "control character %s inside a string (escape it)", describe(c));
            break;
        }
        if (c >= 0x80) {
            size_t k = utf8_len((const unsigned char *)r->s + r->pos);
            if (!k) {
                FAIL(r, "invalid UTF-8 (%s) inside a string", describe(c));
                break;
            }
            for (size_t i = 0; i < k; i++, advance(r))
                out[n++] = r->s[r->pos];
            r->col -= (int)k - 1; /* one character */
            continue;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            advance(r);
            continue;
        }
        advance(r);
        c                  = peek(r);
        const char *simple = strchr("\"\\/bfnrt", c);
        if (c && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            out[n++]                = map[simple - "\"\\/bfnrt"];
            advance(r);
            continue;
        }
        if (c != 'u') {
            FAIL(r, "invalid escape '\\%c' in string", c ? c : '0');
            break;
        }
        advance(r);
        unsigned cp;
        if (append_hex(r, &cp)) break;
        if (cp >= 0xD800 && cp < 0xDC00) {
            unsigned lo;
            if (peek(r) != '\\' || r->s[r->pos + 1] != 'u') {
                FAIL(r, "unpaired UTF-16 surrogate in \\u escape");
                break;
            }
            advance(r);
            advance(r);
            if (append_hex(r, &lo)) break;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                FAIL(r, "invalid UTF-16 low surrogate in \\u escape");
                break;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            FAIL(r, "unpaired UTF-16 surrogate in \\u escape");
            break;
        }
        if (cp == 0) {
            FAIL(r, "\\u0000 is not allowed in strings here");
            break;
        }
        n += put_utf8(out + n, cp);
    }
    free(out);
    return NULL;
}

static json_value *parse_value(reader *r, int depth);

static int push_item(reader *r, json_value *parent, json_value *item, size_t *cap) {
    if (parent->n_items == *cap) {
        size_t nc          = *cap ? *cap * 2 : 4;
        json_value **items = realloc(parent->items, nc * sizeof *items);
        if (!items) {
            FAIL(r, "out of memory");
            return -1;
        }
        parent->items = items;
        *cap          = nc;
    }
    item->parent                     = parent;
    item->index                      = parent->n_items;
    parent->items[parent->n_items++] = item;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Duplicate keys: a linear scan for small objects, an open-addressing table of member
// indices once an object grows past KEYS_LINEAR members, so checking stays linear in the
// object's size (a scan per key would be quadratic: 80k keys took 16 s).

#define KEYS_LINEAR 16

typedef struct key_table {
    size_t *slot; /* member index + 1; 0 = empty */
    size_t n_slots;
} key_table;

static uint64_t key_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void key_put(key_table *t, const json_value *obj, size_t index) {
    size_t m = t->n_slots - 1, i = (size_t)key_hash(obj->items[index]->key) & m;
    while (t->slot[i])
        i = (i + 1) & m;
    t->slot[i] = index + 1;
}

/* Sets *dup to the member of obj named key, if any; -1 on out of memory. */
static int key_seen(reader *r, key_table *t, const json_value *obj, const char *key,
                    const json_value **dup) {
    *dup = NULL;
    if (obj->n_items < KEYS_LINEAR) {
        for (size_t i = 0; i < obj->n_items; i++)
            if (!strcmp(obj->items[i]->key, key)) *dup = obj->items[i];
        return 0;
    }
    if (t->n_slots < 2 * (obj->n_items + 1)) { /* (re)build at most half full */
        size_t ns = t->n_slots ? t->n_slots : 64;
        while (ns < 2 * (obj->n_items + 1))
            ns *= 2;
        size_t *slot = calloc(ns, sizeof *slot);
        if (!slot) {
            FAIL(r, "out of memory");
            return -1;
        }
        free(t->slot);
        t->slot    = slot;
        t->n_slots = ns;
        for (size_t i = 0; i < obj->n_items; i++)
            key_put(t, obj, i);
    } else {
        key_put(t, obj, obj->n_items - 1); /* the member added since the last call */
    }
    size_t m = t->n_slots - 1;
    for (size_t i = (size_t)key_hash(key) & m; t->slot[i]; i = (i + 1) & m)
        if (!strcmp(obj->items[t->slot[i] - 1]->key, key)) {
            *dup = obj->items[t->slot[i] - 1];
            break;
        }
    return 0;
}

static json_value *parse_container(reader *r, int depth, int is_object) {
    json_value *v = new_value(r, is_object ? JSON_OBJECT : JSON_ARRAY);
    if (!v) return NULL;
    key_table keys = {0};
    size_t cap     = 0;
    char close     = is_object ? '}' : ']';
    advance(r);
    skip_ws(r);
    if (peek(r) == close) {
        advance(r);
        return v;
    }
    for (;;) {
        skip_ws(r);
        char *key = NULL;
        int kl = 0, kc = 0;
        if (is_object) {
            if (peek(r) != '"') {
                FAIL(r, "expected a member name in double quotes, found %s", describe(peek(r)));
                goto fail;
            }
            kl  = r->line;
            kc  = r->col;
            key = read_string(r);
            if (!key) goto fail;
            const json_value *dup = NULL;
            if (key_seen(r, &keys, v, key, &dup)) {
                free(key);
                goto fail;
            }
            if (dup) {
                fail_at(r, kl, kc, "duplicate key \"%s\" (first at line %d)", key, dup->key_line);
                free(key);
                goto fail;
            }
            skip_ws(r);
            if (peek(r) != ':') {
                FAIL(r, "expected ':' after member name \"%s\", found %s", key, describe(peek(r)));
                free(key);
                goto fail;
            }
            advance(r);
            skip_ws(r);
        }
        json_value *item = parse_value(r, depth + 1);
        if (!item) {
            free(key);
            goto fail;
        }
        item->key      = key;
        item->key_line = kl;
        item->key_col  = kc;
        if (push_item(r, v, item, &cap)) {
            json_free(item);
            goto fail;
        }
        skip_ws(r);
        int c = peek(r);
        if (c == ',') {
            advance(r);
            skip_ws(r);
            if (peek(r) == close) {
                FAIL(r, "trailing comma before '%c'", close);
                goto fail;
            }
            continue;
        }
        if (c == close) {
            advance(r);
            free(keys.slot);
            /* no spare slots kept: memory stays proportional to the values */
            json_value **fit =
                cap > v->n_items ? realloc(v->items, v->n_items * sizeof *fit) : NULL;
            if (fit) v->items = fit;
            return v;
        }
        if (c == 0)
            FAIL(r, "unexpected end of file: %s opened at line %d, column %d is not closed",
                 is_object ? "object" : "array", v->line, v->col);
        else
            FAIL(r, "expected ',' or '%c', found %s", close, describe(c));
        goto fail;
    }
fail:
    free(keys.slot);
    json_free(v);
    return NULL;
}

static json_value *parse_number(reader *r) {
    json_value *v = new_value(r, JSON_NUMBER);
    if (!v) return NULL;
    size_t start = r->pos;
    if (peek(r) == '-') advance(r);
    if (peek(r) == '0') {
        advance(r);
    } else if (peek(r) >= '1' && peek(r) <= '9') {
        while (peek(r) >= '0' && peek(r) <= '9')
            advance(r);
    } else {
        FAIL(r, "invalid number: expected a digit, found %s", describe(peek(r)));
        goto fail;
    }
    if (peek(r) == '.') {
        advance(r);
        if (!(peek(r) >= '0' && peek(r) <= '9')) {
            FAIL(r, "invalid number: expected a digit after '.', found %s", describe(peek(r)));
            goto fail;
        }
        while (peek(r) >= '0' && peek(r) <= '9')
            advance(r);
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        advance(r);
        if (peek(r) == '+' || peek(r) == '-') advance(r);
        if (!(peek(r) >= '0' && peek(r) <= '9')) {
            FAIL(r, "invalid number: expected a digit in the exponent, found %s",
                 describe(peek(r)));
            goto fail;
        }
        while (peek(r) >= '0' && peek(r) <= '9')
            advance(r);
    }
    char buf[64];
    size_t len = r->pos - start;
    if (len >= sizeof buf) {
        fail_at(r, v->line, v->col, "number too long");
        goto fail;
    }
    memcpy(buf, r->s + start, len);
    buf[len] = 0;
    errno    = 0;
    v->num   = strtod(buf, NULL);
    if (!isfinite(v->num)) {
        fail_at(r, v->line, v->col, "number %s is out of range", buf);
        goto fail;
    }
    return v;
fail:
    json_free(v);
    return NULL;
}

static json_value *parse_literal(reader *r) {
    static const struct {
        const char *word;
        json_type type;
        int b;
    } lits[] = {{"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lits[i].word);
        if (!strncmp(r->s + r->pos, lits[i].word, n)) {
            json_value *v = new_value(r, lits[i].type);
            if (!v) return NULL;
            v->boolean = lits[i].b;
            for (size_t k = 0; k < n; k++)
                advance(r);
            return v;
        }
    }
    if (peek(r) == 0)
        FAIL(r, "unexpected end of file: expected a value");
    else if (!strncmp(r->s + r->pos, "NaN", 3) || !strncmp(r->s + r->pos, "Infinity", 8))
        FAIL(r, "NaN and Infinity are not JSON numbers");
    else
        FAIL(r, "expected a value, found %s", describe(peek(r)));
    return NULL;
}

static json_value *parse_value(reader *r, int depth) {
    if (depth > JSON_MAX_DEPTH) {
        FAIL(r, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        return NULL;
    }
    skip_ws(r);
    int c = peek(r);
    if (c == '{' || c == '[') return parse_container(r, depth, c == '{');
    if (c == '"') {
        json_value *v = new_value(r, JSON_STRING);
        if (!v) return NULL;
        v->str = read_string(r);
        if (!v->str) {
            json_free(v);
            return NULL;
        }
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(r);
    return parse_literal(r);
}

json_value *json_parse(const char *text, const char *file, ampx_err e) {
    reader r = {.s = text, .file = file, .line = 1, .col = 1, .err = e};
    err_clear(e);
    /* A UTF-8 byte-order mark is tolerated. */
    if (!strncmp(text, "\xEF\xBB\xBF", 3)) r.pos = 3;
    json_value *v = parse_value(&r, 0);
    if (!v) return NULL;
    skip_ws(&r);
    if (peek(&r) != 0) {
        FAIL(&r, "unexpected %s after the end of the document", describe(peek(&r)));
        json_free(v);
        return NULL;
    }
    return v;
}

/* The values of text, counted in one pass that allocates nothing (exact for a document that
 * parses; the parser reports what is wrong with one that does not): the root, an array's
 * elements (its first, and one per ',') and an object's members (one per ':'). */
uint64_t json_count_values(const char *s) {
    uint64_t n                               = 1;
    unsigned char object[JSON_MAX_DEPTH + 2] = {0}; /* [d]: the container at depth d is one */
    int depth                                = 0;
    for (; *s; s++) {
        char c = *s;
        if (c == '"') {
            for (s++; *s && *s != '"'; s++)
                if (*s == '\\' && s[1]) s++;
            if (!*s) break;
        } else if (c == '[' || c == '{') {
            if (++depth > JSON_MAX_DEPTH + 1) break; /* refused by the parser */
            object[depth] = c == '{';
            const char *t = s + 1 + strspn(s + 1, " \t\r\n");
            n += c == '[' && *t != ']';
        } else if (c == ']' || c == '}') {
            depth -= depth > 0;
        } else if ((c == ',' && !object[depth]) || (c == ':' && object[depth])) {
            n++;
        }
    }
    return n;
}

json_value *json_parse_file(const char *path, ampx_err e) {
    /* A value takes ~100 bytes in memory for as little as 2 bytes of text, so unless the
     * input cap was set, JSON files have a lower one, far above any model or policy. */
    uint64_t max = input_max_is_set() ? input_max_bytes() : JSON_MAX_FILE_BYTES;
    size_t len;
    char *buf = input_read(path, max, &len, e);
    if (!buf) return NULL;
    buf[len] = 0;
    if (memchr(buf, 0, len)) {
        size_t at = (size_t)((char *)memchr(buf, 0, len) - buf);
        int line = 1, col = 1;
        for (size_t i = 0; i < at; i++) {
            if (buf[i] == '\n')
                line++, col = 1;
            else
                col++;
        }
        err_set(e, "%s:%d:%d: NUL byte in a JSON file", path, line, col);
        free(buf);
        return NULL;
    }
    uint64_t n = input_max_is_set() ? 0 : json_count_values(buf);
    if (n > JSON_MAX_FILE_VALUES) {
        err_set(e,
                "%s: %llu JSON values, more than the %llu a model or policy file may hold (raise "
                "the input limit with --max-input-bytes or AMPX_MAX_INPUT_BYTES)",
                path, (unsigned long long)n, (unsigned long long)JSON_MAX_FILE_VALUES);
        free(buf);
        return NULL;
    }
    json_value *v = json_parse(buf, path, e);
    free(buf);
    return v;
}

void json_free(json_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n_items; i++)
        json_free(v->items[i]);
    free(v->items);
    free(v->key);
    free(v->str);
    free(v);
}

json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n_items; i++)
        if (!strcmp(obj->items[i]->key, key)) return obj->items[i];
    return NULL;
}

static size_t path_into(const json_value *v, char *buf, size_t cap) {
    if (!v->parent) return (size_t)snprintf(buf, cap, "$");
    size_t n = path_into(v->parent, buf, cap);
    if (n >= cap) return n;
    if (v->parent->type == JSON_ARRAY)
        return n + (size_t)snprintf(buf + n, cap - n, "[%zu]", v->index);
    /* Keys that are identifiers read as .key, others as ["key"]. */
    int plain = v->key[0] != 0;
    for (const char *p = v->key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
              (p != v->key && *p >= '0' && *p <= '9')))
            plain = 0;
    if (plain) return n + (size_t)snprintf(buf + n, cap - n, ".%s", v->key);
    return n + (size_t)snprintf(buf + n, cap - n, "[\"%s\"]", v->key);
}

void json_path(const json_value *v, char *buf, size_t cap) {
    if (cap == 0) return;
    buf[0] = 0;
    path_into(v, buf, cap);
}

const char *json_type_name(json_type t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}
