/* checkpoint.c — checkpoints in the safetensors format: an 8-byte little-endian header
 * length, a JSON header (dtype, shape, data_offsets per tensor, and __metadata__ with string
 * values), then the raw little-endian data. Other tools read the weights by their plain
 * names ("fc1.weight"); ampx's own state goes under "ampx.*": working copies, optimizer
 * state and the scalars block (scale, scaler counters, step counts) byte for byte, so a
 * resumed run continues bit-identically.
 *
 * Writing: into a temporary file created with mkstemp in the target's folder
 * (".NAME.tmp.PID.XXXXXX": O_CREAT | O_EXCL, so a planted file or symlink is never followed),
 * every write checked, fsynced, renamed over the target, the folder fsynced. Weights that are
 * not finite are never written: the last good checkpoint stays. Temporary files that a killed
 * process left behind are removed by the next save to the same target.
 *
 * Reading: a checkpoint is untrusted input. The header must be a safetensors header whose
 * tensors tile the data section exactly (as the safetensors reader requires); every tensor
 * the model needs must be there with its dtype and shape and nothing else; every metadata
 * field and every field of the scalars block is checked against its type and range, and
 * every restored value against what it can hold (finite weights, second moments >= 0).
 * Nothing reaches the device until all of it passed. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "config/input.h"
#include "config/json.h"
#include "graph/ops.h"
#include "train/checkpoint.h"

typedef struct ck_tensor {
    char name[G_NAME_MAX + 32];
    const char *dtype; /* "F32", "BF16", "F16", "U8" */
    uint64_t dims[G_MAX_DIMS];
    int ndim;
    uint64_t bytes;
    ampx_buffer *buf; /* NULL: the scalars block */
    int nonneg;       /* values must be >= 0 (Adam's second moment) */
} ck_tensor;

/* The tensors of a checkpoint, in file order. */
static int ck_list(ampx_trainer *t, ck_tensor *out) {
    int n                                = 0;
    static const char *const state[2][2] = {{"momentum", NULL}, {"adam_m", "adam_v"}};
    int adam                             = t->m->cfg.opt.kind == OPT_ADAMW;
    for (int i = 0; i < t->n_params; i++) {
        param *p    = &t->params[i];
        ck_tensor b = {.dtype = "F32", .ndim = p->ndim, .bytes = p->n * 4};
        memcpy(b.dims, p->dims, sizeof b.dims);
        out[n] = b, out[n].buf = p->master;
        snprintf(out[n++].name, sizeof b.name, "%s", p->name);
        if (p->copy) {
            out[n] = b, out[n].buf = p->copy, out[n].bytes = p->n * 2;
            out[n].dtype = p->copy_dtype == AMPX_BF16 ? "BF16" : "F16";
            snprintf(out[n++].name, sizeof b.name, "ampx.copy.%s", p->name);
        }
        ampx_buffer *sb[2] = {p->s1, p->s2};
        for (int k = 0; k < 2; k++)
            if (sb[k] && state[adam][k]) {
                out[n] = b, out[n].buf = sb[k], out[n].nonneg = adam && k == 1;
                snprintf(out[n++].name, sizeof b.name, "ampx.%s.%s", state[adam][k], p->name);
            }
    }
    /* running statistics under their plain names, as other tools read them */
    for (int i = 0; i < t->n_state; i++) {
        const state_tensor *s = &t->state[i];
        out[n]                = (ck_tensor){
                           .dtype = "F32", .dims = {s->n}, .ndim = 1, .bytes = s->n * 4, .buf = s->buf};
        snprintf(out[n++].name, sizeof out[0].name, "%s", t->g.values[s->value].name);
    }
    out[n] = (ck_tensor){
        .dtype = "U8", .dims = {sizeof(ampx_scalars)}, .ndim = 1, .bytes = sizeof(ampx_scalars)};
    snprintf(out[n++].name, sizeof out[0].name, "ampx.scalars");
    return n;
}

/* "2,128" (or "2, 128" for messages) */
static void shape_json(const ck_tensor *c, char *buf, size_t cap, const char *sep) {
    size_t n = 0;
    buf[0]   = 0;
    for (int k = 0; k < c->ndim && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", k ? sep : "",
                              (unsigned long long)c->dims[k]);
}

static void json_escape(const char *s, char *out, size_t cap) {
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

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
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

// ---------------------------------------------------------------------------------------
// Values a checkpoint may hold

/* Index of the first element that is not finite (or negative, with nonneg), else -1. */
static int64_t first_bad(const ck_tensor *c, const unsigned char *data) {
    uint64_t n = c->bytes / (c->dtype[0] == 'F' && c->dtype[1] == '3' ? 4 : 2);
    if (!c->buf) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (c->dtype[1] == '3') { /* F32 */
            uint32_t u;
            memcpy(&u, data + 4 * i, 4);
            if ((u & 0x7F800000u) == 0x7F800000u) return (int64_t)i;
            if (c->nonneg && (u >> 31) && u != 0x80000000u) return (int64_t)i;
        } else {
            uint16_t u;
            memcpy(&u, data + 2 * i, 2);
            uint16_t exp = c->dtype[0] == 'B' ? 0x7F80 : 0x7C00; /* BF16 : F16 */
            if ((u & exp) == exp) return (int64_t)i;
        }
    }
    return -1;
}

