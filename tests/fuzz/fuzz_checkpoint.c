/* fuzz_checkpoint.c — the checkpoint reader (formats/checkpoint.c) on any bytes, against a
 * trainer of tests/fuzz/tiny.json on the CPU backend: refused with one line, or loaded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/train.h"
#include "formats/checkpoint.h"

static ampx_trainer *trainer;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[1024];
    ampx_backend *be;
    ampx_model *m;
    if (ampx_backend_open(AMPX_FUZZ_CPU_PLUGIN, NULL, 0, &be, err, sizeof err) ||
        ampx_model_load(AMPX_SOURCE_DIR "/tests/fuzz/tiny.json", NULL, &m, err, sizeof err) ||
        ampx_trainer_create(m, be, &trainer, err, sizeof err)) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024] = "";
    if (ck_load_memory(trainer, "fuzz.safetensors", data, size, ERR(err, sizeof err)) != AMPX_OK &&
        (!err[0] || strchr(err, '\n')))
        abort();
    return 0;
}
