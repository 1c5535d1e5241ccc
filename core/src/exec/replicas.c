/* replicas.c — the hooks of data-parallel runs (data_parallel.c does the all-reduce itself,
 * handed what it needs). dp_hook: each bucket's all-reduce starts when the backward of the
 * last micro-batch has written it, the mean gradient is complete before anything reads the
 * gradients, and at each flush the losses become the mean over ranks and the ranks' scalars
 * blocks, weights and fp8 scales are compared. zero_hook (ZeRO-1): the ranks agree on the
 * non-finite flags and the norm of their shards before the optimizer, the updated shards go
 * to every rank after it, and the masters' sum of squares is summed over the ranks. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "obs/trace.h"
#include "exec/hooks.h"

// ---------------------------------------------------------------------------------------
// ZeRO-1

/* ZeRO-1: each rank checked and squared its shard of the gradients alone. The non-finite
 * flags (found_inf and the per-parameter ones) become their largest over the ranks, the
 * square sum the sum of every rank's, so every rank takes the same skip and clip decision
 * and records the same norm (to rounding: the sum of per-shard sums is another summation
 * order than one sum over the whole gradient). */
static ampx_status zero_agree(ampx_trainer *t, const step_view *s) {
    if (!t->zero) return AMPX_OK;
    uint64_t n = 1 + (uint64_t)t->n_params, flags = slot_flags(t, s), slot = s->slot;
    int32_t *i32   = malloc(4 * n);
    float *f32     = malloc(4 * n);
    float gsq      = 0;
    ampx_status st = i32 && f32 ? AMPX_OK : tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    uint64_t fi    = offsetof(ampx_scalars, found_inf);
    if (!st) st = tr_check(t, t->ifc->buffer_read(t->ctx, t->scalars, fi, i32, 4), "buffer_read");
    if (!st)
        st = tr_check(t, t->ifc->buffer_read(t->ctx, t->ring.buf, flags, i32 + 1, 4 * (n - 1)),
                      "buffer_read");
    if (!st)
        st = tr_check(t, t->ifc->buffer_read(t->ctx, t->ring.buf, slot + SLOT_GSQ, &gsq, 4),
                      "buffer_read");
    for (uint64_t i = 0; !st && i < n; i++)
        f32[i] = i32[i] ? 1.0f : 0.0f;
    if (!st) st = dp_agree(&t->dp, f32, n, &gsq);
    for (uint64_t i = 0; !st && i < n; i++)
        i32[i] = f32[i] != 0.0f;
    if (!st) st = tr_check(t, t->ifc->buffer_write(t->ctx, t->scalars, fi, i32, 4), "buffer_write");
    if (!st)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, t->ring.buf, flags, i32 + 1, 4 * (n - 1)),
                      "buffer_write");
    if (!st)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, t->ring.buf, slot + SLOT_GSQ, &gsq, 4),
                      "buffer_write");
    free(i32), free(f32);
    return st;
}

/* ZeRO-1, after the update: every rank's shard of the working copies (the op wrote them
 * from its shard of the masters, to nearest) to every rank, or of the masters where the
 * parameter has no copy (f32: the forward reads the master). A skipped step changed no
 * shard, and the gather then moves the same bytes. */
static ampx_status zero_gather(ampx_trainer *t, const step_view *s) {
    (void)s;
    if (!t->zero) return AMPX_OK;
    uint64_t most = 0;
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].n > most) most = t->params[i].n;
    float *host = malloc(most * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p       = &t->params[i];
        ampx_buffer *b = p->mshard ? p->copy : p->master;
        uint64_t bytes = p->n * (p->mshard ? 2 : 4);
        st             = tr_check(t, t->ifc->buffer_read(t->ctx, b, 0, host, bytes), "buffer_read");
        if (!st)
            st = p->mshard ? dp_gather_shards16(&t->dp, (uint16_t *)host, p->n)
                           : dp_gather_shards(&t->dp, host, p->n);
        if (!st) st = tr_check(t, t->ifc->buffer_write(t->ctx, b, 0, host, bytes), "buffer_write");
    }
    free(host);
    return st;
}

/* ZeRO-1: sharded masters' squares are per rank; their sum is every rank's. */
static ampx_status zero_read(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq) {
    (void)buf, (void)n;
    return t->zero ? dp_sum(&t->dp, wsq, 1) : AMPX_OK;
}

const step_hook zero_hook = {
    .name = "zero", .after_amp = zero_agree, .after_update = zero_gather, .read = zero_read};

// ---------------------------------------------------------------------------------------
// Data parallel

static ampx_status dp_begin(ampx_trainer *t, const step_view *s, int *on_nodes) {
    (void)s;
    if (t->dp.world <= 1) return AMPX_OK;
    *on_nodes = 1;
    dp_begin_step(&t->dp, t->step + 1, inject_grad_off(t),
                  trace_wants(t->timeline.trace, t->step + 1) ? t->timeline.trace : NULL);
    return AMPX_OK;
}

/* Gradients are final in the last micro-batch: its nodes complete the buckets. */
static ampx_status dp_node(ampx_trainer *t, executor *x, int node) {
    return x->micro == t->A - 1 ? dp_after_node(&t->dp, node) : AMPX_OK;
}

/* The mean gradient of all ranks, before anything reads the gradients. */
static ampx_status dp_grads_ready(ampx_trainer *t, const step_view *s) {
    (void)s;
    return t->dp.world > 1 ? dp_finish(&t->dp) : AMPX_OK;
}

/* Data-parallel runs: the records' losses become the mean over ranks (so every rank's run
 * health sees the same values), then the ranks' scalars blocks and weights are compared. */
static ampx_status dp_records(ampx_trainer *t, unsigned char *buf, int64_t n, float *wsq) {
    if (t->dp.world <= 1) return AMPX_OK;
    uint64_t k    = (uint64_t)(n * t->A);
    float *losses = malloc(sizeof(float) * k);
    if (!losses) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        memcpy(losses + i * t->A, buf + (uint64_t)i * t->ring.slot_bytes + SLOT_LOSS,
               sizeof(float) * (size_t)t->A);
    ampx_status st = dp_mean_losses(&t->dp, losses, k);
    for (int64_t i = 0; !st && i < n; i++)
        memcpy(buf + (uint64_t)i * t->ring.slot_bytes + SLOT_LOSS, losses + i * t->A,
               sizeof(float) * (size_t)t->A);
    free(losses);
    ampx_scalars last;
    memcpy(&last, buf + (uint64_t)(n - 1) * t->ring.slot_bytes + SLOT_SCALARS, sizeof last);
    /* the fp8 scales, which every rank must hold alike: the records flush just read */
    uint64_t fp8_bytes = 4 * (uint64_t)t->g.n_fp8;
    float *fp8         = fp8_bytes ? malloc(fp8_bytes) : NULL;
    if (!st && fp8_bytes && !fp8) st = tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    for (int s = 0; fp8 && s < t->g.n_fp8; s++)
        fp8[s] = t->fp8_rec[s].scale;
    if (!st) st = dp_check(&t->dp, &last, *wsq, t->step, fp8, fp8_bytes);
    free(fp8);
    return st;
}

const step_hook dp_hook = {.name        = "data parallel",
                           .begin       = dp_begin,
                           .after_node  = dp_node,
                           .grads_ready = dp_grads_ready,
                           .read        = dp_records};
