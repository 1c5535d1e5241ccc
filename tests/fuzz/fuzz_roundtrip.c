/* fuzz_roundtrip.c — a model file through the whole way to a checkpoint and back: loaded
 * (passes/), given a trainer on the CPU backend (train/: data, planner, executor), trained one
 * step, saved, and loaded into a second trainer of the same model, whose weights and step
 * must then equal the first's bit for bit. A model or its data refused is one line; a
 * model planned at more than 16 MiB is skipped (the harness is after logic, not memory). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/train.h"
#include "fuzz_common.h"

static ampx_backend *be;
static char ck_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[1024];
    if (ampx_backend_open(AMPX_FUZZ_CPU_PLUGIN, NULL, 0, &be, err, sizeof err)) {
        fprintf(stderr, "fuzz_roundtrip: %s\n", err);
        abort();
    }
    snprintf(ck_path, sizeof ck_path, "/tmp/ampx-fuzz-roundtrip-%d.safetensors", (int)getpid());
    return 0;
}

static void one_line(const char *err) {
    if (!err[0] || strchr(err, '\n')) abort();
}

/* Every master weight of a and b equal, bit for bit. */
static void same_weights(ampx_trainer *a, ampx_trainer *b) {
    int n = ampx_trainer_n_params(a);
    if (n != ampx_trainer_n_params(b)) abort();
    for (int i = 0; i < n; i++) {
        uint64_t k = ampx_trainer_param_size(a, i);
        float *x = malloc(sizeof *x * (k ? k : 1)), *y = malloc(sizeof *y * (k ? k : 1));
        if (x && y && !ampx_trainer_get(a, i, 0, x) && !ampx_trainer_get(b, i, 0, y) &&
            memcmp(x, y, sizeof *x * k)) {
            fprintf(stderr, "fuzz_roundtrip: %s differs after a save and a load\n",
                    ampx_trainer_param_name(a, i));
            abort();
        }
        free(x), free(y);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    char err[1024]   = "";
    ampx_model *m = NULL, *m2 = NULL;
    ampx_trainer *t = NULL, *t2 = NULL;
    ampx_memory mem;
    if (ampx_model_load(path, NULL, &m, err, sizeof err) != AMPX_OK) {
        one_line(err);
        return 0;
    }
    if (ampx_model_memory(m, 0, &mem, err, sizeof err) != AMPX_OK || mem.total > (16u << 20))
        goto out;
    if (ampx_trainer_create(m, be, &t, err, sizeof err) != AMPX_OK) {
        one_line(err);
        goto out;
    }
    if (ampx_trainer_run(t, 1, NULL, NULL) != AMPX_OK) { /* a run-health stop is one line */
        one_line(ampx_trainer_error(t));
        goto out;
    }
    unlink(ck_path);
    if (ampx_trainer_save(t, ck_path, err, sizeof err) != AMPX_OK) {
        one_line(err); /* weights made non-finite by the step: refused, nothing written */
        goto out;
    }
    if (ampx_model_load(path, NULL, &m2, err, sizeof err) != AMPX_OK ||
        ampx_trainer_create(m2, be, &t2, err, sizeof err) != AMPX_OK) {
        fprintf(stderr, "fuzz_roundtrip: the same model twice: %s\n", err);
        abort();
    }
    if (ampx_trainer_load(t2, ck_path, err, sizeof err) != AMPX_OK) {
        fprintf(stderr, "fuzz_roundtrip: a checkpoint just saved is refused: %s\n", err);
        abort();
    }
    if (ampx_trainer_step(t2) != ampx_trainer_step(t)) abort();
    same_weights(t, t2);
out:
    unlink(ck_path);
    ampx_trainer_free(t2);
    ampx_trainer_free(t);
    ampx_model_free(m2);
    ampx_model_free(m);
    return 0;
}
