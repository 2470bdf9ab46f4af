/*
 * statusdoc.h: the status document of the pool as a json-c DOM (the
 * body of GET /status; statustext.h renders it for humans).  It reads
 * only the scoreboard and what the caller measured; nothing here talks to
 * a worker.
 */
#ifndef ENR_STATUSDOC_H
#define ENR_STATUSDOC_H

#include <json-c/json.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/config.h"
#include "ops/health.h"
#include "base/scoreboard.h"
#include "base/sockdiag.h"
#include "ops/statustext.h"
#include "upstream/cache.h"

typedef struct enr_status_view {
    const enr_config *c;
    const enr_scoreboard *sb;
    const enr_health *health; /* the master's verdict (enr_health_read) */
    int have_queue;
    uint64_t listen_queue, listen_queue_limit, listen_queue_max;
    uint64_t max_active_seen; /* busy workers this process saw at once */
    const enr_fd_kinds *fds;  /* per slot, or NULL (no ?full) */
    const int *fds_ok;
    const enr_cache *cache; /* the host's upstream cache, or NULL */
} enr_status_view;

/* The /status document; with full, the per-worker "processes" array. */
json_object *enr_status_doc(const enr_status_view *v, int full);

/* The /healthz body: verdict, reasons and the window's numbers. */
/* Source src's host-wide pause (quota.h): paused, and when it is, why
 * (throttled, quota, auth), the provider's word and until when. */
json_object *enr_pause_doc(const enr_scoreboard *sb, unsigned src, uint64_t now_mono_ms);

json_object *enr_health_doc(const enr_health *h, const enr_config *c, const enr_scoreboard *sb);

#endif
