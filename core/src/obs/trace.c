/* trace.c — Chrome trace-event JSON (see trace.h). Events of a step are kept until the step
 * ends, then written; the file is one JSON object {"traceEvents":[...],"otherData":{...}},
 * written to a temporary file and renamed over the path when it is closed (base/output.h). */
#include "obs/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/output.h"

#define PID 1
#define TID_HOST 1
#define TID_STREAM 2
#define MAX_META 16

typedef struct op_rec {
    call_event e;
    char who[64];
} op_rec;

struct trace {
    ampx_output *out; /* a temporary file renamed over the path at trace_close */
    FILE *f;          /* its stream */
    char path[1024];
    int64_t first, last;
    int64_t origin_ns; /* ts 0 of the file */
    int n_events;      /* written so far (for the separators) */
    int64_t step, step_t0;
    op_rec *ops;
    uint32_t n_ops, cap_ops;
    int64_t *step_end; /* per traced step: ts of its end (ns since origin), for counters */
    char meta_key[MAX_META][32], meta_val[MAX_META][256];
    int n_meta;
    int oom;
    uint32_t named; /* tracks of a backend list whose thread is named (bit per track) */
};

/* Ops of member m of a backend list on their own track (member 0: the device stream), the
 * copies between members on one more. */
#define TID_COPIES 9
static int track_tid(const call_event *e) {
    return e->track < 0 ? TID_COPIES : e->track == 0 ? TID_STREAM : 10 + e->track;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* ns as microseconds with three decimals, exactly (so a child's ts + dur never passes its
 * parent's by a rounding). */
static void json_us(FILE *f, int64_t ns) {
    if (ns < 0) ns = 0;
    fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void sep(trace *t) {
    fputs(t->n_events++ ? ",\n" : "\n", t->f);
}

static void thread_name(trace *t, int tid, const char *name) {
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", PID,
            tid);
    json_str(t->f, name);
    fputs("}}", t->f);
}

trace *trace_open(const char *path, int64_t first, int64_t last, ampx_err e) {
    trace *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(e, "out of memory");
        return NULL;
    }
    if (ampx_output_open(path, &t->out, e.msg, e.cap)) {
        free(t);
        return NULL;
    }
    t->f = ampx_output_stream(t->out);
    snprintf(t->path, sizeof t->path, "%s", path);
    t->first     = first;
    t->last      = last;
    t->origin_ns = call_now_ns();
    t->step      = -1;
    size_t n     = (size_t)(last - first + 1);
    t->step_end  = calloc(n ? n : 1, sizeof *t->step_end);
    if (!t->step_end) {
        ampx_output_discard(t->out);
        free(t);
        err_set(e, "out of memory for a trace of %zu steps", n);
        return NULL;
    }
    fputs("{\"traceEvents\":[", t->f);
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"ampx\"}}",
            PID);
    thread_name(t, TID_HOST, "host thread");
    thread_name(t, TID_STREAM, "device stream");
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
            "\"args\":{\"sort_index\":%d}}",
            PID, TID_STREAM, TID_STREAM);
    return t;
}

int trace_wants(const trace *t, int64_t step) {
    return t && step >= t->first && step <= t->last;
}

void trace_meta(trace *t, const char *key, const char *value) {
    int i = 0;
    while (i < t->n_meta && strcmp(t->meta_key[i], key))
        i++;
    if (i == MAX_META) return;
    if (i == t->n_meta) t->n_meta++;
    snprintf(t->meta_key[i], sizeof t->meta_key[i], "%s", key);
    snprintf(t->meta_val[i], sizeof t->meta_val[i], "%s", value);
}

void trace_step_begin(trace *t, int64_t step) {
    t->step    = step;
    t->step_t0 = call_now_ns();
    t->n_ops   = 0;
}

