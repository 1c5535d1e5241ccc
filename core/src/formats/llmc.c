/* llmc.c — llm.c's GPT-2 checkpoints, read and written (train_gpt2.py's write_model,
 * train_gpt2.c's gpt2_build_from_checkpoint, train_gpt2.cu's gpt2_write_to_checkpoint):
 *
 *   header   256 int32: magic 20240326, version (3: every tensor f32; 5: every tensor bf16),
 *            maxT, V, L, NH, C, Vp (the vocabulary padded, 50304 for GPT-2's 50257)
 *   tensors  wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C],
 *            qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w [L, C], ln2b [L, C],
 *            fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C],
 *            lnfb [C], little-endian, nothing after them
 *
 * llm.c stores a projection's weight as PyTorch's Linear does, [out, in]; ampx's dense weight
 * is [in, out]: each is transposed on the way in and out. The rows of wte past V are padding
 * llm.c never reads (its softmax runs over V): ignored on read, written as zeros.
 *
 * A model is matched to the format by its structure, not its names: its parameters in the
 * order the model declares them must be the embedding, the position table, then per block
 * the first layer norm, the QKV and output projections of attention, the second layer norm,
 * the two MLP projections (each weight with its bias), then the final layer norm; the head
 * tied to the embedding. Every header field is checked against that model, and the file's
 * size against the header, before a value is read. The file is read tensor by tensor into
 * one buffer of the largest tensor, never whole. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ampx/dtype.h"
#include "base/error.h"
#include "config/input.h"
#include "graph/ops.h"
#include "formats/llmc.h"
#include "formats/safetensors.h"
#include "exec/trainer.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_INTS 256
#define LLMC_KINDS 16
#define LLMC_PER_LAYER 12

// ---------------------------------------------------------------------------------------
// The model's parameters in llm.c's terms

/* What a parameter must be: read by op at input `slot`, of `ndim` dims (dims in units of C,
 * 0: other), transposed to and from the file. */
typedef struct llmc_role {
    const char *name; /* llm.c's name */
    int op, slot, ndim, c0, c1, transpose;
} llmc_role;

/* The twelve parameters of one block, in the model's order: llm.c kinds 2..13. */
static const llmc_role block_roles[LLMC_PER_LAYER] = {
    {"ln1w", OP_LAYERNORM, 1, 1, 1, 0, 0},  {"ln1b", OP_LAYERNORM, 2, 1, 1, 0, 0},
    {"qkvw", OP_MATMUL, 1, 2, 1, 3, 1},     {"qkvb", OP_BIAS, 1, 1, 3, 0, 0},
    {"attprojw", OP_MATMUL, 1, 2, 1, 1, 1}, {"attprojb", OP_BIAS, 1, 1, 1, 0, 0},
    {"ln2w", OP_LAYERNORM, 1, 1, 1, 0, 0},  {"ln2b", OP_LAYERNORM, 2, 1, 1, 0, 0},
    {"fcw", OP_MATMUL, 1, 2, 1, 4, 1},      {"fcb", OP_BIAS, 1, 1, 4, 0, 0},
    {"fcprojw", OP_MATMUL, 1, 2, 4, 1, 1},  {"fcprojb", OP_BIAS, 1, 1, 1, 0, 0},
};
static const llmc_role final_roles[2] = {{"lnfw", OP_LAYERNORM, 1, 1, 1, 0, 0},
                                         {"lnfb", OP_LAYERNORM, 2, 1, 1, 0, 0}};

/* Whether a forward node of op reads parameter v (its master or working copy) at slot. */
static int read_by(const g_graph *g, int v, int op, int slot) {
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *n = &g->nodes[i];
        /* a dense node (passes/fuse.c) is the matmul and its bias: in x, W, b */
        /* (and a matmul_fp8 or dense_fp8 node: the same inputs, fp8 products) */
        int nop   = n->op == OP_MATMUL_FP8 ? OP_MATMUL : n->op == OP_DENSE_FP8 ? OP_DENSE : n->op;
        int dense = nop == OP_DENSE && (op == OP_MATMUL || op == OP_BIAS);
        int s     = dense && op == OP_BIAS ? slot + 1 : slot;
        if ((nop != op && !dense) || s >= n->n_in || n->in[s] < 0) continue;
        if (op == OP_MATMUL && n->a.trans_b) continue;
        int w = n->in[s];
        if (g->values[w].master >= 0) w = g->values[w].master;
        if (w == v) return 1;
    }
    return 0;
}

