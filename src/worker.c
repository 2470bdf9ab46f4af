/*
 * worker.c: one FastCGI worker: accept, route, read the body, run the
 * engine (and the upstream client), answer, account, maybe recycle.
 *
 * Invariants:
 *  - Signals are blocked except while the worker waits for a connection
 *    (enr_listen_wait() with the unblocked mask), so a TERM from the
 *    master never interrupts a request half way: it is seen between
 *    requests, and a request in hand is always answered (graceful reload
 *    and drain).
 *  - The worker accepts connections itself (accept4, SOCK_CLOEXEC, on a
 *    non-blocking socket shared with its siblings) and hands the
 *    connection to libfcgi, so a lost accept race costs an EAGAIN, never
 *    a process blocked in accept() that cannot be told to stop.
 *  - Engine, Unicode, upstream objects and the body/output buffers are
 *    created once and reused: a steady-state request does not allocate
 *    in this file.  Buffers one request grew past ENR_KEEP_BYTES are
 *    freed after it (engine.h), so a huge request costs its memory once.
 *  - Only this worker writes the live and cumulative fields of its slot.
 *  - A connection carries one request and is closed after it, whatever
 *    FCGI_KEEP_CONN says (docs/pool.md: a kept connection would pin a
 *    prefork worker); the worker closes it itself, after a bounded
 *    linger, so no descriptor outlives its request.
 *  - libfcgi never accepts on its own (its request has no listening
 *    socket): every connection passes next_connection(), where a TCP
 *    peer is checked against listen_allow before a byte is read.
 *  - No peer holds a worker without bound: the header phase has a total
 *    timer, each body read a timeout, the close a linger limit.
 */
#include "worker.h"

#include <errno.h>
#include <fastcgi.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "allow.h"
#include "buf.h"
#include "capture.h"
#include "curlapi.h"
#include "engine.h"
#include "fcgi_stream.h"
#include "listen.h"
#include "log.h"
#include "procstat.h"
#include "upstream.h"
#include "clock.h"

#define BODY_READ_CHUNK 65536

static volatile sig_atomic_t worker_stop;    /* TERM: end after the request in hand */
static volatile sig_atomic_t worker_drain;   /* USR2: also serve what waits in the backlog */
static volatile sig_atomic_t header_alarm;   /* the header timer fired */
static volatile sig_atomic_t header_fd = -1; /* the connection it guards */

static void on_signal(int sig)
{
    if (sig == SIGUSR2)
        worker_drain = 1;
    else if (sig == SIGALRM) {
        /* A signal only interrupts a call that blocks, and a peer that
         * floods libfcgi with records it answers itself (management
         * records) never lets it block: shutting the connection down
         * ends the reading either way (shutdown is async-signal-safe). */
        header_alarm = 1;
        if (header_fd >= 0)
            shutdown(header_fd, SHUT_RDWR);
    } else
        worker_stop = 1;
}

/* A libfcgi error code as a log value: an errno (positive), one of its
 * own FCGX_* codes, or anything else it returns (a bare -1). */
static const char *fcgi_error_value(int e)
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

typedef struct worker {
    const enr_config *cfg;
    enr_sb_slot *slot;
    int listen_fd;
    int waiter; /* enr_listen_waiter(): one idle worker woken per connection */
    int is_tcp;
    enr_engine *engine;
    enr_upstream *upstream;
    enr_upstream_stats up_published; /* its counters as last added to the slot */
    enr_capture *capture;            /* NULL: off */
    uint64_t arrival_us;             /* the request in hand, CLOCK_REALTIME (capture) */
    enr_batch batch;
    enr_buf body, out;
    FCGX_Request req;
    sigset_t wait_mask; /* the mask while waiting for a connection */
    unsigned long served;
    unsigned long max_served; /* max_requests + this worker's jitter; 0 = never */
    uint64_t refused_logged_ms, rejected_logged_ms; /* log_gate() */
#ifdef ENR_TEST_HOOKS
    unsigned leak_fds, leak_kb;
#endif
} worker;

/* The upstream client counts in its own struct; the worker owns the slot
 * and publishes them there: what was added since the last publication for
 * the counters (the slot's are cumulative over its processes), the value
 * for the breaker state and the descriptors. */
