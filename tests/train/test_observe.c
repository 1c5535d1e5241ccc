/* test_observe.c — the gradient-health monitor's figures on a crafted gradient, its warnings
 * at their thresholds, and the run-health stop for weights an update made non-finite. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/ampx.h"
#include "ampx/inject.h"
#include "ampx/train.h"
#include "../test_tmp.h"

static ampx_backend *open_cpu(void) {
    ampx_backend *be = NULL;
    char err[512];
    const char *opts[] = {"threads=2"};
    cr_assert_eq(ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 1, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    return be;
}

static ampx_trainer *open_model(const char *model, int64_t log_every, ampx_model **m,
                                ampx_backend **be) {
    char err[1024], path[1024];
    snprintf(path, sizeof path, "%s/models/%s", AMPX_SOURCE_DIR, model);
    cr_assert_eq(ampx_model_load(path, NULL, m, err, sizeof err), AMPX_OK, "%s", err);
    if (log_every) ampx_model_train_config(*m)->log_every = log_every;
    *be             = open_cpu();
    ampx_trainer *t = NULL;
    cr_assert_eq(ampx_trainer_create(*m, *be, &t, err, sizeof err), AMPX_OK, "%s", err);
    return t;
}

// ---------------------------------------------------------------------------------------
// Figures

Test(monitor, figures_on_a_crafted_gradient_are_exact) {
    ampx_model *m;
    ampx_backend *be;
    ampx_trainer *t = open_model("mlp_f16.json", 0, &m, &be); /* fc1, fc2 in f16, logits f32 */
    int n_params    = ampx_trainer_n_params(t);
    cr_assert_eq(strcmp(ampx_trainer_param_name(t, 0), "fc1.weight"), 0);
    for (int i = 0; i < n_params; i++) {
        uint64_t n = ampx_trainer_param_size(t, i);
        float *g   = malloc(n * sizeof *g);
        double sq  = 0;
        for (uint64_t k = 0; k < n; k++) {
            /* per 32 values: 4 zeros, 3 below f16's smallest normal (but f32 normals), one
             * +inf, one -inf, two NaN, the rest 0.5 or -0.25; one 7.25 as the maximum */
            uint64_t r = k % 32;
            g[k]       = r < 4     ? 0.0f
                         : r < 7   ? 1e-6f
                         : r == 7  ? INFINITY
                         : r == 8  ? -INFINITY
                         : r < 11  ? NAN
                         : (k & 1) ? 0.5f
                                   : -0.25f;
            if (k == 12) g[k] = 7.25f;
            if (isfinite(g[k])) sq += (double)g[k] * g[k];
        }
        cr_assert_eq(ampx_trainer_set(t, i, 1, g), AMPX_OK, "%s", ampx_trainer_error(t));
        free(g);
        (void)sq;
    }
    ampx_tensor_health h[64];
    cr_assert_eq(ampx_trainer_grad_health(t, h), AMPX_OK, "%s", ampx_trainer_error(t));
    for (int i = 0; i < n_params; i++) {
        uint64_t n = ampx_trainer_param_size(t, i), zeros = 0, tiny = 0, inf = 0, nan = 0, fin = 0;
        double sq = 0, mx = 0;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t r = k % 32;
            zeros += r < 4;
            tiny += r >= 4 && r < 7;
            inf += r == 7 || r == 8;
            nan += r == 9 || r == 10;
            if (r >= 11 || r < 7) {
                double v = k == 12   ? 7.25
                           : r < 4   ? 0
                           : r < 7   ? (double)1e-6f
                           : (k & 1) ? 0.5
                                     : -0.25;
                sq += v * v, fin++;
                if (fabs(v) > mx) mx = fabs(v);
            }
        }
        const ampx_tensor_health *x = &h[i];
        const char *name            = ampx_trainer_param_name(t, i);
        int f32_layer               = !strncmp(name, "logits", 6);
        cr_assert_str_eq(x->name, name);
        cr_assert_eq(x->n, n);
        cr_assert_eq(x->compute, f32_layer ? AMPX_F32 : AMPX_F16, "%s", name);
        cr_assert_eq(x->max_abs, mx, "%s max %g, expected %g", name, x->max_abs, mx);
        cr_assert_eq(x->zero_frac, (double)zeros / (double)n, "%s zeros", name);
        /* 1e-6 is below f16's smallest normal 2^-14 but a normal f32 */
        cr_assert_eq(x->underflow_frac, f32_layer ? 0.0 : (double)tiny / (double)n, "%s %g", name,
                     x->underflow_frac);
        cr_assert_eq(x->inf, (int64_t)inf, "%s inf %lld", name, (long long)x->inf);
        cr_assert_eq(x->nan, (int64_t)nan, "%s nan %lld", name, (long long)x->nan);
        double rms = sqrt(sq / (double)fin);
        cr_assert(fabs(x->rms - rms) <= 1e-6 * rms, "%s rms %g, expected %g", name, x->rms, rms);
        cr_assert_str_eq(x->layer, f32_layer ? "logits" : name[2] == '1' ? "fc1" : "fc2");
    }
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

