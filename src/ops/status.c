/*
 * status.c: the status process (the `enrichd status` command is
 * statuscli.c).
 *
 * The status process is forked by the master and serves FastCGI on its
 * own socket: /healthz, /readyz, /status and /metrics.  It reads the
 * scoreboard and the kernel (/proc, sock_diag), never a worker, so it
 * answers while every worker is busy or stuck.
 *
 * Invariants: single-threaded; it waits for a connection with a
 * one-second tick, so it samples health at least once a second even
 * without requests; it gathers up to STATUS_MAX_PEERS connections at
 * once and serves a request only once it is whole (fcgi_mux.h), so no
 * silent or slow peer, nor a crowd of them, delays another's answer;
 * its connections follow the workers' policy (fcgi_conn.h: RESPONDER
 * only, one request per connection, each client bounded in time) and
 * its answers their writer and routing rule (fcgi_http.h); it never
 * writes the scoreboard, and never judges health: /healthz, /status and
 * /metrics show the verdict the master published (the one systemd's
 * watchdog sees); signal handlers only set flags.
 */
#include "ops/status.h"

#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/buf.h"
#include "ops/health.h"
#include "base/log.h"
#include "base/proctitle.h"
#include "ops/metrics.h"
#include "base/signals.h"
#include "base/sockdiag.h"
#include "ops/statusdoc.h"
#include "ops/statushtml.h"
#include "base/clock.h"
#include "fcgi/fcgi_child.h"
#include "fcgi/fcgi_conn.h"
#include "fcgi/fcgi_http.h"
#include "fcgi/fcgi_mux.h"

#define STATUS_TICK_MS 1000 /* listen queue and busy workers sampling period */
/* A client gets this long from its connect to send its whole request
 * (gathered beside the others': fcgi_mux.h), and the answer's write this
 * long; a silent one (a port scan, a stuck proxy) is then closed. */
#define STATUS_CLIENT_TIMEOUT_MS 2000
/* Connections gathered at once; one more closes the oldest that has not
 * sent its whole request.  nginx opens one per status request, and
 * Prometheus, probes and a browser a few at a time. */
#define STATUS_MAX_PEERS 16
/* After the answer, waiting for the client to close its side. */
#define STATUS_LINGER_MS 500

static volatile sig_atomic_t status_stop;

typedef struct status_ctx {
    const enr_config *c;
    enr_scoreboard *sb;
    const enr_cache *cache; /* the host's upstream cache, or NULL */
    int main_fd;
    enr_fcgi_conn conn; /* the status socket: the workers' connection policy */
    enr_fcgi_mux mux;   /* its connections, gathered until each request is whole */
    enr_health health;  /* the master's verdict, read back (enr_health_read) */
    unsigned serving;   /* workers idle or busy now */
    int have_queue;
    unsigned queue, queue_limit, queue_max, busy_max;
    uint64_t last_tick;
    enr_pool_seen seen;   /* what this process measured and showed (poolsnap.h) */
    enr_status_hist hist; /* one sample a tick, for ?html */
} status_ctx;

static void measure(status_ctx *x)
{
    const enr_sb_slot *s;
    unsigned q, lim, busy = 0;

    x->have_queue = 0;
    if (x->main_fd >= 0 && enr_sockdiag_listen_queue(x->main_fd, &q, &lim) == 0) {
        x->have_queue = 1;
        x->queue = q;
        x->queue_limit = lim;
        if (q > x->queue_max)
            x->queue_max = q;
    }
    enr_health_read(&x->health, x->sb);
    x->serving = 0;
    for (ENR_SB_EACH_SLOT(x->sb, i, s)) {
        if (!enr_sb_slot_serving(s))
            continue;
        x->serving++;
        if (ENR_SB_GET(s->state) == ENR_WS_BUSY)
            busy++;
    }
    if (busy > x->busy_max)
        x->busy_max = busy;
}

/* ---- responses ---- */

/* Every answer goes out through the one writer (fcgi_http.c), HEAD
 * included; a failed write resets the connection (fcgi_conn.h), so a
 * client never takes a cut answer for a whole one. */
/* The page loads nothing from anywhere (statushtml.h): the browser is
 * told so, which also keeps a request id in the page from running. */
#define STATUS_HTML_HEADERS                                                                        \
    "Cache-Control: no-store\r\n"                                                                  \
    "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"

