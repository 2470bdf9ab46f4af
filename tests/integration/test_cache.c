/*
 * test_cache.c: hits, misses, TTLs, negative entries, both bounds, oldest
 * first out; then the cache as the host shares it: processes forked after
 * it was made see each other's entries, and writers SIGKILLed at random
 * in the middle of their puts never make a reader see a torn entry, nor
 * leave the lock held; one stopped holding the lock delays no lookup.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static void test_basics(void)
{
    enr_cache *c = enr_cache_new(4, 1 << 20);
    enr_cache_val v;

    T_CHECK(c != NULL, "new");
    T_CHECK(get(c, 1, "abc", 0, &v) == 0, "empty cache misses");
    T_CHECK(put(c, 1, "AbC", "https://p/1.jpg", 213, 0, 1000) == 0, "put");
    T_CHECK(get(c, 1, "AbC", 999, &v) == 1, "hit before expiry");
    T_CHECK(v.poster_len == 15 && memcmp(v.poster, "https://p/1.jpg", 15) == 0, "poster back");
    T_CHECK(v.has_duration && v.duration == 213 && !v.negative, "duration back");
    T_CHECK(get(c, 1, "abc", 0, &v) == 0, "key is case-sensitive");
    T_CHECK(get(c, 2, "AbC", 0, &v) == 0, "key includes the provider");
    T_CHECK(get(c, 1, "AbC", 1000, &v) == 0, "expired at its deadline");
    T_CHECK(enr_cache_entries(c) == 1, "an expired entry waits for a writer to reclaim it");

    T_CHECK(put(c, 1, "gone", NULL, -1, 1, 300) == 0, "negative put");
    T_CHECK(get(c, 1, "gone", 299, &v) == 1 && v.negative && v.poster == NULL && !v.has_duration,
            "negative hit");
    T_CHECK(put(c, 1, "gone", "https://p/2.jpg", -1, 0, 5000) == 0, "replace");
    T_CHECK(get(c, 1, "gone", 400, &v) == 1 && !v.negative && v.poster_len == 15 && !v.has_duration,
            "replaced value, poster without duration");
    T_CHECK(enr_cache_entries(c) == 2, "replace does not duplicate: %zu", enr_cache_entries(c));

    /* entry bound, oldest first out: AbC, gone, a, b -> e evicts AbC, f evicts gone */
    put(c, 1, "a", NULL, 1, 0, 10000);
    put(c, 1, "b", NULL, 2, 0, 10000);
    T_CHECK(enr_cache_entries(c) == 4, "4 entries");
    put(c, 1, "e", NULL, 5, 0, 10000);
    T_CHECK(enr_cache_entries(c) == 4, "entry bound held: %zu", enr_cache_entries(c));
    T_CHECK(get(c, 1, "AbC", 1, &v) == 0, "the oldest (AbC) evicted");
    T_CHECK(get(c, 1, "gone", 1, &v) == 1, "the next oldest kept");
    put(c, 1, "f", NULL, 6, 0, 10000);
    T_CHECK(get(c, 1, "gone", 1, &v) == 0 && get(c, 1, "a", 1, &v) == 1 && v.duration == 1,
            "then gone, a kept");
    T_CHECK(enr_cache_evictions(c) == 2, "evictions counted: %lu",
            (unsigned long)enr_cache_evictions(c));
    enr_cache_free(c);
}

static void test_bytes(void)
{
    char poster[1001], id[32];
    size_t maxb = ENR_CACHE_MIN_BYTES;
    enr_cache_stats st;
    enr_cache_val v;
    enr_cache *c;
    int ok = 1;

    memset(poster, 'p', 1000);
    poster[1000] = '\0';
    c = enr_cache_new(1000, 5000); /* raised to the minimum */
    enr_cache_stats_of(c, &st);
    T_CHECK(st.max_bytes == maxb, "a small cache_bytes is raised to %zu: %lu", maxb,
            (unsigned long)st.max_bytes);
    for (int i = 0; i < 500; i++) {
        snprintf(id, sizeof(id), "id%d", i);
        if (put(c, 3, id, poster, i, 0, 100) != 0 || enr_cache_bytes(c) > maxb)
            ok = 0;
    }
    enr_cache_stats_of(c, &st);
    T_CHECK(ok, "every put stored, bytes within %zu", maxb);
    T_CHECK(st.entries >= 10 && st.entries < 64 && st.evictions >= 400,
            "the byte bound limits entries: %lu, evictions %lu", (unsigned long)st.entries,
            (unsigned long)st.evictions);
    T_CHECK(get(c, 3, "id499", 1, &v) == 1 && v.poster_len == 1000 && v.duration == 499 &&
                get(c, 3, "id0", 1, &v) == 0,
            "newest kept, oldest gone");
    {
        char big[ENR_CACHE_RECORD_MAX];
        enr_cache_val bv = {0};
        memset(big, 'x', sizeof(big));
        bv.poster = big;
        bv.poster_len = sizeof(big);
        T_CHECK(enr_cache_put(c, 3, "big", 3, &bv, 100) == -1,
                "larger than a record may be: not stored");
        T_CHECK(get(c, 3, "id499", 1, &v) == 1, "an oversized put evicts nothing");
    }
    enr_cache_free(c);
}

