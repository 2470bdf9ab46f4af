/*
 * reload.h: configuration generations of the master: a new configuration
 * is tried on one probe worker before it replaces the running one (see
 * reload.c).
 */
#ifndef ENR_RELOAD_H
#define ENR_RELOAD_H

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

/* HUP: reads m->cfg_path again; a valid file is tried on a probe worker. */
void enr_reload(enr_master *m, uint64_t now);

/* Each loop turn while running: the probe's readiness and deadline, the
 * retry, and the end of a committed probe's extra service. */
void enr_reload_check(enr_master *m, uint64_t now);

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
