/*
 * text.h: the text representation shared by the engine modules.
 *
 * Every decoded string is WTF-8: UTF-8 in which an unpaired surrogate
 * (only ever produced by a JSON \u escape, docs/contract.md §2.4) is written as
 * its 3-byte generalised form ED A0..BF 80..BF.  The reader replaces
 * every ill-formed input sequence by U+FFFD (docs/contract.md §2.2), so an
 * ED A0..BF sequence in decoded text always means a lone surrogate and
 * never came from the wire.
 *
 * enr_ws_len() is the single definition of docs/contract.md §8 (25 code
 * points): id trimming, title collapsing and string-to-number all use it.
 */
#ifndef ENR_TEXT_H
#define ENR_TEXT_H

#include <stddef.h>

/* The value of one hexadecimal digit (either case), or -1: the percent
 * escapes of paths and the \u escapes of traces read it the same way. */
static inline int enr_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Byte length of the white-space code point at p (p < end), or 0. */
static inline size_t enr_ws_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n = (size_t)(end - p);

    if (c < 0x80)
        return (c == 0x20 || (c >= 0x09 && c <= 0x0d)) ? 1 : 0;
    if (c == 0xc2)
        return (n >= 2 && p[1] == 0xa0) ? 2 : 0; /* U+00A0 */
    if (n < 3)
        return 0;
    if (c == 0xe1) /* U+1680 */
        return (p[1] == 0x9a && p[2] == 0x80) ? 3 : 0;
    if (c == 0xe2) {
        if (p[1] == 0x80) /* U+2000..U+200A, U+2028, U+2029, U+202F */
            return ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf)
                       ? 3
                       : 0;
        return (p[1] == 0x81 && p[2] == 0x9f) ? 3 : 0; /* U+205F */
    }
    if (c == 0xe3) /* U+3000 */
        return (p[1] == 0x80 && p[2] == 0x80) ? 3 : 0;
    if (c == 0xef) /* U+FEFF */
        return (p[1] == 0xbb && p[2] == 0xbf) ? 3 : 0;
    return 0;
}

/* Byte length of the white-space code point that ends at end (> start), or 0. */
static inline size_t enr_ws_len_back(const unsigned char *start, const unsigned char *end)
{
    if (end - start >= 1 && end[-1] < 0x80)
        return enr_ws_len(end - 1, end);
    if (end - start >= 2 && end[-2] == 0xc2)
        return enr_ws_len(end - 2, end) == 2 ? 2 : 0;
    if (end - start >= 3)
        return enr_ws_len(end - 3, end) == 3 ? 3 : 0;
    return 0;
}

#endif
