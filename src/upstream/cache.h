/*
 * cache.h: the per-worker cache of upstream answers (docs/upstream.md).
 *
 * Key: provider + the id in its original case (upstream ids are
 * case-sensitive).  Value: what the upstream said about the id -- a
 * poster and/or a duration (each may be absent when the upstream's value
 * was invalid), or "unknown" (a negative entry, kept for a shorter TTL).
 *
 * Bounded in entries and in bytes (entry header + key + poster); the
 * least recently used entry goes first.  Expired entries are dropped
 * when met.  Single-threaded (one per worker process).
 */
#ifndef ENR_CACHE_H
#define ENR_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct enr_cache enr_cache;

typedef struct enr_cache_val {
    const char *poster; /* valid until the next put; NULL when absent */
    size_t poster_len;
    double duration;
    int has_duration;
    int negative; /* the upstream did not know the id */
} enr_cache_val;

/* max_entries 0 disables the cache (every get misses, put stores nothing).
 * NULL only on allocation failure. */
enr_cache *enr_cache_new(size_t max_entries, size_t max_bytes);
void enr_cache_free(enr_cache *c);

/* 1 and *out filled on a live hit; 0 on a miss (an expired entry is freed). */
int enr_cache_get(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                  enr_cache_val *out);

/* Insert or replace; evicts LRU entries to stay within both bounds.
 * 0 stored, -1 not stored (larger than the byte bound, or no memory). */
int enr_cache_put(enr_cache *c, int provider, const char *key, size_t key_len,
                  const enr_cache_val *v, uint64_t expires_ms);

size_t enr_cache_entries(const enr_cache *c);
size_t enr_cache_bytes(const enr_cache *c);
uint64_t enr_cache_evictions(const enr_cache *c);

#endif
