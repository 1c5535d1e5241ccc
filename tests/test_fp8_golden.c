/* test_fp8_golden.c — FP8_SCALE_UPDATE against Transformer Engine, bit for bit.
 *
 * tests/data/fp8_te_golden.txt holds Transformer Engine's delayed-scaling update
 * (_default_get_amax_and_update_history, _default_sf_compute, scale_inv = 1 / scale) as
 * PyTorch computes it in float32 (tools/fp8/te_golden.py wrote it), over a recorded sequence
 * of per-tensor amaxes with zeros, spikes, inf, NaN and amaxes too small for the quotient.
 * Each step here writes that step's amaxes into row 0 of the state's history (as the
 * quantizing casts do) and runs one FP8_SCALE_UPDATE; the scales and their inverses after
 * every step, and the history at the end, must equal the file's bits. Every backend of
 * AMPX_CONFORMANCE_BACKENDS (default cpu) runs it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"

#ifndef AMPX_SOURCE_DIR
#error "AMPX_SOURCE_DIR must be defined"
#endif

#define GOLDEN AMPX_SOURCE_DIR "/tests/data/fp8_te_golden.txt"

/* Reads `want` f32 bit patterns after `tag` from line; 0 on success. */
static int read_bits(const char *line, const char *tag, uint32_t *out, uint64_t want) {
    size_t lt = strlen(tag);
    if (strncmp(line, tag, lt) != 0 || line[lt] != ' ') return -1;
    const char *p = line + lt;
    for (uint64_t i = 0; i < want; i++) {
        char *end;
        unsigned long v = strtoul(p, &end, 16);
        if (end == p) return -1;
        out[i] = (uint32_t)v;
        p      = end;
    }
    return 0;
}

typedef struct golden_run {
    const ampx_backend_iface *ifc;
    ampx_context *ctx;
    ampx_backend *be;
    const char *name;
} golden_run;

/* One config of the file from its "config" line on; returns the number of steps checked. */
static uint64_t run_config(golden_run *g, FILE *f, char *line, size_t cap) {
    char algo[32];
    int margin;
    unsigned hist;
    unsigned long long n, steps;
    cr_assert_eq(sscanf(line, "config %31s %d %u %llu %llu", algo, &margin, &hist, &n, &steps), 5,
                 "bad config line: %s", line);
    uint64_t ns  = (2 + (uint64_t)hist) * n;
    uint32_t *st = calloc(ns, 4), *want = calloc(ns > n ? ns : n, 4), *fmax = calloc(n, 4);
    float one      = 1.0f;
    ampx_buffer *B = NULL, *F = NULL;
    cr_assert(st && want && fmax);
    for (uint64_t i = 0; i < 2 * n; i++)
        memcpy(&st[i], &one, 4); /* scale and scale_inv start at 1, the history at 0 */
    cr_assert(fgets(line, (int)cap, f) && read_bits(line, "fmax", fmax, n) == 0);
    cr_assert_eq(g->ifc->buffer_alloc(g->ctx, ns * 4, &B), AMPX_OK);
    cr_assert_eq(g->ifc->buffer_alloc(g->ctx, n * 4, &F), AMPX_OK);
    cr_assert_eq(g->ifc->buffer_write(g->ctx, B, 0, st, ns * 4), AMPX_OK);
    cr_assert_eq(g->ifc->buffer_write(g->ctx, F, 0, fmax, n * 4), AMPX_OK);
    ampx_fp8_scale_update_args a = {.size    = sizeof a,
                                    .algo    = strcmp(algo, "max") == 0 ? AMPX_FP8_AMAX_MAX
                                                                        : AMPX_FP8_AMAX_MOST_RECENT,
                                    .n       = n,
                                    .history = hist,
                                    .margin  = margin,
                                    .state   = {B, 0, AMPX_F32},
                                    .fp8_max = {F, 0, AMPX_F32}};
    ampx_status (*update)(ampx_context *, const ampx_fp8_scale_update_args *) =
        g->ifc->ops->fp8_scale_update;
    for (uint64_t s = 0; s < steps; s++) {
        cr_assert(fgets(line, (int)cap, f) && read_bits(line, "amax", want, n) == 0);
        cr_assert_eq(g->ifc->buffer_write(g->ctx, B, 2 * n * 4, want, n * 4), AMPX_OK);
        cr_assert_eq(update(g->ctx, &a), AMPX_OK, "%s: %s", g->name,
                     ampx_backend_last_error(g->be));
        cr_assert_eq(g->ifc->buffer_read(g->ctx, B, 0, st, 2 * n * 4), AMPX_OK);
        for (int k = 0; k < 2; k++) {
            cr_assert(fgets(line, (int)cap, f) &&
                      read_bits(line, k ? "scale_inv" : "scale", want, n) == 0);
            for (uint64_t i = 0; i < n; i++)
                cr_assert_eq(st[k * n + i], want[i],
                             "%s: %s margin %d history %u, step %llu: %s[%llu] = %08x, "
                             "Transformer Engine %08x",
                             g->name, algo, margin, hist, (unsigned long long)s + 1,
                             k ? "scale_inv" : "scale", (unsigned long long)i, st[k * n + i],
                             want[i]);
        }
    }
    cr_assert(fgets(line, (int)cap, f) && read_bits(line, "history", want, hist * n) == 0);
    cr_assert_eq(g->ifc->buffer_read(g->ctx, B, 2 * n * 4, st, hist * n * 4), AMPX_OK);
    for (uint64_t e = 0; e < hist * n; e++)
        cr_assert_eq(st[e], want[e], "%s: final history[%llu] = %08x, Transformer Engine %08x",
                     g->name, (unsigned long long)e, st[e], want[e]);
    g->ifc->buffer_free(g->ctx, B);
    g->ifc->buffer_free(g->ctx, F);
    free(st), free(want), free(fmax);
    return steps;
}

Test(fp8_golden, transformer_engine_delayed_scaling) {
    const char *env = getenv("AMPX_CONFORMANCE_BACKENDS");
    char list[1024];
    snprintf(list, sizeof list, "%s", env && *env ? env : "cpu");
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    cr_assert(line);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        golden_run g = {.name = name};
        char err[512];
        cr_assert_eq(ampx_backend_open(name, NULL, 0, &g.be, err, sizeof err), AMPX_OK,
                     "cannot open backend %s: %s", name, err);
        g.ifc = ampx_backend_iface_of(g.be);
        g.ctx = ampx_backend_context(g.be);
        cr_assert(ampx_backend_op_slot(g.be, AMPX_OP_FP8_SCALE_UPDATE),
                  "%s has no fp8_scale_update", name);
        FILE *f = fopen(GOLDEN, "r");
        cr_assert(f, "cannot open %s", GOLDEN);
        uint64_t configs = 0, steps = 0;
        while (fgets(line, (int)cap, f)) {
            if (line[0] == '#') continue;
            steps += run_config(&g, f, line, cap);
            configs++;
        }
        fclose(f);
        cr_assert_eq(configs, 3, "%s holds %llu configs, not 3", GOLDEN,
                     (unsigned long long)configs);
        cr_log_info("%s: %llu steps of 3 configs equal Transformer Engine's", name,
                    (unsigned long long)steps);
        ampx_backend_close(g.be);
    }
    free(line);
}
