/* step.c — a training step and the ring of step records. A step, on the device and in this
 * order, with no host wait:
 *   for each micro-batch: the forward nodes; the loss (its record into the ring, the
 *   prediction's gradient seeded with the loss scale); the backward nodes (parameter
 *   gradients accumulate in f32); then unscale_check (flags into the ring); sum_squares
 *   (into the ring, for clipping and the norm); the optimizer (skips itself on found_inf);
 *   scaler_update; the scalars block is copied into the ring. A backend with AMP_PASS (ABI
 *   1.4) does the monitor's grad_stats, unscale_check and sum_squares as that one op, with
 *   the same results.
 * The host reads the ring every K steps (the log interval, or the run's end): flush() turns
 * each slot into an ampx_step_record, runs the run-health verdicts over it and stops the run
 * on a scaler, skip or weights failure. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/trace.h"
#include "train/trainer.h"

/* A ring slot: the scalars block after the step, the squared gradient norm, the
 * micro-batches' losses (A f32), then the parameters' non-finite flags (n_params i32). */
#define SLOT_SCALARS 0
#define SLOT_GSQ 128
#define SLOT_LOSS 136

/* Weights made non-finite by an applied update: one sum of squares over the masters at each
 * log interval, read with the records (at this byte offset of eval_loss). */
#define WEIGHTS_SQ_OFFSET 32

ampx_status ring_setup(ampx_trainer *t) {
    t->ring.slot_bytes =
        (SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)t->n_params + PLAN_ALIGN - 1) / PLAN_ALIGN *
        PLAN_ALIGN;
    t->ring.t_last_flush = tr_now_ms();
    return tr_alloc_zero(t, t->ring.slot_bytes * (uint64_t)t->K, &t->ring.buf);
}

// ---------------------------------------------------------------------------------------
// A step

static ampx_status optimizer_step(ampx_trainer *t, ampx_tensor gsq) {
    const optimizer_config *o = &t->m->cfg.opt;
    ampx_tensor pt[TR_MAX_PARAMS], gt[TR_MAX_PARAMS], s1[TR_MAX_PARAMS], s2[TR_MAX_PARAMS],
        cp[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    float wd[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        /* this rank's shard under ZeRO-1 (a sharded master holds it alone, and the op writes
         * its shard of the copy, all-gathered after; an f32 master is all-gathered), else all */
        pt[i] = tr_tensor(p->master, p->mshard ? 0 : p->lo * 4, AMPX_F32);
        gt[i] = tr_tensor(p->grad, p->grad_off + p->lo * 4, AMPX_F32);
        s1[i] = tr_tensor(p->s1, 0, AMPX_F32);
        s2[i] = tr_tensor(p->s2, 0, AMPX_F32);
        cp[i] = p->copy_dtype != AMPX_F32 ? tr_tensor(p->copy, p->lo * 2, p->copy_dtype)
                                          : tr_tensor(NULL, 0, AMPX_BF16);
        ns[i] = p->shard;
        wd[i] = p->wd;
    }
    ampx_tensor_list params = {.count = (uint32_t)t->n_params, .tensors = pt, .n_elems = ns};
    uint64_t seed           = ampx_hash32(t->m->cfg.train.seed, (uint64_t)t->step) * 0x100000001ull;
    ampx_tensor sc          = tr_tensor(t->scalars, 0, AMPX_F32);
    if (o->kind == OPT_ADAMW) {
        ampx_adamw_args a = {.size            = sizeof a,
                             .beta1           = o->beta1,
                             .beta2           = o->beta2,
                             .eps             = o->eps,
                             .weight_decay    = o->weight_decay,
                             .max_grad_norm   = o->clip_grad_norm,
                             .wd              = wd,
                             .params          = params,
                             .grads           = gt,
                             .m               = s1,
                             .v               = s2,
                             .copies          = cp,
                             .grad_sq_sum     = gsq,
                             .scalars         = sc,
                             .stochastic_copy = (uint32_t)o->stochastic_rounding,
                             .seed            = seed};
        return tr_step_op(t, AMPX_OP_ADAMW, &a);
    }
    ampx_sgd_args a = {.size            = sizeof a,
                       .nesterov        = (uint32_t)o->nesterov,
                       .momentum        = o->momentum,
                       .dampening       = o->dampening,
                       .weight_decay    = o->weight_decay,
                       .max_grad_norm   = o->clip_grad_norm,
                       .wd              = wd,
                       .params          = params,
                       .grads           = gt,
                       .momentum_buf    = o->momentum != 0 ? s1 : NULL,
                       .copies          = cp,
                       .grad_sq_sum     = gsq,
                       .scalars         = sc,
                       .stochastic_copy = (uint32_t)o->stochastic_rounding,
                       .seed            = seed};
    return tr_step_op(t, AMPX_OP_SGD, &a);
}

/* After each node of a step: the monitor's scan, and the all-reduce buckets it completed. */
static ampx_status after_node(executor *x, int node, void *user) {
    ampx_trainer *t = user;
    ampx_status st  = t->mon.live        ? monitor_scan_node(x, node, t)
                      : t->mon.lean_live ? forensics_scan_node(x, node, t)
                                         : AMPX_OK;
    if (!st && t->dp.live) st = dp_after_node(&t->dp, node);
    return st;
}

/* The gradients' unscale and non-finite check (flags into the ring slot) and their square
 * sum (for clipping and the norm); a monitored step's parameter statistics too, in one
 * AMP_PASS when the backend has it (the statistics of the scaled gradients, as
 * monitor_param_stats takes them, then the unscale and check, then the square sum). */
static ampx_status amp_ops(ampx_trainer *t, uint64_t slot, int mon, ampx_tensor gsq) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list grads    = tr_grad_list(t, ts, ns);
    ampx_unscale_check_args u = {
        .size      = sizeof u,
        .flag_base = 0,
        .grads     = grads,
        .flags     = tr_tensor(t->ring.buf, slot + SLOT_LOSS + 4 * (uint64_t)t->A, AMPX_I32),
        .scalars   = tr_tensor(t->scalars, 0, AMPX_F32)};
    if (t->amp_fused) {
        ampx_amp_pass_args f = {.size      = sizeof f,
                                .flag_base = u.flag_base,
                                .grads     = grads,
                                .flags     = u.flags,
                                .scalars   = u.scalars,
                                .sq_sum    = gsq,
                                .target    = AMPX_F32};
        if (mon) monitor_amp_pass(t, &f);
        return tr_step_op(t, AMPX_OP_AMP_PASS, &f);
    }
    ampx_status st;
    if (mon && (st = monitor_param_stats(t, t->mon.buf, t->mon.slot_cur))) return st;
    ampx_sum_squares_args q = {.size = sizeof q, .x = grads, .out = gsq};
    if ((st = tr_step_op(t, AMPX_OP_UNSCALE_CHECK, &u))) return st;
    return tr_step_op(t, AMPX_OP_SUM_SQUARES, &q);
}