// ---------------------------------------------------------------------------------------
// Warnings at their thresholds

typedef struct lines {
    int n;
    char last[1024];
} lines;

static void collect(void *user, const char *line) {
    lines *l = user;
    l->n++;
    snprintf(l->last, sizeof l->last, "%s", line);
}

static int warn(ampx_tensor_health h, double scale, double min_scale, lines *l) {
    ampx_health_limits lim;
    ampx_health_defaults(&lim);
    memset(l, 0, sizeof *l);
    return ampx_health_warnings(&h, 1, &lim, scale, min_scale, collect, l);
}

static ampx_tensor_health healthy(void) {
    return (ampx_tensor_health){.name      = "fc2.weight",
                                .layer     = "fc2",
                                .compute   = AMPX_F16,
                                .n         = 1000,
                                .max_abs   = 0.1,
                                .rms       = 0.01,
                                .zero_frac = 0.1};
}

Test(monitor, warnings_fire_at_their_thresholds_and_not_below) {
    ampx_health_limits lim;
    ampx_health_defaults(&lim);
    lines l;
    ampx_tensor_health h = healthy();
    cr_assert_eq(warn(h, 1024, 0, &l), 0, "%s", l.last);

    h.underflow_frac = lim.underflow_frac; /* at the threshold */
    cr_assert_eq(warn(h, 1024, 0, &l), 1);
    cr_assert(strstr(l.last, "fc2.weight") && strstr(l.last, "layer fc2") &&
                  strstr(l.last, "raise the loss scale") && strstr(l.last, "f16"),
              "%s", l.last);
    h.underflow_frac = lim.underflow_frac * 0.999; /* just below */
    cr_assert_eq(warn(h, 1024, 0, &l), 0, "%s", l.last);

    h = healthy(), h.inf = 3;
    cr_assert_eq(warn(h, 1024, 0, &l), 0, "overflow above the minimum scale is the scaler's job");
    cr_assert_eq(warn(h, 128, 128, &l), 1, "at min_scale");
    cr_assert(strstr(l.last, "minimum loss scale") && strstr(l.last, "layer fc2"), "%s", l.last);
    cr_assert_eq(warn(h, 256, 128, &l), 0, "above min_scale");
    cr_assert_eq(warn(h, 1, 0, &l), 1, "no floor: scale 1 is the minimum");
    h.inf = 0, h.nan = 1;
    cr_assert_eq(warn(h, 128, 128, &l), 1, "NaN counts as overflow");

    h = healthy(), h.max_abs = lim.vanish_max_abs;
    cr_assert_eq(warn(h, 1024, 0, &l), 1);
    cr_assert(strstr(l.last, "vanish"), "%s", l.last);
    h.max_abs = lim.vanish_max_abs * 1.001;
    cr_assert_eq(warn(h, 1024, 0, &l), 0, "%s", l.last);
    h.zero_frac = lim.vanish_zero_frac;
    cr_assert_eq(warn(h, 1024, 0, &l), 1);
    h.zero_frac = lim.vanish_zero_frac - 0.001;
    cr_assert_eq(warn(h, 1024, 0, &l), 0, "%s", l.last);
}

