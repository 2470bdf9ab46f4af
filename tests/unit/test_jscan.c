/*
 * test_jscan.c: the JSON scanner shared outside the engine (base/jscan.c)
 * and the UTF-8 helpers (base/utf8.h): a string decoded strictly (a
 * provider's answer) and raw (a replay trace), a value spanned unjudged,
 * nesting held to the scanner's bound, and the trace reader on that
 * scanner keeping its liberties (a trailing comma, a key compared as
 * written).
 */
#include <stdio.h>
#include <string.h>

#include "base/jscan.h"
#include "base/utf8.h"
#include "replay/replay_trace.h"
#include "t.h"

/* The JSON string text decoded: 0 with its bytes in out, *len long, or -1. */
static int decode(const char *text, int raw, char *out, size_t cap, size_t *len, unsigned *lone)
{
    enr_jscan s;
    int rc;

    enr_jscan_init(&s, text, strlen(text), 8, raw);
    rc = enr_jscan_string(&s, out, cap, len);
    *lone = s.lone;
    return rc;
}

static void decodes_to(const char *text, int raw, const char *want, size_t want_len)
{
    char out[64];
    size_t len = 0;
    unsigned lone;
    int rc = decode(text, raw, out, sizeof out, &len, &lone);

    T_CHECK_IN("strings", rc == 0 && len == want_len && memcmp(out, want, len) == 0,
               "%s (%s): rc %d, %zu bytes, want %zu", text, raw ? "raw" : "strict", rc, len,
               want_len);
}

static void refused(const char *text, int raw)
{
    char out[64];
    size_t len;
    unsigned lone;

    T_CHECK_IN("strings", decode(text, raw, out, sizeof out, &len, &lone) == -1, "%s (%s) refused",
               text, raw ? "raw" : "strict");
}

static void strings(void)
{
    enr_jscan s;
    char out[4];
    size_t len;
    unsigned lone;

    /* Both: escapes, a pair, a string longer than its buffer counted whole. */
    decodes_to("\"a\\n\\u00e9\\ud83d\\ude00\\/\"", 0, "a\n\xc3\xa9\xf0\x9f\x98\x80/", 9);
    decodes_to("\"a\\n\\u00e9\\ud83d\\ude00\\/\"", 1, "a\n\xc3\xa9\xf0\x9f\x98\x80/", 9);
    T_CHECK(decode("\"abcdef\"", 0, out, sizeof out, &len, &lone) == 0 && len == 6 &&
                memcmp(out, "abcd", 4) == 0,
            "a string past cap: %zu bytes counted", len);
    /* Strict: a lone surrogate is U+FFFD and counted; NUL and \q refused. */
    T_CHECK(decode("\"\\ud800x\\udc80\"", 0, out, 0, &len, &lone) == 0 && lone == 2 && len == 7,
            "strict lone surrogates: %u counted, %zu bytes", lone, len);
    decodes_to("\"\\udc80\"", 0, "\xef\xbf\xbd", 3);
    refused("\"a\\qb\"", 0);
    /* Raw: surrogateescape bytes, other lone halves as WTF-8, \q is q. */
    decodes_to("\"\\udc80\\udcff\"", 1, "\x80\xff", 2);
    decodes_to("\"\\ud800\\udc7f\"", 1, "\xf0\x90\x81\xbf", 4);
    decodes_to("\"\\ud800x\\udc00\"", 1, "\xed\xa0\x80x\xed\xb0\x80", 7);
    decodes_to("\"a\\qb\\\"\"", 1, "aqb\"", 4);
    enr_jscan_init(&s, "\"a\0b\"", 5, 8, 0);
    T_CHECK(enr_jscan_string(&s, out, sizeof out, &len) == -1, "strict: a NUL ends the input");
    enr_jscan_init(&s, "\"a\0b\"", 5, 8, 1);
    T_CHECK(enr_jscan_string(&s, out, sizeof out, &len) == 0 && len == 3 &&
                memcmp(out, "a\0b", 3) == 0,
            "raw: a NUL is a byte");
    refused("\"\\u12\"", 1);
    refused("\"abc", 1);
}

