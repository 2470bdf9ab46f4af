/*
 * test_engine.c: the reader and the record rules through the engine's
 * public API: what is accepted, what is rejected with which status, where
 * (offset / element), and the exact bytes printed for the cases the
 * vectors only sample.
 */
#include <ctype.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/clock.h"
#include "engine/engine.h"
#include "t.h"

static enr_engine *eng;
static enr_batch batch;
static enr_buf out;
static enr_error err;

/* Parses body; returns 0/-1 and leaves the NDJSON (fetched_at as 0) or the
 * error JSON in out. */
static int run(const char *body, size_t len, size_t max_records)
{
    int rc;

    enr_buf_reset(&out);
    rc = enr_parse(eng, body, len, max_records, &batch, &err);
    if (rc == 0 && enr_emit(eng, &batch, enr_wall_ms, &out, &err) < 0) {
        enr_buf_reset(&out);
        rc = -1;
    }
    if (rc < 0) {
        enr_error_json(&err, &out);
    } else {
        /* blank the timestamps: ,"fetched_at":123} -> ,"fetched_at":0} */
        enr_buf tmp = {0};
        const char *p = out.data, *end = out.data + out.len;
        while (p < end) {
            const char *f = memmem(p, (size_t)(end - p), "\"fetched_at\":", 13);
            if (f == NULL) {
                enr_buf_append(&tmp, p, (size_t)(end - p));
                break;
            }
            f += 13;
            enr_buf_append(&tmp, p, (size_t)(f - p));
            enr_buf_putc(&tmp, '0');
            while (f < end && *f >= '0' && *f <= '9')
                f++;
            p = f;
        }
        enr_buf_reset(&out);
        enr_buf_append(&out, tmp.data, tmp.len);
        enr_buf_free(&tmp);
    }
    enr_buf_putc(&out, '\0');
    return rc;
}

#define OK(body) run((body), sizeof(body) - 1, 0)

static void expect_error(const char *body, size_t len, int status, long offset, long element)
{
    int rc = run(body, len, 0);

    T_CHECK(rc == -1, "accepted %s", body);
    T_CHECK(err.status == status, "%s: status %d, want %d", body, err.status, status);
    T_CHECK(err.offset == offset, "%s: offset %ld, want %ld (%s)", body, err.offset, offset,
            err.msg);
    T_CHECK(err.element == element, "%s: element %ld, want %ld", body, err.element, element);
}
#define ERR(body, st, off, el) expect_error((body), sizeof(body) - 1, (st), (off), (el))

static const char AV[] = "\"availability\":{\"US\":true,\"GB\":true,\"JP\":true,\"KR\":true,"
                         "\"TW\":true,\"SG\":true,\"VN\":true,\"TH\":true}";

static void test_syntax_errors(void)
{
    ERR("", 400, 0, -1);
    ERR("   ", 400, 3, -1);
    ERR("[1,]", 400, 3, 1);
    ERR("[1 2]", 400, 3, 0);
    ERR("[01]", 400, 2, 0);
    ERR("[-01]", 400, 3, 0); /* a leading zero after the sign too */
    ERR("[-]", 400, 2, 0);
    ERR("[{\"provider\":\"yt\",\"id\":\"a\",\"duration\":-01}]", 400, 40, 0);
    ERR("[1.]", 400, 3, 0);
    ERR("[.5]", 400, 1, 0);
    ERR("[+1]", 400, 1, 0);
    ERR("[NaN]", 400, 1, 0);
    ERR("[Infinity]", 400, 1, 0);
    ERR("[\"a\tb\"]", 400, 3, 0);
    ERR("[\"\\x\"]", 400, 2, 0);
    ERR("[\"\\u12G4\"]", 400, 2, 0);
    ERR("[\"abc", 400, 5, 0);
    ERR("[{\"a\":1,}]", 400, 8, 0);
    ERR("[{'a':1}]", 400, 2, 0);
    ERR("[]]", 400, 2, -1);
    ERR("[] x", 400, 3, -1);
    ERR("[\xc2\xa0]", 400, 1, 0);                  /* NBSP is not JSON white space */
    ERR("\xef\xbb\xbf\xef\xbb\xbf[]", 400, 3, -1); /* a second BOM */
    ERR(" \xef\xbb\xbf[]", 400, 1, -1);            /* white space before the BOM */
    ERR("[1]/*c*/", 400, 3, -1);
    ERR("[tru]", 400, 1, 0);
    ERR("[{\"a\" 1}]", 400, 6, 0);
}

