/* output.h — writing a file whole or not at all, and never over an input.
 *
 * Every file ampx writes (checkpoints, exports, predictions, token files, plots, traces) goes
 * through here, as SQLite and the safetensors reference writer do it: a temporary file is
 * created beside the target (".NAME.tmp.PID.XXXXXX", O_CREAT | O_EXCL through mkstemp, so a
 * planted file or symlink is never followed), written, fsynced, and renamed over the target
 * only once complete; the folder is then fsynced so the rename itself is durable. A failed or
 * interrupted write leaves the target as it was. Temporary files that a killed process left
 * behind are removed by the next write to the same target.
 *
 * Before a command writes anything it checks its outputs against its inputs (and against each
 * other): two paths name the same file when they resolve to the same device and inode
 * (symlinks and hard links included), or, for a file not there yet, to the same folder and
 * name. */
#ifndef AMPX_BASE_OUTPUT_H
#define AMPX_BASE_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "ampx/ampx.h"
#include "base/error.h"

/* Creates the temporary file beside path (O_EXCL, mode 0666 & ~umask), its name in tmp: its
 * fd, or -1 with "PATH: reason" in err. what names the file in messages ("a checkpoint"). An
 * existing target that is not a regular file is refused. */
int out_temp(const char *path, const char *what, char *tmp, size_t cap, ampx_err e);

/* fsyncs path's folder, so that a rename into it is durable. */
ampx_status out_sync_folder(const char *path, ampx_err e);

/* Whether paths a and b name the same file (see above); 0 when either is NULL. */
int out_same_file(const char *a, const char *b);

#endif
