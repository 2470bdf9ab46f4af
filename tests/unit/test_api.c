/*
 * test_api.c: the providers' own APIs as pure functions (api.h): the
 * table, each API's URL and headers to the byte, each reader on the
 * quirks of its API's answers (order, duplicates, a missing maxres, P0D,
 * /videos/ID:HASH, \/ escapes, extra fields, null and hostile values,
 * ids a decoding would merge), and each classifier on its API's error
 * bodies and rate headers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/buf.h"
#include "pool/httpapi.h"
#include "t.h"
#include "t_api.h"
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/quota.h"

#define NOW 1700000000 /* 2023-11-14 22:13:20 UTC, 14:13:20 PST */

static enr_buf url;

static const char *build(int api, const char *idlist, const char *base, const char *secret)
{
    set_ids(idlist);
    enr_buf_reset(&url);
    if (enr_api_get(api)->build_url(&url, base, "yt", ids, nids, secret,
                                    secret ? strlen(secret) : 0) != 0)
        return NULL;
    enr_buf_putc(&url, '\0');
    url.len--;
    return url.data;
}

/* ---- the table ---- */

static void test_table(void)
{
    static const char *const names[] = {"upstream", "youtube", "vimeo", "dailymotion"};
    static const size_t max[] = {0, 50, 50, 100}; /* the aggregator's: ids_per_call */

    for (int i = 0; i < ENR_API_COUNT; i++) {
        const enr_api *a = enr_api_get(i);
        T_CHECK(a != NULL && strcmp(a->name, names[i]) == 0 && a->max_ids == max[i],
                "row %d is %s, %zu ids", i, names[i], max[i]);
        T_CHECK(enr_api_by_name(names[i]) == i, "by name: %s", names[i]);
        T_CHECK(a != NULL && a->parse != NULL && a->classify != NULL, "%s reads and classifies",
                names[i]);
    }
    T_CHECK(enr_api_get(-1) == NULL && enr_api_get(ENR_API_COUNT) == NULL, "out of range");
    T_CHECK(enr_api_by_name("YouTube") == -1 && enr_api_by_name("off") == -1 &&
                enr_api_by_name("") == -1 && enr_api_by_name(NULL) == -1,
            "unknown names");
    T_CHECK(enr_api_get(ENR_API_UPSTREAM)->build_url != NULL &&
                enr_api_get(ENR_API_UPSTREAM)->headers != NULL &&
                enr_api_get(ENR_API_UPSTREAM)->parse == enr_upstream_reply_parse &&
                enr_api_get(ENR_API_UPSTREAM)->item_cap(10) == enr_upstream_reply_item_cap(10) &&
                enr_api_item_cap(ENR_API_UPSTREAM, 10) == enr_upstream_reply_item_cap(10),
            "upstream: a full row, the aggregator's reader and item cap");
    /* Where the aggregator differs, a column each: set for it alone, so
     * that an API's file need not name them. */
    for (int i = 0; i < ENR_API_COUNT; i++) {
        const enr_api *a = enr_api_get(i);
        int agg = i == ENR_API_UPSTREAM;
        T_CHECK(a->wire_configured == agg && a->rate_paced == agg && a->pause_by_status == agg &&
                    a->head_warmed == agg && a->unlabelled == agg && (a->url_params != 0) == agg,
                "%s: the aggregator's columns %s", names[i], agg ? "set" : "unset");
        T_CHECK(agg || a->item_cap == NULL, "%s: an API's even share of a reply", names[i]);
    }
    T_CHECK(enr_api_get(ENR_API_YOUTUBE)->needs_secret &&
                enr_api_get(ENR_API_VIMEO)->needs_secret &&
                !enr_api_get(ENR_API_DAILYMOTION)->needs_secret,
            "secrets");
    /* What each descriptor says of its day, its cost and its rate limit:
     * the budget and the client read these, never the API's name. */
    T_CHECK(enr_api_get(ENR_API_YOUTUBE)->day_clock == ENR_API_DAY_PACIFIC &&
                enr_api_get(ENR_API_VIMEO)->day_clock == ENR_API_DAY_UTC &&
                enr_api_get(ENR_API_DAILYMOTION)->day_clock == ENR_API_DAY_UTC &&
                enr_api_get(ENR_API_UPSTREAM)->day_clock == ENR_API_DAY_UTC,
            "days: YouTube's quota starts again at midnight Pacific time, the others' UTC");
    for (int i = 0; i < ENR_API_COUNT; i++)
        T_CHECK(enr_api_get(i)->units_per_call == 1, "%s: one unit a call", names[i]);
    T_CHECK(enr_api_get(ENR_API_VIMEO)->remaining_header != NULL &&
                strcmp(enr_api_get(ENR_API_VIMEO)->remaining_header, "x-ratelimit-remaining:") ==
                    0 &&
                strcmp(enr_api_get(ENR_API_VIMEO)->reset_header, "x-ratelimit-reset:") == 0 &&
                enr_api_get(ENR_API_YOUTUBE)->remaining_header == NULL &&
                enr_api_get(ENR_API_DAILYMOTION)->reset_header == NULL &&
                enr_api_get(ENR_API_UPSTREAM)->remaining_header == NULL,
            "rate-limit headers: Vimeo's alone");
    T_STREQ(enr_api_secret_noun(ENR_API_YOUTUBE), "API key");
    T_STREQ(enr_api_secret_noun(ENR_API_VIMEO), "access token");
    T_STREQ(enr_api_secret_noun(ENR_API_UPSTREAM), "secret");
    T_STREQ(enr_api_secret_noun(ENR_API_COUNT), "");
}

/* ---- URLs and headers ---- */

