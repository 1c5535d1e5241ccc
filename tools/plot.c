/* plot.c — `ampx plot METRICS.jsonl -o FILE.png|.svg|.pdf`: the curves of a run drawn with
 * cairo, one code path for the three formats: loss (training, and validation when the
 * metrics carry val_loss), the loss scale on a log axis with skipped steps marked, the
 * learning rate, the gradient norm, and with --monitor data a per-layer heat map of max |g|
 * over time. Built when cairo is found; otherwise the command says so. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"
#include "cli.h"
#include "metrics_file.h"

#ifndef AMPX_HAVE_CAIRO
int cmd_plot(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "%s: this ampx was built without cairo; install libcairo2-dev and rebuild\n",
            argv[0]);
    return 1;
}
#else
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <cjson/cJSON.h>

#define W 1200
#define H 900
// ---------------------------------------------------------------------------------------
// Drawing

typedef struct box {
    double x, y, w, h;     /* the plot area, in pixels */
    double x0, x1, y0, y1; /* data range (y in log10 when logy) */
    int logy;
} box;

/* How a panel's value axis reads. */
typedef enum axis_kind {
    AXIS_LINEAR,    /* round ticks: 1, 2 or 5 times a power of ten */
    AXIS_FROM_ZERO, /* linear, starting at 0 (a learning rate) */
    AXIS_LOG10,     /* log, ticks at powers of ten */
    AXIS_LOG2,      /* log, ticks at powers of two, labelled 2^k (a loss scale) */
} axis_kind;

static double px(const box *b, double x) {
    return b->x + (x - b->x0) / (b->x1 - b->x0) * b->w;
}
static double py(const box *b, double y) {
    if (b->logy) y = log10(y);
    return b->y + b->h - (y - b->y0) / (b->y1 - b->y0) * b->h;
}

static void text(cairo_t *cr, double x, double y, double size, const char *s, double align) {
    cairo_text_extents_t e;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align * e.width, y);
    cairo_show_text(cr, s);
}

