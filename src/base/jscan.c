/*
 * jscan.c: the JSON scanner shared outside the engine (jscan.h).
 *
 * Invariants: nothing is read at or past end; every container opened
 * counts against max_depth before anything inside it is read, so a
 * hostile nesting costs neither stack nor time beyond that bound; a
 * string is decoded in one pass into a caller's bounded buffer, its whole
 * decoded length counted, so nothing here allocates.
 */
#include "base/jscan.h"
#include "base/text.h"
#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

void enr_jscan_ws(enr_jscan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* The code unit of "\\uXXXX" at p (6 bytes available), or -1. */
static long unit_at(const unsigned char *p, const unsigned char *end)
{
    long v = 0;

    if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
        return -1;
    for (int i = 2; i < 6; i++) {
        int h = enr_hex_digit(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Decoded bytes go to out[0..cap); *len counts them all, so a string
 * longer than cap is seen to be longer without being kept. */
static void put(char *out, size_t cap, size_t *len, const char *b, size_t n)
{
    if (out != NULL && *len < cap)
        memcpy(out + *len, b, n < cap - *len ? n : cap - *len);
    *len += n;
}

static void put_cp(char *out, size_t cap, size_t *len, uint32_t cp)
{
    unsigned char b[4];
    size_t n = enr_utf8_put(b, cp);

    put(out, cap, len, (const char *)b, n);
}

/* The character a one-letter JSON escape stands for, 0 if none. */
static char simple_escape(unsigned char e)
{
    switch (e) {
    case '"':
    case '\\':
    case '/':
        return (char)e;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return 0;
    }
}

/* The code point of a \\u escape whose unit u was not paired: strict,
 * U+FFFD (counted); raw, a surrogateescape byte, or u as it is. */
static uint32_t lone_unit(enr_jscan *s, long u, char *out, size_t cap, size_t *len)
{
    if (!s->raw) {
        s->lone++;
        return 0xfffd;
    }
    if (u >= 0xdc80 && u <= 0xdcff) {
        char c = (char)(u - 0xdc00);
        put(out, cap, len, &c, 1);
        return UINT32_MAX;
    }
    return (uint32_t)u;
}

/* The \\u escape at q (with its low half when it has one) decoded;
 * what follows it, or NULL when it is not one. */
static const unsigned char *put_unit(enr_jscan *s, const unsigned char *q, char *out, size_t cap,
                                     size_t *len)
{
    long u = unit_at(q, s->end);
    uint32_t cp = (uint32_t)u;

    if (u < 0)
        return NULL;
    q += 6;
    if (u >= 0xd800 && u <= 0xdbff) {
        long lo = unit_at(q, s->end);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
            put_cp(out, cap, len,
                   0x10000 + (((uint32_t)u - 0xd800) << 10) + ((uint32_t)lo - 0xdc00));
            return q + 6;
        }
        cp = lone_unit(s, u, out, cap, len); /* what follows is read on its own */
    } else if (u >= 0xdc00 && u <= 0xdfff) {
        cp = lone_unit(s, u, out, cap, len);
    }
    if (cp != UINT32_MAX)
        put_cp(out, cap, len, cp);
    return q;
}

int enr_jscan_string(enr_jscan *s, char *out, size_t cap, size_t *len)
{
    const unsigned char *p = s->p + 1, *end = s->end;

    *len = 0;
    for (;;) {
        const unsigned char *q = p;
        char c;
        while (q < end && *q != '"' && *q != '\\' && *q != '\0')
            q++;
        put(out, cap, len, (const char *)p, (size_t)(q - p));
        if (q >= end || (*q == '\0' && !s->raw)) /* json-c ends its input at a NUL byte */
            return -1;
        if (*q == '"') {
            s->p = q + 1;
            return 0;
        }
        if (*q == '\0') {
            put(out, cap, len, "", 1);
            p = q + 1;
            continue;
        }
        if (q + 1 >= end)
            return -1;
        if (q[1] == 'u') {
            p = put_unit(s, q, out, cap, len);
            if (p == NULL)
                return -1;
            continue;
        }
        c = simple_escape(q[1]);
        if (c == 0 && !s->raw)
            return -1;
        c = c != 0 ? c : (char)q[1];
        put(out, cap, len, &c, 1);
        p = q + 2;
    }
}

int enr_jscan_key_text(enr_jscan *s, char *k, size_t *len)
{
    size_t klen;

    if (!enr_jscan_at(s, '"') || enr_jscan_string(s, k, ENR_JSCAN_KEY_MAX + 1, len) != 0)
        return -1;
    klen = *len < ENR_JSCAN_KEY_MAX + 1 ? *len : ENR_JSCAN_KEY_MAX + 1;
    for (size_t i = 0; i < klen; i++)
        if (k[i] == '\0') {
            *len = i;
            break;
        }
    enr_jscan_ws(s);
    if (!enr_jscan_at(s, ':'))
        return -1;
    s->p++;
    enr_jscan_ws(s);
    return 0;
}

int enr_jscan_key(enr_jscan *s, const char *const *names, int nnames, int *key)
{
    char k[ENR_JSCAN_KEY_MAX + 1];
    size_t len;

    if (enr_jscan_key_text(s, k, &len) != 0)
        return -1;
    *key = -1;
    for (int i = 0; i < nnames && len <= ENR_JSCAN_KEY_MAX; i++)
        if (strlen(names[i]) == len && memcmp(names[i], k, len) == 0)
            *key = i;
    return 0;
}

static int read_number(enr_jscan *s)
{
    const unsigned char *p = s->p, *end = s->end;

    if (p < end && *p == '-')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return -1;
    if (*p == '0')
        p++;
    else
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    if (p < end && *p == '.') {
        const unsigned char *d = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return -1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        const unsigned char *d;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return -1;
    }
    s->p = p;
    return 0;
}

int enr_jscan_number_at(enr_jscan *s, int depth, const unsigned char **at)
{
    *at = enr_jscan_at_number(s) ? s->p : NULL;
    return enr_jscan_skip(s, depth);
}

int enr_jscan_next(enr_jscan *s, unsigned char close)
{
    enr_jscan_ws(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == ',') {
        s->p++;
        enr_jscan_ws(s);
        return s->p < s->end ? 1 : -1;
    }
    if (*s->p == close) {
        s->p++;
        return 0;
    }
    return -1;
}

int enr_jscan_open(enr_jscan *s, int depth)
{
    unsigned char close = *s->p == '{' ? '}' : ']';

    if (depth > s->max_depth)
        return -1;
    s->p++;
    enr_jscan_ws(s);
    if (enr_jscan_at(s, (char)close)) {
        s->p++;
        return 0;
    }
    return s->p < s->end ? 1 : -1;
}

static int literal(enr_jscan *s, const char *word, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return -1;
    s->p += n;
    return 0;
}

int enr_jscan_skip(enr_jscan *s, int depth)
{
    size_t len;
    int more, key;

    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '"':
        return enr_jscan_string(s, NULL, 0, &len);
    case '{':
        for (more = enr_jscan_open(s, depth); more == 1; more = enr_jscan_next(s, '}'))
            if (enr_jscan_key(s, NULL, 0, &key) != 0 || enr_jscan_skip(s, depth + 1) != 0)
                return -1;
        return more;
    case '[':
        for (more = enr_jscan_open(s, depth); more == 1; more = enr_jscan_next(s, ']'))
            if (enr_jscan_skip(s, depth + 1) != 0)
                return -1;
        return more;
    case 't':
        return literal(s, "true", 4);
    case 'f':
        return literal(s, "false", 5);
    case 'n':
        return literal(s, "null", 4);
    default:
        return read_number(s);
    }
}

/* The end of the string whose opening quote is at p (past it no
 * backslash escapes), or NULL. */
static const unsigned char *span_string(const unsigned char *p, const unsigned char *end)
{
    for (p++; p < end; p++) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\' && ++p == end)
            return NULL;
    }
    return NULL;
}

/* The end of the container opened at p, or NULL. */
static const unsigned char *span_container(const unsigned char *p, const unsigned char *end,
                                           int max_depth)
{
    int depth = 0;

    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            p = span_string(p, end);
            if (p == NULL)
                return NULL;
            continue;
        }
        if ((c == '{' || c == '[') && ++depth > max_depth)
            return NULL;
        if ((c == '}' || c == ']') && --depth == 0)
            return p + 1;
        p++;
    }
    return NULL;
}

