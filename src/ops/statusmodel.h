/*
 * statusmodel.h: the status document (statusdoc.c) as its readers see
 * it, read once.  The text view, the --watch screen and the HTML page
 * render from an enr_status_model, so each key they show is named in one
 * place (the tables below), not looked up by string in each renderer.
 *
 * A value is the document's own spelling of it (json-c's text of the
 * value: 0.05 stays "0.05"), or NULL when the key is absent or null; a
 * view prints it as it is, after its own cleaning (statustext.c) or
 * escaping (statushtml.c).  Only a number a view decides on is parsed
 * (pause_ms_left).
 *
 * Invariants: the model points into the document, so it lives no longer
 * than it; a sub-object that is not a JSON object is read as absent;
 * sources, the store's leases and workers are bounded (ENR_SM_MAX_SOURCES,
 * the scoreboard's ENR_SB_MAX_WORKERS): a document with more is read up
 * to the bound.
 */
#ifndef ENR_STATUSMODEL_H
#define ENR_STATUSMODEL_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "base/scoreboard.h"
#include "base/upcounters.h"
#include "upstream/budget.h"

#define ENR_SM_MAX_SOURCES 16 /* the document has one per source in use */

/* X(prefix, field, key) rows, one table per object of the document. */
#define ENR_SM_POOL(X, p)                                                                          \
    X(p, pool, "pool")                                                                             \
    X(p, state, "state")                                                                           \
    X(p, generation, "generation")                                                                 \
    X(p, start_since, "start since")                                                               \
    X(p, workers_configured, "workers_configured")                                                 \
    X(p, active, "active processes")                                                               \
    X(p, idle, "idle processes")                                                                   \
    X(p, total, "total processes")                                                                 \
    X(p, accepted, "accepted conn")                                                                \
    X(p, completed, "completed")                                                                   \
    X(p, in_flight, "in_flight")                                                                   \
    X(p, lost, "lost")                                                                             \
    X(p, listen_queue, "listen queue")                                                             \
    X(p, max_listen_queue, "max listen queue")                                                     \
    X(p, slow, "slow requests")                                                                    \
    X(p, restarts_total, "restarts_total")
#define ENR_SM_HEALTH(X, p) X(p, status, "status") X(p, reason, "reason")
#define ENR_SM_RESP(X, p) X(p, s2xx, "2xx") X(p, s4xx, "4xx") X(p, s5xx, "5xx")
#define ENR_SM_LAT(X, p)                                                                           \
    X(p, mean_ms, "mean_ms")                                                                       \
    X(p, p50_ms, "p50_ms") X(p, p99_ms, "p99_ms") X(p, window_p99_ms, "window_p99_ms")
#define ENR_SM_PAUSE(X, p)                                                                         \
    X(p, paused, "paused") X(p, why, "why") X(p, reason, "reason") X(p, until, "until")
#define ENR_SM_BUDGET(X, p) X(p, resets, "resets") X(p, runs_out, "runs_out")
#define ENR_SM_PROC(X, p)                                                                          \
    X(p, slot, "slot")                                                                             \
    X(p, pid, "pid")                                                                               \
    X(p, state, "state")                                                                           \
    X(p, requests, "requests")                                                                     \
    X(p, request_age_ms, "request_age_ms")                                                         \
    X(p, rss_kb, "rss_kb")                                                                         \
    X(p, fds, "fds")                                                                               \
    X(p, request_id, "request_id")
#define ENR_SM_EXIT(X, p)                                                                          \
    X(p, reason, "reason")                                                                         \
    X(p, pid, "pid") X(p, request_id, "request_id") X(p, request_age_ms, "request_age_ms")
#define ENR_SM_LAST(X, p)                                                                          \
    X(p, pid, "pid")                                                                               \
    X(p, status, "status")                                                                         \
    X(p, duration_ms, "duration_ms")                                                               \
    X(p, cpu_ms, "cpu_ms")                                                                         \
    X(p, rss_kb, "rss_kb")                                                                         \
    X(p, records_in, "records_in") X(p, records_out, "records_out") X(p, request_id, "request_id")

/* The fleet's shared store's object, there only while shared_store is
 * set: these keys, storestats.h's rows by their field names (as
 * /metrics totals them) and lease_held, the units the host's lease holds
 * by source.  Its state is a word of ENR_SM_STORE_STATE; "off" is the
 * views' word for a document without the object. */
#define ENR_SM_STORE(X, p) X(p, state, "state") X(p, address, "address")
#define ENR_SM_STORE_STATE(X, p)                                                                   \
    X(p, off, "off") X(p, connected, "connected") X(p, unreachable, "unreachable")

/* The objects of the document and its keys read alone. */
#define ENR_SM_NAMES(X, p)                                                                         \
    X(p, health, "health")                                                                         \
    X(p, responses, "responses")                                                                   \
    X(p, latency, "latency")                                                                       \
    X(p, upstream, "upstream")                                                                     \
    X(p, pause_ms_left, "pause_ms_left")                                                           \
    X(p, pause_until, "pause_until")                                                               \
    X(p, sources, "sources")                                                                       \
    X(p, failures, "failures")                                                                     \
    X(p, breakers, "breakers")                                                                     \
    X(p, pause, "pause")                                                                           \
    X(p, budget, "budget")                                                                         \
    X(p, processes, "processes")                                                                   \
    X(p, empty_slots, "empty_slots")                                                               \
    X(p, last_exit, "last_exit")                                                                   \
    X(p, last_request, "last_request")                                                             \
    X(p, fds_by_kind, "fds_by_kind")                                                               \
    X(p, summary, "summary")                                                                       \
    X(p, store, "store")                                                                           \
    X(p, lease_held, "lease_held")

