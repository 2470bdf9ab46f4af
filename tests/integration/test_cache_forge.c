/*
 * test_cache_forge.c: what a writer of the state directory can make the
 * cache serve.  Records of a cache file are rewritten as an attacker
 * would (a javascript: poster, an https URL of the attacker's, a NaN,
 * an infinite, a -1e300 and a negative runtime), each record's checksum
 * recomputed with the seed the file holds; the file is opened again and
 * a client whose provider cannot be reached (0 calls answered) enriches
 * a batch of those ids.  Without a key, every forgery a provider's answer
 * could not be is dropped and counted (cache_dropped), never served; the
 * https URL passes (the limit docs/limits.md states).  With a key (the
 * records' MAC, derived from secrets outside the state directory), all
 * of them are dropped and counted, the https URL too, and the honest
 * records are still served.  The check itself (enr_answer_check) is the
 * one a provider's reply is held to.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"
#include "upstream/answer.h"
#include "upstream/cache.h"
#include "upstream/cache_int.h"
#include "upstream/reply_scan.h"
#include "upstream/api.h"
#include "upstream/upstream.h"
#include "upstream/upstream_reply.h"
#include "t.h"
#include "t_batch.h"
#include "t_config.h"

#define ENTRIES 1000
#define BYTES (256u << 10)
#define HONEST_ID "honest"

static char dir[64], path[128];
static const uint8_t ident[ENR_CACHE_ID_BYTES] = {7, 7, 7};
static const uint8_t key[ENR_CACHE_KEY_BYTES] = {0x42, 1, 2, 3, 4, 5};

static const struct forgery {
    const char *id, *poster;
    double duration;
    int served_without_key; /* a value a provider could have given */
} forged[] = {
    {"f-js", "javascript:alert(1)", 10, 0},
    {"f-url", "https://attacker.example/x.jpg", 10, 1},
    {"f-nan", "https://i.example/a.jpg", NAN, 0},
    {"f-inf", "https://i.example/b.jpg", INFINITY, 0},
    {"f-huge", "https://i.example/c.jpg", -1e300, 0},
    {"f-neg", "https://i.example/d.jpg", -5, 0},
};
#define NFORGED (sizeof forged / sizeof forged[0])

/* The honest answer of id: a poster long enough for any forgery. */
static void honest(const char *id, char *poster, size_t cap, enr_cache_val *v)
{
    snprintf(poster, cap, "https://i.example/honest/%s/0123456789abcdef0123456789abcdef", id);
    memset(v, 0, sizeof *v);
    v->poster = poster;
    v->poster_len = strlen(poster);
    v->duration = 213;
    v->has_duration = 1;
}

/* A file of every id's honest answer (keyed or not), closed. */
static void make_file(int keyed)
{
    char poster[256];
    const char *why;
    enr_cache_val v;
    enr_cache *c;

    unlink(path);
    c = enr_cache_open(path, ENTRIES, BYTES, ident, &why);
    T_CHECK(c != NULL, "the cache file made");
    if (c == NULL)
        return;
    if (keyed)
        T_CHECK(enr_cache_authenticate(c, key) == 0, "the key set");
    for (size_t i = 0; i <= NFORGED; i++) {
        const char *id = i < NFORGED ? forged[i].id : HONEST_ID;
        honest(id, poster, sizeof poster, &v);
        T_CHECK(enr_cache_put(c, ENR_PROV_YT, id, strlen(id), &v, enr_wall_ms() + 3600000) == 0,
                "put %s", id);
    }
    enr_cache_free(c);
}

/* Rewrites id's record in the file at path as an attacker who can write
 * the file: poster and runtime, the record's sum recomputed with the
 * file's own seed (its MAC left: the key is not in the file).  1 done. */
