/* fuzz_tokenizer.c — the tokenizer file readers (text/bpe_io.c) and the encoder. The first
 * byte picks: odd, the rest is a tokenizer file (ampx's JSON or llm.c's binary), which is
 * either refused with one line or read into a tokenizer whose tokens all decode and, when it
 * has merges, encodes text back to itself; even, the rest is text for a fixed trained
 * tokenizer, whose ids must decode to exactly that text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ampx/ampx.h"
#include "fuzz_common.h"

/* Encodes s and checks the ids decode to s. */
static void round_trip(ampx_tokenizer *t, const uint8_t *s, size_t n) {
    ampx_token_buf buf = {0};
    char err[512];
    if (ampx_tokenizer_encode(t, s, n, &buf, err, sizeof err)) abort();
    size_t at = 0;
    for (size_t i = 0; i < buf.n; i++) {
        size_t len;
        const unsigned char *b = ampx_tokenizer_token(t, buf.ids[i], &len);
        if (!b || buf.ids[i] == ampx_tokenizer_eot(t) || at + len > n || memcmp(b, s + at, len))
            abort();
        at += len;
    }
    if (at != n) abort();
    free(buf.ids);
}

static ampx_tokenizer *fixed(void) {
    static ampx_tokenizer *t;
    if (t) return t;
    static const char text[]      = "It's the cat's hat, isn't it?  We'll see 123 456.\r\n\r\n"
                                    "\xce\x9a\xce\xb1\xce\xbb\xce\xb7 \xe4\xbd\xa0\xe5\xa5\xbd!!! "
                                    "the the the then they them there    \t\n";
    const unsigned char *texts[1] = {(const unsigned char *)text};
    size_t n                      = sizeof text - 1;
    char err[256];
    if (ampx_tokenizer_train(texts, &n, 1, 400, &t, NULL, err, sizeof err)) abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!(data[0] & 1)) {
        round_trip(fixed(), data + 1, size - 1);
        return 0;
    }
    ampx_tokenizer *t = NULL;
    char err[512]     = "";
    if (ampx_tokenizer_load(fuzz_file(data + 1, size - 1), &t, err, sizeof err)) {
        if (t || !err[0] || strchr(err, '\n')) abort();
        return 0;
    }
    uint32_t v = ampx_tokenizer_vocab(t);
    if (v == 0 || ampx_tokenizer_eot(t) >= v) abort();
    for (uint32_t i = 0; i < v; i++) {
        size_t len = 0;
        if (!ampx_tokenizer_token(t, i, &len) || len == 0) abort();
    }
    if (ampx_tokenizer_can_encode(t)) {
        static const uint8_t s[] = "hello, world's end 42 \xff\x00 \xe2\x82";
        round_trip(t, s, sizeof s - 1);
    }
    ampx_tokenizer_free(t);
    return 0;
}
