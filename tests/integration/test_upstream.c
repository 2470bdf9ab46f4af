/*
 * test_upstream.c: the upstream client against the real fake upstream
 * (tests/fake_upstream.py, a child process on loopback: t_fake_upstream.h).
 *
 * Batches are built by hand (key/provider/duration), as enr_parse would
 * leave them.  Covers: the effect on poster/duration, validation of the
 * upstream's values, percent-encoding, cache hits and negative entries,
 * chunking, the call cap and the URL length limit, the connection bound,
 * every fault mode (5xx, malformed, bad shape,
 * truncated, hang, refused, dead connections), the breaker's full cycle,
 * the deadline, and connection cycling (1,000 batches against an upstream
 * that closes every connection after 100 requests, silently or with a
 * header) with the process's descriptor count measured from /proc.  The
 * 20,000-batch incident replay runs once, through the real stack, in
 * tests/integration/test_upstream_incident.py.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "upstream/curlapi.h"
#include "engine/engine.h"
#include "base/log.h"
#include "upstream/breaker.h"
#include "upstream/api.h"
#include "engine/contract.h"
#include "t.h"
#include "t_batch.h"
#include "t_config.h"
#include "t_curl.h"
#include "t_fake_upstream.h"
#include "upstream/upstream.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint32_t crc32_of(const char *s, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= (unsigned char)s[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static double fake_duration(const char *id)
{
    return 1 + crc32_of(id, strlen(id)) % 7200;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The shipped defaults (parsed from the built-in text, never copied by
 * hand), then what these tests choose on purpose. */
static void base_config(enr_config *c)
{
    t_default_config(c);
    snprintf(c->upstream_url, sizeof(c->upstream_url), "http://127.0.0.1:%d/v1/meta", fake_port);
    for (int p = ENR_PROV_YT; p <= ENR_PROV_DM; p++)
        c->sources[p] = ENR_API_UPSTREAM; /* what the parser resolves for upstream_url */
    c->upstream_timeout_ms = 500;
    c->ids_per_call = 50;
    c->max_calls_per_batch = 4;
    c->upstream_max_connections = 4;
    c->cache_entries = 50000;
    c->cache_bytes = 16u << 20;
    c->cache_ttl_s = 3600;
    c->cache_negative_ttl_s = 300;
    c->breaker_failures = 5;
    c->breaker_cooldown_ms = 5000;
}

/* Each client gets a fresh cache of its own, as a fresh host would (the
 * previous client is always freed before the next is made). */
static enr_cache *cache;

static enr_upstream *make(const enr_config *c)
{
    char err[256] = "x";
    enr_upstream *u;
    enr_cache_free(cache);
    cache = enr_cache_new(c->cache_entries, c->cache_bytes);
    T_CHECK(cache != NULL, "enr_cache_new");
    u = enr_upstream_new(c, cache, err, sizeof(err));
    T_CHECK(u != NULL && err[0] == '\0', "enr_upstream_new: %s", err);
    return u;
}

/* One test's client: the shipped configuration with this file's choices
 * (the test changes f.c after begin()), a batch, and the client start()
 * makes of f.c, replacing the one before; end() frees both. */
typedef struct {
    enr_config c;
    enr_batch b;
    enr_upstream *u;
} fixture;

static void begin(fixture *f)
{
    memset(f, 0, sizeof(*f));
    base_config(&f->c);
}

static void start(fixture *f)
{
    enr_upstream_free(f->u); /* before make() frees its cache */
    f->u = make(&f->c);
}

static void end(fixture *f)
{
    enr_upstream_free(f->u);
    f->u = NULL;
    enr_batch_free(&f->b);
}

/* The client's own counters (the worker publishes them to its slot). */
#define G(field) ((unsigned long)enr_upstream_stats_of(f.u)->src[ENR_API_UPSTREAM].field)
#define G_FDS() ((unsigned long)enr_upstream_stats_of(f.u)->fds)
#define G_BREAKER() ((unsigned long)enr_upstream_stats_of(f.u)->breaker_state[ENR_API_UPSTREAM])

/* ---- tests ---- */

static void test_config(void)
{
    enr_config c;
    char err[256];
    static const char *const bad[] = {"ftp://127.0.0.1/x", "127.0.0.1:80/x", "http://h/p#frag",
                                      "http://h/a b", "file:///etc/passwd"};

    base_config(&c);
    c.upstream_url[0] = '\0';
    for (int p = ENR_PROV_YT; p <= ENR_PROV_DM; p++)
        c.sources[p] = ENR_SOURCE_OFF;
    strcpy(err, "x");
    T_CHECK(enr_upstream_new(&c, NULL, err, sizeof(err)) == NULL && err[0] == '\0',
            "empty upstream_url: enrichment off, no error");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        base_config(&c);
        snprintf(c.upstream_url, sizeof(c.upstream_url), "%s", bad[i]);
        err[0] = '\0';
        T_CHECK(enr_upstream_new(&c, NULL, err, sizeof(err)) == NULL && err[0] != '\0',
                "bad upstream_url rejected: %s", bad[i]);
    }
    T_CHECK(enr_upstream_enrich(NULL, NULL, 0) == 0, "NULL client: nothing to do");
}