static double element(const ck_tensor *c, const unsigned char *data, int64_t i) {
    uint32_t u;
    if (c->dtype[1] == '3') {
        float v;
        memcpy(&v, data + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, data + 2 * i, 2);
    if (c->dtype[0] == 'B') {
        u = (uint32_t)h << 16;
        float v;
        memcpy(&v, &u, 4);
        return v;
    }
    return (h & 0x7C00) == 0x7C00 ? ((h & 0x3FF) ? NAN : (h >> 15) ? -INFINITY : INFINITY) : 0;
}

// ---------------------------------------------------------------------------------------
// Writing

/* Splits path into its folder and file name; -1 if the temporary name would not fit. */
static int split_path(const char *path, char *dir, char *base, size_t cap) {
    char a[PATH_MAX], b[PATH_MAX];
    if (snprintf(a, sizeof a, "%s", path) >= (int)sizeof a) return -1;
    memcpy(b, a, sizeof b);
    if (snprintf(dir, cap, "%s", dirname(a)) >= (int)cap) return -1;
    if (snprintf(base, cap, "%s", basename(b)) >= (int)cap) return -1;
    /* the folder, "/.", the name, ".tmp.", a pid and ".XXXXXX" must fit PATH_MAX */
    return strlen(dir) + strlen(base) + 40 < PATH_MAX && strlen(base) + 40 < NAME_MAX ? 0 : -1;
}

/* Removes ".BASE.tmp.PID.*" files in dir that a process no longer running left behind. */
static void remove_stale(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    char prefix[NAME_MAX + 1];
    int np = snprintf(prefix, sizeof prefix, ".%s.tmp.", base);
    if (np < 0 || np >= (int)sizeof prefix) {
        closedir(d);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, (size_t)np)) continue;
        char *end;
        long pid = strtol(e->d_name + np, &end, 10);
        if (pid <= 0 || *end != '.' || strlen(end) != 7) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid())
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Creates the temporary file beside path (O_EXCL, mode 0666 & ~umask); fd or -1 and errno. */
static int create_temp(const char *path, char *tmp, size_t cap, char *err, size_t ecap) {
    char dir[PATH_MAX], base[PATH_MAX];
    if (split_path(path, dir, base, sizeof dir)) {
        err_set(ERR(err, ecap), "%.200s...: path too long for a checkpoint", path);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        err_set(ERR(err, ecap), "%s: not a regular file; a checkpoint would replace it", path);
        return -1;
    }
    remove_stale(dir, base);
    int len = snprintf(tmp, cap, "%s/.%s.tmp.%ld.XXXXXX", dir, base, (long)getpid());
    if (len < 0 || (size_t)len >= cap) {
        err_set(ERR(err, ecap), "%.200s...: path too long for a checkpoint", path);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        err_set(ERR(err, ecap), "%s: %s (cannot create a file in %s)", path, strerror(errno), dir);
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    return fd;
}

ampx_status ampx_checkpoint_check_path(const char *path, char *err, size_t cap) {
    char tmp[PATH_MAX + 64];
    int fd = create_temp(path, tmp, sizeof tmp, err, cap);
    if (fd < 0) return AMPX_ERR_INVALID;
    close(fd);
    unlink(tmp);
    return AMPX_OK;
}

ampx_status ampx_trainer_save(ampx_trainer *t, const char *path, char *err, size_t cap) {
    ck_tensor *ts = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 1));
    if (!ts) {
        err_set(ERR(err, cap), "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    int n = ck_list(t, ts);
    ampx_scalars sc;
    ampx_status st = ampx_trainer_scalars(t, &sc);
    if (st) {
        err_set(ERR(err, cap), "%s: %s", path, t->error);
        free(ts);
        return st;
    }
    if (!isfinite(sc.scale) || !(sc.scale > 0)) {
        err_set(ERR(err, cap), "not writing %s: the loss scale is %g at step %lld", path,
                (double)sc.scale, (long long)t->step);
        free(ts);
        return AMPX_ERR_INVALID;
    }
    char esc[256];
    sbuf h = {0};
    json_escape(t->m->cfg.name, esc, sizeof esc);
    sb_printf(&h,
              "{\"__metadata__\":{\"format\":\"ampx\",\"ampx_version\":\"%s\",\"model\":\"%s\","
              "\"step\":\"%lld\",\"applied_steps\":\"%d\",\"skipped_steps\":\"%d\","
              "\"scale\":\"%.9g\",\"growth_tracker\":\"%d\",\"hysteresis_left\":\"%d\","
              "\"lr\":\"%.9g\",\"optimizer\":\"%s\",\"seed\":\"%llu\"}",
              AMPX_VERSION_STRING, esc, (long long)t->step, sc.applied_steps, sc.skipped_steps,
              (double)sc.scale, sc.growth_tracker, sc.hysteresis_left, (double)sc.lr,
              t->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd",
              (unsigned long long)t->m->cfg.train.seed);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_escape(ts[i].name, esc, sizeof esc);
        char shape[128];
        shape_json(&ts[i], shape, sizeof shape, ",");
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}", esc,
                  ts[i].dtype, shape, (unsigned long long)off,
                  (unsigned long long)(off + ts[i].bytes));
        off += ts[i].bytes;
    }
    sb_printf(&h, "}");
    while (!h.oom && h.n % 8)
        sb_printf(&h, " "); /* data starts 8-byte aligned */
    if (h.oom) {
        err_set(ERR(err, cap), "%s: out of memory", path);
        free(h.s), free(ts);
        return AMPX_ERR_NO_MEMORY;
    }
    char tmp[PATH_MAX + 64];
    int fd  = create_temp(path, tmp, sizeof tmp, err, cap);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0) {
            err_set(ERR(err, cap), "%s: %s", path, strerror(errno));
            close(fd), unlink(tmp);
        }
        free(h.s), free(ts);
        return AMPX_ERR_INVALID;
    }
    uint64_t hl = h.n;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    int bad       = fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.n, f) != h.n;
    int saved     = errno;
    char why[512] = "";
    for (int i = 0; i < n && !bad; i++) {
        void *data = malloc(ts[i].bytes ? ts[i].bytes : 1);
        if (!data) {
            snprintf(why, sizeof why, "out of memory");
            bad = 1;
            break;
        }
        if (ts[i].buf)
            st = t->ifc->buffer_read(t->ctx, ts[i].buf, 0, data, ts[i].bytes);
        else
            memcpy(data, &sc, sizeof sc);
        int64_t at = st ? -1 : first_bad(&ts[i], data);
        if (st)
            snprintf(why, sizeof why, "%s", ampx_backend_last_error(t->be));
        else if (at >= 0)
            snprintf(why, sizeof why,
                     "tensor \"%s\" element %lld is %g at step %lld (the update overflowed: lower "
                     "the learning rate); the file on disk is left as it was",
                     ts[i].name, (long long)at, element(&ts[i], data, at), (long long)t->step);
        bad = st != AMPX_OK || at >= 0;
        if (!bad && fwrite(data, 1, ts[i].bytes, f) != ts[i].bytes) bad = 1, saved = errno;
        free(data);
    }
    if (!bad && (fflush(f) != 0 || fsync(fileno(f)) != 0)) bad = 1, saved = errno;
    if (fclose(f) != 0 && !bad) bad = 1, saved = errno;
    if (!bad && rename(tmp, path) != 0) bad = 1, saved = errno;
    if (bad) {
        if (why[0])
            err_set(ERR(err, cap), "not writing %s: %s", path, why);
        else
            err_set(ERR(err, cap), "%s: %s", path, strerror(saved));
        unlink(tmp);
        free(h.s), free(ts);
        return st ? st : AMPX_ERR_INVALID;
    }
    free(h.s), free(ts);
    /* make the rename itself durable */
    char dir[PATH_MAX], base[PATH_MAX];
    split_path(path, dir, base, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(dfd) != 0) {
        err_set(ERR(err, cap), "%s: cannot sync folder %s: %s", path, dir, strerror(errno));
        if (dfd >= 0) close(dfd);
        return AMPX_ERR_INVALID;
    }
    close(dfd);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Reading

