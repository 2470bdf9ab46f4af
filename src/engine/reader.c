/*
 * reader.c: the strict, streaming JSON reader of a request batch
 * (see reader.h for what it hands out).
 *
 * The body is never decoded as a whole.  UTF-8 replacement (docs/contract.md §2)
 * only matters inside strings: outside them any byte >= 0x80 is a syntax
 * error whatever it decodes to.  And inside a string that nobody reads,
 * replacement cannot change where the string ends (a quote or backslash
 * byte is never part of a multi-byte sequence), so skipped strings are
 * only scanned for the quote, escapes and raw control characters, 64
 * bytes at a time (scan.h), and a value nobody reads is skipped by one
 * loop (skip_fast) rather than a call per element, with its short
 * strings and its numbers told inline; a record's unread members in a
 * row are skipped together (skip_unread).  Strings that are
 * read are decoded to WTF-8 with the maximal-subpart replacement; one
 * without escapes that is well-formed UTF-8 is checked, then copied at
 * once.  Each fast path has its slow path behind r->slow, the reference
 * of the fast fuzz target.
 *
 * Depth counts the outer array as 1 (docs/contract.md §15); deeper than
 * ENR_MAX_DEPTH is a 400, so recursion is bounded.
 */
#include "engine/reader.h"

#include <string.h>

#include "engine/contract.h"
#include "engine/jstring.h"
#include "engine/numfmt.h"
#include "engine/scan.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define FAIL(r, at, msg)                                                                           \
    do {                                                                                           \
        (r)->err_offset = (long)((at) - (r)->start);                                               \
        (r)->err_msg = (msg);                                                                      \
        (r)->err_status = 400;                                                                     \
        return -1;                                                                                 \
    } while (0)

/* A string token located in the body: [s, e) between the quotes. */
typedef struct span {
    const unsigned char *s, *e;
    int escaped;  /* holds a backslash */
    int nonascii; /* holds a byte >= 0x80 */
} span;

/* The reader's scratch only ever compares a decoded key or string with a
 * name of at most 8 bytes ("toString", "provider"), whose escaped form is
 * at most 48 bytes: anything longer is no match, and is never decoded
 * whole (a key of invalid bytes would triple). */
#define SCRATCH_MAX 64

#define REGION(a, b) ((unsigned)(a) | (unsigned)(b) << 8)
static const unsigned region_codes[ENR_REGIONS] = {
    REGION('U', 'S'), REGION('G', 'B'), REGION('J', 'P'), REGION('K', 'R'),
    REGION('T', 'W'), REGION('S', 'G'), REGION('V', 'N'), REGION('T', 'H')};

static int skip_value(enr_reader *r, int depth);
static int text_value(enr_reader *r, int depth, enr_buf *out, uint8_t *tostring);

void enr_reader_init(enr_reader *r, const char *body, size_t len, size_t max_elements)
{
    enr_buf keep = r->scratch;
    int slow = r->slow;

    memset(r, 0, sizeof(*r));
    r->scratch = keep;
    r->slow = slow;
    enr_buf_reset(&r->scratch);
    r->scratch.max = SCRATCH_MAX;
    r->start = r->p = (const unsigned char *)body;
    r->end = r->start + len;
    r->max_elements = max_elements;
    r->err_offset = -1;
}

void enr_reader_free(enr_reader *r)
{
    enr_buf_free(&r->scratch);
}

void enr_fields_free(enr_fields *f)
{
    enr_buf_free(&f->id.text);
    enr_buf_free(&f->title.text);
    enr_buf_free(&f->duration.text);
}

/* JSON's white space: SP HT LF CR.  Any byte above SP is told by the
 * first compare, and a body without white space between tokens (what
 * clients send) pays that one compare per token. */
static inline int is_ws(unsigned c)
{
    return c <= ' ' && ((1ull << c) & (1ull << ' ' | 1ull << '\n' | 1ull << '\r' | 1ull << '\t'));
}