/* The micro-batches of a step, with the monitor's scan and the all-reduce's buckets after
 * each node when they are on. */
static ampx_status micro_batches(ampx_trainer *t, uint64_t slot, int mon, int lean, int dp) {
    ampx_status st   = AMPX_OK;
    t->mon.live      = mon;
    t->mon.lean_live = lean;
    t->x.after_node  = mon || lean || dp ? after_node : NULL;
    t->x.after_user  = t;
    for (int64_t a = 0; a < t->A; a++) {
        t->x.micro = (int)a;
        t->x.loss  = tr_tensor(t->ring.buf, slot + SLOT_LOSS + 4 * (uint64_t)a, AMPX_F32);
        t->dp.live = dp && a == t->A - 1; /* gradients are final in the last micro-batch */
        if ((st = inputs_select_micro(t, t->step * t->A + a)) || (st = tr_micro_batch(t))) break;
    }
    t->x.after_node  = NULL;
    t->dp.live       = 0;
    t->mon.lean_live = 0;
    return st;
}

/* ZeRO-1: each rank checked and squared its shard of the gradients alone. The non-finite
 * flags (found_inf and the per-parameter ones) become their largest over the ranks, the
 * square sum the sum of every rank's, so every rank takes the same skip and clip decision
 * and records the same norm (to rounding: the sum of per-shard sums is another summation
 * order than one sum over the whole gradient). */
