/*
 * wtf8.h: WTF-8 <-> UTF-16 and the white-space fold on bytes, for the
 * title and id rules (unicode.c, ucd.c).
 */
#ifndef ENR_WTF8_H
#define ENR_WTF8_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* What the title and id rules return when a text passes its max bytes
 * (nothing of it appended); the byte-level steps here are where it is
 * found first. */
#define ENR_UNI_TOO_LONG (-2)

/* Is every byte of s ASCII? */
int enr_wtf8_is_ascii(const unsigned char *s, size_t len);

/* WTF-8 to UTF-16 into dst, which has room for len units (never more are
 * needed); the number of units written. */
int32_t enr_wtf8_to_utf16(const unsigned char *s, size_t len, uint16_t *dst);

/* The code point at s[*i] of UTF-16 (a lone surrogate is one), *i moved
 * past it. */
static inline uint32_t enr_utf16_next(const uint16_t *s, int32_t *i, int32_t n)
{
    uint32_t c = s[(*i)++];

    if ((c & 0xfc00) == 0xd800 && *i < n && (s[*i] & 0xfc00) == 0xdc00)
        c = 0x10000 + ((c - 0xd800) << 10) + (uint32_t)(s[(*i)++] - 0xdc00);
    return c;
}

/* The code point ending before s[*i] (*i > 0), *i moved to its start. */
static inline uint32_t enr_utf16_prev(const uint16_t *s, int32_t *i)
{
    uint32_t c = s[--(*i)];

    if ((c & 0xfc00) == 0xdc00 && *i > 0 && (s[*i - 1] & 0xfc00) == 0xd800)
        c = 0x10000 + ((uint32_t)(s[--(*i)] - 0xd800) << 10) + (c - 0xdc00);
    return c;
}

/* Where one output text starts in its buffer, and whether white space
 * waits to be written as one space: a title is converted in pieces. */
typedef struct enr_text_out {
    size_t start;
    int pending;
} enr_text_out;

/* UTF-16 back to WTF-8, appended to out; with fold, white space folded
 * across pieces (t).  0, -1 (no memory) or ENR_UNI_TOO_LONG past max. */
int enr_utf16_to_wtf8(const uint16_t *s, int32_t n, enr_buf *out, int fold, enr_text_out *t,
                      size_t max);

/* Lead bytes of the white-space code points (text.h); any other byte is
 * never the start of white space. */
extern const uint8_t enr_ws_lead[256];

/* Rule 7.2 steps 2 and 3 on WTF-8 bytes already in NFKC, appended to
 * out: 0, -1 or ENR_UNI_TOO_LONG (nothing appended).  _fast is the same
 * output by a table test per byte. */
int enr_wtf8_fold(const unsigned char *s, size_t len, enr_buf *out, size_t max);
int enr_wtf8_fold_fast(const unsigned char *s, size_t len, enr_buf *out, size_t max);

#endif
