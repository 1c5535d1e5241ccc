/* commands.c — the table of `ampx` subcommands that live in their own files. */
#include <stddef.h>

#include "cli.h"

const cli_command cli_commands[] = {
    {"train", cli_train}, {"eval", cli_eval}, {"policy", cli_policy},
    {"bench", cmd_bench}, {NULL, NULL},
};
