/*
 * upstream.h: the outbound enrichment client of one worker (UPSTREAM.md).
 *
 * One long-lived libcurl multi handle per worker; calls of one batch run
 * concurrently under one deadline; a per-worker cache and circuit breaker
 * sit in front.  Counters go to the worker's scoreboard slot.
 */
#ifndef ENR_UPSTREAM_H
#define ENR_UPSTREAM_H

#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "scoreboard.h"

typedef struct enr_upstream enr_upstream;

/* NULL when c->upstream_url is empty (enrichment off) or on failure;
 * failure is reported through err (non-empty). slot may be NULL (CLI). */
enr_upstream *enr_upstream_new(const enr_config *c, enr_sb_slot *slot, char *err, size_t errlen);
void enr_upstream_free(enr_upstream *u);

/* Enrich b in place: sets poster overrides (in b->text) and durations of
 * records whose local duration is 0.  Never blocks past deadline_ms
 * (CLOCK_MONOTONIC, ms).  Returns the number of records that kept their
 * local values for any reason (X-Enrich-Degraded). */
size_t enr_upstream_enrich(enr_upstream *u, enr_batch *b, uint64_t deadline_ms);

/* Descriptors the client holds now (for recycling and leak attribution). */
unsigned enr_upstream_fds(const enr_upstream *u);

#endif
