/* trace_summary.c — `ampx trace-summary FILE.json`: where the time of a traced run went.
 * Reads a trace written by `ampx train --trace` (or any Chrome trace-event JSON whose op
 * events are named op.dtype) and prints the time per op, per dtype and per phase, and the
 * share of the steps' time spent in each precision. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_ROWS 256

typedef struct row {
    char name[64];
    long count;
    double us;
} row;

typedef struct table {
    row r[MAX_ROWS];
    int n;
} table;

static void add(table *t, const char *name, double us) {
    int i = 0;
    while (i < t->n && strcmp(t->r[i].name, name))
        i++;
    if (i == MAX_ROWS) return;
    if (i == t->n) {
        snprintf(t->r[i].name, sizeof t->r[i].name, "%s", name);
        t->n++;
    }
    t->r[i].count++;
    t->r[i].us += us;
}

static int by_time(const void *a, const void *b) {
    double x = ((const row *)a)->us, y = ((const row *)b)->us;
    return x < y ? 1 : x > y ? -1 : strcmp(((const row *)a)->name, ((const row *)b)->name);
}

static void print(const char *title, table *t, double total_us, const char *share_of) {
    qsort(t->r, (size_t)t->n, sizeof t->r[0], by_time);
    printf("\n%-26s %8s %12s %10s %8s\n", title, "count", "total ms", "mean us", share_of);
    for (int i = 0; i < t->n; i++)
        printf("%-26s %8ld %12.3f %10.2f %7.1f%%\n", t->r[i].name, t->r[i].count, t->r[i].us / 1e3,
               t->r[i].us / (double)t->r[i].count, total_us > 0 ? 100 * t->r[i].us / total_us : 0);
}

static char *slurp(const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t n = 0, size = 1 << 16;
    char *buf = malloc(size);
    for (size_t k; buf && (k = fread(buf + n, 1, size - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == size) {
            char *b = realloc(buf, size *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, cap, "%s: %s", path, bad ? "read error" : "out of memory");
        return NULL;
    }
    buf[n] = 0;
    return buf;
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
    char *text = slurp(argv[1], err, sizeof err);
    if (!text) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return 1;
    }
    cJSON *doc = cJSON_Parse(text);
    free(text);
    cJSON *events = doc ? cJSON_GetObjectItemCaseSensitive(doc, "traceEvents") : NULL;
    if (!cJSON_IsArray(events)) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], argv[1],
                doc ? "no \"traceEvents\" array: not a Chrome trace-event file"
                    : "not valid JSON (a run that was cut short leaves the file unfinished)");
        cJSON_Delete(doc);
        return 1;
    }
    static table ops, dtypes, phases;
    double op_us = 0, step_us = 0;
    long steps = 0, n_ops = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *ph   = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *cat  = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *dur  = cJSON_GetObjectItemCaseSensitive(e, "dur");
        const cJSON *tid  = cJSON_GetObjectItemCaseSensitive(e, "tid");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !cJSON_IsString(cat) ||
            !cJSON_IsString(name) || !cJSON_IsNumber(dur))
            continue;
        if (!strcmp(cat->valuestring, "step") && cJSON_IsNumber(tid) && tid->valueint == 2) {
            step_us += dur->valuedouble;
            steps++;
        }
        if (strcmp(cat->valuestring, "op")) continue;
        const char *dot = strrchr(name->valuestring, '.');
        add(&ops, name->valuestring, dur->valuedouble);
        add(&dtypes, dot ? dot + 1 : "?", dur->valuedouble);
        const cJSON *args  = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *phase = args ? cJSON_GetObjectItemCaseSensitive(args, "phase") : NULL;
        add(&phases, cJSON_IsString(phase) ? phase->valuestring : "?", dur->valuedouble);
        op_us += dur->valuedouble;
        n_ops++;
    }
    const cJSON *other  = cJSON_GetObjectItemCaseSensitive(doc, "otherData");
    const cJSON *timing = other ? cJSON_GetObjectItemCaseSensitive(other, "timing") : NULL;
    printf("%s: %ld steps, %.3f ms in steps, %.3f ms in %ld ops (%s timing)\n", argv[1], steps,
           step_us / 1e3, op_us / 1e3, n_ops,
           cJSON_IsString(timing) ? timing->valuestring : "unknown");
    print("op", &ops, op_us, "of ops");
    print("phase", &phases, op_us, "of ops");
    print("dtype", &dtypes, step_us, "of step");
    if (step_us > 0)
        printf("%-26s %8s %12.3f %10s %7.1f%%\n", "(between ops)", "", (step_us - op_us) / 1e3, "",
               100 * (step_us - op_us) / step_us);
    cJSON_Delete(doc);
    return 0;
}
