/*
 * storestats.h: what operators see of the fleet's shared store
 * (upstream/store.h), ONE table (ENR_STORE_STATS) from which every
 * surface is generated: the store client's struct, the scoreboard's
 * fields (scoreboard.h), the worker's publish step and /metrics
 * (metrics.c).  In base/ because the scoreboard holds them.
 *
 * X(field, metric, type, help): a "counter" is cumulative over the
 * slot's workers (published as deltas, summed over the slots); a "gauge"
 * is the live workers' now: summed over them, but rtt_us, their largest.
 */
#ifndef ENR_STORESTATS_H
#define ENR_STORESTATS_H

#include <stdint.h>

#define ENR_STORE_STATS(X)                                                                         \
    X(errors, "enrichd_store_errors_total", "counter",                                             \
      "Shared store connections lost, replies refused and commands the store failed.")             \
    X(timeouts, "enrichd_store_timeouts_total", "counter",                                         \
      "Replies a batch stopped waiting for at shared_store_timeout_ms.")                           \
    X(skipped, "enrichd_store_skipped_total", "counter",                                           \
      "Batches that did not ask the shared store (down, slow, far or backing off), and "           \
      "writes it could not queue.")                                                                \
    X(connects, "enrichd_store_connects_total", "counter",                                         \
      "Connections to the shared store made and logged in.")                                       \
    X(lookups, "enrichd_store_lookups_total", "counter", "Ids asked of the shared store.")         \
    X(hits, "enrichd_store_hits_total", "counter", "Ids the shared store answered.")               \
    X(refused, "enrichd_store_refused_total", "counter",                                           \
      "Values read from the shared store that failed the checks of a provider's answer.")          \
    X(writes, "enrichd_store_writes_total", "counter", "Answers written to the shared store.")     \
    X(lease_takes, "enrichd_store_leases_total", "counter",                                        \
      "Leases of the day's quota taken from the fleet's ledger.")                                  \
    X(lease_units, "enrichd_store_lease_units_total", "counter",                                   \
      "Quota units the fleet's ledger granted this host's leases.")                                \
    X(lease_returned, "enrichd_store_lease_returned_units_total", "counter",                       \
      "Quota units given back to the fleet's ledger when the host stopped.")                       \
    X(up, "enrichd_store_up", "gauge", "Workers connected and logged in to the shared store.")     \
    X(rtt_us, "enrichd_store_rtt_seconds", "gauge",                                                \
      "The shared store's round trip, the least of the last replies (the live workers' "           \
      "largest).")

typedef struct enr_store_stats {
#define ENR_STORE_FIELD(f, metric, type, help) uint64_t f;
    ENR_STORE_STATS(ENR_STORE_FIELD)
#undef ENR_STORE_FIELD
} enr_store_stats;

enum {
#define ENR_STORE_ROW(f, metric, type, help) ENR_STORE_ROW_##f,
    ENR_STORE_STATS(ENR_STORE_ROW)
#undef ENR_STORE_ROW
        ENR_STORE_NSTATS
};

typedef struct enr_store_stat_row {
    const char *field, *metric, *type, *help;
} enr_store_stat_row;
extern const enr_store_stat_row enr_store_stat_rows[ENR_STORE_NSTATS];

#endif