static inline void skip_ws(enr_reader *r)
{
    const unsigned char *p = r->p, *end = r->end;

    while (p < end && is_ws(*p))
        p++;
    r->p = p;
}

static int scan_string_wide(enr_reader *r, span *sp);

/* Scans the string token at r->p (on its opening quote): validates escapes
 * and rejects raw control characters; leaves r->p after the closing quote.
 * Inlined: keys and short values are most calls, and end in the first 16
 * bytes. */
static inline __attribute__((always_inline)) int scan_string(enr_reader *r, span *sp)
{
#ifdef __SSE2__
    const unsigned char *p = r->p + 1, *end = r->end;

    /* Keys and short values (most strings of a record) end within 16
     * bytes with nothing to step over: told inline, without the call. */
    if (end - p >= 16 && !r->slow) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                      _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                         ctl));

        if (m != 0 && p[__builtin_ctz(m)] == '"') {
            unsigned i = (unsigned)__builtin_ctz(m);

            sp->s = p;
            sp->e = p + i;
            sp->escaped = 0;
            sp->nonascii = ((unsigned)_mm_movemask_epi8(v) & ((1u << i) - 1)) != 0;
            r->p = p + i + 1;
            return 0;
        }
    }
#endif
    return scan_string_wide(r, sp);
}

/* scan_string past its first 16 bytes: the wide scanner (scan.h). */
static __attribute__((noinline)) int scan_string_wide(enr_reader *r, span *sp)
{
    const unsigned char *p = r->p + 1, *end = r->end;
    int escaped = 0;
    unsigned high = 0;

    sp->s = p;
    /* valid escapes are stepped over: a backslash here starts none */
    p = enr_scan_string(p, end, &high, &escaped);
    if (p >= end)
        FAIL(r, end, "unterminated string");
    if (*p != '"') {
        if (*p < 0x20)
            FAIL(r, p, "raw control character in string");
        if (end - p < 2)
            FAIL(r, end, "unterminated string");
        FAIL(r, p, p[1] == 'u' ? "bad \\u escape" : "bad escape");
    }
    sp->e = p;
    sp->escaped = escaped;
    sp->nonascii = high != 0;
    r->p = p + 1;
    return 0;
}

/* Decodes a scanned string span into WTF-8, appending to out. */
static void decode_span(const enr_reader *r, const span *sp, enr_buf *out)
{
    enr_jstring_decode(sp->s, sp->e, sp->escaped, sp->nonascii, r->slow, out);
}

/* The text of a string that is only compared with a short name (a key,
 * a provider, a region): its bytes in the body, or decoded into the
 * scratch when it has escapes.  *n is 0 when it cannot be such a name
 * (its decoded form is past SCRATCH_MAX). */
static const char *short_text(enr_reader *r, const span *sp, size_t *n)
{
    if (!sp->escaped) {
        *n = (size_t)(sp->e - sp->s);
        return (const char *)sp->s;
    }
    enr_buf_reset(&r->scratch);
    decode_span(r, sp, &r->scratch);
    *n = r->scratch.oom ? 0 : r->scratch.len;
    return r->scratch.data;
}

/* Is the key span equal to name (after unescaping)? */
static int key_is(enr_reader *r, const span *k, const char *name, size_t n)
{
    size_t len;
    const char *v = short_text(r, k, &len);

    return len == n && memcmp(v, name, n) == 0;
}

/* The end of the run of ASCII digits at p: 8 bytes a step (a byte is a
 * digit when its high nibble is 3 and its low nibble below 10). */
static inline const unsigned char *digits_end(const unsigned char *p, const unsigned char *end)
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