/* Sources: each API's ids per call (Dailymotion 100, the aggregator
 * ids_per_call), max_calls_per_batch counted per source, a source that
 * is off asks nothing and degrades nothing (its records' local values
 * are the answer), and one provider's ids from two sources never share
 * a cache entry. */
static void test_sources(void)
{
    enr_config c;
    enr_batch b = {0};
    enr_upstream *u;
    const enr_upstream_stats *st;
    char id[32], err[256] = "";
    size_t deg;

    base_config(&c);
    c.max_calls_per_batch = 2;
    snprintf(c.api[ENR_SOURCE_DAILYMOTION].url, sizeof c.api[0].url, "http://127.0.0.1:%d/dm",
             fake_port);
    c.sources[ENR_PROV_DM] = ENR_API_DAILYMOTION;
    c.sources[ENR_PROV_VM] = ENR_SOURCE_OFF;
    u = make(&c);
    for (int i = 0; i < 250; i++) {
        snprintf(id, sizeof id, "x%d", i);
        add_rec(&b, ENR_PROV_DM, id, 0);
    }
    for (int i = 0; i < 120; i++) {
        snprintf(id, sizeof id, "y%d", i);
        add_rec(&b, ENR_PROV_YT, id, 0);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "v%d", i);
        add_rec(&b, ENR_PROV_VM, id, 0);
    }
    deg = enr_upstream_enrich(u, &b, now_ms() + 2000);
    st = enr_upstream_stats_of(u);
    T_CHECK(st->src[ENR_API_DAILYMOTION].calls == 2 &&
                st->src[ENR_API_DAILYMOTION].ids_asked == 200,
            "Dailymotion: 100 ids a call, 2 calls: %llu calls, %llu ids",
            (unsigned long long)st->src[ENR_API_DAILYMOTION].calls,
            (unsigned long long)st->src[ENR_API_DAILYMOTION].ids_asked);
    T_CHECK(st->src[ENR_API_UPSTREAM].calls == 2 && st->src[ENR_API_UPSTREAM].ids_asked == 100,
            "the aggregator: 50 ids a call, its own 2 calls: %llu calls, %llu ids",
            (unsigned long long)st->src[ENR_API_UPSTREAM].calls,
            (unsigned long long)st->src[ENR_API_UPSTREAM].ids_asked);
    T_CHECK(st->src[ENR_API_VIMEO].calls == 0 && st->src[ENR_API_VIMEO].cache_misses == 0,
            "Vimeo off: not even looked up");
    T_CHECK(st->src[ENR_API_UPSTREAM].found + st->src[ENR_API_UPSTREAM].unknown == 100,
            "every id asked of the aggregator found or unknown: %llu + %llu",
            (unsigned long long)st->src[ENR_API_UPSTREAM].found,
            (unsigned long long)st->src[ENR_API_UPSTREAM].unknown);
    /* Dailymotion's 250 (the fake is no Dailymotion: its calls fail, and
     * 50 ids were past the cap), YouTube's 20 past the cap; Vimeo none. */
    T_CHECK(deg == 270, "degraded %zu (want 270)", deg);
    enr_upstream_free(u);

    /* y0 from the aggregator is in the cache; YouTube's own API must not
     * take it from there. */
    base_config(&c);
    snprintf(c.api[ENR_SOURCE_YOUTUBE].url, sizeof c.api[0].url, "http://127.0.0.1:%d/yt",
             fake_port);
    c.api[ENR_SOURCE_YOUTUBE].secret.bytes = (char *)"KEY"; /* read only: nothing here frees it */
    c.api[ENR_SOURCE_YOUTUBE].secret.len = 3;
    c.sources[ENR_PROV_YT] = ENR_API_YOUTUBE;
    u = enr_upstream_new(&c, cache, err, sizeof err); /* make() would start a new cache */
    T_CHECK(u != NULL, "a YouTube client on the same cache: %s", err);
    clear(&b);
    add_rec(&b, ENR_PROV_YT, "y0", 0);
    (void)enr_upstream_enrich(u, &b, now_ms() + 2000);
    st = enr_upstream_stats_of(u);
    T_CHECK(st->src[ENR_API_YOUTUBE].cache_misses == 1 && st->src[ENR_API_YOUTUBE].calls == 1,
            "the aggregator's answer is not YouTube's: %llu misses, %llu calls",
            (unsigned long long)st->src[ENR_API_YOUTUBE].cache_misses,
            (unsigned long long)st->src[ENR_API_YOUTUBE].calls);
    enr_upstream_free(u);
    free(b.recs);
    enr_buf_free(&b.text);
}