void trace_op(void *trace_ptr, const call_event *e) {
    trace *t = trace_ptr;
    if (t->n_ops == t->cap_ops) {
        uint32_t cap = t->cap_ops ? 2 * t->cap_ops : 256;
        op_rec *ops  = realloc(t->ops, cap * sizeof *ops);
        if (!ops) {
            t->oom = 1;
            return;
        }
        t->ops = ops, t->cap_ops = cap;
    }
    op_rec *r = &t->ops[t->n_ops++];
    r->e      = *e;
    snprintf(r->who, sizeof r->who, "%s", e->who ? e->who : "?");
    r->e.who = r->who;
}

static void slice(trace *t, int tid, const char *cat, const char *name, int64_t t0, int64_t t1,
                  int64_t ops) {
    sep(t);
    fprintf(t->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"%s\",\"name\":", PID, tid, cat);
    json_str(t->f, name);
    fputs(",\"ts\":", t->f);
    json_us(t->f, t0 - t->origin_ns);
    fputs(",\"dur\":", t->f);
    json_us(t->f, t1 - t0);
    fprintf(t->f, ",\"args\":{\"step\":%lld", (long long)t->step);
    if (ops >= 0) fprintf(t->f, ",\"ops\":%lld", (long long)ops);
    fputs("}}", t->f);
}

void trace_comm(trace *t, const char *name, int64_t t0_ns, int64_t t1_ns, uint64_t bytes) {
    sep(t);
    fprintf(t->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"communication\",\"name\":", PID,
            TID_HOST);
    json_str(t->f, name);
    fputs(",\"ts\":", t->f);
    json_us(t->f, t0_ns - t->origin_ns);
    fputs(",\"dur\":", t->f);
    json_us(t->f, t1_ns - t0_ns);
    fprintf(t->f, ",\"args\":{\"step\":%lld,\"phase\":\"communication\",\"bytes\":%llu}}",
            (long long)t->step, (unsigned long long)bytes);
}

void trace_step_end(trace *t, const uint64_t *dev_ns, uint32_t n_dev, uint64_t issued) {
    int64_t t1 = call_now_ns();
    if (dev_ns && n_dev == t->n_ops)
        for (uint32_t i = 0; i < t->n_ops; i++) {
            t->ops[i].e.t0_ns = t->step_t0 + (int64_t)dev_ns[2 * i];
            t->ops[i].e.t1_ns = t->step_t0 + (int64_t)dev_ns[2 * i + 1];
        }
    /* device times may run past the host's end of the step (the host does not wait) */
    int64_t s0 = t->step_t0, s1 = t1;
    for (uint32_t i = 0; i < t->n_ops; i++) {
        if (t->ops[i].e.t0_ns < s0) s0 = t->ops[i].e.t0_ns;
        if (t->ops[i].e.t1_ns > s1) s1 = t->ops[i].e.t1_ns;
    }
    char name[64];
    snprintf(name, sizeof name, "step %lld", (long long)t->step);
    slice(t, TID_HOST, "step", name, t->step_t0, t1, (int64_t)issued);
    slice(t, TID_STREAM, "step", name, s0, s1, (int64_t)issued);
    /* phase slices: runs of consecutive ops of one phase */
    for (uint32_t i = 0; i < t->n_ops;) {
        uint32_t j  = i;
        int64_t end = t->ops[i].e.t1_ns;
        while (j + 1 < t->n_ops && t->ops[j + 1].e.phase == t->ops[i].e.phase) {
            j++;
            if (t->ops[j].e.t1_ns > end) end = t->ops[j].e.t1_ns;
        }
        slice(t, TID_STREAM, "phase", call_phase_name(t->ops[i].e.phase), t->ops[i].e.t0_ns, end,
              -1);
        i = j + 1;
    }
    for (uint32_t i = 0; i < t->n_ops; i++) {
        const call_event *e = &t->ops[i].e;
        int tid             = track_tid(e);
        if (e->track != 0 && !(t->named >> (tid & 31) & 1)) {
            char tn[96];
            snprintf(tn, sizeof tn, e->track < 0 ? "copies between backends" : "device stream: %s",
                     e->backend ? e->backend : "?");
            thread_name(t, tid, tn);
            t->named |= 1u << (tid & 31);
        }
        sep(t);
        fprintf(t->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"%s\",\"name\":\"%s.%s\",", PID,
                tid, e->op < AMPX_OP_COUNT ? "op" : "copy",
                e->op < AMPX_OP_COUNT ? ampx_op_name(e->op) : "copy", ampx_dtype_name(e->dtype));
        fputs("\"ts\":", t->f);
        json_us(t->f, e->t0_ns - t->origin_ns);
        fputs(",\"dur\":", t->f);
        json_us(t->f, e->t1_ns - e->t0_ns);
        fputs(",\"args\":{\"node\":", t->f);
        json_str(t->f, e->who);
        fprintf(t->f, ",\"phase\":\"%s\",\"step\":%lld,\"shapes\":", call_phase_name(e->phase),
                (long long)t->step);
        json_str(t->f, e->shapes);
        fputs(",\"dtypes\":", t->f);
        json_str(t->f, e->dtypes);
        fprintf(t->f, ",\"bytes\":%llu,\"flops\":%llu}}", (unsigned long long)e->bytes,
                (unsigned long long)e->flops);
    }
    if (t->step >= t->first && t->step <= t->last) t->step_end[t->step - t->first] = s1;
    t->n_ops = 0;
}

