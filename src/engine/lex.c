/*
 * lex.c: the token level of the strict reader out of line (lex.h has
 * what is inlined): strings past their first 16 bytes, numbers,
 * literals, a short name's text; and the generic walk of objects and
 * arrays with a callback per member or element, with
 * enr_lex_skip_value, the recursive skip of any value that is the
 * reference of reader.c's fast skip.
 *
 * The body is never decoded as a whole.  UTF-8 replacement (docs/contract.md §2)
 * only matters inside strings: outside them any byte >= 0x80 is a syntax
 * error whatever it decodes to.  And inside a string that nobody reads,
 * replacement cannot change where the string ends (a quote or backslash
 * byte is never part of a multi-byte sequence), so strings are only
 * scanned here for the quote, escapes and raw control characters;
 * strings that are read are decoded by the caller (lex.h's enr_lex_decode_span).
 */
#include "engine/lex.h"

#include <string.h>

int enr_lex_scan_string_wide(enr_reader *r, enr_span *sp)
{
    const unsigned char *p = r->p + 1, *end = r->end;
    int escaped = 0;
    unsigned high = 0;

    sp->s = p;
    /* valid escapes are stepped over: a backslash here starts none */
    p = enr_scan_string(p, end, &high, &escaped);
    if (p >= end)
        ENR_LEX_FAIL(r, end, "unterminated string");
    if (*p != '"') {
        if (*p < 0x20)
            ENR_LEX_FAIL(r, p, "raw control character in string");
        if (end - p < 2)
            ENR_LEX_FAIL(r, end, "unterminated string");
        ENR_LEX_FAIL(r, p, p[1] == 'u' ? "bad \\u escape" : "bad escape");
    }
    sp->e = p;
    sp->escaped = escaped;
    sp->nonascii = high != 0;
    r->p = p + 1;
    return 0;
}

const char *enr_lex_short_text(enr_reader *r, const enr_span *sp, size_t *n)
{
    if (!sp->escaped) {
        *n = (size_t)(sp->e - sp->s);
        return (const char *)sp->s;
    }
    enr_buf_reset(&r->scratch);
    enr_lex_decode_span(r, sp, &r->scratch);
    *n = r->scratch.oom ? 0 : r->scratch.len;
    return r->scratch.data;
}

int enr_lex_scan_number(enr_reader *r, const unsigned char **s, const unsigned char **e)
{
    const unsigned char *p = r->p, *end = r->end;

    *s = p;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        ENR_LEX_FAIL(r, p, "bad number");
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = enr_lex_digits_end(p + 1, end);
    } else {
        ENR_LEX_FAIL(r, p, "bad number");
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            ENR_LEX_FAIL(r, p, "bad number: digit expected after '.'");
        p = enr_lex_digits_end(p + 1, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            ENR_LEX_FAIL(r, p, "bad number: digit expected in exponent");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *e = p;
    r->p = p;
    return 0;
}

int enr_lex_scan_literal(enr_reader *r)
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
    ENR_LEX_FAIL(r, p, "unexpected character");
}

int enr_lex_walk_object(enr_reader *r, int depth, enr_member_fn fn, void *arg)
{
    return enr_lex_walk_members(r, depth, fn, arg);
}

int enr_lex_walk_array(enr_reader *r, int depth, enr_element_fn fn, void *arg)
{
    size_t i = 0;
    int more;

    if (depth > ENR_MAX_DEPTH)
        ENR_LEX_FAIL(r, r->p, "nesting deeper than 1000");
    r->p++;
    enr_lex_skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 0;
    }
    for (;; i++) {
        if ((fn ? fn(r, depth, i, arg) : enr_lex_skip_value(r, depth)) < 0)
            return -1;
        more = enr_lex_next_or_close(r, ']');
        if (more <= 0)
            return more;
    }
}

int enr_lex_skip_value(enr_reader *r, int depth)
{
    const unsigned char *s, *e;
    enr_span sp;

    if (r->p >= r->end)
        ENR_LEX_FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
        return enr_lex_scan_string(r, &sp);
    case '{':
        return enr_lex_walk_object(r, depth + 1, NULL, NULL);
    case '[':
        return enr_lex_walk_array(r, depth + 1, NULL, NULL);
    case 't':
    case 'f':
    case 'n':
        return enr_lex_scan_literal(r) < 0 ? -1 : 0;
    default:
        return enr_lex_scan_number(r, &s, &e);
    }
}
