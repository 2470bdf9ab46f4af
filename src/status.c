/*
 * status.c: the status process (the `enrichd status` command is
 * statuscli.c).
 *
 * The status process is forked by the master and serves FastCGI on its
 * own socket: /healthz, /readyz, /status and /metrics.  It reads the
 * scoreboard and the kernel (/proc, sock_diag), never a worker, so it
 * answers while every worker is busy or stuck.
 *
 * Invariants: single-threaded; it waits in poll() with a one-second
 * tick, so it samples health at least once a second even without
 * requests, and only calls FCGX_Accept_r() when a connection is pending
 * (the socket is non-blocking and a timer bounds each client); it never
 * writes the scoreboard, and never judges health: /healthz, /status and
 * /metrics show the verdict the master published (the one systemd's
 * watchdog sees); signal handlers only set flags.
 */
#include "status.h"

#include <errno.h>
#include <fcgiapp.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "health.h"
#include "log.h"
#include "metrics.h"
#include "sockdiag.h"
#include "statusdoc.h"
#include "clock.h"

#define STATUS_TICK_MS 1000 /* listen queue and busy workers sampling period */
/* A client gets this long to send its request and take the answer; past
 * it SIGALRM interrupts the read or write, so one silent or slow client
 * (a port scan, a stuck proxy) cannot stop the status page. */
#define STATUS_CLIENT_TIMEOUT_MS 2000

static volatile sig_atomic_t status_stop, status_alarm;

static void on_stop(int sig)
{
    (void)sig;
    status_stop = 1;
}

static void on_alarm(int sig)
{
    (void)sig;
    status_alarm = 1;
}

static int alarm_arm(unsigned ms)
{
    /* Periodic, so the client accepted after a silent one is bounded too. */
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    struct itimerval it = {.it_value = tv, .it_interval = tv};
    status_alarm = 0;
    return setitimer(ITIMER_REAL, &it, NULL);
}

typedef struct status_ctx {
    const enr_config *c;
    enr_scoreboard *sb;
    int main_fd;
    enr_health health; /* the master's verdict, read back (enr_health_read) */
    unsigned serving;  /* workers idle or busy now */
    int have_queue;
    unsigned queue, queue_limit, queue_max, busy_max;
    uint64_t last_tick;
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

static void respond(FCGX_Request *r, int head, int code, const char *ctype, const char *body,
                    size_t len)
{
    static const struct {
        int code;
        const char *text;
    } reasons[] = {{200, "OK"},
                   {404, "Not Found"},
                   {405, "Method Not Allowed"},
                   {500, "Internal Server Error"},
                   {503, "Service Unavailable"}};
    const char *text = "OK";

    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].code == code)
            text = reasons[i].text;
    FCGX_FPrintF(r->out,
                 "Status: %d %s\r\nContent-Type: %s\r\nContent-Length: %lu\r\n"
                 "Cache-Control: no-store\r\n\r\n",
                 code, text, ctype, (unsigned long)len);
    if (!head && len)
        FCGX_PutStr(body, (int)len, r->out);
}

