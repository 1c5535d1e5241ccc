/* pretok.c — GPT-2's pre-split over UTF-8 bytes (the classes and the expression are in
 * pretok.h). Each alternative of the expression is tried in its order at the chunk's start,
 * as a backtracking regex engine does; ASCII takes a table, the rest a UTF-8 decode and a
 * binary search in the Unicode ranges. */
#include "text/pretok.h"

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

/* ASCII classes: letters A-Z a-z, digits, the whitespace \t \n \v \f \r and space. */
static const unsigned char ascii_class[128] = {
    ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE,
    [' '] = C_SPACE,  ['0'] = C_NUMBER, ['1'] = C_NUMBER, ['2'] = C_NUMBER, ['3'] = C_NUMBER,
    ['4'] = C_NUMBER, ['5'] = C_NUMBER, ['6'] = C_NUMBER, ['7'] = C_NUMBER, ['8'] = C_NUMBER,
    ['9'] = C_NUMBER,
#define L2(a) [a] = C_LETTER, [a + 32] = C_LETTER
    L2('A'),          L2('B'),          L2('C'),          L2('D'),          L2('E'),
    L2('F'),          L2('G'),          L2('H'),          L2('I'),          L2('J'),
    L2('K'),          L2('L'),          L2('M'),          L2('N'),          L2('O'),
    L2('P'),          L2('Q'),          L2('R'),          L2('S'),          L2('T'),
    L2('U'),          L2('V'),          L2('W'),          L2('X'),          L2('Y'),
    L2('Z'),
#undef L2
};

/* The code point at s[i] (i < n) and its length in bytes; a byte that does not start a
 * well-formed sequence is returned as 0xFFFFFFFF (class other) of length 1. */
static uint32_t decode(const unsigned char *s, size_t n, size_t i, size_t *len) {
    unsigned c = s[i];
    *len       = 1;
    if (c < 0x80) return c;
    size_t k;
    uint32_t cp, lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        k = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 2, cp = c & 0x0F;
        if (c == 0xE0) lo = 0xA0; /* no overlong forms */
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 3, cp = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else
        return 0xFFFFFFFFu;
    if (i + k >= n) return 0xFFFFFFFFu; /* truncated at the end */
    for (size_t j = 1; j <= k; j++) {
        unsigned b = s[i + j];
        if (b < lo || b > hi) return 0xFFFFFFFFu;
        lo = 0x80, hi = 0xBF; /* only the second byte has a narrower range */
        cp = cp << 6 | (b & 0x3F);
    }
    *len = k + 1;
    return cp;
}

static int is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* The class of the code point at s[i] and its length. */
static int class_at(const unsigned char *s, size_t n, size_t i, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return ascii_class[s[i]];
    }
    uint32_t cp = decode(s, n, i, len);
    if (cp == 0xFFFFFFFFu) return C_OTHER;
    if (is_space(cp)) return C_SPACE;
    if (pretok_is_letter(cp)) return C_LETTER;
    if (pretok_is_number(cp)) return C_NUMBER;
    return C_OTHER;
}

/* The end of the run of class cls that starts at i. */
static size_t run_of(const unsigned char *s, size_t n, size_t i, int cls) {
    size_t len;
    while (i < n) {
        if (s[i] < 0x80) { /* the common case: no decode */
            if (ascii_class[s[i]] != cls) break;
            i++;
            continue;
        }
        if (class_at(s, n, i, &len) != cls) break;
        i += len;
    }
    return i;
}

/* 's 't 're 've 'm 'll 'd at i: the length matched, or 0. */
static size_t contraction(const unsigned char *s, size_t n, size_t i) {
    if (s[i] != '\'' || i + 1 >= n) return 0;
    unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

size_t pretok_next(const unsigned char *s, size_t n, size_t i) {
    size_t k = contraction(s, n, i), len, len2;
    if (k) return i + k;
    int cls = class_at(s, n, i, &len);
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a space joins the run after it */
    if (s[i] == ' ' && i + 1 < n) {
        int next = class_at(s, n, i + 1, &len2);
        if (next != C_SPACE) return run_of(s, n, i + 1, next);
    }
    if (cls != C_SPACE) return run_of(s, n, i, cls);
    /* '\s+(?!\S)': the whitespace run less its last code point when a non-space follows;
     * '\s+' when that leaves nothing (one whitespace code point before a non-space) */
    size_t end = i, last = i;
    while (end < n && class_at(s, n, end, &len) == C_SPACE)
        last = end, end += len;
    if (end == n || last == i) return end;
    return last;
}
