/*
 * poolsnap.h: one reading of the pool for every surface.  /status,
 * /metrics, the HTML page, `enrichd status` and the health verdict's
 * readers all show the numbers of one enr_pool_snap, so they cannot
 * disagree on in flight, lost or the queue: each is computed here once.
 *
 * The pool's cumulative counters are ONE table (ENR_POOL_COUNTERS): the
 * snapshot's array, /metrics' families and the tests come from it; the
 * status document places them under php-fpm's names.
 *
 * Invariant: lost never falls for a reader that keeps an enr_pool_seen
 * (a counter seen going down is a reset to Prometheus).
 */
#ifndef ENR_POOLSNAP_H
#define ENR_POOLSNAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/scoreboard.h"
#include "base/sockdiag.h"
#include "base/upcounters.h"
#include "ops/health.h"
#include "upstream/breaker.h"
#include "upstream/cache.h"

/* X(slot field, metric name, help): summed over the slots. */
#define ENR_POOL_COUNTERS(X)                                                                       \
    X(accepted, "enrichd_requests_accepted_total", "Requests a worker accepted.")                  \
    X(completed, "enrichd_requests_completed_total", "Requests answered to the end.")              \
    X(records_in, "enrichd_records_in_total", "Records received in request bodies.")               \
    X(records_out, "enrichd_records_out_total", "Records answered (one NDJSON line each).")        \
    X(records_rejected, "enrichd_records_rejected_total", "Records rejected by the contract.")     \
    X(records_degraded, "enrichd_records_degraded_total",                                          \
      "Records answered with local values after enrichment failed.")                               \
    X(slow_requests, "enrichd_slow_requests_total", "Requests slower than slow_request_ms.")       \
    X(cap_written, "enrichd_capture_written_total",                                                \
      "Sampled batches written to the capture files.")                                             \
    X(cap_dropped_queue, "enrichd_capture_dropped_queue_total",                                    \
      "Sampled batches dropped because the capture queue was full (slow disk).")                   \
    X(cap_dropped_error, "enrichd_capture_dropped_error_total",                                    \
      "Sampled batches dropped on a write error (disk full), a refused directory or file, or "     \
      "out of memory.")                                                                            \
    X(cap_dropped_nodir, "enrichd_capture_dropped_nodir_total",                                    \
      "Sampled batches dropped because capture_dir was gone (removed or replaced).")               \
    X(shed, "enrichd_shed_total",                                                                  \
      "Batches answered 503 with Retry-After, unread, for waiting past queue_timeout_ms.")         \
    X(client_gone, "enrichd_client_gone_total",                                                    \
      "Requests whose caller went away before the answer (499; not in the duration "               \
      "histogram).")                                                                               \
    X(listen_refused, "enrichd_listen_refused_total",                                              \
      "TCP connections refused: peer not in listen_allow.")                                        \
    X(fcgi_rejected, "enrichd_fastcgi_rejected_total",                                             \
      "FastCGI connections closed unserved: malformed, stalled, or a role other than "             \
      "RESPONDER.")

enum {
#define ENR_PC_ROW(field, metric, help) ENR_PC_##field,
    ENR_POOL_COUNTERS(ENR_PC_ROW)
#undef ENR_PC_ROW
        ENR_PC_COUNT
};

typedef struct enr_pool_counter_def {
    const char *metric, *help;
    size_t off; /* in enr_sb_slot */
} enr_pool_counter_def;

extern const enr_pool_counter_def enr_pool_counter_defs[ENR_PC_COUNT];

/* What one reader (the status process) measured and remembers between
 * readings; zeros when it measured nothing. */
typedef struct enr_pool_seen {
    int have_queue; /* listen_queue measured now */
    uint64_t listen_queue, listen_queue_limit;
    uint64_t listen_queue_max; /* deepest this reader measured */
    uint64_t max_active;       /* most busy workers this reader saw */
    uint64_t lost_shown;       /* the most lost this reader has shown */
} enr_pool_seen;

typedef struct enr_pool_snap {
    uint64_t n[ENR_PC_COUNT]; /* the table's counters, summed over slots */
    uint64_t s2xx, s4xx, s5xx, up_fds;
    uint64_t states[ENR_WS_STATES];                       /* live workers by state */
    uint64_t breaker[ENR_UP_SOURCES][ENR_BREAKER_STATES]; /* workers by source and breaker state */
    double hit_ratio[ENR_UP_SOURCES]; /* cache hits over lookups, by source (0: none) */
    uint64_t in_flight, lost;
    uint64_t max_active;   /* the master's sampled maximum or this reader's, the larger */
    int have_queue;        /* listen_queue measured by the reader now */
    uint64_t listen_queue; /* the reader's, else the master's last sample */
    uint64_t listen_queue_limit;
    uint64_t listen_queue_max;
} enr_pool_snap;

/* Reads sb once into out.  seen may be NULL (nothing measured, nothing
 * kept); with it, lost is floored at what this reader showed before and
 * the floor raised. */
void enr_pool_snap_take(enr_pool_snap *out, const enr_scoreboard *sb, enr_pool_seen *seen);

/* What a surface renders: the scoreboard, one snapshot of it and what
 * the status process measured beside it. */
typedef struct enr_status_view {
    const enr_config *c;
    const enr_scoreboard *sb;
    const enr_pool_snap *pool; /* or NULL: the renderer takes one, nothing measured */
    const enr_health *health;  /* the master's verdict (enr_health_read), or NULL */
    const enr_fd_kinds *fds;   /* per slot, or NULL (no ?full) */
    const int *fds_ok;         /* fds[i] valid when fds_ok[i] */
    const enr_cache *cache;    /* the host's upstream cache, or NULL */
} enr_status_view;

#endif
