/* trace_file.c — reading a Chrome trace-event file of a run (trace_file.h). */
#include "trace_file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static void add(trace_table *t, const char *name, double us) {
    int i = 0;
    while (i < t->n && strncmp(t->r[i].name, name, sizeof t->r[i].name - 1))
        i++;
    if (i == TRACE_MAX_ROWS) return;
    if (i == t->n) {
        snprintf(t->r[i].name, sizeof t->r[i].name, "%s", name);
        t->n++;
    }
    t->r[i].count++;
    t->r[i].us += us;
}

/* One event: a step on the step track, or an op with its dtype and phase. */
static void add_event(trace_stats *s, const cJSON *e) {
    const cJSON *ph   = cJSON_GetObjectItemCaseSensitive(e, "ph");
    const cJSON *cat  = cJSON_GetObjectItemCaseSensitive(e, "cat");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *dur  = cJSON_GetObjectItemCaseSensitive(e, "dur");
    const cJSON *tid  = cJSON_GetObjectItemCaseSensitive(e, "tid");
    if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !cJSON_IsString(cat) ||
        !cJSON_IsString(name) || !cJSON_IsNumber(dur))
        return;
    if (!strcmp(cat->valuestring, "step") && cJSON_IsNumber(tid) && tid->valuedouble == 2) {
        s->step_us += dur->valuedouble;
        s->steps++;
    }
    if (strcmp(cat->valuestring, "op")) return;
    const char *dot = strrchr(name->valuestring, '.');
    add(&s->ops, name->valuestring, dur->valuedouble);
    add(&s->dtypes, dot ? dot + 1 : "?", dur->valuedouble);
    const cJSON *args  = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *phase = args ? cJSON_GetObjectItemCaseSensitive(args, "phase") : NULL;
    add(&s->phases, cJSON_IsString(phase) ? phase->valuestring : "?", dur->valuedouble);
    s->op_us += dur->valuedouble;
    s->n_ops++;
}

int trace_parse(trace_stats *s, const char *text, size_t len, const char *name, char *err,
                size_t cap) {
    cJSON *doc          = cJSON_ParseWithLength(text, len);
    const cJSON *events = doc ? cJSON_GetObjectItemCaseSensitive(doc, "traceEvents") : NULL;
    if (!cJSON_IsArray(events)) {
        snprintf(err, cap, "%s: %s", name,
                 doc ? "no \"traceEvents\" array: not a Chrome trace-event file"
                     : "not valid JSON (a run that was cut short leaves the file unfinished)");
        cJSON_Delete(doc);
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, events) add_event(s, e);
    const cJSON *other  = cJSON_GetObjectItemCaseSensitive(doc, "otherData");
    const cJSON *timing = other ? cJSON_GetObjectItemCaseSensitive(other, "timing") : NULL;
    snprintf(s->timing, sizeof s->timing, "%s",
             cJSON_IsString(timing) ? timing->valuestring : "unknown");
    cJSON_Delete(doc);
    return 0;
}
