/*
 * fcgi_conn.c: the FastCGI connection layer (fcgi_conn.h): from accept()
 * to close(), the part of the FastCGI spec a server must harden itself
 * against; what the request asks for is the caller's business.
 *
 * Invariants:
 *  - libfcgi never accepts on its own (its request has no listening
 *    socket): every connection passes enr_fcgi_conn_next(), where a TCP
 *    peer is checked against the allow list before a byte is read, and
 *    a lost accept race on the shared non-blocking socket costs an
 *    EAGAIN, never a process blocked in accept() that cannot be told to
 *    stop.
 *  - A connection carries one request and is closed after it, whatever
 *    FCGI_KEEP_CONN says (docs/pool.md: a kept connection would pin a
 *    prefork worker); the layer closes it itself, after a bounded
 *    linger, so no descriptor outlives its request.
 *  - No peer holds the process without bound: the header phase has a
 *    total timer, each read and each write a timeout, the close a linger
 *    limit in time and bytes.
 *  - Only a RESPONDER request reaches the caller; anything else gets
 *    END_REQUEST{FCGI_UNKNOWN_ROLE} or a closed connection, is counted
 *    and logged at most once a second (a hostile peer repeats at will).
 */
#include "fcgi/fcgi_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fastcgi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "fcgi/listen.h"
#include "base/log.h"
#include "base/signals.h"

/* Bytes read and dropped while lingering.  A body refused on its
 * Content-Length (413 past max_body_bytes) is still on its way, up to
 * nginx's client_max_body_size: a close with it unread would reset the
 * connection before nginx has read the 413 (it answered 502 on the
 * sanitizer build's slower timing).  linger_ms bounds the time whatever
 * a peer sends. */
#define LINGER_DISCARD_MAX (16u << 20)

static volatile sig_atomic_t header_alarm;   /* the header timer fired */
static volatile sig_atomic_t header_fd = -1; /* the connection it guards */

static void on_alarm(int sig)
{
    (void)sig;
    /* A signal only interrupts a call that blocks, and a peer that
     * floods libfcgi with records it answers itself (management
     * records) never lets it block: shutting the connection down
     * ends the reading either way (shutdown is async-signal-safe). */
    header_alarm = 1;
    if (header_fd >= 0)
        shutdown(header_fd, SHUT_RDWR);
}

const char *enr_fcgi_error_value(int e)
{
    static char num[32], out[64];
    const char *text;

    switch (e) {
    case 0:
        return "none";
    case FCGX_UNSUPPORTED_VERSION:
        text = "unsupported FastCGI version";
        break;
    case FCGX_PROTOCOL_ERROR:
        text = "FastCGI protocol error";
        break;
    case FCGX_PARAMS_ERROR:
        text = "FastCGI parameters error";
        break;
    case FCGX_CALL_SEQ_ERROR:
        text = "FastCGI call sequence error";
        break;
    default:
        if (e > 0)
            return enr_log_errno(e);
        snprintf(num, sizeof num, "libfcgi error %d", e);
        text = num;
        break;
    }
    return enr_log_quote(out, sizeof out, text);
}

