/* checks.c — argument checks shared by every op of the OpenCL backend: the dtype table that
 * supports() and the ops both read (so they cannot disagree), tensor bounds against the
 * buffer sizes kept on the host, the scalars block and tensor lists. The rules and messages
 * are the CPU backend's, so a caller sees the same error for the same mistake on both.
 */
#include <stdio.h>
#include <string.h>

#include "ocl.h"

#define CHECKS_FN(name) ocl_##name
#define CHECKS_TRY OCL_TRY
#include "../common/arg_checks.inc"
#undef CHECKS_FN
#undef CHECKS_TRY
