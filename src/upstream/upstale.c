/*
 * upstale.c: the client's side of the host's cache (cache.h): a record's
 * lookup, its answer stored with its source's lifetime, and the stale
 * answer of a record its provider could not answer (docs/upstream.md,
 * "Stale answers").
 *
 * Stale-if-error (RFC 5861): an entry past its lifetime is asked again
 * like a miss, and its record takes the fresh answer when one comes; when
 * none comes (breaker open, the provider's pause or quota, a budget
 * spent, the call failed or missed the deadline, a cap on calls) the
 * record takes the kept answer instead of its local values, if the entry
 * ended its lifetime less than cache_max_stale_s ago.  Counted apart
 * (stale), never as a hit nor as degraded.  The lookup is made again at
 * that moment: another worker may have stored a fresh answer meanwhile.
 *
 * What is read back is held to what a provider's answer is held to
 * (answer.h) before it is served, and a keyed cache's record to its MAC
 * (cache.h): one that fails is dropped from the cache and counted
 * (cache_dropped), and the record is a miss.
 *
 * Times here are wall-clock: a cache file outlives the boot, the
 * monotonic clock does not.  A clock stepped back keeps answers fresh
 * longer by the step; one stepped forward makes them stale sooner (they
 * are asked again): neither serves an answer the provider did not give.
 */
#include "upstream/upstream.h"
#include "upstream/upstream_int.h"

#include "base/clock.h"
#include "upstream/answer.h"

/* The cache's key space: ids of one provider from two sources never
 * mix (the aggregator's answer for an id is not YouTube's); the
 * aggregator's keys are the provider alone, as before the sources: its
 * source is 0. */
_Static_assert(ENR_API_UPSTREAM == 0, "the aggregator's cache keys are the provider alone");

static int cache_key(int provider, int src)
{
    return provider | src << 4;
}

/* A cached answer onto r (its poster copied into the batch's text);
 * *degraded counts it when the text cannot grow. */
static void apply(enr_batch *b, enr_record *r, const enr_cache_val *v, size_t *degraded)
{
    if (v->negative)
        return;
    if (v->poster) {
        size_t off = b->text.len;
        enr_buf_append(&b->text, v->poster, v->poster_len);
        if (b->text.oom) {
            (*degraded)++;
            return;
        }
        r->poster_off = off;
        r->poster_len = v->poster_len;
    }
    if (v->has_duration && r->duration == 0)
        r->duration = v->duration;
}

/* The cache's answer for r, checked (see the top): FRESH, STALE or MISS. */
static int lookup(enr_upstream *u, const enr_batch *b, const enr_record *r, int src,
                  uint64_t wall_ms, enr_cache_val *v)
{
    int key = cache_key(r->provider, src);
    const char *id = b->text.data + r->key_off;
    int found = enr_cache_lookup(u->cache, key, id, r->key_len, wall_ms,
                                 (uint64_t)u->max_stale_s * 1000u, v);

    if (found == ENR_CACHE_MISS || (found != ENR_CACHE_DROPPED && enr_answer_check(v) == NULL))
        return found;
    u->st.src[src].cache_dropped++;
    (void)enr_cache_drop(u->cache, key, id, r->key_len); /* busy: dropped at the next read */
    return ENR_CACHE_MISS;
}

int enr_up_lookup(enr_upstream *u, enr_batch *b, enr_record *r, int src, uint64_t wall_ms,
                  size_t *degraded)
{
    enr_cache_val v;
    int found = lookup(u, b, r, src, wall_ms, &v);

    if (found == ENR_CACHE_FRESH) {
        u->st.src[src].cache_hits++;
        apply(b, r, &v, degraded);
        return found;
    }
    /* a stale entry is a miss: asked again, and kept for the case it cannot be */
    u->st.src[src].cache_misses++;
    return found;
}

size_t enr_up_stale_serve(enr_upstream *u, enr_batch *b, enr_record *r, int src, uint64_t wall_ms)
{
    enr_cache_val v;
    size_t degraded = 0;
    int found = lookup(u, b, r, src, wall_ms, &v);

    if (found == ENR_CACHE_MISS)
        return 1;
    apply(b, r, &v, &degraded);
    if (degraded == 0 && found == ENR_CACHE_STALE)
        u->st.src[src].stale++;
    else if (degraded == 0)
        u->st.src[src].cache_hits++; /* another worker's fresh answer, stored meanwhile */
    return degraded;
}

void enr_up_cache_store(enr_upstream *u, int provider, int src, const char *key, size_t key_len,
                        const enr_cache_val *v, int live)
{
    unsigned ttl_s = v->negative ? u->cache_neg_ttl_s : u->ttl_s[src];
    uint64_t now = enr_wall_ms(), expires;

    /* A live or upcoming broadcast's poster and runtime change when it
     * ends: its answer is asked again soon, never kept longer than its
     * source's answers. */
    if (live && !v->negative && u->cache_live_ttl_s < ttl_s)
        ttl_s = u->cache_live_ttl_s;
    expires = now + (uint64_t)ttl_s * 1000u;
    enr_cache_put(u->cache, cache_key(provider, src), key, key_len, v, expires);
    /* ... and for the fleet (store_cache.h): queued, not waited for. */
    if (u->store != NULL)
        enr_store_cache_put(u->store, u->sbatch, provider, src, key, key_len, v, expires, now);
}

void enr_up_cache_keep(enr_upstream *u, int provider, int src, const char *key, size_t key_len,
                       const enr_cache_val *v)
{
    enr_cache_put(u->cache, cache_key(provider, src), key, key_len, v, v->expires_ms);
}