int enr_fcgi_conn_init(enr_fcgi_conn *c)
{
    struct sigaction sa;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    c->is_tcp = 0;
    if (getsockname(c->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        c->is_tcp = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
    c->refused_logged_ms = c->rejected_logged_ms = 0;
    /* Without it every idle sibling wakes for each connection and all but
     * one lose the accept race (docs/benchmarks.md); -1 falls back to poll. */
    c->waiter = enr_listen_waiter(c->listen_fd);
    if (c->waiter < 0)
        enr_log(ENR_LOG_INFO, "EPOLLEXCLUSIVE refused: every idle process wakes per connection",
                "error=%s", enr_log_errno(errno));
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_alarm; /* no SA_RESTART: the blocked read must return */
    if (sigaction(SIGALRM, &sa, NULL) != 0) {
        enr_log(ENR_LOG_ERROR, "SIGALRM handler failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    /* No listening socket for libfcgi: after a bad connection it would
     * accept the next one itself, past the allow list (file comment). */
    if (FCGX_InitRequest(c->req, -1, 0) != 0) {
        enr_log(ENR_LOG_ERROR, "FCGX_InitRequest failed", NULL);
        return -1;
    }
    return 0;
}

static void set_timeout(int fd, int opt, unsigned ms, const char *what)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    if (setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) != 0)
        enr_log(ENR_LOG_WARN, what, "error=%s", enr_log_errno(errno));
}

/* At most one line a second for what a hostile peer can repeat at will:
 * the counters have the full story. */
static int log_gate(uint64_t *last_ms)
{
    uint64_t now = enr_mono_ms();

    if (*last_ms != 0 && now - *last_ms < 1000)
        return 0;
    *last_ms = now;
    return 1;
}

/* The allow list: a TCP peer not in it is closed before anything is
 * read from it, and counted.  Returns 1 to go on with fd. */
static int peer_allowed(enr_fcgi_conn *c, int fd, const struct sockaddr_storage *peer,
                        socklen_t len)
{
    char addr[INET6_ADDRSTRLEN] = "?";

    if (c->allow == NULL || enr_allow_match(c->allow, (const struct sockaddr *)peer, len))
        return 1;
    close(fd);
    if (c->refused != NULL)
        ENR_SB_ADD(*c->refused, 1);
    if (log_gate(&c->refused_logged_ms)) {
        const void *a = peer->ss_family == AF_INET6
                            ? (const void *)&((const struct sockaddr_in6 *)peer)->sin6_addr
                            : (const void *)&((const struct sockaddr_in *)peer)->sin_addr;
        inet_ntop(peer->ss_family, a, addr, sizeof addr);
        enr_log(ENR_LOG_WARN, "connection refused: peer not in listen_allow", "peer=%s", addr);
    }
    return 0;
}

void enr_fcgi_conn_free(enr_fcgi_conn *c)
{
    if (c->waiter >= 0)
        close(c->waiter);
    c->waiter = -1;
}

int enr_fcgi_conn_next(enr_fcgi_conn *c, int timeout_ms)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t peer_len;
        int fd, r = 1;
        int draining = c->drain != NULL && *c->drain;
        if (*c->stop)
            return ENR_FCGI_STOP;
        /* Draining: take what is already queued, never wait for more. */
        if (!draining)
            r = enr_listen_wait(c->waiter, c->listen_fd, timeout_ms, c->wait_mask);
        if (r == 0)
            return ENR_FCGI_IDLE;
        if (r < 0) {
            if (errno == EINTR) {
                enr_signals_report(); /* what ended the wait, if it was not ours */
                if (timeout_ms >= 0 && !*c->stop)
                    return ENR_FCGI_IDLE; /* the caller's clock decides what is due */
                continue;
            }
            enr_log(ENR_LOG_ERROR, "poll on listening socket failed", "error=%s",
                    enr_log_errno(errno));
            return ENR_FCGI_STOP;
        }
        peer_len = sizeof peer;
        fd = accept4(c->listen_fd, (struct sockaddr *)&peer, &peer_len, SOCK_CLOEXEC);
        if (fd >= 0) {
            if (c->is_tcp && !peer_allowed(c, fd, &peer, peer_len))
                continue;
            if (c->is_tcp) {
                int one = 1;
                /* One response per connection: Nagle would only delay it. */
                if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
                    enr_log(ENR_LOG_DEBUG, "TCP_NODELAY failed", "error=%s", enr_log_errno(errno));
            }
            return fd;
        }
        if (draining && errno == EAGAIN)
            return ENR_FCGI_STOP;
        switch (errno) {
        case EAGAIN:
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
            continue; /* a sibling won the race, or the peer left */
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM: {
            /* Out of descriptors: back off a little instead of spinning;
             * the fd limits will recycle this worker. */
            struct timespec pause = {0, 10 * 1000000L};
            enr_log(ENR_LOG_ERROR, "accept failed", "error=%s", enr_log_errno(errno));
            nanosleep(&pause, NULL);
            continue;
        }
        default:
            enr_log(ENR_LOG_ERROR, "accept failed", "error=%s", enr_log_errno(errno));
            return ENR_FCGI_STOP;
        }
    }
}

/* Arms the header timer for fd (ms > 0, clearing header_alarm), or
 * disarms it (fd < 0; header_alarm is kept for the caller to read). */
static int header_timer(int fd, unsigned ms)
{
    struct itimerval it;
    int rc;

    memset(&it, 0, sizeof it);
    if (fd >= 0) {
        it.it_value.tv_sec = ms / 1000;
        it.it_value.tv_usec = (suseconds_t)(ms % 1000) * 1000;
        header_alarm = 0;
        header_fd = fd;
    }
    rc = setitimer(ITIMER_REAL, &it, NULL);
    if (fd < 0)
        header_fd = -1; /* after the timer is off: it never sees a stale fd */
    return rc;
}

/* Our half closed first, then whatever the peer still sends is read and
 * dropped until it closes its half: closing with unread input would
 * reset the connection, and the peer could lose the end of the answer.
 * Bounded in time and bytes, unlike libfcgi's own close. */
static void linger_close(int fd, unsigned ms)
{
    uint64_t deadline = enr_mono_ms() + ms;
    size_t dropped = 0;
    char scratch[65536];

    if (shutdown(fd, SHUT_WR) == 0) {
        while (dropped < LINGER_DISCARD_MAX) {
            uint64_t now = enr_mono_ms();
            struct pollfd p = {.fd = fd, .events = POLLIN};
            ssize_t n;
            int r;

            if (now >= deadline)
                break;
            r = poll(&p, 1, (int)(deadline - now));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            n = read(fd, scratch, sizeof scratch);
            if (n <= 0)
                break;
            dropped += (size_t)n;
        }
    }
    close(fd);
}

/* END_REQUEST{FCGI_UNKNOWN_ROLE} for the request libfcgi just read: it
 * knows the AUTHORIZER and FILTER roles by name but would let us answer
 * them as a RESPONDER. */
