/*
 * upcounters.h: the upstream client's counters, per source: ONE table
 * (ENR_UP_COUNTERS) from which every surface is generated: the client's
 * struct (upstream/upstream_stats.h), the scoreboard's fields
 * (scoreboard.h), the worker's publish step, /status (statusdoc.c),
 * /metrics (metrics.c), the HTML page (statushtml.c) and `enrichd
 * status` (statustext.c).  A counter added here appears everywhere;
 * test_metrics.c fails if a surface misses one.  In base/ because the
 * scoreboard, which every layer reads, holds them.
 */
#ifndef ENR_UPCOUNTERS_H
#define ENR_UPCOUNTERS_H

#include <stdint.h>

#include "base/sources.h"
#include "base/upfail.h"

/* The sources a client counts for: enum enr_api_id (api.h) indexes them. */
#define ENR_UP_SOURCES ENR_SOURCE_COUNT

/* The family every failure kind is a sample of (label kind). */
#define ENR_UP_FAIL_METRIC "enrichd_upstream_failures_total"
#define ENR_UP_FAIL_HELP "Failed upstream calls by kind (current workers)."

/* A row of ENR_UP_FAILS (upfail.h) as a row of ENR_UP_COUNTERS. */
#define ENR_UP_FAIL_COUNTER(X, id, field, word, pause, breaker, degraded, ends, pause_s, level,    \
                            said, help)                                                            \
    X(field, ENR_UP_FAIL_METRIC, word, help)

/* X(field, metric, kind, help): every counter is cumulative over the
 * client's life.  kind "": a family of its own named metric, and the
 * JSON key field; else a failure kind, a row of base/upfail.h: the sample
 * {kind="KIND"} of ENR_UP_FAIL_METRIC and the key failures.KIND.  For the upstream
 * source the samples carry no source label (the names dashboards know);
 * the others carry source="youtube", ... */
#define ENR_UP_COUNTERS(X)                                                                         \
    X(calls, "enrichd_upstream_calls_total", "",                                                   \
      "Calls made to the upstream API (current workers).")                                         \
    X(retries, "enrichd_upstream_retries_total", "", "Upstream calls retried (current workers).")  \
    X(cache_hits, "enrichd_upstream_cache_hits_total", "",                                         \
      "Upstream cache hits (current workers).")                                                    \
    X(cache_misses, "enrichd_upstream_cache_misses_total", "",                                     \
      "Upstream cache misses (current workers).")                                                  \
    X(stale, "enrichd_upstream_stale_total", "",                                                   \
      "Records answered from a cache entry past its lifetime: their provider could not be "        \
      "asked or did not answer (current workers).")                                                \
    X(cache_dropped, "enrichd_upstream_cache_dropped_total", "",                                   \
      "Answers read back from the cache that failed the checks a provider's answer passes, or "    \
      "its key: dropped, never served (a forged or damaged record; current workers).")             \
    X(ids_asked, "enrichd_upstream_ids_asked_total", "",                                           \
      "Ids asked for in upstream calls (current workers).")                                        \
    X(found, "enrichd_upstream_ids_found_total", "",                                               \
      "Ids the upstream answered with a poster or a runtime (current workers).")                   \
    X(unknown, "enrichd_upstream_ids_unknown_total", "",                                           \
      "Ids the upstream did not know: absent from its answer (current workers).")                  \
    X(breaker_opens, "enrichd_upstream_breaker_opens_total", "",                                   \
      "Times an upstream breaker opened (current workers).")                                       \
    X(detached, "enrichd_upstream_detached_total", "",                                             \
      "Upstream calls still running at their batch's deadline, left to finish in the "             \
      "background.")                                                                               \
    X(late, "enrichd_upstream_late_total", "",                                                     \
      "Detached upstream calls answered after their batch: the answers cached.")                   \
    X(warmups, "enrichd_upstream_warmups_total", "",                                               \
      "Upstream connections opened ahead of batches (TCP and TLS; upstream: a HEAD).")             \
    X(quota_units, "enrichd_upstream_quota_units_total", "",                                       \
      "Quota units the API sources' calls spent (the provider's count: YouTube 1 a call).")        \
    X(refresh_deferred, "enrichd_upstream_refresh_deferred_total", "",                             \
      "Ids whose stale answer the day's budget did not let a call refresh.")                       \
    ENR_UP_FAILS_WITH(ENR_UP_FAIL_COUNTER, X)

/* The counters of one source. */
typedef struct enr_up_counters {
#define ENR_UP_FIELD(field, metric, kind, help) uint64_t field;
    ENR_UP_COUNTERS(ENR_UP_FIELD)
#undef ENR_UP_FIELD
} enr_up_counters;

/* Rows of the table. */
enum {
#define ENR_UP_ROW(field, metric, kind, help) ENR_UP_ROW_##field,
    ENR_UP_COUNTERS(ENR_UP_ROW)
#undef ENR_UP_ROW
        ENR_UP_NCOUNTERS
};

/* The counter of failure kind (enum enr_up_fail, base/upfail.h) in c,
 * NULL out of range. */
static inline uint64_t *enr_up_fail_counter(enr_up_counters *c, int kind)
{
    switch (kind) {
#define ENR_UP_FAIL_CASE(id, field, word, pause, breaker, degraded, ends, pause_s, level, said,    \
                         help)                                                                     \
    case ENR_UP_F_##id:                                                                            \
        return &c->field;
        ENR_UP_FAILS(ENR_UP_FAIL_CASE)
#undef ENR_UP_FAIL_CASE
    default:
        return NULL;
    }
}

/* The table as data, for the surfaces that loop over it; off is the
 * counter's place in enr_up_counters (and, scaled, in the scoreboard's
 * up[source] rows: the same order). */
typedef struct enr_up_counter_row {
    const char *field, *metric, *kind, *help;
} enr_up_counter_row;
extern const enr_up_counter_row enr_up_counter_rows[ENR_UP_NCOUNTERS];

#endif