static void test_disabled(void)
{
    enr_cache *c = enr_cache_new(0, 1 << 20);
    enr_cache_val v;

    T_CHECK(c != NULL && put(c, 1, "x", NULL, 1, 0, 100) == -1 && get(c, 1, "x", 0, &v) == 0,
            "0 entries: disabled");
    enr_cache_free(c);
    c = enr_cache_new(100, 0);
    T_CHECK(c != NULL && put(c, 1, "x", NULL, 1, 0, 100) == -1, "0 bytes: disabled");
    enr_cache_free(c);
    T_CHECK(enr_cache_put(NULL, 1, "x", 1, &v, 1) == -1 &&
                enr_cache_get(NULL, 1, "x", 1, 0, &v) == 0 && enr_cache_entries(NULL) == 0,
            "no cache: misses");
}

/* Churn: ring wrapped many times, buckets full, the bounds hold. */
static void test_churn(void)
{
    enr_cache *c = enr_cache_new(1000, 1 << 20);
    enr_cache_val v;
    char id[32];
    int ok = 1, bad = 0, found = 0;

    for (int i = 0; i < 20000; i++) {
        snprintf(id, sizeof(id), "k%d", i);
        put(c, 1 + i % 3, id, "https://p/x.jpg", i, 0, 1000000);
        if (enr_cache_entries(c) > 1000)
            ok = 0;
    }
    T_CHECK(ok && enr_cache_entries(c) <= 1000 && enr_cache_entries(c) >= 900,
            "bounded under churn: %zu", enr_cache_entries(c));
    for (int i = 0; i < 20000; i++) {
        snprintf(id, sizeof(id), "k%d", i);
        if (get(c, 1 + i % 3, id, 1, &v) == 1) {
            found++;
            bad += v.duration != i || v.poster_len != 15;
        } else if (i >= 19900) {
            bad++; /* the newest 100 cannot have been pushed out */
        }
    }
    T_CHECK(bad == 0, "every hit has its own value, the newest are there: %d bad", bad);
    T_CHECK((size_t)found == enr_cache_entries(c), "entries counts what a reader finds: %d vs %zu",
            found, enr_cache_entries(c));
    enr_cache_free(c);
}

/* ---- shared across processes, writers killed mid-put ---- */

#define KEYS 3000
#define WRITERS 3

/* What key k must read back as: a poster of a length of its own, its
 * number as the duration, or unknown; any mix of two puts shows. */
static void value_of(int k, char *poster, size_t cap, enr_cache_val *v)
{
    int n = snprintf(poster, cap, "https://p/%d/", k), len = 10 + (k * 37) % 700;

    for (; n < len && n < (int)cap - 1; n++)
        poster[n] = (char)('a' + (k + n) % 26);
    poster[n] = '\0';
    memset(v, 0, sizeof *v);
    v->negative = k % 11 == 0;
    if (!v->negative) {
        v->poster = poster;
        v->poster_len = (size_t)n;
        v->duration = k;
        v->has_duration = 1;
    }
}

/* 0 when the hit is exactly key k's value. */
static int check_hit(int k, const enr_cache_val *got)
{
    char want[1024];
    enr_cache_val w;

    value_of(k, want, sizeof want, &w);
    if (got->negative != w.negative || got->has_duration != w.has_duration ||
        got->duration != w.duration || got->poster_len != w.poster_len ||
        (got->poster == NULL) != (w.poster == NULL))
        return 1;
    return w.poster && memcmp(got->poster, w.poster, w.poster_len) != 0;
}

static void key_of(int k, char *id, size_t cap)
{
    snprintf(id, cap, "Key-%d", k);
}

static void writer(enr_cache *c, unsigned seed)
{
    char poster[1024], id[32];
    enr_cache_val v;

    srandom(seed);
    for (;;) {
        int k = (int)(random() % KEYS);
        key_of(k, id, sizeof id);
        value_of(k, poster, sizeof poster, &v);
        enr_cache_put(c, 1 + k % 3, id, strlen(id), &v, UINT64_MAX);
    }
}