static int scan_number(enr_reader *r, const unsigned char **s, const unsigned char **e)
{
    const unsigned char *p = r->p, *end = r->end;

    *s = p;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        FAIL(r, p, "bad number");
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = digits_end(p + 1, end);
    } else {
        FAIL(r, p, "bad number");
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            FAIL(r, p, "bad number: digit expected after '.'");
        p = digits_end(p + 1, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            FAIL(r, p, "bad number: digit expected in exponent");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *e = p;
    r->p = p;
    return 0;
}

/* Consumes one of true/false/null at r->p; returns its kind or -1. */
static int scan_literal(enr_reader *r)
{
    const unsigned char *p = r->p;
    size_t left = (size_t)(r->end - p);

    if (left >= 4 && memcmp(p, "true", 4) == 0) {
        r->p += 4;
        return ENR_K_TRUE;
    }
    if (left >= 5 && memcmp(p, "false", 5) == 0) {
        r->p += 5;
        return ENR_K_FALSE;
    }
    if (left >= 4 && memcmp(p, "null", 4) == 0) {
        r->p += 4;
        return ENR_K_NULL;
    }
    FAIL(r, p, "unexpected character");
}

static int next_or_close_ws(enr_reader *r, unsigned char close);

/* After a member or element: consumes ',' (1: another follows) or the
 * closing byte (0: the container ended); anything else is an error. */
static inline int next_or_close(enr_reader *r, unsigned char close)
{
    /* what clients send: ',' right after the value, the next one right
     * after it; told inline */
    if (r->p + 1 < r->end && r->p[0] == ',' && r->p[1] > ' ') {
        r->p++;
        return 1;
    }
    return next_or_close_ws(r, close);
}

static int next_or_close_ws(enr_reader *r, unsigned char close)
{
    skip_ws(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        skip_ws(r);
        return 1;
    }
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    if (close == '}')
        FAIL(r, r->p, "',' or '}' expected");
    FAIL(r, r->p, "',' or ']' expected");
}

/*
 * Walks the members of the object at r->p (on '{').  For each member the
 * callback, if any, is given the key and must consume the value itself;
 * without one, values are skipped.  Returns 0 or -1.
 */
typedef int (*member_fn)(enr_reader *r, const span *key, int depth, void *arg);

/* Inlined where fn is known (a record's members: record_member), so
 * that the call per member is gone too. */
static inline __attribute__((always_inline)) int walk_members(enr_reader *r, int depth,
                                                              member_fn fn, void *arg)
{
    span key;
    int more;

    if (depth > ENR_MAX_DEPTH)
        FAIL(r, r->p, "nesting deeper than 1000");
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return 0;
    }
    for (;;) {
        if (r->p >= r->end || *r->p != '"')
            FAIL(r, r->p, "object key expected");
        if (scan_string(r, &key) < 0)
            return -1;
        if (r->end - r->p > 1 && r->p[0] == ':' && r->p[1] > ' ') { /* no white space */
            r->p++;
        } else {
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':')
                FAIL(r, r->p, "':' expected");
            r->p++;
            skip_ws(r);
        }
        if ((fn ? fn(r, &key, depth, arg) : skip_value(r, depth)) < 0)
            return -1;
        more = next_or_close(r, '}');
        if (more <= 0)
            return more;
    }
}

static int walk_object(enr_reader *r, int depth, member_fn fn, void *arg)
{
    return walk_members(r, depth, fn, arg);
}

/* Walks the elements of the array at r->p (on '['), calling fn on each
 * (fn consumes the value) or skipping them. */
typedef int (*element_fn)(enr_reader *r, int depth, size_t index, void *arg);

static int walk_array(enr_reader *r, int depth, element_fn fn, void *arg)
{
    size_t i = 0;
    int more;

    if (depth > ENR_MAX_DEPTH)
        FAIL(r, r->p, "nesting deeper than 1000");
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 0;
    }
    for (;; i++) {
        if ((fn ? fn(r, depth, i, arg) : skip_value(r, depth)) < 0)
            return -1;
        more = next_or_close(r, ']');
        if (more <= 0)
            return more;
    }
}

