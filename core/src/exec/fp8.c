/* fp8.c — the trainer's fp8 scaling state (policy.fp8): one FP8 STATE block (backend.h) for
 * the graph's slots, three per fp8 product (x, W, the output's gradient), created with every
 * scale 1 and an empty history as Transformer Engine starts; the per-slot largest values of
 * their formats; and the step's FP8_SCALE_UPDATE after the optimizer, with every rank's amaxes
 * combined by a MAX all-reduce first so that all ranks keep the same scales. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "graph/ops.h"
#include "exec/hooks.h"
#include "exec/fp8.h"

uint64_t fp8_state_floats(const ampx_trainer *t) {
    return (2 + (uint64_t)t->fp8_history) * (uint64_t)t->g.n_fp8;
}

/* Each slot's name (its fp8 value's, the gradient's as the backward names it), format, the
 * largest value of that format (into fmax) and the elements one step quantizes into it
 * (every micro-batch). */
static ampx_status slot_table(ampx_trainer *t, float *fmax) {
    int n        = t->g.n_fp8;
    t->fp8_rec   = calloc((size_t)n, sizeof *t->fp8_rec);
    t->fp8_names = calloc((size_t)n, sizeof *t->fp8_names);
    t->fp8_elems = calloc((size_t)n, sizeof *t->fp8_elems);
    if (!t->fp8_rec || !t->fp8_names || !t->fp8_elems)
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    const g_graph *g = &t->g;
    for (int i = 0; i < g->n_forward; i++) {
        const g_node *nd = &g->nodes[i];
        if (nd->op != OP_MATMUL_FP8 && nd->op != OP_DENSE_FP8) continue;
        int vals[3] = {nd->out[1], nd->out[2], nd->out[0]};
        for (int k = 0; k < 3; k++) {
            int s            = nd->a.fp8_slot + k;
            const g_value *v = &g->values[vals[k]];
            if (k < 2)
                snprintf(t->fp8_names[s], sizeof t->fp8_names[s], "%.90s", v->name);
            else /* as the backward names it */
                snprintf(t->fp8_names[s], sizeof t->fp8_names[s], "%.80s.grad_q", nd->name);
            ampx_dtype dt   = k == 2 ? (ampx_dtype)nd->a.fp8_grad : AMPX_E4M3;
            t->fp8_elems[s] = g_numel(v, (uint64_t)t->B) * (uint64_t)t->A;
            t->fp8_rec[s] =
                (ampx_fp8_record){.name = t->fp8_names[s], .format = ampx_dtype_name(dt)};
            fmax[s] = ampx_fp8_max(dt);
        }
    }
    return AMPX_OK;
}

uint64_t fp8_layout(const ampx_trainer *t) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a over "name:format;" per slot, and H */
    for (int s = 0; s < t->g.n_fp8; s++) {
        char one[128];
        int k = snprintf(one, sizeof one, "%s:%s;", t->fp8_names[s], t->fp8_rec[s].format);
        for (int i = 0; i < k && i < (int)sizeof one; i++)
            h = (h ^ (unsigned char)one[i]) * 0x100000001B3ull;
    }
    return (h ^ (uint64_t)t->fp8_history) * 0x100000001B3ull;
}

static void fp8_free(ampx_trainer *t) {
    free(t->fp8_rec), free(t->fp8_names), free(t->fp8_elems);
    t->fp8_rec = NULL, t->fp8_names = NULL, t->fp8_elems = NULL;
}

static ampx_status fp8_read_records(ampx_trainer *t, int64_t steps) {
    uint64_t n = (uint64_t)t->g.n_fp8, H = (uint64_t)t->fp8_history;
    float *f       = malloc(2 * n * sizeof *f);
    int32_t *c     = malloc(2 * n * sizeof *c);
    ampx_status st = f && c ? AMPX_OK : tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    if (!st) st = tr_check(t, t->ifc->buffer_read(t->ctx, t->fp8, 0, f, n * 4), "buffer_read");
    if (!st && H > 1) /* the newest amaxes: rolled into the last row */
        st = tr_check(t, t->ifc->buffer_read(t->ctx, t->fp8, (2 + H - 1) * n * 4, f + n, n * 4),
                      "buffer_read");
    if (!st)
        st = tr_check(t, t->ifc->buffer_read(t->ctx, t->fp8_counts, 0, c, n * 8), "buffer_read");
    if (!st)
        st = tr_check(t, t->ifc->buffer_fill(t->ctx, t->fp8_counts, 0, n * 8, 0, 4), "buffer_fill");
    for (uint64_t i = 0; !st && i < n; i++) {
        double all              = (double)t->fp8_elems[i] * (double)(steps > 0 ? steps : 1);
        t->fp8_rec[i].scale     = f[i];
        t->fp8_rec[i].amax      = H > 1 ? f[n + i] : NAN;
        t->fp8_rec[i].saturated = all > 0 ? (double)(uint32_t)c[2 * i] / all : 0;
        t->fp8_rec[i].flushed   = all > 0 ? (double)(uint32_t)c[2 * i + 1] / all : 0;
    }
    free(f), free(c);
    return st;
}

