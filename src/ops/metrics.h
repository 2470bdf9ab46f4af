/*
 * metrics.h: the Prometheus text exposition (format 0.0.4) of the pool,
 * rendered from the scoreboard.  Names start with enrichd_, carry their
 * unit (_seconds, _bytes) and counters end in _total, so that
 * `promtool check metrics` finds nothing to say.
 */
#ifndef ENR_METRICS_H
#define ENR_METRICS_H

#include <stdint.h>

#include "base/buf.h"
#include "base/config.h"
#include "ops/health.h"
#include "base/scoreboard.h"
#include "base/sockdiag.h"
#include "upstream/cache.h"

#define ENR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* What the scoreboard does not hold, measured by the caller. */
typedef struct enr_metrics_extra {
    int have_queue; /* listen_queue measured now */
    uint64_t listen_queue, listen_queue_limit;
    uint64_t listen_queue_max; /* deepest this caller measured (pool max too) */
    uint64_t max_active_seen;  /* most busy workers this caller saw */
    const enr_health *health;  /* the master's verdict read back, or NULL: its summary in sb */
    const enr_fd_kinds *fds;   /* per slot (sb->nslots entries) or NULL */
    const int *fds_ok;         /* fds[i] valid when fds_ok[i] */
    const enr_cache *cache;    /* the host's upstream cache, or NULL: none (zeros) */
    /* The most lost requests this caller has shown, or NULL: the value is
     * derived from three counters read apart, and a counter must never
     * be seen going down (Prometheus would take it for a reset). */
    uint64_t *lost_shown;
} enr_metrics_extra;

/* Appends the whole exposition to out (check out->oom after). */
void enr_metrics_render(enr_buf *out, const enr_scoreboard *sb, const enr_config *c,
                        const enr_metrics_extra *x);

#endif