static ampx_status bad(const char *path, ampx_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ampx_status bad(const char *path, ampx_err e, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(e, "%s: %s", path, msg);
    return AMPX_ERR_INVALID;
}

/* The model's shape in llm.c's terms, or a message saying why it has none. */
static ampx_status llmc_shape(const ampx_trainer *t, llmc_dims *d, const char *path, ampx_err e) {
    const g_graph *g  = &t->g;
    const char *model = t->m->cfg.name;
    memset(d, 0, sizeof *d);
    if (t->n_params < 4 || (t->n_params - 4) % LLMC_PER_LAYER)
        return bad(path, e,
                   "model \"%s\" has %d parameter tensors; an llm.c GPT-2 has 2 + 12 per block "
                   "+ 2",
                   model, t->n_params);
    const param *wte = &t->params[0], *wpe = &t->params[1];
    if (wte->ndim != 2 || !read_by(g, wte->value, OP_EMBED, 1))
        return bad(path, e, "model \"%s\": its first parameter \"%s\" is not an embedding", model,
                   wte->name);
    d->V = (int64_t)wte->dims[0], d->C = (int64_t)wte->dims[1];
    if (wpe->ndim != 2 || wpe->dims[1] != (uint64_t)d->C ||
        !(read_by(g, wpe->value, OP_BIAS, 1) || read_by(g, wpe->value, OP_POSITION, 1)))
        return bad(path, e,
                   "model \"%s\": its second parameter \"%s\" is not a position table [T, %lld]",
                   model, wpe->name, (long long)d->C);
    d->maxT = (int64_t)wpe->dims[0];
    d->L    = (t->n_params - 4) / LLMC_PER_LAYER;
    for (int p = 2; p < t->n_params; p++) {
        const param *pr = &t->params[p];
        int last        = p >= t->n_params - 2;
        const llmc_role *r =
            last ? &final_roles[p - (t->n_params - 2)] : &block_roles[(p - 2) % LLMC_PER_LAYER];
        uint64_t want[2] = {(uint64_t)(r->c0 * d->C), (uint64_t)(r->c1 * d->C)};
        int ok           = pr->ndim == r->ndim && pr->dims[0] == want[0] &&
                 (r->ndim == 1 || pr->dims[1] == want[1]) && read_by(g, pr->value, r->op, r->slot);
        if (!ok)
            return bad(path, e, "model \"%s\": parameter %d \"%s\" is not llm.c's %s (block %lld)",
                       model, p + 1, pr->name, r->name,
                       (long long)(last ? d->L : (p - 2) / LLMC_PER_LAYER));
    }
    /* the heads: every node splitting or merging heads agrees */
    for (int i = 0; i < g->n_forward; i++)
        if (g->nodes[i].a.heads > 0) {
            if (d->NH && d->NH != g->nodes[i].a.heads)
                return bad(path, e, "model \"%s\": its blocks have %lld and %d heads", model,
                           (long long)d->NH, g->nodes[i].a.heads);
            d->NH = g->nodes[i].a.heads;
        }
    if (!d->NH) return bad(path, e, "model \"%s\" has no attention heads", model);
    /* the head is the embedding's table read transposed: no parameter of its own */
    int tied = 0;
    for (int i = 0; i < g->n_forward && !tied; i++) {
        const g_node *n = &g->nodes[i];
        if ((n->op != OP_MATMUL && n->op != OP_DENSE && n->op != OP_MATMUL_FP8 &&
             n->op != OP_DENSE_FP8) ||
            !n->a.trans_b)
            continue;
        int w = n->in[1];
        if (g->values[w].master >= 0) w = g->values[w].master;
        tied = w == wte->value;
    }
    if (!tied) return bad(path, e, "model \"%s\": its head is not tied to the embedding", model);
    return AMPX_OK;
}

/* The tensor of llm.c kind k (0..15) for block l: its parameter index, its elements. */
static int kind_param(const ampx_trainer *t, int k, int l) {
    return k < 2 ? k : k < 14 ? 2 + l * LLMC_PER_LAYER + (k - 2) : t->n_params - 2 + (k - 14);
}

/* Blocks of kind k: L for the per-block kinds, else 1. */
static int kind_blocks(const llmc_dims *d, int k) {
    return k >= 2 && k < 14 ? (int)d->L : 1;
}

static const llmc_role *kind_role(int k) {
    return k < 2 ? NULL : k < 14 ? &block_roles[k - 2] : &final_roles[k - 14];
}

static const char *kind_name(int k) {
    const llmc_role *r = kind_role(k);
    return r ? r->name : k == 0 ? "wte" : "wpe";
}

/* Elements of the whole file's tensors as the header declares them (Vp rows of wte). */
static uint64_t file_elems(const ampx_trainer *t, const llmc_dims *d) {
    uint64_t n = (uint64_t)d->Vp * (uint64_t)d->C;
    for (int p = 1; p < t->n_params; p++)
        n += t->params[p].n;
    return n;
}

// ---------------------------------------------------------------------------------------
// Reading

/* Every header field against the model d; the file's size against the header. */
static ampx_status check_header(const ampx_trainer *t, const int32_t *h, uint64_t size,
                                llmc_dims *d, int *bf16, const char *path, ampx_err e) {
    if (h[0] != LLMC_MAGIC)
        return bad(path, e, "header[0] (magic) is %d, expected %d (an llm.c GPT-2 checkpoint)",
                   h[0], LLMC_MAGIC);
    if (h[1] != 3 && h[1] != 5)
        return bad(path, e, "header[1] (version) is %d, expected 3 (f32) or 5 (bf16)", h[1]);
    *bf16                            = h[1] == 5;
    static const char *const names[] = {"maxT", "vocab_size", "num_layers", "num_heads",
                                        "channels"};
    const int64_t want[]             = {d->maxT, d->V, d->L, d->NH, d->C};
    static const char *const what[]  = {"the rows of the model's position table",
                                        "the model's vocabulary", "the model's blocks",
                                        "the model's attention heads", "the model's width"};
    for (int i = 0; i < 5; i++)
        if (h[2 + i] != want[i])
            return bad(path, e, "header[%d] (%s) is %d, expected %lld (%s)%s", 2 + i, names[i],
                       h[2 + i], (long long)want[i], what[i],
                       i == 0 && h[2] > want[0]
                           ? "; a longer table: the position_embedding's \"max_positions\""
                           : "");
    if (h[7] < h[3] || h[7] > h[3] + (1 << 16))
        return bad(path, e,
                   "header[7] (padded_vocab_size) is %d, expected vocab_size %d or a padding of "
                   "it by at most 65536 rows",
                   h[7], h[3]);
    d->Vp          = h[7];
    uint64_t elems = file_elems(t, d), es = *bf16 ? 2 : 4;
    if (size != LLMC_HEADER_INTS * 4 + elems * es)
        return bad(path, e, "%llu bytes; its header declares %llu (1024 + %llu %s values)",
                   (unsigned long long)size,
                   (unsigned long long)(LLMC_HEADER_INTS * 4 + elems * es),
                   (unsigned long long)elems, *bf16 ? "bf16" : "f32");
    return AMPX_OK;
}

/* Reads n values (f32 or bf16) into v, widened; refuses a non-finite one. */
static ampx_status read_values(FILE *f, float *v, void *raw, uint64_t n, int bf16, const char *what,
                               const char *path, ampx_err e) {
    if (fread(bf16 ? raw : (void *)v, bf16 ? 2 : 4, n, f) != n)
        return bad(path, e, "cannot read %s: %s", what,
                   ferror(f) ? strerror(errno) : "the file ends early");
    for (uint64_t i = 0; i < n; i++) {
        if (bf16) v[i] = ampx_bf16_to_f32(((const uint16_t *)raw)[i]);
        if (!isfinite(v[i]))
            return bad(path, e, "%s element %llu is %g", what, (unsigned long long)i, (double)v[i]);
    }
    return AMPX_OK;
}

/* llm.c's [out, in] (rows x cols) into ampx's [in, out]. */
static void transpose(const float *src, float *dst, uint64_t rows, uint64_t cols) {
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

/* The largest parameter's elements. */
static uint64_t most_elems(const ampx_trainer *t) {
    uint64_t most = 1;
    for (int p = 0; p < t->n_params; p++)
        if (t->params[p].n > most) most = t->params[p].n;
    return most;
}

static ampx_status read_tensors(ampx_trainer *t, FILE *f, const llmc_dims *d, int bf16,
                                const char *path, ampx_err e) {
    uint64_t most = most_elems(t);
    float *v = malloc(most * 4), *tr = malloc(most * 4);
    void *raw      = bf16 ? malloc(most * 2) : NULL;
    ampx_status st = AMPX_OK;
    if (!v || !tr || (bf16 && !raw)) st = bad(path, e, "out of memory");
    for (int k = 0; k < LLMC_KINDS && !st; k++)
        for (int l = 0; l < kind_blocks(d, k) && !st; l++) {
            const param *pr    = &t->params[kind_param(t, k, l)];
            const llmc_role *r = kind_role(k);
            char what[G_NAME_MAX + 64];
            snprintf(what, sizeof what, "tensor %d (%s) for \"%s\"", k, kind_name(k), pr->name);
            if ((st = read_values(f, v, raw, pr->n, bf16, what, path, e))) break;
            /* wte's padding rows past V: llm.c never reads them */
            if (k == 0 && d->Vp > d->V &&
                fseek(f, (long)((uint64_t)(d->Vp - d->V) * (uint64_t)d->C * (bf16 ? 2 : 4)),
                      SEEK_CUR)) {
                st = bad(path, e, "cannot skip wte's padding: %s", strerror(errno));
                break;
            }
            const float *src = v;
            if (r && r->transpose) {
                transpose(v, tr, pr->dims[1], pr->dims[0]);
                src = tr;
            }
            if ((st = ampx_trainer_set(t, kind_param(t, k, l), 0, src)))
                err_set(e, "%s: %s", path, t->error);
        }
    free(v);
    free(tr);
    free(raw);
    return st;
}

int llmc_is_checkpoint(const char *path) {
    struct stat sb;
    /* a FIFO or a device is never opened here (input_open refuses it with its message) */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int32_t h[2] = {0, 0};
    int got      = fread(h, 4, 2, f) == 2;
    long size    = got && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    if (!got) return 0;
    /* llm.c's magic; or a file no safetensors reader takes (its length field, read as
     * little-endian u64, past the end) with llm.c's version word: a damaged llm.c file,
     * whose reader then names the field */
    uint64_t st_len = (uint64_t)(uint32_t)h[0] | (uint64_t)(uint32_t)h[1] << 32;
    return h[0] == LLMC_MAGIC ||
           (size >= LLMC_HEADER_INTS * 4 && st_len > (uint64_t)size && (h[1] == 3 || h[1] == 5));
}

ampx_status llmc_init_from(ampx_trainer *t, const char *path, ampx_err e) {
    llmc_dims d;
    ampx_status st = llmc_shape(t, &d, path, e);
    if (st) return st;
    uint64_t size;
    FILE *f = input_open(path, input_max_bytes(), &size, e);
    if (!f) return AMPX_ERR_INVALID;
    int32_t h[LLMC_HEADER_INTS];
    int bf16 = 0;
    if (size < sizeof h || fread(h, 4, LLMC_HEADER_INTS, f) != LLMC_HEADER_INTS)
        st = bad(path, e, "%llu bytes, shorter than llm.c's header of 1024",
                 (unsigned long long)size);
    if (!st) st = check_header(t, h, size, &d, &bf16, path, e);
    if (!st) st = read_tensors(t, f, &d, bf16, path, e);
    fclose(f);
    return st;
}

// ---------------------------------------------------------------------------------------
// Writing

/* Writes n values of v as f32 or bf16 (nearest even); 1 on a failed write. */
static int write_values(FILE *f, const float *v, uint16_t *raw, uint64_t n, int bf16) {
    if (!bf16) return fwrite(v, 4, n, f) != n;
    for (uint64_t i = 0; i < n; i++)
        raw[i] = ampx_f32_to_bf16(v[i]);
    return fwrite(raw, 2, n, f) != n;
}

static ampx_status write_tensors(ampx_trainer *t, FILE *f, const llmc_dims *d, int bf16,
                                 const char *path, ampx_err e) {
    uint64_t most = most_elems(t);
    float *v = malloc(most * 4), *tr = malloc(most * 4);
    uint16_t *raw  = malloc(most * 2);
    ampx_status st = AMPX_OK;
    int badw       = 0;
    if (!v || !tr || !raw) st = bad(path, e, "out of memory");
    for (int k = 0; k < LLMC_KINDS && !st && !badw; k++)
        for (int l = 0; l < kind_blocks(d, k) && !st && !badw; l++) {
            const param *pr    = &t->params[kind_param(t, k, l)];
            const llmc_role *r = kind_role(k);
            if ((st = ampx_trainer_get(t, kind_param(t, k, l), 0, v))) {
                err_set(e, "%s: %s", path, t->error);
                break;
            }
            const float *src = v;
            if (r && r->transpose) {
                transpose(v, tr, pr->dims[0], pr->dims[1]);
                src = tr;
            }
            badw = write_values(f, src, raw, pr->n, bf16);
            /* wte's padding rows: zeros, as train_gpt2.py's pad_vocab writes them */
            for (uint64_t i = 0; k == 0 && !badw && i < (uint64_t)(d->Vp - d->V); i++) {
                memset(tr, 0, (size_t)d->C * 4);
                badw = write_values(f, tr, raw, (uint64_t)d->C, bf16);
            }
        }
    free(v);
    free(tr);
    free(raw);
    if (badw) return bad(path, e, "%s", strerror(errno));
    return st;
}

ampx_status llmc_write(ampx_trainer *t, const char *path, ampx_dtype dtype, ampx_err e) {
    if (dtype != AMPX_F32 && dtype != AMPX_BF16)
        return bad(path, e, "llm.c checkpoints are f32 or bf16, not %s", ampx_dtype_name(dtype));
    llmc_dims d;
    ampx_status st = llmc_shape(t, &d, path, e);
    if (st) return st;
    d.Vp = (d.V + 127) / 128 * 128; /* train_gpt2.py's pad_vocab: a multiple of 128 */
    int32_t h[LLMC_HEADER_INTS] = {LLMC_MAGIC,      dtype == AMPX_BF16 ? 5 : 3,
                                   (int32_t)d.maxT, (int32_t)d.V,
                                   (int32_t)d.L,    (int32_t)d.NH,
                                   (int32_t)d.C,    (int32_t)d.Vp};
    char tmp[PATH_MAX + 64];
    int fd = st_create_temp(path, tmp, sizeof tmp, e);
    if (fd < 0) return AMPX_ERR_INVALID;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return bad(path, e, "%s", strerror(errno));
    }
    if (fwrite(h, 4, LLMC_HEADER_INTS, f) != LLMC_HEADER_INTS)
        st = bad(path, e, "%s", strerror(errno));
    if (!st) st = write_tensors(t, f, &d, dtype == AMPX_BF16, path, e);
    if (!st && (fflush(f) != 0 || fsync(fileno(f)) != 0)) st = bad(path, e, "%s", strerror(errno));
    if (fclose(f) != 0 && !st) st = bad(path, e, "%s", strerror(errno));
    if (!st && rename(tmp, path) != 0) st = bad(path, e, "%s", strerror(errno));
    if (st) unlink(tmp);
    return st;
}

ampx_status ampx_trainer_export_llmc(ampx_trainer *t, const char *path, ampx_dtype dtype, char *err,
                                     size_t cap) {
    return llmc_write(t, path, dtype, ERR(err, cap));
}
