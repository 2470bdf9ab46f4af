/*
 * lex.h: the token level of the strict JSON reader, shared by its two
 * files (lex.c: tokens out of line and the generic walk and skip of any
 * value; reader.c: the batch and its records) and seen by nobody else
 * but through reader.h, which it sits below (it never includes it).
 *
 * What is called per token or per byte is here as static inline (white
 * space, the 16 bytes of a short string, digits, an array of integers,
 * ',' after a value, the walk of an object's members, which a record's
 * walk inlines with its member callback), so that the split into two
 * files costs no call; what is called once per value or on a slow path
 * is out of line in lex.c.
 *
 * Invariants: nothing here reads past r->end; every error goes through
 * ENR_LEX_FAIL, which sets r->err_* (offset from r->start, status 400)
 * and returns -1; depth counts the outer array as 1 (docs/contract.md
 * §15), deeper than ENR_MAX_DEPTH is a 400, so recursion is bounded.
 */
#ifndef ENR_LEX_H
#define ENR_LEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "engine/contract.h"
#include "engine/jstring.h"
#include "engine/scan.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The JSON kind of a value (of a field's last occurrence, reader.h). */
enum enr_kind {
    ENR_K_MISSING = 0,
    ENR_K_NULL,
    ENR_K_FALSE,
    ENR_K_TRUE,
    ENR_K_NUMBER,
    ENR_K_STRING,
    ENR_K_ARRAY,
    ENR_K_OBJECT
};

/* The reader's state: the cursor over the body and its error (the token
 * level), and where the batch stands (reader.c).  Defined here and not
 * in reader.h, which includes this header: reader.c includes this one,
 * so this one including reader.h would make the two modules a cycle. */
typedef struct enr_reader {
    const unsigned char *p, *start, *end;
    size_t element;        /* index of the current element */
    size_t record_element; /* index of the record last returned */
    size_t elements;       /* elements consumed so far */
    size_t max_elements;   /* 0: no limit */
    int slow;              /* fast paths off (the fuzz target's reference) */
    enr_buf scratch;       /* decoded keys with escapes */
    long err_offset;
    int err_status;
    const char *err_msg;
} enr_reader;

#define ENR_LEX_FAIL(r, at, msg)                                                                   \
    do {                                                                                           \
        (r)->err_offset = (long)((at) - (r)->start);                                               \
        (r)->err_msg = (msg);                                                                      \
        (r)->err_status = 400;                                                                     \
        return -1;                                                                                 \
    } while (0)

/* A string token located in the body: [s, e) between the quotes. */
typedef struct enr_span {
    const unsigned char *s, *e;
    int escaped;  /* holds a backslash */
    int nonascii; /* holds a byte >= 0x80 (may, for a key without escapes) */
} enr_span;

/* Out of line (lex.c): once per value, or the slow path of an inline one. */

/* enr_lex_scan_string past its first 16 bytes: the wide scanner (scan.h). */
int enr_lex_scan_string_wide(enr_reader *r, enr_span *sp);

/* The text of a string that is only compared with a short name (a key,
 * a provider, a region): its bytes in the body, or decoded into the
 * scratch when it has escapes.  *n is 0 when it cannot be such a name
 * (its decoded form is past the scratch's max). */
const char *enr_lex_short_text(enr_reader *r, const enr_span *sp, size_t *n);

/* The number token at r->p: [*s, *e), r->p after it.  0 or -1. */
int enr_lex_scan_number(enr_reader *r, const unsigned char **s, const unsigned char **e);

/* Consumes one of true/false/null at r->p; returns its kind or -1. */
int enr_lex_scan_literal(enr_reader *r);

/* Skips the value at r->p, which sits inside a container at depth. */
int enr_lex_skip_value(enr_reader *r, int depth);

/*
 * Walks the members of the object at r->p (on '{').  For each member the
 * callback, if any, is given the key and must consume the value itself;
 * without one, values are skipped.  Returns 0 or -1.  The walk itself is
 * enr_lex_walk_members below, inlined where fn is known.
 */
typedef int (*enr_member_fn)(enr_reader *r, const enr_span *key, int depth, void *arg);
int enr_lex_walk_object(enr_reader *r, int depth, enr_member_fn fn, void *arg);

/* Walks the elements of the array at r->p (on '['), calling fn on each
 * (fn consumes the value) or skipping them.  Returns 0 or -1. */
typedef int (*enr_element_fn)(enr_reader *r, int depth, size_t index, void *arg);
int enr_lex_walk_array(enr_reader *r, int depth, enr_element_fn fn, void *arg);

/* Inline: called per token or per byte. */

/* JSON's white space: SP HT LF CR.  Any byte above SP is told by the
 * first compare, and a body without white space between tokens (what
 * clients send) pays that one compare per token. */
static inline int enr_lex_is_ws(unsigned c)
{
    return c <= ' ' && ((1ull << c) & (1ull << ' ' | 1ull << '\n' | 1ull << '\r' | 1ull << '\t'));
}

