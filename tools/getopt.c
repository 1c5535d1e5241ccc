/* getopt.c — option parsing the subcommands share: getopt_long with ampx's messages, the
 * option tables every command's options are read through, and the values they hold (an
 * integer in a range, a --backend-opt key=value). An unknown option names the closest known
 * one ("unknown option '--stpes' (did you mean '--steps'?)"); an option missing its value
 * says which. A long option is taken only as spelled in full: the prefix GNU getopt_long
 * would complete ("--step" for --steps) is refused with the options it could be, so a
 * typo never runs as a different option and a script keeps its meaning when an option is
 * added. It calls no other file of tools/ (tests/circles.sh): ampx.c and every subcommand
 * call it, never the other way. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/edit_distance.h"
#include "cli.h"

const char *cli_nearest(const char *word, const char *const *names, size_t n) {
    const char *best = NULL;
    size_t bd = 99, lw = strlen(word);
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, names[i]);
        if (d < bd) bd = d, best = names[i];
    }
    /* close enough to be a typo: a third of the word's letters at most */
    return best && bd <= (lw < 6 ? 2 : lw / 3) ? best : NULL;
}

/* "PROG: unknown option 'ARG'", then the known options WORD is a prefix of, or else the
 * closest one, as "(did you mean '--a' or '--b'?)". */
static void unknown_long(const char *prog, const char *arg, const struct option *lopts) {
    char word[64];
    const char *s = arg;
    while (*s == '-')
        s++;
    snprintf(word, sizeof word, "%.*s", (int)strcspn(s, "="), s);
    const char *names[128], *starting[128];
    size_t n = 0, n_starting = 0, lw = strlen(word);
    for (const struct option *o = lopts; o->name && n < 128; o++) {
        names[n++] = o->name;
        if (lw && !strncmp(o->name, word, lw)) starting[n_starting++] = o->name;
    }
    const char *near = n_starting ? NULL : cli_nearest(word, names, n);
    if (near) starting[n_starting++] = near;
    fprintf(stderr, "%s: unknown option '%s'", prog, arg);
    for (size_t i = 0; i < n_starting; i++)
        fprintf(stderr, "%s'--%s'",
                !i                   ? " (did you mean "
                : i + 1 < n_starting ? ", "
                                     : " or ",
                starting[i]);
    fprintf(stderr, "%s\n", n_starting ? "?)" : "");
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *lopts) {
    opterr    = 0;
    int which = -1;
    int c     = getopt_long(argc, argv, shortopts, lopts, &which);
    if (c != '?' && which >= 0) {
        /* a long option: the word it came from (the one before its value when that is a
         * separate word) must spell its name in full */
        const struct option *o = &lopts[which];
        int apart =
            o->has_arg == required_argument && optarg && optind >= 2 && optarg == argv[optind - 1];
        const char *typed = argv[optind - 1 - apart];
        size_t len        = strcspn(typed + 2, "=");
        if (len == strlen(o->name)) return c;
        unknown_long(argv[0], typed, lopts);
        optopt = 0;
        return '?';
    }
    if (c != '?') return c;
    const char *arg = argv[optind - 1 < argc ? optind - 1 : argc - 1];
    int spelled     = strncmp(arg, "--", 2) != 0; /* a long option named in full */
    for (const struct option *o = lopts; o->name && !spelled; o++)
        spelled =
            strcspn(arg + 2, "=") == strlen(o->name) && !strncmp(arg + 2, o->name, strlen(o->name));
    if (optopt && spelled) { /* a known option without its value, or an unknown short one */
        int long_known = 0, flag = 0;
        for (const struct option *o = lopts; o->name; o++) {
            long_known |= o->val == optopt && o->has_arg == required_argument;
            flag |= o->val == optopt && o->has_arg == no_argument;
        }
        const char *known = strchr(shortopts, optopt);
        if (flag && strncmp(arg, "--", 2) == 0) /* --help=1 */
            fprintf(stderr, "%s: option '%.*s' takes no value\n", argv[0], (int)strcspn(arg, "="),
                    arg);
        else if (long_known && strncmp(arg, "--", 2) == 0) /* as the user spelled it */
            fprintf(stderr, "%s: option '%.*s' needs a value\n", argv[0], (int)strcspn(arg, "="),
                    arg);
        else if (long_known || (known && known[1] == ':'))
            fprintf(stderr, "%s: option '-%c' needs a value\n", argv[0], optopt);
        else
            fprintf(stderr, "%s: unknown option '-%c'\n", argv[0], optopt);
        return '?';
    }
    /* an unknown or ambiguous long option: what it could be */
    unknown_long(argv[0], arg, lopts);
    return '?';
}

