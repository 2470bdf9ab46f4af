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

#include "fcgi/fcgi_stream.h"

/* The status line and the headers of the reply (extra included). */
#define HEAD_MAX 256

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

static const char *request_path(FCGX_ParamArray envp, size_t *len)
{
    static const char *const names[] = {"DOCUMENT_URI", "SCRIPT_NAME", "REQUEST_URI"};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *p = FCGX_GetParam(names[i], envp);
        if (p != NULL && *p != '\0') {
            *len = strcspn(p, "?");
            return p;
        }
    }
    return NULL;
}

int enr_route_find(FCGX_ParamArray envp, const enr_route *routes, size_t n)
{
    size_t len;
    const char *path = request_path(envp, &len);

    if (path == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strlen(routes[i].path) == len && memcmp(routes[i].path, path, len) == 0)
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