static void test_shape_errors(void)
{
    ERR("{}", 400, 0, -1);
    ERR("\"x\"", 400, 0, -1);
    ERR("{\"a\":}", 400, 5, -1); /* syntax wins over shape */
    ERR("[{},null]", 400, 4, 1);
    ERR("[{\"provider\":\"xx\",\"id\":{\"toString\":1}}]", 400, -1, 0);
    ERR("[1,{\"provider\":\"yt\",\"id\":[[{\"\\u0074oString\":1}]]}]", 400, -1, 1);
    ERR("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":1}]", 400, -1, 0);
    ERR("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":[]}]", 400, -1, 0);
    ERR("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":true}]", 400, -1, 0);
    ERR("[{\"provider\":\"yt\",\"id\":\"a\",\"duration\":[{\"toString\":0}]}]", 400, -1, 0);
    /* not looked at: skipped record, or an overridden occurrence */
    T_CHECK(OK("[{\"provider\":\"xx\",\"id\":\"a\",\"title\":1}]") == 0, "skipped record title");
    T_CHECK(OK("[{\"id\":{\"toString\":1},\"id\":\"x\",\"provider\":\"zz\"}]") == 0,
            "last id wins");
    T_CHECK(OK("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":0,\"title\":-0}]") == 0, "title 0");
    T_CHECK(OK("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":1e-400}]") == 0, "title underflow");
    T_CHECK(OK("[{\"provider\":\"yt\",\"id\":\"a\",\"id\":{\"a\":{\"toString\":1}}}]") == 0,
            "inner objects are not converted");
}

static void test_records(void)
{
    char want[1024];

    T_CHECK(OK("[]") == 0 && strcmp(out.data, "\n") == 0, "empty batch gives one LF");
    T_CHECK(OK("\xef\xbb\xbf [ 1 , \"x\" , [] , true ] \r\n") == 0 && strcmp(out.data, "\n") == 0,
            "non-objects skipped");
    OK("[{\"provider\":\"yt\",\"id\":\" AbC-123 \",\"title\":\"  Hello\\u3000World\\t!! \","
       "\"duration\":\"253\",\"blocked\":[\"JP\",\"us\",\"KR\",\"KR\"]}]");
    T_STREQ(out.data, "{\"hash\":\"71fe3702798f512ed176ae49f709b6a5099f37a2\",\"provider\":\"yt\","
                      "\"id\":\"abc-123\",\"title\":\"Hello World !!\",\"poster\":"
                      "\"https://i.ytimg.com/vi/abc-123/hqdefault.jpg\",\"duration\":253,"
                      "\"availability\":{\"US\":true,\"GB\":true,\"JP\":false,\"KR\":false,"
                      "\"TW\":true,\"SG\":true,\"VN\":true,\"TH\":true},\"fetched_at\":0}\n");
    OK("[{\"provider\":\"yt\",\"id\":\"\\ud800\"}]");
    snprintf(want, sizeof(want),
             "{\"hash\":\"86695a0a4b02a05d32b12e3be2add43cec59cb78\",\"provider\":\"yt\",\"id\":"
             "\"\\ud800\",\"title\":\"\",\"poster\":\"https://i.ytimg.com/vi/\\ud800/"
             "hqdefault.jpg\",\"duration\":0,%s,\"fetched_at\":0}\n",
             AV);
    T_STREQ(out.data, want);
    OK("[{\"provider\":\"dm\",\"id\":[1,[2,\"X\"]],\"duration\":\"0x1F\"}]");
    T_CHECK(strstr(out.data, "\"id\":\"1,2,x\"") && strstr(out.data, "/v/1,2,x/hqdefault.jpg") &&
                strstr(out.data, "\"duration\":31,"),
            "array id and hex duration: %s", out.data);
    OK("[{\"provider\":\"vm\",\"id\":{\"valueOf\":1},\"duration\":\"Infinity\"}]");
    T_CHECK(strstr(out.data, "\"id\":\"[object object]\"") && strstr(out.data, "\"duration\":null"),
            "object id, infinite duration: %s", out.data);
    OK("[{\"provider\":\"yt\",\"id\":1e21,\"duration\":[[[\" 7 \"]]]},"
       "{\"provider\":\"yt\",\"id\":0},{\"provider\":\"yt\",\"id\":-0},{\"provider\":\"yt\","
       "\"id\":true,\"duration\":true}]");
    T_CHECK(strstr(out.data, "\"id\":\"1e+21\"") && strstr(out.data, "\"duration\":7,") &&
                strstr(out.data, "\"id\":\"true\"") && strstr(out.data, "\"duration\":1,"),
            "number and true ids: %s", out.data);
    T_CHECK(batch.n == 2, "0 and -0 ids are skipped (%zu records)", batch.n);
    OK("[{\"provider\":\"yt\",\"id\":\"a\",\"title\":\"\\u0000\\b\\t\\n\\f\\r\\u000b\\u001f\\u007f"
       "\\u0085\\u2028\\ud800\"}]");
    T_CHECK(strstr(out.data, "\"title\":\"\\u0000\\b \\u001f\x7f\xc2\x85 \\ud800\"") != NULL,
            "escaping: %s", out.data);
    OK("[{\"provider\":\"yt\",\"id\":\"a\xc0\x80"
       "b\"}]");
    T_CHECK(strstr(out.data, "\"id\":\"a\xef\xbf\xbd\xef\xbf\xbd"
                             "b\"") != NULL,
            "overlong NUL replaced twice: %s", out.data);
    OK("[{\"provider\":\"yt\",\"id\":\"x\",\"blocked\":[\"US\",[\"GB\"],1,\"TH\"],"
       "\"blocked\":[\"JP\"]}]");
    T_CHECK(strstr(out.data, "\"US\":true,\"GB\":true,\"JP\":false") != NULL, "last blocked wins");
}

