/*
 * worker_int.h: one worker's state, shared by its two files: worker.c
 * (the process: start, the loop, accounting, recycling) and httpapi.c
 * (one request's answer).  Nothing else includes it.
 *
 * Invariants: one enr_worker per worker process, set up once by
 * worker.c; only that process writes its slot's live and cumulative
 * fields.
 */
#ifndef ENR_WORKER_INT_H
#define ENR_WORKER_INT_H

#include <fcgiapp.h>
#include <signal.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/config.h"
#include "base/scoreboard.h"
#include "engine/engine.h"
#include "fcgi/fcgi_conn.h"
#include "pool/capture.h"
#include "upstream/upstream.h"

typedef struct enr_worker {
    const enr_config *cfg;
    enr_sb_slot *slot;
    unsigned slot_no, generation; /* for the process title */
    enr_fcgi_conn conn;           /* fcgi_conn.h: accept to close */
    int answer_lost;              /* the answer's write failed: it counts as 499, not as sent */
    int fds_unknown;              /* the last count of our descriptors failed (said once) */
    long fds_last;                /* that count, -1 unknown */
    unsigned fds_gap, fds_wait;   /* requests between counts, and until the next */
    long rss_kb;                  /* after the last request, -1 unknown */
    uint64_t cpu_mark_us;         /* CPU time when the worker last began to wait */
    uint64_t caller_seen_ms;      /* the caller last heard from (httpapi.c) */
    int64_t pid;
    enr_engine *engine;
    enr_upstream *upstream;
    enr_upstream_stats up_published; /* its counters as last added to the slot */
    enr_store_stats store_published; /* the shared store's, likewise */
    enr_capture *capture;            /* NULL: off */
    uint64_t arrival_us;             /* the request in hand, CLOCK_REALTIME (capture) */
    uint64_t wait_ms;                /* its wait for a worker (shed.h), 0 if unknown */
    uint64_t pool_start_mono_ms;     /* the master's start: no wait before it is overload */
    int tcp_wait_known;              /* wait_ms is the kernel's, taken at accept */
    uint64_t body_deadline;          /* its body's deadline (CLOCK_MONOTONIC) */
    enr_batch batch;
    enr_buf body, out;
    FCGX_Request req;
    sigset_t wait_mask; /* the mask while waiting for a connection */
    unsigned long served;
    unsigned long max_served; /* max_requests + this worker's jitter; 0 = never */
} enr_worker;

/* The upstream client counts in its own struct; the worker owns the slot
 * and publishes them there: what was added since the last publication for
 * the counters (the slot's are cumulative over its processes), the value
 * for the breaker state and the descriptors.  Called while idle and
 * right after a batch's calls, before its answer is sent, so a caller
 * that reads /metrics after its answer sees them. */
/* The shared store's rows (storestats.h): counters as deltas, gauges as
 * they are. */
static inline void enr_worker_publish_store(enr_worker *w)
{
    const enr_store_stats *now = enr_upstream_store_stats(w->upstream);
    enr_store_stats *was = &w->store_published;
    enr_sb_slot *s = w->slot;

    if (now == NULL)
        return;
#define STORE_PUBLISH(f, metric, type, help)                                                       \
    if (type[0] == 'c')                                                                            \
        ENR_SB_ADD(s->store[ENR_STORE_ROW_##f], now->f - was->f);                                  \
    else                                                                                           \
        ENR_SB_SET(s->store[ENR_STORE_ROW_##f], now->f);
    ENR_STORE_STATS(STORE_PUBLISH)
#undef STORE_PUBLISH
    *was = *now;
}

static inline void enr_worker_publish_upstream(enr_worker *w)
{
    const enr_upstream_stats *now = enr_upstream_stats_of(w->upstream);
    enr_upstream_stats *was = &w->up_published;
    enr_sb_slot *s = w->slot;

    for (unsigned i = 0; i < ENR_UP_SOURCES; i++) {
        /* One line per counter of the table (base/upcounters.h). */
#define UP_PUBLISH(field, metric, kind, help)                                                      \
    ENR_SB_ADD(s->up[i][ENR_UP_ROW_##field], now->src[i].field - was->src[i].field);
        ENR_UP_COUNTERS(UP_PUBLISH)
#undef UP_PUBLISH
        ENR_SB_SET(s->up_breaker_state[i], (uint64_t)now->breaker_state[i]);
    }
    ENR_SB_SET(s->up_fds, now->fds);
    *was = *now;
    enr_worker_publish_store(w);
}

#endif
