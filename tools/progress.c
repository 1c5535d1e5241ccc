/* progress.c — what `ampx train` shows while it runs: a progress line that rewrites itself
 * on a terminal (plain lines elsewhere), one JSON metrics line per step, a line per skipped
 * step, the gradient monitor's per-layer table and warnings, and the held-out figures. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

// ---------------------------------------------------------------------------------------
// The metrics file: lines are formatted into memory and appended whole at each flush (one
// write per flush, retried only for what the kernel did not take), so a run killed at any
// moment leaves whole lines but perhaps the last; a resumed run cuts the file back to its
// checkpoint's step, which drops that torn line too.

/* The offset just past the last line of f to keep: whole lines `{"step":N...` with
 * N <= step, up to the first that is not. */
static off_t metrics_keep(FILE *f, int64_t step) {
    off_t keep = 0, at = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        long long s;
        char *end;
        if (line[n - 1] != '\n' || strncmp(line, "{\"step\":", 8)) break;
        errno = 0;
        s     = strtoll(line + 8, &end, 10);
        if (end == line + 8 || errno || s > step || s < 0) break;
        at += n;
        keep = at;
    }
    free(line);
    return keep;
}

int progress_metrics_open(progress *p, const char *path, int64_t resume_step, char *err,
                          size_t cap) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (resume_step < 0 ? O_TRUNC : 0), 0666);
    if (fd < 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (resume_step >= 0) {
        FILE *f   = fopen(path, "r");
        off_t end = f ? metrics_keep(f, resume_step) : -1;
        if (f) fclose(f);
        if (end < 0 || ftruncate(fd, end) != 0 || lseek(fd, 0, SEEK_END) < 0) {
            snprintf(err, cap, "%s: cannot cut it back to step %lld: %s", path,
                     (long long)resume_step, strerror(errno));
            close(fd);
            return -1;
        }
    }
    p->metrics_fd = fd;
    p->metrics    = open_memstream(&p->metrics_buf, &p->metrics_len);
    if (!p->metrics) {
        snprintf(err, cap, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    return 0;
}

int progress_metrics_flush(progress *p) {
    if (!p->metrics) return 0;
    if (fflush(p->metrics) != 0 || ferror(p->metrics)) return errno = ENOMEM, -1;
    const char *s = p->metrics_buf;
    size_t n      = p->metrics_len;
    off_t whole   = lseek(p->metrics_fd, 0, SEEK_CUR); /* the file ends with a whole line */
    while (n > 0) {
        ssize_t w = write(p->metrics_fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { /* reported once: the file takes no more lines */
            int saved = w < 0 ? errno : EIO;
            /* a full disk: cut a torn line off, so the file reads whole (ampx plot, resume) */
            if (whole >= 0 && ftruncate(p->metrics_fd, whole) != 0) {
                /* the line stays torn; a resume cuts it back (progress_metrics_open) */
            }
            fclose(p->metrics), free(p->metrics_buf), close(p->metrics_fd);
            p->metrics = NULL, p->metrics_buf = NULL, p->metrics_fd = -1;
            return errno = saved, -1;
        }
        s += w, n -= (size_t)w;
    }
    /* a new buffer for the next interval's lines */
    fclose(p->metrics);
    free(p->metrics_buf);
    p->metrics_buf = NULL, p->metrics_len = 0;
    p->metrics = open_memstream(&p->metrics_buf, &p->metrics_len);
    return p->metrics ? 0 : (errno = ENOMEM, -1);
}

int progress_metrics_close(progress *p) {
    if (!p->metrics) return 0;
    int rc = progress_metrics_flush(p), saved = errno;
    if (p->metrics) fclose(p->metrics);
    free(p->metrics_buf);
    p->metrics = NULL, p->metrics_buf = NULL;
    if (p->metrics_fd >= 0 && close(p->metrics_fd) != 0 && !rc) rc = -1, saved = errno;
    p->metrics_fd = -1;
    errno         = saved;
    return rc;
}

void progress_metrics_drop(progress *p) {
    if (p->metrics) fclose(p->metrics);
    free(p->metrics_buf);
    if (p->metrics && p->metrics_fd >= 0) close(p->metrics_fd);
    p->metrics = NULL, p->metrics_buf = NULL, p->metrics_fd = -1;
}

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void json_num(FILE *f, const char *key, double v) {
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.9g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

static void json_str(FILE *f, const char *key, const char *v) {
    fprintf(f, ",\"%s\":\"", key);
    for (; *v; v++)
        if (*v == '"' || *v == '\\')
            fprintf(f, "\\%c", *v);
        else if ((unsigned char)*v >= 0x20)
            fputc(*v, f);
    fputc('"', f);
}

/* A monitor warning, shown the first time for its tensor and kind. */
static void on_warning(void *user, const char *line) {
    progress *p = user;
    char key[96];
    const char *kind = strstr(line, "minimum") ? "min" : strstr(line, "vanish") ? "van" : "und";
    snprintf(key, sizeof key, "%s %.80s", kind, line + 9);
    char *sp = strchr(key + 4, ' ');
    if (sp) *sp = 0;
    for (int i = 0; i < p->n_warned; i++)
        if (!strcmp(p->warned[i], key)) return;
    if (p->n_warned < 64) snprintf(p->warned[p->n_warned++], sizeof p->warned[0], "%s", key);
    fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", line);
}

static void monitor_record(progress *p, const ampx_step_record *r) {
    if (p->metrics)
        for (int i = 0; i < r->n_health; i++) {
            const ampx_tensor_health *h = &r->health[i];
            fprintf(p->metrics, "{\"step\":%lld", (long long)r->step);
            json_str(p->metrics, "tensor", h->name);
            json_str(p->metrics, "layer", h->layer);
            json_str(p->metrics, "dtype", ampx_dtype_name(h->compute));
            json_num(p->metrics, "max_abs", h->max_abs);
            json_num(p->metrics, "rms", h->rms);
            json_num(p->metrics, "norm", h->rms * sqrt((double)h->n)); /* L2, unscaled */
            json_num(p->metrics, "zero_frac", h->zero_frac);
            json_num(p->metrics, "underflow_frac", h->underflow_frac);
            fprintf(p->metrics, ",\"inf\":%lld", (long long)h->inf);
            if (h->nan >= 0)
                fprintf(p->metrics, ",\"nan\":%lld", (long long)h->nan);
            else
                fprintf(p->metrics, ",\"nan\":null");
            json_num(p->metrics, "scale", r->monitor_scale);
            fprintf(p->metrics, "}\n");
        }
    int n = r->n_health < 512 ? r->n_health : 512;
    for (int i = 0; i < n; i++) {
        p->health[i] = r->health[i];
        snprintf(p->names[i], sizeof p->names[i], "%s", r->health[i].name);
        snprintf(p->layers[i], sizeof p->layers[i], "%s", r->health[i].layer);
        p->health[i].name  = p->names[i];
        p->health[i].layer = p->layers[i];
    }
    p->n_health     = n;
    p->health_step  = r->step;
    p->health_scale = r->monitor_scale;
    if (!p->quiet) {
        ampx_health_limits lim;
        ampx_health_defaults(&lim);
        ampx_health_warnings(r->health, r->n_health, &lim, r->monitor_scale, p->min_scale,
                             on_warning, p);
    }
}

/* A loss scale as the user reads it: exact (scales are powers of the growth factor, often
 * 2^k, and %g would print 2^20 as 1.04858e+06): a whole number in full up to 2^53, else 9
 * significant digits, which give back the f32 value. */

scale_txt progress_scale_text(double v) {
    scale_txt t;
    if (v >= 1 && v <= 9007199254740992.0 && v == floor(v))
        snprintf(t.s, sizeof t.s, "%.0f", v);
    else
        snprintf(t.s, sizeof t.s, "%.9g", v);
    return t;
}

/* The per-layer table of the latest monitored step: the layer's tensors combined. */
static void show_health(progress *p) {
    if (p->quiet || !p->n_health) return;
    FILE *f = p->tty ? stderr : stdout;
    if (p->tty) fputs("\r\033[K", f);
    fprintf(f, "gradient health at step %lld (loss scale %s; max|g| and rms unscaled):\n",
            (long long)p->health_step, progress_scale_text(p->health_scale).s);
    fprintf(f, "  %-16s %-5s %10s %10s %10s %7s %9s %6s %6s\n", "layer", "dtype", "max|g|", "rms",
            "norm", "zeros", "underflow", "inf", "nan");
    for (int i = 0; i < p->n_health; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++)
            dup |= !strcmp(p->layers[k], p->layers[i]);
        if (dup) continue;
        double mx = 0, sq = 0, n = 0, z = 0, u = 0;
        long long inf = 0, nan = 0;
        int nan_known = 1;
        for (int k = i; k < p->n_health; k++) {
            const ampx_tensor_health *h = &p->health[k];
            if (strcmp(p->layers[k], p->layers[i])) continue;
            if (h->max_abs > mx) mx = h->max_abs;
            sq += h->rms * h->rms * (double)h->n;
            n += (double)h->n;
            z += h->zero_frac * (double)h->n;
            u += h->underflow_frac * (double)h->n;
            inf += h->inf;
            if (h->nan < 0) nan_known = 0;
            nan += h->nan > 0 ? h->nan : 0;
        }
        char nan_s[24];
        snprintf(nan_s, sizeof nan_s, nan_known ? "%lld" : "?", nan);
        fprintf(f, "  %-16s %-5s %10.3e %10.3e %10.3e %6.2f%% %8.3f%% %6lld %6s\n", p->layers[i],
                ampx_dtype_name(p->health[i].compute), mx, n ? sqrt(sq / n) : 0, sqrt(sq),
                n ? 100 * z / n : 0, n ? 100 * u / n : 0, inf, nan_s);
    }
    p->n_health = 0;
}

/* An f32 written exactly: its decimal expansion in full (2^31 is 2147483648, 1.1^k * 2^16
 * rounded to f32 keeps every digit), so a reader compares bit for bit with PyTorch. */
static void json_f32_exact(FILE *f, const char *key, float v) {
    if (!isfinite(v)) {
        fprintf(f, ",\"%s\":null", key);
        return;
    }
    int e = 0;
    frexpf(v, &e); /* v = m 2^e, 0.5 <= |m| < 1: 24 significant bits end at 2^(e - 24) */
    int frac = e < 24 ? 24 - e : 0;
    if (frac > 160) frac = 160;
    char buf[256];
    snprintf(buf, sizeof buf, "%.*f", frac, (double)v);
    if (strchr(buf, '.')) {
        size_t n = strlen(buf);
        while (buf[n - 1] == '0')
            buf[--n] = '\0';
        if (buf[n - 1] == '.') buf[--n] = '\0';
    }
    fprintf(f, ",\"%s\":%s", key, buf);
}

void progress_run_warning(progress *p, int64_t step, const char *line) {
    fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", line);
    if (!p->metrics) return;
    fprintf(p->metrics, "{\"step\":%lld", (long long)step);
    json_str(p->metrics, "run_warning", line);
    fprintf(p->metrics, "}\n");
}

int progress_record(void *user, const ampx_step_record *r) {
    progress *p = user;
    if (p->metrics) {
        fprintf(p->metrics, "{\"step\":%lld", (long long)r->step);
        json_num(p->metrics, "loss", r->loss);
        json_f32_exact(p->metrics, "scale", r->scale);
        fprintf(p->metrics, ",\"skipped\":%s", r->skipped ? "true" : "false");
        json_num(p->metrics, "lr", r->lr);
        json_num(p->metrics, "grad_norm", r->grad_norm);
        json_num(p->metrics, "time_ms", r->time_ms);
        if (r->created_by && r->created_by[0]) json_str(p->metrics, "created_by", r->created_by);
        if (r->headroom_tensor && r->headroom_tensor[0]) {
            json_str(p->metrics, "headroom_tensor", r->headroom_tensor);
            json_num(p->metrics, "headroom_bits", r->headroom_bits);
            json_num(p->metrics, "headroom_underflow", r->headroom_underflow);
        }
        if (r->headroom_warning && r->headroom_warning[0])
            json_str(p->metrics, "headroom_warning", r->headroom_warning);
        fprintf(p->metrics, "}\n");
        /* policy.fp8: a line per fp8 tensor at the end of each log interval */
        for (int i = 0; i < r->n_fp8; i++) {
            const ampx_fp8_record *q = &r->fp8[i];
            fprintf(p->metrics, "{\"step\":%lld", (long long)r->step);
            json_str(p->metrics, "fp8_tensor", q->name);
            json_str(p->metrics, "format", q->format);
            json_f32_exact(p->metrics, "scale", q->scale);
            json_num(p->metrics, "amax", q->amax);
            json_num(p->metrics, "saturated", q->saturated);
            json_num(p->metrics, "flushed", q->flushed);
            fprintf(p->metrics, "}\n");
        }
    }
    if (r->skipped) {
        p->skipped++;
        if (!p->quiet)
            fprintf(stderr,
                    "%sstep %lld: skipped, non-finite gradients in %s; loss scale %s -> %s%s%s\n",
                    p->tty ? "\r\033[K" : "", (long long)r->step,
                    r->overflow[0] ? r->overflow : "(unnamed)",
                    progress_scale_text(p->last_scale).s, progress_scale_text(r->scale).s,
                    r->first_nonfinite && r->first_nonfinite[0] ? "; first non-finite: " : "",
                    r->first_nonfinite ? r->first_nonfinite : "");
        if (!p->quiet && r->overflow_origin && r->overflow_origin[0])
            fprintf(stderr, "  non-finite values %s\n", r->overflow_origin);
    }
    if (r->warning && r->warning[0])
        fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", r->warning);
    if (r->headroom_warning && r->headroom_warning[0])
        fprintf(stderr, "%s%s\n", p->tty ? "\r\033[K" : "", r->headroom_warning);
    if (r->health) monitor_record(p, r);
    p->last_scale = r->scale;
    if (!r->skipped) {
        p->last_loss = r->loss;
        p->applied_in_interval++;
        p->last_applied_step = r->step;
    }
    return 0;
}

/* The progress line. An interval with no applied step shows no loss (a loss of a skipped
 * step is not the model's, and the last applied one would be stale). */
void progress_show(progress *p, int64_t step, int64_t start) {
    if (p->quiet) return;
    show_health(p);
    double el = progress_now() - p->t0, rate = el > 0 ? (double)(step - start) / el : 0;
    double eta = rate > 0 ? (double)(p->total - step) / rate : 0;
    char loss[96];
    if (p->applied_in_interval)
        snprintf(loss, sizeof loss, "%.4f", p->last_loss);
    else if (p->last_applied_step)
        snprintf(loss, sizeof loss, "- (no step applied since step %lld)",
                 (long long)p->last_applied_step);
    else
        snprintf(loss, sizeof loss, "- (no step applied yet)");
    p->applied_in_interval = 0;
    if (p->tty)
        fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %s  scale %s  %.0f steps/s  ETA %.0fs",
                (long long)step, (long long)p->total, loss, progress_scale_text(p->last_scale).s,
                rate, eta);
    else
        printf("step %lld/%lld loss %s scale %s steps/s %.1f eta_s %.0f\n", (long long)step,
               (long long)p->total, loss, progress_scale_text(p->last_scale).s, rate, eta);
    fflush(stdout);
}

/* The held-out figures in one line: a token model's loss and next-token accuracy, a
 * regression's MSE, MAE and R^2, a classifier's accuracy, else the loss alone. */
void progress_print_eval(ampx_trainer *t, const ampx_eval_result *ev) {
    double bpt = ampx_trainer_bytes_per_token(t);
    if (ampx_trainer_window(t) && bpt > 0)
        printf("validation loss %.4f nats per token (%.4f bits; %.4f bits per byte), next-token "
               "accuracy %.2f%% on %lld positions\n",
               ev->loss, ev->loss / log(2.0), ev->loss / log(2.0) / bpt, 100 * ev->accuracy,
               (long long)ev->examples);
    else if (ampx_trainer_window(t))
        printf("validation loss %.4f nats per token (%.4f bits), next-token accuracy %.2f%% on "
               "%lld positions\n",
               ev->loss, ev->loss / log(2.0), 100 * ev->accuracy, (long long)ev->examples);
    else if (ev->regression)
        printf("held-out MSE %.6g, MAE %.6g, R^2 %.4f on %lld examples\n", ev->mse, ev->mae, ev->r2,
               (long long)ev->examples);
    else if (ev->accuracy >= 0)
        printf("held-out accuracy %.2f%% (loss %.4f) on %lld examples\n", 100 * ev->accuracy,
               ev->loss, (long long)ev->examples);
    else
        printf("held-out loss %.6g on %lld examples\n", ev->loss, (long long)ev->examples);
}

/* A validation evaluation: a metrics line and a progress line. Token models also get the
 * loss in bits per token and, where the bytes a token are known (byte-level text, token
 * files with "bytes_per_token"), in bits per byte, which compares across tokenizers. */
int progress_validate(progress *p, ampx_trainer *t, ampx_eval_result *ev) {
    if (ampx_trainer_evaluate(t, ev)) return -1;
    int64_t step = ampx_trainer_step(t);
    if (p->metrics) {
        fprintf(p->metrics, "{\"step\":%lld", (long long)step);
        json_num(p->metrics, "val_loss", ev->loss);
        if (ev->accuracy >= 0) json_num(p->metrics, "val_accuracy", ev->accuracy);
        if (ampx_trainer_bytes_per_token(t) > 0)
            json_num(p->metrics, "val_bits_per_byte",
                     ev->loss / log(2.0) / ampx_trainer_bytes_per_token(t));
        if (ev->regression) {
            json_num(p->metrics, "val_mse", ev->mse);
            json_num(p->metrics, "val_mae", ev->mae);
            json_num(p->metrics, "val_r2", ev->r2);
        }
        fprintf(p->metrics, "}\n");
    }
    if (!p->quiet) {
        if (p->tty) fprintf(stderr, "\r\033[K");
        printf("step %lld: val_loss %.4f", (long long)step, ev->loss);
        double bpt = ampx_trainer_bytes_per_token(t);
        if (ampx_trainer_window(t) && bpt != 1)
            printf(" (%.4f bits per token", ev->loss / log(2.0));
        if (ampx_trainer_window(t) && bpt > 0)
            printf("%s%.4f bits per byte)", bpt != 1 ? ", " : " (", ev->loss / log(2.0) / bpt);
        else if (ampx_trainer_window(t))
            printf(")");
        if (ev->accuracy >= 0) printf(" val_accuracy %.2f%%", 100 * ev->accuracy);
        if (ev->regression) printf(" val_mae %.6g val_r2 %.4f", ev->mae, ev->r2);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

/* F with a tag before its .safetensors extension: run.safetensors -> run.best.safetensors. */