/* Reads for ms, then writes "hits bad" to fd. */
static void reader(enr_cache *c, int fd, unsigned ms)
{
    struct timespec t0, t;
    unsigned long hits = 0, bad = 0;
    char id[32], out[64];
    enr_cache_val v;
    int n;

    srandom((unsigned)getpid());
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000; i++) {
            int k = (int)(random() % KEYS);
            key_of(k, id, sizeof id);
            if (enr_cache_get(c, 1 + k % 3, id, strlen(id), 1, &v) == 1) {
                hits++;
                bad += check_hit(k, &v) != 0;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < (long)ms);
    n = snprintf(out, sizeof out, "%lu %lu\n", hits, bad);
    if (write(fd, out, (size_t)n) != n)
        _exit(2);
    _exit(0);
}

static pid_t spawn_writer(enr_cache *c, unsigned seed)
{
    pid_t p = fork();

    if (p == 0)
        writer(c, seed);
    return p;
}

static void test_shared_kill(void)
{
    /* small: the ring wraps and evicts all the time while writers die */
    enr_cache *c = enr_cache_new(2000, 256 << 10);
    pid_t w[WRITERS], rd;
    int pfd[2], kills = 0, bad = 0, hits = 0;
    unsigned long rhits = 0, rbad = 0;
    enr_cache_stats st;
    struct timespec pause = {0, 0};
    char buf[64] = "";
    enr_cache_val v;

    T_CHECK(c != NULL && pipe(pfd) == 0, "setup");
    {
        /* forked after the cache was made: a child's put is the parent's hit */
        pid_t p = fork();
        if (p == 0) {
            char poster[1024];
            value_of(7, poster, sizeof poster, &v);
            _exit(enr_cache_put(c, 2, "Key-7", 5, &v, UINT64_MAX) == 0 ? 0 : 1);
        }
        waitpid(p, NULL, 0);
        T_CHECK(enr_cache_get(c, 2, "Key-7", 5, 1, &v) == 1 && check_hit(7, &v) == 0,
                "a child's put is a hit in its parent");
    }
    for (int i = 0; i < WRITERS; i++)
        w[i] = spawn_writer(c, (unsigned)i + 1);
    rd = fork();
    if (rd == 0) {
        close(pfd[0]);
        reader(c, pfd[1], 1500);
    }
    close(pfd[1]);
    srandom(42);
    /* ~1.4 s of SIGKILLs at random moments, each writer replaced at once */
    for (int i = 0; i < 400; i++) {
        int j = (int)(random() % WRITERS);
        pause.tv_nsec = 500000 + random() % 3000000; /* 0.5 to 3.5 ms */
        nanosleep(&pause, NULL);
        kill(w[j], SIGKILL);
        waitpid(w[j], NULL, 0);
        kills++;
        w[j] = spawn_writer(c, (unsigned)(100 + i));
    }
    for (int i = 0; i < WRITERS; i++) {
        kill(w[i], SIGKILL);
        waitpid(w[i], NULL, 0);
    }
    {
        ssize_t n = read(pfd[0], buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = '\0';
    }
    waitpid(rd, NULL, 0);
    close(pfd[0]);
    T_CHECK(sscanf(buf, "%lu %lu", &rhits, &rbad) == 2, "reader reported: '%s'", buf);
    T_CHECK(rhits > 1000, "the concurrent reader had hits: %lu", rhits);
    T_CHECK(rbad == 0, "no torn entry read while writers died: %lu of %lu", rbad, rhits);

    /* After the storm: the last writer killed may still hold the lock
     * (robust: the next put repairs); every entry found is whole. */
    for (int k = 0; k < KEYS; k++) {
        char id[32];
        key_of(k, id, sizeof id);
        if (enr_cache_get(c, 1 + k % 3, id, strlen(id), 1, &v) == 1) {
            hits++;
            bad += check_hit(k, &v) != 0;
        }
    }
    T_CHECK(bad == 0 && hits > 0, "after %d kills: %d hits, %d torn", kills, hits, bad);
    {
        char poster[1024];
        int ok = 1;
        for (int k = 0; k < 50; k++) {
            char id[32];
            key_of(k, id, sizeof id);
            value_of(k, poster, sizeof poster, &v);
            ok &= enr_cache_put(c, 1 + k % 3, id, strlen(id), &v, UINT64_MAX) == 0;
            ok &= enr_cache_get(c, 1 + k % 3, id, strlen(id), 1, &v) == 1 && check_hit(k, &v) == 0;
        }
        T_CHECK(ok, "puts work after the kills: no lock left held");
    }
    enr_cache_stats_of(c, &st);
    T_CHECK(st.recoveries >= 1, "some writers died holding the lock and were repaired after: %lu",
            (unsigned long)st.recoveries);
    T_CHECK(st.entries <= st.max_entries && st.bytes <= st.max_bytes,
            "bounds held: %lu/%lu entries, %lu/%lu bytes", (unsigned long)st.entries,
            (unsigned long)st.max_entries, (unsigned long)st.bytes, (unsigned long)st.max_bytes);
    printf(
        "shared cache: %d kills, %lu recoveries, %lu busy puts, reader %lu hits, %lu evictions\n",
        kills, (unsigned long)st.recoveries, (unsigned long)st.busy, rhits,
        (unsigned long)st.evictions);
    enr_cache_free(c);
}

static long mono_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A writer stopped while it holds the lock (SIGSTOP until a put of ours
 * times out): lookups go on, puts give up after ENR_CACHE_LOCK_MS; then
 * SIGKILLed there, the next put repairs what it left and stores. */
static void test_stopped_holder(void)
{
    enr_cache *c = enr_cache_new(2000, 256 << 10);
    char poster[1024];
    enr_cache_stats st0, st1;
    enr_cache_val v, got;
    long dt = -1;
    int caught = 0, tries = 0, status, hit = 0;
    pid_t w;

    T_CHECK(c != NULL, "setup");
    w = spawn_writer(c, 9);
    /* The lookups below must have something to find: wait (bounded) until
     * the writer has stored, however late a loaded machine runs it. */
    for (long until = mono_ms() + 10000; mono_ms() < until;) {
        struct timespec d = {0, 1000000};
        enr_cache_stats_of(c, &st0);
        if (st0.entries > 0)
            break;
        nanosleep(&d, NULL);
    }
    T_CHECK(st0.entries > 0, "the writer stores");
    srandom(9);
    while (!caught && tries++ < 2000) {
        struct timespec d = {0, 100000 + random() % 400000};
        long t0;
        nanosleep(&d, NULL);
        kill(w, SIGSTOP);
        waitpid(w, &status, WUNTRACED);
        t0 = mono_ms();
        value_of(2, poster, sizeof poster, &v);
        if (enr_cache_put(c, 1, "Parent-2", 8, &v, UINT64_MAX) == -1) {
            dt = mono_ms() - t0;
            caught = 1;
            break;
        }
        kill(w, SIGCONT);
    }
    T_CHECK(caught, "caught the writer holding the lock (%d tries)", tries);
    T_CHECK(dt >= ENR_CACHE_LOCK_MS - 1 && dt < 20 * ENR_CACHE_LOCK_MS,
            "a put waits %d ms for a stopped holder, then gives up: %ld ms", ENR_CACHE_LOCK_MS, dt);
    {
        long t0 = mono_ms();
        int bad = 0;
        for (int k = 0; k < KEYS; k++) {
            char id[32];
            key_of(k, id, sizeof id);
            if (enr_cache_get(c, 1 + k % 3, id, strlen(id), 1, &got) == 1) {
                hit++;
                bad += check_hit(k, &got) != 0;
            }
        }
        dt = mono_ms() - t0;
        /* How many the writer stored before it was stopped depends on the
         * machine's load; that lookups find them without waiting does not. */
        T_CHECK(hit > 0 && bad == 0 && dt < 100,
                "lookups do not wait for it: %d hits, %d bad, %d lookups in %ld ms", hit, bad, KEYS,
                dt);
    }
    enr_cache_stats_of(c, &st0);
    kill(w, SIGKILL);
    waitpid(w, &status, 0);
    value_of(2, poster, sizeof poster, &v);
    T_CHECK(enr_cache_put(c, 1, "Parent-2", 8, &v, UINT64_MAX) == 0 &&
                enr_cache_get(c, 1, "Parent-2", 8, 1, &got) == 1 && check_hit(2, &got) == 0,
            "killed holding the lock: the next put stores");
    enr_cache_stats_of(c, &st1);
    T_CHECK(st0.busy >= 1 && st1.recoveries == st0.recoveries + 1,
            "counted: busy %lu, recoveries %lu -> %lu", (unsigned long)st0.busy,
            (unsigned long)st0.recoveries, (unsigned long)st1.recoveries);
    enr_cache_free(c);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_basics();
    test_bytes();
    test_disabled();
    test_churn();
    test_shared_kill();
    test_stopped_holder();
    T_DONE();
}