static void publish_upstream(worker *w)
{
    const enr_upstream_stats *now = enr_upstream_stats_of(w->upstream);
    enr_upstream_stats *was = &w->up_published;
    enr_sb_slot *s = w->slot;

#define UP_PUBLISH(field, f) ENR_SB_ADD(s->field, now->f - was->f)
    UP_PUBLISH(up_calls, calls);
    UP_PUBLISH(up_retries, retries);
    UP_PUBLISH(up_cache_hits, cache_hits);
    UP_PUBLISH(up_cache_misses, cache_misses);
    UP_PUBLISH(up_fail_timeout, fail_timeout);
    UP_PUBLISH(up_fail_connect, fail_connect);
    UP_PUBLISH(up_fail_status, fail_status);
    UP_PUBLISH(up_fail_body, fail_body);
    UP_PUBLISH(up_fail_too_large, fail_too_large);
    UP_PUBLISH(up_skip_deadline, skip_deadline);
    UP_PUBLISH(up_breaker_opens, breaker_opens);
#undef UP_PUBLISH
    ENR_SB_SET(s->up_breaker_state, (uint64_t)now->breaker_state);
    ENR_SB_SET(s->up_fds, now->fds);
    *was = *now;
}

/* ---- test hooks: compiled only with -DENR_TEST_HOOKS ---------------- */
#ifdef ENR_TEST_HOOKS
static void hooks_init(worker *w)
{
    const char *leak = getenv("ENRICHD_TEST_LEAK");
    const char *crash = getenv("ENRICHD_TEST_CRASH_FILE");

    if (leak != NULL) {
        const char *p = strstr(leak, "fd:");
        const char *m = strstr(leak, "mem:");
        if (p)
            w->leak_fds = (unsigned)strtoul(p + 3, NULL, 10);
        if (m)
            w->leak_kb = (unsigned)strtoul(m + 4, NULL, 10);
    }
    /* A worker that dies right after start, while the file exists: the
     * crash-loop guard's test case. */
    if (crash != NULL && access(crash, F_OK) == 0)
        abort();
}

/* A worker slow to start, so a test can kill the master before the
 * worker's prctl(PR_SET_PDEATHSIG) (the getppid() check's case). */
static void hooks_start_delay(void)
{
    const char *v = getenv("ENRICHD_TEST_START_DELAY_MS");
    if (v != NULL) {
        unsigned long ms = strtoul(v, NULL, 10);
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}

static void hooks_leak(worker *w)
{
    for (unsigned i = 0; i < w->leak_fds; i++)
        if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0)
            break;
    if (w->leak_kb) {
        static void *volatile leaked; /* a chain the compiler cannot elide */
        char *p = malloc((size_t)w->leak_kb * 1024);
        if (p != NULL) {
            memset(p, 0x5a, (size_t)w->leak_kb * 1024); /* touched, so resident */
            memcpy(p, (const void *)&leaked, sizeof(void *));
            leaked = p;
        }
    }
}

/* A build that differs on purpose, for the canary test: with
 * ENRICHD_TEST_PLANT=odd, an answer of odd length gets the first digit of
 * its first hash changed, so the expected differences can be counted from
 * the answers of a correct build. */
static void hooks_plant(worker *w)
{
    const char *plant = getenv("ENRICHD_TEST_PLANT");

    if (plant != NULL && strcmp(plant, "odd") == 0 && w->out.len > 10 && (w->out.len & 1))
        w->out.data[9] = w->out.data[9] == 'x' ? 'y' : 'x';
}

static void hooks_sleep(FCGX_Request *req, const char *param)
{
    const char *v = FCGX_GetParam(param, req->envp);
    if (v != NULL) {
        struct timespec ts = {0, 0};
        unsigned long ms = strtoul(v, NULL, 10);
        ts.tv_sec = (time_t)(ms / 1000);
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}
#endif

/* ---- answering ---------------------------------------------------------- */

/* A write that failed (nginx gone, or no progress for write_timeout_ms):
 * the rest of the answer can never arrive, so the connection is reset
 * rather than closed in order.  nginx then fails the response instead of
 * passing a cut body on as whole, and libfcgi's own writes and close that
 * follow return at once. */
static void abort_connection(worker *w)
{
    struct linger lg = {1, 0};
    int fd = w->req.ipcFd;

    if (fd < 0)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0)
        enr_log(ENR_LOG_DEBUG, "SO_LINGER failed", "error=%s", enr_log_errno(errno));
    if (shutdown(fd, SHUT_RDWR) != 0)
        enr_log(ENR_LOG_DEBUG, "shutdown failed", "error=%s", enr_log_errno(errno));
}

