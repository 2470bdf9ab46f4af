/*
 * cache_int.h: the cache's header, shared by the two files of the cache
 * and nobody else: cache.c (the table: lookups, puts, eviction, repair)
 * and cache_file.c (the mapping: anonymous, or a file made, checked and
 * opened).  cache.h is the cache's only public face; this header sits
 * below it (the files include both, cache.h first).
 *
 * The header is the first bytes of the mapping, so a cache file holds its
 * own layout: the fields from magic to layout_sum are written once when
 * the file is made and checked whole when it is opened (cache_file.c); the
 * fields after them belong to the running host and are set again at each
 * open.
 */
#ifndef ENR_CACHE_INT_H
#define ENR_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* "enrcache" read as a little-endian integer: a file of another byte
 * order reads as foreign. */
#define ENR_CACHE_MAGIC 0x6568636163726e65ull
/* Bumped whenever the meaning of a byte of the file changes. */
#define ENR_CACHE_VERSION 3u
#define ENR_CACHE_MAX_BUCKETS (1u << 24) /* past this the index is over a gigabyte anyway */

#define ENR_CACHE_ALIGN8(n) (((n) + 7u) & ~(uint64_t)7u)
#define ENR_CACHE_ALIGN64(n) (((n) + 63u) & ~(uint64_t)63u)

/* A record in the ring, then its key, then its poster.  It holds the
 * whole answer and its own checksum, so that a record is taken only as a
 * whole: after a power loss the file may hold any mix of old and new
 * pages, and a record that did not reach the disk whole fails its sum.
 * The sum is keyed by the file's seed, which the file holds: it tells a
 * torn record, not a forged one.  The mac does that when the cache has a
 * key (enr_cache_authenticate: held by the processes, never written in
 * the file): HMAC-SHA256 of the record, sum and mac read as 0, its first
 * 8 bytes. */
typedef struct enr_crec {
    uint32_t len;  /* bytes, this header included, a multiple of 8 */
    uint32_t slot; /* index slot + 1 it was written for; 0: padding to the ring's end */
    uint64_t pos;  /* its absolute position: an older record at the same offset is not it */
    uint64_t hash; /* of provider + key (the host's seed) */
    uint64_t expires_ms;
    double duration;
    uint32_t key_len, poster_len;
    uint8_t provider, flags, unused_[6];
    uint64_t sum; /* enr_cache_sum of the record, this field read as 0 */
    uint64_t mac; /* 0 in a cache without a key */
} enr_crec;

enum { ENR_CF_POSTER = 1, ENR_CF_DURATION = 2, ENR_CF_NEGATIVE = 4 };

/* An index slot: where a key's record is.  Every field but seq is read
 * under the sequence lock; the answer itself is the record's. */
typedef struct enr_cslot {
    _Atomic uint32_t seq; /* odd while a writer changes the slot */
    uint32_t len;         /* of its record */
    uint32_t key_len;
    uint8_t used, provider, unused_[2];
    uint64_t hash, pos, expires_ms;
} enr_cslot;

struct enr_cache {
    /* the layout: made once, checked at every open */
    uint64_t magic;
    uint32_t version, hdr_size;   /* sizeof(struct enr_cache) */
    uint32_t slot_size, rec_size; /* sizeof(enr_cslot), sizeof(enr_crec) */
    uint32_t ways, unused_;       /* ENR_CACHE_WAYS */
    uint64_t map_bytes;           /* the whole mapping: the file's size */
    uint64_t max_entries, nbuckets, ring_size;
    uint64_t index_off, ring_off;
    uint64_t seed; /* of the hash: per host, chosen when made */
    uint8_t identity[ENR_CACHE_ID_BYTES];
    uint64_t layout_sum; /* enr_cache_sum of the fields above */

    /* the running host's (set again at each open) */
    int disabled;
    int fd;                 /* a file's descriptor, flock'ed; -1: anonymous */
    _Atomic uint32_t dirty; /* opened after its writers were gone: repair before a write */
    pthread_mutex_t lock;   /* writers only; robust, process-shared */
    _Atomic uint64_t head, tail;
    _Atomic uint64_t entries, evictions, recoveries, busy;
};

/* The layout of a cache of max_entries and max_bytes (raised to
 * ENR_CACHE_MIN_BYTES), in the layout fields of *c (seed and identity
 * untouched); both 0 when disabled.  The same function makes a cache and
 * checks a file, so a file is taken only with the layout this build would
 * make for this configuration. */
void enr_cache_layout(size_t max_entries, size_t max_bytes, struct enr_cache *c);

/* The checksum of n bytes (a multiple of 8, 8-aligned) under seed. */
uint64_t enr_cache_sum(uint64_t seed, const void *p, size_t n);

/* The header's run-time half made ready: the lock made anew (nobody
 * holds it: the caller knows), the counters of this run at zero, dirty
 * as given.  0, or an errno value. */
int enr_cache_init_run(struct enr_cache *c, int fd, int dirty);

#endif
