/*
 * test_upstream_reply.c: the upstream reply reader (upstream_reply.c)
 * without I/O: what each id gets from a reply, which replies are refused
 * whole, and that a hostile reply costs neither memory nor time beyond
 * the ids asked (a {} flood, deep nesting, huge strings and numbers).
 * The 4 MB flood's time is a goal (FLOOD_MAX_S, make bench-goals); its
 * memory, and that it finds nothing, are checked.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "t.h"
#include "t_api.h"
#include "upstream/upstream_reply.h"

/* The flood's time bound: ~13 ms here at -O2; sanitizers cost ~10x. */
#if defined(__SANITIZE_ADDRESS__)
#define FLOOD_MAX_S 1.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLOOD_MAX_S 1.0
#endif
#endif
#ifndef FLOOD_MAX_S
#define FLOOD_MAX_S 0.1
#endif

/* The aggregator's reader alone, on body's first blen bytes (a body
 * may hold a NUL). */
static int reply(const char *idlist, const char *body, size_t blen)
{
    set_ids(idlist);
    enr_buf_reset(&arena);
    return enr_upstream_reply_parse(body, blen, ids, nids, 42, &arena);
}

#define PARSE(idl, body) reply((idl), (body), strlen(body))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long vm_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &v) == 1)
            break;
    fclose(f);
    return v;
}

