/*
 * test_reply_ids.c: an answer's item answers only the id whose bytes were
 * asked, decoded the same way on both sides (upstream_reply.h).
 *
 * The request side is the engine itself: each id below is written once,
 * as JSON string text, parsed by enr_parse as a client's batch, and the
 * record's key is the bytes a call asks for.  The answer side writes the
 * same id three ways (as the client wrote it, as an escaping encoder
 * writes the key's bytes, and as the raw key bytes a byte-echoing
 * upstream sends) and enr_upstream_reply_parse must give that item to
 * that key and to no other.  The ids are the ones some decoding merges:
 * lone surrogates (high, low, in pairs that do not pair, next to U+FFFD),
 * U+FFFD itself, ill-formed raw bytes the engine replaces by U+FFFD,
 * overlong forms, NUL, escaped against raw bytes, hex and letter case.
 * Every pair of them with different keys is asked in one call, both
 * orders, with the item of one only, then with both.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/engine.h"
#include "t.h"
#include "upstream/upstream_reply.h"
#include "upstream/reply_scan.h"

/* JSON string bodies (between the quotes), as a client may write an id. */
static const char *const texts[] = {
    "\\ud800",
    "\\uD800",
    "\\udbff",
    "\\udc00",
    "\\udfff",
    "\\ud800\\ud800",
    "\\udc00\\ud800",
    "\\ud800\\udc00", /* a pair: U+10000 */
    "\xf0\x90\x80\x80",
    "\\ud800A",
    "\\ud800\\u0041",
    "A\\udc00",
    "\\ufffd",
    "\\uFFFD",
    "\xef\xbf\xbd",
    "\\ufffd\\ufffd",
    "\\ufffd\\ufffd\\ufffd",
    "\\ufffdA",
    "A\\ufffd",
    "\xed\xa0\x80",     /* raw surrogate bytes: the engine makes 3 x U+FFFD */
    "\xc0\x80",         /* overlong NUL: 2 x U+FFFD */
    "\xe0\x80\x80",     /* overlong NUL in 3 bytes */
    "\xc1\x81",         /* overlong 'A' */
    "\xf4\x90\x80\x80", /* past U+10FFFF */
    "\xff",
    "a\\u0000",
    "a\\u0000b",
    "ab",
    "a",
    "A",
    "\\u0041",
    "\\u0061",
    "\\u00e9",
    "\\u00E9",
    "\xc3\xa9",
    "\\u00c9",
    "\\/",
    "/",
    "\\u002f",
    "\\\\",
    "\\\"",
    "\\u0022",
    "\\u00c0\\u0080",
    "\\u0100",
};
#define NTEXTS (sizeof texts / sizeof texts[0])

static char keys[NTEXTS][32];
static size_t key_lens[NTEXTS];
static enr_buf arena;

/* The key the engine makes of a client's id text, as a call asks it. */
static int engine_key(enr_engine *e, const char *text, char *out, size_t *len)
{
    enr_batch b = {0};
    enr_error err;
    enr_buf body = {0};
    int ok = 0;

    enr_buf_lit(&body, "[{\"provider\":\"yt\",\"id\":\"");
    enr_buf_append(&body, text, strlen(text));
    enr_buf_lit(&body, "\"}]");
    if (enr_parse(e, body.data, body.len, 0, &b, &err) == 0 && b.n == 1 && b.recs[0].key_len < 32) {
        *len = b.recs[0].key_len;
        memcpy(out, b.text.data + b.recs[0].key_off, *len);
        ok = 1;
    }
    enr_batch_free(&b);
    enr_buf_free(&body);
    return ok;
}

/* The key's bytes as an escaping encoder writes them (Python's
 * json.dumps with surrogatepass, JavaScript's JSON.stringify): every
 * non-ASCII code point as \uXXXX (a pair past the BMP, a lone surrogate
 * as itself), NUL, quote and backslash escaped. */
