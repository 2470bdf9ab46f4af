/*
 * fcgi_conn.h: the one FastCGI connection policy of enrichd's servers
 * (the workers on the API socket, the status process on its own): accept
 * the connection ourselves, let in only the allowed TCP peers, read the
 * request's headers within a total bound, refuse every role but
 * RESPONDER, serve one request per connection, close it boundedly.
 *
 * The owner fills the fields above the line and calls
 * enr_fcgi_conn_init() once, after FCGX_Init(); then, per connection,
 * enr_fcgi_conn_next(), enr_fcgi_conn_open(), its answer,
 * enr_fcgi_conn_finish(), enr_fcgi_conn_close().  Every byte of the
 * peer is read by enrichd's record reader (fcgi_body.h), every wait for
 * the peer is a poll(2) with the time left: no socket timeouts, no
 * signals.
 */
#ifndef ENR_FCGI_CONN_H
#define ENR_FCGI_CONN_H

#include <fcgiapp.h>
#include <signal.h>
#include <stdint.h>

#include "base/allow.h"
#include "base/buf.h"
#include "base/scoreboard.h"
#include "fcgi/fcgi_body.h"

/* enr_fcgi_conn_next() when there is no connection to serve. */
#define ENR_FCGI_STOP (-1) /* *stop was set, draining found none, or the socket failed */
#define ENR_FCGI_IDLE (-2) /* timeout_ms passed (or a signal) without a connection */
#define ENR_FCGI_SIDE (-3) /* side_fd is readable, no connection waits */

typedef struct enr_fcgi_conn {
    int listen_fd;                /* non-blocking; may be shared with siblings */
    const enr_allow *allow;       /* TCP peers let in; NULL: every peer */
    FCGX_Request *req;            /* the owner's request object */
    unsigned header_ms;           /* accept to the end of FCGI_PARAMS, in total */
    unsigned read_ms;             /* any one wait for the body's bytes after that */
    unsigned write_ms;            /* the answer's whole write (fcgi_stream.h) */
    unsigned linger_ms;           /* waiting for the peer to close after the answer */
    enr_sb_u64 *refused;          /* peers not allowed: a counter, or NULL */
    enr_sb_u64 *rejected;         /* malformed, stalled, wrong role: a counter, or NULL */
    enr_sb_u64 *rejected_by;      /* the same by reason (ENR_FCGI_REJECT_REASONS), or NULL */
    unsigned max_conns;           /* FCGI_GET_VALUES' FCGI_MAX_CONNS and FCGI_MAX_REQS */
    volatile sig_atomic_t *stop;  /* the owner's stop flag (set by its signal handler) */
    volatile sig_atomic_t *drain; /* when set: take what is queued, never wait; or NULL */
    const sigset_t *wait_mask;    /* the signal mask while waiting; NULL: the current one */
    int side_fd;                  /* also woken by its readability (-1: none) */
    /* Bytes of the next connection its owner read already (fcgi_mux.h),
     * parsed before any read; enr_fcgi_conn_open() takes and clears them. */
    const unsigned char *pre;
    size_t pre_len;
    /* ---- the module's own ---- */
    int is_tcp;
    int input_done;            /* the request's FCGI_STDIN was read to its end */
    int input_read;            /* the owner read it (enr_fcgi_conn_body) */
    int input_err;             /* the last read's error: an errno, 0 at EOF */
    enr_fcgi_in in;            /* the record reader's state on the connection */
    enr_buf params;            /* the request's FCGI_PARAMS content */
    const unsigned char *pend; /* read and not parsed yet (the body's first bytes) */
    size_t pend_len;
    int pipe_fds[2]; /* the hand-over to libfcgi (fcgi_guard.h) */
    int waiter;      /* enr_listen_waiter(): one idle process woken per connection */
    uint64_t refused_logged_ms, rejected_logged_ms; /* one line a second at most */
} enr_fcgi_conn;

/* Sets c->req up without a listening socket of its own (libfcgi would
 * otherwise accept the next connection itself, past the allow list) and
 * the read buffer.  0, or -1 (logged). */
int enr_fcgi_conn_init(enr_fcgi_conn *c);

/* Closes what enr_fcgi_conn_init() opened (the waiter). */
void enr_fcgi_conn_free(enr_fcgi_conn *c);

/* Waits up to timeout_ms (-1: no bound) for a connection and accepts it.
 * Returns its descriptor (SOCK_CLOEXEC), ENR_FCGI_IDLE, ENR_FCGI_SIDE or
 * ENR_FCGI_STOP. */
int enr_fcgi_conn_next(enr_fcgi_conn *c, int timeout_ms);

/* Reads the request's records on fd up to the end of its parameters,
 * checked (fcgi_body.h), and hands it to libfcgi (c->req).  0: a
 * RESPONDER request to answer; -1: rejected (counted by reason, logged
 * at most once a second) and fd closed. */
int enr_fcgi_conn_open(enr_fcgi_conn *c, int fd);

/* The request's body (FCGI_STDIN) appended to body, at most max bytes,
 * all of it by deadline_ms (each wait also within read_ms); expect is
 * CONTENT_LENGTH or SIZE_MAX (for the reads' layout only).  Once per
 * request.  ENR_FCGI_BODY_DONE, _TOO_LARGE (the rest left unread), or
 * _ERROR (c->input_err: ETIMEDOUT, ENOMEM, EPROTO for a record the rules
 * refuse (counted), ECONNABORTED for FCGI_ABORT_REQUEST, 0 at EOF). */
int enr_fcgi_conn_body(enr_fcgi_conn *c, enr_buf *body, size_t max, size_t expect,
                       uint64_t deadline_ms);

/* Ends the request in hand (FCGX_Finish_r: the closing records), noting
 * first whether its input was read to its end, for the close.  An input
 * the owner never read (a GET, a 404) is read to its end first, up to
 * ENR_FCGI_DRAIN_MAX bytes within linger_ms: a peer that keeps its
 * connection (Apache's enablereuse) sends its empty FCGI_STDIN and no
 * close, and the close would otherwise linger for it. */
#define ENR_FCGI_DRAIN_MAX 65536

void enr_fcgi_conn_finish(enr_fcgi_conn *c);

/* After enr_fcgi_conn_finish(): closes the connection.  At once when the
 * request's input was read to its end and nothing unread is left (the
 * peer has nothing more to send, so the close cannot reset it); else our
 * half first, waiting at most linger_ms for the peer's. */
void enr_fcgi_conn_close(enr_fcgi_conn *c);

/* A write of the answer failed: the rest can never arrive, so the
 * connection is reset rather than closed in order (nginx then fails the
 * response instead of passing a cut body on as whole). */
void enr_fcgi_conn_abort(enr_fcgi_conn *c);

/* A libfcgi error code (FCGX_GetError, FCGX_Accept_r) as a log value. */
const char *enr_fcgi_error_value(int e);

#endif