/* Writes head + body; returns 0, or -1 when the caller is gone (the
 * connection is then aborted).  From here on the request is in its write
 * phase, which the master times by write_timeout_ms instead of
 * request_timeout_ms. */
static int send_response(worker *w, int status, const char *ctype, const char *extra,
                         const char *body, size_t len)
{
    char head[256];
    int n;

    ENR_SB_SET(w->slot->write_start_mono_ms, enr_mono_ms());
    n = snprintf(head, sizeof head,
                 "Status: %d\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status, ctype,
                 len, extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    /* 64 KB records in one writev, straight from body (fcgi_stream.h). */
    if (enr_fcgi_write_stdout(&w->req, head, (size_t)n, body, len, w->cfg->write_timeout_ms) == 0)
        return 0;
    enr_log(ENR_LOG_WARN, "answer write failed: connection reset", "status=%d bytes=%zu error=%s",
            status, len, enr_log_errno(errno));
    abort_connection(w);
    return -1;
}

static int send_json_error(worker *w, int status, const char *msg)
{
    char body[160];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg);
    return send_response(w, status, "application/json", NULL, body, (size_t)n);
}

/* nginx closes its end when the client goes away (fastcgi_ignore_client_abort
 * off): a hung-up connection means nobody will read the answer. */
static int caller_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};

    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static int is_engine_route(const char *uri)
{
    return uri != NULL && (strcmp(uri, "/") == 0 || strcmp(uri, "/v1/enrich") == 0 ||
                           strcmp(uri, "/normalize") == 0);
}

/* Reads stdin up to max_body_bytes: 0, 1 when too large, -1 on error. */
static int read_body_into(worker *w, size_t max)
{
    for (;;) {
        int got;
        if (enr_buf_reserve(&w->body, BODY_READ_CHUNK) != 0)
            return -1;
        got = FCGX_GetStr(w->body.data + w->body.len, BODY_READ_CHUNK, w->req.in);
        if (got < 0)
            return -1;
        w->body.len += (size_t)got;
        if (w->body.len > max)
            return 1;
        if (got < BODY_READ_CHUNK)
            break;
    }
    if (FCGX_GetError(w->req.in) != 0)
        return -1;
    return 0;
}

/* The body moves through a wider libfcgi buffer (fcgi_stream.h): reads
 * of up to 256 KB instead of 8 KB; a stream that cannot be widened keeps
 * libfcgi's own. */
static int read_body(worker *w)
{
    size_t max = w->cfg->max_body_bytes;
    const char *cl = FCGX_GetParam("CONTENT_LENGTH", w->req.envp);

    enr_buf_reset(&w->body);
    if (cl != NULL && cl[0] != '\0') {
        unsigned long long n = strtoull(cl, NULL, 10);
        if (n > max)
            return 1;
        if (enr_buf_reserve(&w->body, (size_t)n + 1) != 0)
            return -1;
    }
    enr_fcgi_reader_widen(w->req.in);
    return read_body_into(w, max);
}

typedef struct outcome {
    int status;
    uint64_t rec_in, rec_out, degraded;
} outcome;

