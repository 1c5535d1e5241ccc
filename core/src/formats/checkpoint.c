/* checkpoint.c — checkpoints in the safetensors format: an 8-byte little-endian header
 * length, a JSON header (dtype, shape, data_offsets per tensor, and __metadata__ with string
 * values), then the raw little-endian data. Other tools read the weights by their plain
 * names ("fc1.weight"); ampx's own state goes under "ampx.*": working copies, optimizer
 * state and the scalars block (scale, scaler counters, step counts) byte for byte, so a
 * resumed run continues bit-identically.
 *
 * Writing: into a temporary file beside the target (safetensors.c), every write checked,
 * fsynced, renamed over the target, the folder fsynced. Weights that are not finite are
 * never written: the last good checkpoint stays.
 *
 * Reading: a checkpoint is untrusted input. The header must be a safetensors header whose
 * tensors tile the data section exactly (as the safetensors reader requires); every tensor
 * the model needs must be there with its dtype and shape and nothing else; every metadata
 * field and every field of the scalars block is checked against its type and range, and
 * every restored value against what it can hold (finite weights, second moments >= 0).
 * Nothing reaches the device until all of it passed.
 *
 * Exporting the weights for other tools, and starting from such a file, are export.c's. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "config/input.h"
#include "config/json.h"
#include "graph/ops.h"
#include "formats/checkpoint.h"
#include "formats/safetensors.h"
#include "exec/placed.h"
#include "exec/fp8.h"
#include "exec/params.h"
#include "exec/step.h"

typedef struct ck_tensor {
    char name[G_NAME_MAX + 32];
    const char *dtype; /* "F32", "BF16", "F16", "U8" */
    uint64_t dims[G_MAX_DIMS];
    int ndim;
    uint64_t bytes;
    ampx_buffer *buf;  /* NULL: the scalars block */
    float *host;       /* ZeRO-1's optimizer state, staged whole on rank 0: read and written
                          here instead of buf (which holds the shard) */
    int nonneg;        /* values must be >= 0 (Adam's second moment) */
    uint64_t positive; /* the first `positive` values must be > 0 (the fp8 scales) */
    int skip;          /* optimizer state a sampler does not hold: in the file, not read */
    int derive;        /* a working copy cast on use (train.weight_copies): written as its
                          master (buf, host) rounded to nearest even, as a kept copy holds it;
                          never read (the cast makes it from the master) */
} ck_tensor;

#define CK_FP8_STATE "ampx.fp8.state"

/* Whether the checkpoint's fp8 state (header entry e) is this model's: its __metadata__
 * fp8_layout is the model's digest of its fp8 tensors and history (fp8_layout). */
static int fp8_state_matches(const ampx_trainer *t, const json_value *root, const json_value *e) {
    const json_value *meta = json_get(root, "__metadata__"),
                     *lay  = meta ? json_get(meta, "fp8_layout") : NULL;
    char want[24];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)fp8_layout(t));
    return e && lay && lay->type == JSON_STRING && !strcmp(lay->str, want);
}

/* A low-precision working copy ("ampx.copy.<param>"), derived from its master on demand. */
static int is_copy(const ck_tensor *c) {
    return !strncmp(c->name, "ampx.copy.", 10);
}

/* The dtype of p's working copy where the trainer casts it on use (copies.c: the copy is
 * an activation whose master is p), else AMPX_F32. */
static ampx_dtype cast_copy_dtype(const ampx_trainer *t, const param *p) {
    for (int v = 0; v < t->g.n_values; v++)
        if (t->g.values[v].master == p->value && t->g.values[v].dtype != AMPX_F32)
            return t->g.values[v].dtype;
    return AMPX_F32;
}

/* The tensors of a checkpoint, in file order. Every working copy the policy makes is there,
 * kept or cast on use alike: the file is the same whatever train.weight_copies decided, which
 * depends on the batch, so a run with another batch or number of ranks resumes it as it is. */
