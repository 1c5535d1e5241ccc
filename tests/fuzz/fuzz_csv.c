/* fuzz_csv.c — the CSV reader (data/data.c). The first byte picks the header mode, the
 * second the features (1..8) and classes (2..9), the rest is the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    static settings cfg;
    settings_defaults(&cfg);
    cfg.file              = (char *)"fuzz.json";
    cfg.data.header       = data[0] % 3 - 1;
    cfg.data.label_column = data[0] / 3 % 4 == 3 ? -1 : data[0] / 3 % 4;
    data_request req      = {.cfg        = &cfg,
                             .features   = 1 + data[1] % 8,
                             .classes    = 2 + data[1] / 8 % 8,
                             .input_name = "\"x\""};
    float *x;
    int32_t *y;
    int64_t n;
    char err[512];
    if (data_csv_parse(&req, "fuzz.csv", (const char *)data + 2, size - 2, &x, &y, &n,
                       ERR(err, sizeof err)) == 0) {
        for (int64_t i = 0; i < n; i++)
            if (y[i] < 0 || y[i] >= req.classes) abort();
        free(x), free(y);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    return 0;
}