static void respond_json(FCGX_Request *r, int head, int code, json_object *doc)
{
    size_t len = 0;
    const char *s = json_object_to_json_string_length(
        doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *body = malloc(len + 2);

    if (body == NULL) {
        respond(r, head, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    memcpy(body, s, len);
    body[len++] = '\n';
    respond(r, head, code, "application/json", body, len);
    free(body);
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

static void view_of(const status_ctx *x, enr_status_view *v, const enr_fd_kinds *fds, const int *ok)
{
    memset(v, 0, sizeof *v);
    v->c = x->c;
    v->sb = x->sb;
    v->health = &x->health;
    v->have_queue = x->have_queue;
    v->listen_queue = x->queue;
    v->listen_queue_limit = x->queue_limit;
    v->listen_queue_max = x->queue_max;
    v->max_active_seen = x->busy_max;
    v->fds = fds;
    v->fds_ok = ok;
}

static void serve_status(status_ctx *x, FCGX_Request *r, int head, const char *query,
                         const char *accept)
{
    static enr_fd_kinds fds[ENR_SB_MAX_WORKERS];
    static int ok[ENR_SB_MAX_WORKERS];
    int full = query_has(query, "full");
    enr_status_view v;
    json_object *doc;

    if (full)
        attribute_fds(x, fds, ok);
    view_of(x, &v, full ? fds : NULL, full ? ok : NULL);
    doc = enr_status_doc(&v, full);
    if (wants_text(query, accept)) {
        enr_buf b = {0};
        enr_status_text(&b, doc);
        if (b.oom)
            respond(r, head, 500, "text/plain", "out of memory\n", 14);
        else
            respond(r, head, 200, "text/plain; charset=utf-8", b.data, b.len);
        enr_buf_free(&b);
    } else {
        respond_json(r, head, 200, doc);
    }
    json_object_put(doc);
}

static void serve_metrics(status_ctx *x, FCGX_Request *r, int head)
{
    static enr_fd_kinds fds[ENR_SB_MAX_WORKERS];
    static int ok[ENR_SB_MAX_WORKERS];
    enr_metrics_extra e = {0};
    enr_buf b = {0};

    attribute_fds(x, fds, ok);
    e.have_queue = x->have_queue;
    e.listen_queue = x->queue;
    e.listen_queue_limit = x->queue_limit;
    e.listen_queue_max = x->queue_max;
    e.max_active_seen = x->busy_max;
    e.health = &x->health;
    e.fds = fds;
    e.fds_ok = ok;
    enr_metrics_render(&b, x->sb, x->c, &e);
    if (b.oom)
        respond(r, head, 500, "text/plain", "out of memory\n", 14);
    else
        respond(r, head, 200, ENR_METRICS_CONTENT_TYPE, b.data, b.len);
    enr_buf_free(&b);
}

static void serve_readyz(status_ctx *x, FCGX_Request *r, int head)
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
    respond_json(r, head, reason[0] ? 503 : 200, doc);
    json_object_put(doc);
}

static void serve_healthz(status_ctx *x, FCGX_Request *r, int head)
{
    json_object *doc = enr_health_doc(&x->health, x->c, x->sb);
    respond_json(r, head, x->health.healthy ? 200 : 503, doc);
    json_object_put(doc);
}

/* The route is the last path segment, so nginx may mount the endpoints
 * under any prefix (/enrichd/status) without a rewrite. */
static const char *route_of(FCGX_Request *r)
{
    static char path[256];
    const char *p = FCGX_GetParam("DOCUMENT_URI", r->envp);
    const char *slash;
    size_t n;

    if (p == NULL || *p == '\0')
        p = FCGX_GetParam("SCRIPT_NAME", r->envp);
    if (p == NULL || *p == '\0')
        p = FCGX_GetParam("REQUEST_URI", r->envp);
    if (p == NULL)
        return "";
    n = strcspn(p, "?");
    if (n >= sizeof path)
        n = sizeof path - 1;
    memcpy(path, p, n);
    path[n] = '\0';
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void handle(status_ctx *x, FCGX_Request *r)
{
    const char *method = FCGX_GetParam("REQUEST_METHOD", r->envp);
    const char *query = FCGX_GetParam("QUERY_STRING", r->envp);
    const char *accept = FCGX_GetParam("HTTP_ACCEPT", r->envp);
    const char *route = route_of(r);
    int head = method && strcmp(method, "HEAD") == 0;

    if (method && strcmp(method, "GET") != 0 && !head) {
        respond(r, 0, 405, "text/plain", "GET or HEAD only\n", 17);
        return;
    }
    measure(x); /* every answer reflects this instant */
    if (strcmp(route, "healthz") == 0)
        serve_healthz(x, r, head);
    else if (strcmp(route, "readyz") == 0)
        serve_readyz(x, r, head);
    else if (strcmp(route, "status") == 0)
        serve_status(x, r, head, query, accept);
    else if (strcmp(route, "metrics") == 0)
        serve_metrics(x, r, head);
    else
        respond(r, head, 404, "text/plain", "unknown status route\n", 21);
}

static int install_signals(void)
{
    struct sigaction sa;
    sigset_t all;

    /* The master may have blocked signals around fork; this process waits
     * in poll() and must see SIGTERM there. */
    sigemptyset(&all);
    if (sigprocmask(SIG_SETMASK, &all, NULL) != 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: poll and accept return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = on_alarm;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = SIG_IGN;
    /* A client that hangs up must not kill us; reload and reopen are the
     * master's business. */
    if (sigaction(SIGPIPE, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0 ||
        sigaction(SIGUSR1, &sa, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = SIG_DFL;
    return sigaction(SIGCHLD, &sa, NULL);
}

int enr_status_main(const enr_config *c, enr_scoreboard *sb, int status_fd, int main_fd)
{
    static status_ctx x; /* the health ring is a few KiB: keep it off the stack */
    FCGX_Request req;
    pid_t parent = getppid();
    int rc;

    enr_log_role("status");
    memset(&x, 0, sizeof x);
    x.c = c;
    x.sb = sb;
    x.main_fd = main_fd;
    if (install_signals() != 0) {
        enr_log(ENR_LOG_ERROR, "signal setup failed", "error=%s", enr_log_errno(errno));
        return 1;
    }
    /* Die with the master rather than serve a stale scoreboard. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
        enr_log(ENR_LOG_ERROR, "status: parent gone", NULL);
        return 1;
    }
    /* Non-blocking: when the connection poll() saw is gone by the time
     * we accept (or libfcgi drops a bad one and accepts again), accept
     * fails with EAGAIN instead of waiting for the next client. */
    {
        int fl = fcntl(status_fd, F_GETFL);
        if (fl < 0 || fcntl(status_fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            enr_log(ENR_LOG_ERROR, "O_NONBLOCK failed", "error=%s", enr_log_errno(errno));
            return 1;
        }
    }
    if (FCGX_Init() != 0 || FCGX_InitRequest(&req, status_fd, FCGI_FAIL_ACCEPT_ON_INTR) != 0) {
        enr_log(ENR_LOG_ERROR, "status: FastCGI init failed", NULL);
        return 1;
    }
    enr_log(ENR_LOG_INFO, "status process ready", "socket=%s", c->status_listen);
    measure(&x);
    x.last_tick = enr_mono_ms();
    while (!status_stop) {
        struct pollfd pfd = {.fd = status_fd, .events = POLLIN};
        uint64_t now = enr_mono_ms();
        int timeout =
            now - x.last_tick >= STATUS_TICK_MS ? 0 : (int)(STATUS_TICK_MS - (now - x.last_tick));
        int n = poll(&pfd, 1, timeout);

        if (n < 0 && errno != EINTR) {
            enr_log(ENR_LOG_ERROR, "poll failed", "error=%s", enr_log_errno(errno));
            return 1;
        }
        if (enr_mono_ms() - x.last_tick >= STATUS_TICK_MS) {
            measure(&x);
            x.last_tick = enr_mono_ms();
        }
        if (n <= 0 || status_stop)
            continue;
        if (alarm_arm(STATUS_CLIENT_TIMEOUT_MS) != 0) {
            enr_log(ENR_LOG_ERROR, "setitimer failed", "error=%s", enr_log_errno(errno));
            return 1;
        }
        rc = FCGX_Accept_r(&req);
        if (rc < 0) {
            /* No connection after all, a client that sent nothing in time,
             * or a signal: none is fatal. */
            if (!status_stop && rc != -EAGAIN && rc != -EWOULDBLOCK && rc != -EINTR)
                enr_log(ENR_LOG_WARN, "status: accept failed", "error=%d%s", -rc,
                        status_alarm ? " timeout=1" : "");
            alarm_arm(0);
            continue;
        }
        handle(&x, &req);
        FCGX_Finish_r(&req);
        alarm_arm(0);
    }
    FCGX_Free(&req, 0);
    enr_log(ENR_LOG_INFO, "status process stopping", NULL);
    return 0;
}