static void handle_request(worker *w, outcome *o, uint64_t start_mono)
{
    const enr_config *c = w->cfg;
    const char *method = FCGX_GetParam("REQUEST_METHOD", w->req.envp);
    const char *uri = FCGX_GetParam("DOCUMENT_URI", w->req.envp);
    uint64_t deadline, margin, now;
    enr_error err;
    size_t degraded = 0;
    int r;

    if (uri == NULL)
        uri = FCGX_GetParam("SCRIPT_NAME", w->req.envp);
    if (!is_engine_route(uri)) {
        o->status = 404;
        send_json_error(w, 404, "not found");
        return;
    }
    if (method == NULL || strcmp(method, "POST") != 0) {
        o->status = 405;
        send_response(w, 405, "text/plain", "Allow: POST\r\n", "method not allowed", 18);
        return;
    }
    r = read_body(w);
    if (r != 0) {
        if (r > 0) {
            char msg[64];
            o->status = 413;
            snprintf(msg, sizeof msg, "body larger than %zu bytes", c->max_body_bytes);
            send_json_error(w, 413, msg);
        } else if (w->body.oom) {
            /* Our failure, not the client's: answered like any other
             * allocation failure, and counted as a 5xx. */
            enr_log(ENR_LOG_ERROR, "request body read failed: out of memory", "bytes=%zu",
                    w->body.len);
            o->status = 503;
            send_json_error(w, 503, "out of memory");
        } else {
            /* nginx gave up sending the body: nobody to answer */
            enr_log(ENR_LOG_WARN, "request body read failed", "error=%s",
                    fcgi_error_value(FCGX_GetError(w->req.in)));
            o->status = 499;
        }
        return;
    }
#ifdef ENR_TEST_HOOKS
    hooks_sleep(&w->req, "HTTP_X_TEST_HANG_MS"); /* a stuck request: the master's job */
#endif
    enr_batch_reset(&w->batch);
    enr_engine_set_max_output(w->engine, c->max_output_bytes);
    r = enr_parse(w->engine, w->body.data, w->body.len, c->max_records, &w->batch, &err);
    /* Before the body goes: capture copies a sampled one (capture.h). */
    enr_capture_offer(w->capture, w->body.data, w->body.len, w->arrival_us, r == 0);
    /* The records hold copies of what they need: a big body goes now,
     * before the output is built next to it. */
    enr_buf_shrink(&w->body, ENR_KEEP_BYTES);
    if (r != 0) {
        enr_buf_reset(&w->out);
        enr_error_json(&err, &w->out);
        o->status = err.status;
        if (w->out.oom) {
            send_json_error(w, err.status, "invalid request");
            return;
        }
        send_response(w, err.status, "application/json", NULL, w->out.data, w->out.len);
        return;
    }
    o->rec_in = w->batch.elements;
    o->rec_out = w->batch.n;

    margin = c->request_timeout_ms / 10;
    if (margin > ENR_WORKER_ANSWER_MARGIN_MS)
        margin = ENR_WORKER_ANSWER_MARGIN_MS;
    deadline = start_mono + c->request_timeout_ms - margin;
    if (w->upstream != NULL && w->batch.n > 0) {
        uint64_t up_deadline = enr_mono_ms() + c->upstream_timeout_ms;
        if (caller_gone(w->req.ipcFd)) {
            enr_log(ENR_LOG_INFO, "caller gone before upstream call", NULL);
            o->status = 499;
            return;
        }
        degraded = enr_upstream_enrich(w->upstream, &w->batch,
                                       up_deadline < deadline ? up_deadline : deadline);
        publish_upstream(w);
    }
#ifdef ENR_TEST_HOOKS
    hooks_sleep(&w->req, "HTTP_X_TEST_SLEEP_MS"); /* slow work: the worker's own deadline */
#endif
    now = enr_mono_ms();
    if (now >= deadline) {
        o->status = 503;
        o->rec_in = o->rec_out = 0;
        send_json_error(w, 503, "request deadline exceeded");
        return;
    }
    if (caller_gone(w->req.ipcFd)) {
        enr_log(ENR_LOG_INFO, "caller gone before the answer", NULL);
        o->status = 499;
        o->rec_in = o->rec_out = 0;
        return;
    }
    enr_buf_reset(&w->out);
    if (enr_emit(w->engine, &w->batch, enr_wall_ms, &w->out, &err) != 0) {
        /* past max_output_bytes: the cut output is dropped, never sent */
        o->status = err.status;
        o->rec_in = o->rec_out = 0;
        enr_buf_reset(&w->out);
        enr_error_json(&err, &w->out);
        if (w->out.oom)
            send_json_error(w, err.status, "output larger than max_output_bytes");
        else
            send_response(w, err.status, "application/json", NULL, w->out.data, w->out.len);
        return;
    }
    if (w->out.oom) {
        o->status = 503;
        o->rec_in = o->rec_out = 0;
        send_json_error(w, 503, "out of memory");
        return;
    }
#ifdef ENR_TEST_HOOKS
    hooks_plant(w);
#endif
    o->status = 200;
    o->degraded = degraded;
    {
        char extra[64] = "";
        if (degraded > 0)
            snprintf(extra, sizeof extra, "X-Enrich-Degraded: %zu\r\n", degraded);
        send_response(w, 200, "application/x-ndjson", extra, w->out.data, w->out.len);
    }
}

