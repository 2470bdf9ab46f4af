/*
 * fcgi_mux.h: several FastCGI connections gathered at once, for a
 * process that answers at once and serves one request at a time (the
 * status process): no peer that is slow or silent delays another's.
 *
 * A connection is accepted (enr_fcgi_conn_next: the allow list, the stop
 * flag), then its bytes are read as they come, poll(2) over every
 * connection in hand, until its request is whole: BEGIN_REQUEST through
 * the request's empty FCGI_STDIN (its empty FCGI_PARAMS for another role,
 * which has no input).  Only then is it handed to the one connection
 * policy (fcgi_conn.h) with those bytes, which it parses without a read
 * that could wait.  What holds each peer: request_ms from its accept to
 * the whole request, ENR_FCGI_MUX_REQUEST_MAX bytes, and `max`
 * connections in hand: a new one past it closes the oldest connection
 * whose request is not whole, so that a crowd of silent peers cannot
 * keep a well-behaved one out.  A peer that ends its stream early, or
 * breaks the framing, is handed over as it is: the policy rejects it
 * from what it sent, without waiting.
 *
 * Invariants: single-threaded; every wait is one ppoll(2) bounded by the
 * caller's timeout and the nearest deadline, with the caller's signal
 * mask; the bytes of a handed-over request stay valid until the next
 * call.
 */
#ifndef ENR_FCGI_MUX_H
#define ENR_FCGI_MUX_H

#include <stdint.h>

#include "base/buf.h"
#include "fcgi/fcgi_conn.h"

/* Connections in hand at most (the caller's max is capped to it). */
#define ENR_FCGI_MUX_MAX 64
/* A request's bytes: its parameters (ENR_FCGI_PARAMS_MAX), the records'
 * headers and a few management records, a small body.  More before the
 * request is whole: the peer is closed. */
#define ENR_FCGI_MUX_REQUEST_MAX (ENR_FCGI_PARAMS_MAX + 32u * 1024)

typedef struct enr_fcgi_mux_peer {
    int fd;
    int whole;            /* hand over (whole, ended, broken) */
    uint64_t deadline_ms; /* accept + request_ms */
    uint64_t seq;         /* accept order */
    size_t scanned;       /* bytes of in whose records were looked at */
    int begun;            /* BEGIN_REQUEST seen: id and role below */
    unsigned id, role;
    enr_buf in;
} enr_fcgi_mux_peer;

typedef struct enr_fcgi_mux {
    enr_fcgi_conn *conn; /* accepts (its listen_fd, allow list, stop flag, wait mask) */
    unsigned max;        /* connections in hand at most */
    unsigned request_ms; /* accept to the whole request */
    /* ---- the module's own ---- */
    enr_fcgi_mux_peer peer[ENR_FCGI_MUX_MAX];
    unsigned n;
    uint64_t seq;
    enr_buf ready; /* the request handed over last */
    /* peers closed since start: past their deadline, past the byte
     * bound, to make room for a new one (the log says them, once a
     * second at most) */
    uint64_t timed_out, too_large, evicted, failed;
    uint64_t logged_ms;
} enr_fcgi_mux;

/* Waits up to timeout_ms (-1: no bound) for a connection whose request
 * is whole.  Returns its descriptor, the bytes read from it in
 * m->ready (for conn->pre); or ENR_FCGI_IDLE, ENR_FCGI_STOP
 * (enr_fcgi_conn_next's meanings). */
int enr_fcgi_mux_next(enr_fcgi_mux *m, int timeout_ms);

/* Connections in hand now (not handed over). */
unsigned enr_fcgi_mux_pending(const enr_fcgi_mux *m);

/* Closes every connection in hand and frees the buffers. */
void enr_fcgi_mux_free(enr_fcgi_mux *m);

/* 1: data[0..n) holds a whole request, or a stream the policy must judge
 * as it is (a record of another FastCGI version); 0: more is due.  The
 * scan resumes where the last one stopped (p). */
int enr_fcgi_mux_whole(enr_fcgi_mux_peer *p, const unsigned char *data, size_t n);

#endif