static int forge(const char *id, const char *poster, double duration)
{
    int fd = open(path, O_RDWR), done = 0;
    struct stat st;
    char *m;

    if (fd < 0 || fstat(fd, &st) != 0)
        return 0;
    m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    const enr_cache *h = (const enr_cache *)m;
    enr_cslot *sl = (enr_cslot *)(m + h->index_off);
    for (uint64_t i = 0; i < h->nbuckets * ENR_CACHE_WAYS && !done; i++) {
        enr_crec *r = (enr_crec *)(m + h->ring_off + sl[i].pos % h->ring_size);
        char *k = (char *)(r + 1);
        size_t plen = strlen(poster);
        if (!sl[i].used || r->key_len != strlen(id) || memcmp(k, id, r->key_len) != 0 ||
            sizeof *r + r->key_len + plen > r->len)
            continue;
        memset(k + r->key_len, 0, r->len - sizeof *r - r->key_len);
        memcpy(k + r->key_len, poster, plen);
        r->poster_len = (uint32_t)plen;
        r->duration = duration;
        r->flags = ENR_CF_POSTER | ENR_CF_DURATION;
        r->sum = 0;
        r->sum = enr_cache_sum(h->seed, r, r->len);
        done = 1;
    }
    munmap(m, (size_t)st.st_size);
    return done;
}

/* The file's records enriched by a client whose provider is unreachable:
 * checks what each record got, and what was counted. */
static void enrich_forged(int keyed)
{
    enr_config c;
    enr_batch b = {0};
    enr_upstream *u;
    enr_cache *cache;
    const char *why;
    char err[256] = "", want[256];
    enr_cache_val v;
    size_t dropped = 0;

    t_default_config(&c);
    snprintf(c.upstream_url, sizeof c.upstream_url, "http://127.0.0.1:1/v1/meta");
    for (int p = ENR_PROV_YT; p <= ENR_PROV_DM; p++)
        c.sources[p] = ENR_API_UPSTREAM;
    c.cache_entries = ENTRIES;
    c.cache_bytes = BYTES;
    cache = enr_cache_open(path, ENTRIES, BYTES, ident, &why);
    T_CHECK(cache != NULL && why == NULL, "the forged file opened as it was (its sums hold)");
    if (cache == NULL)
        return;
    if (keyed)
        enr_cache_authenticate(cache, key);
    u = enr_upstream_new(&c, cache, err, sizeof err);
    T_CHECK(u != NULL, "a client: %s", err);
    for (size_t i = 0; i < NFORGED; i++)
        add_rec(&b, ENR_PROV_YT, forged[i].id, 0);
    add_rec(&b, ENR_PROV_YT, HONEST_ID, 0);
    (void)enr_upstream_enrich(u, &b, enr_mono_ms() + 2000);
    for (size_t i = 0; i < NFORGED; i++) {
        const struct forgery *f = &forged[i];
        int served = poster_is(&b, i, f->poster);
        int expect = f->served_without_key && !keyed;
        dropped += !expect;
        T_CHECK(served == expect && (expect || b.recs[i].duration == 0),
                "%s, %s: %s (poster %s, runtime %g)", keyed ? "keyed" : "no key", f->id,
                expect ? "served (no key: a plausible answer)" : "not served",
                served ? "forged" : "not", b.recs[i].duration);
        T_CHECK(isfinite(b.recs[i].duration) && b.recs[i].duration >= 0,
                "%s: a runtime JSON can say", f->id);
        T_CHECK(enr_cache_lookup(cache, ENR_PROV_YT, f->id, strlen(f->id), enr_wall_ms(), 0, &v) ==
                    (expect ? ENR_CACHE_FRESH : ENR_CACHE_MISS),
                "%s: %s", f->id, expect ? "still cached" : "dropped from the cache");
    }
    honest(HONEST_ID, want, sizeof want, &v);
    T_CHECK(poster_is(&b, NFORGED, want) && b.recs[NFORGED].duration == 213,
            "%s: the honest record still served", keyed ? "keyed" : "no key");
    T_CHECK(enr_upstream_stats_of(u)->src[ENR_API_UPSTREAM].cache_dropped == dropped,
            "%s: %zu dropped and counted (cache_dropped %llu)", keyed ? "keyed" : "no key", dropped,
            (unsigned long long)enr_upstream_stats_of(u)->src[ENR_API_UPSTREAM].cache_dropped);
    enr_upstream_free(u);
    enr_cache_free(cache);
    clear(&b);
    free(b.recs);
    enr_buf_free(&b.text);
}

