/*
 * upstream_stats.h: the upstream client's counters, per source (the
 * table of counters itself is base/upcounters.h, below the scoreboard),
 * apart from upstream.h so that the client's state (upstream_int.h),
 * which holds them, sits below the public header.
 */
#ifndef ENR_UPSTREAM_STATS_H
#define ENR_UPSTREAM_STATS_H

#include <stdint.h>

#include "base/upcounters.h"

/* What the client did: per source, and its gauges. */
typedef struct enr_upstream_stats {
    enr_up_counters src[ENR_UP_SOURCES];
    int breaker_state[ENR_UP_SOURCES]; /* enum enr_breaker_state */
    unsigned fds;                      /* descriptors held now */
} enr_upstream_stats;

#endif
