/*
 * wtf8.c: the byte-level text work of the title and id rules (wtf8.h):
 * WTF-8 to UTF-16 and back for the normalizer (ucd.c), and the white-space fold of rule 7.2
 * on bytes already in their final form.
 *
 * Invariants: nothing here allocates beyond the caller's
 * buffer; a lone surrogate keeps its WTF-8 form both ways; a fold never
 * lengthens its input, and past max bytes appends nothing and returns
 * ENR_UNI_TOO_LONG; enr_wtf8_fold_fast and enr_wtf8_fold give the same
 * bytes (the fast fuzz target compares them).
 */
#include "engine/wtf8.h"

#include <string.h>

#include "base/text.h"

int enr_wtf8_is_ascii(const unsigned char *s, size_t len)
{
    size_t i = 0;
    uint64_t acc = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < len; i++)
        acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

static int is_cont(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

/*
 * WTF-8 to UTF-16; dst has room for len units (never more are needed).
 * A byte that does not start a well-formed sequence (the reader never
 * produces one) becomes U+FFFD rather than being trusted.
 */
int32_t enr_wtf8_to_utf16(const unsigned char *s, size_t len, uint16_t *dst)
{
    const unsigned char *end = s + len;
    int32_t n = 0;

    while (s < end) {
        unsigned c = *s;
        size_t left = (size_t)(end - s);

        if (c < 0x80) {
            dst[n++] = (uint16_t)c;
            s++;
        } else if (c >= 0xc2 && c <= 0xdf && left >= 2 && is_cont(s[1])) {
            dst[n++] = (uint16_t)(((c & 0x1f) << 6) | (s[1] & 0x3f));
            s += 2;
        } else if (c >= 0xe0 && c <= 0xef && left >= 3 && is_cont(s[1]) && is_cont(s[2]) &&
                   (c != 0xe0 || s[1] >= 0xa0)) {
            /* ED A0..BF is a lone surrogate: it becomes a lone unit */
            dst[n++] = (uint16_t)(((c & 0x0f) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3f));
            s += 3;
        } else if (c >= 0xf0 && c <= 0xf4 && left >= 4 && is_cont(s[1]) && is_cont(s[2]) &&
                   is_cont(s[3]) && (c != 0xf0 || s[1] >= 0x90) && (c != 0xf4 || s[1] < 0x90)) {
            uint32_t cp = ((c & 0x07u) << 18) | ((s[1] & 0x3fu) << 12) | ((s[2] & 0x3fu) << 6) |
                          (s[3] & 0x3fu);
            cp -= 0x10000;
            dst[n++] = (uint16_t)(0xd800 | (cp >> 10));
            dst[n++] = (uint16_t)(0xdc00 | (cp & 0x3ff));
            s += 4;
        } else {
            dst[n++] = 0xfffd;
            s++;
        }
    }
    return n;
}

/* Rule 8 on one UTF-16 unit: all 25 white-space code points are BMP. */
static int is_ws16(uint16_t c)
{
    if (c <= 0x20)
        return c == 0x20 || (c >= 0x09 && c <= 0x0d);
    if (c < 0xa0)
        return 0;
    return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

/*
 * UTF-16 back to WTF-8 (a pair gives 4 bytes, a lone surrogate its ED
 * form), appended to out.  With fold, every run of white space becomes
 * one space and the ends are trimmed (rule 7.2 steps 2 and 3); a run at
 * the end stays pending for the next piece, and is dropped if none
 * comes.  Once the text passes max bytes since t->start: ENR_UNI_TOO_LONG,
 * and the caller drops what was appended.
 */
int enr_utf16_to_wtf8(const uint16_t *s, int32_t n, enr_buf *out, int fold, enr_text_out *t,
                      size_t max)
{
    size_t room = (size_t)n * 3; /* never more than 3 bytes a unit */
    unsigned char *o, *first;

    if (n == 0) /* out->data may still be NULL */
        return 0;
    if (out->len - t->start > max)
        return ENR_UNI_TOO_LONG;
    /* Checked before each code point, which writes at most 5 bytes (a
     * pending space and a pair): max + 8 is always enough room. */
    if (room > max - (out->len - t->start) + 8)
        room = max - (out->len - t->start) + 8;
    if (enr_buf_reserve(out, room) != 0)
        return -1;
    first = (unsigned char *)out->data + t->start;
    o = (unsigned char *)out->data + out->len;
    for (int32_t i = 0; i < n; i++) {
        uint32_t c = s[i];

        if ((size_t)(o - first) > max) {
            out->len = (size_t)(o - (unsigned char *)out->data);
            return ENR_UNI_TOO_LONG;
        }
        if (fold && is_ws16((uint16_t)c)) {
            t->pending = 1;
            continue;
        }
        if (t->pending) {
            if (o != first)
                *o++ = ' ';
            t->pending = 0;
        }
        if (c < 0x80) {
            *o++ = (unsigned char)c;
        } else if (c < 0x800) {
            *o++ = (unsigned char)(0xc0 | (c >> 6));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && s[i + 1] >= 0xdc00 &&
                   s[i + 1] <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (s[i + 1] - 0xdc00u);
            i++;
            *o++ = (unsigned char)(0xf0 | (c >> 18));
            *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        } else { /* BMP, including a lone surrogate */
            *o++ = (unsigned char)(0xe0 | (c >> 12));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *o++ = (unsigned char)(0x80 | (c & 0x3f));
        }
    }
    out->len = (size_t)(o - (unsigned char *)out->data);
    return (size_t)(o - first) > max ? ENR_UNI_TOO_LONG : 0;
}

/* The byte walk of enr_wtf8_fold; with checked, it stops (NULL) once more
 * than lim - first bytes are written.  Inlined twice, so the common call
 * (the input alone fits) pays no check per byte. */
static inline __attribute__((always_inline)) char *fold_walk(const unsigned char *s,
                                                             const unsigned char *end, char *o,
                                                             const char *first, const char *lim,
                                                             int checked)
{
    int pending = 0;

    while (s < end) {
        size_t w;

        if (checked && o > lim)
            return NULL;
        w = enr_ws_len(s, end);
        if (w > 0) {
            pending = 1;
            s += w;
            continue;
        }
        if (pending) {
            if (o != first)
                *o++ = ' ';
            pending = 0;
        }
        *o++ = (char)*s++;
    }
    return checked && o > lim ? NULL : o;
}

/* Rule 7.2 steps 2 and 3 on WTF-8 bytes already in NFKC.  A white-space
 * lead byte never occurs as a continuation byte, so a byte walk is safe.
 * More than max bytes: nothing is appended, ENR_UNI_TOO_LONG. */
int enr_wtf8_fold(const unsigned char *s, size_t len, enr_buf *out, size_t max)
{
    size_t room = len < max + 2 ? len : max + 2; /* +2: a space and a byte */
    char *first, *o;

    if (len == 0) /* out->data may still be NULL */
        return 0;
    if (enr_buf_reserve(out, room) != 0)
        return -1;
    first = out->data + out->len;
    /* folding never lengthens: an input that fits needs no checks */
    o = len <= max ? fold_walk(s, s + len, first, first, NULL, 0)
                   : fold_walk(s, s + len, first, first, first + max, 1);
    if (o == NULL)
        return ENR_UNI_TOO_LONG; /* out->len untouched */
    out->len = (size_t)(o - out->data);
    return 0;
}

/* Lead bytes of the white-space code points (text.h): any other byte is
 * copied as it is by enr_wtf8_fold_fast. */
const uint8_t enr_ws_lead[256] = {
    [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1, [0x20] = 1,
    [0xc2] = 1, [0xe1] = 1, [0xe2] = 1, [0xe3] = 1, [0xef] = 1,
};

/* enr_wtf8_fold with a table test per byte instead of enr_ws_len: the same
 * output (the fuzz target compares them), in runs copied at once. */
int enr_wtf8_fold_fast(const unsigned char *s, size_t len, enr_buf *out, size_t max)
{
    const unsigned char *end = s + len;
    char *first, *o;

    if (len == 0)
        return 0;
    if (len > max) /* rare: the checked walk */
        return enr_wtf8_fold(s, len, out, max);
    if (enr_buf_reserve(out, len) != 0)
        return -1;
    first = o = out->data + out->len;
    for (;;) {
        size_t w;

        while (s < end && !enr_ws_lead[*s]) /* runs are short: no memcpy call */
            *o++ = (char)*s++;
        if (s == end)
            break;
        if ((w = enr_ws_len(s, end)) == 0) {
            *o++ = (char)*s++;
            continue;
        }
        do /* a run of white space: one space, none at either end */
            s += w;
        while (s < end && enr_ws_lead[*s] && (w = enr_ws_len(s, end)) > 0);
        if (s == end)
            break;
        if (o != first)
            *o++ = ' ';
    }
    out->len = (size_t)(o - out->data);
    return 0;
}