static void test_urls(void)
{
    const char *u;

    /* The aggregator's (docs/upstream.md): its base as the client makes
     * it (upstream_url, '?' or '&', its secret's parameter), then the
     * provider and every id percent-encoded, any id askable; the length
     * upstream.c plans for it, a comma counted before every id. */
    u = build(ENR_API_UPSTREAM, "dQw4w9WgXcQ,a b&c=d/é", "http://h/v1/meta?k=s%2F&", NULL);
    T_STREQ(u ? u : "(null)",
            "http://h/v1/meta?k=s%2F&provider=yt&ids=dQw4w9WgXcQ,a%20b%26c%3Dd%2F%C3%A9");
    T_CHECK(u != NULL && url.len == strlen("http://h/v1/meta?k=s%2F&") +
                                        enr_api_get(ENR_API_UPSTREAM)->url_params + (1 + 11) +
                                        (1 + strlen("a%20b%26c%3Dd%2F%C3%A9")),
            "its length as planned: %zu", url.len);
    enr_buf_reset(&url);
    T_CHECK(enr_api_get(ENR_API_UPSTREAM)->build_url(&url, "http://h/?", "yt", ids, 0, NULL, 0) ==
                    -1 &&
                url.len == 0,
            "no id: no URL");
    enr_buf_reset(&url);
    enr_api_get(ENR_API_UPSTREAM)->headers(&url, NULL, 0);
    T_CHECK(url.len == sizeof "Accept: application/json" &&
                strcmp(url.data, "Accept: application/json") == 0,
            "its one header line (the configured ones follow)");

    u = build(ENR_API_YOUTUBE, "dQw4w9WgXcQ,a-b_c", "https://www.googleapis.com/youtube/v3",
              "AIza+k/y=");
    T_STREQ(u ? u : "(null)",
            "https://www.googleapis.com/youtube/v3/videos?part=contentDetails,snippet"
            "&id=dQw4w9WgXcQ,a-b_c"
            "&fields=items%28id%2CcontentDetails%2Fduration%2Csnippet%28thumbnails%2C"
            "liveBroadcastContent%29%29"
            "&prettyPrint=false&key=AIza%2Bk%2Fy%3D");
    u = build(ENR_API_YOUTUBE, "a", "http://127.0.0.1:9/yt/", NULL);
    T_STREQ(u ? u : "(null)",
            "http://127.0.0.1:9/yt/videos?part=contentDetails,snippet&id=a"
            "&fields=items%28id%2CcontentDetails%2Fduration%2Csnippet%28thumbnails%2C"
            "liveBroadcastContent%29%29"
            "&prettyPrint=false");
    u = build(ENR_API_VIMEO, "1,76979871", "https://api.vimeo.com", "tok");
    T_STREQ(u ? u : "(null)", "https://api.vimeo.com/videos?uris=/videos/1,/videos/76979871"
                              "&fields=uri,duration,pictures.sizes");
    u = build(ENR_API_DAILYMOTION, "x7tgad0,x8", "https://api.dailymotion.com", NULL);
    T_STREQ(u ? u : "(null)",
            "https://api.dailymotion.com/videos?ids=x7tgad0,x8&limit=2"
            "&fields=id,duration,thumbnail_1080_url,thumbnail_720_url,thumbnail_480_url,"
            "thumbnail_url,mode&family_filter=false");
    /* ids percent-encoded: nothing in one can add a parameter */
    u = build(ENR_API_DAILYMOTION, "a&b=c#d?e %f\xc3\xa9", "https://h", NULL);
    T_STREQ(u ? u : "(null)", "https://h/videos?ids=a%26b%3Dc%23d%3Fe%20%25f%C3%A9&limit=1"
                              "&fields=id,duration,thumbnail_1080_url,thumbnail_720_url,"
                              "thumbnail_480_url,thumbnail_url,mode&family_filter=false");
}

