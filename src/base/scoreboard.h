/*
 * scoreboard.h: the shared-memory page through which workers tell the
 * master and the status process what they are doing.
 *
 * The master maps it (MAP_SHARED | MAP_ANONYMOUS) before the first fork,
 * so every child inherits the same pages.  Ownership is strict:
 *   - a worker slot's "live" fields are written only by the worker that
 *     occupies the slot; its counters are cumulative over every worker
 *     that ever used the slot (never reset), so pool totals are sums;
 *   - the "master" fields of a slot and enr_sb_pool are written only by
 *     the master;
 *   - enr_sb_quota (the provider's pause and rate) is written by every
 *     worker, each update one compare-and-swap, and its pause ended by
 *     the master on HUP (one exchange);
 *   - the status process and the master only read the rest.
 * Every field is a lock-free atomic read and written with relaxed order:
 * readers want a recent value, not a consistent snapshot across fields.
 */
#ifndef ENR_SCOREBOARD_H
#define ENR_SCOREBOARD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/upcounters.h"
#include "base/storestats.h"

#define ENR_SB_MAX_WORKERS 256
#define ENR_SB_REQID_MAX 40
#define ENR_SB_LAT_BUCKETS 14 /* bounds in enr_sb_lat_bounds_ms, last is +Inf */
#define ENR_SB_FCGI_REASONS 6 /* fcgi_rejected_by: one per ENR_FCGI_REJECT_* (fcgi_guard.h) */
/* nginx's "client closed request": the status of a request nobody got an
 * answer to, the caller gone or the answer's write failed. */
#define ENR_SB_STATUS_CLIENT_GONE 499

typedef _Atomic uint64_t enr_sb_u64;
typedef _Atomic int64_t enr_sb_i64;

#define ENR_SB_GET(f) atomic_load_explicit(&(f), memory_order_relaxed)
#define ENR_SB_SET(f, v) atomic_store_explicit(&(f), (v), memory_order_relaxed)
#define ENR_SB_ADD(f, v) atomic_fetch_add_explicit(&(f), (v), memory_order_relaxed)

enum enr_worker_state {
    ENR_WS_EMPTY = 0, /* no process in the slot */
    ENR_WS_STARTING,  /* forked, not yet accepting */
    ENR_WS_IDLE,      /* waiting in accept() */
    ENR_WS_BUSY,      /* serving a request */
    ENR_WS_EXITING,   /* finishing before a graceful exit */
    ENR_WS_STATES
};

/* The pool as a whole; written only by the master into enr_sb_pool.state. */
enum enr_pool_state {
    ENR_POOL_STARTING = 0,
    ENR_POOL_RUNNING,
    ENR_POOL_RELOADING,
    ENR_POOL_DRAINING,
    ENR_POOL_STATES
};

/* Why a worker process ended; indexes enr_sb_pool.exits. */
enum enr_exit_reason {
    ENR_EXIT_NONE = 0,
    ENR_EXIT_MAX_REQUESTS,
    ENR_EXIT_RSS,
    ENR_EXIT_FD,
    ENR_EXIT_TIMEOUT, /* stuck request, killed by the master */
    ENR_EXIT_CRASH,   /* killed by a signal the master did not send */
    ENR_EXIT_RELOAD,
    ENR_EXIT_STOP,
    ENR_EXIT_ERROR,  /* exited non-zero on its own (start-up failure) */
    ENR_EXIT_SIGNAL, /* stopped cleanly on a signal the master did not send */
    ENR_EXIT_REASONS
};

