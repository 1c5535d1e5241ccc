/* cli.h — what the subcommand files of the `ampx` command share. Each subcommand lives in
 * its own tools/<name>.c and is listed in tools/commands.c. */
#ifndef AMPX_TOOLS_CLI_H
#define AMPX_TOOLS_CLI_H

#include <stdint.h>

#include <stddef.h>

struct option;

/* Exit statuses of every command (docs: README.md, `ampx --help`, ampx.1). */
#define EXIT_FAILED 1 /* the work failed: bad input, a plugin, a failed case, a diverged run */
#define EXIT_USAGE 2  /* the command line is wrong */

/* getopt_long with ampx's messages (tools/getopt.c): an unknown option names the closest known
 * one, a missing value says so; returns '?' after printing for either. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *lopts);
/* The name among names[0..n) closest to word when it is close enough to be a typo, or NULL. */
const char *cli_nearest(const char *word, const char *const *names, size_t n);
#define MAX_BACKEND_OPTS 32

/* Appends a --backend-opt argument to opts after checking it is key=value; prints one line
 * and returns -1 when it is not or when there are too many. */
int cli_parse_backend_opt(const char *arg, const char **opts, uint32_t *n);
/* Parses a decimal integer in [lo, hi] (no sign unless lo < 0, no blanks, no hex, no
 * overflow); prints "PROG: FLAG 'S': expected an integer in [lo, hi]" and returns -1 when
 * it is not one. */
int cli_parse_int(const char *prog, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);

int cli_train(int argc, char **argv);    /* tools/train.c */
int cli_eval(int argc, char **argv);     /* tools/train.c */
int cli_policy(int argc, char **argv);   /* tools/train.c */
int cli_generate(int argc, char **argv); /* tools/generate.c */
int cli_export(int argc, char **argv);   /* tools/export.c */
int cli_predict(int argc, char **argv);  /* tools/predict.c */

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is "ampx NAME" */
} cli_command;

/* ampx bench (tools/bench.c). */
int cmd_bench(int argc, char **argv);
/* ampx trace-summary (tools/trace_summary.c). */
int cmd_trace_summary(int argc, char **argv);
/* ampx backends --options: the table of performance switches (tools/options.c). */
int cli_print_options(void);
/* ampx plot (tools/plot.c). */
int cmd_plot(int argc, char **argv);

/* The subcommands beyond backends and conformance, NULL-terminated (tools/commands.c). */
extern const cli_command cli_commands[];

#endif
