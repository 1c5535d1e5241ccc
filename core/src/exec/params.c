/* params.c — the parameters: their f32 masters drawn (or left for a file to fill), working
 * copies cast from them, optimizer state, ZeRO-1's shards and rank 0's staging of the whole;
 * reading and writing them (ampx_trainer_get, _set); rank 0's state to every rank
 * (ampx_trainer_sync) and every rank's shards to rank 0 (ampx_trainer_gather_state). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/fp8.h"
#include "exec/params.h"
#include "exec/step.h"

// ---------------------------------------------------------------------------------------
// Parameters, state and constants

static void init_values(float *v, uint64_t n, g_init kind, float std, uint64_t fan_in,
                        uint64_t fan_out, uint64_t seed) {
    double limit = kind == INIT_GLOROT_UNIFORM ? sqrt(6.0 / (double)(fan_in + fan_out))
                                               : sqrt(6.0 / (double)fan_in);
    for (uint64_t i = 0; i < n; i++) {
        double u = data_uniform(seed, i), z;
        switch (kind) {
        case INIT_GLOROT_UNIFORM:
        case INIT_HE_UNIFORM: v[i] = (float)((2 * u - 1) * limit); break;
        case INIT_HE_NORMAL:
        case INIT_NORMAL:
            z    = sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * data_uniform(seed + 7, i));
            v[i] = (float)(z * (kind == INIT_NORMAL ? std : sqrt(2.0 / (double)fan_in)));
            break;
        case INIT_ZEROS: v[i] = 0; break;
        case INIT_ONES: v[i] = 1; break;
        }
    }
}

static ampx_status write_values(ampx_trainer *t, ampx_buffer *b, const g_value *v, uint64_t n,
                                uint64_t seed) {
    float *host = malloc(n * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", v->name);
    if (v->role == ROLE_CONST)
        for (uint64_t i = 0; i < n; i++)
            host[i] = v->const_fill;
    else
        init_values(host, n, v->init, v->init_std, (uint64_t)v->fan_in, (uint64_t)v->fan_out, seed);
    ampx_status st = tr_check(t, t->ifc->buffer_write(t->ctx, b, 0, host, n * 4), "buffer_write");
    free(host);
    return st;
}

static ampx_status cast_copy(ampx_trainer *t, const param *p) {
    ampx_cast_args c = {.size = sizeof c,
                        .n    = p->n,
                        .src  = tr_tensor(p->master, 0, AMPX_F32),
                        .dst  = tr_tensor(p->copy, 0, p->copy_dtype)};
    return tr_step_op(t, AMPX_OP_CAST, &c);
}

/* ZeRO-1: this rank's shard of the parameter (dp_shard); without ZeRO all of it. A
 * parameter with a working copy keeps only its shard of the f32 master too. */
static void zero_shard(const ampx_trainer *t, param *p) {
    p->lo = 0, p->shard = p->n;
    if (t->zero) dp_shard(p->n, t->dp.rank, t->dp.world, &p->lo, &p->shard);
    p->mshard = t->zero && p->copy_dtype != AMPX_F32;
}

ampx_status tr_copy_from_host(ampx_trainer *t, const param *p, const float *full) {
    ampx_buffer *tmp = NULL;
    ampx_status st   = tr_alloc_zero(t, p->n * 4, &tmp);
    if (!st) st = tr_check(t, t->ifc->buffer_write(t->ctx, tmp, 0, full, p->n * 4), "buffer_write");
    ampx_cast_args c = {.size = sizeof c,
                        .n    = p->n,
                        .src  = tr_tensor(tmp, 0, AMPX_F32),
                        .dst  = tr_tensor(p->copy, 0, p->copy_dtype)};
    if (!st) st = tr_step_op(t, AMPX_OP_CAST, &c);
    if (tmp) t->ifc->buffer_free(t->ctx, tmp);
    return st;
}

static uint64_t param_seed(const ampx_trainer *t, int i) {
    return t->m->cfg.train.seed * 1000003ull + (uint64_t)i * 7919ull + 1;
}

/* ZeRO-1, a sharded master's first values: drawn whole (as without ZeRO), the copy cast from
 * them, this rank's shard kept (and on rank 0 the whole, staged: zero_stage). */
