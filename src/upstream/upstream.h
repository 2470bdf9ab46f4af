/*
 * upstream.h: the outbound enrichment client of one worker (docs/upstream.md).
 *
 * One long-lived libcurl multi handle per worker (upconn.h); calls of one
 * batch run concurrently under one deadline, and what a batch could not
 * wait for goes on while the worker is idle (enr_upstream_idle); the
 * host's shared cache (cache.h) and a per-worker circuit breaker sit in
 * front.  It counts into its own enr_upstream_stats; the caller (the
 * worker) publishes them.  Of the scoreboard it knows only the provider's
 * quota, which every worker shares (quota.h).
 */
#ifndef ENR_UPSTREAM_H
#define ENR_UPSTREAM_H

#include <stdint.h>

#include "base/config.h"
#include "upstream/cache.h"
#include "upstream/upstream_stats.h"
#include "base/storestats.h"
#include "base/scoreboard.h"
#include "engine/engine.h"

typedef struct enr_upstream enr_upstream;

/* NULL when c->upstream_url is empty (enrichment off) or on failure;
 * failure is reported through err (non-empty).  cache is the host's
 * (made by the master before forking), borrowed: it outlives the client;
 * NULL means no cache. */
enr_upstream *enr_upstream_new(const enr_config *c, enr_cache *cache, char *err, size_t errlen);

/* The provider's pause and the rate limit go through shared (the
 * scoreboard's, made before the first fork) instead of the client's own
 * state, so they hold for every worker of the host (quota.h). */
void enr_upstream_share_quota(enr_upstream *u, enr_sb_quota shared[ENR_UP_SOURCES]);

/* The client's counters (valid until enr_upstream_free). */
const enr_upstream_stats *enr_upstream_stats_of(const enr_upstream *u);
/* Its shared store's (storestats.h); NULL when it has none. */
const enr_store_stats *enr_upstream_store_stats(const enr_upstream *u);
void enr_upstream_free(enr_upstream *u);

/* Enrich b in place: sets poster overrides (in b->text) and durations of
 * records whose local duration is 0.  Never blocks past deadline_ms
 * (CLOCK_MONOTONIC, ms).  Returns the number of records that kept their
 * local values for any reason (X-Enrich-Degraded). */
size_t enr_upstream_enrich(enr_upstream *u, enr_batch *b, uint64_t deadline_ms);

/* Between requests: runs what is ready of the transfers that outlived
 * their batches and the connection warm-ups, starts the warm-ups due.
 * Returns the longest the caller may wait before calling again, unless
 * enr_upstream_fd() turns readable first (-1: no bound). */
int enr_upstream_idle(enr_upstream *u);

/* Before the worker says it is ready: makes the APIs' warm connections
 * and waits for them, at most ENR_UPSTREAM_WARM_WAIT_MS (an API down
 * delays a start by that much, never by a connect time-out), so a new
 * worker's first batch (after a start, a reload, a recycle) finds them. */
#define ENR_UPSTREAM_WARM_WAIT_MS 1000u
void enr_upstream_warm(enr_upstream *u);

/* The pool is stopping (a drain): the day's units the host holds of the
 * fleet's quota given back (store_lease.h), in a bounded wait.  No-op
 * without a shared store. */
void enr_upstream_stop(enr_upstream *u);

/* Readable when enr_upstream_idle() has work. */
int enr_upstream_fd(const enr_upstream *u);

/* Descriptors the client holds now (for recycling and leak attribution). */
unsigned enr_upstream_fds(const enr_upstream *u);

#endif
