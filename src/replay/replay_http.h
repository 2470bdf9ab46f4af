/*
 * replay_http.h: the HTTP/1.1 client side of enrich-replay: one
 * non-blocking keep-alive connection per in-flight request, driven by the
 * caller's epoll loop.
 *
 * Invariants: a connection carries at most one request at a time (no
 * pipelining); its fd is registered with the loop's epoll exactly while it
 * is open; a request that dies on a reused keep-alive connection before a
 * single response byte arrived is resent once on a fresh connection (the
 * server closed an idle connection under us: not the server's fault), any
 * other failure is reported with its kind.
 */
#ifndef ENR_REPLAY_HTTP_H
#define ENR_REPLAY_HTTP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct enr_replay_target {
    char name[64];
    char host[256]; /* for the Host header */
    char path[1024];
    struct sockaddr_storage addr;
    socklen_t addrlen;
} enr_replay_target;

/* Parse "http://host[:port][/path]"; resolves host once. -1 with err. */
int enr_replay_target_parse(enr_replay_target *t, const char *url, char *err, size_t errlen);

enum enr_replay_conn_state {
    ENR_RC_CLOSED,
    ENR_RC_CONNECTING,
    ENR_RC_WRITING,
    ENR_RC_READING,
    ENR_RC_IDLE
};

typedef struct enr_replay_conn {
    int fd;
    int state;
    unsigned target;
    unsigned served; /* requests completed on this connection */
    int retried;
    /* the request */
    uint32_t job;
    int64_t t_due, t_sent; /* CLOCK_MONOTONIC ns */
    int capped;
    char hdr[1400];
    size_t hdr_len;
    const char *body;
    size_t body_len, woff; /* woff counts header then body bytes */
    /* the response */
    char *hb; /* header bytes until CRLFCRLF */
    size_t hb_len, hb_cap;
    int hdone, status, close_after, chunked;
    long long clen;          /* -1: until EOF */
    size_t got;              /* body bytes received */
    int cstate;              /* chunked parser state */
    unsigned long long crem; /* bytes left in the current chunk */
    char cline[24];
    size_t cline_len;
    int keep;          /* keep the body (compare mode) */
    size_t max_answer; /* body bytes an answer may have (kept or not) */
    char *kb;
    size_t kb_len, kb_cap;
} enr_replay_conn;

/* Result of driving a connection. */
enum { ENR_RC_PENDING = 0, ENR_RC_DONE = 1, ENR_RC_FAILED = 2 };

/* Start the request already described in c (job, body, times) on c,
 * opening a connection when c is closed.  Returns PENDING, or FAILED with
 * *err set (a connect error). */
int enr_replay_conn_start(enr_replay_conn *c, int epfd, const enr_replay_target *t, int *err);

/* Handle epoll events on c.  DONE: the response is complete (c->status,
 * c->got; the connection is IDLE or CLOSED).  FAILED: *err has the kind
 * and the connection is closed; an answer whose body grows past
 * c->max_answer bytes fails as ENR_RERR_TOO_LARGE the moment it does, so
 * an endless answer costs neither memory nor the whole timeout. */
int enr_replay_conn_event(enr_replay_conn *c, int epfd, const enr_replay_target *t, uint32_t events,
                          int *err);

/* An idle keep-alive connection became readable: the server closed it (or
 * sent garbage); close it. */
void enr_replay_conn_close(enr_replay_conn *c, int epfd);

int64_t enr_replay_now_ns(void);

#endif
