/*
 * health.h: the one judgement of whether the pool is healthy, and apart
 * from it whether the pool is live.  The master makes both (liveness
 * gates systemd's WATCHDOG=1, health feeds STATUS= with every reason it
 * has, and /healthz, /metrics and the alert rules) and publishes
 * it in the scoreboard; the status process shows that published verdict
 * (/healthz, /status, /metrics), so both say the same thing.  It looks at
 * a recent window of the scoreboard's counters, not at whether processes
 * merely exist.
 */
#ifndef ENR_HEALTH_H
#define ENR_HEALTH_H

#include <stdint.h>

#include "base/config.h"
#include "base/scoreboard.h"

#define ENR_HEALTH_SAMPLES 64 /* ring of once-a-second samples */

/* (The typedef cannot be named enr_health_sample: that is the function.) */
typedef struct enr_health_point {
    uint64_t t_ms, accepted, completed, s5xx, rec_out, rec_degraded;
    uint64_t latency[ENR_SB_LAT_BUCKETS];
    uint64_t listen_queue; /* depth when sampled, for "queueing without completing" */
} enr_health_point;

/* Why the pool is unhealthy: bits of enr_health.reasons. */
enum enr_health_reason {
    ENR_HR_5XX = 1u << 0,       /* 5xx ratio over health_max_5xx_ratio */
    ENR_HR_DEGRADED = 1u << 1,  /* degraded records over health_max_degraded_ratio */
    ENR_HR_P99 = 1u << 2,       /* p99 latency over health_max_p99_ms */
    ENR_HR_STALLED = 1u << 3,   /* requests queue or run without any completing */
    ENR_HR_BREAKER = 1u << 4,   /* upstream breaker open in every live worker */
    ENR_HR_NO_WORKER = 1u << 5, /* no live worker */
    ENR_HR_CRASHLOOP = 1u << 6, /* crash-loop back-off holds forks */
    ENR_HR_AUTH = 1u << 7       /* a provider's API rejected its key or token: until a reload */
};

#define ENR_HR_COUNT 8

/* Stable label of one reason bit ("5xx_ratio", "stalled" ...), for the
 * JSON of /healthz and the metrics; "unknown" for anything else. */
const char *enr_health_reason_name(unsigned bit);

/* The numbers the last judgement looked at (over span_ms of history). */
typedef struct enr_health_window {
    uint64_t span_ms, requests, s5xx, records, degraded;
    double ratio_5xx, ratio_degraded, p99_ms;
    unsigned live_workers, busy_workers, breaker_open;
    uint64_t listen_queue, oldest_request_ms; /* age of the oldest request in flight */
} enr_health_window;

/* Liveness, apart from health: can the pool make progress at all?  Its
 * verdict alone gates WATCHDOG=1, since a restart mends only a wedged
 * master or pool, never a sick provider, a slow network or a client. */
typedef struct enr_liveness {
    int live;
    char reason[96];              /* "ok", or why not */
    uint64_t stuck_ms;            /* how long work has waited with none taken or finished */
    uint64_t moved_at_ms;         /* last sample where work moved, or none waited */
    uint64_t worker_at_ms;        /* last sample with a serving worker */
    uint64_t accepted, completed; /* the pool's totals at the last sample */
    int started;
} enr_liveness;

typedef struct enr_health {
    enr_health_point ring[ENR_HEALTH_SAMPLES];
    unsigned head, count;
    int published; /* a verdict: judged here, or read back (enr_health_read) */
    int healthy;
    char reason[96];
    unsigned reasons; /* enum enr_health_reason bits, 0 when healthy */
    enr_health_window win;
    enr_liveness liveness;
} enr_health;

/* The master's judgement, the only one (health and liveness): take a sample (call at least once
 * a second; more often is judged but not recorded), judge the window of
 * c->health_window_s, store the verdict in h and publish it in the
 * scoreboard (pool.health, read back by enr_health_read alone), and sample
 * the listen queue of listen_fd into sb->pool.listen_queue(_max).
 * Returns h->healthy; h->liveness.live is the watchdog's answer. */
int enr_health_sample(enr_health *h, const enr_config *c, enr_scoreboard *sb, int listen_fd,
                      uint64_t now_ms);

/* The judgement itself, without writing the scoreboard (enr_health_sample
 * and the unit tests): listen_queue is the depth measured by the caller.
 * now_ms is any monotonic millisecond clock, the same across calls.
 * Judges liveness too (h->liveness, after c->liveness_timeout_ms).
 * Returns h->healthy. */
int enr_health_observe(enr_health *h, const enr_config *c, const enr_scoreboard *sb,
                       uint64_t listen_queue, uint64_t now_ms);

/* The one way to read the verdict back: what every other reader (the
 * status process: /healthz, /status, /metrics, the HTML page) shows is
 * the verdict and window the master published last, copied into h (its
 * ring stays empty).  Returns 0, or -1 while nothing is published yet (h
 * then says unhealthy, "no verdict yet", and published is 0). */
int enr_health_read(enr_health *h, const enr_scoreboard *sb);

/* A reload done: the window starts again, so the new configuration is
 * judged by its own requests (a key fixed by the reload is no longer
 * held to the records its refusal left local). */
void enr_health_restart(enr_health *h);

#endif