static int ck_list(ampx_trainer *t, ck_tensor *out) {
    int n                                = 0;
    static const char *const state[2][2] = {{"momentum", NULL}, {"adam_m", "adam_v"}};
    int adam                             = t->m->cfg.opt.kind == OPT_ADAMW;
    for (int i = 0; i < t->n_params; i++) {
        param *p    = &t->params[i];
        ck_tensor b = {.dtype = "F32", .ndim = p->ndim, .bytes = p->n * 4};
        memcpy(b.dims, p->dims, sizeof b.dims);
        out[n] = b, out[n].buf = p->master, out[n].host = p->mshard ? p->m_full : NULL;
        snprintf(out[n++].name, sizeof b.name, "%s", p->name);
        ampx_dtype cast = p->copy ? AMPX_F32 : cast_copy_dtype(t, p);
        if (p->copy || cast != AMPX_F32) {
            out[n] = b, out[n].buf = p->copy, out[n].bytes = p->n * 2;
            out[n].dtype = (p->copy ? p->copy_dtype : cast) == AMPX_BF16 ? "BF16" : "F16";
            if (!p->copy) out[n].buf = p->master, out[n].host = out[n - 1].host, out[n].derive = 1;
            snprintf(out[n++].name, sizeof b.name, "ampx.copy.%s", p->name);
        }
        ampx_buffer *sb[2] = {p->s1, p->s2};
        float *full[2]     = {p->s1_full, p->s2_full};
        int has[2]         = {t->m->cfg.opt.kind == OPT_ADAMW || t->m->cfg.opt.momentum != 0,
                              t->m->cfg.opt.kind == OPT_ADAMW};
        for (int k = 0; k < 2; k++)
            if ((sb[k] || (t->inference && has[k])) && state[adam][k]) {
                out[n] = b, out[n].buf = sb[k], out[n].nonneg = adam && k == 1;
                out[n].host = t->zero ? full[k] : NULL;
                out[n].skip = !sb[k];
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
    if (t->fp8) { /* policy.fp8's scaling state: scales, their inverses, the amax history */
        uint64_t slots = (uint64_t)t->g.n_fp8;
        out[n]         = (ck_tensor){.dtype    = "F32",
                                     .dims     = {2 + (uint64_t)t->fp8_history, slots},
                                     .ndim     = 2,
                                     .bytes    = fp8_state_floats(t) * 4,
                                     .buf      = t->fp8,
                                     .nonneg   = 1,
                                     .positive = 2 * slots};
        snprintf(out[n++].name, sizeof out[0].name, "%s", CK_FP8_STATE);
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

static uint64_t elem_size(const ck_tensor *c) {
    return c->dtype[1] == '3' ? 4 : 2; /* F32; BF16, F16 */
}

/* Index of the first of n elements of tensor c at data that is not finite (or negative,
 * with nonneg), else -1; -1 for the scalars block (checked field by field). */
static int64_t first_bad(const ck_tensor *c, const unsigned char *data, uint64_t n, uint64_t base) {
    if (!c->buf) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (c->dtype[1] == '3') { /* F32 */
            uint32_t u;
            memcpy(&u, data + 4 * i, 4);
            if ((u & 0x7F800000u) == 0x7F800000u) return (int64_t)i;
            if (c->nonneg && (u >> 31) && u != 0x80000000u) return (int64_t)i;
            if (base + i < c->positive && (u & 0x7FFFFFFFu) == 0) return (int64_t)i;
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

ampx_status ampx_checkpoint_check_path(const char *path, char *err, size_t cap) {
    char tmp[PATH_MAX + 64];
    int fd = st_create_temp(path, tmp, sizeof tmp, ERR(err, cap));
    if (fd < 0) return AMPX_ERR_INVALID;
    close(fd);
    unlink(tmp);
    return AMPX_OK;
}

/* The keeper's state as __metadata__ fields (their values strings, as safetensors wants):
 * "keeper_kept" the periodic checkpoints' steps ("100,200"; "" for none), "keeper_best_loss"
 * and "keeper_best_step" once a validation ran. Nothing names a file: a straight run and a
 * resumed one write the same bytes. */
static void keeper_json(const ampx_keeper *k, sbuf *h) {
    sb_printf(h, ",\"keeper_kept\":\"");
    for (int i = 0; i < k->n_kept; i++)
        sb_printf(h, "%s%lld", i ? "," : "", (long long)k->kept[i]);
    sb_printf(h, "\"");
    if (k->best_step >= 0 && isfinite(k->best_loss))
        sb_printf(h, ",\"keeper_best_loss\":\"%.17g\",\"keeper_best_step\":\"%lld\"", k->best_loss,
                  (long long)k->best_step);
}

/* What the run carries over a resume besides the scalars: the keeper's state and the
 * run-health rules' reference loss ("health_start_loss", once a step was applied), so a
 * resumed run judges divergence as the straight one. */
static void run_state_json(const ampx_trainer *t, sbuf *h) {
    keeper_json(&t->keeper, h);
    if (t->ring.health.start_loss > 0)
        sb_printf(h, ",\"health_start_loss\":\"%.17g\"", t->ring.health.start_loss);
    /* placement "measured": what it chose, so a resume places the same way */
    char *placed = placed_choice(t);
    if (placed) sb_printf(h, ",\"placement\":\"%s\"", placed);
    free(placed);
}

/* A trainer with no whole state to write: a sampler's, or one rank's shard under ZeRO-1. */
static ampx_status save_refused(const ampx_trainer *t, const char *path, ampx_err e) {
    if (t->inference) {
        err_set(e, "%s: a sampler or predictor holds no optimizer state to save", path);
        return AMPX_ERR_INVALID;
    }
    if (t->zero && t->dp.rank != 0) {
        err_set(e,
                "not writing %s: under train.zero 1 rank 0 writes the checkpoints (the state is "
                "gathered there), not rank %d",
                path, t->dp.rank);
        return AMPX_ERR_UNSUPPORTED;
    }
    return AMPX_OK;
}

/* A working copy cast on use, for the file: its master (c->host or c->buf) rounded to
 * nearest even into data, the bits a kept copy holds after each applied step. */
static ampx_status derive_for_file(ampx_trainer *t, const ck_tensor *c, void *data) {
    uint64_t n     = c->bytes / 2;
    float *m       = c->host ? c->host : malloc((n ? n : 1) * 4);
    ampx_status st = m ? AMPX_OK : AMPX_ERR_NO_MEMORY;
    if (!st && !c->host) st = t->ifc->buffer_read(t->ctx, c->buf, 0, m, n * 4);
    uint16_t *h = data;
    int bf16    = !strcmp(c->dtype, "BF16");
    for (uint64_t i = 0; !st && i < n; i++)
        h[i] = bf16 ? ampx_f32_to_bf16(m[i]) : ampx_f32_to_f16(m[i]);
    if (!c->host) free(m);
    return st;
}

static ampx_status save(ampx_trainer *t, const char *path, char *err, size_t cap) {
    ampx_status st = save_refused(t, path, ERR(err, cap));
    if (st) return st;
    ck_tensor *ts = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 2));
    if (!ts) {
        err_set(ERR(err, cap), "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    int n = ck_list(t, ts);
    ampx_scalars sc;
    st = ampx_trainer_scalars(t, &sc);
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
              "\"lr\":\"%.9g\",\"optimizer\":\"%s\",\"seed\":\"%llu\"",
              AMPX_VERSION_STRING, esc, (long long)t->step, sc.applied_steps, sc.skipped_steps,
              (double)sc.scale, sc.growth_tracker, sc.hysteresis_left, (double)sc.lr,
              t->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd",
              (unsigned long long)t->m->cfg.train.seed);
    run_state_json(t, &h);
    /* how the run that wrote it read its data: a resume with another global batch is noted */
    sb_printf(&h, ",\"ranks\":\"%d\",\"batch\":\"%lld\",\"accumulate\":\"%lld\"", t->dp.world,
              (long long)t->B, (long long)t->A);
    if (t->fp8) sb_printf(&h, ",\"fp8_layout\":\"%016llx\"", (unsigned long long)fp8_layout(t));
    sb_printf(&h, "}");
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
    int fd  = st_create_temp(path, tmp, sizeof tmp, ERR(err, cap));
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
        if (ts[i].derive)
            st = derive_for_file(t, &ts[i], data);
        else if (ts[i].host)
            memcpy(data, ts[i].host, ts[i].bytes);
        else if (ts[i].buf)
            st = t->ifc->buffer_read(t->ctx, ts[i].buf, 0, data, ts[i].bytes);
        else
            memcpy(data, &sc, sizeof sc);
        int64_t at = st ? -1 : first_bad(&ts[i], data, ts[i].bytes / elem_size(&ts[i]), 0);
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
    return st_sync_folder(path, ERR(err, cap)); /* make the rename itself durable */
}

// ---------------------------------------------------------------------------------------
// Reading

/* Metadata integer field `key` in [lo, hi]. */
static ampx_status meta_int(ck_reader *r, const json_value *meta, const char *key, int64_t lo,
                            int64_t hi, int64_t *out) {
    const char *s = meta_str(meta, key);
    if (!s) return st_bad(r, "__metadata__.%s is missing", key);
    if (!parse_dec(s, lo, hi, out))
        return st_bad(r, "__metadata__.%s \"%.40s\" is not an integer in [%lld, %lld]", key, s,
                      (long long)lo, (long long)hi);
    return AMPX_OK;
}

static ampx_status meta_float(ck_reader *r, const json_value *meta, const char *key, float *out) {
    const char *s = meta_str(meta, key);
    if (!s) return st_bad(r, "__metadata__.%s is missing", key);
    char *end;
    errno    = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
        return st_bad(r, "__metadata__.%s \"%.40s\" is not a finite number", key, s);
    *out = (float)v;
    return AMPX_OK;
}

/* A checkpoint's ranks, per-rank batch and accumulation ("ranks", "batch", "accumulate";
 * none in one written before them) against this run's: another number of ranks with the same
 * global batch continues the run; another global batch or accumulation reads other examples
 * in each step, which the notice says. */
static ampx_status meta_batch(ck_reader *r, ampx_trainer *t, const json_value *meta) {
    int64_t n, b, a;
    if (!meta_str(meta, "ranks") && !meta_str(meta, "batch") && !meta_str(meta, "accumulate"))
        return AMPX_OK;
    if (meta_int(r, meta, "ranks", 1, 1 << 24, &n) ||
        meta_int(r, meta, "batch", 1, INT32_MAX, &b) ||
        meta_int(r, meta, "accumulate", 1, INT32_MAX, &a))
        return AMPX_ERR_INVALID;
    int64_t now = t->B * t->dp.world;
    if (n * b == now && a == t->A) return AMPX_OK;
    size_t at = strlen(t->notice);
    snprintf(t->notice + at, sizeof t->notice - at,
             "%s%s was written by %lld rank%s x batch %lld x %lld micro-batch%s (%lld examples a "
             "step); this run trains %d x %lld x %lld (%lld a step): from here on it reads other "
             "examples than that run would have",
             at ? "; " : "", r->name, (long long)n, n == 1 ? "" : "s", (long long)b, (long long)a,
             a == 1 ? "" : "es", (long long)(n * b * a), t->dp.world, (long long)t->B,
             (long long)t->A, (long long)(now * t->A));
    return AMPX_OK;
}

/* The keeper's state of a checkpoint at step into *k: none (a checkpoint written before it
 * existed) leaves *k empty with loaded 0; every field present is checked. */
static ampx_status meta_keeper(ck_reader *r, const json_value *meta, int64_t step, ampx_keeper *k) {
    *k               = (ampx_keeper){.best_loss = INFINITY, .best_step = -1};
    const char *kept = meta_str(meta, "keeper_kept");
    if (!kept) return AMPX_OK;
    for (const char *p = kept; *p;) {
        char num[24];
        size_t n = strcspn(p, ",");
        int64_t v;
        snprintf(num, sizeof num, "%.*s", (int)(n < sizeof num ? n : sizeof num - 1), p);
        if (k->n_kept == AMPX_KEEP_MAX || n >= sizeof num || !parse_dec(num, 1, step, &v) ||
            (k->n_kept && v <= k->kept[k->n_kept - 1]))
            return st_bad(r,
                          "__metadata__.keeper_kept \"%.60s\" is not a rising list of at most %d "
                          "steps in [1, %lld]",
                          kept, AMPX_KEEP_MAX, (long long)step);
        k->kept[k->n_kept++] = v;
        p += n + (p[n] == ',');
        if (p[-1] == ',' && !*p) return st_bad(r, "__metadata__.keeper_kept ends with a comma");
    }
    if (meta_str(meta, "keeper_best_step")) {
        float unused;
        ampx_status st;
        if ((st = meta_int(r, meta, "keeper_best_step", 0, step, &k->best_step)) ||
            (st = meta_float(r, meta, "keeper_best_loss", &unused)))
            return st;
        k->best_loss = strtod(meta_str(meta, "keeper_best_loss"), NULL); /* kept in double */
    }
    k->loaded = 1;
    return AMPX_OK;
}

/* The scalars block's state fields against their ranges and the metadata. */
static ampx_status check_scalars(ck_reader *r, const ampx_scalars *s, const json_value *meta,
                                 int64_t step) {
    static const char *const blk = "ampx.scalars";
    if (!isfinite(s->scale) || !(s->scale > 0))
        return st_bad(r, "%s: scale is %g, expected a finite number > 0", blk, (double)s->scale);
    if (!isfinite(s->lr) || s->lr < 0)
        return st_bad(r, "%s: lr is %g, expected a finite number >= 0", blk, (double)s->lr);
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
            return st_bad(r, "%s: %s is %d, expected an integer in [%d, %d]", blk, f[i].name,
                          f[i].v, f[i].lo, f[i].hi);
    if (s->stop_reason)
        return st_bad(r,
                      "%s: stop_reason is %d: the run that wrote it stopped (%s), so it does not "
                      "resume",
                      blk, s->stop_reason,
                      s->stop_reason == AMPX_STOP_MIN_SCALE           ? "min_scale reached"
                      : s->stop_reason == AMPX_STOP_CONSECUTIVE_SKIPS ? "too many skipped steps"
                                                                      : "unknown reason");
    if ((int64_t)s->applied_steps + s->skipped_steps != step)
        return st_bad(r, "__metadata__.step %lld is not applied_steps %d + skipped_steps %d",
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
            return st_bad(r, "__metadata__.%s %lld disagrees with the scalars block's %d", m[i].key,
                          (long long)v, m[i].v);
    }
    float fv;
    if ((st = meta_float(r, meta, "scale", &fv))) return st;
    if (fv != s->scale)
        return st_bad(r, "__metadata__.scale %g disagrees with the scalars block's %g", (double)fv,
                      (double)s->scale);
    if ((st = meta_float(r, meta, "lr", &fv))) return st;
    if (fv != s->lr)
        return st_bad(r, "__metadata__.lr %g disagrees with the scalars block's %g", (double)fv,
                      (double)s->lr);
    return AMPX_OK;
}

/* An ampx checkpoint of this model, with this optimizer's state. */
static ampx_status check_identity(ck_reader *r, const ampx_trainer *t, const json_value *meta) {
    const char *fmt = meta_str(meta, "format"), *model = meta_str(meta, "model");
    if (!fmt || strcmp(fmt, "ampx") || !meta_str(meta, "step"))
        return st_bad(r, "not an ampx checkpoint (no __metadata__ format \"ampx\" with a step)");
    if (!model || strcmp(model, t->m->cfg.name))
        return st_bad(r, "a checkpoint of model \"%.80s\", not \"%s\"", model ? model : "?",
                      t->m->cfg.name);
    const char *opt      = meta_str(meta, "optimizer");
    const char *want_opt = t->m->cfg.opt.kind == OPT_ADAMW ? "adamw" : "sgd";
    if (!opt || strcmp(opt, want_opt))
        return st_bad(r, "optimizer state is for %.20s, the model uses %s", opt ? opt : "?",
                      want_opt);
    return AMPX_OK;
}

/* Sets at[i] to the offset in the data section of each of the n tensors of ts, checking
 * every tensor of the model is there with its dtype and shape, and no other; a working copy
 * of another dtype, or none (a checkpoint of another policy), gets -1 and counts in
 * *derived. 0, or -1 after the message. */
static int ck_match(ck_reader *rp, ampx_trainer *t, const json_value *root, const ck_tensor *ts,
                    int n, int64_t *at, int *derived) {
    for (int i = 0; i < n; i++) {
        const json_value *e = json_get(root, ts[i].name);
        if (!strcmp(ts[i].name, CK_FP8_STATE) && !fp8_state_matches(t, root, e)) {
            /* a run without fp8, or with other fp8 tensors: this one's scales start at 1 */
            at[i] = -1;
            snprintf(t->notice, sizeof t->notice, "%s has %s: every fp8 tensor's scale starts at 1",
                     rp->name,
                     e ? "the fp8 scaling state of other fp8 tensors (another policy.fp8)"
                       : "no fp8 scaling state");
            continue;
        }
        if (ts[i].derive) { /* cast on use here: nothing to read */
            at[i] = -1;
            continue;
        }
        if (is_copy(&ts[i]) && (!e || strcmp(json_get(e, "dtype")->str, ts[i].dtype))) {
            at[i] = -1;
            (*derived)++;
            continue;
        }
        if (!e) {
            st_bad(rp, "tensor \"%s\" is missing", ts[i].name);
            return -1;
        }
        const json_value *dt = json_get(e, "dtype"), *sh = json_get(e, "shape"),
                         *of = json_get(e, "data_offsets");
        if (strcmp(dt->str, ts[i].dtype)) {
            st_bad(rp, "tensor \"%s\" has dtype %s, expected %s", ts[i].name, dt->str, ts[i].dtype);
            return -1;
        }
        int shape_ok = (int)sh->n_items == ts[i].ndim;
        for (int k = 0; shape_ok && k < ts[i].ndim; k++)
            shape_ok = sh->items[k]->num == (double)ts[i].dims[k];
        if (!shape_ok) {
            char dims[100];
            shape_json(&ts[i], dims, sizeof dims, ", ");
            st_bad(rp, "tensor \"%s\" has another shape than the model's [%s]", ts[i].name, dims);
            return -1;
        }
        at[i] = (int64_t)of->items[0]->num; /* check_layout: within the data section */
    }
    if (root->n_items != (size_t)n + 1)
        for (size_t k = 0; k < root->n_items; k++) {
            const char *key = root->items[k]->key;
            /* the metadata, and the fp8 state of a run whose policy had fp8 products */
            int known = !strcmp(key, "__metadata__") || !strcmp(key, CK_FP8_STATE);
            for (int i = 0; i < n && !known; i++)
                known = !strcmp(key, ts[i].name);
            /* the working copy of a parameter the policy now keeps in f32 */
            for (int i = 0; i < t->n_params && !known; i++)
                known = !strncmp(key, "ampx.copy.", 10) && !strcmp(key + 10, t->params[i].name);
            if (!known) {
                st_bad(rp, "tensor \"%.100s\" is not part of model \"%s\"", key, t->m->cfg.name);
                return -1;
            }
        }
    return 0;
}

/* The working copies the file did not give (at -1), cast from the masters now on the
 * device, and the note that says so. */
static ampx_status derive_copies(ck_reader *rp, ampx_trainer *t, const ck_tensor *ts, int n,
                                 const int64_t *at, int derived) {
    for (int i = 0; i < t->n_params && derived; i++) {
        const param *p = &t->params[i];
        int from_file  = 0;
        for (int k = 0; k < n && p->copy && !from_file; k++)
            from_file = at[k] >= 0 && is_copy(&ts[k]) && !strcmp(ts[k].name + 10, p->name);
        if (!p->copy || from_file) continue;
        ampx_status st;
        if (p->mshard) { /* ZeRO-1: the staged master, whole on rank 0 */
            if ((st = tr_copy_from_host(t, p, p->m_full)))
                return st_bad(rp, "%s", ampx_backend_last_error(t->be)), st;
            continue;
        }
        ampx_cast_args c = {.size = sizeof c,
                            .n    = p->n,
                            .src  = tr_tensor(p->master, 0, AMPX_F32),
                            .dst  = tr_tensor(p->copy, 0, p->copy_dtype)};
        st               = tr_step_op(t, AMPX_OP_CAST, &c);
        if (st) return st_bad(rp, "%s", ampx_backend_last_error(t->be)), st;
    }
    if (derived)
        snprintf(t->notice, sizeof t->notice,
                 "%s was written under another precision policy: %d working cop%s derived "
                 "from its f32 master weights",
                 rp->name, derived, derived == 1 ? "y" : "ies");
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Reading the data: from memory (the fuzz harness) or from the file a chunk at a time, so a
// resume holds no second copy of the checkpoint (the optimizer state makes it 4x the
// weights). Every value is checked in a first pass and reaches the device in a second.

#define CK_CHUNK ((uint64_t)16 << 20) /* bytes read at a time: a multiple of 4 */

typedef struct ck_source {
    const unsigned char *mem; /* the data section in memory; NULL: read from f */
    FILE *f;
    uint64_t data_at;     /* the data section's offset in f */
    unsigned char *chunk; /* CK_CHUNK bytes, when reading from f */
} ck_source;

/* Bytes [begin, begin + n) of the data section, n <= CK_CHUNK; NULL on a read error. */
static const unsigned char *ck_span(const ck_source *s, uint64_t begin, uint64_t n) {
    if (s->mem) return s->mem + begin;
    return st_read_span(s->f, s->data_at, begin, begin + n, s->chunk) ? NULL : s->chunk;
}

/* The fp8 scaling state beyond finite and positive: what FP8_SCALE_UPDATE writes (backend
 * args) holds scale_inv = 1 / scale (f32 division), and scale times the largest amax left in
 * the history at most the format's largest value x 2^-margin (the scale was computed from an
 * amax at least that large). A scale and inverse that disagree, or a scale that would
 * saturate by more than any margin allows (2^64), is refused; one past this policy's margin
 * (the margin may have changed since the save) gets a note. */
static ampx_status check_fp8_state(ck_reader *r, ampx_trainer *t, const ck_source *s,
                                   const ck_tensor *c, uint64_t at) {
    uint64_t n = (uint64_t)t->g.n_fp8, rows = 2 + (uint64_t)t->fp8_history;
    if (rows * n * 4 > CK_CHUNK) return AMPX_OK; /* no model has that many fp8 tensors */
    const unsigned char *p = ck_span(s, at, rows * n * 4);
    if (!p) return st_bad(r, "read error");
    for (uint64_t i = 0; i < n; i++) {
        float scale, inv, a, amax = 0;
        memcpy(&scale, p + 4 * i, 4);
        memcpy(&inv, p + 4 * (n + i), 4);
        for (uint64_t h = 2; h < rows; h++)
            if (memcpy(&a, p + 4 * (h * n + i), 4), a > amax) amax = a;
        const char *fmt = t->fp8_rec[i].format;
        double fmax     = ampx_fp8_max(strcmp(fmt, "e5m2") ? AMPX_E4M3 : AMPX_E5M2);
        double product  = (double)scale * (double)inv;
        if (!(fabs(product - 1) <= 1e-5))
            return st_bad(r,
                          "tensor \"%s\": %s (slot %llu): scale %g and scale_inv %g disagree "
                          "(their product is %.9g, expected 1: scale_inv is 1 / scale)",
                          c->name, t->fp8_names[i], (unsigned long long)i, (double)scale,
                          (double)inv, product);
        double over = (double)scale * (double)amax / fmax;
        if (over > 0x1p64)
            return st_bad(r,
                          "tensor \"%s\": %s (slot %llu): scale %g times the amax %g in its "
                          "history is %.3g times %s's largest value %g: every value would "
                          "saturate (no margin gives such a scale)",
                          c->name, t->fp8_names[i], (unsigned long long)i, (double)scale,
                          (double)amax, over, fmt, fmax);
        double bound = ldexp(1.0, -t->m->cfg.pol.fp8.margin) * 1.001;
        size_t used  = strlen(t->notice);
        if (over > bound && used + 1 < sizeof t->notice)
            snprintf(t->notice + used, sizeof t->notice - used,
                     "%s%s: fp8 tensor %s's scale %g times its history's amax %g is %.3g times "
                     "%s's largest value (policy.fp8.margin %d allows %g): its first step "
                     "saturates until the scale updates",
                     used ? "; " : "", r->name, t->fp8_names[i], (double)scale, (double)amax, over,
                     fmt, t->m->cfg.pol.fp8.margin, bound / 1.001);
    }
    return AMPX_OK;
}

/* The first pass over tensor c at offset at: its values, chunk by chunk, or the scalars
 * block (read into *saved and checked). */
static ampx_status check_tensor(ck_reader *r, const ck_source *s, const ck_tensor *c, uint64_t at,
                                const json_value *meta, int64_t step, ampx_scalars *saved) {
    if (!c->buf) {
        const unsigned char *p = ck_span(s, at, sizeof *saved);
        if (!p) return st_bad(r, "read error");
        memcpy(saved, p, sizeof *saved);
        return check_scalars(r, saved, meta, step);
    }
    uint64_t es = elem_size(c);
    for (uint64_t off = 0; off < c->bytes; off += CK_CHUNK) {
        uint64_t len           = c->bytes - off < CK_CHUNK ? c->bytes - off : CK_CHUNK;
        const unsigned char *p = ck_span(s, at + off, len);
        if (!p) return st_bad(r, "read error");
        int64_t i = first_bad(c, p, len / es, off / es);
        if (i >= 0)
            return st_bad(r, "tensor \"%s\" element %lld is %g, expected a finite number%s",
                          c->name, (long long)(off / es + (uint64_t)i), element(c, p, i),
                          off / es + (uint64_t)i < c->positive ? " > 0"
                          : c->nonneg                          ? " >= 0"
                                                               : "");
    }
    return AMPX_OK;
}

/* The second pass: tensor c at offset at onto the device, or the scalars block: state from
 * the checkpoint, configuration (scaler settings, schedule) from the model as it is now. */
static ampx_status write_tensor(ck_reader *r, ampx_trainer *t, const ck_source *s,
                                const ck_tensor *c, uint64_t at, const ampx_scalars *saved) {
    ampx_status st = AMPX_OK;
    if (!c->buf) {
        ampx_scalars sc;
        init_scalars(t->m, &sc);
        sc.scale             = saved->scale;
        sc.found_inf         = saved->found_inf;
        sc.growth_tracker    = saved->growth_tracker;
        sc.hysteresis_left   = saved->hysteresis_left;
        sc.applied_steps     = saved->applied_steps;
        sc.skipped_steps     = saved->skipped_steps;
        sc.consecutive_skips = saved->consecutive_skips;
        sc.last_found_inf    = saved->last_found_inf;
        sc.stop_reason       = 0;
        sc.lr                = saved->lr;
        st                   = t->ifc->buffer_write(t->ctx, t->scalars, 0, &sc, sizeof sc);
    }
    for (uint64_t off = 0; c->buf && off < c->bytes && !st; off += CK_CHUNK) {
        uint64_t len           = c->bytes - off < CK_CHUNK ? c->bytes - off : CK_CHUNK;
        const unsigned char *p = ck_span(s, at + off, len);
        if (!p) return st_bad(r, "read error");
        if (c->host) /* ZeRO-1: staged; ampx_trainer_sync hands each rank its shard */
            memcpy((unsigned char *)c->host + off, p, len);
        else
            st = t->ifc->buffer_write(t->ctx, c->buf, off, p, len);
    }
    return st ? st_bad(r, "%s", ampx_backend_last_error(t->be)) : AMPX_OK;
}

/* A checkpoint whose header (root) st_parse or st_open checked, its data in s. */
static ampx_status ck_load(ampx_trainer *t, ck_reader *r, const json_value *root,
                           const ck_source *s) {
    ck_tensor *ts       = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 2));
    int64_t *at         = malloc(sizeof *at * (TR_MAX_PARAMS * 5 + 2));
    ampx_keeper *keeper = malloc(sizeof *keeper);
    ampx_status st      = AMPX_ERR_INVALID;
    if (!ts || !at || !keeper) {
        st = st_bad(r, "out of memory");
        goto out;
    }
    const json_value *meta = json_get(root, "__metadata__");
    if (t->zero && t->dp.rank != 0) {
        st = st_bad(r,
                    "under train.zero 1 rank 0 reads the checkpoint and hands each rank its "
                    "shard, not rank %d",
                    t->dp.rank);
        goto out;
    }
    if ((st = check_identity(r, t, meta))) goto out;
    st = AMPX_ERR_INVALID;
    int64_t step, seed;
    float start_f = 0;
    if (meta_int(r, meta, "step", 0, INT64_MAX, &step) ||
        meta_int(r, meta, "seed", 0, INT64_MAX, &seed) || meta_keeper(r, meta, step, keeper) ||
        (meta_str(meta, "health_start_loss") && meta_float(r, meta, "health_start_loss", &start_f)))
        goto out;
    if (start_f < 0 || (meta_str(meta, "health_start_loss") && !(start_f > 0))) {
        st_bad(r, "__metadata__.health_start_loss \"%.40s\" is not a positive number",
               meta_str(meta, "health_start_loss"));
        goto out;
    }
    /* kept in double, as the straight run holds it */
    double start_loss = start_f > 0 ? strtod(meta_str(meta, "health_start_loss"), NULL) : 0;
    int n = ck_list(t, ts), derived = 0;
    t->notice[0] = 0;
    if (ck_match(r, t, root, ts, n, at, &derived) || meta_batch(r, t, meta)) goto out;
    ampx_scalars saved;
    memset(&saved, 0, sizeof saved);
    for (int i = 0; i < n; i++) /* every restored value, before anything reaches the device */
        if (at[i] >= 0 && !ts[i].skip &&
            ((st = check_tensor(r, s, &ts[i], (uint64_t)at[i], meta, step, &saved)) ||
             (ts[i].buf && ts[i].buf == t->fp8 &&
              (st = check_fp8_state(r, t, s, &ts[i], (uint64_t)at[i])))))
            goto out;
    for (int i = 0; i < n; i++)
        if (at[i] >= 0 && !ts[i].skip &&
            (st = write_tensor(r, t, s, &ts[i], (uint64_t)at[i], &saved)))
            goto out;
    /* the masters are on the device: their working copies for this policy */
    if ((st = derive_copies(r, t, ts, n, at, derived))) goto out;
    t->keeper = *keeper;
    t->step   = step;
    health_resume(&t->ring.health, start_loss);
    if (meta_str(meta, "placement")) placed_restore(t, meta_str(meta, "placement"));
    st = AMPX_OK;
out:
    free(ts), free(at), free(keeper);
    return st;
}

ampx_status ck_load_memory(ampx_trainer *t, const char *name, const unsigned char *file, size_t len,
                           ampx_err e) {
    ck_reader r               = {.name = name, .err = e};
    json_value *root          = NULL;
    const unsigned char *data = NULL;
    uint64_t data_len         = 0;
    ampx_status st            = st_parse(&r, file, len, &root, &data, &data_len);
    ck_source s               = {.mem = data};
    if (!st) st = ck_load(t, &r, root, &s);
    json_free(root);
    return st;
}

static ampx_status load(ampx_trainer *t, const char *path, char *err, size_t cap) {
    t->kv.len = 0; /* new weights: nothing cached holds */
    /* No checkpoint of this model is larger than its header cap and its state. */
    ck_tensor *ts = malloc(sizeof *ts * (TR_MAX_PARAMS * 5 + 2));
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
    FILE *f = input_open(path, UINT64_MAX, &size, ERR(err, cap));
    if (!f) return AMPX_ERR_INVALID;
    fclose(f);
    if (size > 8 + (uint64_t)CK_MAX_HEADER_BYTES + state) {
        err_set(ERR(err, cap),
                "%s: %llu bytes, more than any checkpoint of model \"%s\" holds (its state is "
                "%llu bytes)",
                path, (unsigned long long)size, t->m->cfg.name, (unsigned long long)state);
        return AMPX_ERR_INVALID;
    }
    ck_reader r      = {.name = path, .err = ERR(err, cap)};
    json_value *root = NULL;
    ck_source s      = {0};
    uint64_t data_len;
    ampx_status st = st_open_max(path, 8 + (uint64_t)CK_MAX_HEADER_BYTES + state, &s.f, &root,
                                 &s.data_at, &data_len, ERR(err, cap));
    if (!st && !(s.chunk = malloc(CK_CHUNK))) st = st_bad(&r, "out of memory");
    if (!st) st = ck_load(t, &r, root, &s);
    if (s.f) fclose(s.f);
    free(s.chunk);
    json_free(root);
    return st;
}

// ---------------------------------------------------------------------------------------
// One thread at a time (tr_claim)

static ampx_status busy(const char *path, char *err, size_t cap) {
    err_set(ERR(err, cap), "%s: the trainer is in use by another thread", path);
    return AMPX_ERR_BUSY;
}

ampx_status ampx_trainer_save(ampx_trainer *t, const char *path, char *err, size_t cap) {
    int claimed = tr_claim(t);
    if (claimed < 0) return busy(path, err, cap);
    ampx_status st = save(t, path, err, cap);
    tr_release(t, claimed);
    return st;
}

ampx_status ampx_trainer_load(ampx_trainer *t, const char *path, char *err, size_t cap) {
    int claimed = tr_claim(t);
    if (claimed < 0) return busy(path, err, cap);
    ampx_status st = load(t, path, err, cap);
    tr_release(t, claimed);
    return st;
}