static ampx_status init_sharded(ampx_trainer *t, param *p, const g_value *val) {
    float *host = malloc(p->n * 4 + 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for %s", val->name);
    init_values(host, p->n, val->init, val->init_std, (uint64_t)val->fan_in, (uint64_t)val->fan_out,
                param_seed(t, t->n_params));
    ampx_status st = tr_copy_from_host(t, p, host);
    if (!st && p->shard)
        st = tr_check(t, t->ifc->buffer_write(t->ctx, p->master, 0, host + p->lo, p->shard * 4),
                      "buffer_write");
    free(host);
    return st;
}

static ampx_status add_param(ampx_trainer *t, int v) {
    const ampx_model *m = t->m;
    const g_value *val  = &t->g.values[v];
    if (t->n_params >= TR_MAX_PARAMS) return tr_fail(t, AMPX_ERR_INVALID, "too many parameters");
    param *p = &t->params[t->n_params];
    snprintf(p->name, sizeof p->name, "%s", val->name);
    p->value = v;
    p->n     = (uint64_t)g_elems(val);
    p->ndim  = val->ndim;
    for (int i = 0; i < val->ndim; i++)
        p->dims[i] = (uint64_t)val->dims[i];
    p->wd         = val->decay ? m->cfg.opt.weight_decay : 0;
    p->copy_dtype = val->copy >= 0 ? t->g.values[val->copy].dtype : AMPX_F32;
    zero_shard(t, p);
    uint64_t bytes = (p->shard ? p->shard : 1) * 4; /* the optimizer state: this rank's shard */
    ampx_status st;
    /* the gradient: grad_arena() */
    if ((st = tr_alloc_zero(t, p->mshard ? bytes : p->n * 4, &p->master))) return st;
    /* a sampler or predictor holds no optimizer state (nor gradients) */
    if (!t->inference && (m->cfg.opt.kind == OPT_ADAMW || m->cfg.opt.momentum != 0))
        if ((st = tr_alloc_zero(t, bytes, &p->s1))) return st;
    if (!t->inference && m->cfg.opt.kind == OPT_ADAMW && (st = tr_alloc_zero(t, bytes, &p->s2)))
        return st;
    if (p->copy_dtype != AMPX_F32 && (st = tr_alloc_zero(t, p->n * 2, &p->copy))) return st;
    /* a run that starts from a file draws nothing it would overwrite (the buffers are zero) */
    if (!m->cfg.train.skip_init && p->mshard && (st = init_sharded(t, p, val))) return st;
    if (!m->cfg.train.skip_init && !p->mshard) {
        if ((st = write_values(t, p->master, val, p->n, param_seed(t, t->n_params)))) return st;
        if (p->copy_dtype != AMPX_F32 && (st = cast_copy(t, p))) return st;
    }
    t->own[v] = p->master;
    if (val->copy >= 0) t->own[val->copy] = p->copy;
    t->n_params++;
    return AMPX_OK;
}

/* Parameters in the order the model declares them, state, constants. */
ampx_status params_create(ampx_trainer *t) {
    ampx_status st;
    for (int v = 0; v < t->g.n_values; v++) {
        const g_value *val = &t->g.values[v];
        if (val->role == ROLE_PARAM && val->master < 0) {
            if ((st = add_param(t, v))) return st;
        } else if (val->role == ROLE_STATE || val->role == ROLE_CONST) {
            uint64_t n = (uint64_t)g_elems(val);
            if ((st = tr_alloc_zero(t, n * 4, &t->own[v])) ||
                (st = write_values(t, t->own[v], val, n, 0)))
                return st;
            if (val->role == ROLE_STATE)
                t->state[t->n_state++] = (state_tensor){.value = v, .n = n, .buf = t->own[v]};
        }
    }
    return AMPX_OK;
}

/* ZeRO-1, rank 0: host memory for the whole optimizer state, where checkpoints are written
 * from and read into (ampx_trainer_gather_state, ampx_trainer_sync move the shards). */
ampx_status params_stage_zero(ampx_trainer *t) {
    if (!t->zero || t->dp.rank != 0) return AMPX_OK;
    uint64_t total = 1;
    for (int i = 0; i < t->n_params; i++)
        total += t->params[i].n *
                 (uint64_t)(!!t->params[i].s1 + !!t->params[i].s2 + t->params[i].mshard);
    if (!(t->zero_full = calloc(total, sizeof(float))))
        return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory for the optimizer state's staging");
    float *at = t->zero_full;
    for (int i = 0; i < t->n_params; i++) {
        param *p = &t->params[i];
        if (p->s1) p->s1_full = at, at += p->n;
        if (p->s2) p->s2_full = at, at += p->n;
        if (!p->mshard) continue;
        p->m_full          = at, at += p->n;
        const g_value *val = &t->g.values[p->value];
        if (!t->m->cfg.train.skip_init) /* the values init_sharded drew */
            init_values(p->m_full, p->n, val->init, val->init_std, (uint64_t)val->fan_in,
                        (uint64_t)val->fan_out, param_seed(t, i));
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Reading and writing them

static ampx_buffer *param_buf(ampx_trainer *t, int i, int what) {
    if (i < 0 || i >= t->n_params) return NULL;
    param *p = &t->params[i];
    return what == 0   ? p->master
           : what == 1 ? p->grad
           : what == 2 ? p->s1
           : what == 3 ? p->s2
                       : NULL;
}

ampx_status ampx_trainer_get(ampx_trainer *t, int i, int what, float *host) {
    ampx_buffer *b =
        t->zero && (what >= 2 || (what == 0 && t->params[i].mshard)) ? NULL : param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    uint64_t off = what == 1 ? t->params[i].grad_off : 0;
    return tr_check(t, t->ifc->buffer_read(t->ctx, b, off, host, t->params[i].n * 4),
                    "buffer_read");
}

ampx_status ampx_trainer_set(ampx_trainer *t, int i, int what, const float *host) {
    ampx_buffer *b =
        t->zero && (what >= 2 || (what == 0 && t->params[i].mshard)) ? NULL : param_buf(t, i, what);
    if (!b) return tr_fail(t, AMPX_ERR_INVALID, "no tensor %d/%d", i, what);
    t->kv.len = 0; /* new weights: nothing cached holds */
    param *p  = &t->params[i];
    ampx_status st =
        tr_check(t, t->ifc->buffer_write(t->ctx, b, what == 1 ? p->grad_off : 0, host, p->n * 4),
                 "buffer_write");
    if (!st && what == 0 && p->copy_dtype != AMPX_F32) st = cast_copy(t, p);
    return st;
}

// ---------------------------------------------------------------------------------------
// Data-parallel runs (the all-reduce itself is data_parallel.c's)

/* Rank 0's optimizer state tensor of n values to every rank: the whole of it, or under
 * ZeRO-1 each rank's shard of rank 0's staged copy (full). */
static ampx_status sync_state(ampx_trainer *t, ampx_buffer *b, float *full, uint64_t n,
                              float *host) {
    if (!t->zero) return dp_bcast_buffer(&t->dp, b, 0, n * 4, host);
    uint64_t lo, count;
    dp_shard(n, t->dp.rank, t->dp.world, &lo, &count);
    ampx_status st = dp_move_shards(&t->dp, full, host, n, 0);
    return st || !count
               ? st
               : tr_check(t, t->ifc->buffer_write(t->ctx, b, 0, host, count * 4), "buffer_write");
}

ampx_status ampx_trainer_gather_state(ampx_trainer *t) {
    if (!t->zero) return AMPX_OK;
    uint64_t most = 1;
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].shard > most) most = t->params[i].shard;
    float *host = malloc(most * 4);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p                = &t->params[i];
        ampx_buffer *const b[3] = {p->s1, p->s2, p->mshard ? p->master : NULL};
        float *const full[3]    = {p->s1_full, p->s2_full, p->m_full};
        for (int k = 0; k < 3 && !st; k++) {
            if (!b[k]) continue;
            if (p->shard)
                st = tr_check(t, t->ifc->buffer_read(t->ctx, b[k], 0, host, p->shard * 4),
                              "buffer_read");
            if (!st) st = dp_move_shards(&t->dp, full[k], host, p->n, 1);
        }
    }
    free(host);
    return st;
}