int enr_jscan_span(enr_jscan *s)
{
    const unsigned char *p = s->p, *end = s->end;

    if (p >= end)
        return -1;
    if (*p == '"')
        p = span_string(p, end);
    else if (*p == '{' || *p == '[')
        p = span_container(p, end, s->max_depth);
    else
        while (p < end && *p != ',' && *p != '}' && *p != ' ' && *p != '\t' && *p != '\r' &&
               *p != '\n')
            p++;
    if (p == NULL)
        return -1;
    s->p = p;
    return 0;
}

int enr_jscan_object(enr_jscan *s, int depth, const char *const *names, int nnames,
                     enr_jscan_member_fn fn, void *ctx)
{
    int more, key;

    if (!enr_jscan_at(s, '{'))
        return enr_jscan_skip(s, depth);
    for (more = enr_jscan_open(s, depth); more == 1; more = enr_jscan_next(s, '}'))
        if (enr_jscan_key(s, names, nnames, &key) != 0 || fn(ctx, key, depth + 1) != 0)
            return -1;
    return more;
}

int enr_jscan_array(enr_jscan *s, int depth, enr_jscan_element_fn fn, void *ctx)
{
    int more;

    if (!enr_jscan_at(s, '['))
        return enr_jscan_skip(s, depth);
    for (more = enr_jscan_open(s, depth); more == 1; more = enr_jscan_next(s, ']'))
        if (fn(ctx, depth + 1) != 0)
            return -1;
    return more;
}

int enr_jscan_string_at(enr_jscan *s, int depth, const unsigned char **at)
{
    *at = enr_jscan_at(s, '"') ? s->p : NULL;
    return enr_jscan_skip(s, depth);
}
