/* bpe.h — byte-level byte-pair encoding, GPT-2's kind: 256 byte tokens, then one token per
 * merge in the order the merges were learned, then the end-of-text token. The public face is
 * ampx_tokenizer_* in ampx/ampx.h; struct ampx_tokenizer is defined here.
 *
 *   bpe.c        the vocabulary from the merges, the encoder (per pre-split chunk: merges by
 *                rank through a heap over a linked list, a cache of encoded chunks), decode
 *   bpe_train.c  learning the merges from text
 *   bpe_io.c     ampx's JSON tokenizer file, llm.c's tokenizer file, llm.c's token files */
#ifndef AMPX_TEXT_BPE_H
#define AMPX_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "ampx/ampx.h"
#include "base/error.h"
#include "text/bytemap.h"

#define BPE_MAX_VOCAB 65536            /* token ids travel as uint16 in llm.c's token files */
#define BPE_MAX_TOKEN_LEN 255          /* the trainer makes no longer token (llm.c's limit) */
#define BPE_MAX_TOKEN_BYTES (1u << 26) /* the bytes of all tokens of a loaded file together */
#define BPE_EOT_TEXT "<|endoftext|>"   /* the end-of-text token's bytes when decoded (GPT-2's) */

struct ampx_tokenizer {
    uint32_t vocab;    /* tokens: 256 + n_merges + 1 for a trained one */
    uint32_t n_merges; /* merge i makes token 256 + i from merges[i][0], merges[i][1] */
    uint32_t eot;      /* the end-of-text token: 256 + n_merges, or llm.c's header[3] */
    uint32_t (*merges)[2];
    int decode_only;   /* read from llm.c's tokenizer file: bytes per token, no merges */
    uint64_t *tok_off; /* per token: its bytes in bytes[] */
    uint32_t *tok_len;
    unsigned char *bytes;
    /* the encoder: merge rank of a pair (key a << 16 | b), open addressing */
    uint32_t *rank_key, *rank_val;
    size_t rank_cap;
    /* encoded chunks: the cache's index i holds ids cache_ids[cache_off[i] ...] */
    bytemap cache;
    uint64_t *cache_off;
    uint32_t *cache_len;
    size_t cache_cap;
    uint32_t *cache_ids;
    size_t cache_ids_n, cache_ids_cap;
    /* scratch for one chunk's merges */
    uint32_t *s_tok, *s_next, *s_prev;
    uint64_t *s_heap;
    size_t s_cap;
};

/* A tokenizer from its merges (taken over; freed on failure too): every merge's two ids must
 * name earlier tokens (merges[i] < 256 + i), the bytes of all tokens at most
 * BPE_MAX_TOKEN_BYTES. NULL with a message in e (prefixed with what) on failure. */
ampx_tokenizer *bpe_from_merges(uint32_t (*merges)[2], uint32_t n_merges, const char *what,
                                ampx_err e);
/* A decode-only tokenizer: token i's bytes are bytes[off[i] .. off[i] + len[i]) (all three
 * taken over). */
ampx_tokenizer *bpe_from_vocab(uint32_t vocab, uint32_t eot, uint64_t *off, uint32_t *len,
                               unsigned char *bytes);

#endif
