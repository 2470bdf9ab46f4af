/*
 * fcgi_mux.c: connections gathered at once until their requests are
 * whole (fcgi_mux.h).
 *
 * Invariants: a peer is in hand from its accept until it is handed over
 * or closed here, never both; at most m->max are in hand; the listening
 * socket is polled only while there is room or a peer to make room
 * from; whole peers are handed over oldest first, before any wait, so a
 * request already read is never left behind a poll that would not
 * report it again.
 */
#include "fcgi/fcgi_mux.h"

#include <errno.h>
#include <fastcgi.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/signals.h"

/* One read of a peer at most: a status request is a few hundred bytes. */
#define MUX_READ 16384u
/* Past the request's bytes, a peer's buffer is given back. */
#define MUX_KEEP 4096u

unsigned enr_fcgi_mux_pending(const enr_fcgi_mux *m)
{
    return m->n;
}

int enr_fcgi_mux_whole(enr_fcgi_mux_peer *p, const unsigned char *d, size_t n)
{
    while (n - p->scanned >= FCGI_HEADER_LEN) {
        const unsigned char *h = d + p->scanned;
        unsigned type = h[1], id = (unsigned)h[2] << 8 | h[3];
        size_t clen = (size_t)h[4] << 8 | h[5], len = FCGI_HEADER_LEN + clen + h[6];

        if (h[0] != FCGI_VERSION_1)
            return 1; /* not ours to judge: the policy refuses it */
        if (n - p->scanned < len)
            return 0;
        if (type == FCGI_BEGIN_REQUEST && !p->begun && clen >= 2) {
            p->begun = 1;
            p->id = id;
            p->role = (unsigned)h[8] << 8 | h[9];
        } else if (p->begun && id == p->id && clen == 0) {
            if (type == FCGI_STDIN)
                return 1;
            /* Another role has no input: its parameters make it whole. */
            if (type == FCGI_PARAMS && p->role != FCGI_RESPONDER)
                return 1;
        }
        p->scanned += len;
    }
    return 0;
}

/* At most one line a second for what a peer can repeat at will. */
static void say(enr_fcgi_mux *m, const char *why)
{
    uint64_t now = enr_mono_ms();

    if (m->logged_ms != 0 && now - m->logged_ms < 1000)
        return;
    m->logged_ms = now;
    enr_log(ENR_LOG_INFO, "FastCGI connection closed before its request was whole",
            "why=%s timed_out=%" PRIu64 " too_large=%" PRIu64 " evicted=%" PRIu64 " failed=%" PRIu64
            " in_hand=%u",
            why, m->timed_out, m->too_large, m->evicted, m->failed, m->n);
}

/* Peer i out of hand (its descriptor is the caller's business). */
static void forget(enr_fcgi_mux *m, unsigned i)
{
    enr_fcgi_mux_peer *p = &m->peer[i];

    enr_buf_shrink(&p->in, MUX_KEEP);
    enr_buf_reset(&p->in);
    /* The last one takes the place: the order of the array is not used. */
    if (i != m->n - 1) {
        enr_buf keep = p->in;
        *p = m->peer[m->n - 1];
        m->peer[m->n - 1].in = keep;
    }
    m->n--;
}

static void drop(enr_fcgi_mux *m, unsigned i)
{
    close(m->peer[i].fd);
    forget(m, i);
}

/* The oldest peer whose request is not whole, or -1. */
static int oldest_unwhole(const enr_fcgi_mux *m)
{
    int best = -1;

    for (unsigned i = 0; i < m->n; i++)
        if (!m->peer[i].whole && (best < 0 || m->peer[i].seq < m->peer[best].seq))
            best = (int)i;
    return best;
}

static void add(enr_fcgi_mux *m, int fd)
{
    enr_fcgi_mux_peer *p;

    if (m->n >= m->max) {
        int old = oldest_unwhole(m);
        if (old < 0) { /* every one whole: the new one waits its turn closed */
            close(fd);
            m->evicted++;
            say(m, "full");
            return;
        }
        drop(m, (unsigned)old);
        m->evicted++;
        say(m, "evicted");
    }
    p = &m->peer[m->n++];
    p->fd = fd;
    p->whole = p->begun = 0;
    p->scanned = 0;
    p->id = p->role = 0;
    p->seq = ++m->seq;
    p->deadline_ms = enr_mono_ms() + m->request_ms;
    p->in.max = ENR_FCGI_MUX_REQUEST_MAX;
    enr_buf_reset(&p->in);
}

