/*
 * upstream_stats.h: the upstream client's counters (enr_upstream_stats),
 * apart from upstream.h so that the client's state (upstream_int.h),
 * which holds them, sits below the public header: upstream.c and
 * upstream_setup.c include both, and neither header includes the other.
 */
#ifndef ENR_UPSTREAM_STATS_H
#define ENR_UPSTREAM_STATS_H

#include <stdint.h>

/* What the client did, cumulative over its life; breaker_state and fds
 * are current values. */
typedef struct enr_upstream_stats {
    uint64_t calls, retries, cache_hits, cache_misses;
    uint64_t fail_timeout, fail_connect, fail_status, fail_body, fail_too_large, fail_tls;
    uint64_t skip_deadline; /* calls not made for lack of time */
    uint64_t detached;      /* calls that outlived their batch's deadline */
    uint64_t late;          /* ... and then answered: the answer cached */
    uint64_t warmups;       /* connections opened ahead of batches */
    /* answered 429 (or 503 with Retry-After), or not made: the provider's
     * pause or upstream_max_calls_per_s (once per batch that met it) */
    uint64_t fail_throttled;
    uint64_t breaker_opens;
    int breaker_state; /* enum enr_breaker_state */
    unsigned fds;      /* descriptors held now */
} enr_upstream_stats;

#endif
