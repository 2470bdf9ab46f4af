/*
 * fcgi_http.c: the one routing rule and the one response writer
 * (fcgi_http.h).
 *
 * Invariants: the writer never sends fewer body bytes than the
 * Content-Length it wrote without returning an error; a HEAD gets the
 * headers of the same answer (Content-Length included) and no body; the
 * router allocates nothing and keeps no state.
 */
#include "fcgi/fcgi_http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "fcgi/fcgi_stream.h"

/* The status line and the headers of the reply (extra included): the
 * worker's extra headers are at most ~4 KiB (pool/rejected.h), well
 * inside nginx's 16 KiB fastcgi_buffer_size. */
#define HEAD_MAX (5 * 1024)

/* The reason phrases of the codes enrichd answers (RFC 9110): the CGI
 * Status header carries one (RFC 3875 6.3.3), and nginx passes it on as
 * the client's status line, which is bare without it. */
static const char *reason_of(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return NULL;
    }
}

/* The longest path a route table may hold (a longer request path is no
 * route). */
#define ROUTE_PATH_MAX 64

/* p[0..len) percent-decoded into out (ROUTE_PATH_MAX bytes); its length,
 * or -1 when it is longer, has a bad escape, or decodes to a NUL (no
 * route has one). */
static long percent_decode(const char *p, size_t len, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)p[i];
        if (c == '%') {
            int hi = i + 2 < len ? enr_hex_digit(p[i + 1]) : -1;
            int lo = hi >= 0 ? enr_hex_digit(p[i + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = hi << 4 | lo;
            i += 2;
        }
        if (o == ROUTE_PATH_MAX)
            return -1;
        out[o++] = (char)c;
    }
    return (long)o;
}

/* The request's path into buf (ROUTE_PATH_MAX bytes): DOCUMENT_URI and
 * SCRIPT_NAME are decoded already (nginx's $document_uri, RFC 3875
 * 4.1.13); REQUEST_URI is as the client sent it (Caddy passes it raw),
 * so it is decoded here, after its query is cut off.  Its length, or -1. */
static long request_path(FCGX_ParamArray envp, char *buf)
{
    static const char *const names[] = {"DOCUMENT_URI", "SCRIPT_NAME", "REQUEST_URI"};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *p = FCGX_GetParam(names[i], envp);
        size_t len;
        if (p == NULL || *p == '\0')
            continue;
        if (i < 2) {
            len = strlen(p);
            if (len > ROUTE_PATH_MAX)
                return -1;
            memcpy(buf, p, len);
            return (long)len;
        }
        return percent_decode(p, strcspn(p, "?"), buf);
    }
    return -1;
}

int enr_route_find(FCGX_ParamArray envp, const enr_route *routes, size_t n)
{
    char path[ROUTE_PATH_MAX];
    long len = request_path(envp, path);

    if (len < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strlen(routes[i].path) == (size_t)len && memcmp(routes[i].path, path, (size_t)len) == 0)
            return routes[i].id;
    return -1;
}

int enr_request_is_head(FCGX_ParamArray envp)
{
    const char *m = FCGX_GetParam("REQUEST_METHOD", envp);
    return m != NULL && strcmp(m, "HEAD") == 0;
}

int enr_reply_send(FCGX_Request *req, const enr_reply *r, unsigned timeout_ms)
{
    char head[HEAD_MAX];
    const char *reason = reason_of(r->status);
    size_t blen = enr_request_is_head(req->envp) ? 0 : r->len;
    int n;

    n = snprintf(head, sizeof head,
                 "Status: %d%s%s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", r->status,
                 reason ? " " : "", reason ? reason : "", r->ctype, r->len,
                 r->extra ? r->extra : "");
    if (n < 0 || (size_t)n >= sizeof head)
        return -1; /* a caller's bug: nothing is written */
    /* Straight from the caller's buffer in 64 KB records (fcgi_stream.h),
     * not through libfcgi's 8 KB stream: one writev for most answers,
     * the request's closing records included. */
    if (enr_fcgi_write_answer(req, head, (size_t)n, r->body, blen, timeout_ms) != 0)
        return errno != 0 ? errno : -1;
    return 0;
}
