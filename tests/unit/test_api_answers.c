/*
 * test_api_answers.c: the providers' readers on their answers of December
 * 2026 (api.h): YouTube's larger thumbnails (fhd, qhd, uhd since
 * 2026-09-11; widths given, absent, mixed, unknown names, ties), its live
 * and upcoming broadcasts and Dailymotion's live streams (mode "live"),
 * marked live (the client keeps them cache_live_ttl_s), and Vimeo's video
 * objects untrimmed (fields= not honoured: 4.8 to 25 KB each) within the
 * call's cap and enriched.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "t.h"
#include "t_api.h"
#include "upstream/api.h"
#include "upstream/upstream_reply.h"

/* A YouTube answer from one spec an item: "ID|THUMB THUMB..", each THUMB
 * NAME (no width) or NAME:WIDTH (WIDTH as JSON writes it: 1280, "1920",
 * null), its url https://i.ytimg.com/NAME.jpg, or NAME=URL (no width);
 * the runtime PT1M.  A spec starting '{' is an item as it is. */
static enr_buf answer;

static const char *yt_answer(const char *const *items, size_t n)
{
    enr_buf_reset(&answer);
    enr_buf_lit(&answer, "{\"items\":[");
    for (size_t i = 0; i < n; i++) {
        const char *p = items[i], *bar = strchr(p, '|');
        if (i)
            enr_buf_putc(&answer, ',');
        if (*p == '{') {
            enr_buf_append(&answer, p, strlen(p));
            continue;
        }
        enr_buf_printf(&answer, "{\"id\":\"%.*s\",\"snippet\":{\"thumbnails\":{", (int)(bar - p),
                       p);
        for (p = bar + 1; *p;) {
            size_t len = strcspn(p, " "), name = strcspn(p, ":=");
            name = name < len ? name : len;
            enr_buf_printf(&answer, "%s\"%.*s\":{\"url\":", p > bar + 1 ? "," : "", (int)name, p);
            if (name < len && p[name] == '=')
                enr_buf_printf(&answer, "\"%.*s\"}", (int)(len - name - 1), p + name + 1);
            else
                enr_buf_printf(&answer, "\"https://i.ytimg.com/%.*s.jpg\"", (int)name, p);
            if (name < len && p[name] == ':')
                enr_buf_printf(&answer, ",\"width\":%.*s}", (int)(len - name - 1), p + name + 1);
            else if (name == len)
                enr_buf_putc(&answer, '}');
            p += len + (p[len] == ' ');
        }
        enr_buf_lit(&answer, "}},\"contentDetails\":{\"duration\":\"PT1M\"}}");
    }
    enr_buf_lit(&answer, "]}");
    enr_buf_putc(&answer, '\0'); /* a string for parse() */
    return answer.oom ? "" : answer.data;
}

static int thumb_is(size_t i, const char *name)
{
    char want[64];

    snprintf(want, sizeof want, "https://i.ytimg.com/%s.jpg", name);
    return found(i, want, 60);
}

#define NITEMS(a) (sizeof(a) / sizeof((a)[0]))

/* The poster is the widest thumbnail: by width when given, else by the
 * width its name stands for (fhd, qhd, uhd above maxres); an unknown
 * name counts only with a width. */
static void test_youtube_widest(void)
{
    static const char *const named[] = {
        "a|default:120 maxres:1280 uhd:3840 fhd:1920 qhd:2560",
        "b|maxres:1280 fhd:1920",
        "c|high qhd maxres fhd",
        "d|uhd standard",
        "e|default maxres",
    };
    static const char *const unknown[] = {
        "a|maxres:1280 xl8k:7680 uhd:3840",
        "b|huge maxres",
        "c|huge",
    };
    int rc;

    rc = parse(ENR_API_YOUTUBE, "a,b,c,d,e", yt_answer(named, NITEMS(named)));
    T_CHECK(rc == 0, "an answer read");
    T_CHECK(thumb_is(0, "uhd"), "a: uhd, 3840 wide, of five with widths");
    T_CHECK(thumb_is(1, "fhd"), "b: fhd (1920) over maxres (1280)");
    T_CHECK(thumb_is(2, "qhd"), "c: no widths: qhd ranks above fhd and maxres");
    T_CHECK(thumb_is(3, "uhd"), "d: no widths: uhd above standard");
    T_CHECK(thumb_is(4, "maxres"), "e: no widths, the older names: maxres");

    /* unknown names: with a width they compete, without one they do not */
    rc = parse(ENR_API_YOUTUBE, "a,b,c", yt_answer(unknown, NITEMS(unknown)));
    T_CHECK(rc == 0 && thumb_is(0, "xl8k"), "a: an unknown name 7680 wide beats uhd");
    T_CHECK(thumb_is(1, "maxres"), "b: an unknown name without a width is no candidate");
    T_CHECK(found(2, NULL, 60), "c: nothing but an unknown name without a width: no poster");
}