static void handle(worker *w, outcome *o, uint64_t start_mono)
{
    handle_request(w, o, start_mono);
    /* One huge request must not leave its buffers for the worker's life
     * (nor get it recycled for rss): what grew past ENR_KEEP_BYTES goes. */
    enr_buf_shrink(&w->body, ENR_KEEP_BYTES);
    enr_buf_shrink(&w->out, ENR_KEEP_BYTES);
    enr_engine_shrink(w->engine, &w->batch, ENR_KEEP_BYTES);
}

/* The request id nginx passes (REQUEST_ID, nginx/enrichd.conf), else the
 * client's X-Request-ID header, for the scoreboard and logs. */
static const char *request_id(FCGX_Request *req)
{
    const char *id = FCGX_GetParam("REQUEST_ID", req->envp);
    if (id == NULL)
        id = FCGX_GetParam("HTTP_X_REQUEST_ID", req->envp);
    return id;
}

static void serve_one(worker *w)
{
    uint64_t t0 = enr_mono_us(), t0_ms = enr_mono_ms(), lat;
    const char *rid = request_id(&w->req);
    outcome o = {0};
    int slow;

    w->arrival_us = enr_wall_us();
    enr_sb_request_start(w->slot, rid, t0_ms, w->arrival_us / 1000);
    handle(w, &o, t0_ms);
    lat = enr_mono_us() - t0;
    slow = w->cfg->slow_request_ms && lat >= (uint64_t)w->cfg->slow_request_ms * 1000;
    if (slow) {
        char q[96];
        enr_log(ENR_LOG_WARN, "slow request", "req_id=%s status=%d ms=%" PRIu64 " records=%" PRIu64,
                enr_log_quote(q, sizeof q, rid ? rid : "-"), o.status, lat / 1000, o.rec_in);
    }
    /* The answer is complete before the connection closes (FCGX_Finish_r). */
    FCGX_Finish_r(&w->req);
    w->served++;
    enr_sb_request_done(w->slot, o.status, o.rec_in, o.rec_out, o.degraded, lat, slow);
    ENR_SB_SET(w->slot->state, ENR_WS_IDLE);
#ifdef ENR_TEST_HOOKS
    hooks_leak(w);
#endif
}

/* After a request: over a soft limit, finish gracefully (nothing is in
 * hand now).  Returns the exit reason, or ENR_EXIT_NONE to go on. */
static int soft_limit_reached(worker *w)
{
    const enr_config *c = w->cfg;

    if (w->max_served && w->served >= w->max_served)
        return ENR_EXIT_MAX_REQUESTS;
    if (c->rss_soft_mb) {
        /* The peak RSS bounds the current one: while the peak is under the
         * limit, one getrusage() replaces reading /proc (~10 us here). */
        struct rusage ru;
        unsigned long soft_kb = (unsigned long)c->rss_soft_mb * 1024;
        long kb;

        if (getrusage(RUSAGE_SELF, &ru) != 0 || (unsigned long)ru.ru_maxrss > soft_kb) {
            kb = enr_proc_rss_kb(0);
            if (kb > 0 && (unsigned long)kb > soft_kb)
                return ENR_EXIT_RSS;
        }
    }
    if (c->fd_soft) {
        long n = enr_proc_fd_count(0);
        if (n > 0 && (unsigned long)n > c->fd_soft)
            return ENR_EXIT_FD;
    }
    return ENR_EXIT_NONE;
}

/* A write to nginx that makes no progress for write_timeout_ms fails
 * (EAGAIN) instead of holding the worker: see abort_connection(). */
