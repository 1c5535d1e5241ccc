/* fuzz_windows.c — token streams and the windows drawn from them (data/text.c): a text or
 * llm.c token file is loaded as the trainer would (the validation split, the held-out
 * windows) and windows are drawn in the random, sequential and shuffled orders. The first
 * 16 bytes are the settings, the rest the file:
 *   [0] bit 0: token file (else text), bit 3: vocabulary 50257 (else 256), bits 1-2: order
 *   [1] window T - 1 (mod 32)  [2] rows - 1 (mod 4)  [3] first (mod 4)  [4] key_rows extra
 *   [5] val_fraction in 256ths of 0.5  [6] eval windows - 1 (mod 8)  [7] seed
 *   [8..15] the key (little-endian, mod 4096: a micro-batch of a run's first steps)
 * A stream the trainer takes gives windows whose ids and labels are inside the vocabulary,
 * each label the next window position's id; anything else is refused with one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings.h"
#include "fuzz_common.h"
#include "data/data.h"

static void check_rows(const int32_t *ids, const int32_t *labels, int64_t rows, int64_t T,
                       int64_t vocab) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < T; t++) {
            int32_t id = ids[r * T + t], next = labels[r * T + t];
            if (id < 0 || id >= vocab || next < 0 || next >= vocab) abort();
            if (t + 1 < T && ids[r * T + t + 1] != next) abort(); /* labels: the next ids */
        }
}

/* The trainer's own condition (train/trainer.c): every sequential shard holds a chunk. */
static int trainer_takes(const dataset *d, int64_t key_rows) {
    if (d->n_train < key_rows) return 0;
    for (int s = 0; d->sequential && s < d->n_shards; s++)
        if (d->shard_start[s + 1] - d->shard_start[s] < key_rows * d->window + 1) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 16) return 0;
    settings cfg;
    settings_defaults(&cfg);
    int tokens            = data[0] & 1;
    int64_t vocab         = tokens && (data[0] & 8) ? 50257 : 256;
    cfg.data.source       = tokens ? DATA_TOKENS : DATA_TEXT;
    cfg.data.order        = (data[0] >> 1 & 3) % 3;
    cfg.data.val_fraction = data[5] / 512.0;
    cfg.data.eval_windows = 1 + data[6] % 8;
    char file[]           = "fuzz.json";
    cfg.file              = file;
    cfg.data.text_train   = (char *)fuzz_file(data + 16, size - 16);
    int64_t T = 1 + data[1] % 32, rows = 1 + data[2] % 4, first = data[3] % 4;
    int64_t key_rows = first + rows + data[4] % 3;
    uint64_t key;
    memcpy(&key, data + 8, 8);
    key %= 4096; /* a step's micro-batch: the shuffled order replays llm.c's generator from the
                    first epoch to the key's (data/shuffle.c), as a resumed run does */
    data_request req = {.cfg = &cfg, .classes = vocab, .input_name = "tokens", .window = T};
    dataset d        = {0};
    char err[512]    = "";
    if (text_load(&req, &d, ERR(err, sizeof err)) != 0) {
        if (!err[0] || strchr(err, '\n')) abort();
    } else {
        for (int64_t i = 0; i < d.n_test * T; i++)
            if (d.ids_test[i] < 0 || d.ids_test[i] >= vocab || d.y_test[i] < 0 ||
                d.y_test[i] >= vocab)
                abort();
        if (trainer_takes(&d, key_rows)) {
            int32_t *ids = malloc(sizeof *ids * (size_t)(rows * T));
            int32_t *lab = malloc(sizeof *lab * (size_t)(rows * T));
            for (uint64_t k = key; ids && lab && k < key + 3; k++)
                if (text_draw(&d, data[7], k, key_rows, first, rows, ids, lab) == 0)
                    check_rows(ids, lab, rows, T, vocab);
            free(ids), free(lab);
        }
    }
    data_free(&d);
    return 0;
}