/* A mix of given widths and named ones, ties, widths that are none, the
 * poster checks and repeated names. */
static void test_youtube_widest_mixed(void)
{
    static const char *const mixed[] = {
        "a|maxres:1280 fhd",
        "b|default:4000 uhd",
        "c|big:1920 fhd",
        "d|maxres wide:1281",
    };
    static const char *const ties[] = {
        "a|maxres:1280 standard:1280",
        "b|p:900 q:900",
        "c|fhd:\"4000\" uhd:0 z:-5000",
        "d|qhd:null x:2559.5",
    };
    static const char *const checks[] = {
        "a|uhd=http://i.ytimg.com/uhd.jpg xl=https://i.ytimg.com/\\u0020x.jpg qhd fhd",
        "b|fhd:1920 big:4000 maxres fhd=http://x/fhd.jpg big",
        "c|s1:10 s2:20 s3:30 s4:40 s5:50 s6:60 s7:70 s8:80 s9:9000 s1:15",
    };
    int rc;

    rc = parse(ENR_API_YOUTUBE, "a,b,c,d", yt_answer(mixed, NITEMS(mixed)));
    T_CHECK(rc == 0 && thumb_is(0, "fhd"), "a: fhd without a width (1920) over maxres's 1280");
    T_CHECK(thumb_is(1, "default"), "b: a given width (4000) over uhd's name (3840)");
    T_CHECK(thumb_is(2, "fhd"), "c: 1920 given to an unknown name ties fhd's: the known wins");
    T_CHECK(thumb_is(3, "wide"), "d: 1281 given beats maxres's 1280");

    rc = parse(ENR_API_YOUTUBE, "a,b,c,d", yt_answer(ties, NITEMS(ties)));
    T_CHECK(rc == 0 && thumb_is(0, "maxres"), "a: 1280 each: maxres ranks above standard");
    T_CHECK(thumb_is(1, "p"), "b: two unknown names of 900: the first listed");
    T_CHECK(thumb_is(2, "uhd"), "c: a string, 0 and a negative are no width: uhd's name wins");
    T_CHECK(thumb_is(3, "qhd"), "d: width null: qhd's 2560 over 2559.5");

    rc = parse(ENR_API_YOUTUBE, "a,b,c", yt_answer(checks, NITEMS(checks)));
    T_CHECK(rc == 0 && thumb_is(0, "qhd"), "a: http uhd and a spaced url refused: qhd next");
    T_CHECK(thumb_is(1, "maxres"), "b: fhd's last url is http, big's last has no width: maxres");
    T_CHECK(thumb_is(2, "s8"), "c: eight unknown names kept, not a ninth; s1 keeps its place");
}

/* liveBroadcastContent "live" or "upcoming": the item is marked live (a
 * short lifetime in the cache), its P0D no runtime, its poster kept. */
