/* fuzz_trace.c — the trace `ampx trace-summary` reads (tools/trace_file.c): any bytes give
 * the tables or one "FILE: message", every table within its rows and its counts adding up. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace_file.h"

static long rows_count(const trace_table *t) {
    long n = 0;
    if (t->n < 0 || t->n > TRACE_MAX_ROWS) abort();
    for (int i = 0; i < t->n; i++) {
        if (t->r[i].count < 1 || !memchr(t->r[i].name, 0, sizeof t->r[i].name)) abort();
        n += t->r[i].count;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static trace_stats s;
    memset(&s, 0, sizeof s);
    char err[512] = "";
    if (trace_parse(&s, (const char *)data, size, "fuzz.json", err, sizeof err) == 0) {
        /* the dtype and phase tables count every op the op table does, until one fills up */
        long ops = rows_count(&s.ops), dtypes = rows_count(&s.dtypes);
        long phases = rows_count(&s.phases);
        if (ops > s.n_ops || dtypes > s.n_ops || phases > s.n_ops || s.steps < 0) abort();
        if (s.ops.n < TRACE_MAX_ROWS && ops != s.n_ops) abort();
        if (!memchr(s.timing, 0, sizeof s.timing)) abort();
    } else if (!err[0] || strchr(err, '\n')) {
        abort(); /* a failure is exactly one line */
    }
    return 0;
}
