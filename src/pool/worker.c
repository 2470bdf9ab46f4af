/*
 * worker.c: one FastCGI worker: accept, route, read the body, run the
 * engine (and the upstream client), answer, account, maybe recycle.
 *
 * Invariants:
 *  - Signals are blocked except while the worker waits for a connection
 *    (ppoll with the unblocked mask), so a TERM from the master never
 *    interrupts a request half way: it is seen between requests, and a
 *    request in hand is always answered (graceful reload and drain).
 *  - Connections come through fcgi_conn.c (accept, the allow list, the
 *    header, read and write bounds, one request per connection, the
 *    bounded close); this file sees only a RESPONDER request to answer.
 *  - Engine, Unicode, upstream objects and the body/output buffers are
 *    created once and reused: a steady-state request does not allocate
 *    in this file.  Buffers one request grew past ENR_KEEP_BYTES are
 *    freed after it (engine.h), so a huge request costs its memory once.
 *  - Only this worker writes the live and cumulative fields of its slot.
 */
#include "pool/worker.h"
#include "pool/rejected.h"

#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "pool/capture.h"
#include "pool/shed.h"
#include "base/curlapi.h"
#include "engine/engine.h"
#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_child.h"
#include "fcgi/fcgi_conn.h"
#include "fcgi/fcgi_http.h"
#include "fcgi/fcgi_stream.h"
#include "base/log.h"
#include "base/procstat.h"
#include "base/proctitle.h"
#include "base/signals.h"
#include "upstream/upstream.h"
#include "base/clock.h"

#define STATUS_CLIENT_GONE ENR_SB_STATUS_CLIENT_GONE
/* An error body (enr_error_json) is built on the stack, since one of
 * them answers a failed allocation: its message is at most 95 bytes, 570
 * escaped, plus the "where" fields. */
#define ERROR_BODY_MAX 1024
/* A caller heard from this recently (its body's end, or a check) is not
 * asked again whether it hung up: a poll(2) each time costs more than
 * the few milliseconds of work a gone caller could waste. */
#define CALLER_FRESH_MS 5
/* The worker's count of its own descriptors (fd_soft) lists /proc: at
 * most every FD_CHECK_GAP_MAX requests while the count holds still, the
 * gap doubling from 1; after every request once it grew, or once it (or
 * the master's count from outside) is within FD_CHECK_NEAR of fd_soft. */
#define FD_CHECK_GAP_MAX 64
#define FD_CHECK_NEAR 16

static volatile sig_atomic_t worker_stop;  /* TERM: end after the request in hand */
static volatile sig_atomic_t worker_drain; /* USR2: also serve what waits in the backlog */

/* A worker's signals; every other one has its kind's default
 * (signals.h), and enrichd(8) says what each does. */
static const enr_sig_rule worker_signals[] = {
    {SIGTERM, ENR_SIG_FLAG, &worker_stop, NULL},
    {SIGQUIT, ENR_SIG_FLAG, &worker_stop, NULL},
    {SIGUSR2, ENR_SIG_FLAG, &worker_drain, NULL},
    {SIGPIPE, ENR_SIG_IGNORE, NULL, NULL}, /* a vanished nginx is an error return, not a death */
    {SIGALRM, ENR_SIG_KEEP, NULL, NULL},   /* fcgi_conn.c's header timer */
    {SIGHUP, ENR_SIG_NOTE, NULL, "the master's: it reloads the pool"},
    {SIGINT, ENR_SIG_NOTE, NULL, "the master's: it drains the pool"},
};