static void test_forged(int keyed)
{
    make_file(keyed);
    for (size_t i = 0; i < NFORGED; i++)
        T_CHECK(forge(forged[i].id, forged[i].poster, forged[i].duration), "forged %s",
                forged[i].id);
    enrich_forged(keyed);
}

static void test_forged_without_key(void)
{
    test_forged(0);
}

static void test_forged_with_key(void)
{
    test_forged(1);
}

/* A keyed cache read with another key (a configuration whose secrets
 * changed would have another identity; this is the MAC alone): every
 * record dropped. */
static void test_other_key(void)
{
    static const uint8_t other[ENR_CACHE_KEY_BYTES] = {0x43};
    const char *why;
    enr_cache_val v;
    enr_cache *c;

    make_file(1);
    c = enr_cache_open(path, ENTRIES, BYTES, ident, &why);
    T_CHECK(c != NULL && enr_cache_authenticate(c, other) == 0, "opened under another key");
    T_CHECK(enr_cache_lookup(c, ENR_PROV_YT, HONEST_ID, strlen(HONEST_ID), enr_wall_ms(), 0, &v) ==
                ENR_CACHE_DROPPED,
            "a record of another key is not authentic");
    T_CHECK(enr_cache_drop(c, ENR_PROV_YT, HONEST_ID, strlen(HONEST_ID)) == 0 &&
                enr_cache_lookup(c, ENR_PROV_YT, HONEST_ID, strlen(HONEST_ID), enr_wall_ms(), 0,
                                 &v) == ENR_CACHE_MISS,
            "dropped: a miss from then on");
    enr_cache_free(c);
}

/* The one check, as a provider's reply and the cache's records get it. */
static void test_answer_check(void)
{
    static const struct {
        const char *poster;
        double d;
        int has_d, negative, ok;
    } cases[] = {
        {"https://i.ytimg.com/vi/x/maxresdefault.jpg", 213, 1, 0, 1},
        {"https://i.ytimg.com/vi/x/a.jpg", 0, 1, 0, 1},
        {NULL, 9999999, 1, 0, 1},
        {NULL, 1e7, 1, 0, 0},
        {NULL, -0.0, 1, 0, 0},
        {NULL, -1, 1, 0, 0},
        {NULL, NAN, 1, 0, 0},
        {"http://i.example/a.jpg", 0, 0, 0, 0},
        {"javascript:alert(1)", 0, 0, 0, 0},
        {"https://", 0, 0, 0, 0},
        {"https://i.example/a b.jpg", 0, 0, 0, 0},
        {NULL, 0, 0, 0, 0},
        {NULL, 0, 0, 1, 1},
        {"https://i.example/a.jpg", 0, 0, 1, 0},
    };
    static const char body[] = "{\"items\":[{\"id\":\"a\",\"poster\":\"javascript:alert(1)\","
                               "\"duration\":-1},{\"id\":\"b\",\"poster\":\"https://x.example/p\","
                               "\"duration\":5}]}";
    enr_reply_id ids[2] = {{.id = "a", .id_len = 1}, {.id = "b", .id_len = 1}};
    enr_buf arena = {0};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enr_cache_val v = {0};
        v.poster = cases[i].poster;
        v.poster_len = v.poster ? strlen(v.poster) : 0;
        v.duration = cases[i].d;
        v.has_duration = cases[i].has_d;
        v.negative = cases[i].negative;
        T_CHECK((enr_answer_check(&v) == NULL) == cases[i].ok, "case %zu (%s, %g): %s", i,
                v.poster ? v.poster : "-", v.duration, cases[i].ok ? "served" : "refused");
    }
    T_CHECK(enr_upstream_reply_parse(body, sizeof body - 1, ids, 2, 1, &arena) == 0 &&
                ids[0].state == ENR_REPLY_EMPTY && ids[1].state == ENR_REPLY_FOUND &&
                ids[1].has_poster && ids[1].duration == 5,
            "a provider's reply: the same rules (a: nothing usable, b: found)");
    enr_buf_free(&arena);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/tmp/enr-forge-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(path, sizeof path, "%s/cache", dir);
    test_answer_check();
    test_forged_without_key();
    test_forged_with_key();
    test_other_key();
    unlink(path);
    rmdir(dir);
    T_DONE();
}