static inline void enr_lex_skip_ws(enr_reader *r)
{
    const unsigned char *p = r->p, *end = r->end;

    while (p < end && enr_lex_is_ws(*p))
        p++;
    r->p = p;
}

/* The first quote, backslash or control byte of the 16 bytes at p, as
 * a bit mask (v ^ 2 maps '"' to 0x20 and the control bytes onto
 * themselves, and nothing else to 0x20 or below). */
#ifdef __SSE2__
static inline __attribute__((always_inline)) unsigned enr_lex_stops16(const unsigned char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x = _mm_xor_si128(v, _mm_set1_epi8(2));

    return (unsigned)_mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x20)), x),
                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
}
#endif

/* enr_lex_scan_string, and for a key (key != 0) without its nonascii,
 * which is only read when a key has escapes (it is decoded then): 1. */
static inline __attribute__((always_inline)) int enr_lex_scan_token(enr_reader *r, enr_span *sp,
                                                                    int key)
{
#ifdef __SSE2__
    const unsigned char *p = r->p + 1, *end = r->end;

    /* Keys and short values (most strings of a record) end within 16
     * bytes with nothing to step over: told inline, without the call. */
    if (end - p >= 16 && !r->slow) {
        unsigned m = enr_lex_stops16(p);

        if (m != 0 && p[__builtin_ctz(m)] == '"') {
            unsigned i = (unsigned)__builtin_ctz(m);

            sp->s = p;
            sp->e = p + i;
            sp->escaped = 0;
            sp->nonascii =
                key ||
                ((unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)p)) &
                 ((1u << i) - 1)) != 0;
            r->p = p + i + 1;
            return 0;
        }
    }
#endif
    return enr_lex_scan_string_wide(r, sp);
}

/* Scans the string token at r->p (on its opening quote): validates escapes
 * and rejects raw control characters; leaves r->p after the closing quote.
 * Inlined: keys and short values are most calls, and end in the first 16
 * bytes. */
static inline __attribute__((always_inline)) int enr_lex_scan_string(enr_reader *r, enr_span *sp)
{
    return enr_lex_scan_token(r, sp, 0);
}

/* Decodes a scanned string span into WTF-8, appending to out. */
static inline void enr_lex_decode_span(const enr_reader *r, const enr_span *sp, enr_buf *out)
{
    enr_jstring_decode(sp->s, sp->e, sp->escaped, sp->nonascii, r->slow, out);
}

/* Is the key span equal to name (after unescaping)? */
static inline int enr_lex_key_is(enr_reader *r, const enr_span *k, const char *name, size_t n)
{
    size_t len;
    const char *v = enr_lex_short_text(r, k, &len);

    return len == n && memcmp(v, name, n) == 0;
}

/* The end of the run of ASCII digits at p: 8 bytes a step (a byte is a
 * digit when its high nibble is 3 and its low nibble below 10). */
static inline const unsigned char *enr_lex_digits_end(const unsigned char *p,
                                                      const unsigned char *end)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t w, x;

        memcpy(&w, p, 8);
        x = ((w & 0xf0f0f0f0f0f0f0f0ull) ^ 0x3030303030303030ull) |
            (((w & 0x0f0f0f0f0f0f0f0full) + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull);
        if (x != 0)
            return p + __builtin_ctzll(x) / 8; /* the first byte that is not one */
        p += 8;
    }
#endif
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p;
}

/* enr_lex_next_or_close when white space or the end comes after the
 * value (after a record's last member, between records): inline, the
 * compiler decides where, as it did when the reader was one file. */
static inline int enr_lex_next_or_close_ws(enr_reader *r, unsigned char close)
{
    enr_lex_skip_ws(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        enr_lex_skip_ws(r);
        return 1;
    }
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    if (close == '}')
        ENR_LEX_FAIL(r, r->p, "',' or '}' expected");
    ENR_LEX_FAIL(r, r->p, "',' or ']' expected");
}

/* After a member or element: consumes ',' (1: another follows) or the
 * closing byte (0: the container ended); anything else is an error. */
static inline int enr_lex_next_or_close(enr_reader *r, unsigned char close)
{
    /* what clients send: ',' right after the value, the next one right
     * after it; told inline */
    if (r->p + 1 < r->end && r->p[0] == ',' && r->p[1] > ' ') {
        r->p++;
        return 1;
    }
    return enr_lex_next_or_close_ws(r, close);
}

/* enr_lex_walk_object's walk, inlined where fn is known (a record's
 * members: reader.c's record_member), so that the call per member is
 * gone too. */