static void test_semantics(void)
{
    int rc;

    rc = PARSE("a,b,c", "{\"items\":[{\"id\":\"a\",\"poster\":\"https://h.example/a.jpg\","
                        "\"duration\":213,\"extra\":{\"x\":[1,2,{}]}},{\"id\":\"b\",\"duration\":"
                        "12.5},{\"id\":\"zzz\",\"duration\":5}]}");
    T_CHECK(rc == 0, "ok reply");
    T_CHECK(ids[0].state == ENR_REPLY_FOUND && poster_is(0, "https://h.example/a.jpg") &&
                ids[0].has_duration && ids[0].duration == 213,
            "a: poster and duration");
    T_CHECK(ids[1].state == ENR_REPLY_FOUND && !ids[1].has_poster && ids[1].duration == 12.5,
            "b: duration only");
    T_CHECK(ids[2].state == ENR_REPLY_ABSENT, "c: absent");

    /* the first item naming an id decides it, even when it is empty */
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"poster\":\"http://x/p\"},{\"id\":\"a\","
                    "\"duration\":7}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY && !ids[0].has_duration,
            "first item wins, even unusable");

    /* within an item and at the root, the last occurrence of a key counts */
    rc = PARSE("a,b", "{\"items\":[{\"id\":\"x\"}],\"items\":[{\"poster\":\"https://h/p\","
                      "\"id\":\"a\",\"id\":\"b\",\"duration\":3,\"duration\":null}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT && ids[1].state == ENR_REPLY_FOUND &&
                poster_is(1, "https://h/p") && !ids[1].has_duration,
            "last key wins (id b, duration null)");
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"duration\":3}],\"items\":5}");
    T_CHECK(rc == -1 && ids[0].state == ENR_REPLY_ABSENT, "last items not an array: refused");
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"poster\":\"https://h/p\"}],\"items\":[]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT && arena.len == 0,
            "a later items replaces the first, posters too");

    /* keys compare up to their first NUL; escapes decode as json-c did */
    rc = PARSE("a", "{\"items\":[{\"id\\u0000zz\":\"a\",\"duration\\u0000\":4}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_FOUND && ids[0].duration == 4, "key up to NUL");
    rc = PARSE("a\xe2\x82\xac,\xf0\x9f\x98\x80,\xed\xa0\x80"
               "A,\xef\xbf\xbd"
               "A",
               "{\"items\":[{\"id\":\"a\\u20ac\",\"duration\":1},{\"id\":\"\\ud83d\\ude00\","
               "\"duration\":2},{\"id\":\"\\ud800\\u0041\",\"duration\":3}]}");
    T_CHECK(rc == 0 && ids[0].duration == 1 && ids[1].duration == 2 &&
                ids[2].state == ENR_REPLY_ABSENT && ids[3].state == ENR_REPLY_ABSENT,
            "\\u escapes, pairs; a lone surrogate names no id (neither its WTF-8 bytes nor "
            "U+FFFD)");
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"poster\":\"https:\\/\\/h\\/caf\\u00e9.jpg\"}]}");
    T_CHECK(rc == 0 && poster_is(0, "https://h/caf\xc3\xa9.jpg"), "escaped poster decoded");

    /* fields: wrong types and bad values are ignored, not fatal */
    rc = PARSE("a,1", "{\"items\":[null,1,\"a\",{\"id\":1},{\"id\":\"a\",\"duration\":\"12\","
                      "\"poster\":5},{\"id\":\"1\",\"duration\":1e308}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY && ids[1].state == ENR_REPLY_EMPTY,
            "wrong types ignored");
    rc = PARSE("a,b,c,d", "{\"items\":[{\"id\":\"a\",\"duration\":-0},{\"id\":\"b\",\"duration\":"
                          "-0.0},{\"id\":\"c\",\"duration\":1e7},{\"id\":\"d\",\"duration\":"
                          "9999999.5}]}");
    T_CHECK(rc == 0 && ids[0].has_duration && !signbit(ids[0].duration) && ids[1].has_duration &&
                !signbit(ids[1].duration) && !ids[2].has_duration && ids[3].has_duration,
            "durations: -0 is 0, 1e7 refused, 9999999.5 kept");
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"duration\":99999999999999999999999}]}");
    T_CHECK(rc == 0 && !ids[0].has_duration, "huge integer duration refused");

    /* refused whole */
    static const char *const bad[] = {
        "",
        "[]",
        "{\"data\":[]}",
        "{\"items\":{}}",
        "{\"items\":[]} x",
        "{\"items\":[],}",
        "{\"items\":[{},]}",
        "{\"items\":[{\"id\":\"a\",\"duration\":01}]}",
        "{\"items\":[{\"id\":\"a\",\"duration\":1.}]}",
        "{\"items\":[{\"id\":\"a\",\"duration\":NaN}]}",
        "{\"items\":[{\"id\":'a'}]}",
        "{\"items\":[]} /* c */",
        "{\"items\":[{\"id\":\"a\\x\"}]}",
        "{\"items\":[{\"id\":\"a",
        "{\"items\":[{\"id\":\"a\"},",
        "{\"items\":[TRUE]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = PARSE("a", bad[i]);
        T_CHECK(rc == -1 && ids[0].state == ENR_REPLY_ABSENT && arena.len == 0, "refused: %s",
                bad[i]);
    }
    {
        static const char nul[] = "{\"items\":[{\"id\":\"a\",\"x\":\"\0\"}]}";
        rc = reply("a", nul, sizeof nul - 1);
    }
    T_CHECK(rc == -1, "a NUL byte ends the input (json-c did so)");
    rc = PARSE("a", "{\"items\":[{\"id\":\"a\",\"x\":\"\x01\xff\"}]}");
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY, "raw control / non-UTF-8 in strings taken");
    rc = PARSE("a", " \t\r\n{ \"items\" : [ { \"id\" : \"a\" , \"duration\" : 1E+1 } ] } \n");
    T_CHECK(rc == 0 && ids[0].duration == 10, "white space everywhere");
}

static void test_depth(void)
{
    char buf[256];
    int k = 0, rc;

    /* root 1 + items 2 + 30 more: 32 levels pass, 33 do not (json-c's limit) */
    for (int levels = 32; levels <= 33; levels++) {
        k = snprintf(buf, sizeof buf, "{\"items\":");
        for (int i = 0; i < levels - 1; i++)
            buf[k++] = '[';
        for (int i = 0; i < levels - 1; i++)
            buf[k++] = ']';
        buf[k++] = '}';
        buf[k] = '\0';
        rc = PARSE("a", buf);
        T_CHECK(rc == (levels <= ENR_REPLY_MAX_DEPTH ? 0 : -1), "depth %d: rc %d", levels, rc);
    }
}