#define ENR_SM_ENUM(p, field, key) p##field,
enum { ENR_SM_NAMES(ENR_SM_ENUM, ENR_SM_K_) ENR_SM_K_N };
enum { ENR_SM_POOL(ENR_SM_ENUM, ENR_SM_P_) ENR_SM_P_N };
enum { ENR_SM_HEALTH(ENR_SM_ENUM, ENR_SM_H_) ENR_SM_H_N };
enum { ENR_SM_RESP(ENR_SM_ENUM, ENR_SM_R_) ENR_SM_R_N };
enum { ENR_SM_LAT(ENR_SM_ENUM, ENR_SM_L_) ENR_SM_L_N };
enum { ENR_SM_PAUSE(ENR_SM_ENUM, ENR_SM_PA_) ENR_SM_PA_N };
enum { ENR_SM_BUDGET(ENR_SM_ENUM, ENR_SM_B_) ENR_SM_B_N };
enum { ENR_SM_PROC(ENR_SM_ENUM, ENR_SM_W_) ENR_SM_W_N };
enum { ENR_SM_EXIT(ENR_SM_ENUM, ENR_SM_X_) ENR_SM_X_N };
enum { ENR_SM_LAST(ENR_SM_ENUM, ENR_SM_LR_) ENR_SM_LR_N };
enum { ENR_SM_STORE(ENR_SM_ENUM, ENR_SM_S_) ENR_SM_S_N };
enum { ENR_SM_STORE_STATE(ENR_SM_ENUM, ENR_SM_SS_) ENR_SM_SS_N };
#undef ENR_SM_ENUM

/* The keys, by the enums above: statusdoc.c writes these, and a view
 * that labels a value by its key (the --watch screen, the HTML summary)
 * prints them. */
extern const char *const enr_sm_names[ENR_SM_K_N];
#define ENR_SM_NAME(f) (enr_sm_names[ENR_SM_K_##f])
extern const char *const enr_sm_pool_keys[ENR_SM_P_N];
extern const char *const enr_sm_resp_keys[ENR_SM_R_N];
extern const char *const enr_sm_lat_keys[ENR_SM_L_N];
extern const char *const enr_sm_health_keys[ENR_SM_H_N];
extern const char *const enr_sm_pause_keys[ENR_SM_PA_N];
extern const char *const enr_sm_budget_keys[ENR_SM_B_N];
extern const char *const enr_sm_proc_keys[ENR_SM_W_N];
extern const char *const enr_sm_exit_keys[ENR_SM_X_N];
extern const char *const enr_sm_last_keys[ENR_SM_LR_N];
extern const char *const enr_sm_store_keys[ENR_SM_S_N];
extern const char *const enr_sm_store_states[ENR_SM_SS_N];

/* A source of upstream.sources: its counters by row of the counter
 * table (a failure kind's under "failures"), pause and day's budget. */
typedef struct enr_sm_source {
    const char *name;
    int is_object;
    const char *counter[ENR_UP_NCOUNTERS];
    const char *breakers_open;
    const char *pause[ENR_SM_PA_N];
    int has_budget;
    const char *budget_row[ENR_BUDGET_NFIELDS]; /* by row of budget.h's table */
    const char *budget[ENR_SM_B_N];
} enr_sm_source;

/* A worker of "processes", or a slot of "empty_slots" (slot and
 * last_exit only). */
typedef struct enr_sm_proc {
    const char *v[ENR_SM_W_N];
    int has_exit, has_last, has_fds;
    const char *exit[ENR_SM_X_N];
    const char *last[ENR_SM_LR_N]; /* the last request */
    const char *fds_summary;       /* fds_by_kind.summary */
} enr_sm_proc;

/* The shared store's object: its keys, its rows by row of storestats.h's
 * table, and the lease held by source (bounded like the sources). */
typedef struct enr_sm_store {
    const char *v[ENR_SM_S_N];
    const char *row[ENR_STORE_NSTATS];
    unsigned n_leases;
    struct {
        const char *source, *units;
    } lease[ENR_SM_MAX_SOURCES];
} enr_sm_store;

typedef struct enr_status_model {
    const char *pool[ENR_SM_P_N];
    int has_health, has_resp, has_lat, has_up;
    const char *health[ENR_SM_H_N];
    int health_has_reason; /* the key is there, even null */
    const char *resp[ENR_SM_R_N];
    const char *lat[ENR_SM_L_N];
    uint64_t pause_ms_left;  /* upstream's, 0: not paused */
    const char *pause_until; /* upstream's */
    unsigned n_sources;
    enr_sm_source source[ENR_SM_MAX_SOURCES];
    int has_store; /* shared_store set: else the views say "off" */
    enr_sm_store store;
    int has_procs; /* a ?full document */
    size_t n_procs, n_empty;
    enr_sm_proc proc[ENR_SB_MAX_WORKERS];
    enr_sm_proc empty[ENR_SB_MAX_WORKERS];
} enr_status_model;

/* Reads doc into *m (every field; m need not be cleared).  doc must
 * outlive m. */
void enr_status_model_read(enr_status_model *m, json_object *doc);

#endif
