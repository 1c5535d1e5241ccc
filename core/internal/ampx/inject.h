/* inject.h — fault injection into a training run, for tests and `ampx train --inject-*`.
 * Not installed: these hooks are for the project's own tests and tools, not part of the
 * public API. libampx exports them (the test programs and the command line link them); the
 * build puts core/internal on the include path of tests/ and tools/ only. */
#ifndef AMPX_INJECT_H
#define AMPX_INJECT_H

#include <stdint.h>

#include "ampx/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets parameter `param`'s gradient to +inf on step `step` (1-based) before the unscale and
 * check: the scaler must then skip the step, as for a real overflow. */
AMPX_API void ampx_trainer_inject_nonfinite(ampx_trainer *t, int64_t step, int param);
/* Sets parameter `param`'s master to +inf after step `step`'s update, as an applied update
 * that overflowed would: the run-health check must stop the run. */
AMPX_API void ampx_trainer_inject_nonfinite_update(ampx_trainer *t, int64_t step, int param);

#ifdef __cplusplus
}
#endif

#endif
