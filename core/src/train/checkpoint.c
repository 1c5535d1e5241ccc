/* checkpoint.c — checkpoints in the safetensors format: an 8-byte little-endian header
 * length, a JSON header (dtype, shape, data_offsets per tensor, and __metadata__ with string
 * values), then the raw little-endian data. Other tools read the weights by their plain
 * names ("fc1.weight"); ampx's own state goes under "ampx.*": working copies, optimizer
 * state and the scalars block (scale, scaler counters, step counts) byte for byte, so a
 * resumed run continues bit-identically. Written to a temporary file, fsynced, renamed. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/json.h"
#include "train/trainer.h"

typedef struct ck_tensor {
    char name[G_NAME_MAX + 32];
    const char *dtype; /* "F32", "BF16", "F16", "U8" */
    uint64_t dims[G_MAX_DIMS];
    int ndim;
    uint64_t bytes;
    ampx_buffer *buf; /* NULL: the scalars block */
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
                out[n] = b, out[n].buf = sb[k];
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

ampx_status ampx_trainer_save(ampx_trainer *t, const char *path, char *err, size_t cap) {
    ck_tensor *ts = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 1));
    if (!ts) {
        snprintf(err, cap, "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    int n = ck_list(t, ts);
    ampx_scalars sc;
    ampx_status st = ampx_trainer_scalars(t, &sc);
    if (st) {
        snprintf(err, cap, "%s: %s", path, t->error);
        free(ts);
        return st;
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
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = h.oom ? NULL : fopen(tmp, "wb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, h.oom ? "out of memory" : strerror(errno));
        free(h.s), free(ts);
        return AMPX_ERR_INVALID;
    }
    uint64_t hl = h.n;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    int bad = fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.n, f) != h.n;
    for (int i = 0; i < n && !bad; i++) {
        void *data = malloc(ts[i].bytes ? ts[i].bytes : 1);
        if (!data) {
            bad = 1;
            break;
        }
        if (ts[i].buf)
            st = t->ifc->buffer_read(t->ctx, ts[i].buf, 0, data, ts[i].bytes);
        else
            memcpy(data, &sc, sizeof sc);
        bad = st != AMPX_OK || fwrite(data, 1, ts[i].bytes, f) != ts[i].bytes;
        free(data);
    }
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    int saved = errno;
    bad |= fclose(f) != 0;
    if (!bad && rename(tmp, path) != 0) bad = 1, saved = errno;
    if (bad) {
        snprintf(err, cap, "%s: %s", path, st ? ampx_backend_last_error(t->be) : strerror(saved));
        unlink(tmp);
        free(h.s), free(ts);
        return st ? st : AMPX_ERR_INVALID;
    }
    /* make the rename itself durable */
    char *dcopy = strdup(path);
    if (dcopy) {
        int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) fsync(dfd), close(dfd);
        free(dcopy);
    }
    free(h.s), free(ts);
    return AMPX_OK;
}

