/*
 * statuscli.c: `enrichd status`, a small FastCGI client of the status
 * process that prints its document for a terminal.
 *
 * What the socket returns is untrusted (a wrong path, another program on
 * the port, a wedged or hostile peer): the whole exchange has one
 * deadline (STATUS_CLI_TIMEOUT_MS, not one per read), everything read
 * counts against STATUS_CLI_MAX_BYTES whatever the record type, records
 * are checked for version and length before their content is read, and
 * the document is parsed and printed by statustext.c, which bounds its
 * nesting and strips control characters.  Exit codes: 0 the pool
 * answered 200 (--health: healthy), 1 it answered otherwise or not at
 * all, 2 usage.  --watch redraws until interrupted, as uwsgitop does.
 */
#include "ops/status.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <stdlib.h>
#include <json-c/json.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "ops/statusmodel.h"
#include "ops/statustext.h"

#define STATUS_CLI_TIMEOUT_MS 5000 /* connect, send and receive, in all */
#define STATUS_CLI_MAX_BYTES (ENR_STATUS_DOC_MAX_BYTES + 65536) /* every byte read */
#define STATUS_CLI_STDERR_MAX 4096                              /* FCGI_STDERR text shown */
#define STATUS_CLI_WATCH_S 2 /* --watch: default seconds between redraws */
#define STATUS_CLI_WATCH_MAX_S 3600

/* FastCGI 1.0 record types and roles (the protocol's own numbers). */
enum { FCGI_VERSION_1 = 1 };
enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7
};
enum { FCGI_ROLE_RESPONDER = 1 };
enum { CLI_REQUEST_ID = 1 };

typedef struct cli {
    int fd;
    uint64_t deadline; /* CLOCK_MONOTONIC ms */
    size_t read_total;
} cli;

static void fcgi_record(enr_buf *b, int type, const void *p, size_t len)
{
    unsigned char h[8] = {FCGI_VERSION_1,
                          (unsigned char)type,
                          0,
                          CLI_REQUEST_ID,
                          (unsigned char)(len >> 8),
                          (unsigned char)len,
                          0,
                          0};
    enr_buf_append(b, h, sizeof h);
    enr_buf_append(b, p, len);
}

static void fcgi_param(enr_buf *b, const char *k, const char *v)
{
    size_t kl = strlen(k), vl = strlen(v); /* all < 128 here */
    enr_buf_putc(b, (char)kl);
    enr_buf_putc(b, (char)vl);
    enr_buf_append(b, k, kl);
    enr_buf_append(b, v, vl);
}

/* Waits until fd is ready for events or the deadline passes: 0, or -1
 * with a message. */
static int wait_ready(cli *c, short events)
{
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = events};
        uint64_t now = enr_mono_ms();
        int r;
        if (now >= c->deadline) {
            fprintf(stderr, "enrichd status: no answer within %d ms\n", STATUS_CLI_TIMEOUT_MS);
            return -1;
        }
        r = poll(&p, 1, (int)(c->deadline - now));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "enrichd status: poll: %s\n", strerror(errno));
            return -1;
        }
    }
}

static int connect_unix(cli *c, const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};

    if (strlen(path) >= sizeof sun.sun_path) {
        fprintf(stderr, "enrichd status: socket path too long: %s\n", path);
        return -1;
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
        fprintf(stderr, "enrichd status: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* host:port, connected with the deadline (non-blocking connect). */
static int connect_tcp(cli *c, const char *target, const char *colon)
{
    char host[256];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
    size_t hl = (size_t)(colon - target);
    int rc, err = 0;

    if (hl >= sizeof host) {
        fprintf(stderr, "enrichd status: host name too long: %s\n", target);
        return -1;
    }
    memcpy(host, target, hl);
    host[hl] = '\0';
    rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "enrichd status: %s: %s\n", target, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        socklen_t el = sizeof err;
        c->fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (c->fd < 0)
            continue;
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_ready(c, POLLOUT) == 0 &&
             getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0))
            break;
        if (err != 0)
            errno = err;
        close(c->fd);
        c->fd = -1;
    }
    if (c->fd < 0)
        fprintf(stderr, "enrichd status: %s: %s\n", target, strerror(errno));
    freeaddrinfo(res);
    return c->fd < 0 ? -1 : 0;
}

static int cli_connect(cli *c, const char *target)
{
    const char *colon = strrchr(target, ':');
    int r;

    if (strncmp(target, "unix:", 5) == 0)
        target += 5;
    if (target[0] == '/' || colon == NULL)
        r = connect_unix(c, target);
    else
        r = connect_tcp(c, target, colon);
    /* Every later wait goes through poll() with the one deadline. */
    if (r == 0 && fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0) {
        fprintf(stderr, "enrichd status: fcntl: %s\n", strerror(errno));
        r = -1;
    }
    return r;
}