ampx_status fp8_setup(ampx_trainer *t) {
    int n = t->g.n_fp8;
    if (n == 0) return AMPX_OK;
    t->fp8_history  = t->m->cfg.pol.fp8.history;
    uint64_t floats = fp8_state_floats(t);
    float *host     = calloc(floats, sizeof *host);
    float *fmax     = calloc((size_t)n, sizeof *fmax);
    ampx_status st  = host && fmax ? AMPX_OK : tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    if (!st) st = slot_table(t, fmax);
    if (!st) st = tr_alloc_zero(t, (uint64_t)n * 8, &t->fp8_counts);
    for (int i = 0; !st && i < n; i++)
        host[i] = host[n + i] = 1.0f; /* scale and scale_inv; the history starts at 0 */
    if (!st) st = tr_upload(t, &t->fp8, host, floats * sizeof *host);
    if (!st) st = tr_upload(t, &t->fp8_max, fmax, (uint64_t)n * sizeof *fmax);
    free(host), free(fmax);
    if (st) return st;
    t->x.fp8_state  = tr_tensor(t->fp8, 0, AMPX_F32);
    t->x.fp8_counts = tr_tensor(t->fp8_counts, 0, AMPX_I32);
    t->x.fp8_n      = (uint64_t)n;
    return AMPX_OK;
}

/* Every rank's current amaxes (row 0 of the history), their largest into every rank's. */
static ampx_status max_across_ranks(ampx_trainer *t) {
    uint64_t n = (uint64_t)t->g.n_fp8, at = 2 * n * 4;
    float *host = malloc(n * sizeof *host);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st =
        tr_check(t, t->ifc->buffer_read(t->ctx, t->fp8, at, host, n * 4), "buffer_read");
    if (!st && (st = dist_allreduce_max(t->dp.dist, host, n)))
        tr_fail(t, st, "fp8 amax all-reduce: %s", t->dp.dist->error);
    if (!st)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, t->fp8, at, host, n * 4), "buffer_write");
    free(host);
    return st;
}

static ampx_status fp8_step_update(ampx_trainer *t) {
    ampx_status st;
    /* AMPX_FP8_LOCAL_AMAX=1 (tests): no all-reduce, so that the ranks' scales part and the
     * agreement check at each log interval must say so */
    const char *local = getenv("AMPX_FP8_LOCAL_AMAX");
    if (t->dp.world > 1 && !(local && !strcmp(local, "1")) && (st = max_across_ranks(t))) return st;
    const fp8_config *f          = &t->m->cfg.pol.fp8;
    ampx_fp8_scale_update_args a = {.size              = sizeof a,
                                    .algo              = (uint32_t)f->algo,
                                    .n                 = (uint64_t)t->g.n_fp8,
                                    .history           = (uint32_t)t->fp8_history,
                                    .margin            = f->margin,
                                    .skip_on_found_inf = 1,
                                    .state             = tr_tensor(t->fp8, 0, AMPX_F32),
                                    .fp8_max           = tr_tensor(t->fp8_max, 0, AMPX_F32),
                                    .scalars           = tr_tensor(t->scalars, 0, AMPX_F32)};
    return tr_step_op(t, AMPX_OP_FP8_SCALE_UPDATE, &a);
}

// ---------------------------------------------------------------------------------------
// The hook: the scales move before the scaler consumes found_inf (a skipped step moves
// none); each flush reads the records, which the interval's last step carries

static ampx_status fp8_before_scaler(ampx_trainer *t, const step_view *s) {
    (void)s;
    return t->g.n_fp8 ? fp8_step_update(t) : AMPX_OK;
}

static ampx_status fp8_read(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq) {
    (void)buf, (void)wsq;
    return t->g.n_fp8 ? fp8_read_records(t, n) : AMPX_OK;
}

static void fp8_record(ampx_trainer *t, int64_t i, ampx_step_record *r) {
    if (!t->g.n_fp8 || i != t->step - t->ring.first - 1) return;
    r->fp8   = t->fp8_rec;
    r->n_fp8 = t->g.n_fp8;
}

const step_hook fp8_hook = {.name          = "fp8",
                            .before_scaler = fp8_before_scaler,
                            .read          = fp8_read,
                            .record        = fp8_record,
                            .release       = fp8_free};
