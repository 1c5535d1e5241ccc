/* train_memory.c — trains a JSON model on rows the program makes in its own memory, through
 * the installed C API (docs/C_API.md): the quadrant task, class 1 where x0 x1 > 0, which no
 * linear model solves. Build it against an installed ampx with
 *
 *   cc -std=c11 train_memory.c $(pkg-config --cflags --libs ampx) -o train_memory
 *   ./train_memory xor.json
 *
 * It prints the loss every 100 steps and the held-out accuracy (about 0.97). */
#include <stdint.h>
#include <stdio.h>

#include "ampx/ampx.h"
#include "ampx/train.h"

enum { N_TRAIN = 4000, N_TEST = 1000 };

/* n rows of two values in [-1, 1) from a linear congruential generator, and their classes */
static void make_rows(float *x, int32_t *y, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++) {
        for (int c = 0; c < 2; c++) {
            seed         = seed * 1664525u + 1013904223u;
            x[2 * i + c] = (float)(seed >> 8) / 8388608.0f - 1.0f;
        }
        y[i] = x[2 * i] * x[2 * i + 1] > 0;
    }
}

/* Called with each step's record when the trainer reads them back (every log_every steps);
 * a non-zero return ends the run once that interval's records are delivered. */
static int on_record(void *user, const ampx_step_record *r) {
    (void)user;
    if (r->step % 100 == 0)
        printf("step %lld: loss %.4f, loss scale %g%s\n", (long long)r->step, r->loss,
               (double)r->scale, r->skipped ? " (skipped)" : "");
    return 0;
}

int main(int argc, char **argv) {
    static float x_train[2 * N_TRAIN], x_test[2 * N_TEST];
    static int32_t y_train[N_TRAIN], y_test[N_TEST];
    char err[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.json\n", argv[0]);
        return 2;
    }
    make_rows(x_train, y_train, N_TRAIN, 7);
    make_rows(x_test, y_test, N_TEST, 99);

    ampx_model *m = NULL;
    if (ampx_model_load(argv[1], NULL, &m, err, sizeof err) != AMPX_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    ampx_memory_data data = {.n_train = N_TRAIN,
                             .n_test  = N_TEST,
                             .row     = 2,
                             .x_train = x_train,
                             .x_test  = x_test,
                             .y_train = y_train,
                             .y_test  = y_test};
    ampx_backend *be      = NULL;
    ampx_trainer *t       = NULL;
    ampx_eval_result ev;
    int rc = 1;
    if (ampx_model_set_data(m, &data) != AMPX_OK) {
        fprintf(stderr, "%s: a token model reads no rows\n", argv[1]);
    } else if (ampx_backend_open("cpu", NULL, 0, &be, err, sizeof err) != AMPX_OK ||
               ampx_trainer_create(m, be, &t, err, sizeof err) != AMPX_OK) {
        fprintf(stderr, "%s\n", err);
    } else if (ampx_trainer_run(t, ampx_model_train_config(m)->steps, on_record, NULL) != AMPX_OK ||
               ampx_trainer_evaluate(t, &ev) != AMPX_OK) {
        fprintf(stderr, "%s\n", ampx_trainer_error(t));
    } else {
        printf("held-out accuracy %.4f on %lld rows\n", ev.accuracy, (long long)ev.examples);
        rc = 0;
    }
    ampx_trainer_free(t);
    if (be) ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}
