/*
 * jstring.c: a JSON string, as the reader's scanner located it, decoded
 * to WTF-8 (jstring.h).
 *
 * Invariants: the input is a span the scanner accepted (escapes are
 * complete and valid, no raw control byte), so decoding cannot fail;
 * ill-formed UTF-8 becomes U+FFFD by maximal subparts (docs/contract.md
 * section 2), lone surrogates from \u escapes keep their WTF-8 form, and
 * a surrogate pair becomes one 4-byte sequence.  Well-formed strings
 * without escapes, most of them, are checked and then copied at once,
 * and the others copied in runs between escapes and ill-formed bytes,
 * unless the slow path is asked for (the fast fuzz target's reference).
 */
#include "engine/jstring.h"
#include "base/text.h"
#include "base/utf8.h"

#include <stdint.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

static void put_utf8(enr_buf *out, unsigned cp)
{
    unsigned char b[4];
    size_t n;

    if (cp < 0x80) {
        enr_buf_putc(out, (char)cp);
        return;
    }
    n = enr_utf8_put(b, cp);
    enr_buf_append(out, b, n);
}

static unsigned hex4(const unsigned char *p)
{
    return (unsigned)(enr_hex_digit(p[0]) << 12 | enr_hex_digit(p[1]) << 8 |
                      enr_hex_digit(p[2]) << 4 | enr_hex_digit(p[3]));
}

/* The \ escape at p (complete and valid: the scanner checked it)
 * decoded into out; returns what follows it. */
static const unsigned char *put_escape(const unsigned char *p, const unsigned char *e, enr_buf *out)
{
    unsigned cp;

    switch (p[1]) {
    case 'b':
        cp = '\b';
        break;
    case 'f':
        cp = '\f';
        break;
    case 'n':
        cp = '\n';
        break;
    case 'r':
        cp = '\r';
        break;
    case 't':
        cp = '\t';
        break;
    case 'u':
        cp = hex4(p + 2);
        p += 6;
        if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            unsigned lo = hex4(p + 2);

            if (lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            }
        }
        put_utf8(out, cp);
        return p;
    default: /* " \ / */
        cp = p[1];
        break;
    }
    enr_buf_putc(out, (char)cp);
    return p + 2;
}

/* Hex digit values (the scanner checked every \u escape's four). */
static const uint8_t hex_value[256] = {
    ['0'] = 0,  ['1'] = 1,  ['2'] = 2,  ['3'] = 3,  ['4'] = 4,  ['5'] = 5,  ['6'] = 6,  ['7'] = 7,
    ['8'] = 8,  ['9'] = 9,  ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14, ['f'] = 15,
    ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15,
};

/* What the two-byte escapes stand for. */
static const char escape_char[256] = {
    ['b'] = '\b', ['f'] = '\f', ['n'] = '\n',  ['r'] = '\r',
    ['t'] = '\t', ['"'] = '"',  ['\\'] = '\\', ['/'] = '/',
};

static inline unsigned hex4_fast(const unsigned char *p)
{
    return (unsigned)hex_value[p[0]] << 12 | (unsigned)hex_value[p[1]] << 8 |
           (unsigned)hex_value[p[2]] << 4 | hex_value[p[3]];
}

/* put_escape written in place, with table lookups: the fast fuzz
 * target compares the two.  Room is made for exactly what is written,
 * as put_escape's appends do, so both fill a capped buffer alike. */
static const unsigned char *put_escape_fast(const unsigned char *p, const unsigned char *e,
                                            enr_buf *out)
{
    unsigned cp;
    size_t n;

    if (p[1] != 'u') {
        enr_buf_putc(out, escape_char[p[1]]);
        return p + 2;
    }
    cp = hex4_fast(p + 2);
    p += 6;
    if (cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        unsigned lo = hex4_fast(p + 2);

        if (lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
        }
    }
    n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (enr_buf_reserve(out, n) != 0)
        return p;
    enr_utf8_put((unsigned char *)out->data + out->len, cp);
    out->len += n;
    return p;
}