typedef struct enr_sb_slot {
    /* live: written by the worker in the slot */
    enr_sb_i64 pid;
    enr_sb_u64 state;              /* enum enr_worker_state */
    enr_sb_u64 started_ms;         /* worker start, CLOCK_REALTIME ms: display only */
    enr_sb_u64 req_start_ms;       /* request start, CLOCK_REALTIME ms, 0 when idle: display only */
    char req_id[ENR_SB_REQID_MAX]; /* current request id (best effort) */
    enr_sb_u64 served;             /* requests served by the current process */
    enr_sb_u64 write_start_mono_ms; /* writing the answer since (CLOCK_MONOTONIC), 0 if not */

    /* cumulative over the slot's lifetime: written by its workers */
    enr_sb_u64 accepted, completed;
    enr_sb_u64 status_2xx, status_4xx, status_5xx;
    enr_sb_u64 records_in, records_out, records_rejected, records_degraded;
    enr_sb_u64 latency_us_sum;
    enr_sb_u64 latency[ENR_SB_LAT_BUCKETS];
    enr_sb_u64 slow_requests;

    /* upstream client of the slot's workers: its counters per source
     * (enum enr_api_id) and row of ENR_UP_COUNTERS (upcounters.h),
     * cumulative like the others; its breakers and descriptors, live */
    enr_sb_u64 up[ENR_UP_SOURCES][ENR_UP_NCOUNTERS];
    enr_sb_u64 up_breaker_state[ENR_UP_SOURCES]; /* enum enr_breaker_state (breaker.h) */
    enr_sb_u64 up_fds;                           /* descriptors held by the client */
    /* its connection to the fleet's shared store: rows of ENR_STORE_STATS
     * (storestats.h), counters cumulative, gauges live */
    enr_sb_u64 store[ENR_STORE_NSTATS];

    /* capture (capture.h): cumulative */
    enr_sb_u64 cap_written, cap_dropped_queue, cap_dropped_error;
    enr_sb_u64 cap_dropped_nodir; /* capture_dir gone (removed or replaced) */

    /* master: sampled from /proc and kept across processes */
    enr_sb_u64 rss_kb, fds;
    enr_sb_u64 restarts;
    enr_sb_u64 last_exit_reason; /* enum enr_exit_reason */
    enr_sb_i64 last_exit_pid;
    enr_sb_u64 last_exit_req_age_ms; /* age of the request it was serving, 0 if idle */
    char last_exit_req_id[ENR_SB_REQID_MAX];

    /* live: the CLOCK_MONOTONIC twins of started_ms and req_start_ms.
     * Every age and deadline is computed from these (the clock is
     * system-wide, so the master and the status process can compare a
     * worker's stamp with their own): a step of the wall clock must
     * neither kill a busy worker nor hide a stuck one. */
    enr_sb_u64 started_mono_ms;
    enr_sb_u64 req_start_mono_ms; /* 0 when idle */
    /* cumulative, written by the slot's workers: connections closed
     * before any request was served (per slot, like the other worker
     * counters, so the pool fields stay the master's alone) */
    enr_sb_u64 listen_refused; /* TCP peer not in listen_allow */
    enr_sb_u64 fcgi_rejected;  /* malformed, stalled, or a role we do not serve */
    /* fcgi_rejected by reason (fcgi_guard.h: ENR_FCGI_REJECT_*) */
    enr_sb_u64 fcgi_rejected_by[ENR_SB_FCGI_REASONS];
    /* live: the request's work began (its body read), CLOCK_MONOTONIC;
     * 0 while it reads its body or is idle.  request_timeout_ms counts
     * from here, body_timeout_ms before it. */
    enr_sb_u64 work_start_mono_ms;
    /* cumulative: batches answered 503 for their wait before a worker
     * took them (queue_timeout_ms), and requests whose caller went away
     * (STATUS_CLIENT_GONE: counted here, never in latency[]) */
    enr_sb_u64 shed, client_gone;
    /* live: the last request the slot's worker finished (php-fpm's
     * "last request" fields), written after it by enr_sb_request_last;
     * last_end_ms 0: none yet. */
    enr_sb_u64 last_end_ms; /* CLOCK_REALTIME ms: display only */
    enr_sb_i64 last_pid;    /* the worker that served it */
    enr_sb_u64 last_status, last_duration_us, last_cpu_us, last_rss_kb;
    enr_sb_u64 last_records_in, last_records_out;
    char last_req_id[ENR_SB_REQID_MAX];
} enr_sb_slot;