static ampx_status zero_agree(ampx_trainer *t, uint64_t slot) {
    uint64_t n = 1 + (uint64_t)t->n_params, flags = slot + SLOT_LOSS + 4 * (uint64_t)t->A;
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

/* What follows the gradients: the AMP pass, the optimizer and the scaler's update. */
static ampx_status update_ops(ampx_trainer *t, uint64_t slot, int mon) {
    ampx_tensor gsq           = tr_tensor(t->ring.buf, slot + SLOT_GSQ, AMPX_F32);
    ampx_scaler_update_args v = {.size               = sizeof v,
                                 .scalars            = tr_tensor(t->scalars, 0, AMPX_F32),
                                 .growth_factor_f64  = t->m->cfg.scaler.growth_factor,
                                 .backoff_factor_f64 = t->m->cfg.scaler.backoff_factor};
    ampx_status st;
    if ((st = amp_ops(t, slot, mon, gsq)) || (t->zero && (st = zero_agree(t, slot))) ||
        (st = optimizer_step(t, gsq)))
        return st;
    /* the fp8 scales, before the scaler consumes found_inf (a skipped step moves none) */
    if (t->g.n_fp8 && (st = fp8_step_update(t))) return st;
    return tr_step_op(t, AMPX_OP_SCALER_UPDATE, &v);
}

static uint64_t next_slot(const ampx_trainer *t) {
    return (uint64_t)((t->step - t->ring.first) % t->K) * t->ring.slot_bytes;
}

ampx_status tr_step_begin(ampx_trainer *t) {
    t->x.training = 1;
    t->x.step     = (uint64_t)t->step;
    t->x.micro    = 0;
    t->x.loss     = tr_tensor(t->ring.buf, next_slot(t) + SLOT_LOSS, AMPX_F32);
    return inputs_select_micro(t, t->step * t->A);
}

ampx_status tr_step_update(ampx_trainer *t) {
    return update_ops(t, next_slot(t), 0);
}

/* ZeRO-1, after the update: every rank's shard of the working copies (the op wrote them
 * from its shard of the masters, to nearest) to every rank, or of the masters where the
 * parameter has no copy (f32: the forward reads the master). A skipped step changed no
 * shard, and the gather then moves the same bytes. */
static ampx_status zero_gather(ampx_trainer *t) {
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

static ampx_status step_ops(ampx_trainer *t) {
    ampx_status st;
    int64_t ring_at = (t->step - t->ring.first) % t->K;
    uint64_t slot   = (uint64_t)ring_at * t->ring.slot_bytes;
    int mon         = tr_monitored(t, t->step + 1);
    int lean        = !mon && t->mon.armed; /* the armed forensics' scan */
    int dp          = t->dp.world > 1;
    t->x.training   = 1;
    t->x.step       = (uint64_t)t->step;
    if (mon && (st = monitor_begin_step(t, ring_at))) return st;
    if (lean && (st = forensics_begin_step(t, ring_at))) return st;
    if (dp)
        dp_begin_step(&t->dp, t->step + 1, inject_grad_off(t),
                      trace_wants(t->timeline.trace, t->step + 1) ? t->timeline.trace : NULL);
    if ((st = micro_batches(t, slot, mon, lean, dp))) return st;
    /* the mean gradient of all ranks, before anything reads the gradients */
    if (dp && (st = dp_finish(&t->dp))) return st;
    if (!dp && t->step + 1 == t->inject.grad_step && (st = inject_grad(t))) return st;
    if ((st = update_ops(t, slot, mon)) || (t->zero && (st = zero_gather(t)))) return st;
    if (t->step + 1 == t->inject.update_step && (st = inject_update(t))) return st;
    st = tr_check(t,
                  t->ifc->buffer_copy(t->ctx, t->ring.buf, slot + SLOT_SCALARS, t->scalars, 0,
                                      sizeof(ampx_scalars)),
                  "buffer_copy");
    if (!st) t->step++;
    return st;
}

static ampx_status one_step(ampx_trainer *t) {
    uint64_t before = call_total(&t->call);
    ampx_status st;
    if (!trace_wants(t->timeline.trace, t->step + 1))
        st = step_ops(t);
    else if (!(st = timeline_begin(t)))
        st = timeline_end(t, step_ops(t), before);
    t->last_step_ops = call_total(&t->call) - before;
    return st;
}

// ---------------------------------------------------------------------------------------
// The ring, read at each log interval

/* The masters' sum of squares into eval_loss (WEIGHTS_SQ_OFFSET), read with the records. */
static ampx_status weights_check(ampx_trainer *t) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    for (int i = 0; i < t->n_params; i++) { /* ZeRO-1: this rank's shard of each */
        const param *p = &t->params[i];
        ts[i]          = tr_tensor(p->master, p->mshard ? 0 : p->lo * 4, AMPX_F32);
        ns[i]          = p->shard;
    }
    ampx_sum_squares_args q = {.size = sizeof q,
                               .x = {.count = (uint32_t)t->n_params, .tensors = ts, .n_elems = ns},
                               .out = tr_tensor(t->eval_loss, WEIGHTS_SQ_OFFSET, AMPX_F32)};
    t->call.phase           = CALL_AMP;
    t->call.dtype           = AMPX_F32;
    return call_op(&t->call, "health", AMPX_OP_SUM_SQUARES, &q);
}

/* The first parameter whose master holds a non-finite value (host scan, at a stop only). */
static const char *nonfinite_param(ampx_trainer *t) {
    for (int i = 0; i < t->n_params; i++) {
        uint64_t n = t->params[i].mshard ? t->params[i].shard : t->params[i].n;
        float *h   = malloc(n * 4 + 4);
        int bad    = 0;
        if (h && !tr_check(t, t->ifc->buffer_read(t->ctx, t->params[i].master, 0, h, n * 4),
                           "buffer_read"))
            for (uint64_t k = 0; k < n && !bad; k++)
                bad = !isfinite(h[k]);
        free(h);
        if (bad) return t->params[i].name;
    }
    return NULL;
}

/* Data-parallel runs: the records' losses become the mean over ranks (so every rank's run
 * health sees the same values), then the ranks' scalars blocks and weights are compared. */
static ampx_status dp_records(ampx_trainer *t, unsigned char *buf, int64_t n, float wsq) {
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
    if (!st) st = dp_check(&t->dp, &last, wsq, t->step, fp8, fp8_bytes);
    free(fp8);
    return st;
}

/* The names of the gradients a skipped step flagged, "a.grad, b.grad" (what fits). */
static void overflow_names(const ampx_trainer *t, const unsigned char *s, char *names, size_t cap) {
    names[0] = 0;
    for (int p = 0; p < t->n_params; p++) {
        int32_t flag;
        memcpy(&flag, s + SLOT_LOSS + 4 * (uint64_t)t->A + 4 * (uint64_t)p, 4);
        size_t len = strlen(names);
        if (flag && len + strlen(t->params[p].name) + 8 < cap)
            snprintf(names + len, cap - len, "%s%s.grad", len ? ", " : "", t->params[p].name);
    }
}

/* A run stopped by the scaler on the device (the scalars block's stop_reason). */
static ampx_status scaler_stop(ampx_trainer *t, const ampx_scalars *sc, int64_t step) {
    if (sc->stop_reason & AMPX_STOP_MIN_SCALE)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "step %lld: the loss scale reached min_scale %g and gradients still "
                       "overflow (on_min_scale = error): the model diverges, or the policy "
                       "needs more f32",
                       (long long)step, (double)sc->min_scale);
    return tr_fail(t, AMPX_ERR_INVALID,
                   "step %lld: more than %d consecutive steps skipped "
                   "(max_consecutive_skips): training does not recover",
                   (long long)step, sc->max_consecutive_skips);
}