typedef struct ck_reader {
    const char *name; /* the file, for messages */
    char *err;
    size_t cap;
} ck_reader;

static ampx_status bad(ck_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ampx_status bad(ck_reader *r, const char *fmt, ...) {
    ampx_err e = ERR(r->err, r->cap);
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
static int parse_dec(const char *s, int64_t lo, int64_t hi, int64_t *out) {
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
    if (!sp) return bad(r, "out of memory");
    size_t ns      = 0;
    ampx_status st = AMPX_ERR_INVALID;
    for (size_t i = 0; i < root->n_items; i++) {
        const json_value *e = root->items[i];
        if (!strcmp(e->key, "__metadata__")) {
            if (e->type != JSON_OBJECT) {
                bad(r, "__metadata__ is %s, expected an object of strings",
                    json_type_name(e->type));
                goto out;
            }
            for (size_t k = 0; k < e->n_items; k++)
                if (e->items[k]->type != JSON_STRING) {
                    bad(r, "__metadata__.%s is %s, expected a string", e->items[k]->key,
                        json_type_name(e->items[k]->type));
                    goto out;
                }
            continue;
        }
        if (e->type != JSON_OBJECT) {
            bad(r, "tensor \"%s\" is %s, expected an object", e->key, json_type_name(e->type));
            goto out;
        }
        for (size_t k = 0; k < e->n_items; k++)
            if (strcmp(e->items[k]->key, "dtype") && strcmp(e->items[k]->key, "shape") &&
                strcmp(e->items[k]->key, "data_offsets")) {
                bad(r, "tensor \"%s\": unknown field \"%s\"", e->key, e->items[k]->key);
                goto out;
            }
        const json_value *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"),
                         *of = json_get(e, "data_offsets");
        int size             = dt && dt->type == JSON_STRING ? dtype_size(dt->str) : 0;
        if (!size) {
            bad(r, "tensor \"%s\": dtype is missing or not a safetensors dtype", e->key);
            goto out;
        }
        if (!sh || sh->type != JSON_ARRAY || sh->n_items > 8) {
            bad(r, "tensor \"%s\": shape is missing or not an array of at most 8 sizes", e->key);
            goto out;
        }
        uint64_t elems = 1;
        for (size_t k = 0; k < sh->n_items; k++) {
            uint64_t d;
            if (!json_uint(sh->items[k], &d)) {
                bad(r, "tensor \"%s\": shape[%zu] is not a non-negative integer", e->key, k);
                goto out;
            }
            if (__builtin_mul_overflow(elems, d, &elems)) {
                bad(r, "tensor \"%s\": the shape's element count overflows", e->key);
                goto out;
            }
        }
        uint64_t bytes, b0, b1;
        if (__builtin_mul_overflow(elems, (uint64_t)size, &bytes)) {
            bad(r, "tensor \"%s\": the shape's byte count overflows", e->key);
            goto out;
        }
        if (!of || of->type != JSON_ARRAY || of->n_items != 2 || !json_uint(of->items[0], &b0) ||
            !json_uint(of->items[1], &b1) || b1 < b0) {
            bad(r,
                "tensor \"%s\": data_offsets is not [begin, end] with integers 0 <= begin <= end",
                e->key);
            goto out;
        }
        if (b1 - b0 != bytes) {
            bad(r,
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
                bad(r, "tensor \"%s\": data_offsets overlap another tensor's at byte %llu",
                    sp[i].name, (unsigned long long)sp[i].begin);
            else
                bad(r, "bytes %llu..%llu of the data section belong to no tensor",
                    (unsigned long long)at, (unsigned long long)sp[i].begin);
            goto out;
        }
        at = sp[i].end;
    }
    if (at != data_len) {
        bad(r, "the tensors cover %llu bytes of a %llu-byte data section", (unsigned long long)at,
            (unsigned long long)data_len);
        goto out;
    }
    st = AMPX_OK;
out:
    free(sp);
    return st;
}

static const char *meta_str(const json_value *meta, const char *key) {
    const json_value *v = json_get(meta, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

/* Metadata integer field `key` in [lo, hi]. */
static ampx_status meta_int(ck_reader *r, const json_value *meta, const char *key, int64_t lo,
                            int64_t hi, int64_t *out) {
    const char *s = meta_str(meta, key);
    if (!s) return bad(r, "__metadata__.%s is missing", key);
    if (!parse_dec(s, lo, hi, out))
        return bad(r, "__metadata__.%s \"%.40s\" is not an integer in [%lld, %lld]", key, s,
                   (long long)lo, (long long)hi);
    return AMPX_OK;
}

static ampx_status meta_float(ck_reader *r, const json_value *meta, const char *key, float *out) {
    const char *s = meta_str(meta, key);
    if (!s) return bad(r, "__metadata__.%s is missing", key);
    char *end;
    errno    = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
        return bad(r, "__metadata__.%s \"%.40s\" is not a finite number", key, s);
    *out = (float)v;
    return AMPX_OK;
}

/* The scalars block's state fields against their ranges and the metadata. */
static ampx_status check_scalars(ck_reader *r, const ampx_scalars *s, const json_value *meta,
                                 int64_t step) {
    static const char *const blk = "ampx.scalars";
    if (!isfinite(s->scale) || !(s->scale > 0))
        return bad(r, "%s: scale is %g, expected a finite number > 0", blk, (double)s->scale);
    if (!isfinite(s->lr) || s->lr < 0)
        return bad(r, "%s: lr is %g, expected a finite number >= 0", blk, (double)s->lr);
    const struct {
        const char *name;
        int32_t v, lo, hi;
    } f[] = {{"found_inf", s->found_inf, 0, 1},
             {"growth_tracker", s->growth_tracker, 0, INT32_MAX},
             {"hysteresis_left", s->hysteresis_left, 0, INT32_MAX},
             {"applied_steps", s->applied_steps, 0, INT32_MAX},
             {"skipped_steps", s->skipped_steps, 0, INT32_MAX},
             {"consecutive_skips", s->consecutive_skips, 0, s->skipped_steps},
             {"last_found_inf", s->last_found_inf, 0, 1}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return bad(r, "%s: %s is %d, expected an integer in [%d, %d]", blk, f[i].name, f[i].v,
                       f[i].lo, f[i].hi);
    if (s->stop_reason)
        return bad(r,
                   "%s: stop_reason is %d: the run that wrote it stopped (%s), so it does not "
                   "resume",
                   blk, s->stop_reason,
                   s->stop_reason == AMPX_STOP_MIN_SCALE           ? "min_scale reached"
                   : s->stop_reason == AMPX_STOP_CONSECUTIVE_SKIPS ? "too many skipped steps"
                                                                   : "unknown reason");
    if ((int64_t)s->applied_steps + s->skipped_steps != step)
        return bad(r, "__metadata__.step %lld is not applied_steps %d + skipped_steps %d",
                   (long long)step, s->applied_steps, s->skipped_steps);
    /* the metadata repeats the block for other tools: the two must agree */
    int64_t v;
    ampx_status st;
    const struct {
        const char *key;
        int32_t v;
    } m[] = {{"applied_steps", s->applied_steps},
             {"skipped_steps", s->skipped_steps},
             {"growth_tracker", s->growth_tracker},
             {"hysteresis_left", s->hysteresis_left}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        if ((st = meta_int(r, meta, m[i].key, 0, INT32_MAX, &v))) return st;
        if (v != m[i].v)
            return bad(r, "__metadata__.%s %lld disagrees with the scalars block's %d", m[i].key,
                       (long long)v, m[i].v);
    }
    float fv;
    if ((st = meta_float(r, meta, "scale", &fv))) return st;
    if (fv != s->scale)
        return bad(r, "__metadata__.scale %g disagrees with the scalars block's %g", (double)fv,
                   (double)s->scale);
    if ((st = meta_float(r, meta, "lr", &fv))) return st;
    if (fv != s->lr)
        return bad(r, "__metadata__.lr %g disagrees with the scalars block's %g", (double)fv,
                   (double)s->lr);
    return AMPX_OK;
}

/* The header of a safetensors file in memory, parsed and checked as the reference reader
 * does (check_layout); *root must be json_free'd. */
static ampx_status st_parse(ck_reader *r, const unsigned char *file, size_t len, json_value **root,
                            const unsigned char **data, uint64_t *data_len) {
    *root = NULL;
    if (len < 8) return bad(r, "not a safetensors file (shorter than its 8-byte header length)");
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)file[i] << (8 * i);
    if (hl < 2 || hl > (uint64_t)len - 8 || hl > CK_MAX_HEADER_BYTES)
        return bad(r, "not a safetensors file (header length %llu, file size %zu)",
                   (unsigned long long)hl, len);
    if (memchr(file + 8, 0, hl)) return bad(r, "bad safetensors header: a NUL byte in the JSON");
    char *hdr = malloc(hl + 1);
    if (!hdr) return bad(r, "out of memory");
    memcpy(hdr, file + 8, hl);
    hdr[hl] = 0;
    char perr[512];
    *root = json_parse(hdr, r->name, perr, sizeof perr);
    free(hdr);
    if (!*root || (*root)->type != JSON_OBJECT) {
        if (!*root) {
            err_set(ERR(r->err, r->cap), "%s (in the safetensors header)", perr);
            return AMPX_ERR_INVALID;
        }
        json_free(*root);
        *root = NULL;
        return bad(r, "bad safetensors header: not a JSON object");
    }
    *data          = file + 8 + hl;
    *data_len      = (uint64_t)len - 8 - hl;
    ampx_status st = check_layout(r, *root, *data_len);
    if (st) {
        json_free(*root);
        *root = NULL;
    }
    return st;
}

ampx_status ck_load_memory(ampx_trainer *t, const char *name, const unsigned char *file, size_t len,
                           char *err, size_t cap) {
    ck_reader r               = {.name = name, .err = err, .cap = cap};
    ck_tensor *ts             = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 1));
    const unsigned char **src = malloc(sizeof *src * (TR_MAX_PARAMS * 5 + 1));
    char *hdr                 = NULL;
    json_value *root          = NULL;
    ampx_status st            = AMPX_ERR_INVALID;
    if (!ts || !src) {
        st = bad(&r, "out of memory");
        goto out;
    }
    const unsigned char *data = NULL;
    uint64_t data_len         = 0;
    if ((st = st_parse(&r, file, len, &root, &data, &data_len))) goto out;
    st                     = AMPX_ERR_INVALID;
    const json_value *meta = json_get(root, "__metadata__");
    const char *fmt = meta_str(meta, "format"), *model = meta_str(meta, "model");
    if (!fmt || strcmp(fmt, "ampx") || !meta_str(meta, "step")) {
        bad(&r, "not an ampx checkpoint (no __metadata__ format \"ampx\" with a step)");
        goto out;
    }
    if (!model || strcmp(model, t->m->cfg.name)) {
        bad(&r, "a checkpoint of model \"%.80s\", not \"%s\"", model ? model : "?", t->m->cfg.name);
        goto out;
    }
    const char *opt      = meta_str(meta, "optimizer");
    const char *want_opt = t->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd";
    if (!opt || strcmp(opt, want_opt)) {
        bad(&r, "optimizer state is for %.20s, the model uses %s", opt ? opt : "?", want_opt);
        goto out;
    }
    int64_t step, seed;
    if (meta_int(&r, meta, "step", 0, INT64_MAX, &step) ||
        meta_int(&r, meta, "seed", 0, INT64_MAX, &seed))
        goto out;
    int n = ck_list(t, ts);
    /* Every tensor of the model with its dtype and shape, and no other. */
    for (int i = 0; i < n; i++) {
        const json_value *e = json_get(root, ts[i].name);
        if (!e) {
            bad(&r, "tensor \"%s\" is missing", ts[i].name);
            goto out;
        }
        const json_value *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"),
                         *of = json_get(e, "data_offsets");
        if (strcmp(dt->str, ts[i].dtype)) {
            bad(&r, "tensor \"%s\" has dtype %s, expected %s", ts[i].name, dt->str, ts[i].dtype);
            goto out;
        }
        int shape_ok = (int)sh->n_items == ts[i].ndim;
        for (int k = 0; shape_ok && k < ts[i].ndim; k++)
            shape_ok = sh->items[k]->num == (double)ts[i].dims[k];
        if (!shape_ok) {
            char dims[100];
            shape_json(&ts[i], dims, sizeof dims, ", ");
            bad(&r, "tensor \"%s\" has another shape than the model's [%s]", ts[i].name, dims);
            goto out;
        }
        src[i] = data + (uint64_t)of->items[0]->num;
    }
    if (root->n_items != (size_t)n + 1)
        for (size_t k = 0; k < root->n_items; k++) {
            const char *key = root->items[k]->key;
            int known       = !strcmp(key, "__metadata__");
            for (int i = 0; i < n && !known; i++)
                known = !strcmp(key, ts[i].name);
            if (!known) {
                bad(&r, "tensor \"%.100s\" is not part of model \"%s\"", key, t->m->cfg.name);
                goto out;
            }
        }
    /* Every restored value. */
    ampx_scalars saved;
    for (int i = 0; i < n; i++) {
        if (!ts[i].buf) {
            memcpy(&saved, src[i], sizeof saved);
            if ((st = check_scalars(&r, &saved, meta, step))) goto out;
            st = AMPX_ERR_INVALID;
            continue;
        }
        int64_t at = first_bad(&ts[i], src[i]);
        if (at >= 0) {
            bad(&r, "tensor \"%s\" element %lld is %g, expected a finite number%s", ts[i].name,
                (long long)at, element(&ts[i], src[i], at), ts[i].nonneg ? " >= 0" : "");
            goto out;
        }
    }
    /* All checked: now the device. State from the checkpoint; configuration (scaler
     * settings, schedule) from the model as it is now. */
    for (int i = 0; i < n; i++) {
        if (!ts[i].buf) {
            ampx_scalars sc;
            init_scalars(t->m, &sc);
            sc.scale             = saved.scale;
            sc.found_inf         = saved.found_inf;
            sc.growth_tracker    = saved.growth_tracker;
            sc.hysteresis_left   = saved.hysteresis_left;
            sc.applied_steps     = saved.applied_steps;
            sc.skipped_steps     = saved.skipped_steps;
            sc.consecutive_skips = saved.consecutive_skips;
            sc.last_found_inf    = saved.last_found_inf;
            sc.stop_reason       = 0;
            sc.lr                = saved.lr;
            st                   = t->ifc->buffer_write(t->ctx, t->scalars, 0, &sc, sizeof sc);
        } else {
            st = t->ifc->buffer_write(t->ctx, ts[i].buf, 0, src[i], ts[i].bytes);
        }
        if (st) {
            bad(&r, "%s", ampx_backend_last_error(t->be));
            goto out;
        }
    }
    t->step = step;
    st      = AMPX_OK;
out:
    json_free(root);
    free(hdr), free(ts), free((void *)src);
    return st;
}

ampx_status ampx_trainer_load(ampx_trainer *t, const char *path, char *err, size_t cap) {
    /* No checkpoint of this model is larger than its header cap and its state. */
    ck_tensor *ts = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 1));
    if (!ts) {
        err_set(ERR(err, cap), "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    int n          = ck_list(t, ts);
    uint64_t state = 0;
    for (int i = 0; i < n; i++)
        state += ts[i].bytes;
    free(ts);
    uint64_t size;
    FILE *f = input_open(path, UINT64_MAX, &size, err, cap);
    if (!f) return AMPX_ERR_INVALID;
    if (size > 8 + (uint64_t)CK_MAX_HEADER_BYTES + state) {
        err_set(ERR(err, cap),
                "%s: %llu bytes, more than any checkpoint of model \"%s\" holds (its state is "
                "%llu bytes)",
                path, (unsigned long long)size, t->m->cfg.name, (unsigned long long)state);
        fclose(f);
        return AMPX_ERR_INVALID;
    }
    unsigned char *buf = malloc((size_t)size + 1);
    size_t got         = buf ? fread(buf, 1, (size_t)size, f) : 0;
    int rerr           = ferror(f);
    fclose(f);
    if (!buf || rerr) {
        err_set(ERR(err, cap), "%s: %s", path, buf ? "read error" : "out of memory");
        free(buf);
        return AMPX_ERR_INVALID;
    }
    ampx_status st = ck_load_memory(t, path, buf, got, err, cap);
    free(buf);
    return st;
}

// ---------------------------------------------------------------------------------------
// Plain weights: export to and start from safetensors files other tools read

/* Reads a whole safetensors file and checks its header; *file must be freed. */
static ampx_status st_read(const char *path, unsigned char **file, json_value **root,
                           const unsigned char **data, uint64_t *data_len, char *err, size_t cap) {
    size_t len;
    *root = NULL;
    *file = (unsigned char *)input_read(path, input_max_bytes(), &len, err, cap);
    if (!*file) return AMPX_ERR_INVALID;
    ck_reader r    = {.name = path, .err = err, .cap = cap};
    ampx_status st = st_parse(&r, *file, len, root, data, data_len);
    if (st) free(*file), *file = NULL;
    return st;
}

/* An entry's dtype, shape and byte span (st_parse checked them). */
static void st_entry(const json_value *e, const char **dtype, uint64_t *dims, int *ndim,
                     uint64_t *begin, uint64_t *end) {
    const json_value *shape = json_get(e, "shape"), *offs = json_get(e, "data_offsets");
    *dtype = json_get(e, "dtype")->str;
    *ndim  = (int)shape->n_items;
    for (size_t k = 0; k < shape->n_items && k < G_MAX_DIMS; k++)
        dims[k] = (uint64_t)shape->items[k]->num;
    *begin = (uint64_t)offs->items[0]->num;
    *end   = (uint64_t)offs->items[1]->num;
}

static float st_value(const char *dtype, const unsigned char *p, uint64_t i) {
    if (!strcmp(dtype, "F32")) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return !strcmp(dtype, "BF16") ? ampx_bf16_to_f32(h) : ampx_f16_to_f32(h);
}

ampx_status ampx_checkpoint_export(const char *ckpt, const char *path, ampx_dtype dtype, char *err,
                                   size_t cap) {
    if (dtype != AMPX_F32 && dtype != AMPX_BF16 && dtype != AMPX_F16) {
        err_set(ERR(err, cap), "export: dtype %s: expected f32, bf16 or f16",
                ampx_dtype_name(dtype));
        return AMPX_ERR_INVALID;
    }
    unsigned char *file = NULL;
    json_value *root    = NULL;
    const unsigned char *data;
    uint64_t data_len;
    ampx_status st = st_read(ckpt, &file, &root, &data, &data_len, err, cap);
    if (st) return st;
    ck_reader r            = {.name = ckpt, .err = err, .cap = cap};
    const json_value *meta = json_get(root, "__metadata__");
    const char *fmt        = meta_str(meta, "format");
    const char *dn         = dtype == AMPX_F32 ? "F32" : dtype == AMPX_BF16 ? "BF16" : "F16";
    size_t es              = ampx_dtype_size(dtype);
    sbuf h                 = {0};
    char esc[256], tmp[PATH_MAX + 64];
    int fd = -1, n = 0;
    FILE *f = NULL;
    if (!fmt || strcmp(fmt, "ampx")) {
        st = bad(&r, "not an ampx checkpoint (no __metadata__ format \"ampx\")");
        goto out;
    }
    /* the weights: every F32 tensor that is not ampx's own state (copies, moments, scalars) */
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"ampx\"}");
    uint64_t off = 0;
    for (size_t i = 0; i < root->n_items; i++) {
        const json_value *e = root->items[i];
        if (!strcmp(e->key, "__metadata__") || !strncmp(e->key, "ampx.", 5)) continue;
        const char *dt;
        uint64_t dims[G_MAX_DIMS] = {0}, b, end;
        int nd;
        st_entry(e, &dt, dims, &nd, &b, &end);
        if (strcmp(dt, "F32")) {
            st = bad(&r, "tensor \"%s\" is %s; an ampx checkpoint holds its weights in F32", e->key,
                     dt);
            goto out;
        }
        char shape[128] = "";
        for (int k = 0; k < nd; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", k ? "," : "",
                     (unsigned long long)dims[k]);
        uint64_t bytes = (end - b) / 4 * es;
        json_escape(e->key, esc, sizeof esc);
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}", esc,
                  dn, shape, (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
        n++;
    }
    sb_printf(&h, "}");
    while (!h.oom && h.n % 8)
        sb_printf(&h, " ");
    if (h.oom) {
        st = bad(&r, "out of memory");
        goto out;
    }
    if ((fd = create_temp(path, tmp, sizeof tmp, err, cap)) < 0 || !(f = fdopen(fd, "wb"))) {
        if (fd >= 0) err_set(ERR(err, cap), "%s: %s", path, strerror(errno)), close(fd);
        if (fd >= 0) unlink(tmp);
        st = AMPX_ERR_INVALID;
        goto out;
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    int badw = fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.n, f) != h.n;
    for (size_t i = 0; i < root->n_items && !badw; i++) {
        const json_value *e = root->items[i];
        if (!strcmp(e->key, "__metadata__") || !strncmp(e->key, "ampx.", 5)) continue;
        const char *dt;
        uint64_t dims[G_MAX_DIMS] = {0}, b, end;
        int nd;
        st_entry(e, &dt, dims, &nd, &b, &end);
        for (uint64_t k = 0; k < (end - b) / 4 && !badw; k++) {
            float v    = st_value("F32", data + b, k);
            uint16_t w = dtype == AMPX_BF16 ? ampx_f32_to_bf16(v) : ampx_f32_to_f16(v);
            badw       = dtype == AMPX_F32 ? fwrite(&v, 4, 1, f) != 1 : fwrite(&w, 2, 1, f) != 1;
        }
    }
    int saved = errno;
    if (!badw && (fflush(f) != 0 || fsync(fileno(f)) != 0)) badw = 1, saved = errno;
    if (fclose(f) != 0 && !badw) badw = 1, saved = errno;
    if (!badw && rename(tmp, path) != 0) badw = 1, saved = errno;
    if (badw) {
        err_set(ERR(err, cap), "%s: %s", path, strerror(saved));
        unlink(tmp);
        st = AMPX_ERR_INVALID;
    } else if (n == 0) {
        st = bad(&r, "no weights to export");
        unlink(path);
    }
out:
    free(h.s);
    json_free(root);
    free(file);
    return st;
}

/* Whether parameter value v is the weight [in, out] of a dense matmul (PyTorch's Linear holds
 * it as [out, in]). */
static int is_linear_weight(const g_graph *g, int v) {
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *n = &g->nodes[i];
        if (n->op != OP_MATMUL || n->a.trans_b) continue;
        int w = n->in[1];
        if (g->values[w].master >= 0) w = g->values[w].master;
        if (w == v) return 1;
    }
    return 0;
}

ampx_status ampx_trainer_init_from(ampx_trainer *t, const char *path, int transpose_linear,
                                   char *err, size_t cap) {
    unsigned char *file = NULL;
    json_value *root    = NULL;
    const unsigned char *data;
    uint64_t data_len;
    ampx_status st = st_read(path, &file, &root, &data, &data_len, err, cap);
    if (st) return st;
    ck_reader r = {.name = path, .err = err, .cap = cap};
    float *vals = NULL;
    /* every tensor of the file is a parameter of the model, and every parameter is there */
    for (size_t i = 0; i < root->n_items; i++) {
        const char *k = root->items[i]->key;
        int found     = !strcmp(k, "__metadata__");
        for (int p = 0; p < t->n_params && !found; p++)
            found = !strcmp(k, t->params[p].name);
        if (!found) {
            st = bad(&r, "tensor \"%s\" is not a parameter of model \"%s\"", k, t->m->cfg.name);
            goto out;
        }
    }
    for (int p = 0; p < t->n_params && !st; p++) {
        const param *pr     = &t->params[p];
        const json_value *e = json_get(root, pr->name);
        if (!e) {
            st = bad(&r, "no tensor \"%s\" (the model's parameter %d of %d)", pr->name, p + 1,
                     t->n_params);
            goto out;
        }
        const char *dt;
        uint64_t dims[G_MAX_DIMS] = {0}, b, end;
        int nd;
        st_entry(e, &dt, dims, &nd, &b, &end);
        if (strcmp(dt, "F32") && strcmp(dt, "BF16") && strcmp(dt, "F16")) {
            st = bad(&r, "tensor \"%s\" is %s; weights are F32, BF16 or F16", pr->name, dt);
            goto out;
        }
        int tr = transpose_linear && pr->ndim == 2 && is_linear_weight(&t->g, pr->value);
        int ok = nd == pr->ndim;
        for (int k = 0; ok && k < nd; k++)
            ok = dims[k] == pr->dims[tr ? nd - 1 - k : k];
        if (!ok) {
            char want[64] = "", got[64] = "";
            for (int k = 0; k < pr->ndim; k++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%llu", k ? ", " : "",
                         (unsigned long long)pr->dims[tr ? pr->ndim - 1 - k : k]);
            for (int k = 0; k < nd; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", k ? ", " : "",
                         (unsigned long long)dims[k]);
            /* the shape transposed would fit: a PyTorch Linear weight */
            int hint = !transpose_linear && pr->ndim == 2 && nd == 2 && dims[0] == pr->dims[1] &&
                       dims[1] == pr->dims[0] && is_linear_weight(&t->g, pr->value);
            st =
                bad(&r, "tensor \"%s\" has shape [%s]; the model needs [%s]%s", pr->name, got, want,
                    hint ? " (a PyTorch Linear weight is [out, in]: --transpose-linear)" : "");
            goto out;
        }
        free(vals);
        if (!(vals = malloc(pr->n * 4 + 4))) {
            st = bad(&r, "out of memory");
            goto out;
        }
        uint64_t rows = tr ? dims[0] : 1, cols = tr ? dims[1] : pr->n;
        for (uint64_t i = 0; i < pr->n; i++) {
            float v = st_value(dt, data + b, i);
            if (!isfinite(v)) {
                st = bad(&r, "tensor \"%s\" element %llu is %g", pr->name, (unsigned long long)i,
                         (double)v);
                goto out;
            }
            /* file [rows, cols] transposed into the model's [cols, rows] */
            vals[tr ? (i % cols) * rows + i / cols : i] = v;
        }
        if ((st = ampx_trainer_set(t, p, 0, vals))) {
            err_set(ERR(err, cap), "%s: %s", path, t->error);
            goto out;
        }
    }
out:
    free(vals);
    json_free(root);
    free(file);
    return st;
}