static void range(const series *s, int n_s, axis_kind kind, double *lo, double *hi) {
    int logy = kind == AXIS_LOG10 || kind == AXIS_LOG2;
    *lo = INFINITY, *hi = -INFINITY;
    for (int k = 0; k < n_s; k++)
        for (int i = 0; i < s[k].n; i++) {
            double v = s[k].y[i];
            if (!isfinite(v) || (logy && v <= 0)) continue;
            if (logy) v = log10(v);
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    if (*hi - *lo < 1e-12 && kind == AXIS_FROM_ZERO && *lo >= 0)
        *hi = *lo > 0 ? 2 * *lo : 1, *lo = 0; /* a constant learning rate, from 0 */
    else if (*hi - *lo < 1e-12)
        *lo -= 0.5, *hi += 0.5;
    double pad = 0.05 * (*hi - *lo);
    *lo -= pad, *hi += pad;
    if (kind == AXIS_FROM_ZERO && *lo + pad >= 0) *lo = 0;
}

// ---------------------------------------------------------------------------------------
// Ticks

/* A round step for about `want` intervals over span: 1, 2 or 5 times a power of ten. */
static double nice_step(double span, int want) {
    double raw = span / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* The label of linear tick v on an axis of step `step` (1, 2 or 5 times a power of ten):
 * whole numbers in full, decimals as many as the step has, exponents for an axis of tiny
 * values (amax: the largest magnitude on the axis). */
static void tick_label(double v, double step, double amax, char *out, size_t cap) {
    if (fabs(v) < step * 1e-9) v = 0;
    double big = fmax(amax, step); /* one format along the axis */
    if (step >= 1)
        snprintf(out, cap, "%.0f", v);
    else if (big >= 1e-3)
        snprintf(out, cap, "%.*f", (int)ceil(-log10(step) - 1e-9), v);
    else
        snprintf(out, cap, "%.*e", (int)(floor(log10(big)) - floor(log10(step))), v);
}

/* Ticks of an axis over [lo, hi] (log10 units for the log kinds): positions in axis units
 * and labels; the count. */
typedef struct ticks {
    double at[32];
    char label[32][24];
    int n;
} ticks;

static void log_ticks(double lo, double hi, double base, ticks *t) {
    double l = log10(base);
    int e0 = (int)ceil(lo / l), e1 = (int)floor(hi / l), every = 1;
    while ((e1 - e0) / every + 1 > 7)
        every *= 2;
    for (int e = e0 - ((e0 % every) + every) % every; e <= e1 && t->n < 32; e += every) {
        if (e < e0) continue;
        t->at[t->n] = e * l;
        if (base == 2)
            snprintf(t->label[t->n], sizeof t->label[0], "2^%d", e);
        else if (e >= -2 && e <= 4)
            snprintf(t->label[t->n], sizeof t->label[0], "%g", pow(10, e));
        else
            snprintf(t->label[t->n], sizeof t->label[0], "1e%d", e);
        t->n++;
    }
}

static void make_ticks(double lo, double hi, axis_kind kind, int want, ticks *t) {
    t->n = 0;
    if (kind == AXIS_LOG10 || kind == AXIS_LOG2) {
        log_ticks(lo, hi, kind == AXIS_LOG2 ? 2 : 10, t);
        if (t->n >= 2) return;
        t->n     = 0; /* less than two powers in range: round values of the value itself */
        double a = pow(10, lo), b = pow(10, hi), step = nice_step(b - a, want);
        for (double v = ceil(a / step) * step; v <= b && t->n < 32; v += step) {
            t->at[t->n] = log10(v);
            tick_label(v, step, b, t->label[t->n++], sizeof t->label[0]);
        }
        return;
    }
    double step = nice_step(hi - lo, want);
    for (double v = ceil(lo / step) * step; v <= hi + step * 1e-9 && t->n < 32; v += step) {
        t->at[t->n] = v;
        tick_label(v, step, fmax(fabs(lo), fabs(hi)), t->label[t->n++], sizeof t->label[0]);
    }
}

/* The step axis under plot area b: round steps, ticks, and its title. */
static void step_axis(cairo_t *cr, const box *b) {
    ticks t;
    make_ticks(b->x0, b->x1, AXIS_LINEAR, 6, &t);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < t.n; i++) {
        double x = px(b, t.at[i]);
        if (x < b->x - 0.5 || x > b->x + b->w + 0.5) continue;
        cairo_move_to(cr, x, b->y + b->h);
        cairo_line_to(cr, x, b->y + b->h + 4);
        text(cr, x, b->y + b->h + 16, 11, t.label[i], 0.5);
    }
    cairo_stroke(cr);
    text(cr, b->x + b->w / 2, b->y + b->h + 30, 11, "step", 0.5);
}

// ---------------------------------------------------------------------------------------
// Panels

static const double colours[][3] = {{0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}};

/* One series: a line; `dots` marks each point too (sparse series such as validation). */
static void curve(cairo_t *cr, const box *b, const series *s, const double *rgb, double width,
                  int dots) {
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_set_line_width(cr, width);
    int pen = 0;
    cairo_save(cr);
    cairo_rectangle(cr, b->x, b->y, b->w, b->h);
    cairo_clip(cr);
    for (int i = 0; i < s->n; i++) {
        double v = s->y[i];
        if (!isfinite(v) || (b->logy && v <= 0)) {
            pen = 0;
            continue;
        }
        if (pen)
            cairo_line_to(cr, px(b, s->x[i]), py(b, v));
        else
            cairo_move_to(cr, px(b, s->x[i]), py(b, v));
        pen = 1;
    }
    cairo_stroke(cr);
    for (int i = 0; dots && i < s->n; i++)
        if (isfinite(s->y[i]) && (!b->logy || s->y[i] > 0)) {
            cairo_arc(cr, px(b, s->x[i]), py(b, s->y[i]), width + 1.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    cairo_restore(cr);
}

/* A legend in the top right corner of b: a line sample and a name per series. */
static void legend(cairo_t *cr, const box *b, const char *const *names, int n) {
    double w = 120, h = 8 + 16.0 * n, x = b->x + b->w - w - 8, y = b->y + 8;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    for (int k = 0; k < n; k++) {
        double ly = y + 12 + 16 * k;
        cairo_set_source_rgb(cr, colours[k % 2][0], colours[k % 2][1], colours[k % 2][2]);
        cairo_set_line_width(cr, k ? 2.5 : 1.5);
        cairo_move_to(cr, x + 8, ly - 4);
        cairo_line_to(cr, x + 32, ly - 4);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text(cr, x + 40, ly, 11, names[k], 0);
    }
}

/* A panel with a frame, a title, round ticks on both axes and its series. */
static box panel(cairo_t *cr, double x, double y, double w, double h, const char *title,
                 const series *s, int n_s, axis_kind kind, double x0, double x1) {
    int logy = kind == AXIS_LOG10 || kind == AXIS_LOG2;
    box b    = {x + 70, y + 30, w - 90, h - 70, x0, x1, 0, 1, logy};
    range(s, n_s, kind, &b.y0, &b.y1);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, b.x, b.y, b.w, b.h);
    cairo_fill(cr);
    ticks t;
    make_ticks(b.y0, b.y1, kind, 4, &t);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < t.n; i++) { /* grid and labels at the ticks */
        double yy = b.y + b.h - (t.at[i] - b.y0) / (b.y1 - b.y0) * b.h;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_move_to(cr, b.x, yy);
        cairo_line_to(cr, b.x + b.w, yy);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text(cr, b.x - 6, yy + 4, 11, t.label[i], 1);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, b.x, b.y, b.w, b.h);
    cairo_stroke(cr);
    text(cr, b.x, y + 20, 15, title, 0);
    step_axis(cr, &b);
    for (int k = 0; k < n_s; k++) /* the second series (validation) sparse and bold */
        curve(cr, &b, &s[k], colours[k % 2], k ? 2.5 : 1.5, k > 0);
    return b;
}

/* max |g| in log10 to a colour: dark blue (small) through green to yellow (large). */
static void heat_colour(double t, double *rgb) {
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    rgb[0] = t < 0.5 ? 0.27 - 0.3 * t : -0.5 + 1.9 * (t - 0.5) + 0.4;
    rgb[1] = 0.0 + 0.9 * t;
    rgb[2] = 0.33 + 0.4 * (1 - t) - 0.5 * t;
    for (int i = 0; i < 3; i++)
        rgb[i] = rgb[i] < 0 ? 0 : rgb[i] > 1 ? 1 : rgb[i];
}

/* The colour bar right of b for log10 values lo..hi, with ticks at powers of ten, under
 * the label `unit`. */
static void colour_bar(cairo_t *cr, const box *b, double lo, double hi, const char *unit) {
    double bx = b->x + b->w + 30;
    for (int i = 0; i < 100; i++) {
        double rgb[3];
        heat_colour(i / 99.0, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, bx, b->y + b->h - (i + 1) * b->h / 100, 20, b->h / 100 + 0.5);
        cairo_fill(cr);
    }
    ticks t;
    make_ticks(lo, hi, AXIS_LOG10, 4, &t);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < t.n; i++) {
        double yy = b->y + b->h - (t.at[i] - lo) / (hi - lo) * b->h;
        cairo_move_to(cr, bx + 20, yy);
        cairo_line_to(cr, bx + 25, yy);
        text(cr, bx + 28, yy + 4, 11, t.label[i], 0);
    }
    cairo_stroke(cr);
    text(cr, bx, b->y - 6, 11, unit, 0);
}