static void respond_with(status_ctx *x, int code, const char *ctype, const char *headers,
                         const char *body, size_t len)
{
    enr_reply rep = {code, ctype, headers, body, len};
    int e = enr_reply_send(x->conn.req, &rep, x->conn.write_ms);

    if (e != 0) {
        enr_log(ENR_LOG_WARN, "answer write failed: connection reset",
                "status=%d bytes=%zu error=%s", code, len, enr_fcgi_error_value(e));
        enr_fcgi_conn_abort(&x->conn);
    }
}

static void respond(status_ctx *x, int code, const char *ctype, const char *body, size_t len)
{
    respond_with(x, code, ctype, "Cache-Control: no-store\r\n", body, len);
}

static void respond_json(status_ctx *x, int code, json_object *doc)
{
    size_t len = 0;
    const char *s = json_object_to_json_string_length(
        doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    enr_buf b = {0};

    enr_buf_append(&b, s, len);
    enr_buf_putc(&b, '\n');
    if (b.oom)
        respond(x, 500, "text/plain", "out of memory\n", 14);
    else
        respond(x, code, "application/json", b.data, b.len);
    enr_buf_free(&b);
}

/* Has the query string the flag `name` (full, full=1, a&full&b)? */
static int query_has(const char *q, const char *name)
{
    size_t n = strlen(name);

    while (q && *q) {
        if (strncmp(q, name, n) == 0 && (q[n] == '\0' || q[n] == '&' || q[n] == '='))
            return 1;
        q = strchr(q, '&');
        if (q)
            q++;
    }
    return 0;
}

static int wants_text(const char *query, const char *accept)
{
    if (query_has(query, "json"))
        return 0;
    if (query_has(query, "text"))
        return 1;
    /* Accept: text/plain without application/json asks for the text view. */
    return accept && strstr(accept, "text/plain") && !strstr(accept, "application/json");
}

/* Descriptor attribution of every live worker, for ?full and /metrics. */
static void attribute_fds(const status_ctx *x, enr_fd_kinds *fds, int *ok)
{
    char err[128], q[160];
    enr_sockdiag_snap *snap = enr_sockdiag_snap_take(err, sizeof err);
    const enr_sb_slot *s;

    if (snap == NULL)
        enr_log(ENR_LOG_WARN, "socket table unavailable", "error=%s",
                enr_log_quote(q, sizeof q, err));
    for (ENR_SB_EACH_SLOT(x->sb, i, s))
        ok[i] =
            enr_sb_slot_live(s) && enr_sockdiag_fds(snap, (pid_t)ENR_SB_GET(s->pid), &fds[i]) == 0;
    enr_sockdiag_snap_free(snap);
}

/* One reading of the pool for the surface being served (poolsnap.h). */
static void view_of(status_ctx *x, enr_status_view *v, enr_pool_snap *ps, const enr_fd_kinds *fds,
                    const int *ok)
{
    x->seen.have_queue = x->have_queue;
    x->seen.listen_queue = x->queue;
    x->seen.listen_queue_limit = x->queue_limit;
    x->seen.listen_queue_max = x->queue_max;
    x->seen.max_active = x->busy_max;
    enr_pool_snap_take(ps, x->sb, &x->seen);
    memset(v, 0, sizeof *v);
    v->c = x->c;
    v->sb = x->sb;
    v->pool = ps;
    v->health = &x->health;
    v->fds = fds;
    v->fds_ok = ok;
    v->cache = x->cache;
}

static void serve_status(status_ctx *x, const char *query, const char *accept)
{
    static enr_fd_kinds fds[ENR_SB_MAX_WORKERS];
    static int ok[ENR_SB_MAX_WORKERS];
    int html = query_has(query, "html"), full = html || query_has(query, "full");
    enr_status_view v;
    enr_pool_snap ps;
    json_object *doc;

    if (full)
        attribute_fds(x, fds, ok);
    view_of(x, &v, &ps, full ? fds : NULL, full ? ok : NULL);
    doc = enr_status_doc(&v, full);
    if (html) {
        enr_buf b = {0};
        enr_status_html(&b, doc, &x->hist);
        if (b.oom)
            respond(x, 500, "text/plain", "out of memory\n", 14);
        else
            respond_with(x, 200, "text/html; charset=utf-8", STATUS_HTML_HEADERS, b.data, b.len);
        enr_buf_free(&b);
    } else if (wants_text(query, accept)) {
        enr_buf b = {0};
        enr_status_text(&b, doc);
        if (b.oom)
            respond(x, 500, "text/plain", "out of memory\n", 14);
        else
            respond(x, 200, "text/plain; charset=utf-8", b.data, b.len);
        enr_buf_free(&b);
    } else {
        respond_json(x, 200, doc);
    }
    json_object_put(doc);
}

static void serve_metrics(status_ctx *x)
{
    static enr_fd_kinds fds[ENR_SB_MAX_WORKERS];
    static int ok[ENR_SB_MAX_WORKERS];
    enr_status_view v;
    enr_pool_snap ps;
    enr_buf b = {0};

    attribute_fds(x, fds, ok);
    view_of(x, &v, &ps, fds, ok);
    enr_metrics_render(&b, &v);
    if (b.oom)
        respond(x, 500, "text/plain", "out of memory\n", 14);
    else
        respond(x, 200, ENR_METRICS_CONTENT_TYPE, b.data, b.len);
    enr_buf_free(&b);
}

static void serve_readyz(status_ctx *x)
{
    uint64_t st = ENR_SB_GET(x->sb->pool.state);
    json_object *doc = json_object_new_object();
    char reason[96] = "";

    /* Reloading keeps serving with the old generation: still ready. */
    if (st == ENR_POOL_STARTING || st == ENR_POOL_DRAINING)
        snprintf(reason, sizeof reason, "%s", enr_pool_state_name(st));
    else if (x->serving < x->c->min_ready_workers)
        snprintf(reason, sizeof reason, "%u live workers < min_ready_workers %u", x->serving,
                 x->c->min_ready_workers);
    json_object_object_add(doc, "status",
                           json_object_new_string(reason[0] ? "not ready" : "ready"));
    if (reason[0])
        json_object_object_add(doc, "reason", json_object_new_string(reason));
    json_object_object_add(doc, "live_workers", json_object_new_uint64(x->serving));
    json_object_object_add(doc, "min_ready_workers",
                           json_object_new_uint64(x->c->min_ready_workers));
    respond_json(x, reason[0] ? 503 : 200, doc);
    json_object_put(doc);
}

static void serve_healthz(status_ctx *x)
{
    json_object *doc = enr_health_doc(&x->health, x->c, x->sb);
    respond_json(x, x->health.healthy ? 200 : 503, doc);
    json_object_put(doc);
}

enum { ROUTE_HEALTHZ, ROUTE_READYZ, ROUTE_STATUS, ROUTE_METRICS };

/* The status routes (the rule: fcgi_http.h); nginx/enrichd.conf passes
 * the same paths to the status socket. */
static const enr_route status_routes[] = {{"/healthz", ROUTE_HEALTHZ},
                                          {"/readyz", ROUTE_READYZ},
                                          {"/status", ROUTE_STATUS},
                                          {"/metrics", ROUTE_METRICS}};

static void handle(status_ctx *x)
{
    FCGX_ParamArray env = x->conn.req->envp;
    const char *method = FCGX_GetParam("REQUEST_METHOD", env);

    if (method && strcmp(method, "GET") != 0 && !enr_request_is_head(env)) {
        respond(x, 405, "text/plain", "GET or HEAD only\n", 17);
        return;
    }
    measure(x); /* every answer reflects this instant */
    switch (enr_route_find(env, ENR_ROUTES(status_routes))) {
    case ROUTE_HEALTHZ:
        serve_healthz(x);
        break;
    case ROUTE_READYZ:
        serve_readyz(x);
        break;
    case ROUTE_STATUS:
        serve_status(x, FCGX_GetParam("QUERY_STRING", env), FCGX_GetParam("HTTP_ACCEPT", env));
        break;
    case ROUTE_METRICS:
        serve_metrics(x);
        break;
    default:
        respond(x, 404, "text/plain", "unknown status route\n", 21);
    }
}

/* The status process's signals; every other one has its kind's default
 * (signals.h).  Handled signals are blocked except while it waits for a
 * client, so a request in hand is always answered. */
static const enr_sig_rule status_signals[] = {
    {SIGTERM, ENR_SIG_FLAG, &status_stop, NULL},
    {SIGQUIT, ENR_SIG_FLAG, &status_stop, NULL},
    {SIGPIPE, ENR_SIG_IGNORE, NULL, NULL}, /* a client that hangs up must not kill us */
    {SIGALRM, ENR_SIG_KEEP, NULL, NULL},   /* fcgi_conn.c's header timer */
    {SIGHUP, ENR_SIG_NOTE, NULL, "the master's: it reloads the pool"},
    {SIGINT, ENR_SIG_NOTE, NULL, "the master's: it drains the pool"},
    {SIGUSR2, ENR_SIG_NOTE, NULL, "the workers': the status process has no backlog to drain"},
};

int enr_status_main(const enr_config *c, enr_scoreboard *sb, const enr_cache *cache, int status_fd,
                    int main_fd, pid_t master_pid)
{
    static status_ctx x; /* the health ring is a few KiB: keep it off the stack */
    static sigset_t wait_mask;
    FCGX_Request req;
    char qsock[2 * ENR_PATH_MAX];

    enr_fcgi_child start = {
        "status",   "status",       "master gone before the status process started",
        master_pid, status_signals, sizeof status_signals / sizeof status_signals[0]};

    memset(&x, 0, sizeof x);
    x.c = c;
    x.sb = sb;
    x.cache = cache;
    x.main_fd = main_fd;
    /* Die with the master rather than serve a stale scoreboard. */
    if (enr_fcgi_child_start(&start, &wait_mask) != 0)
        return 1;
    /* Non-blocking: when the connection poll() saw is gone by the time
     * we accept, accept fails with EAGAIN instead of waiting for the next
     * client. */
    {
        int fl = fcntl(status_fd, F_GETFL);
        if (fl < 0 || fcntl(status_fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            enr_log(ENR_LOG_ERROR, "O_NONBLOCK failed", "error=%s", enr_log_errno(errno));
            return 1;
        }
    }
    /* No allow list and no counters: the status socket is the host's
     * (conf/enrichd.conf), and this process never writes the scoreboard. */
    x.conn.listen_fd = status_fd;
    x.conn.req = &req;
    x.conn.header_ms = STATUS_CLIENT_TIMEOUT_MS;
    x.conn.read_ms = STATUS_CLIENT_TIMEOUT_MS;
    x.conn.write_ms = STATUS_CLIENT_TIMEOUT_MS;
    x.conn.linger_ms = STATUS_LINGER_MS;
    x.conn.stop = &status_stop;
    x.conn.side_fd = -1;
    x.conn.max_conns = 1;
    x.conn.wait_mask = &wait_mask;
    x.mux.conn = &x.conn;
    x.mux.max = STATUS_MAX_PEERS;
    x.mux.request_ms = STATUS_CLIENT_TIMEOUT_MS;
    if (enr_fcgi_conn_init(&x.conn) != 0) {
        enr_log(ENR_LOG_ERROR, "FastCGI init failed", NULL);
        return 1;
    }
    enr_log(ENR_LOG_INFO, "status process ready", "socket=%s",
            enr_log_quote(qsock, sizeof qsock, c->status_listen));
    measure(&x);
    x.last_tick = enr_mono_ms();
    enr_status_hist_add(&x.hist, x.sb, &x.health, x.last_tick);
    for (;;) {
        uint64_t now = enr_mono_ms();
        int timeout =
            now - x.last_tick >= STATUS_TICK_MS ? 0 : (int)(STATUS_TICK_MS - (now - x.last_tick));
        int fd = enr_fcgi_mux_next(&x.mux, timeout);

        if (enr_mono_ms() - x.last_tick >= STATUS_TICK_MS) {
            measure(&x);
            x.last_tick = enr_mono_ms();
            enr_status_hist_add(&x.hist, x.sb, &x.health, x.last_tick);
        }
        if (fd == ENR_FCGI_STOP)
            break;
        if (fd < 0)
            continue;
        x.conn.pre = (const unsigned char *)x.mux.ready.data;
        x.conn.pre_len = x.mux.ready.len;
        if (enr_fcgi_conn_open(&x.conn, fd) != 0)
            continue;
        handle(&x);
        enr_fcgi_conn_finish(&x.conn);
        enr_fcgi_conn_close(&x.conn);
    }
    FCGX_Free(&req, 0);
    enr_fcgi_mux_free(&x.mux);
    enr_fcgi_conn_free(&x.conn);
    if (!status_stop) /* leaving unasked: the socket failed (logged) */
        return 1;
    enr_log(ENR_LOG_INFO, "status process stopping", NULL);
    return 0;
}
