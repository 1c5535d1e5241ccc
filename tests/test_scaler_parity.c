/* test_scaler_parity.c — the loss scale a training run records, step by step, against
 * PyTorch's GradScaler and jmp's DynamicLossScale computed here independently.
 *
 * models/mlp.json trains on the CPU backend with a dynamic scaler; non-finite gradients are
 * injected at fixed steps (the same overflow sequence for every case). The records (what
 * `ampx train --metrics` writes) carry the scale after each step's update. Expected values:
 *   PyTorch (_amp_update_scale_cpu_kernel / _cuda_kernel, factors are C++ doubles):
 *     overflow: scale = (float)(scale * backoff)           product in double
 *     growth:   scale = (float)(scale * growth) if finite  product in double
 *   jmp (DynamicLossScale.adjust, jnp float32 arrays, an integer factor):
 *     overflow: scale = max(min_loss_scale, scale / factor)  f32 division
 *     growth:   scale = scale * factor if finite             f32 product
 *   mapped onto the scaler as growth_factor = factor, backoff_factor = 1 / factor,
 *   growth_interval = period, min_scale = min_loss_scale (docs/TRAINING.md).
 * And `ampx train --metrics` writes each scale exactly: the number in the file, read back
 * as a double, is the f32 itself (2^31 is 2147483648, not 2147483650).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/ampx.h"
#include "test_tmp.h"
#include "ampx/inject.h"
#include "ampx/train.h"

#define STEPS 40
/* steps (1-based) whose gradients are made non-finite */
static const int overflow_steps[] = {3, 4, 11, 19, 20, 21, 30};

static int overflows_at(int step) {
    for (size_t i = 0; i < sizeof overflow_steps / sizeof overflow_steps[0]; i++)
        if (overflow_steps[i] == step) return 1;
    return 0;
}

typedef struct scales {
    float at[STEPS + 1]; /* at[s]: the scale after step s */
    int n;
} scales;

static int on_record(void *user, const ampx_step_record *r) {
    scales *s = user;
    if (r->step >= 1 && r->step <= STEPS) s->at[r->step] = r->scale;
    s->n++;
    return 0;
}

