/*
 * test_store.c: the shared store's pure parts: its address, its prefix,
 * the backoff, the round-trip gate, the keys, and the values (what is
 * written reads back the same; what is forged is refused).  No socket:
 * the store itself is the integration suites' (test_store.py).
 */
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/config.h"
#include "base/storeaddr.h"
#include "engine/contract.h"
#include "upstream/api.h"
#include "upstream/store.h"
#include "upstream/store_cache.h"
#include "upstream/store_lease.h"
#include "t.h"

static void test_addr(void)
{
    enr_store_addr a;
    char why[200];
    static const char *const bad[] = {
        "",
        "redis://",
        "redis://:6379",
        "redis://h:0",
        "redis://h:65536",
        "redis://h:12x",
        "redis://h:6379/16",
        "redis://h:6379/x",
        "redis://user:pw@h:6379",
        "rediss://h:6379",
        "http://h:6379",
        "unix:relative.sock",
        "redis://[::1:6379",
        "redis://h h:1",
        ("unix:/a/very/long/path/that/goes/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/"
         "and/on/and/on/and/on/and/on/redis.sock"),
    };

    T_CHECK(enr_store_addr_parse("redis://10.0.0.5:6380/3", &a, why, sizeof why) == 0 &&
                !a.is_unix && strcmp(a.host, "10.0.0.5") == 0 && a.port == 6380 && a.db == 3,
            "host, port and database: %s %d %d", a.host, a.port, a.db);
    T_CHECK(enr_store_addr_parse("redis://store.internal", &a, why, sizeof why) == 0 &&
                a.port == ENR_STORE_PORT_DEFAULT && a.db == 0,
            "the default port and database");
    T_CHECK(enr_store_addr_parse("redis://[fd00::5]:7000/0", &a, why, sizeof why) == 0 &&
                strcmp(a.host, "fd00::5") == 0 && a.port == 7000,
            "an IPv6 address: %s", a.host);
    T_CHECK(enr_store_addr_parse("unix:/run/redis/redis.sock", &a, why, sizeof why) == 0 &&
                a.is_unix && strcmp(a.path, "/run/redis/redis.sock") == 0,
            "a unix socket");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_CHECK(enr_store_addr_parse(bad[i], &a, why, sizeof why) != 0 && why[0] != '\0',
                "refused: \"%s\"", bad[i]);
    T_CHECK(enr_store_addr_parse("redis://u:secret@h", &a, why, sizeof why) != 0 &&
                strstr(why, "secret") == NULL,
            "a password in the address is refused without being quoted: %s", why);
}

static void test_prefix(void)
{
    char longp[ENR_STORE_PREFIX_MAX + 2];

    T_CHECK(enr_store_prefix_ok("enrichd:") && enr_store_prefix_ok("fleet-eu.1_"), "good ones");
    T_CHECK(!enr_store_prefix_ok("") && !enr_store_prefix_ok("a b") &&
                !enr_store_prefix_ok("a\r\nFLUSHALL") && !enr_store_prefix_ok("a*"),
            "empty, spaces, line breaks and globs refused");
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    T_CHECK(!enr_store_prefix_ok(longp), "longer than %d bytes refused", ENR_STORE_PREFIX_MAX);
    longp[ENR_STORE_PREFIX_MAX] = '\0';
    T_CHECK(enr_store_prefix_ok(longp), "exactly %d bytes taken", ENR_STORE_PREFIX_MAX);
}

static void test_backoff(void)
{
    unsigned prev = 0;

    for (unsigned f = 1; f < 40; f++) {
        unsigned hi = enr_store_backoff_ms(f, 0), lo = enr_store_backoff_ms(f, 1023);
        T_CHECK(hi >= prev && hi <= ENR_STORE_BACKOFF_MAX_MS, "failure %u: %u ms", f, hi);
        T_CHECK(lo >= hi / 2 && lo <= hi, "jitter takes at most half: %u of %u", lo, hi);
        prev = hi;
    }
    T_CHECK(enr_store_backoff_ms(1, 0) == ENR_STORE_BACKOFF_MIN_MS, "the first retry");
    T_CHECK(enr_store_backoff_ms(2, 0) == 2 * ENR_STORE_BACKOFF_MIN_MS, "doubles");
    T_CHECK(enr_store_backoff_ms(1000, 0) == ENR_STORE_BACKOFF_MAX_MS, "capped");
}

