/*
 * cache.h: the host's cache of upstream answers, in shared memory or in a
 * file (docs/upstream.md).
 *
 * Made by the master before the first fork (enr_cache_new maps anonymous
 * memory, enr_cache_open a file: cache_file), inherited by every worker,
 * so an id one worker fetched is a hit for all of them and the cache
 * outlives worker recycling; a file's outlives the master, restarts,
 * upgrades and reboots.  The file is the cache's only copy: no load, no
 * dump.  Key: provider + the id in its original case (upstream ids
 * are case-sensitive).  Value: what the upstream said about the id -- a
 * poster and/or a duration (each may be absent when the upstream's value
 * was invalid), or "unknown" (a negative entry, kept for a shorter TTL).
 * An entry past its lifetime is kept until its room is needed, and a
 * lookup may ask for it (stale-if-error: enr_cache_lookup).
 *
 * Bounded in entries and in bytes: cache_bytes is the whole mapping
 * (header, index, data).  Oldest first out when full.  Readers take no
 * lock; writers take a robust process-shared lock for at most
 * ENR_CACHE_LOCK_MS, so a writer killed at any point (SIGKILL in the middle
 * of a put) never leaves a torn entry that a reader could return, nor a
 * lock held.  Every record carries its own checksum, so a file left by a
 * power loss (any mix of old and new pages) yields entries or misses,
 * never a torn answer.
 */
#ifndef ENR_CACHE_H
#define ENR_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define ENR_CACHE_WAYS 8            /* index slots probed per lookup (one bucket) */
#define ENR_CACHE_LOCK_MS 5         /* a put waits this long for the lock, then is skipped */
#define ENR_CACHE_MIN_BYTES 65536   /* a smaller non-zero cache_bytes is raised to this */
#define ENR_CACHE_RECORD_MAX 8192   /* key + poster + 64; a larger answer is not stored */
#define ENR_CACHE_ID_BYTES 32       /* the identity a file is made for (SHA-256) */
#define ENR_CACHE_OPEN_WAIT_MS 2000 /* a file still held by a dead master's children */
#define ENR_CACHE_KEY_BYTES 32      /* the key a file's records are authenticated with */
#define ENR_CACHE_MAX_KEYED 4       /* keyed caches one process maps (two at a reload) */

typedef struct enr_cache enr_cache;

typedef struct enr_cache_val {
    const char *poster; /* valid until the next get in this process; NULL when absent */
    size_t poster_len;
    double duration;
    int has_duration;
    int negative;        /* the upstream did not know the id */
    uint64_t expires_ms; /* lookups: its lifetime's end (the put's expires_ms) */
} enr_cache_val;

/* What a lookup found.  DROPPED: a whole record for the key whose
 * authentication failed (a keyed cache: written without the key), never
 * served; the caller counts it and drops it (enr_cache_drop). */
enum { ENR_CACHE_MISS = 0, ENR_CACHE_FRESH = 1, ENR_CACHE_STALE = 2, ENR_CACHE_DROPPED = 3 };

/* What the status process shows, every field host-wide: one row each
 * (field and status name, metric, type, help); the struct, /status and
 * /metrics come from this table. */
#define ENR_CACHE_STATS(X)                                                                         \
    X(entries, "enrichd_upstream_cache_entries", "gauge",                                          \
      "Entries in the host's upstream cache, shared by every worker.")                             \
    X(max_entries, "enrichd_upstream_cache_max_entries", "gauge",                                  \
      "Entries the host's upstream cache can hold.")                                               \
    X(bytes, "enrichd_upstream_cache_bytes", "gauge",                                              \
      "Bytes of answers the host's upstream cache holds.")                                         \
    X(max_bytes, "enrichd_upstream_cache_size_bytes", "gauge",                                     \
      "Size of the host's upstream cache in shared memory (cache_bytes).")                         \
    X(persistent, "enrichd_upstream_cache_persistent", "gauge",                                    \
      "1 when the host's upstream cache is a file (cache_file) that outlives restarts.")           \
    X(evictions, "enrichd_upstream_cache_evictions_total", "counter",                              \
      "Cache entries pushed out for room before they expired or were replaced.")                   \
    X(recoveries, "enrichd_upstream_cache_recoveries_total", "counter",                            \
      "Writers that died holding the cache lock, their half-done work undone by the next.")        \
    X(busy, "enrichd_upstream_cache_busy_total", "counter",                                        \
      "Answers not cached because the cache lock was held too long by another writer.")

