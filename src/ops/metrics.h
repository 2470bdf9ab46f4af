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
#include "ops/poolsnap.h"
#include "base/scoreboard.h"
#include "base/sockdiag.h"
#include "upstream/cache.h"

#define ENR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Appends the whole exposition to out (check out->oom after). */
void enr_metrics_render(enr_buf *out, const enr_status_view *v);

#endif