static void test_limits(void)
{
    enr_buf deep = {0};
    int i;

    /* id nested to depth exactly 1000 (outer array 1, record 2) */
    enr_buf_lit(&deep, "[{\"provider\":\"yt\",\"id\":");
    for (i = 0; i < ENR_MAX_DEPTH - 2; i++)
        enr_buf_putc(&deep, '[');
    enr_buf_lit(&deep, "\"Z\"");
    for (i = 0; i < ENR_MAX_DEPTH - 2; i++)
        enr_buf_putc(&deep, ']');
    enr_buf_lit(&deep, "}]");
    T_CHECK(run(deep.data, deep.len, 0) == 0 && strstr(out.data, "\"id\":\"z\""),
            "depth 1000 handled");
    enr_buf_reset(&deep);
    enr_buf_lit(&deep, "[{\"x\":");
    for (i = 0; i < 100000; i++)
        enr_buf_putc(&deep, '[');
    T_CHECK(run(deep.data, deep.len, 0) == -1 && err.status == 400, "depth 100000 rejected");
    enr_buf_free(&deep);

    T_CHECK(run("[{},{},{}]", 10, 2) == -1 && err.status == 413 && err.element == 2,
            "max_records: 413 at element 2");
    T_CHECK(run("[{},{}]", 7, 2) == 0, "max_records: 2 of 2 fine");
}

/* body = prefix + unit * n + suffix (the caller frees it) */
static char *repeat(const char *prefix, const char *unit, size_t n, const char *suffix, size_t *len)
{
    size_t p = strlen(prefix), u = strlen(unit), q = strlen(suffix);
    char *b = malloc(p + u * n + q + 1);

    memcpy(b, prefix, p);
    for (size_t i = 0; i < n; i++)
        memcpy(b + p + u * i, unit, u);
    memcpy(b + p + u * n, suffix, q + 1);
    *len = p + u * n + q;
    return b;
}

static int is_output_limit(size_t limit)
{
    return err.status == 413 && err.limit == limit && err.reached > limit &&
           strstr(out.data, "\"error\":\"output larger than max_output_bytes\"") != NULL;
}

