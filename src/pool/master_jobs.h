/*
 * master_jobs.h: the master's periodic jobs and its health verdict (see
 * master_jobs.c).
 */
#ifndef ENR_MASTER_JOBS_H
#define ENR_MASTER_JOBS_H

#include <stdint.h>

#include "pool/master_state.h"

/* Master tick: sampling of workers, hard limits, health, watchdog. */
#define ENR_MASTER_TICK_MS 1000
/* STATUS= is refreshed this often. */
#define ENR_MASTER_STATUS_MS 2000

/* Each job's first time: the watchdog at once, the others a tick after
 * start-up. */
void enr_master_jobs_start(enr_master *m);

/* Runs each job that is on and due, and sets its next time. */
void enr_master_jobs_run(enr_master *m, uint64_t now);

/* The earlier of t and the next time of each job that is on. */
uint64_t enr_master_jobs_next(const enr_master *m, uint64_t t);

/* The pool's health and liveness verdicts, judged now; a change is
 * logged once (not while starting or draining). */
void enr_master_judge(enr_master *m, uint64_t now);

#endif
