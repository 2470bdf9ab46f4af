/*
 * master_state.h: the state of the master process, shared by the files
 * that make it: master.c (the loop, the one fork site, drain and stop),
 * children.c (child exits, the crash-loop guard), master_jobs.c (the
 * periodic jobs, the health verdict) and reload.c (configuration
 * generations).  Nothing
 * outside the master includes it; enr_master_run() (master.h) is the
 * master's only public entry.  It declares no function: reload.c answers
 * master.c (it returns what to start, reload.h), never calls it, and
 * children.c and master_jobs.c call nothing of master.c, so the include
 * check (scripts/incgraph.py) sees each pair as one arrow.
 *
 * Invariants: w[i] is the process in scoreboard slot i; a pid > 0 is a
 * child not yet reaped; generation counts the committed configurations,
 * and cfg is the one of the running generation (next_cfg waits for its
 * probe while pending); cache is cfg's upstream cache and next_cache
 * next_cfg's (the same pointer when the reload keeps the cache).
 */
#ifndef ENR_MASTER_STATE_H
#define ENR_MASTER_STATE_H

#include <stdint.h>

#include "pool/child.h"
#include "base/config.h"
#include "ops/health.h"
#include "base/scoreboard.h"
#include "upstream/cache.h"

/* READY=1 waits for the whole first wave of workers, at most this long
 * (then min_ready_workers is enough); a reload's end likewise waits for
 * the new generation's. */
#define ENR_READY_WAIT_MS 1000

/* master_jobs.c's periodic jobs (its jobs[] table has one row each). */
#define ENR_MASTER_JOBS 3

typedef struct enr_master {
    enr_config cfg;
    const char *cfg_path;
    enr_scoreboard *sb;
    enr_cache *cache; /* the running generation's upstream cache, NULL: none */
    int listen_fd, status_fd;
    char listen_path[ENR_PATH_MAX], status_path[ENR_PATH_MAX]; /* unlinked at exit */
    int ready_r, ready_w;
    enr_child w[ENR_SB_MAX_WORKERS];
    enr_child status;
    uint64_t status_hold_until, status_backoff;
    unsigned generation;
    /* crash-loop guard */
    unsigned early_deaths;
    uint64_t backoff_ms, hold_until;
    /* lifecycle */
    uint64_t start_ms;
    int ready_sent, reloading, draining;
    uint64_t reload_start_ms; /* CLOCK_MONOTONIC: when the last reload began */
    int first_ready;          /* some worker has accepted since start */
    int cold_conn;            /* a connection waited for the first worker (master.c) */
    uint64_t drain_deadline;
    uint64_t watchdog_ms;
    uint64_t job_next[ENR_MASTER_JOBS]; /* when each of master_jobs.c's jobs[] runs next (ms) */
    uint64_t last_completed, last_completed_at;
    int activated;                      /* the sockets came from systemd (idle exit) */
    uint64_t last_accepted, idle_since; /* idle exit: requests seen, and since when none */
    int idle_exit;                      /* idle for idle_exit_s: the loop drains */
    double req_rate;
    uint64_t restarts;
    enr_health health;
    int was_healthy; /* last verdict, to log transitions only */
    int was_live;    /* last liveness verdict, likewise */
    /* reload: a new configuration is tried on one probe worker first */
    enr_config next_cfg;   /* validated, not yet committed */
    enr_cache *next_cache; /* next_cfg's: cache, or one of its own (reload.c) */
    int pending;           /* next_cfg waits for its probe */
    unsigned probe_slot;
    uint64_t probe_deadline, retry_at, retry_ms;
    unsigned probe_failures; /* of the pending configuration */
    char probe_error[96];
} enr_master;

#endif