/* Skips the value at r->p, which sits inside a container at depth. */
static int skip_value(enr_reader *r, int depth)
{
    const unsigned char *s, *e;
    span sp;

    if (r->p >= r->end)
        FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
        return scan_string(r, &sp);
    case '{':
        return walk_object(r, depth + 1, NULL, NULL);
    case '[':
        return walk_array(r, depth + 1, NULL, NULL);
    case 't':
    case 'f':
    case 'n':
        return scan_literal(r) < 0 ? -1 : 0;
    default:
        return scan_number(r, &s, &e);
    }
}

/* The end of the number at p as scan_number reads it, or NULL where
 * scan_number fails: the same grammar without the reader's state, for
 * the numbers skip_fast steps over (stats, view counts). */
static inline __attribute__((always_inline)) const unsigned char *skip_num(const unsigned char *p,
                                                                           const unsigned char *end)
{
    if (*p == '-' && ++p >= end)
        return NULL;
    if ((unsigned)(*p - '1') < 9)
        p = digits_end(p + 1, end);
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
        p = digits_end(p + 1, end);
    }
    if (p < end && (*p | 0x20) == 'e') {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || (unsigned)(*p - '0') >= 10)
            return NULL;
        p = digits_end(p + 1, end);
    }
    return p;
}

static inline const unsigned char *ws_end(const unsigned char *p, const unsigned char *end)
{
    while (p < end && is_ws(*p))
        p++;
    return p;
}

/*
 * skip_value for the values a record holds and nobody reads (tags,
 * stats, descriptions: most of a batch): one loop with the nesting in a
 * bit stack instead of a call per element and per member.  It accepts
 * exactly what skip_value accepts and stops at the same byte; on any
 * byte it does not expect it starts over with skip_value, which finds
 * and reports the error (the fuzz target compares the two).
 */
#define SKIP_LEVELS 63 /* deeper: skip_value */

/* The first quote, backslash or control byte of the 16 bytes at p, as
 * a bit mask (v ^ 2 maps '"' to 0x20 and the control bytes onto
 * themselves, and nothing else to 0x20 or below). */
#ifdef __SSE2__
static inline __attribute__((always_inline)) unsigned stops16(const unsigned char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x = _mm_xor_si128(v, _mm_set1_epi8(2));

    return (unsigned)_mm_movemask_epi8(
        _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x20)), x),
                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
}
#endif

/* The closing quote of the string whose body starts at p, or the byte
 * where the reader must look (scan.h's enr_skip_string).  Keys and tags,
 * most strings skipped, end within 16 bytes without a backslash: told
 * inline, without the call. */
static inline __attribute__((always_inline)) const unsigned char *skip_str(const unsigned char *p,
                                                                           const unsigned char *end)
{
#ifdef __SSE2__
    if (end - p >= 16) {
        unsigned m = stops16(p);

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

static int skip_fast(enr_reader *r, int depth)
{
    const unsigned char *start = r->p, *p = start, *end = r->end;
    uint64_t objects = 0; /* bit 0: the innermost open container is an object */
    int level = 0;

    if (r->slow)
        return skip_value(r, depth);
value:
    if (p >= end)
        goto slow;
    switch (*p) {
    case '"':
        for (;;) {
            p = skip_str(p + 1, end);
            if (p >= end || *p != '"')
                goto slow;
            p++;
            /* an array of strings (tags): the next one at once */
            if (level == 0 || (objects & 1) || end - p < 2 || p[0] != ',' || p[1] != '"')
                break;
            p++;
        }
        break;
    case '{':
    case '[':
        if (level == SKIP_LEVELS || depth + level + 1 > ENR_MAX_DEPTH)
            goto slow;
        objects = objects << 1 | (*p == '{');
        level++;
        p = ws_end(p + 1, end);
        if (p < end && *p == ((objects & 1) ? '}' : ']')) {
            p++;
            objects >>= 1;
            level--;
            break;
        }
        if (objects & 1)
            goto key;
        goto value;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0)
            goto slow;
        p += 4;
        break;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0)
            goto slow;
        p += 5;
        break;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0)
            goto slow;
        p += 4;
        break;
    default:
        for (;;) {
            if ((p = skip_num(p, end)) == NULL)
                goto slow;
            /* an array of numbers (a history): the next one at once */
            if (level == 0 || (objects & 1) || end - p < 2 || p[0] != ',' ||
                (unsigned)(p[1] - '0') >= 10)
                break;
            p++;
        }
        break;
    }
    /* after a value: ',' and the next one, or the container's end */
    for (;;) {
        if (level == 0) {
            r->p = p;
            return 0;
        }
        if (end - p > 1 && p[0] == ',' && p[1] > ' ') { /* no white space */
            p++;
            if (objects & 1)
                goto key;
            goto value;
        }
        p = ws_end(p, end);
        if (p < end && *p == ',') {
            p = ws_end(p + 1, end);
            if (objects & 1)
                goto key;
            goto value;
        }
        if (p < end && *p == ((objects & 1) ? '}' : ']')) {
            p++;
            objects >>= 1;
            level--;
            continue;
        }
        goto slow;
    }