ampx_status ampx_trainer_sync(ampx_trainer *t) {
    if (t->dp.world < 2) return AMPX_OK;
    uint64_t most = sizeof(ampx_scalars);
    for (int i = 0; i < t->n_params; i++)
        if (t->params[i].n * 4 > most) most = t->params[i].n * 4;
    for (int i = 0; i < t->n_state; i++)
        if (t->state[i].n * 4 > most) most = t->state[i].n * 4;
    if (t->fp8 && fp8_state_floats(t) * 4 > most) most = fp8_state_floats(t) * 4;
    void *host = malloc(most);
    if (!host) return tr_fail(t, AMPX_ERR_NO_MEMORY, "out of memory");
    dp_state *dp   = &t->dp;
    ampx_status st = AMPX_OK;
    for (int i = 0; i < t->n_params && !st; i++) {
        param *p = &t->params[i];
        /* the working copy as bytes too: with stochastic rounding it is not a cast of the
         * master that each rank could redo */
        st = p->mshard ? sync_state(t, p->master, p->m_full, p->n, host)
                       : dp_bcast_buffer(dp, p->master, 0, p->n * 4, host);
        if (!st && p->copy) st = dp_bcast_buffer(dp, p->copy, 0, p->n * 2, host);
        if (!st && p->s1) st = sync_state(t, p->s1, p->s1_full, p->n, host);
        if (!st && p->s2) st = sync_state(t, p->s2, p->s2_full, p->n, host);
    }
    for (int i = 0; i < t->n_state && !st; i++)
        st = dp_bcast_buffer(dp, t->state[i].buf, 0, t->state[i].n * 4, host);
    if (!st) st = dp_bcast_buffer(dp, t->scalars, 0, sizeof(ampx_scalars), host);
    if (!st && t->fp8) st = dp_bcast_buffer(dp, t->fp8, 0, fp8_state_floats(t) * 4, host);
    free(host);
    int64_t step = t->step;
    if (!st && (st = dp_bcast_host(dp, &step, sizeof step))) return st;
    if (!st) t->step = t->ring.first = step;
    return st;
}

const char *ampx_trainer_dist_path(const ampx_trainer *t) {
    return dp_path_name(&t->dp);
}

void ampx_trainer_gradient_layout(const ampx_trainer *t, uint64_t *bytes, int *buckets) {
    *bytes   = t->grads.bytes;
    *buckets = t->grads.n_buckets;
}

double ampx_trainer_comm_ms(const ampx_trainer *t) {
    return t->dp.comm_ms;
}
