/*
 * fcgi_body.h: enrichd's FastCGI record reader: every byte a peer sends
 * on a connection, record by record, checked before anything acts on it
 * (fcgi_guard.h says why libfcgi never reads from a peer).
 *
 * One parser (enr_fcgi_in_*) takes the connection's records in order:
 * BEGIN_REQUEST, the FCGI_PARAMS content (gathered, bounded, its pairs
 * checked at the empty record), then FCGI_STDIN into the caller's body
 * buffer.  Management records are answered (a reply the driver writes
 * before reading on), another request's records skipped (a
 * zero-length one too), a second BEGIN_REQUEST answered
 * END_REQUEST{FCGI_CANT_MPX_CONN}; a record the rules refuse stops the
 * parser with a reason, and the peer is cut off.
 *
 * The body's records are read with readv(2) so that each record's
 * content lands at its final place in the body and only the 8-byte
 * headers and the padding land in a scratch area: the kernel's copy is
 * the only one.  Everything else goes through the read buffer (the
 * stage) and the byte parser.
 *
 * The parser knows nothing of descriptors or libfcgi, so the fuzzer and
 * the unit test drive it with any split of the input into reads.
 */
#ifndef ENR_FCGI_BODY_H
#define ENR_FCGI_BODY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/buf.h"
#include "fcgi/fcgi_guard.h"

/* enr_fcgi_in_run() */
#define ENR_FCGI_BODY_DONE 0      /* the empty FCGI_STDIN record was read */
#define ENR_FCGI_BODY_TOO_LARGE 1 /* more content than max */
#define ENR_FCGI_BODY_ERROR (-1)  /* r->err: an errno (ETIMEDOUT, ENOMEM...), 0 at EOF */
#define ENR_FCGI_BODY_HEAD 2      /* the parameters are whole: the request can be served */
#define ENR_FCGI_BODY_REJECT 3    /* a record the rules refuse: s->reason */
#define ENR_FCGI_BODY_ABORTED 4   /* FCGI_ABORT_REQUEST for the request */

/* The content length of a full record predicted until one is seen:
 * nginx cuts each body buffer into records of 32 KB. */
#define ENR_FCGI_BODY_SPEC 32768u

/* The read buffer the process keeps for the connection in hand (resident
 * once a big body went through): what one read(2) may bring. */
#define ENR_FCGI_READ_BUF (256u * 1024)

enum {
    ENR_FCGI_IN_RUN,
    ENR_FCGI_IN_HEAD,
    ENR_FCGI_IN_END,
    ENR_FCGI_IN_TOO_LARGE,
    ENR_FCGI_IN_OOM,
    ENR_FCGI_IN_BAD,
    ENR_FCGI_IN_ABORTED
};
enum { ENR_FCGI_PH_BEGIN, ENR_FCGI_PH_PARAMS, ENR_FCGI_PH_BODY };

typedef struct enr_fcgi_in {
    int phase, state;                 /* ENR_FCGI_PH_*, ENR_FCGI_IN_* */
    int reason;                       /* BAD: ENR_FCGI_REJECT_* */
    unsigned request_id, role, flags; /* from BEGIN_REQUEST */
    unsigned max_conns;               /* FCGI_GET_VALUES' answer */
    enr_buf *params;                  /* the FCGI_PARAMS content */
    size_t max;                       /* body->len never passes it: more is TOO_LARGE */
    size_t content;                   /* content bytes of the record in hand still to come */
    unsigned pad;                     /* then its padding bytes */
    int rec;                          /* what the record in hand's content is for */
    unsigned hdr_len;                 /* bytes of the next header in hdr */
    unsigned char hdr[8];
    size_t spec; /* predicted content length of the next full body record */
    unsigned char hold[ENR_FCGI_MGMT_MAX]; /* a BEGIN_REQUEST's or GET_VALUES' content */
    size_t hold_len;
    unsigned char reply[ENR_FCGI_REPLY_MAX]; /* to write before reading on */
    size_t reply_len;
} enr_fcgi_in;

/* A new connection: BEGIN_REQUEST is due; params (reset) gathers the
 * parameters. */
void enr_fcgi_in_init(enr_fcgi_in *s, enr_buf *params, unsigned max_conns);

/* After HEAD: the body is due, body->len never past max. */
void enr_fcgi_in_body(enr_fcgi_in *s, size_t max);

/* Parses raw[0..n), appending stdin content to body (copied).  Returns
 * the bytes consumed: all of them unless the state left RUN or a reply
 * is due (s->reply_len: the caller writes it, clears it, and feeds on). */
size_t enr_fcgi_in_feed(enr_fcgi_in *s, const unsigned char *raw, size_t n, enr_buf *body);

/* Reads raw bytes into iov[0..n); returns the count, 0 at EOF, or -1
 * with errno set (EINTR is retried by the caller).  Bounded by the
 * driver (a read timeout, the deadline). */
typedef ssize_t (*enr_fcgi_readv_fn)(void *ctx, const struct iovec *iov, int n);
/* Writes p[0..n) whole: 0, or -1 with errno set. */
typedef int (*enr_fcgi_write_fn)(void *ctx, const unsigned char *p, size_t n);

typedef struct enr_fcgi_run {
    enr_fcgi_readv_fn rd;
    enr_fcgi_write_fn wr;
    void *ctx;
    size_t expect;        /* CONTENT_LENGTH, for the prediction; SIZE_MAX: unknown */
    uint64_t deadline_ms; /* all of it by then (monotonic), checked before each read; 0: none */
    unsigned char *stage; /* stage_len bytes: the slow path's reads, re-parses */
    size_t stage_len;     /* also bounds one readv */
    /* in and out: bytes read and not parsed yet (in the stage after a call) */
    const unsigned char *pend;
    size_t pend_len;
    /* out */
    int err;                      /* ERROR: an errno, 0 at EOF */
    unsigned reads, mispredicted; /* read calls, wrong predictions */
    size_t copied;                /* body bytes moved in user space after them */
} enr_fcgi_run;

/* Parses r->pend, then reads on, until the state leaves RUN.  Returns
 * ENR_FCGI_BODY_*. */
int enr_fcgi_in_run(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r);

/* The read buffer (ENR_FCGI_READ_BUF bytes, allocated once), or NULL. */
unsigned char *enr_fcgi_read_buf(void);

/* The body length CONTENT_LENGTH announces: digits only, or the length is
 * unknown (absent, empty, "-1" as Caddy sends for a chunked upload, or
 * anything else that is not a number): SIZE_MAX, the body then read to
 * its end.  Digits past SIZE_MAX - 1 read as SIZE_MAX - 1 (too large
 * for any max_body_bytes). */
size_t enr_fcgi_content_length(const char *cl);

#endif
