/*
 * fcgi_stream.h: the answer's writer, past libfcgi's stdout stream.
 *
 * libfcgi's 8 KB stdout stream costs one write(2) per 8 KB record, and
 * takes a short write as complete (EmptyBuffProc checks only for -1).
 * enr_fcgi_write_stdout() frames the answer in FCGI_STDOUT records of up
 * to 64 KB straight from the caller's buffer and sends them with
 * writev(2), finishing short writes, all by one deadline;
 * enr_fcgi_write_answer() adds the closing records (empty FCGI_STDOUT,
 * FCGI_END_REQUEST) to its last writev, which FCGX_Finish_r would
 * otherwise send with one more write(2).
 */
#ifndef ENR_FCGI_STREAM_H
#define ENR_FCGI_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <fcgiapp.h>

/* Writes iov[0..n) (advanced in place) whole to fd by deadline_ms
 * (monotonic), whatever the peer drains meanwhile.  0, or -1 with errno
 * set (ETIMEDOUT at the deadline). */
int enr_fcgi_send(int fd, struct iovec *iov, int n, uint64_t deadline_ms);

/* Content bytes per FCGI_STDOUT record of the answer: the protocol's
 * 65535 rounded down to a multiple of 8, so only the last record has
 * padding. */
#define ENR_FCGI_RECORD_MAX 65528u

/* Sends head then body as the request's FCGI_STDOUT content, in as few
 * records and writev(2) calls as they take, nothing copied.  Nothing may
 * have been put into req->out before (it is flushed first, for order).
 * A short write is finished; the whole call ends by timeout_ms from its
 * start, whatever the peer drains meanwhile (non-blocking writes, poll(2)
 * with the time left).  Returns 0, or -1 with errno set (the answer is then cut: the
 * caller resets the connection). */
int enr_fcgi_write_stdout(FCGX_Request *req, const char *head, size_t hlen, const char *body,
                          size_t blen, unsigned timeout_ms);

/* The same, and the request's closing records (the empty FCGI_STDOUT,
 * FCGI_END_REQUEST{appStatus, FCGI_REQUEST_COMPLETE}) in the last
 * writev(2) of the answer, instead of one more write(2) in
 * FCGX_Finish_r: the request's out and err streams are closed, so
 * nothing may be written to them after.  On failure they are left open
 * (the caller aborts the connection). */
int enr_fcgi_write_answer(FCGX_Request *req, const char *head, size_t hlen, const char *body,
                          size_t blen, unsigned timeout_ms);

#endif