static void test_effect(void)
{
    fixture f;
    char want[512];
    size_t deg;
    long calls0 = stat_of("data_requests");
    const char *evil = "a,b/../?#&provider=vm&x=1 \xc3\xa9%2F@evil.example:1";

    begin(&f);
    start(&f);
    add_rec(&f.b, ENR_PROV_YT, "dQw4w9WgXcQ", 0);
    add_rec(&f.b, ENR_PROV_VM, "AbC", 42);
    add_rec(&f.b, ENR_PROV_DM, "unk1", 0);
    add_rec(&f.b, ENR_PROV_YT, evil, 0);
    add_rec(&f.b, ENR_PROV_YT, "dQw4w9WgXcQ", 7); /* same key twice in a batch */
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(deg == 0, "nothing degraded: %zu", deg);
    T_CHECK(poster_is(&f.b, 0, "https://img.example/yt/dQw4w9WgXcQ.jpg"), "poster from upstream");
    T_CHECK(f.b.recs[0].duration == fake_duration("dQw4w9WgXcQ"), "duration 0 replaced: %g",
            f.b.recs[0].duration);
    T_CHECK(poster_is(&f.b, 1, "https://img.example/vm/AbC.jpg"), "vm poster");
    T_CHECK(f.b.recs[1].duration == 42, "local duration kept when non-zero");
    T_CHECK(f.b.recs[2].poster_len == 0 && f.b.recs[2].duration == 0,
            "unknown id keeps local values");
    snprintf(want, sizeof(want), "https://img.example/yt/%s.jpg",
             "a%2Cb%2F..%2F%3F%23%26provider%3Dvm%26x%3D1%20%C3%A9%252F%40evil.example%3A1");
    T_CHECK(poster_is(&f.b, 3, want), "percent-encoded id round-trips (poster %.*s)",
            (int)f.b.recs[3].poster_len, f.b.text.data + f.b.recs[3].poster_off);
    T_CHECK(poster_is(&f.b, 4, "https://img.example/yt/dQw4w9WgXcQ.jpg") &&
                f.b.recs[4].duration == 7,
            "duplicate key: same poster, own local duration kept");
    T_CHECK(G(calls) == 3, "one call per provider: %lu", G(calls));
    T_CHECK(stat_of("data_requests") - calls0 == 3, "the upstream saw 3 calls");
    T_CHECK(G(cache_misses) == 5 && G(cache_hits) == 0, "misses %lu hits %lu", G(cache_misses),
            G(cache_hits));
    {
        json_object *o = stats_json(), *v;
        int found = 0;
        json_object_object_get_ex(o, "last_targets", &v);
        for (size_t i = 0; v && i < json_object_array_length(v); i++) {
            const char *t = json_object_get_string(json_object_array_get_idx(v, i));
            if (strstr(t, "a%2Cb%2F..%2F%3F%23%26provider%3Dvm"))
                found = 1;
            T_CHECK(strncmp(t, "/v1/meta?provider=", 18) == 0, "path fixed by config: %s", t);
        }
        T_CHECK(found, "evil id sent percent-encoded inside ids=");
        json_object_object_get_ex(o, "hosts", &v);
        T_CHECK(v && json_object_array_length(v) == 1, "one Host only");
        json_object_object_get_ex(o, "bad_requests", &v);
        T_CHECK(json_object_get_int(v) == 0, "no bad request");
        json_object_object_get_ex(o, "bad_encoding", &v);
        T_CHECK(json_object_get_int(v) == 0, "only unreserved characters and %%XX on the wire");
        json_object_put(o);
    }

    /* the same batch again: all from the cache, the negative entry too */
    calls0 = stat_of("data_requests");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "dQw4w9WgXcQ", 0);
    add_rec(&f.b, ENR_PROV_DM, "unk1", 0);
    add_rec(&f.b, ENR_PROV_YT, "dqw4w9wgxcq", 0); /* other case: another id */
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(deg == 0, "cached: nothing degraded");
    T_CHECK(poster_is(&f.b, 0, "https://img.example/yt/dQw4w9WgXcQ.jpg") &&
                f.b.recs[0].duration == fake_duration("dQw4w9WgXcQ"),
            "cache hit applies poster and duration");
    T_CHECK(f.b.recs[1].poster_len == 0, "negative hit: local values");
    T_CHECK(poster_is(&f.b, 2, "https://img.example/yt/dqw4w9wgxcq.jpg"), "case-sensitive key");
    T_CHECK(stat_of("data_requests") - calls0 == 1, "only the new id called upstream");
    T_CHECK(G(cache_hits) == 2, "2 hits: %lu", G(cache_hits));
    T_CHECK(enr_upstream_fds(f.u) >= 1 && enr_upstream_fds(f.u) <= 4, "fds %u within the bound",
            enr_upstream_fds(f.u));
    T_CHECK(G_FDS() == enr_upstream_fds(f.u), "up_fds published");
    end(&f);
}

