/* progress.h — what `ampx train` shows while it runs: the progress line, the per-step
 * metrics lines, the gradient monitor's table and warnings, the held-out figures
 * (tools/progress.c). */
#ifndef AMPX_TOOLS_PROGRESS_H
#define AMPX_TOOLS_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "ampx/train.h"

typedef struct progress {
    FILE *metrics; /* the lines of the interval, in memory (progress_metrics_flush) */
    char *metrics_buf;
    size_t metrics_len;
    int metrics_fd; /* the metrics file */
    int tty, quiet;
    int64_t total, skipped;
    double t0;
    float last_scale, min_scale;
    double last_loss;
    int64_t applied_in_interval, last_applied_step;
    /* the latest monitored step of the interval, for the per-layer table */
    ampx_tensor_health health[512];
    char names[512][64], layers[512][64];
    int n_health;
    int64_t health_step;
    double health_scale;
    char warned[64][96]; /* warnings already shown (by tensor and kind) */
    int n_warned;
} progress;

/* Opens the metrics file path for p->metrics: a new run's starts empty; a resumed one
 * (resume_step >= 0) keeps the lines of steps up to resume_step and drops what follows (the
 * steps the checkpoint does not hold, a torn last line), so the steps are not written twice.
 * 0, or -1 after a message in err. */
int progress_metrics_open(progress *p, const char *path, int64_t resume_step, char *err,
                          size_t cap);
/* Appends the lines written since the last flush, whole lines only; 0, or -1 with errno. */
int progress_metrics_flush(progress *p);
/* Flushes and closes the metrics file; 0, or -1 with errno. */
int progress_metrics_close(progress *p);
/* Closes the metrics file without another write: no more lines are taken. */
void progress_metrics_drop(progress *p);

/* Seconds on the monotonic clock. */
double progress_now(void);
/* The ampx_record_fn of a run (user: the progress): a metrics line per step, a line per
 * skipped step, the monitor's lines and warnings. */
int progress_record(void *user, const ampx_step_record *r);
/* The run-health warning at a run's end (ampx_trainer_health_end): on stderr, and in the
 * metrics as {"step": step, "run_warning": line}. */
void progress_run_warning(progress *p, int64_t step, const char *line);
/* The progress line at step (a terminal's rewrites itself), rates since start. */
void progress_show(progress *p, int64_t step, int64_t start);
/* A validation evaluation into ev: a metrics line and a progress line; 0, or -1. */
int progress_validate(progress *p, ampx_trainer *t, ampx_eval_result *ev);
/* The held-out figures in one line on stdout. */
void progress_print_eval(ampx_trainer *t, const ampx_eval_result *ev);

typedef struct scale_txt {
    char s[40];
} scale_txt;
/* A loss scale as the user reads it (exact). */
scale_txt progress_scale_text(double v);

#endif
