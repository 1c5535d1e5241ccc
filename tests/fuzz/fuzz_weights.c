/* fuzz_weights.c — weights files ampx reads and writes (formats/export.c, formats/llmc.c): the
 * first byte picks what the rest is.
 *   0, 1, 2  a checkpoint exported to plain safetensors in f32, bf16 or f16 (ampx export);
 *            an export that succeeds must give a file the safetensors reader takes
 *   3        safetensors weights for --init-from into a trainer of tests/fuzz/tiny.json
 *   4        an llm.c GPT-2 checkpoint for --init-from into a sampler of
 *            tests/fuzz/gpt2_tiny.json (tests/train/llmc_gen.py's model shrunk further)
 * Each is refused with one line, or read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/train.h"
#include "fuzz_common.h"
#include "formats/safetensors.h"

static ampx_trainer *tiny, *gpt;
static char out_path[64];

static ampx_trainer *make(ampx_backend *be, const char *model, int sampler) {
    char err[1024];
    ampx_model *m;
    ampx_trainer *t = NULL;
    if (ampx_model_load(model, NULL, &m, err, sizeof err) ||
        (sampler ? ampx_trainer_create_sampler(m, be, &t, err, sizeof err)
                 : ampx_trainer_create(m, be, &t, err, sizeof err))) {
        fprintf(stderr, "fuzz_weights: %s\n", err);
        abort();
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[1024];
    ampx_backend *be;
    if (ampx_backend_open(AMPX_FUZZ_CPU_PLUGIN, NULL, 0, &be, err, sizeof err)) {
        fprintf(stderr, "fuzz_weights: %s\n", err);
        abort();
    }
    tiny = make(be, AMPX_SOURCE_DIR "/tests/fuzz/tiny.json", 0);
    gpt  = make(be, AMPX_SOURCE_DIR "/tests/fuzz/gpt2_tiny.json", 1);
    snprintf(out_path, sizeof out_path, "/tmp/ampx-fuzz-weights-%d.safetensors", (int)getpid());
    return 0;
}

static void one_line(ampx_status st, const char *err) {
    if (st != AMPX_OK && (!err[0] || strchr(err, '\n'))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *in = fuzz_file(data + 1, size - 1);
    char err[1024] = "";
    ampx_status st;
    switch (data[0] % 5) {
    case 0:
    case 1:
    case 2: {
        static const ampx_dtype dt[] = {AMPX_F32, AMPX_BF16, AMPX_F16};
        unlink(out_path);
        st = ampx_checkpoint_export(in, out_path, dt[data[0] % 5], err, sizeof err);
        one_line(st, err);
        if (st == AMPX_OK) { /* what export wrote reads back as safetensors */
            unsigned char *file = NULL;
            json_value *root    = NULL;
            const unsigned char *d;
            uint64_t n;
            if (st_read(out_path, &file, &root, &d, &n, ERR(err, sizeof err)) != AMPX_OK) {
                fprintf(stderr, "fuzz_weights: the export does not read back: %s\n", err);
                abort();
            }
            json_free(root);
            free(file);
        }
        unlink(out_path);
        break;
    }
    case 3: one_line(ampx_trainer_init_from(tiny, in, data[0] & 8, err, sizeof err), err); break;
    default: one_line(ampx_trainer_init_from(gpt, in, 0, err, sizeof err), err); break;
    }
    return 0;
}
