/* safetensors.c — reading and writing the safetensors format (safetensors.h): the header
 * checked as the reference reader checks it, and the temporary-file discipline of a write
 * (base/output.h): created with mkstemp in the target's folder (".NAME.tmp.PID.XXXXXX":
 * O_CREAT | O_EXCL, so a planted file or symlink is never followed), renamed over the target
 * once complete, the folder fsynced; temporary files that a killed process left behind are
 * removed by the next write to the same target. */
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "base/output.h"
#include "config/input.h"
#include "graph/graph.h"

// ---------------------------------------------------------------------------------------
// Writing

void json_escape(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            out[n++] = '\\', out[n++] = (char)c;
        else if (c < 0x20)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = 0;
}

void sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = (b->cap + (size_t)k + 1) * 2;
        char *ns  = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns, b->cap = nc;
    }
}

/* The temporary-file discipline is the core's output helper's (base/output.c). */
int st_create_temp(const char *path, char *tmp, size_t cap, ampx_err e) {
    return out_temp(path, "a checkpoint", tmp, cap, e);
}

ampx_status st_sync_folder(const char *path, ampx_err e) {
    return out_sync_folder(path, e);
}

ampx_status st_bad(ck_reader *r, const char *fmt, ...) {
    ampx_err e = r->err;
    err_set(e, "%s: ", r->name);
    va_list ap;
    va_start(ap, fmt);
    err_vadd(e, fmt, ap); /* names come from the file: kept on one line */
    va_end(ap);
    return AMPX_ERR_INVALID;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const json_value *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || v->num < 0 || v->num > 9007199254740992.0 ||
        v->num != floor(v->num))
        return 0;
    *out = (uint64_t)v->num;
    return 1;
}

