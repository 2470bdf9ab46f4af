/*
 * fcgi_guard.h: what stands between libfcgi and a FastCGI peer.
 *
 * libfcgi (2.4) parses records and name-value pairs without checking
 * them against the record that carries them: a pair whose lengths pass
 * INT_MAX aborts the process in its ReadParams (CVE-2025-23016, fixed in
 * part by Debian 12), and a zero-length record of another request id
 * makes it skip the next record of ours.  So libfcgi never reads from a
 * peer: enrichd's record reader (fcgi_body.h) reads every record, checks
 * it with the rules here, answers the management records itself, and
 * hands libfcgi only a request it has checked whole (one BEGIN_REQUEST,
 * its parameters, the empty FCGI_PARAMS), through a pipe: libfcgi still
 * builds the request's parameter array (FCGX_GetParam), its streams and
 * their closing records, from input that cannot hurt it.
 */
#ifndef ENR_FCGI_GUARD_H
#define ENR_FCGI_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include <fcgiapp.h>

/* The whole parameter set of a request (its FCGI_PARAMS content): nginx
 * sends about 1 KB plus the client's headers (at most 32 KB with its
 * default large_client_header_buffers). */
#define ENR_FCGI_PARAMS_MAX (64u * 1024)
/* A management record's content (FCGI_GET_VALUES: three names of 14 and
 * 15 bytes are all it can usefully ask). */
#define ENR_FCGI_MGMT_MAX 1024u
/* The largest record enrichd writes in answer to a record: an
 * FCGI_GET_VALUES_RESULT of the three names, padded. */
#define ENR_FCGI_REPLY_MAX 128u

/* Why a peer was cut off (the fastcgi_rejected counters' reason label). */
enum {
    ENR_FCGI_REJECT_TIMEOUT,   /* the header or a read ran out of time */
    ENR_FCGI_REJECT_EOF,       /* the peer closed before the request was whole */
    ENR_FCGI_REJECT_RECORD,    /* a bad version, type, length or order of records */
    ENR_FCGI_REJECT_PAIRS,     /* name-value lengths that do not fit their record */
    ENR_FCGI_REJECT_TOO_LARGE, /* parameters or a management record past their bound */
    ENR_FCGI_REJECT_ROLE,      /* a role other than RESPONDER */
    ENR_FCGI_REJECT_REASONS
};
const char *enr_fcgi_reject_name(int reason);

/* The name-value pairs in p[0..n): the count, or -1 when a length runs
 * past the end (or the pairs do not end exactly at n). */
long enr_fcgi_pairs_check(const unsigned char *p, size_t n);

/* The FCGI_GET_VALUES_RESULT record (header included) answering the
 * checked pairs p[0..n), into out (ENR_FCGI_REPLY_MAX bytes): each name
 * enrichd knows once, with its value: FCGI_MAX_CONNS and FCGI_MAX_REQS
 * are max_conns (a prefork process serves one connection, and one
 * request on it, at a time), FCGI_MPXS_CONNS 0.  Returns its length. */
size_t enr_fcgi_get_values_result(const unsigned char *p, size_t n, unsigned max_conns,
                                  unsigned char *out);

/* FCGI_UNKNOWN_TYPE for a management record of that type (16 bytes). */
void enr_fcgi_unknown_type(unsigned char out[16], int type);

/* FCGI_END_REQUEST{app_status, protocol_status} for request id (16 bytes). */
void enr_fcgi_end_request(unsigned char out[16], unsigned id, uint32_t app_status, int protocol);

/* Hands libfcgi the checked request: BEGIN_REQUEST{role, flags} for id,
 * the pairs params[0..n) (checked), the empty FCGI_PARAMS, written to the
 * pipe (both ends non-blocking: a pipe[0] libfcgi reads dry fails
 * instead of blocking), then FCGX_Accept_r reads them from pipe[0] into
 * req; req->ipcFd is sock after.  0, or -1 (libfcgi refused or closed
 * the pipe, which is then closed and set to -1 for the next call to make
 * again). */
int enr_fcgi_libfcgi_accept(FCGX_Request *req, int pipe_fds[2], int sock, unsigned id, int role,
                            int flags, const unsigned char *params, size_t n);

/* The pipe of enr_fcgi_libfcgi_accept(): 0, or -1 with errno set. */
int enr_fcgi_pipe_open(int pipe_fds[2]);

#endif