static void test_validation(void)
{
    fixture f;
    char id[64];
    size_t deg;

    begin(&f);
    start(&f);
    for (int k = 0; k < 9; k++) {
        snprintf(id, sizeof(id), "badp%d", k);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
    }
    for (int k = 0; k < 8; k++) {
        snprintf(id, sizeof(id), "badd%d", k);
        add_rec(&f.b, ENR_PROV_VM, id, 0);
    }
    add_rec(&f.b, ENR_PROV_DM, "long1", 0);
    add_rec(&f.b, ENR_PROV_DM, "frac1", 0);
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(deg == 0, "invalid fields are ignored, not failures: %zu", deg);
    for (int k = 0; k < 9; k++) {
        snprintf(id, sizeof(id), "badp%d", k);
        T_CHECK(f.b.recs[k].poster_len == 0, "invalid poster %s ignored", id);
        T_CHECK(f.b.recs[k].duration == fake_duration(id), "its valid duration still used (%s)",
                id);
    }
    for (int k = 0; k < 8; k++) {
        snprintf(id, sizeof(id), "badd%d", k);
        T_CHECK(f.b.recs[9 + k].duration == 0, "invalid duration %s ignored: %g", id,
                f.b.recs[9 + k].duration);
        snprintf(id, sizeof(id), "https://img.example/vm/badd%d.jpg", k);
        T_CHECK(poster_is(&f.b, 9 + (size_t)k, id), "its valid poster still used");
    }
    T_CHECK(f.b.recs[17].poster_len == 2048, "a 2048-byte poster is valid: %zu",
            f.b.recs[17].poster_len);
    T_CHECK(f.b.recs[18].duration == 12.5, "fractional duration: %g", f.b.recs[18].duration);
    T_CHECK(G(fail_body) == 0, "no bad body counted");
    end(&f);
}

static void test_chunks(void)
{
    fixture f;
    char id[32];
    size_t deg;

    begin(&f);
    f.c.ids_per_call = 3;
    f.c.max_calls_per_batch = 2;
    start(&f);
    fake_reset();
    for (int k = 0; k < 10; k++) {
        snprintf(id, sizeof(id), "chunk%d", k);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
    }
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(deg == 4, "10 ids, 2 calls of 3: 4 records beyond the cap degraded: %zu", deg);
    T_CHECK(stat_of("data_requests") == 2 && stat_of("max_ids_per_call") == 3,
            "2 calls of at most 3 ids");
    T_CHECK(poster_is(&f.b, 5, "https://img.example/yt/chunk5.jpg") && f.b.recs[6].poster_len == 0,
            "first 6 enriched, the rest local");

    /* an id too long for any request line keeps its local values; the
     * rest of its provider's ids still go, in calls under the URL limit */
    base_config(&f.c);
    start(&f);
    clear(&f.b);
    {
        static char huge[9001];
        char mid[3000];
        memset(huge, 'h', sizeof(huge) - 1);
        memset(mid, 'm', sizeof(mid) - 1);
        mid[sizeof(mid) - 1] = '\0';
        add_rec(&f.b, ENR_PROV_VM, "short1", 0);
        add_rec(&f.b, ENR_PROV_VM, huge, 0);
        for (int k = 0; k < 4; k++) {
            mid[0] = (char)('a' + k);
            add_rec(&f.b, ENR_PROV_VM, mid, 0); /* 4 x 3000 bytes: two calls */
        }
        deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
        T_CHECK(deg == 1 && f.b.recs[1].poster_len == 0, "the oversized id alone degraded: %zu",
                deg);
        /* (a 3000-byte id makes a poster over 2048 bytes: only its duration comes back) */
        T_CHECK(poster_is(&f.b, 0, "https://img.example/vm/short1.jpg") && f.b.recs[5].duration > 0,
                "the others enriched");
        T_CHECK(G(calls) == 2 && stat_of("bad_requests") == 0,
                "split under the URL limit: %lu calls", G(calls));
    }
    end(&f);
}

/* More concurrent calls than connections: curl queues them, the bound
 * holds on the upstream's side, and every call still completes. */
