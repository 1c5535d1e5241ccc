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

#include "exec/hooks.h"
#include "exec/step.h"
#include "exec/inputs.h"

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
// The scalars block of a fresh run

void init_scalars(const ampx_model *m, ampx_scalars *s) {
    const scaler_config *c    = &m->cfg.scaler;
    const optimizer_config *o = &m->cfg.opt;
    memset(s, 0, sizeof *s);
    s->scale                  = scaler_start_scale(c);
    s->hysteresis_left        = c->hysteresis;
    s->mode                   = c->mode;
    s->growth_factor          = (float)c->growth_factor;
    s->backoff_factor         = (float)c->backoff_factor;
    s->growth_interval        = c->growth_interval;
    s->hysteresis             = c->hysteresis;
    s->consecutive_hysteresis = c->consecutive_hysteresis;
    s->min_scale              = c->min_scale;
    s->max_scale              = c->max_scale;
    s->on_min_scale_error     = c->on_min_scale_error;
    s->max_consecutive_skips  = c->max_consecutive_skips;
    s->lr_schedule            = o->schedule;
    s->lr_base                = o->lr;
    s->lr_min                 = o->min_lr;
    s->warmup_steps           = o->warmup_steps;
    s->decay_steps            = o->decay_steps ? o->decay_steps : o->file_steps;
    s->lr                     = ampx_scheduled_lr(s, 0);
}

