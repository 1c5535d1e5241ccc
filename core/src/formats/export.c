/* export.c — plain weights in safetensors files other tools read: exporting a checkpoint's
 * weights (F32, BF16 or F16, without ampx's own state), and starting a model from such a
 * file (PyTorch's, a Linear weight transposed on request), or from an llm.c checkpoint
 * (llmc.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "base/output.h"
#include "graph/ops.h"
#include "formats/llmc.h"
#include "formats/safetensors.h"
#include "exec/trainer.h"

/* Whether header entry e is a weight to export: not the metadata, not ampx's own state
 * (working copies, moments, scalars). */
static int exported(const json_value *e) {
    return strcmp(e->key, "__metadata__") && strncmp(e->key, "ampx.", 5);
}

/* The exported file's header: every weight as dtype dn (es bytes an element), in file
 * order, padded to 8 bytes; *n gets the count. */
static ampx_status export_header(ck_reader *r, const json_value *root, const char *dn, size_t es,
                                 sbuf *h, int *n) {
    char esc[256];
    sb_printf(h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"ampx\"}");
    uint64_t off = 0;
    for (size_t i = 0; i < root->n_items; i++) {
        const json_value *e = root->items[i];
        if (!exported(e)) continue;
        const char *dt;
        uint64_t dims[G_MAX_DIMS] = {0}, b, end;
        int nd;
        st_entry(e, &dt, dims, &nd, &b, &end);
        if (strcmp(dt, "F32"))
            return st_bad(r, "tensor \"%s\" is %s; an ampx checkpoint holds its weights in F32",
                          e->key, dt);
        char shape[128] = "";
        for (int k = 0; k < nd; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", k ? "," : "",
                     (unsigned long long)dims[k]);
        uint64_t bytes = (end - b) / 4 * es;
        json_escape(e->key, esc, sizeof esc);
        sb_printf(h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}", esc,
                  dn, shape, (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
        (*n)++;
    }
    sb_printf(h, "}");
    while (!h->oom && h->n % 8)
        sb_printf(h, " ");
    return h->oom ? st_bad(r, "out of memory") : AMPX_OK;
}

/* The exported file: length, header h, then the weights rounded to dtype (nearest even);
 * 1 on a failed write. */
static int export_write(FILE *f, const sbuf *h, const json_value *root, const unsigned char *data,
                        ampx_dtype dtype) {
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)h->n >> (8 * i));
    int badw = fwrite(le, 1, 8, f) != 8 || fwrite(h->s, 1, h->n, f) != h->n;
    for (size_t i = 0; i < root->n_items && !badw; i++) {
        const json_value *e = root->items[i];
        if (!exported(e)) continue;
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
    return badw;
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
    ampx_status st = st_read(ckpt, &file, &root, &data, &data_len, ERR(err, cap));
    if (st) return st;
    ck_reader r     = {.name = ckpt, .err = ERR(err, cap)};
    const char *fmt = meta_str(json_get(root, "__metadata__"), "format");
    const char *dn  = dtype == AMPX_F32 ? "F32" : dtype == AMPX_BF16 ? "BF16" : "F16";
    sbuf h          = {0};
    int n           = 0;
    ampx_output *o  = NULL;
    if (!fmt || strcmp(fmt, "ampx")) {
        st = st_bad(&r, "not an ampx checkpoint (no __metadata__ format \"ampx\")");
        goto out;
    }
    if ((st = export_header(&r, root, dn, ampx_dtype_size(dtype), &h, &n))) goto out;
    /* refused before anything is written: an existing file at path stays as it was */
    if (n == 0) {
        st = st_bad(&r, "no weights to export");
        goto out;
    }
    if (out_same_file(ckpt, path)) {
        err_set(ERR(err, cap), "%s: the export would overwrite the checkpoint it reads", path);
        st = AMPX_ERR_INVALID;
        goto out;
    }
    if ((st = ampx_output_open(path, &o, err, cap))) goto out;
    if (export_write(ampx_output_stream(o), &h, root, data, dtype)) {
        err_set(ERR(err, cap), "%s: write error: %s", path, strerror(errno ? errno : EIO));
        ampx_output_discard(o);
        st = AMPX_ERR_INVALID;
        goto out;
    }
    st = ampx_output_commit(o, err, cap);
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
        if ((n->op != OP_MATMUL && n->op != OP_DENSE && n->op != OP_MATMUL_FP8 &&
             n->op != OP_DENSE_FP8) ||
            n->a.trans_b)
            continue; /* fused and fp8 too */
        int w = n->in[1];
        if (g->values[w].master >= 0) w = g->values[w].master;
        if (w == v) return 1;
    }
    return 0;
}