static void test_conn_bound(void)
{
    fixture f;
    char id[32];
    size_t deg = 0;

    begin(&f);
    f.c.ids_per_call = 1;
    f.c.max_calls_per_batch = 8;
    f.c.upstream_max_connections = 2;
    /* The fake's count begins with none of an earlier client's left. */
    T_CHECK(fake_wait_no_connections(), "the earlier tests' connections ended at the fake: %ld",
            stat_of("open_connections"));
    start(&f);
    fake_reset();
    set_fake("{\"latency_ms\":20}");
    for (int round = 0; round < 3; round++) {
        clear(&f.b);
        for (int k = 0; k < 8; k++) {
            snprintf(id, sizeof(id), "bound%d-%d", round, k);
            add_rec(&f.b, 1 + k % 3, id, 0);
        }
        deg += enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
        T_CHECK(enr_upstream_fds(f.u) <= 2, "client holds at most 2 sockets: %u",
                enr_upstream_fds(f.u));
    }
    set_fake("{\"latency_ms\":0}");
    T_CHECK(deg == 0, "8 calls over 2 connections all complete: %zu degraded", deg);
    T_CHECK(stat_of("max_open_connections") <= 2, "upstream saw at most 2 connections at once: %ld",
            stat_of("max_open_connections"));
    T_CHECK(G(calls) == 24, "24 calls: %lu", G(calls));
    end(&f);
}

/* A fault mode: fresh ids, every record degraded, local values kept,
 * the failure counted under the right kind. */
static void test_fault(const char *mode_json, const char *name, int counter_index)
{
    fixture f;
    char id[32];
    size_t deg;
    unsigned long counters[4];
    uint64_t t0;

    begin(&f);
    f.c.breaker_failures = 100;
    start(&f);
    set_fake(mode_json);
    for (int k = 0; k < 6; k++) {
        snprintf(id, sizeof(id), "%s%d", name, k);
        add_rec(&f.b, 1 + k % 3, id, k == 0 ? 0 : 30);
    }
    t0 = now_ms();
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(now_ms() - t0 < 700, "%s: answers within the deadline: %llu ms", name,
            (unsigned long long)(now_ms() - t0));
    T_CHECK(deg == 6, "%s: all 6 degraded: %zu", name, deg);
    T_CHECK(f.b.n == 6, "%s: nothing dropped", name);
    for (size_t i = 0; i < f.b.n; i++)
        T_CHECK(f.b.recs[i].poster_len == 0 && f.b.recs[i].duration == (i == 0 ? 0 : 30),
                "%s: record %zu keeps local values", name, i);
    counters[0] = G(fail_timeout);
    counters[1] = G(fail_connect);
    counters[2] = G(fail_status);
    counters[3] = G(fail_body);
    T_CHECK(counters[counter_index] == 3, "%s: 3 failures of kind %d (t%lu c%lu s%lu b%lu)", name,
            counter_index, counters[0], counters[1], counters[2], counters[3]);
    set_fake("{\"mode\":\"ok\"}");
    /* failures are not cached: the next batch gets the data */
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(deg == 0 && f.b.recs[1].poster_len > 0, "%s: recovered on the next batch (%zu)", name,
            deg);
    end(&f);
}

static void test_partial(void)
{
    fixture f;
    char id[32];
    size_t deg, known = 0;

    begin(&f);
    start(&f);
    set_fake("{\"mode\":\"partial\"}");
    for (int k = 0; k < 20; k++) {
        snprintf(id, sizeof(id), "part%d", k);
        add_rec(&f.b, ENR_PROV_VM, id, 0);
    }
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    for (size_t i = 0; i < f.b.n; i++) {
        const char *k = f.b.text.data + f.b.recs[i].key_off;
        int answered = crc32_of(k, f.b.recs[i].key_len) % 2 == 0;
        known += f.b.recs[i].poster_len > 0;
        T_CHECK((f.b.recs[i].poster_len > 0) == answered,
                "partial: record %zu enriched iff answered", i);
    }
    T_CHECK(deg == 0 && known > 0 && known < 20,
            "partial: answered ids enriched (%zu), the rest "
            "unknown, none degraded (%zu)",
            known, deg);
    set_fake("{\"mode\":\"ok\"}");
    end(&f);
}

