/* headroom.c — how close each forward activation's max |x| comes to its dtype's largest
 * value in the monitored steps, and the warning before it gets there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/dtype.h"
#include "graph/ops.h"
#include "watch/watch.h"

// ---------------------------------------------------------------------------------------
// Headroom: how close each forward activation's max |x| comes to its dtype's largest value,
// and where its trend over the last monitored steps takes it. The trend is the least-squares
// slope of log2 max |x| over the last HR_HIST monitored steps (at least HR_MIN of them); a
// tensor is warned of once, when it is within HR_NEAR binary orders of the largest value and
// that slope would carry it there within 50 monitor intervals. (Without the first condition
// the growth of activations from their initial size in a run's first steps, 16 orders below
// f16's range in models/mlp_f16.json, projects an overflow that never comes.)

#define HR_HIST 8
#define HR_MIN 4
#define HR_NEAR 8.0

void headroom_free(ampx_trainer *t) {
    free(t->mon->hr_step), free(t->mon->hr_log2), free(t->mon->hr_count), free(t->mon->hr_warned);
    t->mon->hr_step = t->mon->hr_log2 = NULL;
    t->mon->hr_count                  = NULL;
    t->mon->hr_warned                 = NULL;
}

/* Appends (step, y) to scan position s's history; the slope of y per step over it, or 0. */
static double hr_push(tr_monitor *m, int s, double step, double y) {
    float *xs = m->hr_step + (size_t)s * HR_HIST, *ys = m->hr_log2 + (size_t)s * HR_HIST;
    int n = m->hr_count[s] < HR_HIST ? m->hr_count[s] : HR_HIST;
    if (n == HR_HIST)
        memmove(xs, xs + 1, (HR_HIST - 1) * sizeof *xs),
            memmove(ys, ys + 1, (HR_HIST - 1) * sizeof *ys), n--;
    xs[n] = (float)step, ys[n] = (float)y, n++;
    m->hr_count[s] = n;
    if (n < HR_MIN) return 0;
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (int k = 0; k < n; k++)
        mx += xs[k] / n, my += ys[k] / n;
    for (int k = 0; k < n; k++)
        sxy += (xs[k] - mx) * (ys[k] - my), sxx += (xs[k] - mx) * (xs[k] - mx);
    return sxx > 0 ? sxy / sxx : 0;
}

void headroom_read(ampx_trainer *t, const unsigned char *ms, ampx_step_record *r) {
    tr_monitor *m      = t->mon;
    r->headroom_tensor = r->headroom_warning = "";
    r->headroom_bits = r->headroom_underflow = NAN;
    if (!m->hr_count) {
        size_t n     = (size_t)m->n_scan + 1;
        m->hr_step   = calloc(n * HR_HIST, sizeof *m->hr_step);
        m->hr_log2   = calloc(n * HR_HIST, sizeof *m->hr_log2);
        m->hr_count  = calloc(n, sizeof *m->hr_count);
        m->hr_warned = calloc(n, 1);
        if (!m->hr_step || !m->hr_log2 || !m->hr_count || !m->hr_warned) {
            headroom_free(t);
            return;
        }
    }
    m->hr_warning[0] = 0;
    double least     = INFINITY;
    for (int s = 0; s < m->n_scan; s++) {
        int v            = m->scan_value[s];
        const g_node *nd = &t->g.nodes[m->scan_node[s]];
        ampx_dtype dt    = t->g.values[v].dtype;
        float st[4];
        int32_t cn[3];
        scan_read(t, ms, 0, s, st, cn, NULL);
        if (nd->phase != PHASE_FORWARD || !isfinite(st[0]) || !(st[0] > 0)) continue;
        double bits  = log2(watch_dtype_max(dt)) - log2((double)st[0]);
        double slope = hr_push(m, s, (double)r->step, log2((double)st[0]));
        if (bits < least) {
            least = bits;
            snprintf(m->hr_tensor, sizeof m->hr_tensor, "%s", t->g.values[v].name);
            r->headroom_bits      = bits;
            r->headroom_underflow = st[3] > 0 ? (double)cn[1] / (double)st[3] : 0;
        }
        double horizon = 50.0 * (double)(m->every > 0 ? m->every : 1);
        if (slope > 0 && bits < HR_NEAR && bits / slope < horizon && !m->hr_warned[s] &&
            !m->hr_warning[0]) {
            m->hr_warned[s] = 1;
            snprintf(m->hr_warning, sizeof m->hr_warning,
                     "warning: step %lld: %s (%s, %s) reaches max |x| %.4g, %.1f binary orders "
                     "below %s's largest value, and grows %.2f orders per 100 steps: at this "
                     "rate it overflows in about %.0f steps",
                     (long long)r->step, t->g.values[v].name, g_rule_of(nd->op)->name,
                     ampx_dtype_name(dt), (double)st[0], bits, ampx_dtype_name(dt), 100 * slope,
                     bits / slope);
        }
    }
    if (isfinite(least)) r->headroom_tensor = m->hr_tensor;
    r->headroom_warning = m->hr_warning;
}