static void test_output_limit(void)
{
    static const char body[] = "[{\"provider\":\"yt\",\"id\":\"A\",\"title\":\"\u00e9t\u00e9\"},"
                               "{\"provider\":\"vm\",\"id\":[1,2],\"duration\":7},"
                               "{\"provider\":\"dm\",\"id\":\"\\ud800x\",\"title\":\"\\u0001\"}]";
    size_t whole, len;
    char *b;

    /* the exact boundary: max bytes pass, max - 1 do not (fetched_at has
     * the same number of digits in both runs) */
    enr_engine_set_max_output(eng, 0);
    T_CHECK(OK(body) == 0, "limit off: accepted");
    whole = strlen(out.data);
    enr_engine_set_max_output(eng,
                              whole + 12 * 3); /* out has fetched_at blanked: 12 digits a line */
    T_CHECK(OK(body) == 0 && strlen(out.data) == whole, "output of exactly max_output passes");
    enr_engine_set_max_output(eng, whole + 12 * 3 - 1);
    T_CHECK(OK(body) == -1 && is_output_limit(whole + 12 * 3 - 1) && err.record == 2 &&
                err.element == 2 && strstr(out.data, "\"limit\":") &&
                strstr(out.data, "\"at_record\":2") && strstr(out.data, "\"element\":2"),
            "one byte over max_output: 413 at the last record: %s", out.data);

    /* refused while parsing, as soon as the lower bound passes the limit */
    enr_engine_set_max_output(eng, 4096);
    b = repeat("[", "{\"provider\":\"yt\",\"id\":\"x\"},", 100, "{}]", &len);
    T_CHECK(run(b, len, 0) == -1 && is_output_limit(4096) && err.record > 5 && err.record < 20,
            "many records: refused at the line that cannot fit (%ld): %s", err.record, out.data);
    free(b);

    enr_engine_set_max_output(eng, 1 << 20);
    /* U+FDFA: 3 bytes become 33; refused before the normalizer's buffer grows for it */
    b = repeat("[{\"provider\":\"yt\",\"id\":\"x\",\"title\":\"", "\xef\xb7\xba", 40000, "\"}]",
               &len);
    T_CHECK(run(b, len, 0) == -1 && is_output_limit(1 << 20) && err.record == 0 && err.element == 0,
            "U+FDFA title: 413: %s", out.data);
    free(b);
    /* "[object Object]" 16 bytes for 3: the reader stops collecting */
    b = repeat("[{\"provider\":\"yt\",\"id\":[", "{},", 100000, "{}]}]", &len);
    T_CHECK(run(b, len, 0) == -1 && is_output_limit(1 << 20), "[{},...] id: 413: %s", out.data);
    free(b);
    /* ... but keeps validating: a toString key is still a 400 */
    b = repeat("[{\"provider\":\"yt\",\"id\":[", "{},", 100000, "{\"toString\":1}]}]", &len);
    T_CHECK(run(b, len, 0) == -1 && err.status == 400, "[{},...,{toString}] id: 400: %s", out.data);
    free(b);
    /* a skipped record's id is never printed: no limit */
    b = repeat("[{\"provider\":\"xx\",\"id\":[", "{},", 100000, "{}]}]", &len);
    T_CHECK(run(b, len, 0) == 0 && strcmp(out.data, "\n") == 0, "long id, bad provider: skipped");
    free(b);
    /* the last occurrence wins: an earlier long one does not count */
    b = repeat("[{\"provider\":\"yt\",\"id\":[", "{},", 100000, "{}],\"id\":\"ok\"}]", &len);
    T_CHECK(run(b, len, 0) == 0 && strstr(out.data, "\"id\":\"ok\""), "long id replaced: fine");
    free(b);
    /* invalid bytes triple (U+FFFD) */
    b = repeat("[{\"provider\":\"yt\",\"id\":\"", "\xff", 400000, "\"}]", &len);
    T_CHECK(run(b, len, 0) == -1 && is_output_limit(1 << 20), "U+FFFD id: 413: %s", out.data);
    free(b);
    /* a duration text past its cap cannot be a number: NaN, 0, as before */
    b = repeat("[{\"provider\":\"yt\",\"id\":\"d\",\"duration\":[", "{},", 100000, "{}]}]", &len);
    T_CHECK(run(b, len, 0) == 0 && strstr(out.data, "\"duration\":0,"), "long duration: 0");
    free(b);
    /* a long numeric duration string within the body is still read */
    enr_engine_set_max_output(eng, 4096);
    b = repeat("[{\"provider\":\"yt\",\"id\":\"d\",\"duration\":\"", "0", 10000, "5\"}]", &len);
    T_CHECK(run(b, len, 0) == 0 && strstr(out.data, "\"duration\":5,"), "duration 000..05: 5");
    free(b);
    /* a long escaped key is no field (the reader's scratch is bounded) */
    b = repeat("[{\"provider\":\"yt\",\"id\":\"k\",\"\\u0069d", "\xff", 1000, "\":\"no\"}]", &len);
    T_CHECK(run(b, len, 0) == 0 && strstr(out.data, "\"id\":\"k\""), "long escaped key: ignored");
    free(b);

    /* buffers grown by a huge request are given back */
    enr_engine_set_max_output(eng, 0);
    b = repeat("[{\"provider\":\"yt\",\"id\":\"x\",\"title\":\"", "\xef\xb7\xba", 40000, "\"}]",
               &len);
    T_CHECK(run(b, len, 0) == 0 && strlen(out.data) > 40000 * 33,
            "limit off: a 1.3 MB title passes");
    free(b);
    T_CHECK(batch.text.cap > ENR_KEEP_BYTES, "the arena grew (%zu)", batch.text.cap);
    enr_engine_shrink(eng, &batch, ENR_KEEP_BYTES);
    T_CHECK(batch.text.cap == 0, "shrink frees the arena");
    T_CHECK(OK("[{\"provider\":\"yt\",\"id\":\"x\",\"title\":\"\u00e9\"}]") == 0 &&
                strstr(out.data, "\"title\":\"\xc3\xa9\""),
            "the engine works after a shrink");
    enr_engine_set_max_output(eng, 0);
}

