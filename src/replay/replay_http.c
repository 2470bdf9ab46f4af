/*
 * replay_http.c: non-blocking HTTP/1.1 POST over keep-alive connections
 * for enrich-replay (see replay_http.h for the invariants).
 *
 * The response parser is incremental: headers are accumulated until
 * CRLFCRLF (bounded by RC_MAX_HEADER), then the body is framed by
 * Content-Length, chunked encoding, or the end of the connection.  Body
 * bytes are only counted unless the caller asked to keep them, and never
 * more than c->max_answer of them.
 */
#include "replay/replay_http.h"
#include "replay/replay_stats.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RC_MAX_HEADER (64 * 1024)
#define RC_READ_CHUNK (256 * 1024)

enum { CH_SIZE, CH_DATA, CH_DATA_CRLF, CH_TRAILER, CH_DONE };

/* feed()'s answer for a body past c->max_answer (-1 is a framing error). */
#define FEED_TOO_LARGE (-2)

int64_t enr_replay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int enr_replay_target_parse(enr_replay_target *t, const char *url, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "%s: only http:// URLs are supported", url);
        return -1;
    }
    const char *h = url + 7;
    const char *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    if (hl == 0 || hl >= sizeof t->host) {
        snprintf(err, errlen, "%s: bad host", url);
        return -1;
    }
    memcpy(t->host, h, hl);
    snprintf(t->path, sizeof t->path, "%s", slash ? slash : "/");
    char host[256], port[16] = "80";
    snprintf(host, sizeof host, "%s", t->host);
    char *colon = strrchr(host, ':');
    if (colon && !strchr(host, ']')) {
        snprintf(port, sizeof port, "%s", colon + 1);
        *colon = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", url, gai_strerror(rc));
        return -1;
    }
    memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
    t->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    snprintf(t->name, sizeof t->name, "%.63s", t->host);
    return 0;
}

static int set_events(enr_replay_conn *c, int epfd, uint32_t ev, int op)
{
    struct epoll_event e = {.events = ev, .data.ptr = c};
    return epoll_ctl(epfd, op, c->fd, &e);
}

void enr_replay_conn_close(enr_replay_conn *c, int epfd)
{
    if (c->fd >= 0) {
        /* close() alone removes it from the epoll set; an explicit DEL is
         * not needed because the fd is never duplicated. */
        (void)epfd;
        close(c->fd);
    }
    c->fd = -1;
    c->state = ENR_RC_CLOSED;
    c->served = 0;
}

static void reset_response(enr_replay_conn *c)
{
    c->hb_len = 0;
    c->hdone = 0;
    c->status = 0;
    c->close_after = 0;
    c->chunked = 0;
    c->clen = -1;
    c->got = 0;
    c->cstate = CH_SIZE;
    c->crem = 0;
    c->cline_len = 0;
    c->kb_len = 0;
}

static int open_conn(enr_replay_conn *c, int epfd, const enr_replay_target *t, int *err)
{
    c->fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        *err = ENR_RERR_CONNECT;
        return ENR_RC_FAILED;
    }
    int one = 1;
    /* Header and body go out in one writev; Nagle would only delay the
     * last partial segment of a large body. */
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
        enr_replay_conn_close(c, epfd);
        *err = ENR_RERR_CONNECT;
        return ENR_RC_FAILED;
    }
    c->served = 0;
    if (connect(c->fd, (const struct sockaddr *)&t->addr, t->addrlen) < 0 && errno != EINPROGRESS) {
        enr_replay_conn_close(c, epfd);
        *err = ENR_RERR_CONNECT;
        return ENR_RC_FAILED;
    }
    c->state = ENR_RC_CONNECTING;
    if (set_events(c, epfd, EPOLLOUT, EPOLL_CTL_ADD) < 0) {
        enr_replay_conn_close(c, epfd);
        *err = ENR_RERR_CONNECT;
        return ENR_RC_FAILED;
    }
    return ENR_RC_PENDING;
}

