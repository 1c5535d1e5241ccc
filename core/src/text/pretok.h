/* pretok.h — GPT-2's pre-split of text into chunks, by hand over UTF-8 bytes.
 *
 * GPT-2 splits text with the regular expression
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * before byte-pair merges, which then never cross a chunk boundary. pretok_next gives the
 * same chunks, with these classes of code points:
 *   letter      general category L (Lu Ll Lt Lm Lo), Unicode tables in unicode_classes.c
 *   number      general category N (Nd Nl No)
 *   whitespace  the White_Space property: U+0009-000D, U+0020, U+0085, U+00A0, U+1680,
 *               U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000 (what \s matches)
 *   other       everything else, NUL and the other control characters included
 * The contractions are case-sensitive and use U+0027 alone; the optional leading space is
 * U+0020 alone. Text need not be valid UTF-8: a byte that does not start a well-formed
 * sequence (Unicode's table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF)
 * is one code point of class other, so every byte lands in exactly one chunk. */
#ifndef AMPX_TEXT_PRETOK_H
#define AMPX_TEXT_PRETOK_H

#include <stddef.h>
#include <stdint.h>

/* The end of the chunk that starts at byte i < n of s (i < end <= n). */
size_t pretok_next(const unsigned char *s, size_t n, size_t i);

/* Unicode general categories L and N (unicode_classes.c). */
int pretok_is_letter(uint32_t cp);
int pretok_is_number(uint32_t cp);

#endif
