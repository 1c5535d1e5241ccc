/* fuzz_metrics.c — the metrics file `ampx plot` reads (tools/metrics_file.c): any bytes give
 * the run's curves or one "FILE:LINE: message", every series within its capacity. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_file.h"

static void check(const series *s) {
    if (s->n < 0 || s->n > s->cap || (s->n && (!s->x || !s->y))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static metrics_run r;
    memset(&r, 0, sizeof r);
    char err[512] = "";
    if (metrics_parse(&r, (const char *)data, size, "fuzz.jsonl", err, sizeof err) == 0) {
        if (!r.loss.n && !r.scale.n) abort(); /* accepted without a step line */
    } else if (!err[0] || strchr(err, '\n')) {
        abort(); /* a failure is exactly one line */
    }
    const series *all[] = {&r.loss, &r.val, &r.scale, &r.lr, &r.gnorm, &r.skipped};
    for (int i = 0; i < 6; i++)
        check(all[i]);
    if (r.n_layers < 0 || r.n_layers > METRICS_MAX_LAYERS) abort();
    for (int l = 0; l < METRICS_MAX_LAYERS; l++) {
        check(&r.heat[l]);
        if (l >= r.n_layers && r.heat[l].n) abort();
    }
    metrics_free(&r);
    return 0;
}