/* The wide string scan (scan.c) stops exactly where the byte loop would,
 * wherever the stop falls relative to its 16/32-byte blocks, and steps
 * over escapes without losing its place. */
static void test_wide_scan(void)
{
    char body[256];

    for (int pos = 0; pos < 100; pos++) {
        static const char *const bad[] = {"\\x", "\x01", "\\u12G4", "\\\x1f"};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            int n = snprintf(body, sizeof body, "[{\"d\":\"%.*s%s%s\"}]", pos,
                             "\\n\\\\é\\u00e9abcdefghijklmnopqrstuvwxyz0123456789"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz",
                             bad[b], "0123456789abcdefghijklmnopqrstuvwxyz0123456789");
            /* A prefix cut inside an escape makes its own error: the
             * reference below finds it the way the reader must. */
            {
                int rc = run(body, (size_t)n, 0);
                long want = -1;
                /* The byte loop's answer: the first backslash that does not
                 * start a valid escape, or the first control byte. */
                for (long i = 7; i < n; i++) {
                    unsigned char c = (unsigned char)body[i];
                    if (c == '\\') {
                        unsigned char d = (unsigned char)body[i + 1];
                        if (d == 'u' && isxdigit((unsigned char)body[i + 2]) &&
                            isxdigit((unsigned char)body[i + 3]) &&
                            isxdigit((unsigned char)body[i + 4]) &&
                            isxdigit((unsigned char)body[i + 5])) {
                            i += 5;
                            continue;
                        }
                        if (d != 'u' && d != '\0' && strchr("\"\\/bfnrt", d) != NULL) {
                            i++;
                            continue;
                        }
                        want = i;
                        break;
                    }
                    if (c < 0x20) {
                        want = i;
                        break;
                    }
                    if (c == '"')
                        break;
                }
                if (want < 0) {
                    T_CHECK(rc == 0, "pos %d bad %zu: rejected at %ld", pos, b, err.offset);
                } else {
                    T_CHECK(rc == -1 && err.offset == want, "pos %d bad %zu: offset %ld, want %ld",
                            pos, b, rc == -1 ? err.offset : -1, want);
                }
            }
        }
    }
}

int main(void)
{
    eng = enr_engine_new();
    if (eng == NULL) {
        printf("FAIL engine init\n0 passed, 1 failed\n");
        return 1;
    }
    test_syntax_errors();
    test_shape_errors();
    test_records();
    test_limits();
    test_output_limit();
    test_wide_scan();
    enr_batch_free(&batch);
    enr_buf_free(&out);
    enr_engine_free(eng);
    T_DONE();
}