typedef struct worker {
    const enr_config *cfg;
    enr_sb_slot *slot;
    unsigned slot_no, generation; /* for the process title */
    enr_fcgi_conn conn;           /* fcgi_conn.h: accept to close */
    int answer_lost;              /* the answer's write failed: it counts as 499, not as sent */
    int fds_unknown;              /* the last count of our descriptors failed (said once) */
    long fds_last;                /* that count, -1 unknown */
    unsigned fds_gap, fds_wait;   /* requests between counts, and until the next */
    long rss_kb;                  /* after the last request, -1 unknown */
    uint64_t cpu_mark_us;         /* CPU time when the worker last began to wait */
    uint64_t caller_seen_ms;      /* the caller last heard from (caller_gone) */
    int64_t pid;
    enr_engine *engine;
    enr_upstream *upstream;
    enr_upstream_stats up_published; /* its counters as last added to the slot */
    enr_capture *capture;            /* NULL: off */
    uint64_t arrival_us;             /* the request in hand, CLOCK_REALTIME (capture) */
    uint64_t wait_ms;                /* its wait for a worker (shed.h), 0 if unknown */
    uint64_t pool_start_mono_ms;     /* the master's start: no wait before it is overload */
    int tcp_wait_known;              /* wait_ms is the kernel's, taken at accept */
    uint64_t body_deadline;          /* its body's deadline (CLOCK_MONOTONIC) */
    enr_batch batch;
    enr_buf body, out;
    FCGX_Request req;
    sigset_t wait_mask; /* the mask while waiting for a connection */
    unsigned long served;
    unsigned long max_served; /* max_requests + this worker's jitter; 0 = never */
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

    for (unsigned i = 0; i < ENR_UP_SOURCES; i++) {
        /* One line per counter of the table (base/upcounters.h). */
#define UP_PUBLISH(field, metric, kind, help)                                                      \
    ENR_SB_ADD(s->up[i][ENR_UP_ROW_##field], now->src[i].field - was->src[i].field);
        ENR_UP_COUNTERS(UP_PUBLISH)
#undef UP_PUBLISH
        ENR_SB_SET(s->up_breaker_state[i], (uint64_t)now->breaker_state[i]);
    }
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

/* Writes the answer (fcgi_http.c); returns 0, or -1 when the caller is
 * gone (the connection is then aborted).  From here on the request is in
 * its write phase, which the master times by write_timeout_ms instead of
 * request_timeout_ms. */
static int send_response(worker *w, int status, const char *ctype, const char *extra,
                         const char *body, size_t len)
{
    enr_reply r = {status, ctype, extra, body, len};
    int e;

    ENR_SB_SET(w->slot->write_start_mono_ms, enr_mono_ms());
    e = enr_reply_send(&w->req, &r, w->conn.write_ms);
    if (e == 0)
        return 0;
    enr_log(ENR_LOG_WARN, "answer write failed: connection reset", "status=%d bytes=%zu error=%s",
            status, len, enr_fcgi_error_value(e));
    w->answer_lost = 1;
    enr_fcgi_conn_abort(&w->conn);
    return -1;
}

typedef struct outcome {
    int status;
    uint64_t rec_in, rec_out, degraded;
} outcome;

/* Every JSON error, the engine's and the worker's own, is the engine's
 * "what and where" (enr_error_json). */
static int send_error_with(worker *w, const enr_error *err, const char *extra)
{
    char mem[ERROR_BODY_MAX];
    enr_buf b = {.data = mem, .cap = sizeof mem, .max = sizeof mem};

    enr_error_json(err, &b);
    if (b.oom) {
        /* Cannot happen (ERROR_BODY_MAX): a cut body is never sent. */
        enr_log(ENR_LOG_ERROR, "error body too long", "status=%d", err->status);
        enr_fcgi_conn_abort(&w->conn);
        return -1;
    }
    return send_response(w, err->status, "application/json", extra, b.data, b.len);
}

static int send_error(worker *w, const enr_error *err)
{
    return send_error_with(w, err, NULL);
}

/* An error of the worker's own: what, and no where. */
static int send_json_error_with(worker *w, int status, const char *what, const char *extra)
{
    enr_error err = {.status = status, .offset = -1, .element = -1, .record = -1};

    snprintf(err.msg, sizeof err.msg, "%s", what);
    return send_error_with(w, &err, extra);
}

static int send_json_error(worker *w, int status, const char *what)
{
    return send_json_error_with(w, status, what, NULL);
}

/* Waited past queue_timeout_ms (shed.h): answered before the body is
 * read, so a shed costs a worker a few microseconds; nothing was done,
 * so the front may try another host (nginx/enrichd-cluster.conf). */
static void shed(worker *w, outcome *o)
{
    char msg[96], extra[48];

    o->status = 503;
    ENR_SB_ADD(w->slot->shed, 1);
    snprintf(msg, sizeof msg,
             "overloaded: waited %" PRIu64 " ms for a worker (queue_timeout_ms %u)", w->wait_ms,
             w->cfg->queue_timeout_ms);
    snprintf(extra, sizeof extra, "Retry-After: %u\r\n", enr_shed_retry_after_s(w->cfg));
    send_json_error_with(w, 503, msg, extra);
}

/* The part of the request's wait that the pool's load made: what it
 * waited before this master started (a cold start through the socket, a
 * restart with the socket kept) is no overload, and shedding for it
 * would refuse the very requests a kept socket exists to keep.  The
 * whole wait still counts in the latency: the caller lived it. */
static uint64_t overload_wait_ms(const worker *w)
{
    uint64_t now = enr_mono_ms();
    uint64_t age = now > w->pool_start_mono_ms ? now - w->pool_start_mono_ms : 0;

    return w->wait_ms < age ? w->wait_ms : age;
}

/* nginx closes its end when the client goes away (fastcgi_ignore_client_abort
 * off): a hung-up connection means nobody will read the answer.  Asked
 * only when the caller was last heard from CALLER_FRESH_MS ago or more. */
static int hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};

    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static int caller_gone(worker *w)
{
    uint64_t now = enr_mono_ms();

    if (now - w->caller_seen_ms < CALLER_FRESH_MS)
        return 0;
    if (hung_up(w->req.ipcFd))
        return 1;
    w->caller_seen_ms = now;
    return 0;
}

/* The worker's routes (the rule: fcgi_http.h); nginx/enrichd.conf names
 * the same paths in its `location =` blocks. */
static const enr_route engine_routes[] = {{"/", 0}, {"/v1/enrich", 0}, {"/normalize", 0}};

/* Returns 0, 1 when too large, 2 when the body is not CONTENT_LENGTH
 * bytes long, -1 on error.  The body is read straight into w->body by
 * enrichd's record reader (fcgi_body.h: its records checked, no copy out
 * of a stream buffer), the whole of it within body_timeout_ms whatever
 * records come between, so a peer dripping it a byte at a time is cut by
 * the worker itself before the master's kill (each wait is also bounded
 * by the read timeout). */
static int read_body(worker *w)
{
    size_t max = w->cfg->max_body_bytes;
    size_t expect = enr_fcgi_content_length(FCGX_GetParam("CONTENT_LENGTH", w->req.envp));
    int r;

    enr_buf_reset(&w->body);
    if (expect != SIZE_MAX) {
        if (expect > max)
            return 1;
        if (enr_buf_reserve(&w->body, expect + 1) != 0)
            return -1;
    }
    w->body_deadline = enr_mono_ms() + w->cfg->body_timeout_ms;
    r = enr_fcgi_conn_body(&w->conn, &w->body, max, expect, w->body_deadline);
    if (r == ENR_FCGI_BODY_DONE)
        w->caller_seen_ms = enr_mono_ms(); /* its last record just came */
    if (r == ENR_FCGI_BODY_ERROR)
        return -1;
    /* A body is whole or refused: one cut short (or longer) than it was
     * announced is never parsed as if it were the batch. */
    if (r == 0 && expect != SIZE_MAX && w->body.len != expect)
        return 2;
    return r;
}

/* The body read failed on time: its deadline, or one read's timeout. */
static int body_timed_out(worker *w)
{
    int e = w->conn.input_err; /* the record reader's errno (fcgi_conn.h) */

    return enr_mono_ms() >= w->body_deadline || e == ETIMEDOUT || e == EAGAIN || e == EWOULDBLOCK;
}

static void handle_request(worker *w, outcome *o)
{
    const enr_config *c = w->cfg;
    const char *method = FCGX_GetParam("REQUEST_METHOD", w->req.envp);
    uint64_t deadline, margin, now, work_start;
    enr_error err;
    size_t degraded = 0;
    int r;

    if (enr_route_find(w->req.envp, ENR_ROUTES(engine_routes)) < 0) {
        o->status = 404;
        send_json_error(w, 404, "not found");
        return;
    }
    if (method == NULL || strcmp(method, "POST") != 0) {
        o->status = 405;
        send_response(w, 405, "text/plain", "Allow: POST\r\n", "method not allowed", 18);
        return;
    }
    if (enr_shed_due(c, overload_wait_ms(w))) {
        shed(w, o);
        return;
    }
    r = read_body(w);
    if (r != 0) {
        if (r == 2) {
            char msg[96];
            size_t cl = enr_fcgi_content_length(FCGX_GetParam("CONTENT_LENGTH", w->req.envp));
            o->status = 400;
            snprintf(msg, sizeof msg, "body of %zu bytes received, CONTENT_LENGTH %zu", w->body.len,
                     cl);
            send_json_error(w, 400, msg);
        } else if (r > 0) {
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
        } else if (body_timed_out(w) && !hung_up(w->req.ipcFd)) {
            /* A front end that streams the body as the client sends it,
             * and a client still sending: it is told, not dropped. */
            char msg[96];
            enr_log(ENR_LOG_WARN, "request body read failed", "error=%s body_timeout_ms=%u",
                    enr_log_errno(w->conn.input_err ? w->conn.input_err : ETIMEDOUT),
                    c->body_timeout_ms);
            o->status = 408;
            snprintf(msg, sizeof msg,
                     "request body not received within body_timeout_ms (%u), %u ms a read",
                     c->body_timeout_ms, w->conn.read_ms);
            send_json_error(w, 408, msg);
        } else {
            /* nginx gave up sending the body: nobody to answer */
            enr_log(ENR_LOG_WARN, "request body read failed", "error=%s",
                    w->conn.input_err != 0 ? enr_log_errno(w->conn.input_err) : "eof");
            o->status = STATUS_CLIENT_GONE;
        }
        return;
    }
    /* request_timeout_ms counts the work, from here (the body had its own). */
    work_start = enr_mono_ms();
    ENR_SB_SET(w->slot->work_start_mono_ms, work_start);
    if (caller_gone(w)) {
        enr_log(ENR_LOG_INFO, "caller gone before the engine", NULL);
        o->status = STATUS_CLIENT_GONE;
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
        o->status = err.status;
        send_error(w, &err);
        return;
    }
    o->rec_in = w->batch.elements;
    o->rec_out = w->batch.n;

    margin = c->request_timeout_ms / 10;
    if (margin > ENR_WORKER_ANSWER_MARGIN_MS)
        margin = ENR_WORKER_ANSWER_MARGIN_MS;
    deadline = work_start + c->request_timeout_ms - margin;
    if (w->upstream != NULL && w->batch.n > 0) {
        uint64_t up_deadline = enr_mono_ms() + c->upstream_timeout_ms;
        if (caller_gone(w)) {
            enr_log(ENR_LOG_INFO, "caller gone before upstream call", NULL);
            o->status = STATUS_CLIENT_GONE;
            o->rec_in = o->rec_out = 0; /* nothing was answered: as every 499 */
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
    if (caller_gone(w)) {
        enr_log(ENR_LOG_INFO, "caller gone before the answer", NULL);
        o->status = STATUS_CLIENT_GONE;
        o->rec_in = o->rec_out = 0;
        return;
    }
    enr_buf_reset(&w->out);
    if (enr_emit(w->engine, &w->batch, enr_wall_ms, &w->out, &err) != 0) {
        /* past max_output_bytes: the cut output is dropped, never sent */
        o->status = err.status;
        o->rec_in = o->rec_out = 0;
        enr_buf_reset(&w->out);
        send_error(w, &err);
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
        /* what was dropped, said (rejected.h); the body is unchanged */
        char extra[ENR_REJECTED_HEADERS_MAX + 64];
        enr_rejected_headers(&w->batch, extra, sizeof extra - 64);
        if (degraded > 0)
            snprintf(extra + strlen(extra), 64, "X-Enrich-Degraded: %zu\r\n", degraded);
        send_response(w, 200, "application/x-ndjson", extra, w->out.data, w->out.len);
    }
}

static void handle(worker *w, outcome *o)
{
    handle_request(w, o);
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

/* CPU time of this process (user and system, every thread), in
 * microseconds: getrusage's sum is the scheduler's exact runtime, as
 * CLOCK_PROCESS_CPUTIME_ID's (both a real system call, unlike the
 * monotonic clock's vDSO).  Taken once a request, when it ends: a
 * request's CPU runs from the end of the one before it (cpu_mark_us) to
 * its own end, its wake-up and accept included. */
static uint64_t cpu_us(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
           (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
}

static void title(const worker *w, const char *state)
{
    enr_proctitle_set("worker %u gen %u %s", w->slot_no, w->generation, state);
}

static void serve_one(worker *w)
{
    uint64_t t0 = enr_mono_us(), t0_ms = enr_mono_ms(), work, lat, cpu;
    const char *rid = request_id(&w->req);
    outcome o = {0};
    enr_sb_last_req last = {0};
    int slow;

    title(w, "busy");
    w->arrival_us = enr_wall_us();
    /* This host's own queue where the kernel told (TCP: shed.h), else nginx's time. */
    if (!w->tcp_wait_known)
        w->wait_ms = enr_shed_wait_ms(FCGX_GetParam(ENR_SHED_PARAM, w->req.envp),
                                      w->arrival_us / 1000, NULL);
    enr_sb_request_start(w->slot, rid, t0_ms, w->arrival_us / 1000);
    w->answer_lost = 0;
    w->caller_seen_ms = 0;
    handle(w, &o);
#ifdef ENR_TEST_HOOKS
    hooks_leak(w); /* what the request left behind, in what follows */
#endif
    if (w->answer_lost)
        o.status = STATUS_CLIENT_GONE;
    /* What the caller lived: its wait for a worker, then the work.  A
     * slow request is slow in the worker: under overload every shed
     * batch waited, and the wait is counted (shed, the histogram), not
     * logged a line each. */
    work = enr_mono_us() - t0;
    lat = work + w->wait_ms * 1000;
    slow = w->cfg->slow_request_ms && work >= (uint64_t)w->cfg->slow_request_ms * 1000;
    if (slow) {
        char q[96];
        enr_log(ENR_LOG_WARN, "slow request",
                "req_id=%s status=%d ms=%" PRIu64 " wait_ms=%" PRIu64 " records=%" PRIu64,
                enr_log_quote(q, sizeof q, rid ? rid : "-"), o.status, work / 1000, w->wait_ms,
                o.rec_in);
    }
    /* The answer is complete before the connection closes (FCGX_Finish_r). */
    enr_fcgi_conn_finish(&w->conn);
    w->served++;
    enr_sb_request_done(w->slot, o.status, o.rec_in, o.rec_out, o.degraded, lat, slow);
    last.status = o.status;
    last.duration_us = lat;
    cpu = cpu_us();
    last.cpu_us = cpu > w->cpu_mark_us ? cpu - w->cpu_mark_us : 0;
    w->cpu_mark_us = cpu;
    /* One pread (procstat.h), also what rss_soft_mb is judged by. */
    w->rss_kb = enr_proc_rss_kb(0);
    last.rss_kb = w->rss_kb > 0 ? (uint64_t)w->rss_kb : 0;
    last.records_in = o.rec_in;
    last.records_out = o.rec_out;
    last.end_wall_ms = enr_wall_ms();
    last.pid = w->pid;
    enr_sb_request_last(w->slot, &last);
    /* Completed before idle: /metrics reads them in the other order. */
    atomic_thread_fence(memory_order_release);
    ENR_SB_SET(w->slot->state, ENR_WS_IDLE);
    title(w, "idle");
}

/* Our open descriptors, or -1; a failure is said when it starts, not
 * after every request (the master's fd_hard, counted from outside, still
 * holds meanwhile).  Sets when the next count is due (FD_CHECK_GAP_MAX). */
static long own_fds(worker *w)
{
    long n = enr_proc_fd_count(0);

    if (n < 0 && !w->fds_unknown)
        enr_log(ENR_LOG_WARN, "cannot count own descriptors in /proc/self/fd",
                "error=%s fd_soft=unchecked", enr_log_errno(errno));
    else if (n >= 0 && w->fds_unknown)
        enr_log(ENR_LOG_INFO, "own descriptors counted again", "fds=%ld", n);
    w->fds_unknown = n < 0;
    if (n < 0 || w->fds_last < 0 || n > w->fds_last)
        w->fds_gap = 1;
    else if (w->fds_gap < FD_CHECK_GAP_MAX)
        w->fds_gap *= 2;
    w->fds_wait = w->fds_gap;
    w->fds_last = n;
    return n;
}

/* Whether this request's end counts the descriptors (FD_CHECK_GAP_MAX):
 * a leak is seen at the first count after it starts, and from then on
 * after every request, so the exit comes after the first request that
 * leaves the worker over fd_soft. */
static int fds_due(worker *w)
{
    unsigned long soft = w->cfg->fd_soft;
    uint64_t outside = ENR_SB_GET(w->slot->fds); /* the master's last count */

    if (w->fds_wait > 0)
        w->fds_wait--;
    return w->fds_wait == 0 || w->fds_last < 0 ||
           (unsigned long)w->fds_last + FD_CHECK_NEAR >= soft || outside + FD_CHECK_NEAR >= soft;
}

/* After a request: over a soft limit, finish gracefully (nothing is in
 * hand now).  Returns the exit reason, or ENR_EXIT_NONE to go on. */
static int soft_limit_reached(worker *w)
{
    const enr_config *c = w->cfg;

    if (w->max_served && w->served >= w->max_served)
        return ENR_EXIT_MAX_REQUESTS;
    /* The RSS serve_one read after the request (its buffers shrunk). */
    if (c->rss_soft_mb && w->rss_kb > 0 &&
        (unsigned long)w->rss_kb > (unsigned long)c->rss_soft_mb * 1024)
        return ENR_EXIT_RSS;
    if (c->fd_soft && fds_due(w)) {
        long n = own_fds(w);
        if (n > 0 && (unsigned long)n > c->fd_soft)
            return ENR_EXIT_FD;
    }
    return ENR_EXIT_NONE;
}

/* Reads the request on fd and serves it; fd is closed on return. */
static void serve_connection(worker *w, int fd)
{
    /* Before a byte is read: reading lets the front send the rest of a
     * large body, and the kernel's "last data received" would move. */
    w->tcp_wait_known = w->conn.is_tcp && enr_shed_tcp_wait_ms(fd, &w->wait_ms) == 0;
    if (enr_fcgi_conn_open(&w->conn, fd) != 0)
        return;
    serve_one(w);
    enr_fcgi_conn_close(&w->conn);
}

static int setup(worker *w, const enr_worker_args *a)
{
    char err[256] = "";
    unsigned read_ms = ENR_WORKER_READ_TIMEOUT_MS;

    memset(w, 0, sizeof *w);
    w->cfg = a->cfg;
    w->slot = &a->sb->slot[a->slot];
    w->slot_no = a->slot;
    w->generation = a->generation;
    w->pool_start_mono_ms = ENR_SB_GET(a->sb->pool.start_mono_ms);

    /* Every handled signal is blocked (enr_fcgi_child_start) except
     * inside the wait for a connection: see the file comment. */
    sigemptyset(&w->wait_mask);

    w->engine = enr_engine_new();
    if (w->engine == NULL) {
        enr_log(ENR_LOG_ERROR, "engine start failed", NULL);
        return -1;
    }
    w->upstream = enr_upstream_new(a->cfg, a->cache, err, sizeof err);
    if (w->upstream == NULL && err[0] != '\0') {
        char q[300];
        enr_log(ENR_LOG_ERROR, "upstream client start failed", "error=%s",
                enr_log_quote(q, sizeof q, err));
        return -1;
    }
    if (w->upstream != NULL) {
        /* The provider's quota is the host's: every worker, one pause. */
        enr_upstream_share_quota(w->upstream, a->sb->quota);
        publish_upstream(w);
    }
    w->capture = enr_capture_new(a->cfg, a->slot, w->slot);
    /* The worker's bounds on its peer (worker.h); a body read gives up
     * before the master's stuck-request kill. */
    if (read_ms > a->cfg->request_timeout_ms / 2)
        read_ms = a->cfg->request_timeout_ms / 2;
    w->conn.listen_fd = a->listen_fd;
    w->conn.allow = &a->cfg->listen_allow_nets;
    w->conn.req = &w->req;
    w->conn.header_ms = ENR_WORKER_HEADER_TIMEOUT_MS;
    w->conn.read_ms = read_ms;
    w->conn.write_ms = a->cfg->write_timeout_ms;
    w->conn.linger_ms = ENR_WORKER_LINGER_MS;
    w->conn.refused = &w->slot->listen_refused;
    w->conn.rejected = &w->slot->fcgi_rejected;
    w->conn.rejected_by = w->slot->fcgi_rejected_by;
    w->conn.max_conns = a->cfg->workers;
    w->conn.stop = &worker_stop;
    w->conn.drain = &worker_drain;
    w->conn.wait_mask = &w->wait_mask;
    /* The upstream's transfers go on while the worker waits. */
    w->conn.side_fd = w->upstream ? enr_upstream_fd(w->upstream) : -1;
    if (enr_fcgi_conn_init(&w->conn) != 0)
        return -1;
    if (a->cfg->max_requests) {
        unsigned j = a->cfg->max_requests_jitter;
        /* Jitter spreads recycling so the pool never restarts in step. */
        srandom((unsigned)getpid() ^ (unsigned)enr_mono_us());
        w->max_served = a->cfg->max_requests + (j ? (unsigned long)random() % (j + 1) : 0);
    }
    /* The counts after requests keep /proc descriptors open from their
     * first call (procstat.h): taken now, so that the worker's
     * descriptors are the same before its first request as after. */
    w->pid = (int64_t)getpid();
    w->fds_last = -1;
    w->rss_kb = enr_proc_rss_kb(0);
    if (a->cfg->fd_soft)
        own_fds(w);
    w->cpu_mark_us = cpu_us();
#ifdef ENR_TEST_HOOKS
    hooks_init(w);
#endif
    return 0;
}

static void teardown(worker *w)
{
    enr_fcgi_conn_free(&w->conn);
    enr_capture_free(w->capture);
    enr_upstream_free(w->upstream);
    enr_engine_free(w->engine);
    enr_batch_free(&w->batch);
    enr_buf_free(&w->body);
    enr_buf_free(&w->out);
}

int enr_worker_main(const enr_worker_args *a)
{
    worker w;
    int reason = ENR_EXIT_NONE;
    enr_sb_slot *slot = &a->sb->slot[a->slot];
    enr_fcgi_child start = {
        "worker", NULL,           "master gone before the worker started",
        0,        worker_signals, sizeof worker_signals / sizeof worker_signals[0]};
    char ptitle[64];
    sigset_t wait_mask;

#ifdef ENR_TEST_HOOKS
    hooks_start_delay();
#endif
    /* The pool dies with its master; a worker without one would serve a
     * socket nobody supervises. */
    snprintf(ptitle, sizeof ptitle, "worker %u gen %u starting", a->slot, a->generation);
    start.title = ptitle;
    start.master_pid = a->master_pid;
    if (enr_fcgi_child_start(&start, &wait_mask) != 0)
        return ENR_WORKER_EXIT_FAILED;
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
    /* Ready means ready to enrich: the APIs' connections first. */
    if (w.upstream != NULL) {
        enr_upstream_warm(w.upstream);
        publish_upstream(&w);
    }
    ENR_SB_SET(slot->state, ENR_WS_IDLE);
    title(&w, "idle");
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
        int fd, wait_ms = -1;
        if (w.upstream != NULL) {
            wait_ms = enr_upstream_idle(w.upstream);
            publish_upstream(&w);
            w.cpu_mark_us = cpu_us(); /* idle transfers are no request's CPU */
        }
        fd = enr_fcgi_conn_next(&w.conn, wait_ms);
        if (fd == ENR_FCGI_SIDE || fd == ENR_FCGI_IDLE)
            continue; /* the upstream's work, or a signal: the loop's top decides */
        if (fd < 0)
            break;
        serve_connection(&w, fd);
        reason = soft_limit_reached(&w);
    }
    ENR_SB_SET(slot->state, ENR_WS_EXITING);
    title(&w, "exiting");
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
    if (enr_config_enriches(c) && enr_curl_load(err, errlen) != 0)
        return -1;
    return 0;
}