static void test_hang_and_breaker(void)
{
    fixture f;
    char id[32];
    size_t deg;
    uint64_t t0, worst = 0;
    long before;
    int fds0;

    begin(&f);
    f.c.upstream_timeout_ms = 150;
    f.c.breaker_failures = 3;
    f.c.breaker_cooldown_ms = 400;
    start(&f);
    fds0 = count_fds();
    set_fake("{\"mode\":\"hang\"}");
    for (int i = 0; i < 6; i++) {
        clear(&f.b);
        snprintf(id, sizeof(id), "hang%d", i);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
        t0 = now_ms();
        deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 10000);
        if (now_ms() - t0 > worst)
            worst = now_ms() - t0;
        T_CHECK(deg == 1, "hang: batch %d degraded", i);
    }
    /* the margin covers scheduling on a loaded test machine, not waiting */
    T_CHECK(worst <= 150 + 75, "hang: worst batch %llu ms <= deadline 150 + 75",
            (unsigned long long)worst);
    T_CHECK(G(fail_timeout) == 3, "hang: 3 timeouts, then the breaker skips: %lu", G(fail_timeout));
    T_CHECK(G_BREAKER() == ENR_BREAKER_OPEN && G(breaker_opens) == 1, "breaker open");
    T_CHECK(G(calls) == 3, "no call while open: %lu", G(calls));
    T_CHECK(enr_upstream_fds(f.u) == 0, "abandoned connections closed: %u", enr_upstream_fds(f.u));
    T_CHECK(count_fds() == fds0, "process fds back to %d: %d", fds0, count_fds());

    /* upstream recovers; while open nothing goes out */
    set_fake("{\"mode\":\"ok\"}");
    before = stat_of("data_requests");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "rec0", 0);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 10000) == 1, "open: degraded at once");
    T_CHECK(stat_of("data_requests") == before, "open: no request reached the upstream");
    sleep_ms(450);
    /* half_open: a batch needing 3 calls sends exactly one (the probe) */
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "rec1", 0);
    add_rec(&f.b, ENR_PROV_VM, "rec2", 0);
    add_rec(&f.b, ENR_PROV_DM, "rec3", 0);
    deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 10000);
    T_CHECK(stat_of("data_requests") == before + 1, "half_open: exactly one probe call");
    T_CHECK(deg == 2 && poster_is(&f.b, 0, "https://img.example/yt/rec1.jpg"),
            "probe's records enriched, the others degraded: %zu", deg);
    T_CHECK(G_BREAKER() == ENR_BREAKER_CLOSED, "probe success closes the breaker");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_VM, "rec2", 0);
    add_rec(&f.b, ENR_PROV_DM, "rec3", 0);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 10000) == 0, "closed: everything enriched");

    /* failed probe reopens */
    set_fake("{\"mode\":\"5xx\"}");
    for (int i = 0; i < 3; i++) {
        clear(&f.b);
        snprintf(id, sizeof(id), "x5%d", i);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
        enr_upstream_enrich(f.u, &f.b, now_ms() + 10000);
    }
    T_CHECK(G_BREAKER() == ENR_BREAKER_OPEN && G(breaker_opens) == 2, "reopened by 5xx");
    sleep_ms(450);
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "x6", 0);
    enr_upstream_enrich(f.u, &f.b, now_ms() + 10000);
    T_CHECK(G_BREAKER() == ENR_BREAKER_OPEN && G(breaker_opens) == 3,
            "failed probe reopens (opens %lu)", G(breaker_opens));
    set_fake("{\"mode\":\"ok\"}");
    end(&f);
}

static void test_deadline(void)
{
    fixture f;
    uint64_t t0, took;
    size_t deg;

    begin(&f);
    f.c.upstream_timeout_ms = 1000;
    start(&f);
    set_fake("{\"latency_ms\":300}");
    add_rec(&f.b, ENR_PROV_YT, "slow1", 0);
    t0 = now_ms();
    deg = enr_upstream_enrich(f.u, &f.b, t0 + 60); /* the caller's deadline is shorter */
    took = now_ms() - t0;
    T_CHECK(deg == 1 && took >= 55 && took <= 60 + 75, "caller's deadline wins: %llu ms",
            (unsigned long long)took);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms()) == 1,
            "deadline already passed: degraded at once");
    T_CHECK(G(fail_timeout) == 1, "deadline counted as timeout once: %lu", G(fail_timeout));
    set_fake("{\"latency_ms\":0}");
    end(&f);
}

static void test_retry(void)
{
    fixture f;
    char id[32];
    size_t deg = 0;

    begin(&f);
    start(&f);
    /* every connection fresh (the upstream says Connection: close after
     * each reply), every 3rd request dies before any byte of the reply */
    set_fake("{\"close_after\":1,\"close_style\":\"header\",\"drop_every\":3}");
    for (int i = 0; i < 30; i++) {
        clear(&f.b);
        snprintf(id, sizeof(id), "retry%d", i);
        add_rec(&f.b, ENR_PROV_DM, id, 0);
        deg += enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    }
    T_CHECK(deg == 0, "dead connections retried: nothing degraded (%zu)", deg);
    if (getenv("ENR_TEST_DEBUG")) {
        json_object *o = stats_json(), *v;
        json_object_object_get_ex(o, "events", &v);
        printf("%s\n", json_object_to_json_string(v));
        json_object_put(o);
    }
    T_CHECK(G(retries) == (unsigned long)stat_of("dropped") && G(retries) >= 9,
            "one retry per dead connection: %lu retries, %ld dropped", G(retries),
            stat_of("dropped"));
    T_CHECK(G(calls) == 30, "a retry is not a new call: %lu", G(calls));
    /* every request dies: one retry only, then a counted failure */
    set_fake("{\"drop_every\":1}");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_DM, "retryfail", 0);
    {
        unsigned long r0 = G(retries), f0 = G(fail_connect);
        deg = enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
        T_CHECK(deg == 1 && G(retries) == r0 + 1 && G(fail_connect) == f0 + 1,
                "at most one retry, and the failure is reported (%zu, +%lu retries)", deg,
                G(retries) - r0);
    }
    set_fake("{\"close_after\":100,\"close_style\":\"silent\",\"drop_every\":0}");
    end(&f);
}