/* A decimal integer string in [lo, hi], nothing else (no sign, blanks or leading zeros). */
int parse_dec(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    int neg       = *s == '-';
    const char *p = s + neg;
    if (!*p || (p[0] == '0' && p[1]) || strlen(p) > 19) return 0;
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)INT64_MAX) return 0;
    int64_t x = neg ? -(int64_t)v : (int64_t)v;
    if (x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

typedef struct span {
    uint64_t begin, end;
    const char *name;
} span;

static int by_begin(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
           : x->end < y->end     ? -1
                                 : x->end > y->end;
}

static int dtype_size(const char *d) {
    static const struct {
        const char *name;
        int size;
    } k[] = {{"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
             {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
             {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(d, k[i].name)) return k[i].size;
    return 0;
}

/* The header as the safetensors reader checks it: every entry a tensor with a known dtype,
 * integer shape and offsets whose span is its size, the spans tiling [0, data_len). */
static ampx_status check_layout(ck_reader *r, const json_value *root, uint64_t data_len) {
    span *sp = malloc(sizeof *sp * (root->n_items + 1));
    if (!sp) return st_bad(r, "out of memory");
    size_t ns      = 0;
    ampx_status st = AMPX_ERR_INVALID;
    for (size_t i = 0; i < root->n_items; i++) {
        const json_value *e = root->items[i];
        if (!strcmp(e->key, "__metadata__")) {
            if (e->type != JSON_OBJECT) {
                st_bad(r, "__metadata__ is %s, expected an object of strings",
                       json_type_name(e->type));
                goto out;
            }
            for (size_t k = 0; k < e->n_items; k++)
                if (e->items[k]->type != JSON_STRING) {
                    st_bad(r, "__metadata__.%s is %s, expected a string", e->items[k]->key,
                           json_type_name(e->items[k]->type));
                    goto out;
                }
            continue;
        }
        if (e->type != JSON_OBJECT) {
            st_bad(r, "tensor \"%s\" is %s, expected an object", e->key, json_type_name(e->type));
            goto out;
        }
        for (size_t k = 0; k < e->n_items; k++)
            if (strcmp(e->items[k]->key, "dtype") && strcmp(e->items[k]->key, "shape") &&
                strcmp(e->items[k]->key, "data_offsets")) {
                st_bad(r, "tensor \"%s\": unknown field \"%s\"", e->key, e->items[k]->key);
                goto out;
            }
        const json_value *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"),
                         *of = json_get(e, "data_offsets");
        int size             = dt && dt->type == JSON_STRING ? dtype_size(dt->str) : 0;
        if (!size) {
            st_bad(r, "tensor \"%s\": dtype is missing or not a safetensors dtype", e->key);
            goto out;
        }
        if (!sh || sh->type != JSON_ARRAY) {
            st_bad(r, "tensor \"%s\": shape is missing or not an array of sizes", e->key);
            goto out;
        }
        /* ampx's values have at most G_MAX_DIMS dims, and every reader of an entry
         * (st_entry) fills an array of that many: a longer shape is refused here, once. */
        if (sh->n_items > G_MAX_DIMS) {
            st_bad(r, "tensor \"%s\": shape has %zu dimensions; ampx supports at most %d", e->key,
                   sh->n_items, G_MAX_DIMS);
            goto out;
        }
        uint64_t elems = 1;
        for (size_t k = 0; k < sh->n_items; k++) {
            uint64_t d;
            if (!json_uint(sh->items[k], &d)) {
                st_bad(r, "tensor \"%s\": shape[%zu] is not a non-negative integer", e->key, k);
                goto out;
            }
            if (__builtin_mul_overflow(elems, d, &elems)) {
                st_bad(r, "tensor \"%s\": the shape's element count overflows", e->key);
                goto out;
            }
        }
        uint64_t bytes, b0, b1;
        if (__builtin_mul_overflow(elems, (uint64_t)size, &bytes)) {
            st_bad(r, "tensor \"%s\": the shape's byte count overflows", e->key);
            goto out;
        }
        if (!of || of->type != JSON_ARRAY || of->n_items != 2 || !json_uint(of->items[0], &b0) ||
            !json_uint(of->items[1], &b1) || b1 < b0) {
            st_bad(
                r,
                "tensor \"%s\": data_offsets is not [begin, end] with integers 0 <= begin <= end",
                e->key);
            goto out;
        }
        if (b1 - b0 != bytes) {
            st_bad(r,
                   "tensor \"%s\": data_offsets [%llu, %llu] span %llu bytes; dtype and shape say "
                   "%llu",
                   e->key, (unsigned long long)b0, (unsigned long long)b1,
                   (unsigned long long)(b1 - b0), (unsigned long long)bytes);
            goto out;
        }
        sp[ns++] = (span){b0, b1, e->key};
    }
    qsort(sp, ns, sizeof *sp, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < ns; i++) {
        if (sp[i].begin != at) {
            if (sp[i].begin < at)
                st_bad(r, "tensor \"%s\": data_offsets overlap another tensor's at byte %llu",
                       sp[i].name, (unsigned long long)sp[i].begin);
            else
                st_bad(r, "bytes %llu..%llu of the data section belong to no tensor",
                       (unsigned long long)at, (unsigned long long)sp[i].begin);
            goto out;
        }
        at = sp[i].end;
    }
    if (at != data_len) {
        st_bad(r, "the tensors cover %llu bytes of a %llu-byte data section",
               (unsigned long long)at, (unsigned long long)data_len);
        goto out;
    }
    st = AMPX_OK;
out:
    free(sp);
    return st;
}

const char *meta_str(const json_value *meta, const char *key) {
    const json_value *v = json_get(meta, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

/* The header length of a safetensors file of len bytes from its first 8, checked. */
static ampx_status header_len(ck_reader *r, const unsigned char *first8, uint64_t len,
                              uint64_t *hl) {
    if (len < 8) return st_bad(r, "not a safetensors file (shorter than its 8-byte header length)");
    *hl = 0;
    for (int i = 0; i < 8; i++)
        *hl |= (uint64_t)first8[i] << (8 * i);
    if (*hl < 2 || *hl > len - 8 || *hl > CK_MAX_HEADER_BYTES)
        return st_bad(r, "not a safetensors file (header length %llu, file size %llu)",
                      (unsigned long long)*hl, (unsigned long long)len);
    return AMPX_OK;
}

/* The JSON of a header of hl bytes at file + 8, of a file of len bytes, parsed and checked as
 * the reference reader does (check_layout); *root must be json_free'd. */
static ampx_status parse_header(ck_reader *r, const unsigned char *file, uint64_t hl, uint64_t len,
                                json_value **root, uint64_t *data_len);

ampx_status st_parse(ck_reader *r, const unsigned char *file, size_t len, json_value **root,
                     const unsigned char **data, uint64_t *data_len) {
    *root          = NULL;
    uint64_t hl    = 0;
    ampx_status st = header_len(r, file, len, &hl);
    if (st) return st;
    if ((st = parse_header(r, file, hl, len, root, data_len))) return st;
    *data = file + 8 + hl;
    return AMPX_OK;
}

/* Opens a safetensors file and reads and checks its header alone: the tensors stay on disk,
 * *data_at is the data section's offset in the file. *f must be fclose'd, *root
 * json_free'd. */
ampx_status st_open(const char *path, FILE **f, json_value **root, uint64_t *data_at,
                    uint64_t *data_len, ampx_err e) {
    return st_open_max(path, input_max_bytes(), f, root, data_at, data_len, e);
}

ampx_status st_open_max(const char *path, uint64_t max_bytes, FILE **f, json_value **root,
                        uint64_t *data_at, uint64_t *data_len, ampx_err e) {
    ck_reader r = {.name = path, .err = e};
    uint64_t len, hl               = 0;
    unsigned char first8[8], *head = NULL;
    *root = NULL;
    if (!(*f = input_open(path, max_bytes, &len, e))) return AMPX_ERR_INVALID;
    ampx_status st = AMPX_OK;
    if (len >= 8 && fread(first8, 1, 8, *f) != 8) st = st_bad(&r, "read error");
    if (!st) st = header_len(&r, first8, len, &hl);
    if (!st && !(head = malloc(8 + hl))) st = st_bad(&r, "out of memory");
    if (!st) {
        memcpy(head, first8, 8);
        if (fread(head + 8, 1, hl, *f) != hl) st = st_bad(&r, "read error");
    }
    if (!st) st = parse_header(&r, head, hl, len, root, data_len);
    free(head);
    *data_at = 8 + hl;
    if (st) fclose(*f), *f = NULL;
    return st;
}

/* Bytes [begin, end) of the data section of an st_open'd file into buf. */
int st_read_span(FILE *f, uint64_t data_at, uint64_t begin, uint64_t end, void *buf) {
    if (end - begin > (uint64_t)SIZE_MAX || data_at + begin > (uint64_t)INT64_MAX ||
        fseeko(f, (off_t)(data_at + begin), SEEK_SET) != 0)
        return -1;
    return fread(buf, 1, (size_t)(end - begin), f) == end - begin ? 0 : -1;
}

static ampx_status parse_header(ck_reader *r, const unsigned char *file, uint64_t hl, uint64_t len,
                                json_value **root, uint64_t *data_len) {
    if (memchr(file + 8, 0, hl)) return st_bad(r, "bad safetensors header: a NUL byte in the JSON");
    char *hdr = malloc(hl + 1);
    if (!hdr) return st_bad(r, "out of memory");
    memcpy(hdr, file + 8, hl);
    hdr[hl] = 0;
    char perr[512];
    *root = json_parse(hdr, r->name, ERR(perr, sizeof perr));
    free(hdr);
    if (!*root || (*root)->type != JSON_OBJECT) {
        if (!*root) {
            err_set(r->err, "%s (in the safetensors header)", perr);
            return AMPX_ERR_INVALID;
        }
        json_free(*root);
        *root = NULL;
        return st_bad(r, "bad safetensors header: not a JSON object");
    }
    *data_len      = len - 8 - hl;
    ampx_status st = check_layout(r, *root, *data_len);
    if (st) {
        json_free(*root);
        *root = NULL;
    }
    return st;
}

/* Reads a whole safetensors file and checks its header; *file must be freed. */
ampx_status st_read(const char *path, unsigned char **file, json_value **root,
                    const unsigned char **data, uint64_t *data_len, ampx_err e) {
    size_t len;
    *root = NULL;
    *file = (unsigned char *)input_read(path, input_max_bytes(), &len, e);
    if (!*file) return AMPX_ERR_INVALID;
    ck_reader r    = {.name = path, .err = e};
    ampx_status st = st_parse(&r, *file, len, root, data, data_len);
    if (st) free(*file), *file = NULL;
    return st;
}

/* An entry's dtype, shape and byte span (st_parse checked them). */
void st_entry(const json_value *e, const char **dtype, uint64_t *dims, int *ndim, uint64_t *begin,
              uint64_t *end) {
    const json_value *shape = json_get(e, "shape"), *offs = json_get(e, "data_offsets");
    *dtype = json_get(e, "dtype")->str;
    *ndim  = (int)shape->n_items;
    for (size_t k = 0; k < shape->n_items && k < G_MAX_DIMS; k++)
        dims[k] = (uint64_t)shape->items[k]->num;
    *begin = (uint64_t)offs->items[0]->num;
    *end   = (uint64_t)offs->items[1]->num;
}

float st_value(const char *dtype, const unsigned char *p, uint64_t i) {
    if (!strcmp(dtype, "F32")) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return !strcmp(dtype, "BF16") ? ampx_bf16_to_f32(h) : ampx_f16_to_f32(h);
}

int64_t st_file_step(const char *path) {
    FILE *f          = NULL;
    json_value *root = NULL;
    uint64_t at, len;
    char err[256];
    int64_t step = -1;
    if (path && st_open(path, &f, &root, &at, &len, ERR(err, sizeof err)) == AMPX_OK) {
        const json_value *meta = json_get(root, "__metadata__");
        const char *s          = meta ? meta_str(meta, "step") : NULL;
        int64_t v;
        if (s && parse_dec(s, 0, INT64_MAX, &v)) step = v;
        fclose(f);
    }
    json_free(root);
    return step;
}
