/*
 * worker.c: one FastCGI worker process: start, wait for a connection,
 * hand its request to the HTTP API (httpapi.c), account, maybe recycle.
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

#include <errno.h>
#include <fcgiapp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "upstream/curlapi.h"
#include "base/log.h"
#include "base/procstat.h"
#include "base/proctitle.h"
#include "base/signals.h"
#include "engine/engine.h"
#include "fcgi/fcgi_child.h"
#include "fcgi/fcgi_conn.h"
#include "pool/capture.h"
#include "pool/httpapi.h"
#include "pool/shed.h"
#include "pool/testhooks.h"
#include "pool/worker_int.h"
#include "upstream/upstream.h"

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

static void handle(enr_worker *w, enr_api_result *o)
{
    enr_api_handle(w, o);
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

static void title(const enr_worker *w, const char *state)
{
    enr_proctitle_set("worker %u gen %u %s", w->slot_no, w->generation, state);
}

static void serve_one(enr_worker *w)
{
    uint64_t t0 = enr_mono_us(), t0_ms = enr_mono_ms(), work, lat, cpu;
    const char *rid = request_id(&w->req);
    enr_api_result o;
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
    enr_hook_leak(); /* what the request left behind, in what follows */
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
static long own_fds(enr_worker *w)
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
static int fds_due(enr_worker *w)
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
static int soft_limit_reached(enr_worker *w)
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
static void serve_connection(enr_worker *w, int fd)
{
    /* Before a byte is read: reading lets the front send the rest of a
     * large body, and the kernel's "last data received" would move. */
    w->tcp_wait_known = w->conn.is_tcp && enr_shed_tcp_wait_ms(fd, &w->wait_ms) == 0;
    if (enr_fcgi_conn_open(&w->conn, fd) != 0)
        return;
    serve_one(w);
    enr_fcgi_conn_close(&w->conn);
}

static int setup(enr_worker *w, const enr_worker_args *a)
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
        enr_worker_publish_upstream(w);
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
    enr_hook_init();
    return 0;
}

static void teardown(enr_worker *w)
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
    enr_worker w;
    int reason = ENR_EXIT_NONE;
    enr_sb_slot *slot = &a->sb->slot[a->slot];
    enr_fcgi_child start = {
        "worker", NULL,           "master gone before the worker started",
        0,        worker_signals, sizeof worker_signals / sizeof worker_signals[0]};
    char ptitle[64];
    sigset_t wait_mask;

    enr_hook_start_delay();
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
        enr_worker_publish_upstream(&w);
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
            enr_worker_publish_upstream(&w);
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
    if (worker_stop || worker_drain)
        enr_upstream_stop(w.upstream); /* the fleet's units it holds, given back */
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
