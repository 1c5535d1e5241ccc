/* cli.h — what the subcommand files of the `ampx` command share. Each subcommand lives in
 * its own tools/<name>.c and is listed in tools/commands.c. */
#ifndef AMPX_TOOLS_CLI_H
#define AMPX_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <stddef.h>

struct option;

/* Exit statuses of every command (docs: README.md, `ampx --help`, ampx.1). */
#define EXIT_FAILED 1 /* the work failed: bad input, a plugin, a failed case, a diverged run */
#define EXIT_USAGE 2  /* the command line is wrong */

/* The numeric AMPX_* environment variables (env.c): 0, or EXIT_USAGE after one line. */
int cli_check_env(const char *prog);

/* getopt_long with ampx's messages (tools/getopt.c): an unknown option names the closest known
 * one, a missing value says so; returns '?' after printing for either. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *lopts);
/* The name among names[0..n) closest to word when it is close enough to be a typo, or NULL. */
const char *cli_nearest(const char *word, const char *const *names, size_t n);
#define MAX_BACKEND_OPTS 32

/* The --backend-opt key=value flags of a command, in order. */
typedef struct cli_backend_opts {
    const char *v[MAX_BACKEND_OPTS];
    uint32_t n;
} cli_backend_opts;

/* The --set PATH=VALUE overrides of a model file, in order (train, eval, policy, predict,
 * diff). */
#define MAX_SETS 64
typedef struct cli_sets {
    const char *v[MAX_SETS];
    int n;
} cli_sets;

// ---------------------------------------------------------------------------------------
// Option tables (tools/getopt.c): a command lists its options once, with where each value
// goes, and cli_parse_opts builds getopt_long's table from it and stores the values into
// the command's options struct. Values that need more than a store get a function.

typedef enum cli_opt_kind {
    CLI_FLAG,        /* no value: the int at off becomes 1 */
    CLI_STRING,      /* the const char * at off points at the value */
    CLI_INT,         /* an integer in [lo, hi] (cli_parse_int) into the int64_t at off */
    CLI_BACKEND_OPT, /* key=value appended to the cli_backend_opts at off */
    CLI_SET,         /* PATH=VALUE appended to the cli_sets at off (cli_parse_set) */
    CLI_CALL,        /* fn parses the value */
    CLI_CALL_OPT,    /* fn parses the value, which may be absent (NULL) */
    CLI_HELP,        /* cli_parse_opts stops and returns CLI_HELP_ASKED */
} cli_opt_kind;

typedef struct cli_opt {
    const char *name;  /* the long option without its "--"; NULL ends the table */
    int val;           /* getopt's value: the short option too when shortopts lists it */
    cli_opt_kind kind; /* what its value is and where it goes */
    size_t off;        /* offsetof the field in the command's options struct */
    int64_t lo, hi;    /* CLI_INT: the accepted range */
    /* CLI_CALL, CLI_CALL_OPT: parses value into opts; 0, or -1 after one line. argv[0]
     * names the command; optind may be moved past a word the option takes. */
    int (*fn)(void *opts, int argc, char **argv, const char *value);
    unsigned group; /* bits matched against cli_parser.refuse */
} cli_opt;

typedef struct cli_parser {
    const char *shortopts;   /* getopt's short options ("h", "o:h") */
    const cli_opt *opts;     /* the table */
    unsigned refuse;         /* options of these groups are refused, with the message */
    const char *refused_for; /* "PROG: option '--x' is for REFUSED_FOR" */
} cli_parser;

/* Table entries: NAME is the long option without "--", VAL getopt's value, OFF the offsetof of
 * the field the value goes to, GROUP the entry's cli_parser.refuse bits. */