/* A 4 MiB reply of {} items: neither memory nor time follows it. */
static void test_flood(void)
{
    size_t size = 4u << 20, k = 0, n = (size - 12) / 3;
    char *body = malloc(size + 16);
    long hwm0, hwm1;
    double t0, took;
    int rc;

    memcpy(body, "{\"items\":[", 10);
    k = 10;
    for (size_t i = 0; i < n; i++) {
        memcpy(body + k, i ? ",{}" : "{}", i ? 3 : 2);
        k += i ? 3 : 2;
    }
    memcpy(body + k, "]}", 2);
    k += 2;
    hwm0 = vm_hwm_kb();
    t0 = now_s();
    rc = reply("a,b,c", body, k);
    took = now_s() - t0;
    hwm1 = vm_hwm_kb();
    printf("flood: %zu bytes, %zu items: %.1f ms, peak memory +%ld kB\n", k, n, took * 1e3,
           hwm1 - hwm0);
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_ABSENT, "flood parsed, nothing found");
    T_CHECK(hwm1 - hwm0 < 512, "flood: peak memory +%ld kB < 512 kB", hwm1 - hwm0);
    T_GOAL(took, FLOOD_MAX_S, "flood: 4 MB of {} read within FLOOD_MAX_S (s)");

    /* one huge string and one huge number, where an id and a duration go */
    k = (size_t)snprintf(body, size, "{\"items\":[{\"id\":\"a\",\"duration\":1");
    memset(body + k, '0', size / 2);
    k += size / 2;
    k += (size_t)snprintf(body + k, 64, ",\"poster\":\"https://h/");
    memset(body + k, 'p', size / 4);
    k += size / 4;
    memcpy(body + k, "\"}]}", 4);
    k += 4;
    rc = reply("a", body, k);
    T_CHECK(rc == 0 && ids[0].state == ENR_REPLY_EMPTY, "huge number and poster: refused values");
    free(body);
}

static void test_cap(void)
{
    enr_reply_id two[2] = {{.id = "abc", .id_len = 3}, {.id = "de", .id_len = 2}};
    size_t want = ENR_REPLY_SLACK + 2 * ENR_REPLY_ITEM_BYTES + 6 * 5;

    T_CHECK(enr_upstream_reply_cap(two, 2) == want, "cap %zu == %zu",
            enr_upstream_reply_cap(two, 2), want);
    T_CHECK(enr_upstream_reply_cap(two, 0) == ENR_REPLY_SLACK, "cap of no ids: the slack");
    /* A legitimate reply fits: every id found, longest posters, all escaped as \/ */
    {
        enr_buf b = {0};
        char idb[MAXIDS][8];
        enr_reply_id many[MAXIDS];
        enr_buf_lit(&b, "{\"items\":[");
        for (int i = 0; i < MAXIDS; i++) {
            snprintf(idb[i], sizeof idb[i], "id%d", i);
            many[i].id = idb[i];
            many[i].id_len = strlen(idb[i]);
            enr_buf_printf(&b,
                           "%s{\"id\":\"%s\",\"duration\":1234567.125,\"poster\":\"https:\\/\\/",
                           i ? "," : "", idb[i]);
            for (int j = 0; j < (ENR_REPLY_POSTER_MAX - 8) / 2; j++)
                enr_buf_lit(&b, "\\/a");
            enr_buf_lit(&b, "\"}");
        }
        enr_buf_lit(&b, "]}");
        T_CHECK(b.len <= enr_upstream_reply_cap(many, MAXIDS), "worst legit reply %zu <= cap %zu",
                b.len, enr_upstream_reply_cap(many, MAXIDS));
        enr_buf_free(&b);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_semantics();
    test_depth();
    test_flood();
    test_cap();
    enr_buf_free(&arena);
    T_DONE();
}