static void test_urls_refused(void)
{
    static const struct {
        int api;
        const char *ids;
        const char *why;
    } bad[] = {
        {ENR_API_YOUTUBE, ",a", "an empty id"},
        {ENR_API_YOUTUBE, "a\x01", "a control byte"},
        {ENR_API_YOUTUBE, "\xed\xa0\x80", "a lone surrogate (WTF-8): no answer can echo it"},
        {ENR_API_YOUTUBE, "\xff", "not UTF-8"},
        {ENR_API_YOUTUBE, "\xc0\xaf", "an overlong"},
        {ENR_API_VIMEO, "1/2", "a slash in a Vimeo id"},
        {ENR_API_VIMEO, "1:abc", "a colon in a Vimeo id (ID:HASH is the answer's)"},
        {ENR_API_DAILYMOTION, "x\x7f", "DEL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        enr_buf_reset(&url);
        enr_buf_lit(&url, "kept");
        set_ids(bad[i].ids);
        T_CHECK(enr_api_get(bad[i].api)->build_url(&url, "https://h", "yt", ids, nids, "k", 1) ==
                        -1 &&
                    url.len == 4,
                "refused, url as it was: %s", bad[i].why);
    }
    {
        /* one id holding the separator: a list of one that has a comma */
        enr_reply_id one = {.id = "a,b", .id_len = 3};
        enr_buf_reset(&url);
        T_CHECK(
            enr_api_get(ENR_API_YOUTUBE)->build_url(&url, "https://h", "yt", &one, 1, NULL, 0) ==
                -1,
            "a comma inside an id: the API would split it");
    }
    {
        static enr_reply_id many[101];
        static char text[101][8];
        for (int i = 0; i < 101; i++) {
            snprintf(text[i], sizeof text[i], "x%d", i);
            many[i].id = text[i];
            many[i].id_len = strlen(text[i]);
        }
        enr_buf_reset(&url);
        T_CHECK(
            enr_api_get(ENR_API_YOUTUBE)->build_url(&url, "https://h", "yt", many, 51, "k", 1) ==
                -1,
            "51 ids: past YouTube's 50");
        T_CHECK(enr_api_get(ENR_API_DAILYMOTION)
                            ->build_url(&url, "https://h", "yt", many, 100, NULL, 0) == 0 &&
                    strstr(url.data, "&limit=100&") != NULL,
                "100 ids: Dailymotion's limit, and limit=100");
        enr_buf_reset(&url);
        T_CHECK(enr_api_get(ENR_API_DAILYMOTION)
                        ->build_url(&url, "https://h", "yt", many, 101, NULL, 0) == -1,
                "101 ids refused");
        T_CHECK(enr_api_get(ENR_API_VIMEO)->build_url(&url, "https://h", "yt", many, 0, "t", 1) ==
                    -1,
                "no id: no call");
    }
}

static void test_headers(void)
{
    static const char vm[] = "Authorization: bearer 0123abc\0"
                             "Accept: application/vnd.vimeo.*+json;version=3.4";
    enr_buf h = {0};

    enr_api_get(ENR_API_VIMEO)->headers(&h, "0123abc", 7);
    T_CHECK(h.len == sizeof vm && memcmp(h.data, vm, sizeof vm) == 0, "Vimeo: bearer and Accept");
    enr_buf_reset(&h);
    enr_api_get(ENR_API_VIMEO)->headers(&h, "tok\r\nX-Evil: 1", 14);
    T_CHECK(h.len == sizeof "Accept: application/vnd.vimeo.*+json;version=3.4" &&
                memcmp(h.data, "Accept:", 7) == 0,
            "a token with CR LF is not sent (no header injection)");
    enr_buf_reset(&h);
    enr_api_get(ENR_API_YOUTUBE)->headers(&h, "key", 3);
    enr_api_get(ENR_API_DAILYMOTION)->headers(&h, NULL, 0);
    T_CHECK(h.len == 0, "YouTube (key in the URL) and Dailymotion: no header");
    enr_buf_free(&h);
}

/* ---- readers ---- */

#define YT_THUMB(name, host) "\"" name "\":{\"url\":\"https://" host "/" name ".jpg\",\"width\":1}"

static void test_youtube(void)
{
    int rc;

    /* out of order, duplicates (the first wins), unknown and unasked ids,
     * maxres missing, P0D, extra fields everywhere, \/ escapes */
    rc = parse(
        ENR_API_YOUTUBE, "aaaaaaaaaaa,bbbbbbbbbbb,ccccccccccc,ddddddddddd,eeeeeeeeeee",
        "{\"kind\":\"youtube#videoListResponse\",\"etag\":\"x\",\"items\":["
        "{\"kind\":\"youtube#video\",\"id\":\"ccccccccccc\",\"contentDetails\":"
        "{\"duration\":\"P1DT2H3M4S\",\"dimension\":\"2d\"},\"snippet\":{\"title\":\"t\","
        "\"thumbnails\":{" YT_THUMB("default", "i.ytimg.com") "," YT_THUMB(
            "high",
            "i.ytimg.com") "," YT_THUMB("medium",
                                        "i.ytimg.com") "}}},"
                                                       "{\"id\":\"aaaaaaaaaaa\",\"snippet\":{"
                                                       "\"thumbnails\":{"
                                                       "\"maxres\":{\"url\":\"https:\\/\\/"
                                                       "i.ytimg.com\\/vi\\/a\\/"
                                                       "maxresdefault.jpg\"},"
                                                       "\"default\":{\"url\":\"https://i.ytimg.com/"
                                                       "d.jpg\"}}},"
                                                       "\"contentDetails\":{\"duration\":"
                                                       "\"PT1H2M3S\"}},"
                                                       "{\"id\":\"ccccccccccc\",\"contentDetails\":"
                                                       "{\"duration\":\"PT1S\"}},"
                                                       "{\"id\":\"zzzzzzzzzzz\",\"contentDetails\":"
                                                       "{\"duration\":\"PT9S\"}},"
                                                       "{\"id\":\"ddddddddddd\",\"contentDetails\":"
                                                       "{\"duration\":\"P0D\"},"
                                                       "\"snippet\":{\"thumbnails\":{" YT_THUMB(
                                                           "standard",
                                                           "s.example") "}}},"
                                                                        "{\"id\":\"eeeeeeeeeee\","
                                                                        "\"contentDetails\":{"
                                                                        "\"duration\":\"PT0S\"}}"
                                                                        "],\"pageInfo\":{"
                                                                        "\"totalResults\":4,"
                                                                        "\"resultsPerPage\":4}}");
    T_CHECK(rc == 0, "an answer read");
    T_CHECK(found(0, "https://i.ytimg.com/vi/a/maxresdefault.jpg", 3723),
            "a: maxres (\\/ decoded), PT1H2M3S");
    T_CHECK(ids[1].state == ENR_REPLY_ABSENT, "b: not in the answer, absent");
    T_CHECK(found(2, "https://i.ytimg.com/high.jpg", 93784),
            "c: high (maxres, standard missing), P1DT2H3M4S; its duplicate ignored");
    T_CHECK(found(3, "https://s.example/standard.jpg", 0), "d: P0D is no runtime");
    T_CHECK(ids[4].state == ENR_REPLY_EMPTY, "e: PT0S and no thumbnail: empty, decided");

    /* a thumbnail whose url fails the poster checks gives way to the next */
    rc = parse(ENR_API_YOUTUBE, "a",
               "{\"items\":[{\"id\":\"a\",\"snippet\":{\"thumbnails\":{"
               "\"maxres\":{\"url\":\"http://i.ytimg.com/m.jpg\"},\"standard\":{\"url\":5},"
               "\"high\":{\"url\":\"https://h/ x.jpg\"},\"medium\":{\"url\":\"https://h/m.jpg\"},"
               "\"default\":{\"url\":\"https://h/d.jpg\"}}}}]}");
    T_CHECK(rc == 0 && found(0, "https://h/m.jpg", 0),
            "http maxres, numeric standard, spaced high: medium");
    /* the last occurrence of a key counts */
    rc = parse(ENR_API_YOUTUBE, "a,b",
               "{\"items\":[{\"id\":\"b\",\"id\":\"a\",\"snippet\":{\"thumbnails\":{"
               "\"maxres\":{\"url\":\"https://h/1.jpg\"}}},\"snippet\":{\"thumbnails\":{"
               "\"default\":{\"url\":\"https://h/2.jpg\",\"url\":\"https://h/3.jpg\"}}},"
               "\"contentDetails\":{\"duration\":\"PT5S\",\"duration\":\"PT6S\"}}]}");
    T_CHECK(rc == 0 && ids[1].state == ENR_REPLY_ABSENT && found(0, "https://h/3.jpg", 6),
            "last id, last snippet, last url, last duration");
    /* bad durations are no runtime, not a bad answer */
    rc = parse(ENR_API_YOUTUBE, "a,b,c,d",
               "{\"items\":[{\"id\":\"a\",\"contentDetails\":{\"duration\":\"PT\"}},"
               "{\"id\":\"b\",\"contentDetails\":{\"duration\":213}},"
               "{\"id\":\"c\",\"contentDetails\":{\"duration\":\"P9999DT1S\"}},"
               "{\"id\":\"d\",\"contentDetails\":{\"duration\":\"PT4M13S\"}}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY && ids[1].state == ENR_REPLY_EMPTY &&
                ids[2].state == ENR_REPLY_EMPTY && found(3, NULL, 253),
            "PT, a number, too long: no runtime; PT4M13S: 253");
    /* a partial response may drop an empty items; any other shape is refused */
    rc = parse(ENR_API_YOUTUBE, "a", "{}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "{}: nothing found");
    rc = parse(ENR_API_YOUTUBE, "a", "{\"items\":[]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "items []: nothing found");
    static const char *const bad[] = {"",
                                      "[]",
                                      "{\"items\":{}}",
                                      "{\"items\":null}",
                                      "{\"items\":[]} x",
                                      "{\"items\":[{\"id\":\"a\"}]",
                                      "{\"error\":{\"code\":403}} {}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = parse(ENR_API_YOUTUBE, "a", bad[i]);
        T_CHECK(rc == -1 && ids[0].state == ENR_REPLY_ABSENT && arena.len == 0, "refused: %s",
                bad[i]);
    }
}

/* Ids a decoding merges are never taken for one another. */
static void test_id_decoding(void)
{
    int rc;

    /* U+FFFD asked; the answer names "\ud800", which a lax decoding makes
     * U+FFFD: that item answers nothing */
    rc = parse(ENR_API_YOUTUBE, "\xef\xbf\xbd",
               "{\"items\":[{\"id\":\"\\ud800\",\"contentDetails\":{\"duration\":\"PT1S\"}},"
               "{\"id\":\"\\udc00\",\"contentDetails\":{\"duration\":\"PT2S\"}}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "\\ud800 does not answer U+FFFD");
    rc = parse(ENR_API_YOUTUBE, "\xef\xbf\xbd",
               "{\"items\":[{\"id\":\"\\ufffd\",\"contentDetails\":{\"duration\":\"PT3S\"}}]}");
    T_CHECK(rc == 0 && found(0, NULL, 3), "\\ufffd answers U+FFFD");
    /* a lone surrogate asked (the engine keeps its WTF-8 bytes) is never
     * matched, whatever the answer writes */
    rc = parse(ENR_API_DAILYMOTION, "\xed\xa0\x80",
               "{\"list\":[{\"id\":\"\\ud800\",\"duration\":1},{\"id\":\"\xed\xa0\x80\","
               "\"duration\":2},{\"id\":\"\\ufffd\",\"duration\":3}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "a WTF-8 id is never matched");
    /* escapes on both sides decode alike */
    rc = parse(ENR_API_DAILYMOTION, "caf\xc3\xa9,\xf0\x9f\x98\x80,a/b",
               "{\"list\":[{\"id\":\"caf\\u00e9\",\"duration\":1},{\"id\":\"\\ud83d\\ude00\","
               "\"duration\":2},{\"id\":\"a\\/b\",\"duration\":3}]}");
    T_CHECK(rc == 0 && found(0, NULL, 1) && found(1, NULL, 2) && found(2, NULL, 3),
            "\\u00e9, a surrogate pair and \\/ match their UTF-8");
    /* a raw ill-formed byte is not the U+FFFD asked */
    rc = parse(ENR_API_DAILYMOTION, "a\xef\xbf\xbd",
               "{\"list\":[{\"id\":\"a\xff\",\"duration\":1}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "raw 0xFF is not U+FFFD");
    /* an id longer than any asked is not cut to match */
    rc = parse(ENR_API_DAILYMOTION, "x1", "{\"list\":[{\"id\":\"x1x\",\"duration\":1}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "x1x is not x1");
}

static void test_vimeo(void)
{
    int rc;

    rc = parse(ENR_API_VIMEO, "76979871,22439234,1,2,3",
               "{\"total\":4,\"page\":1,\"per_page\":25,\"paging\":{\"next\":null},\"data\":["
               "{\"uri\":\"\\/videos\\/22439234:0a1b2c3d4e\",\"duration\":0,\"pictures\":{"
               "\"uri\":\"\\/videos\\/22439234\\/pictures\\/1\",\"sizes\":["
               "{\"width\":100,\"height\":75,\"link\":\"https://i.vimeocdn.com/v/1_100x75?r=pad\"},"
               "{\"width\":1920,\"height\":1080,\"link\":\"https:\\/\\/i.vimeocdn.com\\/v\\/"
               "1_1920x1080?r=pad\",\"link_with_play_button\":\"https://x/p\"},"
               "{\"width\":640,\"height\":360,\"link\":\"https://i.vimeocdn.com/v/1_640\"}]}},"
               "{\"uri\":\"/videos/76979871\",\"duration\":62,\"name\":\"x\",\"pictures\":{"
               "\"sizes\":[{\"width\":295,\"link\":\"https://a/295\"},{\"width\":1280,\"link\":"
               "\"https://a/1280\"},{\"width\":1280,\"link\":\"https://a/1280b\"}]}},"
               "{\"uri\":\"/videos/76979871\",\"duration\":99},"
               "{\"uri\":\"/videos/1\",\"duration\":5.5,\"pictures\":{\"sizes\":["
               "{\"width\":3840,\"link\":\"http://a/3840\"},{\"width\":200,\"link\":"
               "\"https://a/200\"},{\"link\":\"https://a/nowidth\"}]}},"
               "{\"uri\":\"/users/2\",\"duration\":7},{\"uri\":\"/videos/2/x\",\"duration\":7},"
               "{\"uri\":\"/videos/3\",\"duration\":7,\"pictures\":null}]}");
    T_CHECK(rc == 0, "an answer read");
    T_CHECK(found(0, "https://a/1280", 62), "76979871: the first of the widest, 62 s");
    T_CHECK(found(1, "https://i.vimeocdn.com/v/1_1920x1080?r=pad", 0),
            "22439234 from /videos/ID:HASH: the widest (1920), duration 0 is none");
    T_CHECK(found(2, "https://a/200", 5.5), "1: an http link gives way to the next widest");
    T_CHECK(ids[3].state == ENR_REPLY_ABSENT, "2: /users/2 and /videos/2/x name no video 2");
    T_CHECK(found(4, NULL, 7), "3: pictures null");

    rc = parse(ENR_API_VIMEO, "1",
               "{\"data\":[{\"uri\":\"/videos/1\",\"pictures\":{\"sizes\":[{\"width\":9,\"link\":"
               "\"https://a/9\"}],\"sizes\":[{\"width\":1,\"link\":\"https://a/1\"}]}}]}");
    T_CHECK(rc == 0 && found(0, "https://a/1", 0), "a later sizes replaces the first");
    rc = parse(ENR_API_VIMEO, "12",
               "{\"data\":[{\"uri\":\"/videos/123\",\"duration\":1},"
               "{\"uri\":\"/videos/1\",\"duration\":1},{\"uri\":\"/videos/"
               "12:\",\"duration\":4}]}");
    T_CHECK(rc == 0 && found(0, NULL, 4), "/videos/123 is not 12; /videos/12: is");
    rc = parse(ENR_API_VIMEO, "1", "{\"items\":[{\"uri\":\"/videos/1\",\"duration\":1}]}");
    T_CHECK(rc == -1, "no data: refused");
    rc = parse(ENR_API_VIMEO, "1", "{\"data\":[]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "data []: nothing found");
}

static void test_dailymotion(void)
{
    int rc;

    rc = parse(ENR_API_DAILYMOTION, "x1,x2,x3,x4,x5",
               "{\"page\":1,\"limit\":5,\"explicit\":false,\"total\":4,\"has_more\":false,"
               "\"list\":["
               "{\"id\":\"x3\",\"duration\":0,\"thumbnail_url\":\"https://s1.dmcdn.net/t.jpg\"},"
               "{\"thumbnail_480_url\":\"https:\\/\\/s1.dmcdn.net\\/480.jpg\",\"id\":\"x1\","
               "\"thumbnail_1080_url\":null,\"thumbnail_720_url\":\"http://s1/720\","
               "\"duration\":213,\"title\":\"t\"},"
               "{\"id\":\"x2\",\"duration\":12,\"thumbnail_1080_url\":\"https://s/1080\","
               "\"thumbnail_720_url\":\"https://s/720\",\"thumbnail_url\":\"https://s/t\"},"
               "{\"id\":\"x1\",\"duration\":1,\"thumbnail_1080_url\":\"https://s/other\"},"
               "{\"id\":\"x5\",\"duration\":-4,\"thumbnail_url\":\"\"}]}");
    T_CHECK(rc == 0, "an answer read");
    T_CHECK(found(0, "https://s1.dmcdn.net/480.jpg", 213),
            "x1: 1080 null, 720 http: 480; the duplicate ignored");
    T_CHECK(found(1, "https://s/1080", 12), "x2: 1080 first");
    T_CHECK(found(2, "https://s1.dmcdn.net/t.jpg", 0), "x3: thumbnail_url, duration 0 none");
    T_CHECK(ids[3].state == ENR_REPLY_ABSENT, "x4: absent");
    T_CHECK(ids[4].state == ENR_REPLY_EMPTY, "x5: a negative duration and an empty url");
    rc = parse(ENR_API_DAILYMOTION, "x1", "{\"list\":[{\"id\":\"x1\",\"duration\":1e7}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY, "1e7 s is past the limit");
    rc = parse(ENR_API_DAILYMOTION, "x1", "{\"error\":{\"code\":400}}");
    T_CHECK(rc == -1, "an error document is not an answer");
}

/* A hostile answer of 4 MiB: one item repeated (a duplicate of an asked
 * id, or an id not asked), each with every field the reader decodes.
 * Neither time nor memory follows it: the item's fields are decoded once
 * for the first, and the others' ids alone. */
#if defined(__SANITIZE_ADDRESS__)
#define FLOOD_MAX_CPU_S 2.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLOOD_MAX_CPU_S 2.0
#endif
#endif
#ifndef FLOOD_MAX_CPU_S
#define FLOOD_MAX_CPU_S 0.2
#endif

static void flood(int api, const char *head, const char *item, const char *tail)
{
    size_t size = 4u << 20, k = strlen(head), ilen = strlen(item);
    char *body = malloc(size + 64);
    struct rusage ru0, ru1;
    clock_t t0;
    double took;
    int rc;

    memcpy(body, head, k);
    for (size_t i = 0; k + ilen + 1 + strlen(tail) < size; i++) {
        if (i)
            body[k++] = ',';
        memcpy(body + k, item, ilen);
        k += ilen;
    }
    memcpy(body + k, tail, strlen(tail) + 1);
    set_ids("a,b,c");
    enr_buf_reset(&arena);
    getrusage(RUSAGE_SELF, &ru0);
    t0 = clock();
    rc = enr_api_get(api)->parse(body, strlen(body), ids, nids, 7, &arena);
    took = (double)(clock() - t0) / CLOCKS_PER_SEC;
    getrusage(RUSAGE_SELF, &ru1);
    printf("flood %s: %zu bytes: %.1f ms CPU, peak memory +%ld kB\n", enr_api_get(api)->name,
           strlen(body), took * 1e3, ru1.ru_maxrss - ru0.ru_maxrss);
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_FOUND && ids[1].state == ENR_REPLY_ABSENT,
            "%s flood read, the first item decides", enr_api_get(api)->name);
    T_CHECK(took < FLOOD_MAX_CPU_S, "%s flood: %.1f ms", enr_api_get(api)->name, took * 1e3);
    T_CHECK(ru1.ru_maxrss - ru0.ru_maxrss < 1024, "%s flood: +%ld kB", enr_api_get(api)->name,
            ru1.ru_maxrss - ru0.ru_maxrss);
    free(body);
}

static void test_floods(void)
{
    flood(ENR_API_YOUTUBE, "{\"items\":[",
          "{\"id\":\"a\",\"snippet\":{\"thumbnails\":{\"maxres\":{\"url\":\"https:\\/\\/i.ytimg."
          "com\\/vi\\/a\\/maxresdefault.jpg\"},\"default\":{\"url\":\"https://h/d\"}}},"
          "\"contentDetails\":{\"duration\":\"PT1H2M3S\"}}",
          "]}");
    flood(ENR_API_VIMEO, "{\"data\":[",
          "{\"uri\":\"/videos/a:ff\",\"duration\":5,\"pictures\":{\"sizes\":[{\"width\":1,"
          "\"link\":\"https://a/1\"},{\"width\":2,\"link\":\"https://a/2\"}]}}",
          "]}");
    flood(ENR_API_DAILYMOTION, "{\"list\":[",
          "{\"id\":\"a\",\"duration\":5,\"thumbnail_url\":\"https://a/t\",\"thumbnail_"
          "720_url\":\"https:\\/\\/a\\/720\"}",
          "]}");
    /* ids never asked: nothing but the scan */
    flood(ENR_API_DAILYMOTION, "{\"list\":[{\"id\":\"a\",\"duration\":1},",
          "{\"id\":\"zzzzzzzz\",\"duration\":5,\"thumbnail_url\":\"https://a/t\"}", "]}");
}

/* ---- classifiers ---- */

static enr_api_outcome classify(int api, int status, const char *body, const enr_api_headers *h)
{
    enr_api_outcome o;

    memset(&o, 0x55, sizeof o);
    enr_api_get(api)->classify(status, body, body ? strlen(body) : 0, h, NOW, &o);
    return o;
}

#define YT_ERR(code, reason, message)                                                              \
    "{\"error\":{\"code\":" #code ",\"message\":\"" message                                        \
    "\",\"errors\":[{\"message\":\"" message "\",\"domain\":\"d\",\"reason\":\"" reason "\"}]}}"

static void test_classify_youtube(void)
{
    enr_api_outcome o;
    enr_api_headers ra = {.retry_after = "30", .retry_after_len = 2};

    o = classify(ENR_API_YOUTUBE, 403,
                 YT_ERR(403, "quotaExceeded",
                        "The request cannot be completed because you have exceeded your "
                        "\\u003ca href=\\\"/youtube/v3/getting-started#quota\\\"\\u003equota"
                        "\\u003c/a\\u003e."),
                 NULL);
    T_CHECK(o.verdict == ENR_UP_F_QUOTA && o.until == 1700035200 && o.remaining == -1,
            "quotaExceeded: quota until Pacific midnight (%d, %lld)", o.verdict,
            (long long)o.until);
    T_STREQ(o.reason, "quotaExceeded");
    o = classify(ENR_API_YOUTUBE, 403, YT_ERR(403, "dailyLimitExceeded", "Daily Limit Exceeded"),
                 NULL);
    T_CHECK(o.verdict == ENR_UP_F_QUOTA && o.until == 1700035200, "dailyLimitExceeded");
    o = classify(ENR_API_YOUTUBE, 400, YT_ERR(400, "keyInvalid", "Bad Request"), NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH && o.until == 0, "keyInvalid: auth");
    T_STREQ(o.reason, "keyInvalid");
    /* today's form: reason badRequest, the message and the details say */
    o = classify(ENR_API_YOUTUBE, 400,
                 "{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid "
                 "API key.\",\"errors\":[{\"message\":\"API key not valid. Please pass a valid "
                 "API key.\",\"domain\":\"global\",\"reason\":\"badRequest\"}],\"status\":"
                 "\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/"
                 "google.rpc.ErrorInfo\",\"reason\":\"API_KEY_INVALID\",\"domain\":"
                 "\"googleapis.com\"}]}}",
                 NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "API_KEY_INVALID in details: auth");
    T_STREQ(o.reason, "API_KEY_INVALID");
    o = classify(ENR_API_YOUTUBE, 400,
                 YT_ERR(400, "badRequest", "API key not valid. Please pass a valid API key."),
                 NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "the message alone: auth");
    T_STREQ(o.reason, "keyInvalid");
    o = classify(ENR_API_YOUTUBE, 400,
                 YT_ERR(400, "badRequest", "API key expired. Please renew the API key."), NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "an expired key: auth");
    T_STREQ(o.reason, "keyExpired");
    o = classify(ENR_API_YOUTUBE, 403, YT_ERR(403, "accessNotConfigured", "not enabled"), NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "accessNotConfigured: auth");
    o = classify(ENR_API_YOUTUBE, 403, YT_ERR(403, "forbidden", "Forbidden"), NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "forbidden: auth");
    o = classify(ENR_API_YOUTUBE, 403, YT_ERR(403, "rateLimitExceeded", "Rate"), &ra);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == NOW + 30,
            "403 rateLimitExceeded: throttled, Retry-After");
    o = classify(ENR_API_YOUTUBE, 429, YT_ERR(429, "userRateLimitExceeded", "Rate"), NULL);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == 0, "429 userRateLimitExceeded");
    o = classify(ENR_API_YOUTUBE, 400, YT_ERR(400, "invalidParameter", "Bad"), NULL);
    T_CHECK(o.verdict == ENR_API_V_CONFIG, "another 400: config");
    T_STREQ(o.reason, "invalidParameter");
    o = classify(ENR_API_YOUTUBE, 503, YT_ERR(503, "quotaExceeded", "x"), NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS && o.until == 0, "a 5xx is the server's whatever it says");
    o = classify(ENR_API_YOUTUBE, 500, "<html>oops</html>", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS && o.reason[0] == '\0', "500 HTML: server, no reason");
    o = classify(ENR_API_YOUTUBE, 403, "{\"error\":{\"errors\":[{\"reason\":\"quo", NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "a truncated 403: the status decides");
    o = classify(ENR_API_YOUTUBE, 200, "{\"items\":[]}", &ra);
    T_CHECK(o.verdict == ENR_API_V_OK && o.until == 0 && o.reason[0] == '\0', "200: ok");
    o = classify(ENR_API_YOUTUBE, 400,
                 "{\"error\":{\"errors\":[{\"reason\":\"a\\u001b[2J\\n\\u00e9b\\\"c\"}]}}", NULL);
    T_STREQ(o.reason, "a[2Jb\"c");
    o = classify(ENR_API_YOUTUBE, 400,
                 "{\"error\":{\"errors\":[{\"reason\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]}}",
                 NULL);
    T_CHECK(strlen(o.reason) == sizeof o.reason - 1, "a long reason cut to %zu",
            sizeof o.reason - 1);
}

static void test_classify_vimeo(void)
{
    enr_api_outcome o;
    enr_api_headers h = {.ratelimit_remaining = " 97\r\n", .ratelimit_remaining_len = 5};
    enr_api_headers epoch = {.ratelimit_reset = "1700000060", .ratelimit_reset_len = 10};
    enr_api_headers iso = {.ratelimit_reset = "2023-11-14T22:15:00+00:00",
                           .ratelimit_reset_len = 25,
                           .ratelimit_remaining = "0",
                           .ratelimit_remaining_len = 1};
    enr_api_headers http = {.ratelimit_reset = "Tue, 14 Nov 2023 22:14:20 GMT",
                            .ratelimit_reset_len = 29};
    enr_api_headers far = {.ratelimit_reset = "9999999999", .ratelimit_reset_len = 10};
    enr_api_headers past = {.ratelimit_reset = "1600000000", .ratelimit_reset_len = 10};
    enr_api_headers junk = {.ratelimit_reset = "soon",
                            .ratelimit_reset_len = 4,
                            .retry_after = "7",
                            .retry_after_len = 1,
                            .ratelimit_remaining = "-1",
                            .ratelimit_remaining_len = 2};

    o = classify(ENR_API_VIMEO, 200, "{\"data\":[]}", &h);
    T_CHECK(o.verdict == ENR_API_V_OK && o.remaining == 97, "200: remaining read (%ld)",
            o.remaining);
    o = classify(ENR_API_VIMEO, 429,
                 "{\"error\":\"Too many API requests.\",\"link\":null,\"developer_message\":"
                 "\"rate\",\"error_code\":9000}",
                 &epoch);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == NOW + 60, "429, reset epoch seconds");
    T_STREQ(o.reason, "9000");
    o = classify(ENR_API_VIMEO, 429, "", &iso);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == NOW + 100 && o.remaining == 0,
            "429, reset an ISO 8601 date (%lld)", (long long)o.until);
    o = classify(ENR_API_VIMEO, 429, NULL, &http);
    T_CHECK(o.until == NOW + 60, "429, reset an HTTP date");
    o = classify(ENR_API_VIMEO, 429, NULL, &far);
    T_CHECK(o.until == NOW + ENR_RETRY_AFTER_MAX_S, "a reset years away: the longest pause");
    o = classify(ENR_API_VIMEO, 429, NULL, &past);
    T_CHECK(o.until == NOW, "a reset passed: now");
    o = classify(ENR_API_VIMEO, 429, NULL, &junk);
    T_CHECK(o.until == NOW + 7 && o.remaining == -1, "unreadable reset: Retry-After");
    o = classify(ENR_API_VIMEO, 429, NULL, NULL);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == 0, "no header: unknown end");
    o = classify(ENR_API_VIMEO, 401,
                 "{\"error\":\"You must provide a valid authenticated access token.\","
                 "\"error_code\":8003}",
                 NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "401: auth");
    T_STREQ(o.reason, "8003");
    o = classify(ENR_API_VIMEO, 400,
                 "{\"error\":\"The parameters passed to this API endpoint didn't pass Vimeo's "
                 "validation checks.\",\"developer_message\":\"sort is not allowed\","
                 "\"error_code\":2101}",
                 NULL);
    T_CHECK(o.verdict == ENR_API_V_CONFIG, "400 with error_code: config");
    T_STREQ(o.reason, "2101");
    o = classify(ENR_API_VIMEO, 502, "<html>", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "502: server");
}

static void test_classify_dailymotion(void)
{
    enr_api_outcome o;
    enr_api_headers ra = {.retry_after = "120", .retry_after_len = 3};

    o = classify(ENR_API_DAILYMOTION, 400,
                 "{\"error\":{\"more_info\":\"https://developer.dailymotion.com/api#error-codes\","
                 "\"code\":400,\"message\":\"Unrecognized field\",\"type\":\"invalid_parameter\","
                 "\"error_data\":{\"reason\":\"x\"}}}",
                 NULL);
    T_CHECK(o.verdict == ENR_API_V_CONFIG, "400 invalid_parameter: config");
    T_STREQ(o.reason, "invalid_parameter");
    o = classify(ENR_API_DAILYMOTION, 429, "{\"error\":{\"code\":429,\"type\":\"rate_limit\"}}",
                 &ra);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == NOW + 120, "429: Retry-After");
    o = classify(ENR_API_DAILYMOTION, 403,
                 "{\"error\":{\"code\":403,\"type\":\"access_forbidden\"}}", NULL);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == 0, "403: back off");
    T_STREQ(o.reason, "access_forbidden");
    o = classify(ENR_API_DAILYMOTION, 401, "{\"error\":{\"type\":\"invalid_token\"}}", NULL);
    T_CHECK(o.verdict == ENR_UP_F_AUTH, "401: auth");
    o = classify(ENR_API_DAILYMOTION, 500, "", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "500: server");
    o = classify(ENR_API_DAILYMOTION, 200, "{\"list\":[]}", &ra);
    T_CHECK(o.verdict == ENR_API_V_OK && o.until == 0, "200: ok");
}

static void test_classify_upstream(void)
{
    enr_api_outcome o;
    enr_api_headers ra = {.retry_after = "5", .retry_after_len = 1};

    o = classify(ENR_API_UPSTREAM, 503, "", &ra);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == NOW + 5, "503 Retry-After: pause");
    /* the rule the client reads for the aggregator's calls too */
    T_CHECK(enr_api_upstream_pause(429, 0) == ENR_UP_F_THROTTLED &&
                enr_api_upstream_pause(503, 1) == ENR_UP_F_THROTTLED,
            "429, and 503 with Retry-After: the slow-down kind");
    T_CHECK(enr_api_upstream_pause(503, 0) == -1 && enr_api_upstream_pause(500, 1) == -1 &&
                enr_api_upstream_pause(401, 1) == -1 && enr_api_upstream_pause(200, 1) == -1,
            "503 alone, 500, 401, 200: no pause");
    o = classify(ENR_API_UPSTREAM, 503, "", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "503 alone: the breaker's");
    o = classify(ENR_API_UPSTREAM, 429, "", NULL);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED && o.until == 0, "429");
    /* Any other status is the aggregator's failure, the breaker's: the
     * protocol has no key to refuse and no quota to spend. */
    o = classify(ENR_API_UPSTREAM, 404, "", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "404: the aggregator's failure");
    o = classify(ENR_API_UPSTREAM, 401, "", &ra);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "401: the aggregator's failure, no pause");
    o = classify(ENR_API_UPSTREAM, 302, "", NULL);
    T_CHECK(o.verdict == ENR_UP_F_STATUS, "302: the aggregator's failure");
    o = classify(ENR_API_UPSTREAM, 204, "", NULL);
    T_CHECK(o.verdict == ENR_API_V_OK, "204: not an error (the client fails all but a 200)");
}

/* The worker's request outcomes (httpapi.h) and a classifier's outcome
 * (api.h) have names of their own: one file includes both. */
static void test_names_apart(void)
{
    enr_api_outcome o;

    enr_api_get(ENR_API_UPSTREAM)->classify(429, "", 0, NULL, 1700000000, &o);
    T_CHECK(o.verdict == ENR_UP_F_THROTTLED, "a classifier's outcome");
    T_CHECK(enr_req_status(ENR_REQ_OK, NULL) == 200 &&
                enr_req_status(ENR_REQ_NOT_FOUND, NULL) == 404 &&
                enr_req_status(ENR_REQ_SHED, NULL) == 503,
            "a request's outcome and its status");
}

int main(void)
{
    test_table();
    test_urls();
    test_urls_refused();
    test_headers();
    test_youtube();
    test_id_decoding();
    test_vimeo();
    test_dailymotion();
    test_floods();
    test_classify_youtube();
    test_classify_vimeo();
    test_classify_dailymotion();
    test_classify_upstream();
    test_names_apart();
    enr_buf_free(&arena);
    enr_buf_free(&url);
    T_DONE();
}
