/*
 * cache.h: the host's cache of upstream answers, in shared memory
 * (docs/upstream.md).
 *
 * Made by the master before the first fork (enr_cache_new maps it
 * MAP_SHARED | MAP_ANONYMOUS), inherited by every worker, so an id one
 * worker fetched is a hit for all of them and the cache outlives worker
 * recycling.  Key: provider + the id in its original case (upstream ids
 * are case-sensitive).  Value: what the upstream said about the id -- a
 * poster and/or a duration (each may be absent when the upstream's value
 * was invalid), or "unknown" (a negative entry, kept for a shorter TTL).
 *
 * Bounded in entries and in bytes: cache_bytes is the whole mapping
 * (header, index, data).  Oldest first out when full.  Readers take no
 * lock; writers take a robust process-shared lock for at most
 * ENR_CACHE_LOCK_MS, so a writer killed at any point (SIGKILL in the middle
 * of a put) never leaves a torn entry that a reader could return, nor a
 * lock held.
 */
#ifndef ENR_CACHE_H
#define ENR_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define ENR_CACHE_WAYS 8          /* index slots probed per lookup (one bucket) */
#define ENR_CACHE_LOCK_MS 5       /* a put waits this long for the lock, then is skipped */
#define ENR_CACHE_MIN_BYTES 65536 /* a smaller non-zero cache_bytes is raised to this */
#define ENR_CACHE_RECORD_MAX 8192 /* key + poster + 24; a larger answer is not stored */

typedef struct enr_cache enr_cache;

typedef struct enr_cache_val {
    const char *poster; /* valid until the next get in this process; NULL when absent */
    size_t poster_len;
    double duration;
    int has_duration;
    int negative; /* the upstream did not know the id */
} enr_cache_val;

/* What the status process shows; every field host-wide. */
typedef struct enr_cache_stats {
    uint64_t entries, max_entries; /* live and expired-not-yet-reclaimed entries */
    uint64_t bytes, max_bytes;     /* data held / the whole mapping */
    uint64_t evictions;            /* entries pushed out before their time, for room */
    uint64_t recoveries;           /* writers that died holding the lock, repaired after */
    uint64_t busy;                 /* puts skipped: the lock not had in ENR_CACHE_LOCK_MS */
} enr_cache_stats;

/* max_entries or max_bytes 0 disables the cache (every get misses, put
 * stores nothing).  Call before forking: the children share the mapping.
 * NULL with errno set when it cannot be mapped. */
enr_cache *enr_cache_new(size_t max_entries, size_t max_bytes);
/* Unmaps this process's view (the others keep theirs).  NULL is a no-op. */
void enr_cache_free(enr_cache *c);

/* 1 and *out filled on a live hit; 0 on a miss (also: an expired entry,
 * or one being written right now).  c may be NULL (a miss).  Lock-free. */
int enr_cache_get(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                  enr_cache_val *out);

/* Insert or replace; evicts the oldest entries to stay within both
 * bounds.  0 stored, -1 not stored (disabled or NULL, a record over
 * ENR_CACHE_RECORD_MAX, or the lock busy). */
int enr_cache_put(enr_cache *c, int provider, const char *key, size_t key_len,
                  const enr_cache_val *v, uint64_t expires_ms);

size_t enr_cache_entries(const enr_cache *c);
size_t enr_cache_bytes(const enr_cache *c);
uint64_t enr_cache_evictions(const enr_cache *c);
/* Every counter at once; zeros for NULL. */
void enr_cache_stats_of(const enr_cache *c, enr_cache_stats *st);

#endif
