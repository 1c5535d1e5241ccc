/* inject.c — fault injection for tests: a gradient made +inf before a step's unscale and
 * check (the scaler must skip the step and back off), or a master made +inf after a step's
 * update (the run-health check must stop the run). The hooks are declared in
 * core/internal/ampx/inject.h, not in the installed headers; the step applies them only on
 * the step they name, so a run without injection pays one comparison per step. */
#include <stdint.h>

#include "ampx/inject.h"
#include "exec/hooks.h"

#define F32_INF_BITS 0x7F800000u

void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int which) {
    t->inject.grad_step  = step;
    t->inject.grad_param = which < 0 || which >= t->n_params ? 0 : which;
}

void ampx_trainer_inject_nonfinite_update(ampx_trainer *t, int64_t step, int which) {
    t->inject.update_step  = step;
    t->inject.update_param = which < 0 || which >= t->n_params ? 0 : which;
}

static ampx_status inject_grad(ampx_trainer *t) {
    const param *p = &t->params[t->inject.grad_param];
    return tr_check(t, t->ifc->buffer_fill(t->ctx, p->grad, p->grad_off, 4, F32_INF_BITS, 4),
                    "buffer_fill");
}

uint64_t inject_grad_off(const ampx_trainer *t) {
    return t->step + 1 == t->inject.grad_step ? t->params[t->inject.grad_param].grad_off
                                              : UINT64_MAX;
}

static ampx_status inject_update(ampx_trainer *t) {
    const param *p = &t->params[t->inject.update_param];
    return tr_check(t, t->ifc->buffer_fill(t->ctx, p->master, 0, 4, F32_INF_BITS, 4),
                    "buffer_fill");
}

/* In a data-parallel run the all-reduce injects, at inject_grad_off (replicas.c). */
static ampx_status grads_ready(ampx_trainer *t, const step_view *s) {
    (void)s;
    return t->dp.world <= 1 && t->step + 1 == t->inject.grad_step ? inject_grad(t) : AMPX_OK;
}

static ampx_status after_update(ampx_trainer *t, const step_view *s) {
    (void)s;
    return t->step + 1 == t->inject.update_step ? inject_update(t) : AMPX_OK;
}

const step_hook inject_hook = {
    .name = "inject", .grads_ready = grads_ready, .after_update = after_update};