key:
    if (p >= end || *p != '"')
        goto slow;
    p = skip_str(p + 1, end);
    if (p >= end || *p != '"')
        goto slow;
    if (end - p > 2 && p[1] == ':' && p[2] > ' ') { /* no white space */
        p += 2;
        goto value;
    }
    p = ws_end(p + 1, end);
    if (p >= end || *p != ':')
        goto slow;
    p = ws_end(p + 1, end);
    goto value;
slow:
    r->p = start;
    return skip_value(r, depth);
}

/* An object being converted to text (ECMAScript String()/Number()): only
 * a "toString" key matters, and it makes the conversion throw. */
static int tostring_member(enr_reader *r, const span *key, int depth, void *arg)
{
    if (key_is(r, key, "toString", 8))
        *(uint8_t *)arg = 1;
    return skip_value(r, depth);
}

struct join_arg {
    enr_buf *out;
    uint8_t *tostring;
};

static int join_element(enr_reader *r, int depth, size_t index, void *arg)
{
    struct join_arg *j = arg;

    if (index > 0)
        enr_buf_putc(j->out, ',');
    return text_value(r, depth, j->out, j->tostring) < 0 ? -1 : 0;
}

/*
 * Appends the ECMAScript ToString of the value at r->p as an element of
 * an array being joined: null gives "", numbers print per rule 9 (-0 is
 * "0"), arrays join recursively, objects give "[object Object]" unless
 * they have a toString key.  Returns the value's kind or -1.
 */
static int text_value(enr_reader *r, int depth, enr_buf *out, uint8_t *tostring)
{
    const unsigned char *s, *e;
    char num[ENR_NUM_MAX];
    struct join_arg j = {out, tostring};
    span sp;
    int k;

    if (r->p >= r->end)
        FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
        if (scan_string(r, &sp) < 0)
            return -1;
        decode_span(r, &sp, out);
        return ENR_K_STRING;
    case '[':
        return walk_array(r, depth + 1, join_element, &j) < 0 ? -1 : ENR_K_ARRAY;
    case '{':
        if (walk_object(r, depth + 1, tostring_member, tostring) < 0)
            return -1;
        enr_buf_lit(out, "[object Object]");
        return ENR_K_OBJECT;
    case 't':
    case 'f':
    case 'n':
        k = scan_literal(r);
        if (k == ENR_K_TRUE)
            enr_buf_lit(out, "true");
        else if (k == ENR_K_FALSE)
            enr_buf_lit(out, "false");
        return k;
    default:
        if (scan_number(r, &s, &e) < 0)
            return -1;
        if (!out->over) /* past its cap the text is only validated */
            enr_buf_append(
                out, num,
                enr_num_format(enr_num_parse_json((const char *)s, (size_t)(e - s)), num));
        return ENR_K_NUMBER;
    }
}

