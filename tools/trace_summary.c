/* trace_summary.c — `ampx trace-summary FILE.json`: where the time of a traced run went.
 * Reads a trace written by `ampx train --trace` (or any Chrome trace-event JSON whose op
 * events are named op.dtype) and prints the time per op, per dtype and per phase, and the
 * share of the steps' time spent in each precision. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"
#include "cli.h"
#include "trace_file.h"

static int by_time(const void *a, const void *b) {
    double x = ((const trace_row *)a)->us, y = ((const trace_row *)b)->us;
    return x < y   ? 1
           : x > y ? -1
                   : strcmp(((const trace_row *)a)->name, ((const trace_row *)b)->name);
}

static void print(const char *title, trace_table *t, double total_us, const char *share_of) {
    qsort(t->r, (size_t)t->n, sizeof t->r[0], by_time);
    printf("\n%-26s %8s %12s %10s %8s\n", title, "count", "total ms", "mean us", share_of);
    for (int i = 0; i < t->n; i++)
        printf("%-26s %8ld %12.3f %10.2f %7.1f%%\n", t->r[i].name, t->r[i].count, t->r[i].us / 1e3,
               t->r[i].us / (double)t->r[i].count, total_us > 0 ? 100 * t->r[i].us / total_us : 0);
}

int cmd_trace_summary(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ampx trace-summary FILE.json\n"
               "Time per op, per dtype and per phase of a trace written by ampx train --trace,\n"
               "and the share of the steps' time in each precision.\n");
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: ampx trace-summary FILE.json\n");
        return EXIT_USAGE;
    }
    char err[1200];
    size_t len;
    /* under the input rules: a FIFO or a device is refused without blocking, the size capped */
    char *text      = ampx_input_read(argv[1], 0, &len, err, sizeof err);
    trace_stats *st = text ? calloc(1, sizeof *st) : NULL;
    if (text && !st) snprintf(err, sizeof err, "%s: out of memory", argv[1]);
    int rc = !st || trace_parse(st, text, len, argv[1], err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        free(st);
        return 1;
    }
    printf("%s: %ld steps, %.3f ms in steps, %.3f ms in %ld ops (%s timing)\n", argv[1], st->steps,
           st->step_us / 1e3, st->op_us / 1e3, st->n_ops, st->timing);
    double op_us = st->op_us, step_us = st->step_us;
    print("op", &st->ops, op_us, "of ops");
    print("phase", &st->phases, op_us, "of ops");
    print("dtype", &st->dtypes, step_us, "of step");
    if (step_us > 0)
        printf("%-26s %8s %12.3f %10s %7.1f%%\n", "(between ops)", "", (step_us - op_us) / 1e3, "",
               100 * (step_us - op_us) / step_us);
    free(st);
    return 0;
}
