/* trace_file.h — reading a trace written by `ampx train --trace` (Chrome trace-event JSON,
 * op events named op.dtype), for `ampx trace-summary`: the time per op, per dtype and per
 * phase. Parsing works on bytes already read (under the input rules, by the caller), so the
 * fuzz harness (tests/fuzz/fuzz_trace.c) runs the same code. */
#ifndef AMPX_TOOLS_TRACE_FILE_H
#define AMPX_TOOLS_TRACE_FILE_H

#include <stddef.h>

#define TRACE_MAX_ROWS 256

typedef struct trace_row {
    char name[64];
    long count;
    double us;
} trace_row;

/* Rows by name, in order of first sight; names past TRACE_MAX_ROWS are not counted. */
typedef struct trace_table {
    trace_row r[TRACE_MAX_ROWS];
    int n;
} trace_table;

typedef struct trace_stats {
    trace_table ops, dtypes, phases;
    double op_us, step_us; /* the ops' time, the steps' time */
    long steps, n_ops;
    char timing[64]; /* otherData.timing, or "unknown" */
} trace_stats;

/* Reads the trace text (len bytes, any bytes) into s (zeroed by the caller); name is the
 * file in messages. 0, or -1 with "NAME: reason" in err. */
int trace_parse(trace_stats *s, const char *text, size_t len, const char *name, char *err,
                size_t cap);

#endif