static void test_youtube_live(void)
{
    int rc;

    rc = parse(ENR_API_YOUTUBE, "a,b,c,d,e,f",
               "{\"items\":["
               "{\"id\":\"a\",\"snippet\":{\"liveBroadcastContent\":\"live\",\"thumbnails\":{"
               "\"maxres\":{\"url\":\"https://i.ytimg.com/vi/a/maxresdefault_live.jpg\","
               "\"width\":1280}}},\"contentDetails\":{\"duration\":\"P0D\"}},"
               "{\"id\":\"b\",\"snippet\":{\"thumbnails\":{\"high\":{\"url\":"
               "\"https://i.ytimg.com/vi/b/hqdefault_live.jpg\"}},\"liveBroadcastContent\":"
               "\"upcoming\"},\"contentDetails\":{\"duration\":\"P0D\"}},"
               "{\"id\":\"c\",\"snippet\":{\"liveBroadcastContent\":\"none\",\"thumbnails\":{"
               "\"maxres\":{\"url\":\"https://i.ytimg.com/vi/c/maxresdefault.jpg\"}}},"
               "\"contentDetails\":{\"duration\":\"PT2H\"}},"
               "{\"id\":\"d\",\"snippet\":{\"liveBroadcastContent\":\"upcoming\"},"
               "\"contentDetails\":{\"duration\":\"PT1H1S\"}},"
               "{\"id\":\"e\",\"snippet\":{\"liveBroadcastContent\":\"live\","
               "\"liveBroadcastContent\":\"none\"},\"contentDetails\":{\"duration\":\"PT3S\"}},"
               "{\"id\":\"f\",\"snippet\":{\"liveBroadcastContent\":\"LIVE\"},"
               "\"snippet\":{\"liveBroadcastContent\":\"live \"},"
               "\"contentDetails\":{\"duration\":\"PT4S\"}}]}");
    T_CHECK(rc == 0, "an answer read");
    T_CHECK(found(0, "https://i.ytimg.com/vi/a/maxresdefault_live.jpg", 0) && ids[0].live,
            "a: live, its _live poster, P0D no runtime");
    T_CHECK(found(1, "https://i.ytimg.com/vi/b/hqdefault_live.jpg", 0) && ids[1].live,
            "b: upcoming, after its thumbnails");
    T_CHECK(found(2, "https://i.ytimg.com/vi/c/maxresdefault.jpg", 7200) && !ids[2].live,
            "c: none: not live");
    T_CHECK(found(3, NULL, 3601) && ids[3].live,
            "d: an upcoming Premiere's length is its runtime, and it is live still");
    T_CHECK(found(4, NULL, 3) && !ids[4].live, "e: the last liveBroadcastContent counts");
    T_CHECK(found(5, NULL, 4) && !ids[5].live, "f: LIVE and \"live \" are not live");
    rc = parse(ENR_API_YOUTUBE, "a",
               "{\"items\":[{\"id\":\"a\",\"snippet\":{\"liveBroadcastContent\":\"live\"},"
               "\"contentDetails\":{\"duration\":\"P0D\"}}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY && ids[0].live,
            "live with nothing usable: empty (a miss), marked live");
    rc = parse(ENR_API_YOUTUBE, "a,b",
               "{\"items\":[{\"id\":\"a\",\"snippet\":{\"liveBroadcastContent\":\"live\"},"
               "\"contentDetails\":{\"duration\":\"PT1S\"}}],\"items\":["
               "{\"id\":\"a\",\"contentDetails\":{\"duration\":\"PT2S\"}}]}");
    T_CHECK(rc == 0 && found(0, NULL, 2) && !ids[0].live && !ids[1].live,
            "a later items replaces the earlier, live mark included");
}

/* Dailymotion: mode "live" (a live stream, on air or not) is marked live;
 * "vod" and anything else are not; its duration 0 is no runtime. */
static void test_dailymotion_live(void)
{
    int rc;

    rc = parse(ENR_API_DAILYMOTION, "x1,x2,x3,x4",
               "{\"list\":[{\"id\":\"x1\",\"mode\":\"live\",\"onair\":true,\"duration\":0,"
               "\"thumbnail_720_url\":\"https://s1.dmcdn.net/v/x1/x720\"},"
               "{\"id\":\"x2\",\"mode\":\"vod\",\"duration\":12,"
               "\"thumbnail_url\":\"https://s1.dmcdn.net/v/x2/x240\"},"
               "{\"id\":\"x3\",\"mode\":\"live\",\"mode\":\"vod\",\"duration\":5},"
               "{\"id\":\"x4\",\"mode\":\"Live\",\"duration\":6}]}");
    T_CHECK(rc == 0 && found(0, "https://s1.dmcdn.net/v/x1/x720", 0) && ids[0].live,
            "x1: mode live: its poster, no runtime, marked live");
    T_CHECK(found(1, "https://s1.dmcdn.net/v/x2/x240", 12) && !ids[1].live, "x2: vod");
    T_CHECK(found(2, NULL, 5) && !ids[2].live, "x3: the last mode counts");
    T_CHECK(found(3, NULL, 6) && !ids[3].live, "x4: Live is not live");
}

/* An answer that ignored fields=: each Vimeo video object whole, 5 to
 * 25 KB as recorded ones are, 50 of them.  The call's cap holds it and
 * the reader enriches every id. */
