/*
 * fcgi_http.h: the HTTP side of a FastCGI request, one way in every
 * enrichd server process (the workers, the status process): which route
 * a request asks for, and the CGI response written back.
 *
 * The routing rule: the request's path is DOCUMENT_URI, else SCRIPT_NAME
 * (both decoded by the front end), else REQUEST_URI up to its '?',
 * percent-decoded (the first one present and not empty), and it names a
 * route only when it equals one of the process's table whole: no
 * prefix, no trailing slash, no case folding; a bad escape or an encoded
 * NUL names none.  nginx passes
 * the location's URI (nginx/snippets/enrichd-fastcgi.conf), so its
 * `location =` blocks and this table name the same paths.
 */
#ifndef ENR_FCGI_HTTP_H
#define ENR_FCGI_HTTP_H

#include <fcgiapp.h>
#include <stddef.h>

typedef struct enr_route {
    const char *path; /* "/v1/enrich" */
    int id;           /* the caller's */
} enr_route;

/* The id of the route the request asks for, or -1 (the caller's 404). */
int enr_route_find(FCGX_ParamArray envp, const enr_route *routes, size_t n);
/* A route table as the last two arguments: enr_route_find(envp, ENR_ROUTES(t)). */
#define ENR_ROUTES(t) (t), (sizeof(t) / sizeof((t)[0]))

/* Is the request a HEAD (the answer's headers without its body)? */
int enr_request_is_head(FCGX_ParamArray envp);

typedef struct enr_reply {
    int status;        /* the HTTP status: "Status: 200 OK" */
    const char *ctype; /* Content-Type */
    const char *extra; /* further header lines, each ending in CRLF, or NULL */
    const char *body;
    size_t len; /* Content-Length, for HEAD too */
} enr_reply;

/* Writes the reply to req (Status with its reason phrase, Content-Type,
 * Content-Length, extra, a blank line, then the body unless the request
 * is a HEAD) as FCGI_STDOUT records, within timeout_ms in all
 * (enr_fcgi_write_stdout).  Returns 0, or the errno of the failed write
 * (never 0; enr_fcgi_error_value() names it): the rest of the answer is
 * lost and the caller must not end it as complete. */
int enr_reply_send(FCGX_Request *req, const enr_reply *r, unsigned timeout_ms);

#endif
