/* trace.h — a timeline of training steps as Chrome trace-event JSON, which Perfetto
 * (ui.perfetto.dev) and chrome://tracing open.
 *
 * One process "ampx" with two tracks: the host thread (a slice per step, from the first op
 * it enqueues to the last) and the device stream (a slice per step, per phase of the step —
 * forward, backward, amp, optimizer — and per op). Ops are complete events ("ph":"X") named
 * op.dtype (gemm.bf16, layernorm_fwd.f32) so the viewer gives each precision its own colour,
 * with the node, phase, shapes, dtypes, bytes and FLOPs in args. Counter tracks ("ph":"C")
 * carry the loss scale, the gradient norm, the skipped steps, the learning rate and the loss.
 * otherData says where the op times come from: the backend's device timestamps, or the
 * host's clock around each op with a synchronize after it. */
#ifndef AMPX_OBS_TRACE_H
#define AMPX_OBS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/call.h"
#include "base/error.h"

typedef struct trace trace;

/* Opens path for writing; steps first..last (1-based, inclusive) will be traced. */
trace *trace_open(const char *path, int64_t first, int64_t last, ampx_err e);
/* 1 if 1-based step `step` is in the window. */
int trace_wants(const trace *t, int64_t step);
/* A "key": "value" pair of otherData (copied; later keys of the same name win). */
void trace_meta(trace *t, const char *key, const char *value);

/* A traced step: begin, the ops (trace_op is a call_observer), end. */
void trace_step_begin(trace *t, int64_t step);
void trace_op(void *trace_ptr, const call_event *e);
/* Ends the step. dev_ns (optional) holds 2 * n_dev device times (start, end of each op in
 * the order issued, in ns since the step began); when n_dev equals the ops recorded they
 * replace the host times on the device track. issued: the ops the call layer counted in the
 * step, written in the step slice's args as "ops". */
void trace_step_end(trace *t, const uint64_t *dev_ns, uint32_t n_dev, uint64_t issued);
/* A communication slice of the current step on the host thread's track (a data-parallel
 * run's gradient all-reduce: its start per bucket, and the wait for it), host clock. */
void trace_comm(trace *t, const char *name, int64_t t0_ns, int64_t t1_ns, uint64_t bytes);

/* The counters of a step as the device recorded them (after the step ended). */
void trace_counters(trace *t, int64_t step, double loss, double scale, double grad_norm, double lr,
                    int64_t skipped_total);

/* policy.fp8: counter tracks "fp8 scale NAME" and "fp8 amax NAME" of one fp8 tensor at the
 * end of step (a traced step at the end of a log interval). */
void trace_fp8(trace *t, int64_t step, const char *name, double scale, double amax);

/* Writes the tail (otherData) and closes the file; 0 on success, else -1 with a message. */
int trace_close(trace *t, ampx_err e);

#endif