/* An upstream cycling connections every 100 requests: ten cycles or more
 * show a descriptor leaked per close (the incident's cause). */
static void test_incident(const char *style, long divisor)
{
    fixture f;
    char id[64], js[128];
    long n = (getenv("ENR_CYCLE_BATCHES") ? atol(getenv("ENR_CYCLE_BATCHES")) : 1000) / divisor;
    size_t degraded_batches = 0, maxfds = 0;
    int fds[3] = {0, 0, 0};
    long closes0;
    uint64_t t0 = now_ms();

    begin(&f);
    f.c.cache_entries = 1000; /* unique ids: every batch misses, eviction runs */
    f.c.upstream_timeout_ms = 1000;
    start(&f);
    snprintf(js, sizeof(js), "{\"close_after\":100,\"close_style\":\"%s\",\"mode\":\"ok\"}", style);
    set_fake(js);
    closes0 = stat_of("server_closes");
    for (long i = 0; i < n; i++) {
        clear(&f.b);
        for (int k = 0; k < 3; k++) {
            snprintf(id, sizeof(id), "inc-%s-%ld-%d", style, i, k);
            add_rec(&f.b, ENR_PROV_YT, id, 0);
        }
        if (enr_upstream_enrich(f.u, &f.b, now_ms() + 1000) != 0 || f.b.recs[2].poster_len == 0)
            degraded_batches++;
        if (enr_upstream_fds(f.u) > maxfds)
            maxfds = enr_upstream_fds(f.u);
        /* The process's descriptors minus the client's sockets must not
         * move, and /proc must agree with the client's own count. */
        if (i == 0 || i == n / 2 || i == n - 1) {
            int at = i == 0 ? 0 : i == n - 1 ? 2 : 1;
            int all = count_fds();
            fds[at] = all - (int)enr_upstream_fds(f.u);
            T_CHECK(all >= (int)enr_upstream_fds(f.u), "incident (%s): /proc %d >= client %u",
                    style, all, enr_upstream_fds(f.u));
        }
    }
    T_CHECK(degraded_batches == 0, "incident (%s): %ld batches, %zu degraded", style, n,
            degraded_batches);
    T_CHECK(fds[0] == fds[1] && fds[1] == fds[2],
            "incident (%s): /proc fds less the client's sockets flat: %d %d %d", style, fds[0],
            fds[1], fds[2]);
    T_CHECK(maxfds <= 4, "incident (%s): client held at most %zu sockets", style, maxfds);
    T_CHECK(stat_of("server_closes") - closes0 >= n / 100 - 1,
            "incident (%s): upstream closed %ld connections", style,
            stat_of("server_closes") - closes0);
    T_CHECK(G(calls) == (unsigned long)n && G(fail_connect) == 0 && G(fail_timeout) == 0,
            "incident (%s): %lu calls, no failure", style, G(calls));
    printf("incident %s: %ld batches in %llu ms, retries %lu, fds %d/%d/%d, client max %zu\n",
           style, n, (unsigned long long)(now_ms() - t0), G(retries), fds[0], fds[1], fds[2],
           maxfds);
    end(&f);
    T_CHECK(count_fds() <= fds[0], "free closes the client's sockets: %d <= %d", count_fds(),
            fds[0]);
}

/* ENR_TEST_ONLY=name runs one group (debugging); every group by default. */
static int want_test(const char *name)
{
    const char *only = getenv("ENR_TEST_ONLY");
    if (only && strcmp(only, name) != 0)
        return 0;
    printf("# %s\n", name);
    return 1;
}

/* A batch whose deadline has passed makes no call, and that is not the
 * upstream's failure: counted as kind deadline, never fed to the
 * breaker, and a half_open probe it was granted is given back. */
static void test_deadline_passed(void)
{
    fixture f;
    char id[32];
    long before;

    begin(&f);
    f.c.breaker_failures = 1;
    f.c.breaker_cooldown_ms = 50;
    start(&f);
    set_fake("{\"mode\":\"ok\"}");
    before = stat_of("data_requests");
    for (int i = 0; i < 20; i++) {
        clear(&f.b);
        snprintf(id, sizeof(id), "late%d", i);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
        add_rec(&f.b, ENR_PROV_VM, id, 0);
        T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() - (uint64_t)(i % 2)) == 2,
                "passed deadline %d: both records degraded", i);
    }
    T_CHECK(G(skip_deadline) == 40, "40 calls counted as deadline: %lu", G(skip_deadline));
    T_CHECK(G(fail_connect) == 0 && G(fail_timeout) == 0 && G(calls) == 0,
            "not connect (%lu) nor timeout (%lu) failures, no call made (%lu)", G(fail_connect),
            G(fail_timeout), G(calls));
    T_CHECK(G_BREAKER() == ENR_BREAKER_CLOSED && G(breaker_opens) == 0, "breaker still closed");
    T_CHECK(stat_of("data_requests") == before, "nothing reached the upstream");

    /* open it for real (a 5xx), then let a late batch meet the half_open gate */
    set_fake("{\"mode\":\"5xx\"}");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "opener", 0);
    enr_upstream_enrich(f.u, &f.b, now_ms() + 2000);
    T_CHECK(G_BREAKER() == ENR_BREAKER_OPEN, "a 5xx opens it");
    set_fake("{\"mode\":\"ok\"}");
    sleep_ms(80);
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "late-probe", 0);
    enr_upstream_enrich(f.u, &f.b, now_ms() - 1);
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "probe", 0);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 2000) == 0,
            "the probe the late batch held was given back: the next batch probes and succeeds");
    T_CHECK(G_BREAKER() == ENR_BREAKER_CLOSED, "closed again by the probe");
    end(&f);
}

