/* hooks.c — the hooks of a training step (hooks.h), in the order they run at each point:
 * placement "measured" first (it picks where the step's nodes run), then the timeline (it times the
 * step and sees every record last), the monitor and the armed forensics (their scans before a
 * bucket's all-reduce reads a gradient), ZeRO-1's agreement and gather, fp8's scales (whose records
 * data-parallel runs compare), the all-reduce, and fault injection last (after the all-reduce,
 * after the gather). */
#include "exec/hooks.h"

const step_hook *const step_hooks[] = {&placed_hook, &timeline_hook, &monitor_hook, &forensics_hook,
                                       &zero_hook,   &fp8_hook,      &dp_hook,      &inject_hook};
const int n_step_hooks              = (int)(sizeof step_hooks / sizeof step_hooks[0]);