ampx_status ampx_trainer_init_from(ampx_trainer *t, const char *path, int transpose_linear,
                                   char *err, size_t cap) {
    /* llm.c's checkpoints by their magic: their layout is fixed, transposes included */
    if (llmc_is_checkpoint(path)) return llmc_init_from(t, path, ERR(err, cap));
    /* the header alone in memory; each tensor read from the file when it is set */
    FILE *f          = NULL;
    json_value *root = NULL;
    uint64_t data_at, data_len;
    ampx_status st = st_open(path, &f, &root, &data_at, &data_len, ERR(err, cap));
    if (st) return st;
    ck_reader r         = {.name = path, .err = ERR(err, cap)};
    float *vals         = NULL;
    unsigned char *data = NULL;
    /* every tensor of the file is a parameter of the model, and every parameter is there */
    for (size_t i = 0; i < root->n_items; i++) {
        const char *k = root->items[i]->key;
        int found     = !strcmp(k, "__metadata__");
        for (int p = 0; p < t->n_params && !found; p++)
            found = !strcmp(k, t->params[p].name);
        if (!found) {
            st = st_bad(&r, "tensor \"%s\" is not a parameter of model \"%s\"", k, t->m->cfg.name);
            goto out;
        }
    }
    for (int p = 0; p < t->n_params && !st; p++) {
        const param *pr     = &t->params[p];
        const json_value *e = json_get(root, pr->name);
        if (!e) {
            st = st_bad(&r, "no tensor \"%s\" (the model's parameter %d of %d)", pr->name, p + 1,
                        t->n_params);
            goto out;
        }
        const char *dt;
        uint64_t dims[G_MAX_DIMS] = {0}, b, end;
        int nd;
        st_entry(e, &dt, dims, &nd, &b, &end);
        if (strcmp(dt, "F32") && strcmp(dt, "BF16") && strcmp(dt, "F16")) {
            st = st_bad(&r, "tensor \"%s\" is %s; weights are F32, BF16 or F16", pr->name, dt);
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
            st = st_bad(&r, "tensor \"%s\" has shape [%s]; the model needs [%s]%s", pr->name, got,
                        want,
                        hint ? " (a PyTorch Linear weight is [out, in]: --transpose-linear)" : "");
            goto out;
        }
        free(vals), free(data);
        data = NULL;
        if (!(vals = malloc(pr->n * 4 + 4)) || !(data = malloc(end - b + 1))) {
            st = st_bad(&r, "out of memory");
            goto out;
        }
        if (st_read_span(f, data_at, b, end, data)) {
            st = st_bad(&r, "tensor \"%s\": read error", pr->name);
            goto out;
        }
        uint64_t rows = tr ? dims[0] : 1, cols = tr ? dims[1] : pr->n;
        for (uint64_t i = 0; i < pr->n; i++) {
            float v = st_value(dt, data, i);
            if (!isfinite(v)) {
                st = st_bad(&r, "tensor \"%s\" element %llu is %g", pr->name, (unsigned long long)i,
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
    free(vals), free(data);
    json_free(root);
    fclose(f);
    return st;
}
