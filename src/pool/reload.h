/*
 * reload.h: configuration generations of the master: a new configuration
 * is tried on one probe worker before it replaces the running one (see
 * reload.c).
 */
#ifndef ENR_RELOAD_H
#define ENR_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "pool/master_state.h"

/* The probe worker of a new configuration must report ready within this;
 * a failed probe is tried again after a back-off that doubles from MIN up
 * to ENR_BACKOFF_MAX_MS (docs/pool.md). */
#define ENR_RELOAD_PROBE_MS 10000
#define ENR_RELOAD_RETRY_MIN_MS 1000

/* enr_child.probe */
enum {
    ENR_PROBE_NONE = 0,
    ENR_PROBE_TRYING,
    ENR_PROBE_EXTRA /* committed: serves until the pool is full */
};

/* What the reload asks of the master: start (when start is 1) a worker of
 * configuration cfg and generation gen in slot, at the master's one fork
 * site, then tell enr_reload_started how it went. */
typedef struct enr_reload_start {
    int start;
    unsigned slot;
    const enr_config *cfg;
    unsigned gen;
} enr_reload_start;

/* HUP: reads m->cfg_path again; a valid file is tried on a probe worker,
 * returned to be started. */
enr_reload_start enr_reload(enr_master *m, uint64_t now);

/* Each loop turn while running: the probe's readiness and deadline, the
 * retry (returned to be started), and the end of a committed probe's
 * extra service. */
enr_reload_start enr_reload_check(enr_master *m, uint64_t now);

/* The master forked (forked 1) or could not fork (0) the worker st asked
 * for; nothing when st asked for none. */
void enr_reload_started(enr_master *m, const enr_reload_start *st, int forked, uint64_t now);

/* Each pass of the loop, with how many workers report ready: a reload
 * whose old generation is gone and whose new one serves is done
 * (state RUNNING, READY=1, the "reload done" line). */
void enr_reload_done_check(enr_master *m, int ready, uint64_t now);

/* Whether the pending configuration's probe has failed (the reload is
 * failing until a probe reports ready or the next HUP), and the STATUS=
 * text that says so, the same whenever it is sent. */
int enr_reload_failing(const enr_master *m);
void enr_reload_failed_text(const enr_master *m, char *buf, size_t n);

/* The upstream cache of configuration c, made before the workers that
 * use it are forked: *out is NULL when enrichment or the cache is off.
 * 0, or -1 (logged) when it cannot be mapped. */
int enr_reload_cache_new(const enr_config *c, enr_cache **out);

/* The worker in slot exited (reason why, detail for the log): returns 1
 * if it was the probe of the pending configuration (then its death is
 * the configuration's failure, not the running pool's), else 0. */
int enr_reload_probe_exited(enr_master *m, unsigned slot, const char *why, const char *detail,
                            uint64_t now);

/* The pool stops: a configuration still on trial is dropped with it. */
void enr_reload_drop(enr_master *m);

/* The next instant a reload timer needs the loop (monotonic ms, after
 * now), UINT64_MAX if none. */
uint64_t enr_reload_next(const enr_master *m, uint64_t now);

#endif
