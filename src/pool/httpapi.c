/*
 * httpapi.c: the worker's HTTP API (httpapi.h): route, method, shed,
 * read the body, parse, enrich, emit, answer.
 *
 * Invariants:
 *  - Each step returns an outcome (ENR_REQ_OUTCOMES); the answer is
 *    written in one place (answer()) from that outcome and its status
 *    (enr_req_status), so a status is decided once per request.
 *  - A body is whole or refused: one cut short (or longer) than it was
 *    announced is never parsed as if it were the batch.
 *  - Only an answered batch counts records (a 499 answered nothing).
 *  - No allocation here in a steady-state request: the buffers are the
 *    worker's, kept between requests (worker.c).
 */
#include "pool/httpapi.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_http.h"
#include "pool/rejected.h"
#include "pool/shed.h"
#include "pool/testhooks.h"

/* An error body (enr_error_json) is built on the stack, since one of
 * them answers a failed allocation: its message is at most 95 bytes, 570
 * escaped, plus the "where" fields. */
#define ERROR_BODY_MAX 1024
/* A caller heard from this recently (its body's end, or a check) is not
 * asked again whether it hung up: a poll(2) each time costs more than
 * the few milliseconds of work a gone caller could waste. */
#define CALLER_FRESH_MS 5

static const int outcome_status[ENR_REQ_N] = {
#define ENR_REQ_STATUS(name, status) status,
    ENR_REQ_OUTCOMES(ENR_REQ_STATUS)
#undef ENR_REQ_STATUS
};

int enr_req_status(enr_req_outcome o, const enr_error *err)
{
    int s = outcome_status[o];

    return s != 0 ? s : err->status;
}

/* The worker's routes (the rule: fcgi_http.h); nginx/enrichd.conf names
 * the same paths in its `location =` blocks. */
static const enr_route engine_routes[] = {{"/", 0}, {"/v1/enrich", 0}, {"/normalize", 0}};