// clang-format off
#define CLI_OPT_FLAG(name, val, off, group)         {name, val, CLI_FLAG, off, 0, 0, NULL, group}
#define CLI_OPT_STRING(name, val, off, group)       {name, val, CLI_STRING, off, 0, 0, NULL, group}
#define CLI_OPT_INT(name, val, off, lo, hi, group)  {name, val, CLI_INT, off, lo, hi, NULL, group}
#define CLI_OPT_BACKEND(name, val, off)             {name, val, CLI_BACKEND_OPT, off, 0, 0, NULL, 0}
#define CLI_OPT_SET(name, val, off)                 {name, val, CLI_SET, off, 0, 0, NULL, 0}
#define CLI_OPT_CALL(name, val, fn, group)          {name, val, CLI_CALL, 0, 0, 0, fn, group}
#define CLI_OPT_CALL_OPT(name, val, fn, group)      {name, val, CLI_CALL_OPT, 0, 0, 0, fn, group}
#define CLI_OPT_HELP                                {"help", 'h', CLI_HELP, 0, 0, 0, NULL, 0}
#define CLI_OPT_END                                 {NULL, 0, CLI_FLAG, 0, 0, 0, NULL, 0}
// clang-format on

#define CLI_HELP_ASKED (-1) /* --help (or -h) was given */
#define CLI_BAD_OPTION (-2) /* an unknown option or one without its value (a line printed) */

/* Parses argv's options into opts (from optind 1; optind is then the first operand):
 * 0, CLI_HELP_ASKED, CLI_BAD_OPTION, or EXIT_USAGE after a bad or refused value (one line
 * printed). */
int cli_parse_opts(const cli_parser *p, int argc, char **argv, void *opts);
/* cli_parse_opts for a command with a usage(FILE *) text: -1 to go on; 0 after --help (the
 * usage on stdout); EXIT_USAGE after a bad option (its line, then cli_try_help's) or a bad
 * value. */
int cli_parse_or_usage(const cli_parser *p, int argc, char **argv, void *opts,
                       void (*usage)(FILE *));
/* "Try 'PROG --help' for more information." on stderr, after a command-line error (as the
 * GNU tools do, rather than the whole usage). */
void cli_try_help(const char *prog);

/* Appends a --backend-opt argument to opts after checking it is key=value; prints one line
 * and returns -1 when it is not or when there are too many (tools/getopt.c, as is
 * cli_parse_int). */
int cli_parse_backend_opt(const char *arg, const char **opts, uint32_t *n);
/* Appends a --set argument to s after checking it is PATH=VALUE; prints "PROG: --set 'ARG':
 * expected PATH=VALUE" (or that there are too many) and returns -1 when it is not. */
int cli_parse_set(const char *prog, const char *arg, cli_sets *s);
/* Parses a decimal integer in [lo, hi] (no sign unless lo < 0, no blanks, no hex, no
 * overflow); prints "PROG: FLAG 'S': expected an integer in [lo, hi]" and returns -1 when
 * it is not one. */
int cli_parse_int(const char *prog, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);

int cli_train(int argc, char **argv);         /* tools/train.c */
int cli_eval(int argc, char **argv);          /* tools/train.c */
int cli_policy(int argc, char **argv);        /* tools/train.c */
int cli_generate(int argc, char **argv);      /* tools/generate.c */
int cli_export(int argc, char **argv);        /* tools/export.c */
int cli_predict(int argc, char **argv);       /* tools/predict.c */
int cli_tokenize(int argc, char **argv);      /* tools/tokenize.c */
int cli_diff(int argc, char **argv);          /* tools/diff.c */
int cli_policy_search(int argc, char **argv); /* tools/policy_search.c: ampx policy --search */

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

/* What a function run by cli_run_child wrote, and how its process ended. */
typedef struct cli_child {
    char *out, *err; /* its stdout and stderr (NUL-terminated, or NULL when empty) */
    size_t n_out;
    int status;    /* waitpid's status */
    int timed_out; /* killed at the deadline */
} cli_child;
/* Runs fn(arg) in a child process, killed after timeout_s seconds; -1 when there is no child
 * (fork or pipe failed: the caller may run fn itself). Free r with cli_child_free. */
int cli_run_child(void (*fn)(void *), void *arg, int timeout_s, cli_child *r);
void cli_child_free(cli_child *r);
/* ampx plot (tools/plot.c). */
int cmd_plot(int argc, char **argv);

/* The subcommands beyond backends and conformance, NULL-terminated (tools/commands.c). */
extern const cli_command cli_commands[];

#endif
