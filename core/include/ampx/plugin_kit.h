/* ampx/plugin_kit.h — what every backend plugin needs besides its kernels, header-only.
 *
 * A plugin includes backend.h, dtype.h and this header, and links nothing of the core. The
 * kit gives it:
 *   - ampx_kit: the host's log callback, the plugin's name and how to read a buffer's size,
 *     kept in the plugin's context (a member named `kit` makes AMPX_KIT(ctx) work);
 *   - ampx_kit_take_<op>(kit, args, &local): the op's args copied by their size (ABI rule 2:
 *     a field beyond the caller's size reads as 0) and every argument checked against the
 *     op's contract in backend.h: null tensors, dtypes (the table supports() answers from),
 *     shapes that overflow 64 bits, tensors that overrun their buffer, offsets that are not
 *     a multiple of the dtype size, unknown enums, the scalars block, tensor lists. On
 *     failure it logs one ERROR line ("gemm: lda 3 < k 4") and returns the status; a kernel
 *     that runs after an AMPX_OK may trust its arguments;
 *   - the buffer entry points' checks (ranges within the buffer, NULL host pointers, fill
 *     patterns), create()'s (host struct by size, ABI major, "key=value" options) and
 *     device_info()'s (the host's struct written only within its size);
 *   - through kernel_math.h (included here), the scalar numerics every backend computes the
 *     same way: the activations and their derivatives, one step of the loss scaler.
 * The in-tree backends (cpu, opencl, cuda) and docs/examples/plugin use it, so the same
 * mistake gets the same message on every backend, and tests/test_cpu_args.c pins the words.
 *
 * Everything is static inline: include it from as many files of the plugin as needed.
 *
 * This header is the one a plugin includes; the kit lives in ampx/kit/, one header per
 * concern: base.h (the kit, its log, args, dtypes, tensors), take_dense.h, take_train.h and
 * take_layout.h (the ops' takes), host.h (buffers, create, options, device_info) and
 * shell.h (the op prototypes and tables a plugin generates from its list of ops).
 */
#ifndef AMPX_PLUGIN_KIT_H
#define AMPX_PLUGIN_KIT_H

#include "backend.h"
#include "dtype.h"
#include "kernel_math.h"

#include "kit/base.h"
#include "kit/take_dense.h"
#include "kit/take_train.h"
#include "kit/take_layout.h"
#include "kit/host.h"
#include "kit/shell.h"

#endif /* AMPX_PLUGIN_KIT_H */