/* One row per named series, coloured by log10 of its values over steps x0..x1 (grey: zero
 * or non-finite), with its title above and a colour bar labelled unit. */
typedef struct heat_rows {
    const char (*names)[64];
    const series *rows;
    int n;
    const char *title, *unit;
} heat_rows;

static void heat_map(cairo_t *cr, const heat_rows *hr, double x, double y, double w, double h,
                     double x0, double x1) {
    double names = 40; /* the widest row name sets the left margin */
    cairo_set_font_size(cr, 11);
    for (int l = 0; l < hr->n; l++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, hr->names[l], &e);
        names = fmax(names, e.width + 16);
    }
    box b     = {x + names, y + 30, w - names - 120, h - 70, x0, x1, 0, 1, 0};
    double lo = INFINITY, hi = -INFINITY;
    for (int l = 0; l < hr->n; l++)
        for (int i = 0; i < hr->rows[l].n; i++) {
            double v = hr->rows[l].y[i];
            if (isfinite(v) && v > 0) {
                if (log10(v) < lo) lo = log10(v);
                if (log10(v) > hi) hi = log10(v);
            }
        }
    if (!isfinite(lo)) lo = -8, hi = 0;
    if (hi - lo < 1e-9) lo -= 1, hi += 1;
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    text(cr, b.x, y + 20, 15, hr->title, 0);
    double row = b.h / hr->n;
    for (int l = 0; l < hr->n; l++) {
        const series *s = &hr->rows[l];
        for (int i = 0; i < s->n; i++) {
            double xa     = px(&b, s->x[i] - 0.5),
                   xb     = px(&b, (i + 1 < s->n ? s->x[i + 1] : s->x[i] + 1) - 0.5);
            double rgb[3] = {0.6, 0.6, 0.6};
            double v      = s->y[i];
            if (isfinite(v) && v > 0) heat_colour((log10(v) - lo) / (hi - lo), rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            cairo_rectangle(cr, xa, b.y + l * row, xb - xa + 0.5, row);
            cairo_fill(cr);
        }
        /* rows thinner than a line of text label every k-th row */
        int every = row >= 9 ? 1 : (int)ceil(9 / row);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        if (l % every == 0)
            text(cr, b.x - 6, b.y + (l + 0.5) * row + 4, row >= 9 ? 11 : 9, hr->names[l], 1);
    }
    step_axis(cr, &b);
    colour_bar(cr, &b, lo, hi, hr->unit);
}