/* Reads what peer i sent; 0, or -1 when it was closed. */
static int take(enr_fcgi_mux *m, unsigned i)
{
    enr_fcgi_mux_peer *p = &m->peer[i];
    size_t room = p->in.max - p->in.len, want = room < MUX_READ ? room : MUX_READ;
    ssize_t got;

    if (want == 0 || enr_buf_reserve(&p->in, want) != 0) {
        int over = want == 0 || p->in.over;
        *(over ? &m->too_large : &m->failed) += 1;
        say(m, over ? "too_large" : "out_of_memory");
        drop(m, i);
        return -1;
    }
    got = recv(p->fd, p->in.data + p->in.len, want, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (got <= 0) {
        /* Ended or reset before it was whole: the policy says why. */
        p->whole = 1;
        return 0;
    }
    p->in.len += (size_t)got;
    if (enr_fcgi_mux_whole(p, (const unsigned char *)p->in.data, p->in.len))
        p->whole = 1;
    return 0;
}

static void expire(enr_fcgi_mux *m, uint64_t now)
{
    for (unsigned i = 0; i < m->n;) {
        if (!m->peer[i].whole && now >= m->peer[i].deadline_ms) {
            m->timed_out++;
            say(m, "timeout");
            drop(m, i);
            continue;
        }
        i++;
    }
}

/* The oldest whole peer handed over: its fd, its bytes in m->ready. */
static int hand_over(enr_fcgi_mux *m)
{
    int best = -1, fd;
    enr_fcgi_mux_peer *p;

    for (unsigned i = 0; i < m->n; i++)
        if (m->peer[i].whole && (best < 0 || m->peer[i].seq < m->peer[best].seq))
            best = (int)i;
    if (best < 0)
        return -1;
    p = &m->peer[best];
    fd = p->fd;
    enr_buf_reset(&m->ready);
    /* Swapped, not copied: the peer's buffer becomes the one handed over. */
    {
        enr_buf t = m->ready;
        m->ready = p->in;
        p->in = t;
    }
    forget(m, (unsigned)best);
    return fd;
}

/* Accepts what the listening socket holds, up to what can be taken in
 * one pass.  ENR_FCGI_STOP when the socket failed or stop was asked. */
static int accept_some(enr_fcgi_mux *m)
{
    for (unsigned k = 0; k < ENR_FCGI_MUX_MAX; k++) {
        int fd = enr_fcgi_conn_next(m->conn, 0);

        if (fd == ENR_FCGI_STOP)
            return ENR_FCGI_STOP;
        if (fd < 0)
            return 0;
        add(m, fd);
    }
    return 0;
}

static int wait_ms(const enr_fcgi_mux *m, uint64_t now, int timeout_ms, uint64_t start)
{
    uint64_t t = timeout_ms < 0 ? UINT64_MAX : (uint64_t)timeout_ms;

    t = now - start >= t ? 0 : t - (now - start);
    for (unsigned i = 0; i < m->n; i++) {
        uint64_t d = m->peer[i].deadline_ms;
        uint64_t left = d > now ? d - now : 0;
        if (left < t)
            t = left;
    }
    return t > 60000 ? 60000 : (int)t;
}

int enr_fcgi_mux_next(enr_fcgi_mux *m, int timeout_ms)
{
    uint64_t start = enr_mono_ms();

    if (m->max == 0 || m->max > ENR_FCGI_MUX_MAX)
        m->max = ENR_FCGI_MUX_MAX;
    for (;;) {
        struct pollfd pf[ENR_FCGI_MUX_MAX + 1];
        unsigned idx[ENR_FCGI_MUX_MAX];
        uint64_t now;
        int fd, r, t;
        nfds_t n = 0;

        if (*m->conn->stop)
            return ENR_FCGI_STOP;
        fd = hand_over(m);
        if (fd >= 0)
            return fd;
        now = enr_mono_ms();
        expire(m, now);
        t = wait_ms(m, now, timeout_ms, start);
        if (timeout_ms >= 0 && now - start >= (uint64_t)timeout_ms)
            return ENR_FCGI_IDLE;
        pf[n++] = (struct pollfd){.fd = m->conn->listen_fd, .events = POLLIN};
        for (unsigned i = 0; i < m->n; i++) {
            idx[n - 1] = i;
            pf[n++] = (struct pollfd){.fd = m->peer[i].fd, .events = POLLIN};
        }
        {
            struct timespec ts = {t / 1000, (long)(t % 1000) * 1000000L};
            r = ppoll(pf, n, &ts, m->conn->wait_mask);
        }
        if (r < 0) {
            if (errno != EINTR) {
                enr_log(ENR_LOG_ERROR, "poll on the status connections failed", "error=%s",
                        enr_log_errno(errno));
                return ENR_FCGI_STOP;
            }
            enr_signals_report();
            if (*m->conn->stop)
                return ENR_FCGI_STOP;
            if (timeout_ms >= 0)
                return ENR_FCGI_IDLE; /* the caller's clock decides what is due */
            continue;
        }
        /* Peers first, from the last: take() may move the last into a
         * closed one's place, and that one was read already. */
        for (nfds_t j = n; j-- > 1;)
            if (pf[j].revents != 0)
                (void)take(m, idx[j - 1]);
        if (pf[0].revents != 0 && accept_some(m) == ENR_FCGI_STOP)
            return ENR_FCGI_STOP;
    }
}

void enr_fcgi_mux_free(enr_fcgi_mux *m)
{
    while (m->n > 0)
        drop(m, m->n - 1);
    for (unsigned i = 0; i < ENR_FCGI_MUX_MAX; i++)
        enr_buf_free(&m->peer[i].in);
    enr_buf_free(&m->ready);
}
