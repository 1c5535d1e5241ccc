/* caps.h — a backend's abilities as the passes take them (passes/caps.h), asked of its
 * supports() once, before the passes run. */
#ifndef AMPX_BACKEND_CAPS_H
#define AMPX_BACKEND_CAPS_H

#include "ampx/ampx.h"
#include "passes/caps.h"

void backend_pass_caps(const ampx_backend *be, pass_caps *c);

#endif
