/*
 * store_cache.h: the fleet's cache of answers in the shared store
 * (store.h, docs/fleet.md): the second layer, after the host's cache
 * (cache.h) and before the APIs.
 *
 * A key is the prefix, "c:", the source's and the provider's names and
 * the id as it is (ids are case-sensitive): "enrichd:c:youtube:yt:AbC".
 * No secret is in it.  A value is one line of text, at most
 * ENR_STORE_VALUE_MAX bytes:
 *
 *   E1 EXPIRES N                  the provider does not know the id
 *   E1 EXPIRES F DURATION POSTER  DURATION or POSTER "-" when absent
 *
 * EXPIRES is the answer's lifetime's end (Unix ms), so every host keeps
 * it in its own cache for what is left of it, not longer; Redis drops
 * the key at the same moment (SET ... EX).  A value read back is hostile
 * input: it passes the checks of a provider's answer (a poster as
 * enr_reply_poster_ok, a duration as enr_reply_duration_ok) and a
 * lifetime that has not ended and ends within ENR_STORE_TTL_MAX_S, or
 * it is refused (counted) and the id is asked of its API as a miss.
 */
#ifndef ENR_STORE_CACHE_H
#define ENR_STORE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "upstream/cache.h"
#include "upstream/reply_id.h"
#include "upstream/store.h"

#define ENR_STORE_VALUE_MAX (ENR_REPLY_POSTER_MAX + 64) /* one value's bytes */
#define ENR_STORE_ID_MAX 512          /* a longer id is not shared (asked of its API) */
#define ENR_STORE_TTL_MAX_S 31536000u /* the longest lifetime a configuration may give */
#define ENR_STORE_MGET_MAX 4096       /* ids in one MGET; the rest of a batch misses */

/* The pure parts, for the unit tests. */
/* key into out (reset first): 0, or -1 when the id is not shared. */
int enr_store_cache_key(enr_buf *out, const char *prefix, int provider, int src, const char *id,
                        size_t len);
/* v (its lifetime's end expires_ms) as a value; its length, or 0 when it
 * does not fit cap or ENR_STORE_VALUE_MAX. */
size_t enr_store_value_encode(char *out, size_t cap, const enr_cache_val *v, uint64_t expires_ms);
/* A value of n bytes read back, at wall-clock now_ms: 0 and *v (its
 * poster pointing into s) when it passes every check, else -1. */
int enr_store_value_decode(const char *s, size_t n, uint64_t now_ms, enr_cache_val *v);

/* The bytes an MGET of n keys may be answered with (its reply's cap):
 * n values of at most ENR_STORE_VALUE_MAX bytes and their framing. */
size_t enr_store_mget_cap(size_t n);
/* An MGET's reply r for n keys: fn for each value that passes
 * enr_store_value_decode's checks (k < n), the others counted in
 * st->refused.  The hits (counted in st->hits), or -1 when r is not an
 * array of n. */
struct redisReply;
/* An answer found for the k-th id (poster valid during the call). */
typedef void enr_store_hit_fn(void *ud, size_t k, const enr_cache_val *v);
long enr_store_mget_take(const struct redisReply *r, size_t n, uint64_t now_wall_ms,
                         enr_store_hit_fn *fn, void *ud, enr_store_stats *st);

/* A batch's lookups: one MGET for every id added. */
typedef struct enr_store_batch enr_store_batch;
enr_store_batch *enr_store_batch_new(void);
void enr_store_batch_free(enr_store_batch *sb);
/* Empties it for a new batch. */
void enr_store_batch_reset(enr_store_batch *sb);
/* Adds an id; 0, or -1 (not shared, or the MGET is full). */
int enr_store_batch_add(enr_store_batch *sb, const char *prefix, int provider, int src,
                        const char *id, size_t len);
/* Asks s for every id added, waiting until deadline_ms at most; fn for
 * each value that passes its checks.  The hits, or 0 (not asked:
 * unusable, lost, the deadline). */
size_t enr_store_batch_get(enr_store *s, enr_store_batch *sb, uint64_t now_wall_ms,
                           uint64_t deadline_ms, enr_store_hit_fn *fn, void *ud);
/* An answer, for every host: SET with its lifetime, not waited for. */
void enr_store_cache_put(enr_store *s, enr_store_batch *sb, int provider, int src, const char *id,
                         size_t len, const enr_cache_val *v, uint64_t expires_ms,
                         uint64_t now_wall_ms);

#endif