/*
 * Reads the value of a field the contract looks at into f: its kind, its
 * number, its text (strings decoded, arrays joined, and for id numbers
 * printed), and whether an object conversion met "toString".  Only
 * converts what the field's rule can use.
 */
static int field_value(enr_reader *r, int depth, enr_field *f, int print_numbers)
{
    const unsigned char *s, *e;
    char num[ENR_NUM_MAX];
    int k;

    enr_buf_reset(&f->text);
    f->tostring = 0;
    f->num = 0;
    if (r->p >= r->end)
        FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
    case '[':
        k = text_value(r, depth, &f->text, &f->tostring);
        break;
    case '{':
        if (walk_object(r, depth + 1, tostring_member, &f->tostring) < 0)
            return -1;
        k = ENR_K_OBJECT;
        break;
    case 't':
    case 'f':
    case 'n':
        k = scan_literal(r);
        break;
    default:
        if (scan_number(r, &s, &e) < 0)
            return -1;
        f->num = enr_num_parse_json((const char *)s, (size_t)(e - s));
        if (print_numbers)
            enr_buf_append(&f->text, num, enr_num_format(f->num, num));
        k = ENR_K_NUMBER;
        break;
    }
    if (k < 0)
        return -1;
    f->kind = (uint8_t)k;
    return 0;
}

static int provider_value(enr_reader *r, int *provider)
{
    span sp;
    const char *v;
    size_t n;

    *provider = ENR_PROV_NONE;
    if (r->p < r->end && *r->p == '"') {
        if (scan_string(r, &sp) < 0)
            return -1;
        v = short_text(r, &sp, &n);
        if (n == 2) {
            if (memcmp(v, "yt", 2) == 0)
                *provider = ENR_PROV_YT;
            else if (memcmp(v, "vm", 2) == 0)
                *provider = ENR_PROV_VM;
            else if (memcmp(v, "dm", 2) == 0)
                *provider = ENR_PROV_DM;
        }
        return 0;
    }
    return skip_value(r, 2);
}

static int blocked_element(enr_reader *r, int depth, size_t index, void *arg)
{
    uint8_t *mask = arg;
    span sp;
    const char *v;
    size_t n;

    if (r->p >= r->end || *r->p != '"')
        return skip_value(r, depth);
    if (scan_string(r, &sp) < 0)
        return -1;
    v = short_text(r, &sp, &n);
    if (n == 2) {
        /* a region's two letters as one 16-bit number: one compare each */
        unsigned code = (unsigned char)v[0] | (unsigned char)v[1] << 8;

        for (int i = 0; i < ENR_REGIONS; i++)
            if (code == region_codes[i])
                *mask |= (uint8_t)(1u << i);
    }
    return 0;
}

/* A printable ASCII byte that a string holds as it is (no quote, no
 * backslash). */