static inline __attribute__((always_inline)) int enr_lex_walk_members(enr_reader *r, int depth,
                                                                      enr_member_fn fn, void *arg)
{
    enr_span key;
    int more;

    if (depth > ENR_MAX_DEPTH)
        ENR_LEX_FAIL(r, r->p, "nesting deeper than 1000");
    r->p++;
    enr_lex_skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return 0;
    }
    for (;;) {
        if (r->p >= r->end || *r->p != '"')
            ENR_LEX_FAIL(r, r->p, "object key expected");
        if (enr_lex_scan_token(r, &key, 1) < 0)
            return -1;
        if (r->end - r->p > 1 && r->p[0] == ':' && r->p[1] > ' ') { /* no white space */
            r->p++;
        } else {
            enr_lex_skip_ws(r);
            if (r->p >= r->end || *r->p != ':')
                ENR_LEX_FAIL(r, r->p, "':' expected");
            r->p++;
            enr_lex_skip_ws(r);
        }
        if ((fn ? fn(r, &key, depth, arg) : enr_lex_skip_value(r, depth)) < 0)
            return -1;
        more = enr_lex_next_or_close(r, '}');
        if (more <= 0)
            return more;
    }
}

/* The end of the number at p as enr_lex_scan_number reads it, or NULL
 * where that fails: the same grammar without the reader's state, for
 * the numbers reader.c's skip_fast steps over (stats, view counts). */
static inline __attribute__((always_inline)) const unsigned char *
enr_lex_skip_num(const unsigned char *p, const unsigned char *end)
{
    if (*p == '-' && ++p >= end)
        return NULL;
    if ((unsigned)(*p - '1') < 9)
        p = enr_lex_digits_end(p + 1, end);
    else if (*p == '0')
        p++;
    else
        return NULL;
    /* most are integers: one test for the fraction and the exponent */
    if (p >= end || (*p != '.' && (*p | 0x20) != 'e'))
        return p;
    if (*p == '.') {
        if (++p >= end || (unsigned)(*p - '0') >= 10)
            return NULL;
        p = enr_lex_digits_end(p + 1, end);
    }
    if (p < end && (*p | 0x20) == 'e') {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || (unsigned)(*p - '0') >= 10)
            return NULL;
        p = enr_lex_digits_end(p + 1, end);
    }
    return p;
}

#ifdef __SSE2__
/*
 * An array of integers as clients send it (a view history): from its
 * first element p to its ']', 16 bytes a step with bit masks instead of
 * a number at a time; the byte after the ']', or NULL for anything else
 * (a sign, a fraction, white space, fewer than 16 bytes left), which the
 * caller then reads as it would have.  Accepts only what the number
 * grammar does: every element starts with a digit, a leading 0 is the
 * whole element, no empty element, and the ']' follows a digit.
 */
static inline __attribute__((always_inline)) const unsigned char *
enr_lex_int_array(const unsigned char *p, const unsigned char *end)
{
    unsigned start = 1; /* the next byte must start an element */
    unsigned zero = 0;  /* the byte before is an element's leading 0 */

    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i d = _mm_sub_epi8(v, _mm_set1_epi8('0'));
        unsigned dig =
            (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d));
        unsigned com = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')));
        unsigned zer = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('0')));
        unsigned other = ~(dig | com) & 0xffffu;
        unsigned lim = other ? (1u << __builtin_ctz(other)) - 1 : 0xffffu;
        unsigned starts = (com << 1 | start) & (lim << 1 | 1);
        unsigned lead = starts & zer;

        /* an element that does not start with a digit (",," ",]" "[,"),
         * a digit after a leading 0 */
        if ((starts & ~dig & lim) != 0 || ((lead << 1 | zero) & dig & lim) != 0)
            return NULL;
        if (other) {
            unsigned i = (unsigned)__builtin_ctz(other);

            if (p[i] != ']' || (starts >> i & 1))
                return NULL;
            return p + i + 1;
        }
        start = com >> 15;
        zero = lead >> 15;
        p += 16;
    }
    return NULL;
}
#endif

/* enr_lex_skip_ws on a bare pointer. */
static inline const unsigned char *enr_lex_ws_end(const unsigned char *p, const unsigned char *end)
{
    while (p < end && enr_lex_is_ws(*p))
        p++;
    return p;
}

/* The closing quote of the string whose body starts at p, or the byte
 * where the reader must look (scan.h's enr_skip_string).  Keys and tags,
 * most strings skipped, end within 16 bytes without a backslash: told
 * inline, without the call. */
static inline __attribute__((always_inline)) const unsigned char *
enr_lex_skip_str(const unsigned char *p, const unsigned char *end)
{
#ifdef __SSE2__
    if (end - p >= 16) {
        unsigned m = enr_lex_stops16(p);

        /* a quote or a control byte ends the scan as the wide scanner
         * would; a backslash, or none of them, goes on with it from
         * there (it starts anywhere outside an escape) */
        if (m == 0)
            return enr_skip_string(p + 16, end);
        p += __builtin_ctz(m);
        if (*p != '\\')
            return p;
    }
#endif
    return enr_skip_string(p, end);
}

#endif