static void escaped(enr_buf *o, const char *k, size_t n)
{
    const unsigned char *s = (const unsigned char *)k;
    char u[16];

    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t w;
        if (s[i] < 0x80) {
            if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\') {
                snprintf(u, sizeof u, "\\u%04x", s[i]);
                enr_buf_append(o, u, 6);
            } else {
                enr_buf_putc(o, (char)s[i]);
            }
            i++;
            continue;
        }
        w = s[i] >= 0xf0 ? 4 : s[i] >= 0xe0 ? 3 : 2;
        cp = s[i] & (0x7f >> w);
        for (size_t j = 1; j < w && i + j < n; j++)
            cp = (cp << 6) | (s[i + j] & 0x3f);
        i += w;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xd800 | (cp >> 10), 0xdc00 | (cp & 0x3ff));
            enr_buf_append(o, u, 12);
        } else {
            snprintf(u, sizeof u, "\\u%04x", cp);
            enr_buf_append(o, u, 6);
        }
    }
}

/* One call asking for keys a then b (indexes into keys), answered by
 * items for the ids written in item_text[0..nitems) with durations 1, 2.
 * Returns the parse result; ids[0] is a's, ids[1] b's. */
static int ask(size_t a, size_t b, const char *const *item_text, const size_t *item_len,
               size_t nitems, enr_reply_id ids[2])
{
    enr_buf body = {0};
    int rc;

    memset(ids, 0, 2 * sizeof *ids);
    ids[0].id = keys[a];
    ids[0].id_len = key_lens[a];
    ids[1].id = keys[b];
    ids[1].id_len = key_lens[b];
    enr_buf_lit(&body, "{\"items\":[");
    for (size_t i = 0; i < nitems; i++) {
        char d[48];
        if (i)
            enr_buf_putc(&body, ',');
        enr_buf_lit(&body, "{\"id\":\"");
        enr_buf_append(&body, item_text[i], item_len[i]);
        snprintf(d, sizeof d, "\",\"duration\":%zu}", i + 1);
        enr_buf_append(&body, d, strlen(d));
    }
    enr_buf_lit(&body, "]}");
    enr_buf_reset(&arena);
    rc = enr_upstream_reply_parse(body.data, body.len, ids, 2, 7, &arena);
    enr_buf_free(&body);
    return rc;
}

/* The three ways an answer may write key i. */
static void forms(size_t i, enr_buf *esc, const char *form[3], size_t flen[3])
{
    enr_buf_reset(esc);
    escaped(esc, keys[i], key_lens[i]);
    form[0] = texts[i];
    flen[0] = strlen(texts[i]);
    form[1] = esc->data;
    flen[1] = esc->len;
    form[2] = keys[i];
    flen[2] = key_lens[i];
}

/* A raw form is JSON only without quote, backslash, control or NUL. */
static int raw_ok(size_t i)
{
    for (size_t k = 0; k < key_lens[i]; k++)
        if ((unsigned char)keys[i][k] < 0x20 || keys[i][k] == '"' || keys[i][k] == '\\')
            return 0;
    return 1;
}

/* The bytes an item written as form f of text i names: key i, but for a
 * client's text with ill-formed raw bytes (which the engine made into
 * U+FFFD, so no upstream was ever sent them): written raw in an answer,
 * those bytes are taken as they are (a byte-echoing upstream's answer
 * for the key that has them). */
static void named(size_t i, int f, const char **p, size_t *n)
{
    const char *t = texts[i];
    size_t tn = strlen(t);

    *p = keys[i];
    *n = key_lens[i];
    if (f == 0 && !enr_reply_id_askable(t, tn) && strchr(t, '\\') == NULL) {
        *p = t;
        *n = tn;
    }
}

/* What a call for keys a, b answered by the items (in order) of texts
 * it[0..nit) in form f, with durations 1, 2, ... must give each key: the
 * first item naming a key's bytes decides it, and a key no answer can
 * name unchanged (not askable) is never matched. */