/* A reply larger than the call can need is refused unread, by kind. */
static void test_too_large(void)
{
    fixture f;
    static const char *const modes[] = {
        "{\"mode\":\"flood\",\"flood_bytes\":1048576}",
        "{\"mode\":\"flood_chunked\",\"flood_bytes\":1048576}",
        "{\"mode\":\"oversize\",\"flood_bytes\":262144}",
        "{\"mode\":\"biglength\",\"flood_bytes\":4194304}",
    };
    char id[32];

    begin(&f);
    f.c.breaker_failures = 100;
    start(&f);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        uint64_t t0;
        set_fake(modes[m]);
        clear(&f.b);
        snprintf(id, sizeof(id), "big%zu", m);
        add_rec(&f.b, ENR_PROV_YT, id, 0);
        t0 = now_ms();
        T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 2000) == 1, "%s: degraded", modes[m]);
        T_CHECK(G(fail_too_large) == m + 1, "%s: too_large %lu", modes[m], G(fail_too_large));
        T_CHECK(now_ms() - t0 < 400, "%s: refused without waiting (%llu ms)", modes[m],
                (unsigned long long)(now_ms() - t0));
    }
    T_CHECK(G(fail_body) == 0 && G(fail_timeout) == 0, "no other kind counted");
    /* a flood under the cap of one id is read, and finds nothing */
    set_fake("{\"mode\":\"flood\",\"flood_bytes\":8192}");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "smallflood", 0);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 2000) == 0, "small flood: read, id unknown");
    set_fake("{\"mode\":\"ok\"}");
    clear(&f.b);
    add_rec(&f.b, ENR_PROV_YT, "fine", 0);
    T_CHECK(enr_upstream_enrich(f.u, &f.b, now_ms() + 2000) == 0 && f.b.recs[0].poster_len > 0,
            "the same client enriches the next batch");
    end(&f);
}

/* Every fault mode: the mode, the ids' prefix, the failure kind. */
static void test_faults(void)
{
    static const struct {
        const char *mode, *name;
        int kind;
    } faults[] = {{"{\"mode\":\"5xx\"}", "f5xx", 2},
                  {"{\"mode\":\"malformed\"}", "fmal", 3},
                  {"{\"mode\":\"badshape\"}", "fshape", 3},
                  {"{\"mode\":\"truncated\"}", "ftrunc", 3},
                  {"{\"mode\":\"refuse\"}", "frefuse", 1},
                  {"{\"mode\":\"hang\"}", "fhang", 0},
                  /* The aggregator's 4xx is its failure, Retry-After or not: it has
                   * no key to refuse (no pause until a reload), no quota to spend. */
                  {"{\"mode\":\"429\",\"throttle_status\":401,\"retry_after\":\"5\"}", "f401", 2},
                  {"{\"mode\":\"429\",\"throttle_status\":404,\"retry_after\":\"\"}", "f404", 2}};
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        test_fault(faults[i].mode, faults[i].name, faults[i].kind);
}

static void test_incidents(void)
{
    test_incident("silent", 1);
    test_incident("header", 4);
}

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
    {"test_config", test_config},
    {"test_effect", test_effect},
    {"test_sources", test_sources},
    {"test_validation", test_validation},
    {"test_chunks", test_chunks},
    {"test_conn_bound", test_conn_bound},
    {"test_fault", test_faults},
    {"test_partial", test_partial},
    {"test_hang_and_breaker", test_hang_and_breaker},
    {"test_deadline", test_deadline},
    {"test_retry", test_retry},
    {"test_deadline_passed", test_deadline_passed},
    {"test_too_large", test_too_large},
    {"test_incident", test_incidents},
};

int main(void)
{
    if (t_curl_start() != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (fake_start() != 0) {
        T_CHECK(0, "fake upstream did not start (%s)", fake_script());
        fake_stop();
        T_DONE();
    }
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        if (want_test(tests[i].name))
            tests[i].fn();
    fake_stop();
    T_DONE();
}