static int fail(enr_replay_conn *c, int epfd, int kind, int *err)
{
    enr_replay_conn_close(c, epfd);
    *err = kind;
    return ENR_RC_FAILED;
}

static int do_write(enr_replay_conn *c, int epfd, int *err)
{
    if (c->t_sent == 0)
        c->t_sent = enr_replay_now_ns();
    size_t total = c->hdr_len + c->body_len;
    while (c->woff < total) {
        struct iovec iov[2];
        int n = 0;
        if (c->woff < c->hdr_len) {
            iov[n].iov_base = c->hdr + c->woff;
            iov[n++].iov_len = c->hdr_len - c->woff;
            iov[n].iov_base = (void *)c->body;
            iov[n++].iov_len = c->body_len;
        } else {
            iov[n].iov_base = (void *)(c->body + (c->woff - c->hdr_len));
            iov[n++].iov_len = total - c->woff;
        }
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return set_events(c, epfd, EPOLLOUT | EPOLLIN, EPOLL_CTL_MOD) < 0
                           ? fail(c, epfd, ENR_RERR_RESET, err)
                           : ENR_RC_PENDING;
            if (errno == EINTR)
                continue;
            return -1; /* the caller decides: retry or reset */
        }
        c->woff += (size_t)w;
    }
    c->state = ENR_RC_READING;
    if (set_events(c, epfd, EPOLLIN, EPOLL_CTL_MOD) < 0)
        return fail(c, epfd, ENR_RERR_RESET, err);
    return ENR_RC_PENDING;
}

static void build_header(enr_replay_conn *c, const enr_replay_target *t)
{
    int n = snprintf(c->hdr, sizeof c->hdr,
                     "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nUser-Agent: enrich-replay\r\n\r\n",
                     t->path, t->host, c->body_len);
    c->hdr_len = n < 0 ? 0 : (size_t)n >= sizeof c->hdr ? sizeof c->hdr - 1 : (size_t)n;
}

int enr_replay_conn_start(enr_replay_conn *c, int epfd, const enr_replay_target *t, int *err)
{
    build_header(c, t);
    c->woff = 0;
    c->t_sent = 0;
    c->retried = 0;
    reset_response(c);
    if (c->state == ENR_RC_IDLE) {
        c->state = ENR_RC_WRITING;
        int rc = do_write(c, epfd, err);
        if (rc >= 0)
            return rc;
        /* The idle connection was closed by the server: a fresh one. */
        enr_replay_conn_close(c, epfd);
        c->retried = 1;
        c->woff = 0;
    }
    return open_conn(c, epfd, t, err);
}

/* Counts n more body bytes and keeps them in compare mode; FEED_TOO_LARGE
 * past the cap, -1 out of memory. */
static int keep_bytes(enr_replay_conn *c, const char *p, size_t n)
{
    if (n > c->max_answer - c->got)
        return FEED_TOO_LARGE;
    c->got += n;
    if (!c->keep || n == 0)
        return 0;
    if (c->kb_len + n > c->kb_cap) {
        size_t cap = c->kb_cap ? c->kb_cap : 65536;
        while (cap < c->kb_len + n)
            cap *= 2;
        char *nb = realloc(c->kb, cap);
        if (!nb)
            return -1;
        c->kb = nb;
        c->kb_cap = cap;
    }
    memcpy(c->kb + c->kb_len, p, n);
    c->kb_len += n;
    return 0;
}