static void set_write_timeout(worker *w, int fd)
{
    struct timeval tv = {(time_t)(w->cfg->write_timeout_ms / 1000),
                         (suseconds_t)(w->cfg->write_timeout_ms % 1000) * 1000};

    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        enr_log(ENR_LOG_WARN, "SO_SNDTIMEO failed", "error=%s", enr_log_errno(errno));
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

/* listen_allow: a TCP peer not in the list is closed before anything is
 * read from it, and counted.  Returns 1 to go on with fd. */
static int peer_allowed(worker *w, int fd, const struct sockaddr_storage *peer, socklen_t len)
{
    char addr[INET6_ADDRSTRLEN] = "?";

    if (enr_allow_match(&w->cfg->listen_allow_nets, (const struct sockaddr *)peer, len))
        return 1;
    close(fd);
    ENR_SB_ADD(w->slot->listen_refused, 1);
    if (log_gate(&w->refused_logged_ms)) {
        const void *a = peer->ss_family == AF_INET6
                            ? (const void *)&((const struct sockaddr_in6 *)peer)->sin6_addr
                            : (const void *)&((const struct sockaddr_in *)peer)->sin_addr;
        inet_ntop(peer->ss_family, a, addr, sizeof addr);
        enr_log(ENR_LOG_WARN, "connection refused: peer not in listen_allow", "peer=%s", addr);
    }
    return 0;
}

/* Waits for a connection and accepts it; -1 when told to stop. */
static int next_connection(worker *w)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t peer_len;
        int fd, r = 1;
        if (worker_stop)
            return -1;
        /* Draining: take what is already queued, never wait for more. */
        if (!worker_drain)
            r = enr_listen_wait(w->waiter, w->listen_fd, &w->wait_mask);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            enr_log(ENR_LOG_ERROR, "poll on listening socket failed", "error=%s",
                    enr_log_errno(errno));
            return -1;
        }
        peer_len = sizeof peer;
        fd = accept4(w->listen_fd, (struct sockaddr *)&peer, &peer_len, SOCK_CLOEXEC);
        if (fd >= 0) {
            if (w->is_tcp && !peer_allowed(w, fd, &peer, peer_len))
                continue;
            if (w->is_tcp) {
                int one = 1;
                /* One response per connection: Nagle would only delay it. */
                if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
                    enr_log(ENR_LOG_DEBUG, "TCP_NODELAY failed", "error=%s", enr_log_errno(errno));
            }
            return fd;
        }
        if (worker_drain && errno == EAGAIN)
            return -1;
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
            struct timespec ts = {0, 10 * 1000000L};
            enr_log(ENR_LOG_ERROR, "accept failed", "error=%s", enr_log_errno(errno));
            nanosleep(&ts, NULL);
            continue;
        }
        default:
            enr_log(ENR_LOG_ERROR, "accept failed", "error=%s", enr_log_errno(errno));
            return -1;
        }
    }
}

/* ---- one connection ------------------------------------------------------ */

/* Bytes read and dropped while lingering.  A body refused on its
 * Content-Length (413 past max_body_bytes) is still on its way, up to
 * nginx's client_max_body_size: a close with it unread would reset the
 * connection before nginx has read the 413 (it answered 502 on the
 * sanitizer build's slower timing).  ENR_WORKER_LINGER_MS bounds the time
 * whatever a peer sends. */
