/* fuzz_tokens.c — the llm.c token-file reader (data/text.c): a file is accepted only when its
 * header's count gives its size exactly and every token is inside the vocabulary; anything
 * else is one line. The first byte picks the vocabulary (256 or 50257). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int64_t vocab = data[0] & 1 ? 50257 : 256, n = -1;
    char err[512] = "";
    uint16_t *t =
        text_tokens_parse("fuzz.bin", data + 1, size - 1, vocab, &n, ERR(err, sizeof err));
    if (t) {
        if (n < 0 || 1024 + 2 * (uint64_t)n != size - 1) abort();
        for (int64_t i = 0; i < n; i++)
            if (t[i] >= vocab) abort();
        free(t);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    return 0;
}
