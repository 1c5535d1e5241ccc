/* embedding.c — EMBEDDING_FWD (row gather) and EMBEDDING_BWD (scatter-add into f32).
 *
 * Forward converts each gathered row from the table's dtype to y's (exact when widening,
 * round to nearest even when narrowing); an id outside [0, vocab) gives a zero row.
 * Backward adds dy rows into the f32 dtable; ids repeat, so to stay race-free and
 * deterministic each thread owns a block of columns and walks all ids in order (the sum for
 * a repeated id is then formed in the same order as a sequential loop).
 */
#include <string.h>

#include "cpu.h"

#define EMB_COLS 1024

typedef struct emb_job {
    const void *table; /* fwd: table; bwd: dtable (f32) */
    const int32_t *ids;
    void *y; /* fwd: y; bwd: dy */
    ampx_dtype tdt, ydt;
    uint64_t n, vocab, dim;
} emb_job;

/* Takes and checks the args of either direction and fills j; *ny is the element count of
 * y (dy). The tensors are named for the direction: table and y forward, dtable and dy
 * backward, where dtable is f32. */
static ampx_status emb_prepare(ampx_context *ctx, const ampx_embedding_args *args, int bwd,
                               emb_job *j, uint64_t *ny) {
    ampx_embedding_args a;
    CPU_TRY(ampx_kit_take_embedding(AMPX_KIT(ctx), args, bwd, &a));
    *ny = a.n * a.dim;
    *j  = (emb_job){cpu_ptr(&a.table_or_dtable),
                    cpu_ptr(&a.ids),
                    cpu_ptr(&a.y_or_dy),
                   bwd ? AMPX_F32 : a.table_or_dtable.dtype,
                    a.y_or_dy.dtype,
                    a.n,
                    a.vocab,
                    a.dim};
    return AMPX_OK;
}

static void emb_fwd_rows(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const emb_job *j = arg;
    uint64_t rpi     = cpu_rows_per_item(j->dim);
    float t[EMB_COLS];
    for (uint64_t i = item * rpi; i < j->n && i < (item + 1) * rpi; i++) {
        int32_t id = j->ids[i];
        int ok     = id >= 0 && (uint64_t)id < j->vocab;
        for (uint64_t c0 = 0; c0 < j->dim; c0 += EMB_COLS) {
            uint64_t nc = j->dim - c0 < EMB_COLS ? j->dim - c0 : EMB_COLS;
            if (ok)
                cpu_load_f32(t, j->table, j->tdt, (uint64_t)id * j->dim + c0, nc);
            else
                memset(t, 0, (size_t)nc * sizeof(float));
            cpu_store_f32(j->y, j->ydt, i * j->dim + c0, t, nc);
        }
    }
}

ampx_status cpu_embedding_fwd(ampx_context *ctx, const ampx_embedding_args *args) {
    emb_job j;
    uint64_t ny = 0;
    CPU_TRY(emb_prepare(ctx, args, 0, &j, &ny));
    if (ny == 0) return AMPX_OK;
    cpu_run_rows(ctx, j.n, j.dim, emb_fwd_rows, &j);
    return AMPX_OK;
}

static void emb_bwd_cols(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const emb_job *j = arg;
    float *table     = (float *)j->table;
    uint64_t c0      = item * EMB_COLS;
    uint64_t nc      = j->dim - c0 < EMB_COLS ? j->dim - c0 : EMB_COLS;
    float t[EMB_COLS];
    for (uint64_t i = 0; i < j->n; i++) {
        int32_t id = j->ids[i];
        if (id < 0 || (uint64_t)id >= j->vocab) continue; /* out-of-range ids are skipped */
        cpu_load_f32(t, j->y, j->ydt, i * j->dim + c0, nc);
        float *row = table + (uint64_t)id * j->dim + c0;
        for (uint64_t c = 0; c < nc; c++)
            row[c] += t[c];
    }
}

ampx_status cpu_embedding_bwd(ampx_context *ctx, const ampx_embedding_args *args) {
    emb_job j;
    uint64_t ny = 0;
    CPU_TRY(emb_prepare(ctx, args, 1, &j, &ny));
    if (ny == 0) return AMPX_OK;
    cpu_run(ctx, ny, cpu_div_up(j.dim, EMB_COLS), emb_bwd_cols, &j);
    return AMPX_OK;
}
