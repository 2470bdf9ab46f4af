/*
 * test_cache.c: hits, misses, TTLs, negative entries, both bounds, LRU.
 */
#include <stdio.h>
#include <string.h>

#include "upstream/cache.h"
#include "t.h"

static int put(enr_cache *c, int prov, const char *id, const char *poster, double d, int neg,
               uint64_t exp)
{
    enr_cache_val v = {0};

    v.poster = poster;
    v.poster_len = poster ? strlen(poster) : 0;
    v.duration = d;
    v.has_duration = d >= 0;
    v.negative = neg;
    return enr_cache_put(c, prov, id, strlen(id), &v, exp);
}

static int get(enr_cache *c, int prov, const char *id, uint64_t now, enr_cache_val *v)
{
    return enr_cache_get(c, prov, id, strlen(id), now, v);
}

int main(void)
{
    enr_cache *c = enr_cache_new(4, 1 << 20);
    enr_cache_val v;
    char id[32];

    T_CHECK(c != NULL, "new");
    T_CHECK(get(c, 1, "abc", 0, &v) == 0, "empty cache misses");
    T_CHECK(put(c, 1, "AbC", "https://p/1.jpg", 213, 0, 1000) == 0, "put");
    T_CHECK(get(c, 1, "AbC", 999, &v) == 1, "hit before expiry");
    T_CHECK(v.poster_len == 15 && memcmp(v.poster, "https://p/1.jpg", 15) == 0, "poster back");
    T_CHECK(v.has_duration && v.duration == 213 && !v.negative, "duration back");
    T_CHECK(get(c, 1, "abc", 0, &v) == 0, "key is case-sensitive");
    T_CHECK(get(c, 2, "AbC", 0, &v) == 0, "key includes the provider");
    T_CHECK(get(c, 1, "AbC", 1000, &v) == 0, "expired at its deadline");
    T_CHECK(enr_cache_entries(c) == 0 && enr_cache_bytes(c) == 0, "expired entry freed");

    T_CHECK(put(c, 1, "gone", NULL, -1, 1, 300) == 0, "negative put");
    T_CHECK(get(c, 1, "gone", 299, &v) == 1 && v.negative && v.poster == NULL && !v.has_duration,
            "negative hit");
    T_CHECK(put(c, 1, "gone", "https://p/2.jpg", -1, 0, 5000) == 0, "replace");
    T_CHECK(get(c, 1, "gone", 400, &v) == 1 && !v.negative && v.poster_len == 15 && !v.has_duration,
            "replaced value, poster without duration");
    T_CHECK(enr_cache_entries(c) == 1, "replace does not duplicate: %zu", enr_cache_entries(c));

    /* entry bound with LRU: a, b, c, gone -> touch a -> insert e evicts b */
    put(c, 1, "a", NULL, 1, 0, 10000);
    put(c, 1, "b", NULL, 2, 0, 10000);
    put(c, 1, "c", NULL, 3, 0, 10000);
    T_CHECK(enr_cache_entries(c) == 4, "4 entries");
    T_CHECK(get(c, 1, "gone", 1, &v) == 1, "touch gone");
    T_CHECK(get(c, 1, "a", 1, &v) == 1, "touch a");
    put(c, 1, "e", NULL, 5, 0, 10000);
    T_CHECK(enr_cache_entries(c) == 4, "entry bound held: %zu", enr_cache_entries(c));
    T_CHECK(get(c, 1, "b", 1, &v) == 0, "least recently used (b) evicted");
    T_CHECK(get(c, 1, "a", 1, &v) == 1 && v.duration == 1, "recently used a kept");
    T_CHECK(enr_cache_evictions(c) == 1, "evictions counted");
    enr_cache_free(c);

    /* byte bound */
    {
        char poster[1001];
        size_t maxb = 5000;
        memset(poster, 'p', 1000);
        poster[1000] = '\0';
        c = enr_cache_new(1000, maxb);
        for (int i = 0; i < 50; i++) {
            snprintf(id, sizeof(id), "id%d", i);
            put(c, 3, id, poster, i, 0, 100);
            T_CHECK(enr_cache_bytes(c) <= maxb, "bytes %zu within %zu", enr_cache_bytes(c), maxb);
        }
        T_CHECK(enr_cache_entries(c) >= 3 && enr_cache_entries(c) <= 4,
                "byte bound limits entries: %zu", enr_cache_entries(c));
        T_CHECK(get(c, 3, "id49", 1, &v) == 1 && get(c, 3, "id0", 1, &v) == 0,
                "newest kept, oldest gone");
        memset(poster, 'q', 1000);
        {
            char big[6000];
            enr_cache_val bv = {0};
            memset(big, 'x', sizeof(big));
            bv.poster = big;
            bv.poster_len = sizeof(big);
            T_CHECK(enr_cache_put(c, 3, "big", 3, &bv, 100) == -1,
                    "larger than the bound: not stored");
            T_CHECK(get(c, 3, "id49", 1, &v) == 1, "an oversized put evicts nothing");
        }
        enr_cache_free(c);
    }

    /* disabled */
    c = enr_cache_new(0, 1 << 20);
    T_CHECK(put(c, 1, "x", NULL, 1, 0, 100) == -1 && get(c, 1, "x", 0, &v) == 0,
            "0 entries: disabled");
    enr_cache_free(c);

    /* many entries: chains and LRU stay consistent under churn */
    c = enr_cache_new(1000, 1 << 20);
    {
        int ok = 1;
        for (int i = 0; i < 20000; i++) {
            snprintf(id, sizeof(id), "k%d", i);
            put(c, 1 + i % 3, id, "https://p/x.jpg", i, 0, 1000000);
            if (enr_cache_entries(c) > 1000)
                ok = 0;
        }
        T_CHECK(ok && enr_cache_entries(c) == 1000, "bounded under churn: %zu",
                enr_cache_entries(c));
        for (int i = 19000; i < 20000; i++) {
            snprintf(id, sizeof(id), "k%d", i);
            if (get(c, 1 + i % 3, id, 1, &v) != 1 || v.duration != i)
                ok = 0;
        }
        T_CHECK(ok, "the last 1000 are all there with their values");
    }
    enr_cache_free(c);
    T_DONE();
}