static void test_gate(void)
{
    T_CHECK(!enr_store_worth_asking(0, 20), "no round trip measured: not asked");
    T_CHECK(enr_store_worth_asking(300, 20), "0.3 ms of a 20 ms budget: asked");
    T_CHECK(enr_store_worth_asking(9999, 20), "just under half");
    T_CHECK(!enr_store_worth_asking(10000, 20), "half of the budget: not asked");
    T_CHECK(!enr_store_worth_asking(50000, 20), "another region (50 ms): not asked");
}

static void test_keys(void)
{
    enr_buf k = {0};
    char big[ENR_STORE_ID_MAX + 1];

    T_CHECK(enr_store_cache_key(&k, "enrichd:", ENR_PROV_YT, ENR_API_YOUTUBE, "AbC-1", 5) == 0,
            "a key");
    T_CHECK(k.len == strlen("enrichd:c:youtube:yt:AbC-1") &&
                memcmp(k.data, "enrichd:c:youtube:yt:AbC-1", k.len) == 0,
            "prefix, source, provider, the id as it is: %.*s", (int)k.len, k.data);
    T_CHECK(enr_store_cache_key(&k, "f2:", ENR_PROV_DM, ENR_API_UPSTREAM, "x", 1) == 0 &&
                memcmp(k.data, "f2:c:upstream:dm:x", k.len) == 0,
            "the aggregator's keys apart from an API's: %.*s", (int)k.len, k.data);
    memset(big, 'a', sizeof big);
    T_CHECK(enr_store_cache_key(&k, "p:", ENR_PROV_YT, ENR_API_YOUTUBE, big, sizeof big) != 0,
            "an id over %d bytes is not shared", ENR_STORE_ID_MAX);
    T_CHECK(enr_store_cache_key(&k, "p:", ENR_PROV_YT, ENR_API_YOUTUBE, "", 0) != 0, "no id");
    enr_buf_free(&k);
}

static void roundtrip(const enr_cache_val *v, const char *what)
{
    char out[ENR_STORE_VALUE_MAX + 1];
    uint64_t now = 1700000000000ull, exp = now + 3600000;
    size_t n = enr_store_value_encode(out, sizeof out, v, exp);
    enr_cache_val back;

    T_CHECK_IN(what, n > 0 && enr_store_value_decode(out, n, now, &back) == 0,
               "%s: encoded and read back (%.*s)", what, (int)n, out);
    T_CHECK_IN(what,
               back.negative == v->negative && back.has_duration == v->has_duration &&
                   (!v->has_duration || back.duration == v->duration) &&
                   back.poster_len == (v->poster ? v->poster_len : 0) &&
                   (v->poster == NULL || memcmp(back.poster, v->poster, v->poster_len) == 0) &&
                   back.expires_ms == exp,
               "%s: the same answer", what);
}

static void test_values(void)
{
    enr_cache_val v = {0};

    v.negative = 1;
    roundtrip(&v, "negative");
    memset(&v, 0, sizeof v);
    v.poster = "https://i.ytimg.com/vi/AbC/hq.jpg";
    v.poster_len = strlen(v.poster);
    roundtrip(&v, "poster");
    v.has_duration = 1;
    v.duration = 212.125;
    roundtrip(&v, "poster and duration");
    v.poster = NULL;
    v.duration = 0.1;
    roundtrip(&v, "duration, an inexact one");
    memset(&v, 0, sizeof v);
    {
        char out[64];
        T_CHECK(enr_store_value_encode(out, sizeof out, &v, 1) == 0, "nothing to say: not stored");
    }
}

