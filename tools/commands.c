/* commands.c — the table of `ampx` subcommands that live in their own files. */
#include <stddef.h>

#include "cli.h"

// clang-format off
const cli_command cli_commands[] = {
    {"train",  cli_train},  /* tools/train.c */
    {"eval",   cli_eval},   /* tools/train.c */
    {"policy", cli_policy}, /* tools/train.c */
    {"generate", cli_generate}, /* tools/generate.c */
    {"export", cli_export},     /* tools/export.c */
    {"predict", cli_predict},   /* tools/predict.c */
    {"diff", cli_diff},         /* tools/diff.c */
    {"tokenize", cli_tokenize}, /* tools/tokenize.c */
    {"bench",  cmd_bench},  /* tools/bench.c */
    {"trace-summary", cmd_trace_summary}, /* tools/trace_summary.c */
    {"plot",   cmd_plot},   /* tools/plot.c */
    {NULL, NULL},
};
// clang-format on