static inline int plain_ascii(unsigned c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/*
 * The blocked array as clients send it: strings of two plain ASCII
 * bytes, no white space ("[\"JP\",\"KR\"]").  Anything else (-1) leaves
 * r->p and *mask as they were, and walk_array reads the array; the fast
 * fuzz target compares the two.
 */
static int blocked_fast(enr_reader *r, uint8_t *mask)
{
    const unsigned char *p = r->p + 1, *end = r->end;
    uint8_t m = 0;

    if (end - p >= 1 && *p == ']') {
        r->p = p + 1;
        return 0;
    }
    for (;;) {
        unsigned code;

        if (end - p < 5 || p[0] != '"' || !plain_ascii(p[1]) || !plain_ascii(p[2]) || p[3] != '"')
            return -1;
        code = p[1] | p[2] << 8;
        for (int i = 0; i < ENR_REGIONS; i++)
            if (code == region_codes[i])
                m |= (uint8_t)(1u << i);
        p += 4;
        if (*p == ']') {
            r->p = p + 1;
            *mask = m;
            return 0;
        }
        if (*p != ',')
            return -1;
        p++;
    }
}

/* The closing quote of a key with neither escape nor control byte that
 * ends within 16 bytes of k (the bulky fields' names), or NULL. */
static inline __attribute__((always_inline)) const unsigned char *
plain_key(const unsigned char *k, const unsigned char *end)
{
#ifdef __SSE2__
    if (end - k >= 16) {
        unsigned m = stops16(k);

        return m != 0 && k[__builtin_ctz(m)] == '"' ? k + __builtin_ctz(m) : NULL;
    }
#endif
    for (const unsigned char *p = k; p < end && p - k < 16; p++) {
        if (*p == '"')
            return p;
        if (*p == '\\' || *p < 0x20)
            return NULL;
    }
    return NULL;
}

/* Is this unescaped key one record_member reads? */
static int key_read(const unsigned char *k, size_t n)
{
    switch (n) {
    case 2:
        return memcmp(k, "id", 2) == 0;
    case 5:
        return memcmp(k, "title", 5) == 0;
    case 7:
        return memcmp(k, "blocked", 7) == 0;
    case 8:
        return memcmp(k, "provider", 8) == 0 || memcmp(k, "duration", 8) == 0;
    default:
        return 0;
    }
}

/*
 * Skips the value of a record member nobody reads, then the members
 * after it as long as they are unread too (a record's bulky fields come
 * in a row: description, tags, stats, ...), without a return to
 * walk_object and a call of record_member per member.  It only goes on
 * over ',"key":' as clients send it (no white space, a short key without
 * escapes, compared as it is); at anything else it leaves r->p after the last value skipped and
 * walk_object reads on from there as it would have, errors included.
 */
static __attribute__((noinline)) int skip_unread(enr_reader *r, int depth)
{
    const unsigned char *end = r->end;

    for (;;) {
        const unsigned char *p, *k;

        if (skip_fast(r, depth) < 0)
            return -1;
        p = r->p;
        if (r->slow || end - p < 2 || p[0] != ',' || p[1] != '"')
            return 0;
        k = p + 2;
        p = plain_key(k, end);
        if (p == NULL || end - p < 3 || p[1] != ':' || p[2] <= ' ' || key_read(k, (size_t)(p - k)))
            return 0;
        r->p = p + 2;
    }
}

static int record_member_escaped(enr_reader *r, const span *key, int depth, void *arg);

/* Inlined into the walk of a record's members (walk_members). */
static inline __attribute__((always_inline)) int record_member(enr_reader *r, const span *key,
                                                               int depth, void *arg)
{
    enr_fields *f = arg;
    const char *k = (const char *)key->s;
    size_t n = (size_t)(key->e - key->s);

    if (key->escaped)
        return record_member_escaped(r, key, depth, arg);
    switch (n) {
    case 2:
        if (memcmp(k, "id", 2) == 0)
            return field_value(r, depth, &f->id, 1);
        break;
    case 5:
        if (memcmp(k, "title", 5) == 0)
            return field_value(r, depth, &f->title, 0);
        break;
    case 7:
        if (memcmp(k, "blocked", 7) == 0) {
            f->blocked = 0;
            f->blocked_arr = r->p < r->end && *r->p == '[';
            if (f->blocked_arr) {
                if (!r->slow && depth < ENR_MAX_DEPTH && blocked_fast(r, &f->blocked) == 0)
                    return 0;
                return walk_array(r, depth + 1, blocked_element, &f->blocked);
            }
            return skip_value(r, depth);
        }
        break;
    case 8:
        if (memcmp(k, "provider", 8) == 0)
            return provider_value(r, &f->provider);
        if (memcmp(k, "duration", 8) == 0)
            return field_value(r, depth, &f->duration, 0);
        break;
    default:
        break;
    }
    return skip_unread(r, depth);
}

/* Rare: a key with escapes, decoded once, then matched by its name. */
static __attribute__((noinline)) int record_member_escaped(enr_reader *r, const span *key,
                                                           int depth, void *arg)
{
    span dec;
    size_t n;
    const char *k = short_text(r, key, &n);
    char name[8];

    if (n == 0 || n > 8)
        return skip_value(r, depth);
    memcpy(name, k, n);
    dec.s = (const unsigned char *)name;
    dec.e = dec.s + n;
    dec.escaped = dec.nonascii = 0;
    return record_member(r, &dec, depth, arg);
}

int enr_reader_begin(enr_reader *r)
{
    if (r->end - r->p >= 3 && r->p[0] == 0xef && r->p[1] == 0xbb && r->p[2] == 0xbf)
        r->p += 3;
    skip_ws(r);
    if (r->p >= r->end)
        FAIL(r, r->p, "empty body");
    if (*r->p != '[') {
        /* Validate first: a malformed body is a syntax error, not a shape one. */
        if (skip_value(r, 0) < 0)
            return -1;
        skip_ws(r);
        if (r->p != r->end)
            FAIL(r, r->p, "unexpected data after the JSON value");
        r->err_offset = 0;
        r->err_msg = "expected a JSON array of records";
        r->err_status = 400;
        return -1;
    }
    r->p++;
    skip_ws(r);
    r->element = 0;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        r->element = (size_t)-1; /* empty array: nothing to read */
    }
    return 0;
}