/* The span of the first value of text: its length, or -1. */
static long span(const char *text, int max_depth)
{
    enr_jscan s;

    enr_jscan_init(&s, text, strlen(text), max_depth, 1);
    if (enr_jscan_span(&s) != 0)
        return -1;
    return (long)(s.p - (const unsigned char *)text);
}

static void spans(void)
{
    T_CHECK(span("\"a\\\"b\" x", 8) == 6, "a string to its unescaped quote");
    T_CHECK(span("[{\"a\":\"]}\"}], 1", 8) == 12, "a container: brackets in strings ignored");
    T_CHECK(span("[\\q}]x", 8) == 4, "a container is not judged: %ld", span("[\\q}]x", 8));
    T_CHECK(span("tru]e,", 8) == 5, "a scalar up to a comma");
    T_CHECK(span("}", 8) == 0, "an empty scalar");
    T_CHECK(span("[[[]]]", 3) == 6 && span("[[[[]]]]", 3) == -1, "nesting bounded");
    T_CHECK(span("\"ab\\", 8) == -1 && span("[\"]", 8) == -1 && span("", 8) == -1,
            "an unterminated value");
}

static void nesting(void)
{
    enr_jscan s;

    enr_jscan_init(&s, "[[[]]]", 6, 3, 0);
    T_CHECK(enr_jscan_skip(&s, 1) == 0 && s.p == s.end, "three deep within a bound of 3");
    enr_jscan_init(&s, "[[[[]]]]", 8, 3, 0);
    T_CHECK(enr_jscan_skip(&s, 1) == -1, "four deep past a bound of 3");
}

static void utf8(void)
{
    unsigned char b[4];

    T_CHECK(enr_utf8_seq((const unsigned char *)"\xe2\x82\xac",
                         (const unsigned char *)"\xe2\x82\xac" + 3) == 3,
            "a whole sequence");
    T_CHECK(enr_utf8_seq((const unsigned char *)"\xe0\x80",
                         (const unsigned char *)"\xe0\x80" + 2) == -1,
            "an overlong lead: one byte replaced");
    T_CHECK(enr_utf8_seq((const unsigned char *)"\xf0\x90\x80",
                         (const unsigned char *)"\xf0\x90\x80" + 3) == -3,
            "a truncated 4-byte sequence: its maximal subpart");
    T_CHECK(enr_utf8_seq((const unsigned char *)"\xed\xa0\x80",
                         (const unsigned char *)"\xed\xa0\x80" + 3) == -1,
            "a surrogate is not UTF-8");
    T_CHECK(enr_utf8_put(b, 0xd800) == 3 && memcmp(b, "\xed\xa0\x80", 3) == 0,
            "a surrogate as WTF-8");
    T_CHECK(enr_utf8_put(b, 0x10ffff) == 4 && memcmp(b, "\xf4\x8f\xbf\xbf", 4) == 0, "U+10FFFF");
}

static int loads(const char *text, double *ts, char *body, size_t cap)
{
    enr_replay_trace t;
    char err[128];
    int ok = enr_replay_trace_parse(&t, text, strlen(text), "t", err, sizeof err) == 0;

    if (!ok)
        return 0;
    *ts = t.e[t.n - 1].ts;
    snprintf(body, cap, "%.*s", (int)t.e[0].len, t.e[0].body);
    enr_replay_trace_free(&t);
    return 1;
}

static void trace_lines(void)
{
    double ts;
    char body[64];

    T_CHECK(loads("{\"ts\":1,\"payload\":[1],}\n", &ts, body, sizeof body) &&
                strcmp(body, "[1]") == 0,
            "a trailing comma is forgiven");
    T_CHECK(loads("{\"ts\":1,\"payload\":\"a\\udc80\"} and then\n", &ts, body, sizeof body) &&
                strcmp(body, "a\x80") == 0,
            "a string payload decoded raw, what follows the line's object ignored");
    T_CHECK(!loads("{\"t\\u0073\":1,\"payload\":[]}\n", &ts, body, sizeof body),
            "a key is compared as written: t\\u0073 is not ts");
    T_CHECK(!loads("{\"ts\":1,\"payload\":\"\\u12\"}\n", &ts, body, sizeof body),
            "a string payload with a broken \\u escape is a bad line");
}

int main(void)
{
    strings();
    spans();
    nesting();
    utf8();
    trace_lines();
    T_DONE();
}
