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
 *    total deadline, the body its own, every wait for the peer is a
 *    poll(2) with the time left (each read also within read_ms), and the
 *    close a linger limit in time and bytes.
 *  - libfcgi never reads the peer: the record reader (fcgi_body.h) does,
 *    and hands libfcgi a checked request (fcgi_guard.h).
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
#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_guard.h"
#include "fcgi/fcgi_stream.h"
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
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    c->is_tcp = 0;
    if (getsockname(c->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        c->is_tcp = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
    c->refused_logged_ms = c->rejected_logged_ms = 0;
    /* Without it every idle sibling wakes for each connection and all but
     * one lose the accept race (docs/benchmarks.md); -1 falls back to poll. */
    c->waiter = enr_listen_waiter(c->listen_fd, c->side_fd);
    if (c->waiter < 0)
        enr_log(ENR_LOG_INFO, "EPOLLEXCLUSIVE refused: every idle process wakes per connection",
                "error=%s", enr_log_errno(errno));
    c->params = (enr_buf){.max = ENR_FCGI_PARAMS_MAX};
    /* Opened now, so that the process's descriptors are the same before
     * its first request as after (the fd limits count them). */
    if (enr_fcgi_pipe_open(c->pipe_fds) != 0) {
        enr_log(ENR_LOG_ERROR, "pipe for libfcgi failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    if (enr_fcgi_read_buf() == NULL) {
        enr_log(ENR_LOG_ERROR, "read buffer allocation failed", NULL);
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
    for (int i = 0; i < 2; i++)
        if (c->pipe_fds[i] >= 0)
            close(c->pipe_fds[i]);
    c->pipe_fds[0] = c->pipe_fds[1] = -1;
    enr_buf_free(&c->params);
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
            r = enr_listen_wait(c->waiter, c->listen_fd, c->side_fd, timeout_ms, c->wait_mask);
        if (r == 0)
            return ENR_FCGI_IDLE;
        if (r == ENR_LISTEN_SIDE)
            return ENR_FCGI_SIDE;
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

/* The reader's I/O on a connection: every read and write by the run's
 * deadline, each read also within read_ms (fcgi_body.h).  drained: the
 * last read took all the socket held (less than asked, or nothing). */
typedef struct conn_io {
    int fd;
    uint64_t deadline_ms;
    unsigned read_ms;
    int drained;
} conn_io;

/* Waits until fd is readable within the time left: 1, or -1 with errno
 * (ETIMEDOUT, or poll's); 0 when a signal came first. */
static int conn_wait(const conn_io *io)
{
    struct pollfd p = {.fd = io->fd, .events = POLLIN};
    uint64_t now = enr_mono_ms(), wait;
    int r;

    if (now >= io->deadline_ms) {
        errno = ETIMEDOUT;
        return -1;
    }
    wait = io->deadline_ms - now < io->read_ms ? io->deadline_ms - now : io->read_ms;
    r = poll(&p, 1, (int)wait);
    if (r == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    return 1;
}

/* A read that drained the socket is followed by a wait, not by a read:
 * the peer (nginx, on the same core) cannot have written more in
 * between, and the read would only fail with EAGAIN (a system call,
 * then the wait, then the read again).  Otherwise the read comes first,
 * and waits only when it finds nothing. */
static ssize_t conn_readv(void *ctx, const struct iovec *iov, int n)
{
    conn_io *io = ctx;
    size_t want = 0;

    for (int i = 0; i < n; i++)
        want += iov[i].iov_len;
    for (;;) {
        struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        ssize_t got;
        int r;

        /* Past the deadline the bytes already there are still taken. */
        if (io->drained && enr_mono_ms() < io->deadline_ms) {
            r = conn_wait(io);
            if (r < 0)
                return -1;
            if (r == 0)
                continue;
        }
        got = recvmsg(io->fd, &m, MSG_DONTWAIT);
        if (got >= 0) {
            io->drained = (size_t)got < want;
            return got;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (io->drained && enr_mono_ms() >= io->deadline_ms) {
            errno = ETIMEDOUT; /* past the deadline, and nothing there */
            return -1;
        }
        io->drained = 1;
    }
}

static int conn_write(void *ctx, const unsigned char *p, size_t n)
{
    const conn_io *io = ctx;
    struct iovec v = {(void *)p, n};

    return enr_fcgi_send(io->fd, &v, 1, io->deadline_ms);
}

/* Reads of the header phase: as libfcgi's stream read, so that little of
 * the body goes through the byte parser's copy before the fast path. */
#define HEAD_READ 8192

static int conn_run(enr_fcgi_conn *c, int fd, enr_buf *body, size_t expect, uint64_t deadline_ms,
                    unsigned read_ms, size_t stage_len)
{
    conn_io io = {fd, deadline_ms, read_ms, 0};
    enr_fcgi_run r = {.rd = conn_readv,
                      .wr = conn_write,
                      .ctx = &io,
                      .expect = expect,
                      .deadline_ms = deadline_ms,
                      .stage = enr_fcgi_read_buf(),
                      .stage_len = stage_len,
                      .pend = c->pend,
                      .pend_len = c->pend_len};
    int rc = enr_fcgi_in_run(&c->in, body, &r);

    c->pend = r.pend;
    c->pend_len = r.pend_len;
    c->input_err = r.err;
    return rc;
}

static void reject_connection(enr_fcgi_conn *c, int reason, int err)
{
    if (c->rejected != NULL)
        ENR_SB_ADD(*c->rejected, 1);
    if (c->rejected_by != NULL && reason >= 0 && reason < ENR_FCGI_REJECT_REASONS)
        ENR_SB_ADD(c->rejected_by[reason], 1);
    if (log_gate(&c->rejected_logged_ms))
        enr_log(ENR_LOG_INFO, "FastCGI connection rejected", "reason=%s error=%s",
                enr_fcgi_reject_name(reason), enr_fcgi_error_value(err));
}

/* Why a run that did not reach its end cut the peer off. */
static int reject_reason(const enr_fcgi_conn *c, int rc)
{
    if (rc == ENR_FCGI_BODY_REJECT)
        return c->in.reason;
    if (c->input_err == ETIMEDOUT)
        return ENR_FCGI_REJECT_TIMEOUT;
    return ENR_FCGI_REJECT_EOF;
}

int enr_fcgi_conn_open(enr_fcgi_conn *c, int fd)
{
    static enr_buf no_body; /* none is read before the parameters end */
    FCGX_Request *req = c->req;
    uint64_t deadline = enr_mono_ms() + c->header_ms;
    int rc;

    c->pend = c->pre;
    c->pend_len = c->pre_len;
    c->pre = NULL;
    c->pre_len = 0;
    c->input_read = c->input_done = 0;
    enr_fcgi_in_init(&c->in, &c->params, c->max_conns);
    rc = conn_run(c, fd, &no_body, SIZE_MAX, deadline, c->header_ms, HEAD_READ);
    if (rc != ENR_FCGI_BODY_HEAD) {
        reject_connection(c, reject_reason(c, rc), c->input_err);
        close(fd);
        return -1;
    }
    if (c->in.role != FCGI_RESPONDER) {
        /* libfcgi knows AUTHORIZER and FILTER by name but would let us
         * answer them as a RESPONDER. */
        unsigned char rec[16];
        struct iovec v = {rec, sizeof rec};

        enr_fcgi_end_request(rec, c->in.request_id, 0, FCGI_UNKNOWN_ROLE);
        if (enr_fcgi_send(fd, &v, 1, enr_mono_ms() + c->write_ms) != 0)
            enr_log(ENR_LOG_DEBUG, "END_REQUEST write failed", "error=%s", enr_log_errno(errno));
        reject_connection(c, ENR_FCGI_REJECT_ROLE, 0);
        linger_close(fd, c->linger_ms);
        return -1;
    }
    if (enr_fcgi_libfcgi_accept(req, c->pipe_fds, fd, c->in.request_id, (int)c->in.role,
                                (int)c->in.flags, (const unsigned char *)c->params.data,
                                c->params.len) != 0) {
        enr_log(ENR_LOG_ERROR, "libfcgi refused a checked request", "error=%s",
                enr_log_errno(errno));
        close(fd);
        return -1;
    }
    return 0;
}

int enr_fcgi_conn_body(enr_fcgi_conn *c, enr_buf *body, size_t max, size_t expect,
                       uint64_t deadline_ms)
{
    int rc;

    c->input_read = 1;
    if (c->in.phase != ENR_FCGI_PH_BODY || c->in.state != ENR_FCGI_IN_HEAD) {
        c->input_err = EINVAL; /* read once per request */
        return ENR_FCGI_BODY_ERROR;
    }
    enr_fcgi_in_body(&c->in, max);
    rc = conn_run(c, c->req->ipcFd, body, expect, deadline_ms, c->read_ms, ENR_FCGI_READ_BUF);
    switch (rc) {
    case ENR_FCGI_BODY_DONE:
    case ENR_FCGI_BODY_TOO_LARGE:
        return rc;
    case ENR_FCGI_BODY_REJECT:
        reject_connection(c, c->in.reason, 0);
        c->input_err = EPROTO;
        return ENR_FCGI_BODY_ERROR;
    case ENR_FCGI_BODY_ABORTED:
        c->input_err = ECONNABORTED;
        return ENR_FCGI_BODY_ERROR;
    default:
        return ENR_FCGI_BODY_ERROR;
    }
}

/* The input nobody read, to its end (fcgi_conn.h: enr_fcgi_conn_finish). */
static void drain_input(enr_fcgi_conn *c)
{
    static enr_buf sink; /* kept: ENR_FCGI_DRAIN_MAX at most */

    if (c->input_read)
        return;
    enr_buf_reset(&sink);
    /* Past the bound: the linger takes the rest. */
    (void)enr_fcgi_conn_body(c, &sink, ENR_FCGI_DRAIN_MAX, SIZE_MAX, enr_mono_ms() + c->linger_ms);
}

void enr_fcgi_conn_finish(enr_fcgi_conn *c)
{
    FCGX_Request *req = c->req;
    int failed;

    drain_input(c);
    c->input_done = c->in.state == ENR_FCGI_IN_END;
    /* Cut off: a peer that sent a record the rules refuse, aborted, or
     * broke its stream is closed at once after the closing records. */
    failed = c->in.state == ENR_FCGI_IN_BAD || c->in.state == ENR_FCGI_IN_ABORTED ||
             (c->in.state == ENR_FCGI_IN_RUN && c->input_read);
    /* libfcgi's own writes (the closing records of a request that got no
     * answer, or what was put in its streams) block: one that makes no
     * progress for write_ms fails instead of holding the process.  Only
     * then is the option set: an answer written by enr_fcgi_write_answer
     * closed both streams, and every write of ours has its own deadline
     * (enr_fcgi_send). */
    if (req->ipcFd >= 0 && ((req->out != NULL && !req->out->wasFCloseCalled) ||
                            (req->err != NULL && !req->err->wasFCloseCalled)))
        set_timeout(req->ipcFd, SO_SNDTIMEO, c->write_ms, "SO_SNDTIMEO failed");
    FCGX_Finish_r(req);
    if (failed && req->ipcFd >= 0) {
        close(req->ipcFd);
        req->ipcFd = -1;
    }
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
