/*
 * child.h: a child process as the master sees it, and the one way the
 * master ends one: the escalation of signals (see child.c).
 */
#ifndef ENR_CHILD_H
#define ENR_CHILD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/scoreboard.h"

/* Back-off of restarts (the crash-loop guard, the status process):
 * doubles from MIN up to MAX. */
#define ENR_BACKOFF_MIN_MS 250
#define ENR_BACKOFF_MAX_MS 30000

/* The steps of the escalation, rows of child.c's table. */
enum enr_step {
    ENR_STEP_NONE = 0, /* not asked to end */
    ENR_STEP_TERM,     /* SIGTERM: end after the request in hand */
    ENR_STEP_DRAIN,    /* SIGUSR2: also serve what waits in the backlog */
    ENR_STEP_KILL      /* SIGKILL: the last step */
};

typedef struct enr_child {
    pid_t pid;           /* 0: no process */
    unsigned generation; /* config generation it was started with */
    uint64_t started;    /* monotonic ms */
    int ready;           /* reported readiness (workers) */
    int asked;           /* enum enr_exit_reason the master asked for, NONE if not */
    int step;            /* enum enr_step: the escalation step taken last */
    uint64_t step_at;    /* monotonic ms it was taken: the next one is due from here */
    int probe;           /* the first worker of a new configuration (reload.h) */
} enr_child;

/* Asks ch to end for reason (enum enr_exit_reason), beginning the
 * escalation at step.  A child already asked keeps its reason and its
 * clock, except that a stop of the pool overrides any reason; nothing is
 * sent after KILL. */
void enr_child_ask(enr_child *ch, int reason, int step);

/* SIGKILL now (the master's way out): the reason asked for, or STOP. */
void enr_child_kill(enr_child *ch);

/* The kill predicate: when ch's next step is due (monotonic ms), 0 if
 * none is (no process, not asked, or killed already).  The master acts
 * on it (enr_child_escalate) and sleeps until the first one. */
uint64_t enr_child_due(const enr_child *ch, const enr_config *cfg);

/* Takes ch's next step if it is due at now; returns the step taken,
 * ENR_STEP_NONE if none was. */
int enr_child_escalate(enr_child *ch, const enr_config *cfg, uint64_t now);

/* The exit reason of a waitpid() status (enum enr_exit_reason), with a
 * detail for the log ("exit_code=N", "signal=SEGV"). */
int enr_child_classify(const enr_child *ch, int status, char *detail, size_t len);

/* 1 when the busy worker of slot s is stuck (child.c says when):
 * the master asks it to end with ENR_EXIT_TIMEOUT. */
int enr_child_request_stuck(const enr_config *c, const enr_sb_slot *s, uint64_t mono_now);

/* The next delay of a back-off: first, then doubling up to
 * ENR_BACKOFF_MAX_MS (forks in a crash loop, reload probes, the status
 * process). */
uint64_t enr_backoff_next(uint64_t cur, uint64_t first);

#endif