static void counter(trace *t, int64_t ts, const char *name, double v) {
    if (v != v || v > 1e300 || v < -1e300) return; /* JSON has no NaN or inf */
    sep(t);
    fprintf(t->f, "{\"ph\":\"C\",\"pid\":%d,\"name\":\"%s\",\"ts\":", PID, name);
    json_us(t->f, ts - t->origin_ns);
    fprintf(t->f, ",\"args\":{\"value\":%.9g}}", v);
}

void trace_counters(trace *t, int64_t step, double loss, double scale, double grad_norm, double lr,
                    int64_t skipped_total) {
    if (!trace_wants(t, step) || !t->step_end[step - t->first]) return;
    int64_t ts = t->step_end[step - t->first];
    counter(t, ts, "loss scale", scale);
    counter(t, ts, "grad norm", grad_norm);
    counter(t, ts, "skipped steps", (double)skipped_total);
    counter(t, ts, "lr", lr);
    counter(t, ts, "loss", loss);
}

void trace_fp8(trace *t, int64_t step, const char *name, double scale, double amax) {
    if (!trace_wants(t, step) || !t->step_end[step - t->first]) return;
    int64_t ts = t->step_end[step - t->first];
    for (int k = 0; k < 2; k++) {
        double v = k ? amax : scale;
        if (v != v || v > 1e300) continue;
        char full[160];
        snprintf(full, sizeof full, "fp8 %s %s", k ? "amax" : "scale", name);
        sep(t);
        fprintf(t->f, "{\"ph\":\"C\",\"pid\":%d,\"name\":", PID);
        json_str(t->f, full);
        fputs(",\"ts\":", t->f);
        json_us(t->f, ts - t->origin_ns);
        fprintf(t->f, ",\"args\":{\"value\":%.9g}}", v);
    }
}

int trace_close(trace *t, ampx_err e) {
    if (!t) return 0;
    fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{", t->f);
    for (int i = 0; i < t->n_meta; i++) {
        if (i) fputc(',', t->f);
        json_str(t->f, t->meta_key[i]);
        fputc(':', t->f);
        json_str(t->f, t->meta_val[i]);
    }
    fputs("}}\n", t->f);
    int bad =
        ampx_output_commit(t->out, e.msg, e.cap) != AMPX_OK; /* complete: renamed into place */
    if (t->oom && !bad) {
        err_set(e, "%s: out of memory: ops were left out of the trace", t->path);
        bad = 1;
    }
    free(t->ops);
    free(t->step_end);
    free(t);
    return bad ? -1 : 0;
}