/* The master's health verdict and the window it judged (health.c writes
 * it, the status process reads it): a sequence lock, seq odd while the
 * master writes, so a reader never mixes two verdicts.  Ratios are the
 * bits of a double. */
typedef struct enr_sb_health {
    enr_sb_u64 seq; /* 0: nothing published yet */
    enr_sb_u64 at_mono_ms;
    enr_sb_u64 healthy, reasons; /* reasons: enum enr_health_reason bits */
    enr_sb_u64 span_ms, requests, s5xx, records, degraded;
    enr_sb_u64 ratio_5xx, ratio_degraded, p99_ms; /* double bits */
    enr_sb_u64 live_workers, busy_workers, breaker_open;
    enr_sb_u64 listen_queue, oldest_request_ms;
    char reason[96];
    /* liveness, apart from health: it alone gates WATCHDOG=1 */
    enr_sb_u64 live, stuck_ms; /* stuck_ms: how long work has waited unmoved */
    char live_reason[96];
} enr_sb_health;

typedef struct enr_sb_pool {
    enr_sb_u64 start_ms;   /* master start, CLOCK_REALTIME ms */
    enr_sb_u64 generation; /* bumped on each reload */
    enr_sb_u64 workers;    /* configured pool size */
    enr_sb_u64 state;      /* enum enr_pool_state */
    enr_sb_u64 crashloop;  /* 1 while the crash-loop back-off holds forks */
    enr_sb_u64 backoff_ms; /* current back-off delay */
    enr_sb_u64 exits[ENR_EXIT_REASONS];
    enr_sb_u64 listen_queue, listen_queue_max; /* sampled by the master */
    enr_sb_u64 max_active;                     /* most workers busy at once */
    enr_sb_u64 start_mono_ms;                  /* master start, CLOCK_MONOTONIC ms, for its age */
    /* A reload whose new workers cannot start: the old generation serves. */
    enr_sb_u64 reload_pending;  /* 1 while a new configuration waits for its probe */
    enr_sb_u64 reload_failures; /* reloads refused (file invalid) or whose probe did not start */
    enr_sb_u64 reload_retry_ms; /* current back-off before the next probe, 0: none */
    char reload_error[96];      /* why the last reload failed, "" once one is done */
    enr_sb_health health;       /* the health verdict: read with enr_health_read only */
} enr_sb_pool;

/* The upstream provider's quota, one for the host (src/upstream/quota.h).
 * The exception to the ownership rule above: every worker writes it, each
 * update one compare-and-swap (never a lock), so a worker killed in the
 * middle leaves a value as valid as the one before.  Times are
 * CLOCK_MONOTONIC, which every process of the host shares. */
typedef struct enr_sb_quota {
    enr_sb_u64 pause_until_ms; /* no call before this (the provider's Retry-After), 0: none */
    enr_sb_u64 pauses;         /* pauses begun or lengthened */
    enr_sb_u64 tat_us;         /* upstream_max_calls_per_s: the bucket's theoretical arrival time */
    /* why the pause holds (the pause rank of a kind of base/upfail.h),
     * until when on the wall clock (Unix seconds, for operators), and the
     * provider's own word ("quotaExceeded"), printable ASCII: written by
     * the worker that set the pause, best effort (read, it is cleaned) */
    enr_sb_u64 why, until_wall_s;
    char reason[64];
} enr_sb_quota;

typedef struct enr_scoreboard {
    enr_sb_pool pool;
    uint32_t nslots; /* slots in use: max(workers) since start, <= ENR_SB_MAX_WORKERS */
    enr_sb_slot slot[ENR_SB_MAX_WORKERS];
    enr_sb_quota quota[ENR_UP_SOURCES]; /* per source, by the workers: see enr_sb_quota */
} enr_scoreboard;

extern const unsigned enr_sb_lat_bounds_ms[ENR_SB_LAT_BUCKETS - 1];