/* Trains STEPS steps of mlp.json with the scaler in scaler_json and the overflow sequence. */
static void run(const char *scaler_json, scales *out) {
    char model[1024], policy[512];
    snprintf(model, sizeof model, "%s/models/mlp.json", AMPX_SOURCE_DIR);
    int fd = test_mkstemp(policy, sizeof policy, "ampx_scaler");
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"scaler\": %s}", scaler_json);
    fclose(f);
    ampx_model *m = NULL;
    char err[1024];
    cr_assert_eq(ampx_model_load(model, policy, &m, err, sizeof err), AMPX_OK, "%s", err);
    unlink(policy);
    ampx_model_train_config(m)->log_every = 1;
    ampx_backend *be                      = NULL;
    const char *opts[]                    = {"threads=2"};
    cr_assert_eq(ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 1, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    ampx_trainer *t = NULL;
    cr_assert_eq(ampx_trainer_create(m, be, &t, err, sizeof err), AMPX_OK, "%s", err);
    memset(out, 0, sizeof *out);
    for (int step = 1; step <= STEPS; step++) {
        if (overflows_at(step)) ampx_trainer_inject_nonfinite(t, step, 0);
        cr_assert_eq(ampx_trainer_run(t, step, on_record, out), AMPX_OK, "%s",
                     ampx_trainer_error(t));
    }
    cr_assert_eq(out->n, STEPS, "%d records for %d steps", out->n, STEPS);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

/* GradScaler.update() with growth_factor / backoff_factor as Python floats. */
static void pytorch(float init, double growth, double backoff, int interval, scales *out) {
    float scale = init;
    int tracker = 0;
    for (int step = 1; step <= STEPS; step++) {
        if (overflows_at(step)) {
            scale   = (float)((double)scale * backoff);
            tracker = 0;
        } else if (++tracker == interval) {
            float next = (float)((double)scale * growth);
            if (isfinite(next)) scale = next;
            tracker = 0;
        }
        out->at[step] = scale;
    }
}

/* jmp.DynamicLossScale(loss_scale, period, factor, min_loss_scale).adjust(). */
static void jmp(float init, int period, int factor, float min_loss_scale, scales *out) {
    float scale = init;
    int counter = 0;
    for (int step = 1; step <= STEPS; step++) {
        int finite = !overflows_at(step);
        if (finite && counter == period - 1) {
            float grown = scale * (float)factor;
            if (isfinite(grown)) scale = grown;
        } else if (!finite) {
            float down = scale / (float)factor;
            scale      = down > min_loss_scale ? down : min_loss_scale;
        }
        counter       = ((counter + 1) % period) * finite;
        out->at[step] = scale;
    }
}

static void expect_same(const scales *got, const scales *want, const char *what) {
    for (int s = 1; s <= STEPS; s++) {
        uint32_t g, w;
        memcpy(&g, &got->at[s], 4);
        memcpy(&w, &want->at[s], 4);
        cr_expect_eq(g, w, "%s: step %d: scale %.9g (0x%08x), expected %.9g (0x%08x)", what, s,
                     (double)got->at[s], g, (double)want->at[s], w);
    }
}

Test(pytorch, grad_scaler_sequence_bit_for_bit) {
    static const struct {
        double growth, backoff;
        const char *json;
    } cases[] = {
        {2.0, 0.5,
         "{\"type\":\"dynamic\",\"init_scale\":65536,\"growth_factor\":2,\"backoff_factor\":0.5,"
         "\"growth_interval\":3}"},
        {3.0, 0.25,
         "{\"type\":\"dynamic\",\"init_scale\":65536,\"growth_factor\":3,"
         "\"backoff_factor\":0.25,\"growth_interval\":3}"},
        {1.1, 0.7,
         "{\"type\":\"dynamic\",\"init_scale\":65536,\"growth_factor\":1.1,"
         "\"backoff_factor\":0.7,\"growth_interval\":1}"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        scales got, want;
        run(cases[c].json, &got);
        int interval = c == 2 ? 1 : 3;
        pytorch(65536.0f, cases[c].growth, cases[c].backoff, interval, &want);
        char what[64];
        snprintf(what, sizeof what, "growth %g backoff %g", cases[c].growth, cases[c].backoff);
        expect_same(&got, &want, what);
    }
}

/* The case above is sensitive to the rounding: with the factors rounded to f32 first (what
 * the scaler did before the doubles travelled in SCALER_UPDATE's args), 1.1/0.7 departs
 * from GradScaler within the run. */
Test(pytorch, factors_rounded_to_f32_would_differ) {
    scales exact, rounded;
    pytorch(65536.0f, 1.1, 0.7, 1, &exact);
    pytorch(65536.0f, (double)1.1f, (double)0.7f, 1, &rounded);
    int first = 0;
    for (int s = 1; s <= STEPS && !first; s++)
        if (exact.at[s] != rounded.at[s]) first = s;
    cr_expect(first > 0 && first <= STEPS, "f32-rounded factors never depart from GradScaler");
}

Test(jmp, dynamic_loss_scale_maps_onto_the_scaler_keys) {
    /* jmp.DynamicLossScale(loss_scale=2**15, period=4, factor=3, min_loss_scale=2**12):
     * growth_factor 3, backoff_factor 1/3, growth_interval 4, min_scale 4096 */
    scales got, want;
    run("{\"type\":\"dynamic\",\"init_scale\":32768,\"growth_factor\":3,"
        "\"backoff_factor\":0.3333333333333333,\"growth_interval\":4,\"min_scale\":4096}",
        &got);
    jmp(32768.0f, 4, 3, 4096.0f, &want);
    expect_same(&got, &want, "jmp factor 3");
    /* and jmp's defaults (period 2000, factor 2, min_loss_scale 1) over these steps */
    run("{\"type\":\"dynamic\",\"init_scale\":32768,\"growth_factor\":2,"
        "\"backoff_factor\":0.5,\"growth_interval\":2000,\"min_scale\":1}",
        &got);
    jmp(32768.0f, 2000, 2, 1.0f, &want);
    expect_same(&got, &want, "jmp defaults");
}

/* The metrics file of the command line: every "scale" parses to exactly the f32 GradScaler
 * holds (no digits lost, none invented). init 2^31 and growth 1.1 make long integers. */
Test(metrics, scale_is_written_exactly) {
    char policy[512], metrics[512];
    int fd = test_mkstemp(policy, sizeof policy, "ampx_scaler"),
        fm = test_mkstemp(metrics, sizeof metrics, "ampx_metrics");
    cr_assert(fd >= 0 && fm >= 0);
    close(fm);
    FILE *f = fdopen(fd, "w");
    fputs("{\"scaler\":{\"type\":\"dynamic\",\"init_scale\":2147483648,"
          "\"growth_factor\":1.1,\"backoff_factor\":0.7,\"growth_interval\":1}}",
          f);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s train %s/models/mlp.json --backend %s --policy %s --steps 6 --log-every 1 "
             "--metrics %s --quiet >/dev/null 2>&1",
             AMPX_TEST_CLI, AMPX_SOURCE_DIR, AMPX_TEST_CPU_PLUGIN, policy, metrics);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    float want = 2147483648.0f;
    FILE *m    = fopen(metrics, "r");
    cr_assert(m);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, m)) {
        const char *at = strstr(line, "\"scale\":");
        cr_assert(at, "no scale in %s", line);
        double got = strtod(at + 8, NULL);
        want       = (float)((double)want * 1.1);
        cr_expect_eq(got, (double)want, "step %d: the file says %.17g, the scale is %.17g", n + 1,
                     got, (double)want);
        n++;
    }
    fclose(m);
    cr_expect_eq(n, 6, "%d metrics lines", n);
    unlink(policy);
    unlink(metrics);
}