static void expect(size_t a, size_t b, const size_t *it, size_t nit, int f, double want[2])
{
    const size_t k[2] = {a, b};

    want[0] = want[1] = 0;
    for (size_t j = 0; j < nit; j++) {
        const char *p;
        size_t n;
        named(it[j], f, &p, &n);
        for (int x = 0; x < 2; x++)
            if (want[x] == 0 && enr_reply_id_askable(keys[k[x]], key_lens[k[x]]) &&
                n == key_lens[k[x]] && memcmp(p, keys[k[x]], n) == 0)
                want[x] = (double)(j + 1);
    }
}

static void test_every_pair(void)
{
    enr_buf esc_a = {0}, esc_b = {0};
    size_t pairs = 0, bad = 0;

    for (size_t a = 0; a < NTEXTS; a++)
        for (size_t b = 0; b < NTEXTS; b++) {
            const char *fa[3], *fb[3];
            size_t la[3], lb[3];
            enr_reply_id ids[2];
            if (key_lens[a] == key_lens[b] && memcmp(keys[a], keys[b], key_lens[a]) == 0)
                continue; /* one id for the engine: nothing to tell apart */
            pairs++;
            forms(a, &esc_a, fa, la);
            forms(b, &esc_b, fb, lb);
            for (int f = 0; f < 3; f++) {
                const char *both[2] = {fb[f], fa[f]};
                size_t both_len[2] = {lb[f], la[f]};
                const size_t one[1] = {a}, two[2] = {b, a};
                double want[2];
                int rc;
                if (f == 2 && (!raw_ok(a) || !raw_ok(b)))
                    continue;
                /* a's item alone: a has it, b has nothing */
                expect(a, b, one, 1, f, want);
                rc = ask(a, b, &fa[f], &la[f], 1, ids);
                if (rc != 0 || ids[0].duration != want[0] || ids[1].duration != want[1] ||
                    ids[1].state != (want[1] ? ENR_REPLY_FOUND : ENR_REPLY_ABSENT)) {
                    if (bad++ < 20)
                        T_CHECK(0,
                                "ids \"%s\" and \"%s\" (form %d): the item of the first "
                                "gives rc %d, states %d %d",
                                texts[a], texts[b], f, rc, ids[0].state, ids[1].state);
                }
                /* both items, b's first: each its own */
                expect(a, b, two, 2, f, want);
                rc = ask(a, b, both, both_len, 2, ids);
                if (rc != 0 || ids[0].duration != want[0] || ids[1].duration != want[1]) {
                    if (bad++ < 20)
                        T_CHECK(0,
                                "ids \"%s\" and \"%s\" (form %d): both items give "
                                "durations %g %g, want %g %g",
                                texts[a], texts[b], f, ids[0].duration, ids[1].duration, want[0],
                                want[1]);
                }
            }
        }
    T_CHECK(bad == 0, "%zu of %zu pairs of ids told apart wrongly", bad, pairs);
    T_CHECK(pairs > 1000, "pairs tried: %zu", pairs);
    enr_buf_free(&esc_a);
    enr_buf_free(&esc_b);
}

/* The request side merges what it must (escaped and raw, hex case) and
 * nothing else: the pairs above are the ones the engine tells apart. */
static void test_engine_keys(void)
{
    T_CHECK(key_lens[0] == 3 && memcmp(keys[0], "\xed\xa0\x80", 3) == 0,
            "\\ud800 is kept as its WTF-8 bytes by the engine");
    T_CHECK(key_lens[12] == 3 && memcmp(keys[12], "\xef\xbf\xbd", 3) == 0, "\\ufffd is U+FFFD");
    T_CHECK(key_lens[19] == 9, "raw ED A0 80 is three U+FFFD for the engine");
    T_CHECK(key_lens[25] == 2 && keys[25][1] == '\0', "a\\u0000 keeps its NUL");
}

