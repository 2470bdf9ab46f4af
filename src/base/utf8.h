/*
 * utf8.h: the UTF-8 helpers every reader and writer of text shares (the
 * engine's strings, the JSON scanner of base/jscan.c, the capture's
 * trace lines): which bytes form one well-formed sequence, and a code
 * point's bytes.
 *
 * Well-formed is RFC 3629's (no overlong form, no surrogate, nothing past
 * U+10FFFF); an ill-formed sequence's length is that of its maximal
 * subpart (Unicode 15 §3.9, docs/contract.md §2.2), so a reader that
 * replaces it by one U+FFFD replaces what the contract says.  The
 * encoder writes a surrogate too (WTF-8's generalised form), because the
 * engine keeps a lone \u escape's surrogate that way (text.h).
 * Header-only: the engine's hot loops call them.
 */
#ifndef ENR_UTF8_H
#define ENR_UTF8_H

#include <stddef.h>
#include <stdint.h>

static inline int enr_utf8_cont(const unsigned char *p, const unsigned char *e, unsigned lo,
                                unsigned hi)
{
    return p < e && *p >= lo && *p <= hi;
}

/* The length of the well-formed sequence at p (p < e, *p >= 0x80), or
 * -(the length of its maximal ill-formed subpart), which one U+FFFD
 * replaces. */
static inline int enr_utf8_seq(const unsigned char *p, const unsigned char *e)
{
    unsigned c = p[0], lo = 0x80, hi = 0xbf;

    if (c >= 0xc2 && c <= 0xdf)
        return enr_utf8_cont(p + 1, e, 0x80, 0xbf) ? 2 : -1;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        if (!enr_utf8_cont(p + 1, e, lo, hi))
            return -1;
        return enr_utf8_cont(p + 2, e, 0x80, 0xbf) ? 3 : -2;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        if (!enr_utf8_cont(p + 1, e, lo, hi))
            return -1;
        if (!enr_utf8_cont(p + 2, e, 0x80, 0xbf))
            return -2;
        return enr_utf8_cont(p + 3, e, 0x80, 0xbf) ? 4 : -3;
    }
    return -1;
}

/* The bytes of code point cp (<= 0x10FFFF; a surrogate as WTF-8) at o,
 * which has room for 4; their count. */
static inline size_t enr_utf8_put(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

#endif