static void draw(cairo_t *cr, const metrics_run *r, const char *title) {
    cairo_set_source_rgb(cr, 0.96, 0.96, 0.96);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double x0 = INFINITY, x1 = -INFINITY;
    const series *all[] = {&r->loss, &r->scale, &r->lr, &r->gnorm};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < all[k]->n; i++) {
            if (all[k]->x[i] < x0) x0 = all[k]->x[i];
            if (all[k]->x[i] > x1) x1 = all[k]->x[i];
        }
    if (!(x1 > x0)) x1 = x0 + 1;
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text(cr, 20, 24, 17, title, 0);
    double rows = 2 + (r->n_layers ? 1 : 0) + (r->headroom.n ? 1 : 0) + (r->n_fp8 ? 1 : 0),
           ph = (H - 30) / rows, pw = W / 2.0;
    series lv[2] = {r->loss, r->val};
    box lb       = panel(cr, 0, 30, pw, ph, "loss", lv, r->val.n ? 2 : 1, AXIS_LINEAR, x0, x1);
    static const char *const names[] = {"training", "validation"};
    legend(cr, &lb, names, r->val.n ? 2 : 1);
    box b = panel(cr, pw, 30, pw, ph, "loss scale (log; red marks: skipped steps)", &r->scale, 1,
                  AXIS_LOG2, x0, x1);
    cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    for (int i = 0; i < r->skipped.n; i++) {
        double x = px(&b, r->skipped.x[i]);
        cairo_move_to(cr, x, b.y + b.h);
        cairo_line_to(cr, x, b.y + b.h - 8);
    }
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    panel(cr, 0, 30 + ph, pw, ph, "learning rate", &r->lr, 1, AXIS_FROM_ZERO, x0, x1);
    panel(cr, pw, 30 + ph, pw, ph, "gradient norm (log)", &r->gnorm, 1, AXIS_LOG10, x0, x1);
    double at = 30 + 2 * ph;
    if (r->n_layers) {
        heat_rows hr = {r->layers, r->heat, r->n_layers,
                        "max |g| per layer (log colour scale; grey: zero or non-finite)",
                        "max |g|"};
        heat_map(cr, &hr, 0, at, W, ph, x0, x1);
        at += ph;
    }
    if (r->n_fp8) { /* policy.fp8: each tensor's scale and amax, side by side */
        heat_rows sc = {r->fp8, r->fp8_scale, r->n_fp8, "fp8 scale per tensor (log colour)",
                        "scale"};
        heat_rows am = {r->fp8, r->fp8_amax, r->n_fp8, "fp8 amax per tensor (log colour)", "amax"};
        heat_map(cr, &sc, 0, at, pw, ph, x0, x1);
        heat_map(cr, &am, pw, at, pw, ph, x0, x1);
        at += ph;
    }
    if (r->headroom.n)
        panel(cr, 0, at, pw, ph,
              "headroom of the closest activation (binary orders below its dtype's largest)",
              &r->headroom, 1, AXIS_FROM_ZERO, x0, x1);
}