/* An error of the worker's own: what, and no where. */
static void say(enr_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(enr_error *err, const char *fmt, ...)
{
    va_list ap;

    memset(err, 0, sizeof *err);
    err->offset = err->element = err->record = -1;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

/* ---- answering ---------------------------------------------------------- */

/* Writes the answer (fcgi_http.c); returns 0, or -1 when the caller is
 * gone (the connection is then aborted).  From here on the request is in
 * its write phase, which the master times by write_timeout_ms instead of
 * request_timeout_ms. */
static int send_response(enr_worker *w, int status, const char *ctype, const char *extra,
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

/* Every JSON error, the engine's and the worker's own, is the engine's
 * "what and where" (enr_error_json). */
static void send_error(enr_worker *w, const enr_error *err, const char *extra)
{
    char mem[ERROR_BODY_MAX];
    enr_buf b = {.data = mem, .cap = sizeof mem, .max = sizeof mem};

    enr_error_json(err, &b);
    if (b.oom) {
        /* Cannot happen (ERROR_BODY_MAX): a cut body is never sent. */
        enr_log(ENR_LOG_ERROR, "error body too long", "status=%d", err->status);
        enr_fcgi_conn_abort(&w->conn);
        return;
    }
    send_response(w, err->status, "application/json", extra, b.data, b.len);
}

/* The batch's answer: what was dropped said in headers (rejected.h), the
 * body unchanged. */
static void send_batch(enr_worker *w, size_t degraded)
{
    char extra[ENR_REJECTED_HEADERS_MAX + 64];

    enr_rejected_headers(&w->batch, extra, sizeof extra - 64);
    if (degraded > 0)
        snprintf(extra + strlen(extra), 64, "X-Enrich-Degraded: %zu\r\n", degraded);
    send_response(w, 200, "application/x-ndjson", extra, w->out.data, w->out.len);
}

/* The one place a request's outcome becomes what is sent. */
static void answer(enr_worker *w, enr_req_outcome o, int status, enr_error *err, size_t degraded)
{
    char extra[48];

    switch (o) {
    case ENR_REQ_OK:
        send_batch(w, degraded);
        return;
    case ENR_REQ_NOT_POST:
        send_response(w, status, "text/plain", "Allow: POST\r\n", "method not allowed", 18);
        return;
    case ENR_REQ_CALLER_GONE:
    case ENR_REQ_ANSWER_LOST:
        return;
    case ENR_REQ_SHED:
        /* nothing was done: the front may try another host */
        snprintf(extra, sizeof extra, "Retry-After: %u\r\n", enr_shed_retry_after_s(w->cfg));
        err->status = status;
        send_error(w, err, extra);
        return;
    default:
        err->status = status;
        send_error(w, err, NULL);
        return;
    }
}

/* ---- the caller --------------------------------------------------------- */

/* The part of the request's wait that the pool's load made: what it
 * waited before this master started (a cold start through the socket, a
 * restart with the socket kept) is no overload, and shedding for it
 * would refuse the very requests a kept socket exists to keep.  The
 * whole wait still counts in the latency: the caller lived it. */
static uint64_t overload_wait_ms(const enr_worker *w)
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

static int caller_gone(enr_worker *w, const char *when)
{
    uint64_t now = enr_mono_ms();

    if (now - w->caller_seen_ms < CALLER_FRESH_MS)
        return 0;
    if (hung_up(w->req.ipcFd)) {
        enr_log(ENR_LOG_INFO, when, NULL);
        return 1;
    }
    w->caller_seen_ms = now;
    return 0;
}

/* Route, method, and the wait for a worker (shed.h): answered before the
 * body is read, so a shed costs a worker a few microseconds. */
static enr_req_outcome admit(enr_worker *w, enr_error *err)
{
    const char *method = FCGX_GetParam("REQUEST_METHOD", w->req.envp);

    if (enr_route_find(w->req.envp, ENR_ROUTES(engine_routes)) < 0) {
        say(err, "not found");
        return ENR_REQ_NOT_FOUND;
    }
    if (method == NULL || strcmp(method, "POST") != 0)
        return ENR_REQ_NOT_POST;
    if (enr_shed_due(w->cfg, overload_wait_ms(w))) {
        ENR_SB_ADD(w->slot->shed, 1);
        say(err, "overloaded: waited %" PRIu64 " ms for a worker (queue_timeout_ms %u)", w->wait_ms,
            w->cfg->queue_timeout_ms);
        return ENR_REQ_SHED;
    }
    return ENR_REQ_OK;
}

/* ---- the body ----------------------------------------------------------- */

/* The body read failed on time: its deadline, or one read's timeout. */
static int body_timed_out(enr_worker *w)
{
    int e = w->conn.input_err; /* the record reader's errno (fcgi_conn.h) */

    return enr_mono_ms() >= w->body_deadline || e == ETIMEDOUT || e == EAGAIN || e == EWOULDBLOCK;
}

/* Why the body's read failed, said in the log and in err. */
static enr_req_outcome body_failed(enr_worker *w, enr_error *err)
{
    const enr_config *c = w->cfg;

    if (w->body.oom) {
        /* Our failure, not the client's: answered like any other
         * allocation failure, and counted as a 5xx. */
        enr_log(ENR_LOG_ERROR, "request body read failed: out of memory", "bytes=%zu", w->body.len);
        say(err, "out of memory");
        return ENR_REQ_NO_MEMORY;
    }
    if (body_timed_out(w) && !hung_up(w->req.ipcFd)) {
        /* A front end that streams the body as the client sends it,
         * and a client still sending: it is told, not dropped. */
        enr_log(ENR_LOG_WARN, "request body read failed", "error=%s body_timeout_ms=%u",
                enr_log_errno(w->conn.input_err ? w->conn.input_err : ETIMEDOUT),
                c->body_timeout_ms);
        say(err, "request body not received within body_timeout_ms (%u), %u ms a read",
            c->body_timeout_ms, w->conn.read_ms);
        return ENR_REQ_BODY_TIMEOUT;
    }
    /* nginx gave up sending the body: nobody to answer */
    enr_log(ENR_LOG_WARN, "request body read failed", "error=%s",
            w->conn.input_err != 0 ? enr_log_errno(w->conn.input_err) : "eof");
    return ENR_REQ_CALLER_GONE;
}

/* The body is read straight into w->body by enrichd's record reader
 * (fcgi_body.h: its records checked, no copy out of a stream buffer),
 * the whole of it within body_timeout_ms whatever records come between,
 * so a peer dripping it a byte at a time is cut by the worker itself
 * before the master's kill (each wait is also bounded by the read
 * timeout). */
static enr_req_outcome read_body(enr_worker *w, enr_error *err)
{
    size_t max = w->cfg->max_body_bytes;
    size_t expect = enr_fcgi_content_length(FCGX_GetParam("CONTENT_LENGTH", w->req.envp));
    int r;

    enr_buf_reset(&w->body);
    if (expect != SIZE_MAX) {
        if (expect > max)
            goto too_large;
        if (enr_buf_reserve(&w->body, expect + 1) != 0)
            return body_failed(w, err);
    }
    w->body_deadline = enr_mono_ms() + w->cfg->body_timeout_ms;
    r = enr_fcgi_conn_body(&w->conn, &w->body, max, expect, w->body_deadline);
    if (r == ENR_FCGI_BODY_DONE)
        w->caller_seen_ms = enr_mono_ms(); /* its last record just came */
    if (r == ENR_FCGI_BODY_ERROR)
        return body_failed(w, err);
    if (r == ENR_FCGI_BODY_TOO_LARGE)
        goto too_large;
    if (expect != SIZE_MAX && w->body.len != expect) {
        say(err, "body of %zu bytes received, CONTENT_LENGTH %zu", w->body.len, expect);
        return ENR_REQ_BODY_LENGTH;
    }
    return ENR_REQ_OK;
too_large:
    say(err, "body larger than %zu bytes", max);
    return ENR_REQ_BODY_TOO_LARGE;
}

/* ---- the work ----------------------------------------------------------- */

/* The batch parsed from the body; the body is freed if it was large. */
static enr_req_outcome parse(enr_worker *w, enr_error *err)
{
    const enr_config *c = w->cfg;
    int r;

    enr_batch_reset(&w->batch);
    enr_engine_set_max_output(w->engine, c->max_output_bytes);
    r = enr_parse(w->engine, w->body.data, w->body.len, c->max_records, &w->batch, err);
    /* Before the body goes: capture copies a sampled one (capture.h). */
    enr_capture_offer(w->capture, w->body.data, w->body.len, w->arrival_us, r == 0);
    /* The records hold copies of what they need: a big body goes now,
     * before the output is built next to it. */
    enr_buf_shrink(&w->body, ENR_KEEP_BYTES);
    return r != 0 ? ENR_REQ_REJECTED : ENR_REQ_OK;
}

/* The upstream's poster art and runtime, by the request's deadline and
 * upstream_timeout_ms; *degraded: the records answered without them. */
static enr_req_outcome enrich(enr_worker *w, uint64_t deadline, size_t *degraded)
{
    uint64_t up_deadline;

    if (w->upstream == NULL || w->batch.n == 0)
        return ENR_REQ_OK;
    up_deadline = enr_mono_ms() + w->cfg->upstream_timeout_ms;
    if (caller_gone(w, "caller gone before upstream call"))
        return ENR_REQ_CALLER_GONE;
    *degraded = enr_upstream_enrich(w->upstream, &w->batch,
                                    up_deadline < deadline ? up_deadline : deadline);
    enr_worker_publish_upstream(w);
    return ENR_REQ_OK;
}

/* The NDJSON answer into w->out; past max_output_bytes the cut output
 * is dropped, never sent. */
static enr_req_outcome emit(enr_worker *w, enr_error *err)
{
    enr_buf_reset(&w->out);
    if (enr_emit(w->engine, &w->batch, enr_wall_ms, &w->out, err) != 0) {
        enr_buf_reset(&w->out);
        return ENR_REQ_REJECTED;
    }
    if (w->out.oom) {
        say(err, "out of memory");
        return ENR_REQ_NO_MEMORY;
    }
    enr_hook_plant(&w->out);
    return ENR_REQ_OK;
}

/* The worker's deadline: request_timeout_ms from the work's start, less
 * a margin to write a 503 before the master's kill (httpapi.h). */
static uint64_t work_deadline(const enr_config *c, uint64_t work_start)
{
    uint64_t margin = c->request_timeout_ms / 10;

    if (margin > ENR_API_ANSWER_MARGIN_MS)
        margin = ENR_API_ANSWER_MARGIN_MS;
    return work_start + c->request_timeout_ms - margin;
}

#define STEP(call)                                                                                 \
    do {                                                                                           \
        enr_req_outcome step_ = (call);                                                            \
        if (step_ != ENR_REQ_OK)                                                                   \
            return step_;                                                                          \
    } while (0)

static enr_req_outcome run(enr_worker *w, enr_error *err, size_t *degraded)
{
    uint64_t work_start, deadline;

    STEP(admit(w, err));
    STEP(read_body(w, err));
    /* request_timeout_ms counts the work, from here (the body had its own). */
    work_start = enr_mono_ms();
    ENR_SB_SET(w->slot->work_start_mono_ms, work_start);
    if (caller_gone(w, "caller gone before the engine"))
        return ENR_REQ_CALLER_GONE;
    enr_hook_hang(w->req.envp); /* a stuck request: the master's job */
    STEP(parse(w, err));
    deadline = work_deadline(w->cfg, work_start);
    STEP(enrich(w, deadline, degraded));
    enr_hook_slow(w->req.envp); /* slow work: the worker's own deadline */
    if (enr_mono_ms() >= deadline) {
        say(err, "request deadline exceeded");
        return ENR_REQ_DEADLINE;
    }
    if (caller_gone(w, "caller gone before the answer"))
        return ENR_REQ_CALLER_GONE;
    return emit(w, err);
}

void enr_api_handle(enr_worker *w, enr_api_result *o)
{
    enr_error err;
    size_t degraded = 0;
    enr_req_outcome out = run(w, &err, &degraded);

    memset(o, 0, sizeof *o);
    o->outcome = out;
    o->status = enr_req_status(out, &err);
    answer(w, out, o->status, &err, degraded);
    if (out == ENR_REQ_OK) {
        o->rec_in = w->batch.elements;
        o->rec_out = w->batch.n;
        o->degraded = degraded;
    }
    if (w->answer_lost) {
        o->outcome = ENR_REQ_ANSWER_LOST;
        o->status = enr_req_status(ENR_REQ_ANSWER_LOST, &err);
    }
}