/* Parse the status line and headers in c->hb[0, len). */
static int parse_headers(enr_replay_conn *c, size_t len)
{
    const char *p = c->hb, *end = c->hb + len;
    if (len < 12 || memcmp(p, "HTTP/1.", 7) != 0)
        return -1;
    int http10 = p[7] == '0';
    c->status = atoi(p + 9);
    if (c->status < 100 || c->status > 999)
        return -1;
    c->close_after = http10;
    const char *line = memchr(p, '\n', len);
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        size_t ll = (size_t)(eol - line);
        const char *colon = memchr(line, ':', ll);
        if (colon) {
            size_t kl = (size_t)(colon - line);
            const char *v = colon + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = (size_t)(eol - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            if (kl == 14 && strncasecmp(line, "content-length", 14) == 0)
                c->clen = strtoll(v, NULL, 10);
            else if (kl == 17 && strncasecmp(line, "transfer-encoding", 17) == 0)
                c->chunked = vl >= 7 && strncasecmp(v + vl - 7, "chunked", 7) == 0;
            else if (kl == 10 && strncasecmp(line, "connection", 10) == 0) {
                if (vl == 5 && strncasecmp(v, "close", 5) == 0)
                    c->close_after = 1;
                else if (vl == 10 && strncasecmp(v, "keep-alive", 10) == 0)
                    c->close_after = 0;
            }
        }
        line = eol;
    }
    if (c->chunked)
        c->clen = -1;
    if (c->status == 204 || c->status == 304 || c->status < 200)
        c->clen = 0;
    return 0;
}

/* Feed body bytes; 1 when the body is complete, -1 on a framing error,
 * FEED_TOO_LARGE past the cap. */
static int feed_body(enr_replay_conn *c, const char *p, size_t n)
{
    int k;

    if (!c->chunked) {
        if (c->clen >= 0 && (long long)(c->got + n) > c->clen)
            n = (size_t)(c->clen - (long long)c->got); /* ignore trailing garbage */
        if ((k = keep_bytes(c, p, n)) < 0)
            return k;
        return c->clen >= 0 && (long long)c->got == c->clen;
    }
    const char *end = p + n;
    while (p < end) {
        switch (c->cstate) {
        case CH_SIZE:
        case CH_DATA_CRLF:
        case CH_TRAILER: {
            char ch = *p++;
            if (ch != '\n') {
                if (c->cline_len < sizeof c->cline - 1)
                    c->cline[c->cline_len++] = ch;
                continue;
            }
            c->cline[c->cline_len] = 0;
            size_t ll = c->cline_len;
            c->cline_len = 0;
            if (c->cstate == CH_DATA_CRLF) {
                c->cstate = CH_SIZE;
                continue;
            }
            if (c->cstate == CH_TRAILER) {
                if (ll == 0 || (ll == 1 && c->cline[0] == '\r'))
                    return 1;
                continue;
            }
            char *ep;
            c->crem = strtoull(c->cline, &ep, 16);
            if (ep == c->cline)
                return -1;
            c->cstate = c->crem == 0 ? CH_TRAILER : CH_DATA;
            break;
        }
        case CH_DATA: {
            size_t take = (size_t)(end - p) < c->crem ? (size_t)(end - p) : (size_t)c->crem;
            if ((k = keep_bytes(c, p, take)) < 0)
                return k;
            c->crem -= take;
            p += take;
            if (c->crem == 0)
                c->cstate = CH_DATA_CRLF;
            break;
        }
        default:
            return 1;
        }
    }
    return 0;
}

