/*
 * cache.c: a bounded LRU hash map for upstream answers (see cache.h).
 *
 * Invariants: every entry is in exactly one bucket chain and in the LRU
 * list (head = most recently used); count <= max_entries and
 * bytes <= max_bytes after every put; bytes is the sum of entry_size()
 * of the live entries.  The bucket array is sized once at creation (a
 * power of two >= max_entries, capped), so a put never rehashes and a
 * request never pays for a resize.  The hash is seeded per process so
 * that ids chosen by a client cannot be aimed at one chain.
 */
#include "upstream/cache.h"
#include "base/hash.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define CACHE_MAX_BUCKETS (1u << 20) /* past this, chains just get longer */

typedef struct centry {
    struct centry *hnext;       /* bucket chain */
    struct centry *prev, *next; /* LRU list */
    uint64_t hash;
    uint64_t expires_ms;
    double duration;
    uint32_t key_len, poster_len;
    uint8_t provider, has_duration, has_poster, negative;
    char data[]; /* key, then poster */
} centry;

struct enr_cache {
    centry **buckets;
    size_t nbuckets; /* power of two */
    centry *head, *tail;
    size_t count, bytes;
    size_t max_entries, max_bytes;
    uint64_t seed;
    uint64_t evictions;
};

static size_t entry_size(size_t key_len, size_t poster_len)
{
    return sizeof(centry) + key_len + poster_len;
}

enr_cache *enr_cache_new(size_t max_entries, size_t max_bytes)
{
    enr_cache *c = calloc(1, sizeof(*c));
    size_t nb = 1;

    if (c == NULL)
        return NULL;
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    while (nb < max_entries && nb < CACHE_MAX_BUCKETS)
        nb <<= 1;
    c->nbuckets = nb;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (c->buckets == NULL) {
        free(c);
        return NULL;
    }
    if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != (ssize_t)sizeof(c->seed)) {
        /* No entropy yet (early boot): a time-based seed still differs
         * per process, which is all the flooding defence needs here. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        c->seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
    }
    return c;
}

static void lru_unlink(enr_cache *c, centry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_head(enr_cache *c, centry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (c->tail == NULL)
        c->tail = e;
}

static void entry_remove(enr_cache *c, centry *e)
{
    centry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(c, e);
    c->count--;
    c->bytes -= entry_size(e->key_len, e->poster_len);
    free(e);
}

void enr_cache_free(enr_cache *c)
{
    centry *e, *next;

    if (c == NULL)
        return;
    for (e = c->head; e; e = next) {
        next = e->next;
        free(e);
    }
    free(c->buckets);
    free(c);
}

static centry *entry_find(enr_cache *c, uint64_t h, int provider, const char *key, size_t len)
{
    for (centry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && e->provider == provider && e->key_len == len &&
            memcmp(e->data, key, len) == 0)
            return e;
    return NULL;
}

int enr_cache_get(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                  enr_cache_val *out)
{
    uint64_t h;
    centry *e;

    if (c->max_entries == 0)
        return 0;
    h = enr_hash_key(c->seed, provider, key, key_len);
    e = entry_find(c, h, provider, key, key_len);
    if (e == NULL)
        return 0;
    if (now_ms >= e->expires_ms) {
        entry_remove(c, e);
        return 0;
    }
    lru_unlink(c, e);
    lru_push_head(c, e);
    out->poster = e->has_poster ? e->data + e->key_len : NULL;
    out->poster_len = e->has_poster ? e->poster_len : 0;
    out->duration = e->duration;
    out->has_duration = e->has_duration;
    out->negative = e->negative;
    return 1;
}

int enr_cache_put(enr_cache *c, int provider, const char *key, size_t key_len,
                  const enr_cache_val *v, uint64_t expires_ms)
{
    size_t plen = v->poster ? v->poster_len : 0;
    size_t need = entry_size(key_len, plen);
    uint64_t h;
    centry *e;

    if (c->max_entries == 0 || need > c->max_bytes || key_len > UINT32_MAX || plen > UINT32_MAX)
        return -1;
    h = enr_hash_key(c->seed, provider, key, key_len);
    e = entry_find(c, h, provider, key, key_len);
    if (e)
        entry_remove(c, e);
    while (c->tail && (c->count >= c->max_entries || c->bytes + need > c->max_bytes)) {
        entry_remove(c, c->tail);
        c->evictions++;
    }
    e = malloc(need);
    if (e == NULL)
        return -1;
    e->hash = h;
    e->expires_ms = expires_ms;
    e->duration = v->has_duration ? v->duration : 0;
    e->key_len = (uint32_t)key_len;
    e->poster_len = (uint32_t)plen;
    e->provider = (uint8_t)provider;
    e->has_duration = v->has_duration ? 1 : 0;
    e->has_poster = v->poster ? 1 : 0;
    e->negative = v->negative ? 1 : 0;
    memcpy(e->data, key, key_len);
    if (plen)
        memcpy(e->data + key_len, v->poster, plen);
    e->hnext = c->buckets[h & (c->nbuckets - 1)];
    c->buckets[h & (c->nbuckets - 1)] = e;
    lru_push_head(c, e);
    c->count++;
    c->bytes += need;
    return 0;
}

size_t enr_cache_entries(const enr_cache *c)
{
    return c->count;
}

size_t enr_cache_bytes(const enr_cache *c)
{
    return c->bytes;
}

uint64_t enr_cache_evictions(const enr_cache *c)
{
    return c->evictions;
}