static void test_forged(void)
{
    uint64_t now = 1700000000000ull;
    char v[ENR_STORE_VALUE_MAX + 100];
    const char *ok = "https://ok.example/a.jpg";
    enr_cache_val out;
    static const char *const forged[] = {
        "E1 1700003600000 F 10 http://evil.example/x.jpg",
        "E1 1700003600000 F 10 javascript:alert(1)",
        "E1 1700003600000 F 10 https://evil.example/\x01.jpg",
        "E1 1700003600000 F 10 https://",
        "E1 1700003600000 F -5 https://ok.example/a.jpg",
        "E1 1700003600000 F nan https://ok.example/a.jpg",
        "E1 1700003600000 F inf https://ok.example/a.jpg",
        "E1 1700003600000 F 1e9 https://ok.example/a.jpg",
        "E1 1700003600000 F 0x10 https://ok.example/a.jpg",
        "E1 1699999999999 F 10 https://ok.example/a.jpg",
        "E1 1800000000000 F 10 https://ok.example/a.jpg",
        "E1 99999999999999999999 F 10 https://ok.example/a.jpg",
        "E2 1700003600000 F 10 https://ok.example/a.jpg",
        "E1 1700003600000 F 10 https://ok.example/a.jpg extra",
        "E1 1700003600000 F 10 https://ok.example/a.jpg ",
        "E1 1700003600000 F  https://ok.example/a.jpg",
        "E1 1700003600000 F - -",
        "E1 1700003600000 N extra",
        "E1 1700003600000 X",
        "E1 -1 N",
        "E1",
        "",
    };

    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++)
        T_CHECK(enr_store_value_decode(forged[i], strlen(forged[i]), now, &out) != 0,
                "refused: \"%s\"", forged[i]);
    {
        static const char nul[] = "E1 1700003600000 F 10 https://ok.example/\0.jpg";
        T_CHECK(enr_store_value_decode(nul, sizeof nul - 1, now, &out) != 0, "a NUL byte");
    }
    snprintf(v, sizeof v, "E1 1700003600000 F 10 %s", ok);
    T_CHECK(enr_store_value_decode(v, strlen(v), now, &out) == 0 && out.duration == 10,
            "the same value, well formed, is taken");
    memset(v, 'a', sizeof v - 1);
    memcpy(v, "E1 1700003600000 F 10 https://ok.example/", 41);
    v[sizeof v - 1] = '\0';
    T_CHECK(enr_store_value_decode(v, strlen(v), now, &out) != 0, "a value over %d bytes",
            ENR_STORE_VALUE_MAX);
}

/* A value is read for its n bytes only: nothing after them is its (a
 * reply's string is, but the decoder's contract is n bytes; the fuzz
 * target store_value found a duration's check reading on).  The value
 * ends at a page that cannot be read. */
static void test_value_at_end(void)
{
    static const struct {
        const char *v;
        int want;
    } values[] = {{"E1 1700003600000 F 1.5", -1}, /* no poster field: refused */
                  {"E1 1700003600000 F 1e1", -1},
                  {"E1 1700003600000 F 1.5 -", 0},
                  {"E1 1700003600000 N", 0}};
    long page = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    enr_cache_val out;

    T_CHECK(m != MAP_FAILED && mprotect(m + page, (size_t)page, PROT_NONE) == 0,
            "a page, then one that cannot be read");
    if (m == MAP_FAILED)
        return;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        size_t n = strlen(values[i].v);
        char *at = m + page - n;
        memcpy(at, values[i].v, n);
        T_CHECK(enr_store_value_decode(at, n, 1700000000000ull, &out) == values[i].want,
                "\"%s\" at the end of what can be read: %s, nothing read after it", values[i].v,
                values[i].want ? "refused" : "taken");
    }
    munmap(m, (size_t)page * 2);
}

static void hit_count(void *ud, size_t k, const enr_cache_val *v)
{
    *(size_t *)ud += k + 1;
    (void)v;
}

/* Feeds text to a reader bound to allowed bytes: the reply, or NULL
 * (*err set when the reader refused it). */
static redisReply *read_bound(const char *text, size_t allowed, int *err)
{
    redisReader *rd = redisReaderCreate();
    enr_store_bound b = {.allowed = allowed};
    void *r = NULL;

    enr_store_reader_bound(rd, &b);
    *err = enr_store_bound_feed(&b, strlen(text)) != 0 ||
           redisReaderFeed(rd, text, strlen(text)) != REDIS_OK ||
           redisReaderGetReply(rd, &r) != REDIS_OK;
    redisReaderFree(rd);
    return r;
}

/* hiredis 0.14 allocates an array's pointers when it reads its header:
 * the store's reader refuses headers the bytes asked for cannot carry
 * (the fuzz target store_reply runs the same path under a malloc
 * limit). */
