/*
 * fcgi_body.h: a request's FCGI_STDIN content read straight from the
 * connection into the caller's body buffer, past libfcgi's stream.
 *
 * libfcgi reads the body into its stream buffer and FCGX_GetStr copies
 * it out: one copy of every body byte in user space.  Here the raw
 * records are read with readv(2) so that each record's content lands at
 * its final place in the body and only the 8-byte headers and the
 * padding land in a scratch area: the kernel's copy is the only one.
 * libfcgi keeps the connection's start (BEGIN_REQUEST, the parameters)
 * and every record that is not the request's own FCGI_STDIN: the first
 * such record, with everything read after it, is handed back to
 * libfcgi's stream, which goes on as it would have from the start
 * (management records answered, other ids skipped, errors the same).
 *
 * The parser (enr_fcgi_in_*) knows nothing of descriptors or libfcgi, so
 * the fuzzer drives it with any split of the input into reads.
 */
#ifndef ENR_FCGI_BODY_H
#define ENR_FCGI_BODY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <fcgiapp.h>

#include "base/buf.h"

/* enr_fcgi_body_read() and enr_fcgi_in_run() */
#define ENR_FCGI_BODY_DONE 0      /* the empty FCGI_STDIN record was read */
#define ENR_FCGI_BODY_TOO_LARGE 1 /* more content than max */
#define ENR_FCGI_BODY_ERROR (-1)  /* read error, timeout, early EOF, or body->oom */
#define ENR_FCGI_BODY_LIBFCGI 2   /* the rest is libfcgi's: read on with FCGX_GetStr */

/* The content length of a full record predicted until one is seen:
 * nginx cuts each body buffer into records of 32 KB. */
#define ENR_FCGI_BODY_SPEC 32768u

enum {
    ENR_FCGI_IN_BODY,
    ENR_FCGI_IN_END,
    ENR_FCGI_IN_FOREIGN,
    ENR_FCGI_IN_TOO_LARGE,
    ENR_FCGI_IN_OOM
};

typedef struct enr_fcgi_in {
    unsigned request_id;
    size_t max;           /* body->len never passes it: more is TOO_LARGE */
    size_t content;       /* content bytes of the record in hand still to come */
    unsigned pad;         /* then its padding bytes */
    unsigned hdr_len;     /* bytes of the next header in hdr */
    unsigned char hdr[8]; /* FOREIGN: the header of the record handed back */
    size_t spec;          /* predicted content length of the next full record */
    int state;            /* ENR_FCGI_IN_* */
} enr_fcgi_in;

void enr_fcgi_in_init(enr_fcgi_in *s, unsigned request_id, size_t max);

/* Parses raw[0..n), appending content to body (copied).  Returns the
 * bytes consumed: all of them unless the state left BODY (the END
 * header, a FOREIGN header, content past max, no memory). */
size_t enr_fcgi_in_feed(enr_fcgi_in *s, const unsigned char *raw, size_t n, enr_buf *body);

/* Reads raw bytes into iov[0..n); returns the count, 0 at EOF, or -1
 * with errno set (EINTR is retried by the caller). */
typedef ssize_t (*enr_fcgi_readv_fn)(void *ctx, const struct iovec *iov, int n);

typedef struct enr_fcgi_run {
    enr_fcgi_readv_fn rd;
    void *ctx;
    size_t expect;        /* CONTENT_LENGTH, for the prediction; SIZE_MAX: unknown */
    uint64_t deadline_ms; /* the whole body by then (monotonic); 0: none */
    unsigned char *stage; /* stage_len bytes for a re-parse after a wrong prediction */
    size_t stage_len;     /* also bounds one readv */
    /* out */
    int err;                   /* ERROR: an errno, or FCGX_PROTOCOL_ERROR at early EOF */
    const unsigned char *rest; /* LIBFCGI: the raw bytes read after s->hdr */
    size_t rest_len;
    unsigned reads, mispredicted; /* readv calls, wrong predictions */
    size_t copied;                /* body bytes moved in user space after them */
} enr_fcgi_run;

/* Reads the rest of the stream into body from state s (after feeding it
 * what was buffered before).  Returns ENR_FCGI_BODY_*. */
int enr_fcgi_in_run(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r);

/* The request just accepted (FCGX_Accept_r / enr_fcgi_conn_open): its
 * body appended to body, at most max bytes, all of it by deadline_ms
 * (monotonic; each read also within the connection's SO_RCVTIMEO);
 * expect is CONTENT_LENGTH or SIZE_MAX.  ENR_FCGI_BODY_LIBFCGI: the
 * stream could not be taken (unknown libfcgi layout) or was handed back
 * at a foreign record: the caller reads the rest with FCGX_GetStr.  On
 * DONE and ERROR the stream is at its end (FCGX_GetError has the error). */
int enr_fcgi_body_read(FCGX_Request *req, enr_buf *body, size_t max, size_t expect,
                       uint64_t deadline_ms);

/* The body length CONTENT_LENGTH announces: digits only, or the length is
 * unknown (absent, empty, "-1" as Caddy sends for a chunked upload, or
 * anything else that is not a number): SIZE_MAX, the body then read to
 * its end.  Digits past SIZE_MAX - 1 read as SIZE_MAX - 1 (too large
 * for any max_body_bytes). */
size_t enr_fcgi_content_length(const char *cl);

#endif
