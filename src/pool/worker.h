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

#include <sys/types.h>

#include "base/config.h"
#include "base/scoreboard.h"
#include "upstream/cache.h"

/* Exit codes: 0 = stopped because the master asked (the master knows the
 * reason it asked for); ENR_WORKER_EXIT_RECYCLE + enum enr_exit_reason =
 * recycled itself at a soft limit; anything else = failure. */
#define ENR_WORKER_EXIT_STOPPED 0
#define ENR_WORKER_EXIT_FAILED 1
#define ENR_WORKER_EXIT_RECYCLE 64

/* Bounds on what a FastCGI peer may make a worker wait for.  nginx sends
 * a whole request at once (fastcgi_request_buffering on), so only a
 * broken or hostile peer ever comes near them.
 *  - HEADER: from accept to the end of FCGI_PARAMS, in total (a
 *    deadline every wait is polled against: the slot looks idle then, so
 *    the master's request clock would never stop a client that sends
 *    nothing, one byte a second, or only management records);
 *  - READ: any one wait for the request body's bytes (never more than
 *    half of request_timeout_ms, so the worker gives up before the
 *    master's stuck-request kill); the whole body also within half of
 *    request_timeout_ms (body_timeout_ms, read in httpapi.c);
 *  - LINGER: after the answer, waiting for the peer to close its side
 *    before ours closes (libfcgi's own wait has no total bound). */
#define ENR_WORKER_HEADER_TIMEOUT_MS 1000
#define ENR_WORKER_READ_TIMEOUT_MS 1000
#define ENR_WORKER_LINGER_MS 500

typedef struct enr_worker_args {
    const enr_config *cfg;
    enr_scoreboard *sb;
    unsigned slot; /* index into sb->slot */
    int listen_fd; /* shared, non-blocking listening socket */
    int ready_fd;  /* write end of the master's readiness pipe, or -1 */
    unsigned generation;
    pid_t master_pid; /* getpid() of the master before fork */
    enr_cache *cache; /* the host's upstream cache (the master's mapping), or NULL */
} enr_worker_args;

/* Called by the master before its first fork (and for a new
 * configuration): loads once what every worker needs from shared
 * libraries, so each worker starts in well under a millisecond instead
 * of loading it again while competing for the CPU, and those pages are
 * shared (PSS) until written: the Unicode tables (ucd.h) and
 * OpenSSL's SHA-1 (an engine kept for the life of the process, never used
 * to serve), and libcurl when c sets upstream_url (curlapi.h).  Returns 0,
 * or -1 with err set when libcurl is needed and cannot be loaded; an
 * engine that cannot warm up is only logged (each worker tries on its
 * own). */
int enr_worker_preload(const enr_config *c, char *err, size_t errlen);

/* Runs the worker until it must end; returns the process exit code.
 * Never returns into the master's code paths (the caller _exit()s). */
int enr_worker_main(const enr_worker_args *a);

#endif