/* The vocabulary every reader shows (JSON, metrics labels, logs): stable
 * snake_case names, "unknown" for a value out of range. */
const char *enr_worker_state_name(uint64_t state);
const char *enr_pool_state_name(uint64_t state);
const char *enr_exit_reason_name(uint64_t reason);

/* Slots in use, clamped to the array whatever a writer left in nslots. */
uint32_t enr_sb_nslots(const enr_scoreboard *sb);

/* Every slot in use: for (ENR_SB_EACH_SLOT(sb, i, s)) { ... s->... } */
#define ENR_SB_EACH_SLOT(sb, i, s)                                                                 \
    uint32_t i = 0, i##_n = enr_sb_nslots(sb);                                                     \
    i < i##_n && ((s) = &(sb)->slot[i], 1);                                                        \
    i++

/* Sum of one u64 slot field over every slot in use (pool totals are sums,
 * since slot counters are cumulative): ENR_SB_TOTAL(sb, completed). */
uint64_t enr_sb_total(const enr_scoreboard *sb, size_t field_offset);
#define ENR_SB_TOTAL(sb, field) enr_sb_total((sb), offsetof(enr_sb_slot, field))

/* Sum of counter row of source src (upcounters.h) over every slot. */
uint64_t enr_sb_up_total(const enr_scoreboard *sb, unsigned src, unsigned row);

/* The shared store's rows (storestats.h) for the host, into out: a
 * counter summed over every slot, a gauge over the live workers (rtt_us:
 * their largest).  /metrics and /status show the same numbers. */
void enr_sb_store_totals(const enr_scoreboard *sb, uint64_t out[ENR_STORE_NSTATS]);

/* A process occupies the slot (any state but EMPTY). */
int enr_sb_slot_live(const enr_sb_slot *s);

/* A live worker that serves: waiting in accept() or busy. */
int enr_sb_slot_serving(const enr_sb_slot *s);

/* scoreboard.c: creation and the request bookkeeping of a worker slot. */

/* Maps a zeroed scoreboard MAP_SHARED | MAP_ANONYMOUS (inherited across
 * fork); NULL with errno set on failure. */
enr_scoreboard *enr_sb_create(void);

/* Index into latency[] for a request that took latency_us. */
unsigned enr_sb_lat_bucket(uint64_t latency_us);

/* The worker in slot s starts a request (req_id may be NULL) at
 * mono_ms (CLOCK_MONOTONIC) and wall_ms (CLOCK_REALTIME, display only). */
void enr_sb_request_start(enr_sb_slot *s, const char *req_id, uint64_t mono_ms, uint64_t wall_ms);

/* Age of the request the worker in slot s is serving at mono_now_ms
 * (CLOCK_MONOTONIC), 0 when it serves none: the one way every reader
 * (master, health, /status, /metrics) ages a request. */
uint64_t enr_sb_request_age_ms(const enr_sb_slot *s, uint64_t mono_now_ms);

/* The worker in slot s finished a request with HTTP status and, for a
 * 200, the record counts (zero otherwise).  latency_us is what the
 * caller lived (its wait for a worker included, when known); a request
 * whose caller went away (ENR_SB_STATUS_CLIENT_GONE) is counted in
 * client_gone and stays out of latency[]: nobody lived that time. */
void enr_sb_request_done(enr_sb_slot *s, int status, uint64_t rec_in, uint64_t rec_out,
                         uint64_t rec_degraded, uint64_t latency_us, int slow);

/* What a worker measured of the request it just finished. */
typedef struct enr_sb_last_req {
    int status;
    uint64_t duration_us, cpu_us, rss_kb, records_in, records_out, end_wall_ms;
    int64_t pid;
} enr_sb_last_req;

/* Publishes l as the slot's last request; its id is the one the slot's
 * req_id holds (enr_sb_request_start). */
void enr_sb_request_last(enr_sb_slot *s, const enr_sb_last_req *l);

#endif