static int send_all(cli *c, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(c->fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_ready(c, POLLOUT) != 0)
                return -1;
        } else {
            fprintf(stderr, "enrichd status: send: %s\n", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Reads exactly len bytes: 0, or -1 with a message. */
static int recv_all(cli *c, void *dst, size_t len)
{
    char *p = dst;

    if (len > STATUS_CLI_MAX_BYTES - c->read_total) {
        fprintf(stderr, "enrichd status: answer larger than %u bytes\n", STATUS_CLI_MAX_BYTES);
        return -1;
    }
    while (len > 0) {
        ssize_t n = read(c->fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            c->read_total += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_ready(c, POLLIN) != 0)
                return -1;
        } else {
            fprintf(stderr, "enrichd status: connection closed before the end of the answer%s%s\n",
                    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
            return -1;
        }
    }
    return 0;
}

/* GET path?query over FastCGI; the CGI response (headers and body) in
 * out, FCGI_STDERR text (bounded) in err. */
static int cli_fetch(cli *c, const char *path, const char *query, enr_buf *out, enr_buf *err)
{
    enr_buf req = {0}, params = {0};
    unsigned char begin[8] = {0, FCGI_ROLE_RESPONDER, 0, 0, 0, 0, 0, 0};
    int rc = -1;

    fcgi_param(&params, "REQUEST_METHOD", "GET");
    fcgi_param(&params, "SCRIPT_NAME", path);
    fcgi_param(&params, "DOCUMENT_URI", path);
    fcgi_param(&params, "REQUEST_URI", path);
    fcgi_param(&params, "QUERY_STRING", query);
    fcgi_param(&params, "SERVER_PROTOCOL", "HTTP/1.1");
    fcgi_param(&params, "HTTP_ACCEPT", "application/json");
    fcgi_record(&req, FCGI_BEGIN_REQUEST, begin, sizeof begin);
    fcgi_record(&req, FCGI_PARAMS, params.data, params.len);
    fcgi_record(&req, FCGI_PARAMS, "", 0);
    fcgi_record(&req, FCGI_STDIN, "", 0);
    if (req.oom || params.oom) {
        fprintf(stderr, "enrichd status: out of memory\n");
        goto out;
    }
    if (send_all(c, req.data, req.len) != 0)
        goto out;
    /* Records until END_REQUEST; STDOUT content is the CGI response. */
    for (;;) {
        unsigned char h[8];
        char body[65535 + 255];
        size_t len;

        if (recv_all(c, h, sizeof h) != 0)
            goto out;
        if (h[0] != FCGI_VERSION_1) {
            fprintf(stderr, "enrichd status: not a FastCGI answer (record version %u)\n", h[0]);
            goto out;
        }
        len = ((size_t)h[4] << 8) | h[5];
        if (recv_all(c, body, len + h[6]) != 0)
            goto out;
        if (h[1] == FCGI_END_REQUEST)
            break;
        if (h[1] == FCGI_STDOUT)
            enr_buf_append(out, body, len);
        else if (h[1] == FCGI_STDERR && err->len < STATUS_CLI_STDERR_MAX)
            enr_buf_append(
                err, body,
                len < STATUS_CLI_STDERR_MAX - err->len ? len : STATUS_CLI_STDERR_MAX - err->len);
        if (out->oom || err->oom) {
            fprintf(stderr, "enrichd status: out of memory\n");
            goto out;
        }
    }
    rc = 0;
out:
    enr_buf_free(&req);
    enr_buf_free(&params);
    return rc;
}

/* Prints text with control characters replaced (it came from the peer). */
static void print_clean(FILE *f, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        fputc((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f ? '?' : ch, f);
    }
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: enrichd status [--json] [--health] [--watch [-n SECONDS]] [-c FILE | SOCKET]\n"
        "  SOCKET      the status socket (default: status_listen of -c FILE, or built in)\n"
        "  --json      the JSON document instead of the table\n"
        "  --health    the health verdict only: \"ok\", \"degraded: REASON\" (the fleet's store\n"
        "              unreachable; exit 0) or \"unhealthy: REASON\" (exit 1)\n"
        "  --watch     redraw the table every SECONDS (-n, default %d) until interrupted\n",
        STATUS_CLI_WATCH_S);
}

/* The verdict line of a /healthz document (the health object of the
 * status model, statusmodel.h): "ok", "degraded: REASON" or
 * "unhealthy: REASON". */
static int print_verdict(const char *body, size_t blen)
{
    json_tokener *tok = json_tokener_new_ex(ENR_STATUS_DOC_MAX_DEPTH);
    json_object *doc = NULL, *st = NULL, *why = NULL;
    int rc = -1;

    if (tok != NULL && blen <= ENR_STATUS_DOC_MAX_BYTES)
        doc = json_tokener_parse_ex(tok, body, (int)blen);
    if (doc != NULL && json_object_object_get_ex(doc, enr_sm_health_keys[ENR_SM_H_status], &st) &&
        json_object_is_type(st, json_type_string)) {
        const char *v = json_object_get_string(st);
        print_clean(stdout, v, strlen(v));
        if (json_object_object_get_ex(doc, enr_sm_health_keys[ENR_SM_H_reason], &why) &&
            json_object_is_type(why, json_type_string)) {
            fputs(": ", stdout);
            print_clean(stdout, json_object_get_string(why), strlen(json_object_get_string(why)));
        }
        fputc('\n', stdout);
        rc = 0;
    } else {
        fputs("enrichd status: not a health document: ", stderr);
        print_clean(stderr, body, blen < 512 ? blen : 512);
        fputc('\n', stderr);
    }
    json_object_put(doc);
    if (tok != NULL)
        json_tokener_free(tok);
    return rc;
}

/* One exchange with the status process, printed: 0 when it answered 200
 * and the answer could be shown, -1 otherwise (said on stderr). */
static int show_once(const char *target, const char *path, int json, int top)
{
    enr_buf resp = {0}, err = {0}, text = {0};
    cli c = {.fd = -1};
    const char *body;
    size_t blen;
    int rc;

    c.deadline = enr_mono_ms() + STATUS_CLI_TIMEOUT_MS;
    rc = cli_connect(&c, target) == 0 && cli_fetch(&c, path, "full", &resp, &err) == 0 ? 0 : -1;
    if (c.fd >= 0)
        close(c.fd);
    if (err.len) {
        fputs("enrichd status: the status process said: ", stderr);
        print_clean(stderr, err.data, err.len);
        fputc('\n', stderr);
    }
    if (rc != 0)
        goto done;
    enr_buf_putc(&resp, '\0');
    if (resp.oom) {
        rc = -1;
        goto done;
    }
    body = strstr(resp.data, "\r\n\r\n");
    body = body ? body + 4 : resp.data;
    blen = resp.len - 1 - (size_t)(body - resp.data);
    rc = strncmp(resp.data, "Status: 200", 11) == 0 ? 0 : -1;
    if (json) {
        print_clean(stdout, body, blen);
        goto done;
    }
    if (strcmp(path, "/status") != 0) {
        if (print_verdict(body, blen) != 0)
            rc = -1;
        goto done;
    }
    if (enr_status_text_parse_as(&text, body, blen, top ? enr_status_text_top : enr_status_text) !=
        0) {
        fputs("enrichd status: not a status document: ", stderr);
        print_clean(stderr, body, blen < 512 ? blen : 512);
        fputc('\n', stderr);
        rc = -1;
        goto done;
    }
    fwrite(text.data, 1, text.len, stdout);
done:
    enr_buf_free(&resp);
    enr_buf_free(&err);
    enr_buf_free(&text);
    return rc;
}

/* uwsgitop's view: the table redrawn in place until interrupted (the
 * default action of SIGINT ends it; nothing is left half-written but a
 * screen). */
static int watch(const char *target, const char *path, int json, unsigned every_s)
{
    for (;;) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;

        strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
        fputs("\033[H\033[2J", stdout); /* home, clear */
        printf("enrichd status %s  every %us  %s  (Ctrl-C ends)\n\n", target, every_s, when);
        fflush(stdout);
        show_once(target, path, json, 1);
        fflush(stdout);
        fflush(stderr);
        sleep(every_s);
    }
    return 0;
}

