/* fuzz_idx.c — the IDX header check (data/data.c): the dims must give the file's size
 * exactly, with no overflow. The first byte picks images (0x803) or labels (0x801). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint32_t magic = data[0] & 1 ? 0x803 : 0x801;
    int64_t dims[3];
    char err[512];
    if (data_idx_check("fuzz.idx", magic, data + 1, size - 1, dims, ERR(err, sizeof err)) == 0) {
        uint64_t need = 1;
        for (int i = 0; i < (int)(magic & 0xFF); i++)
            need *= (uint64_t)dims[i];
        if (need != size - 1 - 4 - 4 * (magic & 0xFF)) abort();
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    return 0;
}