static void refuse_role(int fd, int request_id)
{
    FCGI_EndRequestRecord rec;
    size_t off = 0;

    memset(&rec, 0, sizeof rec);
    rec.header.version = FCGI_VERSION_1;
    rec.header.type = FCGI_END_REQUEST;
    rec.header.requestIdB1 = (unsigned char)((request_id >> 8) & 0xff);
    rec.header.requestIdB0 = (unsigned char)(request_id & 0xff);
    rec.header.contentLengthB0 = sizeof rec.body;
    rec.body.protocolStatus = FCGI_UNKNOWN_ROLE;
    while (off < sizeof rec) {
        ssize_t n = write(fd, (const char *)&rec + off, sizeof rec - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* the peer is gone: closing is all that is left */
        off += (size_t)n;
    }
}

static void reject_connection(enr_fcgi_conn *c, const char *why, int fcgi_err)
{
    if (c->rejected != NULL)
        ENR_SB_ADD(*c->rejected, 1);
    if (log_gate(&c->rejected_logged_ms))
        enr_log(ENR_LOG_INFO, "FastCGI connection rejected", "reason=%s error=%s", why,
                enr_fcgi_error_value(fcgi_err));
}

int enr_fcgi_conn_open(enr_fcgi_conn *c, int fd)
{
    FCGX_Request *req = c->req;
    int rc;

    set_timeout(fd, SO_RCVTIMEO, c->read_ms, "SO_RCVTIMEO failed");
    /* A write that makes no progress for write_ms fails (EAGAIN) instead
     * of holding the process: see enr_fcgi_conn_abort(). */
    set_timeout(fd, SO_SNDTIMEO, c->write_ms, "SO_SNDTIMEO failed");

    /* keepConnection makes FCGX_Accept_r take our connection instead of
     * calling accept() (it re-reads the flag from BEGIN_REQUEST);
     * detached makes any close libfcgi does a plain close(), without
     * its unbounded wait for the peer. */
    req->ipcFd = fd;
    req->keepConnection = 1;
    req->detached = 1;
    if (header_timer(fd, c->header_ms) != 0)
        enr_log(ENR_LOG_WARN, "header timer failed", "error=%s", enr_log_errno(errno));
    rc = FCGX_Accept_r(req);
    header_timer(-1, 0);
    if (rc < 0) {
        /* Bad or missing BEGIN/PARAMS: libfcgi closed the connection, and
         * without a listening socket of its own it could not take another. */
        reject_connection(c, header_alarm ? "header_timeout" : "malformed", rc);
        FCGX_Free(req, 1);
        return -1;
    }
    if (FCGX_GetError(req->in) != 0) {
        /* libfcgi ends the parameters at a stream error as if they were
         * complete: a cut or garbled request is not served. */
        reject_connection(c, header_alarm ? "header_timeout" : "malformed_params",
                          FCGX_GetError(req->in));
        FCGX_Free(req, 0);
        close(fd);
        req->ipcFd = -1;
        return -1;
    }
    if (req->role != FCGI_RESPONDER) {
        refuse_role(fd, req->requestId);
        reject_connection(c, "unknown_role", 0);
        FCGX_Free(req, 0);
        linger_close(fd, c->linger_ms);
        req->ipcFd = -1;
        return -1;
    }
    /* One request per connection (file comment): FCGX_Finish_r must not
     * close it, we do, boundedly; it still closes on a stream error. */
    req->keepConnection = 1;
    return 0;
}

void enr_fcgi_conn_finish(enr_fcgi_conn *c)
{
    FCGX_Request *req = c->req;

    /* After FCGX_Finish_r the stream is gone. */
    c->input_done = req->in != NULL && FCGX_HasSeenEOF(req->in) == EOF;
    FCGX_Finish_r(req);
}

void enr_fcgi_conn_close(enr_fcgi_conn *c)
{
    int fd = c->req->ipcFd, unread = -1;

    if (fd < 0)
        return;
    c->req->ipcFd = -1;
    /* The linger exists for input still on its way (a body refused on
     * its Content-Length).  With the input read to its end nginx sends
     * nothing more, and waiting for its close would only hold the process
     * until nginx is scheduled: a context switch and three system calls
     * per request on a shared core. */
    if (c->input_done && ioctl(fd, FIONREAD, &unread) == 0 && unread == 0) {
        close(fd);
        return;
    }
    linger_close(fd, c->linger_ms);
}

void enr_fcgi_conn_abort(enr_fcgi_conn *c)
{
    struct linger lg = {1, 0};
    int fd = c->req->ipcFd;

    if (fd < 0)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0)
        enr_log(ENR_LOG_DEBUG, "SO_LINGER failed", "error=%s", enr_log_errno(errno));
    /* nginx then fails the response, and libfcgi's own writes and close
     * that follow return at once. */
    if (shutdown(fd, SHUT_RDWR) != 0)
        enr_log(ENR_LOG_DEBUG, "shutdown failed", "error=%s", enr_log_errno(errno));
}