/* The end of the run from p on that is copied as it is: ASCII but a
 * backslash, and well-formed UTF-8 (ASCII 16 bytes at a time). */
static const unsigned char *plain_run(const unsigned char *p, const unsigned char *e)
{
    while (p < e) {
        unsigned c = *p;

        if (c < 0x80) {
            if (c == '\\')
                return p;
            p++;
#ifdef __SSE2__
            while (e - p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
                unsigned m = (unsigned)(_mm_movemask_epi8(v) |
                                        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));

                if (m != 0) {
                    p += __builtin_ctz(m);
                    break;
                }
                p += 16;
            }
#endif
        } else if (c >= 0xc2 && c <= 0xdf && e - p >= 2 && (p[1] & 0xc0) == 0x80) {
            p += 2; /* Latin, Greek, Cyrillic */
        } else if (c >= 0xe0 && c <= 0xef && e - p >= 3 && p[1] >= (c == 0xe0 ? 0xa0 : 0x80) &&
                   p[1] <= (c == 0xed ? 0x9f : 0xbf) && (p[2] & 0xc0) == 0x80) {
            p += 3; /* CJK, Thai, Hangul: enr_utf8_seq's 3 without the call */
        } else if (c >= 0xf0 && c <= 0xf4 && e - p >= 4 && p[1] >= (c == 0xf0 ? 0x90 : 0x80) &&
                   p[1] <= (c == 0xf4 ? 0x8f : 0xbf) && (p[2] & 0xc0) == 0x80 &&
                   (p[3] & 0xc0) == 0x80) {
            p += 4; /* emoji: enr_utf8_seq's 4 */
        } else {
            return p; /* enr_utf8_seq says ill-formed */
        }
    }
    return p;
}

void enr_jstring_decode(const unsigned char *p, const unsigned char *e, int escaped, int nonascii,
                        int slow, enr_buf *out)
{
    if (!escaped && !nonascii) {
        enr_buf_append(out, p, (size_t)(e - p));
        return;
    }
    if (!slow) {
        /* Most strings are well-formed UTF-8 without escapes: checked
         * without copying, then appended at once; the others in runs
         * between what needs decoding. */
        const unsigned char *q = plain_run(p, e);

        if (q == e) {
            enr_buf_append(out, p, (size_t)(e - p));
            return;
        }
        if (enr_buf_reserve(out, (size_t)(e - p)) != 0)
            return;
        for (;;) {
            int n;

            enr_buf_append(out, p, (size_t)(q - p));
            p = q;
            if (p >= e)
                break;
            if (*p == '\\') {
                p = put_escape_fast(p, e, out);
            } else {
                n = enr_utf8_seq(p, e); /* ill-formed: one U+FFFD for its maximal subpart */
                enr_buf_lit(out, "\xef\xbf\xbd");
                p += n < 0 ? -n : n;
            }
            q = plain_run(p, e);
        }
        return;
    }
    if (enr_buf_reserve(out, (size_t)(e - p)) != 0)
        return;
    while (p < e) {
        const unsigned char *run = p;
        int n;

        while (p < e && *p < 0x80 && *p != '\\')
            p++;
        enr_buf_append(out, run, (size_t)(p - run));
        if (p >= e)
            break;
        if (*p != '\\') {
            n = enr_utf8_seq(p, e);
            if (n > 0) {
                enr_buf_append(out, p, (size_t)n);
                p += n;
            } else {
                enr_buf_lit(out, "\xef\xbf\xbd");
                p += -n;
            }
            continue;
        }
        p = put_escape(p, e, out);
    }
}

void enr_jstring_decode_unchecked(const unsigned char *p, const unsigned char *e, enr_buf *out)
{
    if (enr_buf_reserve(out, (size_t)(e - p)) != 0) /* escapes only shrink */
        return;
    while (p < e) {
        const unsigned char *q = memchr(p, '\\', (size_t)(e - p));

        if (q == NULL)
            q = e;
        enr_buf_append(out, p, (size_t)(q - p));
        p = q;
        if (p < e)
            p = put_escape_fast(p, e, out);
    }
}