/* Ring slot i of a flush (s, its bytes), as the record handed to record(), then the
 * run-health and scaler verdicts on it. */
static ampx_status slot_record(ampx_trainer *t, const unsigned char *s, int64_t i, double per,
                               float wsq, ampx_record_fn record, void *user, int *stop) {
    ampx_scalars sc;
    float gsq, loss = 0;
    memcpy(&sc, s + SLOT_SCALARS, sizeof sc);
    memcpy(&gsq, s + SLOT_GSQ, 4);
    double lsum = 0;
    for (int64_t a = 0; a < t->A; a++) {
        memcpy(&loss, s + SLOT_LOSS + 4 * a, 4);
        lsum += loss;
    }
    char names[2048] = "";
    if (sc.last_found_inf) overflow_names(t, s, names, sizeof names);
    ampx_step_record r   = {.step      = t->ring.first + i + 1,
                            .loss      = lsum / (double)t->A,
                            .grad_norm = sqrt((double)gsq),
                            .scale     = sc.scale,
                            .lr        = sc.lr,
                            .skipped   = sc.last_found_inf,
                            .time_ms   = per,
                            .overflow  = names};
    r.applied_steps      = sc.applied_steps;
    char health_msg[768] = "";
    int verdict          = health_step(&t->ring.health, &r, health_msg, sizeof health_msg);
    r.warning            = verdict == 1 ? health_msg : "";
    if (tr_monitored(t, r.step))
        monitor_read(t, i, &r);
    else {
        r.first_nonfinite = r.created_by = r.overflow_origin = "";
        r.headroom_tensor = r.headroom_warning = "";
        r.headroom_bits = r.headroom_underflow = NAN;
        if (t->mon.armed) forensics_record(t, i, &r);
    }
    if (t->g.n_fp8 && i == t->step - t->ring.first - 1) { /* the interval's last step */
        r.fp8   = t->fp8_rec;
        r.n_fp8 = t->g.n_fp8;
    }
    if (t->timeline.trace) {
        trace_counters(t->timeline.trace, r.step, r.loss, r.scale, r.grad_norm, r.lr,
                       sc.skipped_steps);
        for (int k = 0; k < r.n_fp8; k++)
            trace_fp8(t->timeline.trace, r.step, r.fp8[k].name, r.fp8[k].scale, r.fp8[k].amax);
    }
    if (record && record(user, &r)) *stop = 1;
    if (verdict == 2 && !*stop && isfinite(wsq)) {
        *stop = 2;
        return tr_fail(t, AMPX_ERR_INVALID, "%s", health_msg);
    }
    if (sc.stop_reason && !*stop && isfinite(wsq)) {
        *stop = 2;
        return scaler_stop(t, &sc, r.step);
    }
    return AMPX_OK;
}