/* Feed received bytes; 1 when the response is complete, -1 on error. */
static int feed(enr_replay_conn *c, const char *p, size_t n)
{
    if (!c->hdone) {
        if (c->hb_len + n > c->hb_cap) {
            size_t cap = c->hb_cap ? c->hb_cap : 4096;
            while (cap < c->hb_len + n && cap < RC_MAX_HEADER)
                cap *= 2;
            size_t want = c->hb_len + n < RC_MAX_HEADER ? c->hb_len + n : RC_MAX_HEADER;
            if (cap < want)
                cap = want;
            char *nb = realloc(c->hb, cap);
            if (!nb)
                return -1;
            c->hb = nb;
            c->hb_cap = cap;
        }
        size_t take = c->hb_cap - c->hb_len < n ? c->hb_cap - c->hb_len : n;
        size_t from = c->hb_len > 3 ? c->hb_len - 3 : 0;
        memcpy(c->hb + c->hb_len, p, take);
        c->hb_len += take;
        const char *e = memmem(c->hb + from, c->hb_len - from, "\r\n\r\n", 4);
        if (!e)
            return c->hb_len >= RC_MAX_HEADER ? -1 : 0;
        size_t hl = (size_t)(e - c->hb) + 4;
        if (parse_headers(c, hl) < 0)
            return -1;
        c->hdone = 1;
        size_t rest = c->hb_len - hl; /* body bytes that came with the header */
        if (c->status < 200 && c->status != 101) {
            /* 1xx interim: start over with what follows. */
            char tmp[RC_MAX_HEADER];
            memcpy(tmp, c->hb + hl, rest);
            size_t more = n - take;
            reset_response(c);
            int r = rest ? feed(c, tmp, rest) : 0;
            return r != 0 || !more ? r : feed(c, p + take, more);
        }
        if (c->clen == 0)
            return 1;
        int r = rest ? feed_body(c, c->hb + hl, rest) : 0;
        if (r != 0 || take == n)
            return r;
        p += take;
        n -= take;
    }
    return feed_body(c, p, n);
}

int enr_replay_conn_event(enr_replay_conn *c, int epfd, const enr_replay_target *t, uint32_t events,
                          int *err)
{
    static char buf[RC_READ_CHUNK];
    if (c->state == ENR_RC_CONNECTING) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0)
            return fail(c, epfd, ENR_RERR_CONNECT, err);
        c->state = ENR_RC_WRITING;
        int rc = do_write(c, epfd, err);
        return rc < 0 ? fail(c, epfd, ENR_RERR_RESET, err) : rc;
    }
    if (c->state == ENR_RC_WRITING && (events & EPOLLOUT) && !(events & (EPOLLIN | EPOLLERR))) {
        int rc = do_write(c, epfd, err);
        return rc < 0 ? fail(c, epfd, ENR_RERR_RESET, err) : rc;
    }
    /* READING, or WRITING with the server answering early (413...). */
    for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (c->state == ENR_RC_WRITING && (events & EPOLLOUT)) {
                    int rc = do_write(c, epfd, err);
                    return rc < 0 ? fail(c, epfd, ENR_RERR_RESET, err) : rc;
                }
                return ENR_RC_PENDING;
            }
        }
        if (r <= 0) {
            /* The end of the connection. */
            if (c->hdone && c->clen < 0 && !c->chunked) {
                enr_replay_conn_close(c, epfd);
                return ENR_RC_DONE;
            }
            int nothing = !c->hdone && c->hb_len == 0;
            if (nothing && c->served > 0 && !c->retried) {
                /* A kept-alive connection closed by the server while our
                 * request was on the way: resend once on a fresh one. */
                enr_replay_conn_close(c, epfd);
                c->retried = 1;
                c->woff = 0;
                reset_response(c);
                int rc = open_conn(c, epfd, t, err);
                return rc;
            }
            return fail(c, epfd, r == 0 ? ENR_RERR_EOF : ENR_RERR_RESET, err);
        }
        int f = feed(c, buf, (size_t)r);
        if (f < 0)
            return fail(c, epfd, f == FEED_TOO_LARGE ? ENR_RERR_TOO_LARGE : ENR_RERR_PROTOCOL, err);
        if (f == 1) {
            c->served++;
            /* An answer before the whole body went out (413, or a server
             * that discards bodies): the stream is out of step, close it. */
            if (c->close_after || c->woff < c->hdr_len + c->body_len) {
                enr_replay_conn_close(c, epfd);
            } else {
                c->state = ENR_RC_IDLE;
                if (set_events(c, epfd, EPOLLIN, EPOLL_CTL_MOD) < 0)
                    enr_replay_conn_close(c, epfd);
            }
            return ENR_RC_DONE;
        }
        if ((size_t)r < sizeof buf)
            return ENR_RC_PENDING; /* drained; level-triggered epoll calls again */
    }
}