int enr_status_cli(int argc, char **argv)
{
    const char *target = NULL, *path = "/status", *conf = NULL;
    int json = 0, watching = 0, i = 1;
    unsigned every_s = STATUS_CLI_WATCH_S;
    static enr_config defaults;
    char cerr[256];

    /* Called as (argc, argv) of the whole program or of the subcommand. */
    for (int j = 0; j < argc; j++)
        if (strcmp(argv[j], "status") == 0) {
            i = j + 1;
            break;
        }
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--health") == 0)
            path = "/healthz";
        else if (strcmp(argv[i], "--watch") == 0)
            watching = 1;
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > STATUS_CLI_WATCH_MAX_S) {
                fprintf(stderr, "enrichd status: -n takes 1 to %d seconds\n",
                        STATUS_CLI_WATCH_MAX_S);
                return 2;
            }
            every_s = (unsigned)v;
        } else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
            conf = argv[++i];
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else
            target = argv[i];
    }
    if (target == NULL) {
        /* The socket the daemon's configuration names (built-in default
         * without -c). */
        if (enr_config_load(&defaults, conf, cerr, sizeof cerr) != 0) {
            fprintf(stderr, "enrichd status: %s\n", cerr);
            return 2;
        }
        target = defaults.status_listen;
    }
    if (watching)
        return watch(target, path, json, every_s);
    return show_once(target, path, json, 0) == 0 ? 0 : 1;
}