/* Weights that became non-finite (or too large to square) in the steps just read. */
static ampx_status weights_stop(ampx_trainer *t) {
    const char *first = nonfinite_param(t);
    if (first)
        return tr_fail(t, AMPX_ERR_INVALID,
                       "steps %lld..%lld: the weights became non-finite (first: %s) in an "
                       "applied step: the update itself overflowed; lower the learning rate or "
                       "clip gradients (clip_grad_norm)",
                       (long long)t->ring.first + 1, (long long)t->step, first);
    /* finite, but so large that their sum of squares overflows f32 */
    return tr_fail(t, AMPX_ERR_INVALID,
                   "steps %lld..%lld: the weights grew beyond 1e19 (their sum of squares "
                   "overflows f32): the updates diverge; lower the learning rate or clip "
                   "gradients (clip_grad_norm)",
                   (long long)t->ring.first + 1, (long long)t->step);
}

/* Reads the records of the steps since the last flush and hands them to record(). */
static ampx_status flush(ampx_trainer *t, ampx_record_fn record, void *user, int *stop) {
    int64_t n = t->step - t->ring.first;
    if (n <= 0) return AMPX_OK;
    unsigned char *buf = malloc((size_t)(t->ring.slot_bytes * (uint64_t)n));
    if (!buf) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = tr_check(
        t, t->ifc->buffer_read(t->ctx, t->ring.buf, 0, buf, t->ring.slot_bytes * (uint64_t)n),
        "buffer_read");
    ampx_status wst = weights_check(t);
    if (!st) st = wst;
    float wsq = 0;
    if (!st)
        st = tr_check(t, t->ifc->buffer_read(t->ctx, t->eval_loss, WEIGHTS_SQ_OFFSET, &wsq, 4),
                      "buffer_read");
    /* ZeRO-1: sharded masters' squares are per rank; their sum is every rank's */
    if (!st && t->zero) st = dp_sum(&t->dp, &wsq, 1);
    if (!st && t->g.n_fp8) st = fp8_read_records(t, n);
    if (!st && t->dp.world > 1) st = dp_records(t, buf, n, wsq);
    int any_mon = 0, any_unmon = 0;
    for (int64_t i = 0; i < n; i++) {
        int mon = tr_monitored(t, t->ring.first + i + 1);
        any_mon |= mon, any_unmon |= !mon;
    }
    if (!st && any_mon)
        st = tr_check(t,
                      t->ifc->buffer_read(t->ctx, t->mon.buf, 0, t->mon.host,
                                          t->mon.slot_bytes * (uint64_t)n),
                      "buffer_read");
    if (!st && t->mon.armed && any_unmon) st = forensics_read_slots(t, n);
    double now = tr_now_ms(), per = (now - t->ring.t_last_flush) / (double)n;
    t->ring.t_last_flush = now;
    for (int64_t i = 0; !st && i < n; i++)
        st =
            slot_record(t, buf + (uint64_t)i * t->ring.slot_bytes, i, per, wsq, record, user, stop);
    free(buf);
    if (!st && *stop != 1 && !isfinite(wsq)) {
        *stop = 2;
        st    = weights_stop(t);
    }
    t->ring.first = t->step;
    return st;
}

ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record, void *user) {
    int stop             = 0;
    ampx_status st       = AMPX_OK;
    t->ring.first        = t->step;
    t->ring.t_last_flush = tr_now_ms();
    while (t->step < until && !stop) {
        if ((st = one_step(t))) return st;
        int halt = t->stop && *t->stop; /* a signal: this step is done, its records out */
        if (t->step - t->ring.first == t->K || t->step == until || halt)
            if ((st = flush(t, record, user, &stop))) return st;
        if (halt) break;
    }
    return st;
}

uint64_t ampx_trainer_ops_issued(const ampx_trainer *t) {
    return call_total(&t->call);
}

uint64_t ampx_trainer_last_step_ops(const ampx_trainer *t) {
    return t->last_step_ops;
}