#define LINGER_DISCARD_MAX (16u << 20)

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
static void linger_close(int fd)
{
    uint64_t deadline = enr_mono_ms() + ENR_WORKER_LINGER_MS;
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

static void reject_connection(worker *w, const char *why, int fcgi_err)
{
    ENR_SB_ADD(w->slot->fcgi_rejected, 1);
    if (log_gate(&w->rejected_logged_ms))
        enr_log(ENR_LOG_INFO, "FastCGI connection rejected", "reason=%s error=%s", why,
                fcgi_error_value(fcgi_err));
}

/* Reads the request on fd and serves it; fd is closed on return. */
static void serve_connection(worker *w, int fd)
{
    unsigned read_ms = ENR_WORKER_READ_TIMEOUT_MS;
    struct timeval tv;
    int rc;

    if (read_ms > w->cfg->request_timeout_ms / 2)
        read_ms = w->cfg->request_timeout_ms / 2;
    tv.tv_sec = read_ms / 1000;
    tv.tv_usec = (suseconds_t)(read_ms % 1000) * 1000;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        enr_log(ENR_LOG_WARN, "SO_RCVTIMEO failed", "error=%s", enr_log_errno(errno));
    set_write_timeout(w, fd);

    /* keepConnection makes FCGX_Accept_r take our connection instead of
     * calling accept() (it re-reads the flag from BEGIN_REQUEST);
     * detached makes any close libfcgi does a plain close(), without
     * its unbounded wait for the peer. */
    w->req.ipcFd = fd;
    w->req.keepConnection = 1;
    w->req.detached = 1;
    if (header_timer(fd, ENR_WORKER_HEADER_TIMEOUT_MS) != 0)
        enr_log(ENR_LOG_WARN, "header timer failed", "error=%s", enr_log_errno(errno));
    rc = FCGX_Accept_r(&w->req);
    header_timer(-1, 0);
    if (rc < 0) {
        /* Bad or missing BEGIN/PARAMS: libfcgi closed the connection, and
         * without a listening socket of its own it could not take another. */
        reject_connection(w, header_alarm ? "header_timeout" : "malformed", rc);
        FCGX_Free(&w->req, 1);
        return;
    }
    if (FCGX_GetError(w->req.in) != 0) {
        /* libfcgi ends the parameters at a stream error as if they were
         * complete: a cut or garbled request is not served. */
        reject_connection(w, header_alarm ? "header_timeout" : "malformed_params",
                          FCGX_GetError(w->req.in));
        FCGX_Free(&w->req, 0);
        close(fd);
        w->req.ipcFd = -1;
        return;
    }
    if (w->req.role != FCGI_RESPONDER) {
        refuse_role(fd, w->req.requestId);
        reject_connection(w, "unknown_role", 0);
        FCGX_Free(&w->req, 0);
        linger_close(fd);
        w->req.ipcFd = -1;
        return;
    }
    /* One request per connection (file comment): FCGX_Finish_r must not
     * close it, we do, boundedly; it still closes on a stream error. */
    w->req.keepConnection = 1;
    serve_one(w);
    if (w->req.ipcFd >= 0) {
        linger_close(w->req.ipcFd);
        w->req.ipcFd = -1;
    }
}

static int setup(worker *w, const enr_worker_args *a)
{
    struct sigaction sa;
    sigset_t block;
    char err[256] = "";
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    memset(w, 0, sizeof *w);
    w->cfg = a->cfg;
    w->slot = &a->sb->slot[a->slot];
    w->listen_fd = a->listen_fd;
    w->waiter = enr_listen_waiter(a->listen_fd);
    if (getsockname(a->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        w->is_tcp = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;

    /* libfcgi installs its own SIGPIPE/SIGUSR1 handlers in FCGX_Init;
     * ours come after so they win. */
    if (FCGX_Init() != 0) {
        enr_log(ENR_LOG_ERROR, "FCGX_Init failed", NULL);
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal; /* no SA_RESTART: ppoll must return */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL); /* the header timer (serve_connection) */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL); /* a vanished nginx is an error return, not a death */
    sigaction(SIGHUP, &sa, NULL);  /* HUP and INT are for the master (terminal, reload) */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);

    /* TERM is blocked except inside ppoll(): see the file comment. */
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGUSR2);
    if (sigprocmask(SIG_SETMASK, &block, &w->wait_mask) != 0)
        return -1;
    sigemptyset(&w->wait_mask);

    w->engine = enr_engine_new();
    if (w->engine == NULL) {
        enr_log(ENR_LOG_ERROR, "engine start failed", NULL);
        return -1;
    }
    w->upstream = enr_upstream_new(a->cfg, err, sizeof err);
    if (w->upstream == NULL && err[0] != '\0') {
        char q[300];
        enr_log(ENR_LOG_ERROR, "upstream client start failed", "error=%s",
                enr_log_quote(q, sizeof q, err));
        return -1;
    }
    if (w->upstream != NULL)
        publish_upstream(w);
    w->capture = enr_capture_new(a->cfg, a->slot, w->slot);
    /* No listening socket for libfcgi: after a bad connection it would
     * accept the next one itself, past listen_allow (file comment). */
    if (FCGX_InitRequest(&w->req, -1, 0) != 0) {
        enr_log(ENR_LOG_ERROR, "FCGX_InitRequest failed", NULL);
        return -1;
    }
    if (a->cfg->max_requests) {
        unsigned j = a->cfg->max_requests_jitter;
        /* Jitter spreads recycling so the pool never restarts in step. */
        srandom((unsigned)getpid() ^ (unsigned)enr_mono_us());
        w->max_served = a->cfg->max_requests + (j ? (unsigned long)random() % (j + 1) : 0);
    }
#ifdef ENR_TEST_HOOKS
    hooks_init(w);
#endif
    return 0;
}

