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
#include "ops/poolsnap.h"
#include "base/scoreboard.h"
#include "base/sockdiag.h"
#include "ops/statustext.h"
#include "upstream/cache.h"

/* The /status document; with full, the per-worker "processes" array. */
json_object *enr_status_doc(const enr_status_view *v, int full);

/* The /healthz body: verdict, reasons and the window's numbers. */
/* Source src's host-wide pause (quota.h): paused, and when it is, why
 * (its kind's word, base/upfail.h), the provider's word and until when. */
json_object *enr_pause_doc(const enr_scoreboard *sb, unsigned src, uint64_t now_mono_ms);

json_object *enr_health_doc(const enr_health *h, const enr_config *c, const enr_scoreboard *sb);

#endif