static void test_reader_bound(void)
{
    const char *val = "E1 1700003600000 F 10 https://ok.example/a.jpg";
    char text[256];
    enr_store_stats st = {0};
    redisReply *r;
    size_t got = 0;
    int err;

    r = read_bound("*4097\r\n", enr_store_mget_cap(ENR_STORE_MGET_MAX), &err);
    T_CHECK(r == NULL && err, "an array over ENR_STORE_ARRAY_MAX refused at its header");
    r = read_bound("*1000\r\n*1000\r\n", ENR_STORE_REPLY_SMALL, &err);
    T_CHECK(r == NULL && err, "arrays of more elements than the bytes asked for can carry");
    r = read_bound("*-2\r\n", ENR_STORE_REPLY_SMALL, &err);
    T_CHECK(r == NULL && err, "a negative count refused");
    r = read_bound("*1\r\n*1\r\n:1\r\n", ENR_STORE_REPLY_SMALL, &err);
    T_CHECK(r != NULL && !err && r->type == REDIS_REPLY_ARRAY, "a small nested reply is read");
    T_CHECK(r != NULL && enr_store_mget_take(r, 1, 1700000000000ull, hit_count, &got, &st) == 0 &&
                st.refused == 1,
            "... and taken as an MGET's: an array is no value (refused)");
    enr_store_reply_free(r);
    snprintf(text, sizeof text, "*3\r\n$-1\r\n$%zu\r\n%s\r\n:5\r\n", strlen(val), val);
    r = read_bound(text, enr_store_mget_cap(3), &err);
    T_CHECK(r != NULL && !err, "an MGET's reply of three read");
    st = (enr_store_stats){0};
    T_CHECK(r != NULL && enr_store_mget_take(r, 3, 1700000000000ull, hit_count, &got, &st) == 1 &&
                got == 2 && st.hits == 1 && st.refused == 1,
            "one hit (the second id), a nil, an integer refused");
    T_CHECK(r != NULL && enr_store_mget_take(r, 2, 1700000000000ull, hit_count, &got, &st) == -1,
            "a reply of another count than the ids asked is not taken");
    enr_store_reply_free(r);
}

static void test_lease(void)
{
    enr_buf k = {0};
    uint64_t taken = 0, granted[3] = {0};

    T_CHECK(enr_lease_grant(0, 100, 10) == 10, "a whole lease while there is room");
    T_CHECK(enr_lease_grant(95, 100, 10) == 5, "what is left of the pace");
    T_CHECK(enr_lease_grant(100, 100, 10) == 0 && enr_lease_grant(130, 100, 10) == 0,
            "nothing past it (a ledger above it grants nothing, never a negative)");
    T_CHECK(enr_lease_units(0, 10000) == 100, "the default lease: 1 %% of the day's budget");
    T_CHECK(enr_lease_units(0, 50) == 1, "at least one unit");
    T_CHECK(enr_lease_units(25, 10000) == 25, "budget_lease_units when set");
    /* Three hosts taking leases in turn at a pace that grows: the ledger
     * never grants past the pace, and the hosts hold at most what was
     * granted. */
    for (uint64_t allowed = 0; allowed <= 1000; allowed += 7)
        for (int h = 0; h < 3; h++) {
            uint64_t g = enr_lease_grant(taken, allowed, 10);
            taken += g;
            granted[h] += g;
            T_CHECK(taken <= allowed || g == 0, "never past the pace (%llu of %llu)",
                    (unsigned long long)taken, (unsigned long long)allowed);
        }
    T_CHECK(taken == 994 && granted[0] + granted[1] + granted[2] == taken,
            "the day's pace granted whole: %llu", (unsigned long long)taken);
    T_CHECK(enr_lease_key(&k, "enrichd:", ENR_API_YOUTUBE, 1796371200000) == 0 &&
                k.len == strlen("enrichd:q:youtube:1796371200000") &&
                memcmp(k.data, "enrichd:q:youtube:1796371200000", k.len) == 0,
            "the ledger's key: prefix, source, the day's end: %.*s", (int)k.len, k.data);
    enr_buf_free(&k);
}

int main(void)
{
    test_lease();
    test_addr();
    test_prefix();
    test_backoff();
    test_gate();
    test_keys();
    test_values();
    test_forged();
    test_value_at_end();
    test_reader_bound();
    T_DONE();
}