/* cairo's writer: the bytes to the output's stream. */
static cairo_status_t write_out(void *f, const unsigned char *data, unsigned int n) {
    return fwrite(data, 1, n, f) == n ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static const char *ext_of(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : "";
}

int cmd_plot(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: ampx plot METRICS.jsonl -o FILE.png|.svg|.pdf\n"
                   "Draws loss (and val_loss), the loss scale (log, skipped steps marked), the\n"
                   "learning rate, the gradient norm and, with --monitor data, a per-layer heat\n"
                   "map of max |g| over time and the activations' headroom, and under policy.fp8\n"
                   "maps of each fp8 tensor's scale and amax. PNG is %dx%d pixels.\n",
                   W, H);
            return 0;
        }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i == argc) {
                fprintf(stderr, "%s: -o needs a FILE\n", argv[0]);
                return EXIT_USAGE;
            }
            out = argv[i];
        } else if (!in && argv[i][0] != '-') {
            in = argv[i];
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "usage: ampx plot METRICS.jsonl -o FILE.png|.svg|.pdf\n");
        return EXIT_USAGE;
    }
    const char *ext = ext_of(out);
    int png = !strcmp(ext, "png"), svg = !strcmp(ext, "svg"), pdf = !strcmp(ext, "pdf");
    if (!png && !svg && !pdf) {
        fprintf(stderr, "%s: %s: the output must end in .png, .svg or .pdf\n", argv[0], out);
        return EXIT_USAGE;
    }
    static metrics_run r;
    char err[1200];
    int rc = 1;
    size_t len;
    ampx_output *o          = NULL;
    ampx_file_role out_role = {out, "-o"}, in_role = {in, "the metrics file"};
    /* the metrics under the input rules (a FIFO or a device refused without blocking, the
     * size capped); the plot to a temporary file, renamed over FILE once complete */
    char *text = ampx_check_outputs(&out_role, 1, &in_role, 1, err, sizeof err)
                     ? NULL
                     : ampx_input_read(in, 0, &len, err, sizeof err);
    if (!text || metrics_parse(&r, text, len, in, err, sizeof err) ||
        ampx_output_open(out, &o, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        goto done;
    }
    FILE *f            = ampx_output_stream(o);
    cairo_surface_t *s = png   ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H)
                         : svg ? cairo_svg_surface_create_for_stream(write_out, f, W, H)
                               : cairo_pdf_surface_create_for_stream(write_out, f, W, H);
    cairo_t *cr        = cairo_create(s);
    draw(cr, &r, in);
    cairo_destroy(cr);
    cairo_status_t cs =
        png ? cairo_surface_write_to_png_stream(s, write_out, f) : CAIRO_STATUS_SUCCESS;
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (cs != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], out, cairo_status_to_string(cs));
        goto done;
    }
    rc = ampx_output_commit(o, err, sizeof err) ? 1 : 0;
    o  = NULL;
    if (rc) fprintf(stderr, "%s: %s\n", argv[0], err);
done:
    ampx_output_discard(o);
    free(text);
    metrics_free(&r);
    return rc;
}
#endif