ampx_status ampx_trainer_scalars(ampx_trainer *t, ampx_scalars *out) {
    return tr_check(t, t->ifc->buffer_read(t->ctx, t->scalars, 0, out, sizeof *out), "buffer_read");
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

// ---------------------------------------------------------------------------------------
// The hooks at each point of a step

/* Runs callback `cb` of every hook of t that has it, in their order. */
#define EACH_HOOK(cb, ...)                                                                         \
    do {                                                                                           \
        for (int h_ = 0; h_ < t->n_hooks && !st; h_++)                                             \
            if (t->hooks[h_]->cb) st = t->hooks[h_]->cb(__VA_ARGS__);                              \
    } while (0)

static ampx_status hooks_after_node(executor *x, int node, void *user) {
    ampx_trainer *t = user;
    ampx_status st  = AMPX_OK;
    for (int h = 0; h < t->n_hooks && !st; h++)
        if (t->hooks_on_nodes >> h & 1) st = t->hooks[h]->after_node(t, x, node);
    return st;
}

/* The hooks' begin; which of them watch this step's nodes into t->hooks_on_nodes. */
static ampx_status hooks_begin(ampx_trainer *t, const step_view *s) {
    ampx_status st    = AMPX_OK;
    t->hooks_on_nodes = 0;
    for (int h = 0; h < t->n_hooks && !st; h++) {
        int on = 0;
        if (t->hooks[h]->begin) st = t->hooks[h]->begin(t, s, &on);
        if (on && t->hooks[h]->after_node) t->hooks_on_nodes |= 1u << h;
    }
    return st;
}

static ampx_status hooks_end(ampx_trainer *t, const step_view *s, ampx_status st) {
    for (int h = 0; h < t->n_hooks; h++)
        if (t->hooks[h]->end) st = t->hooks[h]->end(t, s, st);
    return st;
}

// ---------------------------------------------------------------------------------------
// A step

/* The gradients' unscale and non-finite check (flags into the ring slot) and their square
 * sum (for clipping and the norm), as one AMP_PASS when the backend has it. */
static ampx_status amp_ops(ampx_trainer *t, const step_view *s, ampx_tensor gsq) {
    ampx_tensor ts[TR_MAX_PARAMS];
    uint64_t ns[TR_MAX_PARAMS];
    ampx_tensor_list grads    = tr_grad_list(t, ts, ns);
    ampx_unscale_check_args u = {.size      = sizeof u,
                                 .flag_base = 0,
                                 .grads     = grads,
                                 .flags     = tr_tensor(t->ring.buf, slot_flags(t, s), AMPX_I32),
                                 .scalars   = tr_tensor(t->scalars, 0, AMPX_F32)};
    ampx_status st            = AMPX_OK;
    if (t->amp_fused) {
        ampx_amp_pass_args f = {.size      = sizeof f,
                                .flag_base = u.flag_base,
                                .grads     = grads,
                                .flags     = u.flags,
                                .scalars   = u.scalars,
                                .sq_sum    = gsq,
                                .target    = AMPX_F32};
        EACH_HOOK(before_amp, t, s, &f);
        return st ? st : tr_step_op(t, AMPX_OP_AMP_PASS, &f);
    }
    EACH_HOOK(before_amp, t, s, NULL);
    ampx_sum_squares_args q = {.size = sizeof q, .x = grads, .out = gsq};
    if (st || (st = tr_step_op(t, AMPX_OP_UNSCALE_CHECK, &u))) return st;
    return tr_step_op(t, AMPX_OP_SUM_SQUARES, &q);
}

/* The micro-batches of a step: forward and backward, each micro-batch's loss into the ring. */
static ampx_status micro_batches(ampx_trainer *t, const step_view *s) {
    ampx_status st  = AMPX_OK;
    t->x.after_node = t->hooks_on_nodes ? hooks_after_node : NULL;
    t->x.after_user = t;
    for (int64_t a = 0; a < t->A; a++) {
        t->x.micro = (int)a;
        t->x.loss  = tr_tensor(t->ring.buf, s->slot + SLOT_LOSS + 4 * (uint64_t)a, AMPX_F32);
        if ((st = inputs_select_micro(t, t->step * t->A + a)) || (st = tr_micro_batch(t))) break;
    }
    t->x.after_node = NULL;
    return st;
}

/* What follows the gradients: the AMP pass, the optimizer and the scaler's update. */
static ampx_status update_ops(ampx_trainer *t, const step_view *s) {
    ampx_tensor gsq           = tr_tensor(t->ring.buf, s->slot + SLOT_GSQ, AMPX_F32);
    ampx_scaler_update_args v = {.size               = sizeof v,
                                 .scalars            = tr_tensor(t->scalars, 0, AMPX_F32),
                                 .growth_factor_f64  = t->m->cfg.scaler.growth_factor,
                                 .backoff_factor_f64 = t->m->cfg.scaler.backoff_factor};
    ampx_status st            = amp_ops(t, s, gsq);
    EACH_HOOK(after_amp, t, s);
    if (st || (st = optimizer_step(t, gsq))) return st;
    EACH_HOOK(before_scaler, t, s);
    return st ? st : tr_step_op(t, AMPX_OP_SCALER_UPDATE, &v);
}

static step_view view_of(const ampx_trainer *t) {
    int64_t ring_at = (t->step - t->ring.first) % t->K;
    return (step_view){.ring_at = ring_at, .slot = (uint64_t)ring_at * t->ring.slot_bytes};
}

ampx_status tr_step_begin(ampx_trainer *t) {
    t->x.training = 1;
    t->x.step     = (uint64_t)t->step;
    t->x.micro    = 0;
    t->x.loss     = tr_tensor(t->ring.buf, view_of(t).slot + SLOT_LOSS, AMPX_F32);
    return inputs_select_micro(t, t->step * t->A);
}

ampx_status tr_step_update(ampx_trainer *t) {
    step_view s = view_of(t);
    return update_ops(t, &s);
}

/* One step: batch, forward and backward, AMP pass, optimizer, scaler; the hooks between. */
static ampx_status one_step(ampx_trainer *t) {
    step_view s    = view_of(t);
    s.ops_before   = call_total(&t->call);
    t->x.training  = 1;
    t->x.step      = (uint64_t)t->step;
    ampx_status st = hooks_begin(t, &s);
    if (!st) st = micro_batches(t, &s);
    EACH_HOOK(grads_ready, t, &s);
    if (!st) st = update_ops(t, &s);
    EACH_HOOK(after_update, t, &s);
    if (!st)
        st = tr_check(t,
                      t->ifc->buffer_copy(t->ctx, t->ring.buf, s.slot + SLOT_SCALARS, t->scalars, 0,
                                          sizeof(ampx_scalars)),
                      "buffer_copy");
    if (!st) t->step++;
    st               = hooks_end(t, &s, st);
    t->last_step_ops = call_total(&t->call) - s.ops_before;
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
    int verdict          = health_step(&t->ring.health, &r, ERR(health_msg, sizeof health_msg));
    r.warning            = verdict == 1 ? health_msg : "";
    r.first_nonfinite = r.created_by = r.overflow_origin = "";
    r.headroom_tensor = r.headroom_warning = "";
    r.headroom_bits = r.headroom_underflow = NAN;
    for (int h = 0; h < t->n_hooks; h++)
        if (t->hooks[h]->record) t->hooks[h]->record(t, i, &r);
    for (int h = 0; h < t->n_hooks; h++)
        if (t->hooks[h]->recorded) t->hooks[h]->recorded(t, &r, sc.skipped_steps);
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
    EACH_HOOK(read, t, buf, n, &wsq);
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

static ampx_status run_steps(ampx_trainer *t, int64_t until, ampx_record_fn record, void *user) {
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

ampx_status ampx_trainer_run(ampx_trainer *t, int64_t until, ampx_record_fn record, void *user) {
    int claimed = tr_claim(t);
    if (claimed < 0) return AMPX_ERR_BUSY;
    ampx_status st = run_steps(t, until, record, user);
    tr_release(t, claimed);
    return st;
}

int ampx_trainer_health_end(ampx_trainer *t, char *buf, size_t cap) {
    ampx_scalars sc;
    if (cap) buf[0] = 0;
    if (ampx_trainer_scalars(t, &sc)) return -1;
    const scaler_config *c = &t->m->cfg.scaler; /* min_scale bounds a dynamic scale only */
    return health_end(&t->ring.health, sc.scale,
                      c->mode == AMPX_SCALER_DYNAMIC ? (double)c->min_scale : 0, ERR(buf, cap));
}

uint64_t ampx_trainer_ops_issued(const ampx_trainer *t) {
    return call_total(&t->call);
}

uint64_t ampx_trainer_last_step_ops(const ampx_trainer *t) {
    return t->last_step_ops;
}