static int finish(enr_reader *r)
{
    skip_ws(r);
    if (r->p != r->end)
        FAIL(r, r->p, "unexpected data after the JSON value");
    return 0;
}

/* After a top-level element: ',' (1: more elements) or ']' (0: done). */
static int after_element(enr_reader *r)
{
    int more = next_or_close(r, ']');

    if (more < 0)
        return -1;
    r->elements++;
    if (more)
        r->element++;
    else
        r->element = (size_t)-1;
    return more;
}

static void fields_reset(enr_fields *f)
{
    f->id.kind = f->title.kind = f->duration.kind = ENR_K_MISSING;
    f->id.tostring = f->title.tostring = f->duration.tostring = 0;
    enr_buf_reset(&f->id.text);
    enr_buf_reset(&f->title.text);
    enr_buf_reset(&f->duration.text);
    f->provider = ENR_PROV_NONE;
    f->blocked_arr = 0;
    f->blocked = 0;
}

int enr_reader_next(enr_reader *r, enr_fields *f)
{
    int more;

    while (r->element != (size_t)-1) {
        if (r->max_elements && r->element >= r->max_elements) {
            r->err_offset = (long)(r->p - r->start);
            r->err_msg = "too many records in the batch";
            r->err_status = 413;
            return -1;
        }
        if (r->p >= r->end)
            FAIL(r, r->p, "value expected");
        if (*r->p == '{') {
            fields_reset(f);
            if (walk_members(r, 2, record_member, f) < 0)
                return -1;
            /* over is not an error here: a field past its cap is refused
             * by the engine only if the record uses it */
            if ((f->id.text.oom && !f->id.text.over) ||
                (f->title.text.oom && !f->title.text.over) ||
                (f->duration.text.oom && !f->duration.text.over)) {
                r->err_offset = (long)(r->p - r->start);
                r->err_msg = "out of memory";
                r->err_status = 500;
                return -1;
            }
            r->record_element = r->element;
            if (after_element(r) < 0)
                return -1;
            return 1;
        }
        if (*r->p == 'n' && r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0)
            FAIL(r, r->p, "null element in the batch");
        if (skip_value(r, 1) < 0)
            return -1;
        more = after_element(r);
        if (more < 0)
            return -1;
    }
    return finish(r) < 0 ? -1 : 0;
}
