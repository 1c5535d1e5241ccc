/* input.h — reading the files ampx is given (models, policies, data, checkpoints).
 *
 * Every file ampx reads is untrusted input. Only regular files are read (a FIFO, a device
 * such as /dev/zero or a directory is refused with one line), and no file larger than the
 * input cap: 1 GiB by default (16 MiB for JSON), raised or lowered by ampx_set_max_input_bytes() or
 * the environment variable AMPX_MAX_INPUT_BYTES (the command line's --max-input-bytes). */
#ifndef AMPX_INPUT_H
#define AMPX_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

#define INPUT_DEFAULT_MAX_BYTES (1ull << 30)

/* The cap in force: ampx_set_max_input_bytes(), else $AMPX_MAX_INPUT_BYTES, else the default. */
uint64_t input_max_bytes(void);

/* Whether the cap was set (by the API or the environment); JSON files have a lower default. */
int input_max_is_set(void);

/* Opens path for reading if it is a regular file no larger than max bytes; its size in *size.
 * On failure NULL and "PATH: reason" in err. */
FILE *input_open(const char *path, uint64_t max, uint64_t *size, ampx_err e);

/* Reads all of a regular file of at most max bytes; the buffer has a NUL after the last byte
 * (free() it). On failure NULL and "PATH: reason" in err. */
char *input_read(const char *path, uint64_t max, size_t *len, ampx_err e);

#endif
