/*
 * worker.h: the body of one FastCGI worker process (forked by master.c).
 *
 * A worker owns one scoreboard slot, creates its engine, Unicode and
 * upstream objects once, serves requests one at a time from the shared
 * listening socket, and exits on its own when a soft limit is reached
 * (after answering the request in hand) or when the master asks (TERM).
 * Its exit code tells the master why it ended.
 */
#ifndef ENR_WORKER_H
#define ENR_WORKER_H

#include "config.h"
#include "scoreboard.h"

/* Exit codes: 0 = stopped because the master asked (the master knows the
 * reason it asked for); ENR_WORKER_EXIT_RECYCLE + enum enr_exit_reason =
 * recycled itself at a soft limit; anything else = failure. */
#define ENR_WORKER_EXIT_STOPPED 0
#define ENR_WORKER_EXIT_FAILED 1
#define ENR_WORKER_EXIT_RECYCLE 64

/* The worker's deadline keeps this much (or a tenth of
 * request_timeout_ms, if smaller) to write a 503 before the master's
 * request_timeout_ms sampler would kill it. */
#define ENR_WORKER_ANSWER_MARGIN_MS 100

typedef struct enr_worker_args {
    const enr_config *cfg;
    enr_scoreboard *sb;
    unsigned slot; /* index into sb->slot */
    int listen_fd; /* shared, non-blocking listening socket */
    int ready_fd;  /* write end of the master's readiness pipe, or -1 */
    unsigned generation;
} enr_worker_args;

/* Runs the worker until it must end; returns the process exit code.
 * Never returns into the master's code paths (the caller _exit()s). */
int enr_worker_main(const enr_worker_args *a);

#endif