static void teardown(worker *w)
{
    enr_capture_free(w->capture);
    enr_upstream_free(w->upstream);
    enr_engine_free(w->engine);
    enr_batch_free(&w->batch);
    enr_buf_free(&w->body);
    enr_buf_free(&w->out);
    if (w->waiter >= 0)
        close(w->waiter);
}

int enr_worker_main(const enr_worker_args *a)
{
    worker w;
    int reason = ENR_EXIT_NONE;
    enr_sb_slot *slot = &a->sb->slot[a->slot];

#ifdef ENR_TEST_HOOKS
    hooks_start_delay();
#endif
    /* The pool dies with its master; a worker without one would serve a
     * socket nobody supervises. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    enr_log_role("worker");
    /* A master that died before prctl() left us with another parent,
     * and no signal will ever come. */
    if (getppid() != a->master_pid) {
        enr_log(ENR_LOG_ERROR, "master gone before the worker started", "master_pid=%ld",
                (long)a->master_pid);
        return ENR_WORKER_EXIT_FAILED;
    }
    ENR_SB_SET(slot->pid, (int64_t)getpid());
    ENR_SB_SET(slot->state, ENR_WS_STARTING);
    ENR_SB_SET(slot->started_ms, enr_wall_ms());
    ENR_SB_SET(slot->started_mono_ms, enr_mono_ms());
    ENR_SB_SET(slot->served, 0);
    ENR_SB_SET(slot->req_start_ms, 0);
    ENR_SB_SET(slot->req_start_mono_ms, 0);
    if (setup(&w, a) != 0) {
        ENR_SB_SET(slot->state, ENR_WS_EXITING);
        return ENR_WORKER_EXIT_FAILED;
    }
    ENR_SB_SET(slot->state, ENR_WS_IDLE);
    enr_log(ENR_LOG_DEBUG, "worker ready", "slot=%u init_ms=%" PRIu64, a->slot,
            enr_mono_ms() - ENR_SB_GET(slot->started_mono_ms));
    if (a->ready_fd >= 0) {
        char one = 1;
        /* The master only needs a wake-up; a full pipe already holds one. */
        if (write(a->ready_fd, &one, 1) < 0 && errno != EAGAIN)
            enr_log(ENR_LOG_WARN, "readiness write failed", "error=%s", enr_log_errno(errno));
        close(a->ready_fd);
    }
    while (reason == ENR_EXIT_NONE) {
        int fd = next_connection(&w);
        if (fd < 0)
            break;
        serve_connection(&w, fd);
        reason = soft_limit_reached(&w);
    }
    ENR_SB_SET(slot->state, ENR_WS_EXITING);
    teardown(&w);
    if (reason != ENR_EXIT_NONE)
        return ENR_WORKER_EXIT_RECYCLE + reason;
    /* Leaving the loop unasked means the socket failed: not a clean stop. */
    return worker_stop || worker_drain ? ENR_WORKER_EXIT_STOPPED : ENR_WORKER_EXIT_FAILED;
}

int enr_worker_preload(const enr_config *c, char *err, size_t errlen)
{
    static enr_engine *warm;

    if (warm == NULL) {
        warm = enr_engine_new();
        if (warm == NULL)
            enr_log(ENR_LOG_ERROR, "engine warm-up failed; workers will try on their own", NULL);
    }
    /* libcurl is mapped once, only when enrichment is on. */
    if (c->upstream_url[0] != '\0' && enr_curl_load(err, errlen) != 0)
        return -1;
    return 0;
}