static const char *meta_str(const json_value *meta, const char *key) {
    const json_value *v = json_get(meta, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

ampx_status ampx_trainer_load(ampx_trainer *t, const char *path, char *err, size_t cap) {
    ck_tensor *ts       = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 1));
    FILE *f             = fopen(path, "rb");
    char *hdr           = NULL;
    unsigned char *data = NULL;
    json_value *root    = NULL;
    ampx_status st      = AMPX_ERR_INVALID;
    if (!ts || !f) {
        snprintf(err, cap, "%s: %s", path, ts ? strerror(errno) : "out of memory");
        goto out;
    }
    unsigned char le[8];
    fseek(f, 0, SEEK_END);
    long fsize = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (fsize < 8 || fread(le, 1, 8, f) != 8) {
        snprintf(err, cap, "%s: not a safetensors file (shorter than its 8-byte header length)",
                 path);
        goto out;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)le[i] << (8 * i);
    if (hl == 0 || hl > (uint64_t)fsize - 8 || hl > (100u << 20)) {
        snprintf(err, cap, "%s: not a safetensors file (header length %llu, file size %ld)", path,
                 (unsigned long long)hl, fsize);
        goto out;
    }
    hdr = malloc(hl + 1);
    if (!hdr || fread(hdr, 1, hl, f) != hl) {
        snprintf(err, cap, "%s: cannot read the %llu-byte header", path, (unsigned long long)hl);
        goto out;
    }
    hdr[hl] = 0;
    char perr[512];
    root = json_parse(hdr, path, perr, sizeof perr);
    if (!root || root->type != JSON_OBJECT) {
        snprintf(err, cap, "%s: bad safetensors header: %s", path,
                 root ? "not a JSON object" : perr);
        goto out;
    }
    uint64_t data_len = (uint64_t)fsize - 8 - hl;
    data              = malloc(data_len + 1);
    if (!data || fread(data, 1, data_len, f) != data_len) {
        snprintf(err, cap, "%s: cannot read %llu bytes of tensor data", path,
                 (unsigned long long)data_len);
        goto out;
    }
    const json_value *meta = json_get(root, "__metadata__");
    const char *fmt = meta_str(meta, "format"), *model = meta_str(meta, "model"),
               *step = meta_str(meta, "step");
    if (!fmt || strcmp(fmt, "ampx") || !step) {
        snprintf(err, cap,
                 "%s: not an ampx checkpoint (no __metadata__ format \"ampx\" with a step)", path);
        goto out;
    }
    if (!model || strcmp(model, t->m->cfg.name)) {
        snprintf(err, cap, "%s: a checkpoint of model \"%s\", not \"%s\"", path,
                 model ? model : "?", t->m->cfg.name);
        goto out;
    }
    const char *opt      = meta_str(meta, "optimizer");
    const char *want_opt = t->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd";
    if (!opt || strcmp(opt, want_opt)) {
        snprintf(err, cap, "%s: optimizer state is for %s, the model uses %s", path,
                 opt ? opt : "?", want_opt);
        goto out;
    }
    int n = ck_list(t, ts);
    /* Check everything before writing anything to the device. */
    const unsigned char *src[TR_MAX_PARAMS * 5 + 1];
    for (int i = 0; i < n; i++) {
        const json_value *e = json_get(root, ts[i].name);
        if (!e) {
            snprintf(err, cap, "%s: tensor \"%s\" is missing", path, ts[i].name);
            goto out;
        }
        const json_value *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"),
                         *of = json_get(e, "data_offsets");
        if (!dt || dt->type != JSON_STRING || strcmp(dt->str, ts[i].dtype)) {
            snprintf(err, cap, "%s: tensor \"%s\" has dtype %s, expected %s", path, ts[i].name,
                     dt && dt->type == JSON_STRING ? dt->str : "?", ts[i].dtype);
            goto out;
        }
        int shape_ok = sh && sh->type == JSON_ARRAY && (int)sh->n_items == ts[i].ndim;
        for (int k = 0; shape_ok && k < ts[i].ndim; k++)
            shape_ok =
                sh->items[k]->type == JSON_NUMBER && sh->items[k]->num == (double)ts[i].dims[k];
        if (!shape_ok) {
            char want[128];
            char dims[100];
            shape_json(&ts[i], dims, sizeof dims, ", ");
            snprintf(want, sizeof want, "[%s]", dims);
            snprintf(err, cap, "%s: tensor \"%s\" has another shape than the model's %s", path,
                     ts[i].name, want);
            goto out;
        }
        if (!of || of->type != JSON_ARRAY || of->n_items != 2 ||
            of->items[0]->type != JSON_NUMBER || of->items[1]->type != JSON_NUMBER ||
            of->items[0]->num < 0 || of->items[1]->num - of->items[0]->num != (double)ts[i].bytes ||
            of->items[1]->num > (double)data_len) {
            snprintf(err, cap,
                     "%s: tensor \"%s\": data_offsets are missing, of the wrong length or past the "
                     "end of the file",
                     path, ts[i].name);
            goto out;
        }
        src[i] = data + (uint64_t)of->items[0]->num;
    }
    ampx_scalars sc;
    for (int i = 0; i < n; i++) {
        if (!ts[i].buf) {
            /* State from the checkpoint; configuration (scaler settings, schedule) from the
             * model as it is now. */
            ampx_scalars saved;
            memcpy(&saved, src[i], sizeof saved);
            init_scalars(t->m, &sc);
            sc.scale             = saved.scale;
            sc.found_inf         = saved.found_inf;
            sc.growth_tracker    = saved.growth_tracker;
            sc.hysteresis_left   = saved.hysteresis_left;
            sc.applied_steps     = saved.applied_steps;
            sc.skipped_steps     = saved.skipped_steps;
            sc.consecutive_skips = saved.consecutive_skips;
            sc.last_found_inf    = saved.last_found_inf;
            sc.stop_reason       = saved.stop_reason;
            sc.lr                = saved.lr;
            st                   = t->ifc->buffer_write(t->ctx, t->scalars, 0, &sc, sizeof sc);
        } else {
            st = t->ifc->buffer_write(t->ctx, ts[i].buf, 0, src[i], ts[i].bytes);
        }
        if (st) {
            snprintf(err, cap, "%s: %s", path, ampx_backend_last_error(t->be));
            goto out;
        }
    }
    t->step = strtoll(step, NULL, 10);
    st      = AMPX_OK;
out:
    if (f) fclose(f);
    json_free(root);
    free(hdr), free(data), free(ts);
    return st;
}