// ---------------------------------------------------------------------------------------
// Option tables

/* Stores one option's value; 0, or EXIT_USAGE after one line. */
static int store(const cli_opt *o, int argc, char **argv, void *opts) {
    char *field = (char *)opts + o->off;
    switch (o->kind) {
    case CLI_FLAG: *(int *)field = 1; return 0;
    case CLI_STRING: *(const char **)field = optarg; return 0;
    case CLI_INT: {
        char flag[72];
        snprintf(flag, sizeof flag, "--%s", o->name);
        return cli_parse_int(argv[0], flag, optarg, o->lo, o->hi, (int64_t *)field) ? EXIT_USAGE
                                                                                    : 0;
    }
    case CLI_BACKEND_OPT: {
        cli_backend_opts *b = (cli_backend_opts *)field;
        return cli_parse_backend_opt(optarg, b->v, &b->n) ? EXIT_USAGE : 0;
    }
    case CLI_SET: return cli_parse_set(argv[0], optarg, (cli_sets *)field) ? EXIT_USAGE : 0;
    case CLI_CALL:
    case CLI_CALL_OPT: return o->fn(opts, argc, argv, optarg) ? EXIT_USAGE : 0;
    case CLI_HELP: return CLI_HELP_ASKED;
    }
    return 0;
}

int cli_parse_opts(const cli_parser *p, int argc, char **argv, void *opts) {
    struct option lopts[64]; /* a table's first 63 options (the largest, train's, has 23) */
    size_t n = 0;
    for (const cli_opt *o = p->opts; o->name && n < 63; o++, n++) {
        int has_arg = o->kind == CLI_FLAG || o->kind == CLI_HELP ? no_argument
                      : o->kind == CLI_CALL_OPT                  ? optional_argument
                                                                 : required_argument;
        lopts[n]    = (struct option){o->name, has_arg, NULL, o->val};
    }
    lopts[n] = (struct option){0};
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, p->shortopts, lopts)) != -1) {
        const cli_opt *o = p->opts;
        while (o->name && o->val != c)
            o++;
        if (!o->name) return CLI_BAD_OPTION;
        if (o->group & p->refuse) {
            fprintf(stderr, "%s: option '--%s' is for %s\n", argv[0], o->name, p->refused_for);
            return EXIT_USAGE;
        }
        int rc = store(o, argc, argv, opts);
        if (rc) return rc;
    }
    return 0;
}

int cli_parse_or_usage(const cli_parser *p, int argc, char **argv, void *opts,
                       void (*usage)(FILE *)) {
    int rc = cli_parse_opts(p, argc, argv, opts);
    if (rc == CLI_HELP_ASKED) {
        usage(stdout);
        return 0;
    }
    if (rc == CLI_BAD_OPTION) cli_try_help(argv[0]);
    return rc ? EXIT_USAGE : -1;
}

void cli_try_help(const char *prog) {
    fprintf(stderr, "Try '%s --help' for more information.\n", prog);
}

// ---------------------------------------------------------------------------------------
// Values

int cli_parse_backend_opt(const char *arg, const char **opts, uint32_t *n) {
    if (!strchr(arg, '=') || arg[0] == '=') {
        fprintf(stderr, "ampx: --backend-opt '%s': expected key=value\n", arg);
        return -1;
    }
    if (*n >= MAX_BACKEND_OPTS) {
        fprintf(stderr, "ampx: too many --backend-opt (at most %d)\n", MAX_BACKEND_OPTS);
        return -1;
    }
    opts[(*n)++] = arg;
    return 0;
}

int cli_parse_set(const char *prog, const char *arg, cli_sets *s) {
    if (s->n == MAX_SETS) {
        fprintf(stderr, "%s: at most %d --set flags\n", prog, MAX_SETS);
        return -1;
    }
    if (!strchr(arg, '=') || arg[0] == '=') {
        fprintf(stderr, "%s: --set '%s': expected PATH=VALUE\n", prog, arg);
        return -1;
    }
    s->v[s->n++] = arg;
    return 0;
}

int cli_parse_int(const char *prog_name, const char *flag, const char *s, int64_t lo, int64_t hi,
                  int64_t *out) {
    const char *p = s + (*s == '-' && lo < 0);
    int ok        = *p >= '0' && *p <= '9';
    for (const char *q = p; ok && *q; q++)
        ok = *q >= '0' && *q <= '9';
    errno       = 0;
    long long v = ok ? strtoll(s, NULL, 10) : 0;
    if (!ok || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s': expected an integer in [%lld, %lld]\n", prog_name, flag, s,
                (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}