static void vm_untrimmed(enr_buf *o, const char *id, size_t pad)
{
    enr_buf_printf(o, "{\"uri\":\"/videos/%s\",\"name\":\"Video %s\",\"description\":\"", id, id);
    for (size_t i = 0; i < pad / 6; i++)
        enr_buf_lit(o, "\\u00e9"); /* an escaped character: 6 bytes */
    enr_buf_printf(
        o,
        "\",\"type\":\"video\",\"link\":\"https://vimeo.com/%s\",\"duration\":%zu,\"width\":1920,"
        "\"height\":1080,\"embed\":{\"html\":\"<iframe src=\\\"https:\\/\\/player.vimeo.com\\/"
        "video\\/%s?h=0\\\" width=\\\"1920\\\"><\\/iframe>\",\"badges\":{\"hdr\":false,"
        "\"live\":{\"streaming\":false,\"archived\":false}}},\"created_time\":"
        "\"2025-01-01T00:00:00+00:00\",\"privacy\":{\"view\":\"anybody\",\"embed\":\"public\"},"
        "\"pictures\":{\"uri\":\"/videos/%s/pictures/1\",\"active\":true,\"type\":\"custom\","
        "\"base_link\":\"https://i.vimeocdn.com/video/1\",\"sizes\":[",
        id, (size_t)(100 + pad % 1000), id, id);
    for (int w = 100; w <= 1920; w = w * 3 / 2)
        enr_buf_printf(o,
                       "{\"width\":%d,\"height\":%d,\"link\":\"https://i.vimeocdn.com/video/"
                       "%s-d_%d\",\"link_with_play_button\":\"https://i.vimeocdn.com/filter/"
                       "overlay?src0=x\"},",
                       w, w * 9 / 16, id, w);
    enr_buf_printf(o,
                   "{\"width\":1920,\"height\":1080,\"link\":\"https://i.vimeocdn.com/video/%s-d_"
                   "1920\"}],\"resource_key\":\"k\"},\"user\":{\"uri\":\"/users/1\",\"name\":\"u\","
                   "\"pictures\":{\"sizes\":[{\"width\":30,\"link\":\"https://i.vimeocdn.com/"
                   "portrait/1\"}]}},\"stats\":{\"plays\":null},\"metadata\":{\"connections\":{"
                   "\"comments\":{\"uri\":\"/videos/%s/comments\",\"total\":0}}}}",
                   id, id);
}

static void test_untrimmed(void)
{
    static char idtext[50][12];
    enr_reply_id many[50];
    enr_buf body = {0};
    size_t cap = ENR_REPLY_SLACK, smallest = SIZE_MAX, largest = 0;
    int rc, all = 1;

    enr_buf_lit(&body, "{\"total\":50,\"page\":1,\"per_page\":50,\"paging\":{},\"data\":[");
    for (int i = 0; i < 50; i++) {
        size_t start = body.len, len;
        snprintf(idtext[i], sizeof idtext[i], "%d", 76979871 + i);
        memset(&many[i], 0, sizeof many[i]);
        many[i].id = idtext[i];
        many[i].id_len = strlen(idtext[i]);
        if (i)
            enr_buf_putc(&body, ',');
        vm_untrimmed(&body, idtext[i], 2800 + (size_t)i * 410); /* 4.8 to 25 KB */
        len = body.len - start - (i ? 1 : 0);
        smallest = len < smallest ? len : smallest;
        largest = len > largest ? len : largest;
        cap += enr_api_item_cap(ENR_API_VIMEO, many[i].id_len);
    }
    enr_buf_lit(&body, "]}");
    T_CHECK(!body.oom && smallest >= 4800 && largest <= 25600 && largest >= 24000,
            "objects of %zu to %zu bytes", smallest, largest);
    T_CHECK(body.len <= cap, "a full chunk untrimmed (%zu bytes) within the call's cap (%zu)",
            body.len, cap);
    T_CHECK(cap >= (3u << 20) &&
                enr_api_item_cap(ENR_API_YOUTUBE, 11) * 50 + ENR_REPLY_SLACK >= (3u << 20),
            "YouTube and Vimeo: a full chunk may take 3 MiB and more (%zu)", cap);
    T_CHECK(enr_api_item_cap(ENR_API_UPSTREAM, 11) == enr_upstream_reply_item_cap(11),
            "the aggregator's cap unchanged");
    for (int i = 0; i < ENR_API_COUNT; i++)
        T_CHECK(enr_api_item_cap(i, 11) * enr_api_get(i)->max_ids <=
                    ENR_REPLY_BODY_MAX - ENR_REPLY_SLACK + 6 * 11 * enr_api_get(i)->max_ids,
                "%s: a full chunk's cap within the per-call bound", enr_api_get(i)->name);
    enr_buf_reset(&arena);
    rc = enr_api_get(ENR_API_VIMEO)->parse(body.data, body.len, many, 50, 9, &arena);
    for (int i = 0; i < 50; i++) {
        char want[128];
        snprintf(want, sizeof want, "https://i.vimeocdn.com/video/%.12s-d_1920", idtext[i]);
        all &= many[i].state == ENR_REPLY_FOUND && many[i].has_poster && many[i].has_duration &&
               many[i].poster_len == strlen(want) &&
               memcmp(arena.data + many[i].poster_off, want, many[i].poster_len) == 0;
    }
    T_CHECK(rc == 0 && all, "every untrimmed object enriched: the widest picture, its duration");
    enr_buf_free(&body);
}

int main(void)
{
    test_youtube_widest();
    test_youtube_widest_mixed();
    test_youtube_live();
    test_dailymotion_live();
    test_untrimmed();
    enr_buf_free(&arena);
    enr_buf_free(&answer);
    T_DONE();
}