// ---------------------------------------------------------------------------------------
// Run health

Test(health, weights_made_nonfinite_by_an_update_stop_the_run) {
    ampx_model *m;
    ampx_backend *be;
    ampx_trainer *t = open_model("mlp.json", 5, &m, &be);
    ampx_trainer_inject_nonfinite_update(t, 7, 2);
    cr_assert_eq(ampx_trainer_run(t, 5, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    ampx_status st = ampx_trainer_run(t, 60, NULL, NULL);
    cr_assert_eq(st, AMPX_ERR_INVALID);
    const char *e = ampx_trainer_error(t);
    cr_assert(strstr(e, "weights became non-finite") && strstr(e, "fc2.weight"), "%s", e);
    cr_assert(ampx_trainer_step(t) < 60, "the run went on to step %lld",
              (long long)ampx_trainer_step(t));
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

// ---------------------------------------------------------------------------------------
// The divergence rule over a resume: the reference loss is the run's first applied step's,
// carried in the checkpoint, not the resumed process's first step (which, late in a run,
// is far lower: a rise the straight run takes in its stride then read as divergence).

static const char *xor_json =
    "{\"name\":\"xor\",\"inputs\":{\"x\":{\"dtype\":\"f32\",\"shape\":[2]},"
    "\"y\":{\"dtype\":\"i32\",\"classes\":2}},\"layers\":[{\"name\":\"h\",\"type\":\"dense\","
    "\"units\":32,\"activation\":\"relu\"},{\"name\":\"out\",\"type\":\"dense\",\"units\":2}],"
    "\"loss\":{\"type\":\"softmax_cross_entropy\",\"logits\":\"out\",\"labels\":\"y\"},"
    "\"policy\":\"mixed_bf16\",\"scaler\":\"dynamic\",\"optimizer\":{\"type\":\"adamw\","
    "\"lr\":0.01},\"train\":{\"steps\":400,\"batch\":32,\"seed\":1,\"log_every\":10}}";

enum { FLIP_AT = 205 }; /* micro-batches from here on carry labels that teach nothing */

/* The sign of x0 as the class, a fresh draw per micro-batch (learned to a loss near 0.01 by
 * step 200); from FLIP_AT on, coin flips as labels:
 * the loss rises to about ln 2 and stays there (below ten times the run's start, ln 2). */
static int quadrants(void *user, int64_t micro, int64_t rows, float *x, int32_t *y) {
    (void)user;
    uint32_t seed = 1000u + (uint32_t)micro;
    for (int64_t i = 0; i < rows; i++) {
        for (int c = 0; c < 2; c++) {
            seed         = seed * 1664525u + 1013904223u;
            x[2 * i + c] = (float)(seed >> 8) / 8388608.0f - 1.0f;
        }
        seed = seed * 1664525u + 1013904223u;
        y[i] = micro >= FLIP_AT ? (int32_t)(seed >> 31) : x[2 * i] > 0;
    }
    return 0;
}

typedef struct losses {
    double first, max_after;
} losses;

static int note_loss(void *user, const ampx_step_record *r) {
    losses *l = user;
    if (l->first == 0) l->first = r->loss;
    if (r->loss > l->max_after) l->max_after = r->loss;
    return 0;
}

/* A fresh file in $TMPDIR for the model (xor_trainer writes it), and its checkpoint's path. */
static void temp_model(char *model, size_t cap, char *ck, size_t ck_cap) {
    int fd = test_mkstemp(model, cap, "ampx_health");
    cr_assert(fd >= 0);
    close(fd);
    snprintf(ck, ck_cap, "%s.st", model);
}

static ampx_trainer *xor_trainer(ampx_model **m, ampx_backend **be, char *path) {
    static float x[2 * 64], xte[2 * 64];
    static int32_t y[64], yte[64];
    ampx_memory_data d = {64, 64, 2, x, xte, y, yte};
    char err[1024];
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(xor_json, f) >= 0 && !fclose(f));
    cr_assert_eq(ampx_model_load(path, NULL, m, err, sizeof err), AMPX_OK, "%s", err);
    cr_assert_eq(ampx_model_set_data(*m, &d), AMPX_OK);
    *be             = open_cpu();
    ampx_trainer *t = NULL;
    cr_assert_eq(ampx_trainer_create(*m, *be, &t, err, sizeof err), AMPX_OK, "%s", err);
    cr_assert_eq(ampx_trainer_set_batches(t, quadrants, NULL), AMPX_OK);
    return t;
}

Test(health, a_resume_judges_divergence_as_the_straight_run) {
    char model[512], ck[520];
    temp_model(model, sizeof model, ck, sizeof ck);
    ampx_model *m;
    ampx_backend *be;
    char err[1024];
    /* the straight run trains through the flip */
    ampx_trainer *t = xor_trainer(&m, &be, model);
    losses straight = {0, 0};
    cr_assert_eq(ampx_trainer_run(t, 400, note_loss, &straight), AMPX_OK, "straight run: %s",
                 ampx_trainer_error(t));
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    /* the same run stopped at step 200 and resumed in a new trainer */
    t = xor_trainer(&m, &be, model);
    cr_assert_eq(ampx_trainer_run(t, 200, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    cr_assert_eq(ampx_trainer_save(t, ck, err, sizeof err), AMPX_OK, "%s", err);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    ampx_trainer *r = xor_trainer(&m, &be, model);
    cr_assert_eq(ampx_trainer_load(r, ck, err, sizeof err), AMPX_OK, "%s", err);
    losses resumed = {0, 0};
    ampx_status st = ampx_trainer_run(r, 400, note_loss, &resumed);
    /* the scenario is the reported one: the coin-flip labels lift the loss above ten times the
     * resumed process's first loss, not above ten times the run's start */
    cr_assert_gt(resumed.max_after, 10 * resumed.first, "max %g, first resumed %g",
                 resumed.max_after, resumed.first);
    cr_assert_lt(resumed.max_after, 10 * straight.first, "max %g, start %g", resumed.max_after,
                 straight.first);
    cr_expect_eq(st, AMPX_OK, "the resumed run stopped: %s", ampx_trainer_error(r));
    cr_expect_eq(ampx_trainer_step(r), 400);
    ampx_trainer_free(r);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(ck), unlink(model);
}

/* A checkpoint written before the reference was saved: its field blanked out (spaces, so the
 * header keeps its length and stays valid JSON). */
static void drop_start_loss(const char *path) {
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    uint64_t n = 0;
    cr_assert_eq(fread(&n, 8, 1, f), 1);
    char *h = malloc(n + 1);
    cr_assert(h && fread(h, 1, n, f) == n);
    h[n]     = 0;
    char *at = strstr(h, ",\"health_start_loss\":\"");
    cr_assert(at, "no health_start_loss in the checkpoint");
    char *end = strchr(at + strlen(",\"health_start_loss\":\""), '"');
    memset(at, ' ', (size_t)(end + 1 - at));
    cr_assert_eq(fseek(f, 8, SEEK_SET), 0);
    cr_assert_eq(fwrite(h, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    free(h);
}

Test(health, a_resume_without_the_reference_takes_a_window_of_its_own) {
    char model[512], ck[520];
    temp_model(model, sizeof model, ck, sizeof ck);
    ampx_model *m;
    ampx_backend *be;
    char err[1024];
    ampx_trainer *t = xor_trainer(&m, &be, model);
    cr_assert_eq(ampx_trainer_run(t, 200, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    cr_assert_eq(ampx_trainer_save(t, ck, err, sizeof err), AMPX_OK, "%s", err);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    drop_start_loss(ck);
    /* the reference is the largest loss of the resumed run's first 50 applied steps (the
     * change of task at step 205 among them), not its first step's 0.03 */
    ampx_trainer *r = xor_trainer(&m, &be, model);
    cr_assert_eq(ampx_trainer_load(r, ck, err, sizeof err), AMPX_OK, "%s", err);
    cr_expect_eq(ampx_trainer_run(r, 400, NULL, NULL), AMPX_OK, "the resumed run stopped: %s",
                 ampx_trainer_error(r));
    cr_expect_eq(ampx_trainer_step(r), 400);
    ampx_trainer_free(r);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(ck), unlink(model);
}