/* Which ids are asked at all: those an answer can carry unchanged. */
static void test_askable(void)
{
    size_t asked = 0;

    for (size_t i = 0; i < NTEXTS; i++) {
        int lone = 0;
        for (size_t k = 0; k + 2 < key_lens[i] + 0u; k++)
            if ((unsigned char)keys[i][k] == 0xed && (unsigned char)keys[i][k + 1] >= 0xa0)
                lone = 1;
        T_CHECK(enr_reply_id_askable(keys[i], key_lens[i]) == !lone, "askable(%s) = %d", texts[i],
                enr_reply_id_askable(keys[i], key_lens[i]));
        asked += !lone;
    }
    T_CHECK(asked > 20 && asked < NTEXTS, "%zu of %zu ids askable", asked, NTEXTS);
    T_CHECK(!enr_reply_id_askable("\xed\xb0\x80", 3), "a lone low surrogate is not askable");
    T_CHECK(!enr_reply_id_askable("\xc0\x80", 2) && !enr_reply_id_askable("\xe0\x80\x80", 3) &&
                !enr_reply_id_askable("\xf4\x90\x80\x80", 4) &&
                !enr_reply_id_askable("\xe2\x82", 2) && !enr_reply_id_askable("\xff", 1),
            "overlong, past U+10FFFF, cut and invalid bytes are not askable");
    T_CHECK(enr_reply_id_askable("", 0) && enr_reply_id_askable("a\0b", 3) &&
                enr_reply_id_askable("\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9", 9),
            "ASCII, NUL and well-formed UTF-8 are askable");
}

/* The decoder every reader uses, directly: a lone surrogate is replaced
 * and counted, so that no reader takes such a string for an id. */
static int decode(const char *json, size_t n, char *out, size_t cap, size_t *len, unsigned *lone)
{
    enr_jscan s;
    int rc;

    enr_jscan_init(&s, json, n, ENR_REPLY_MAX_DEPTH, 0);
    rc = enr_jscan_string(&s, out, cap, len);

    *lone = s.lone;
    return rc;
}

static void test_decoder(void)
{
    char out[16];
    size_t len;
    unsigned lone;

    T_CHECK(decode("\"\\ud800\"", 8, out, sizeof out, &len, &lone) == 0 && lone == 1,
            "a lone high surrogate is counted");
    T_CHECK(decode("\"\\udfff\\ud800\"", 14, out, sizeof out, &len, &lone) == 0 && lone == 2,
            "low then high: two lone surrogates");
    T_CHECK(decode("\"\\uDBFF\\uDFFF\"", 14, out, sizeof out, &len, &lone) == 0 && len == 4 &&
                lone == 0 && memcmp(out, "\xf4\x8f\xbf\xbf", 4) == 0,
            "a pair is one code point");
    T_CHECK(decode("\"ab", 3, out, sizeof out, &len, &lone) != 0 &&
                decode("\"", 1, out, sizeof out, &len, &lone) != 0 &&
                decode("\"\\ud80\"", 7, out, sizeof out, &len, &lone) != 0,
            "unterminated, short and bad escapes refused");
    T_CHECK(decode("\"abcdef\" tail", 13, out, 2, &len, &lone) == 0 && len == 6 &&
                memcmp(out, "ab", 2) == 0,
            "a string longer than the room is measured, not overrun");
}

int main(void)
{
    enr_engine *e = enr_engine_new();

    setvbuf(stdout, NULL, _IOLBF, 0);
    T_CHECK(e != NULL, "engine");
    if (e == NULL)
        T_DONE();
    for (size_t i = 0; i < NTEXTS; i++)
        T_CHECK(engine_key(e, texts[i], keys[i], &key_lens[i]), "the engine takes id %s", texts[i]);
    enr_engine_free(e);
    test_engine_keys();
    test_decoder();
    test_askable();
    test_every_pair();
    enr_buf_free(&arena);
    T_DONE();
}