typedef struct enr_cache_stats {
#define ENR_CS_FIELD(f, metric, type, help) uint64_t f;
    ENR_CACHE_STATS(ENR_CS_FIELD)
#undef ENR_CS_FIELD
} enr_cache_stats;

/* max_entries or max_bytes 0 disables the cache (every get misses, put
 * stores nothing).  Call before forking: the children share the mapping.
 * NULL with errno set when it cannot be mapped. */
enr_cache *enr_cache_new(size_t max_entries, size_t max_bytes);
/* The same in the file at path (cache_file.c): opened when it holds a
 * cache of this build's layout for these bounds and this identity (the
 * caller's digest of what changes an answer), else replaced by an empty
 * one, made whole before it takes the path (a crash while making it
 * leaves the old file or the new one).  *why says what was done: NULL
 * opened as it was; else a refusal ("zeroed", "foreign magic", ...) or
 * "created" (or "replaced: ..." when this process held it: a reload's new
 * cache).  NULL with errno set and *why the failing step when no file
 * can be had: EPERM, a file that is not enrichd's to use, and EBUSY, one
 * another daemon holds (base/statefile.h), both logged naming the file;
 * the caller refuses to start on those two. */
enr_cache *enr_cache_open(const char *path, size_t max_entries, size_t max_bytes,
                          const uint8_t identity[ENR_CACHE_ID_BYTES], const char **why);
/* From now on every record c's processes write carries a MAC under key
 * (the caller's, derived from secrets kept outside the state directory),
 * and a record read back without the right one is ENR_CACHE_DROPPED.  The
 * key is kept in this process's memory (inherited by the children forked
 * after), never in the mapping.  Call right after enr_cache_open, before
 * any put.  0, or -1 (ENR_CACHE_MAX_KEYED reached: errno ENOSPC). */
int enr_cache_authenticate(enr_cache *c, const uint8_t key[ENR_CACHE_KEY_BYTES]);

/* Unmaps this process's view (the others keep theirs) and closes its
 * file.  NULL is a no-op. */
void enr_cache_free(enr_cache *c);

/* ENR_CACHE_FRESH and *out filled on a live hit; ENR_CACHE_STALE and
 * *out filled on an entry past its lifetime by less than max_stale_ms;
 * ENR_CACHE_MISS otherwise (also: one being written right now).  c may
 * be NULL (a miss).  Lock-free.  now_ms and every expiry are wall-clock
 * time: a file outlives the boot. */
int enr_cache_lookup(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                     uint64_t max_stale_ms, enr_cache_val *out);
/* A live hit only: enr_cache_lookup with no stale answer wanted; 1 or 0. */
int enr_cache_get(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                  enr_cache_val *out);

/* Insert or replace; evicts the oldest entries to stay within both
 * bounds.  0 stored, -1 not stored (disabled or NULL, a record over
 * ENR_CACHE_RECORD_MAX, or the lock busy). */
int enr_cache_put(enr_cache *c, int provider, const char *key, size_t key_len,
                  const enr_cache_val *v, uint64_t expires_ms);

/* The entry of provider + key removed (an answer read back that failed
 * its checks: answer.h), so that it is dropped once and the next answer
 * takes its place.  0 removed, -1 none (or the lock busy). */
int enr_cache_drop(enr_cache *c, int provider, const char *key, size_t key_len);

size_t enr_cache_entries(const enr_cache *c);
size_t enr_cache_bytes(const enr_cache *c);
uint64_t enr_cache_evictions(const enr_cache *c);
/* Every counter at once; zeros for NULL. */
void enr_cache_stats_of(const enr_cache *c, enr_cache_stats *st);

#endif
