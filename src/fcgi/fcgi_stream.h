/*
 * fcgi_stream.h: a wider libfcgi stdin stream for the bulk of a request.
 *
 * libfcgi (2.4) reads through a fixed 8 KB stream buffer: a 400 KB body
 * costs ~50 read(2).  This gives a request's stdin stream a larger buffer
 * while libfcgi keeps doing the protocol (records, padding, EOF).
 *
 * The answer does not go through libfcgi's 8 KB stdout stream (one
 * write(2) per 8 KB record, and a short write taken as complete:
 * EmptyBuffProc checks only for -1, and a write cut by a socket timeout
 * after some progress is short).  enr_fcgi_write_stdout() frames it in
 * FCGI_STDOUT records of up to 64 KB straight from the caller's buffer
 * and sends them with writev(2), finishing short writes;
 * enr_fcgi_write_answer() adds the closing records (empty FCGI_STDOUT,
 * FCGI_END_REQUEST) to its last writev, which FCGX_Finish_r would
 * otherwise send with one more write(2).
 *
 * fcgi_body.c reads the body past the stdin stream: it takes the bytes
 * libfcgi buffered past the parameters, and gives the stream back at a
 * record that is libfcgi's to handle (enr_fcgi_reader_take/give/end).
 *
 * The reader reaches into libfcgi's private stream state, checked against
 * its known layout first: when anything does not match, it changes
 * nothing and the stream keeps its 8 KB buffer (correct, only slower).
 * The writer uses only the public request (ipcFd, requestId).
 */
#ifndef ENR_FCGI_STREAM_H
#define ENR_FCGI_STREAM_H

#include <stddef.h>

#include <fcgiapp.h>

/* The read buffer the process keeps for the request in hand (resident
 * once a big body went through): what one read(2) of the body may bring. */
#define ENR_FCGI_READ_BUF (256u * 1024)

/* Moves the stdin stream of the request just accepted (the bytes it has
 * buffered with it) to the process's read buffer.  0 when moved, -1 when
 * the stream was left alone (unknown layout, closed stream, no memory). */
int enr_fcgi_reader_widen(FCGX_Stream *in);

/* The direct body reader's hold on the stream (fcgi_body.h).
 *
 * enr_fcgi_reader_take(): the stdin stream of the request just accepted,
 * still at the start of FCGI_STDIN (no record begun), gives up the raw
 * bytes libfcgi read past the parameters: *raw and *len (not copied; valid
 * until the next call of this module), and the stream holds nothing
 * after.  0, or -1 when the stream is not in that state or of an unknown
 * layout (it is then left alone).
 *
 * enr_fcgi_reader_give(): the reverse, after take: the stream goes on from
 * a record boundary with hdr (8 bytes, a record header) then rest[0..n)
 * as its buffered raw bytes, in the process's read buffer; libfcgi then
 * parses them and reads on.  rest may point into the read buffer
 * (enr_fcgi_read_buf); 8 + n <= ENR_FCGI_READ_BUF.  0, or -1 (no memory).
 *
 * enr_fcgi_reader_end(): after take, the stream is at its end: e == 0
 * when the empty FCGI_STDIN record was read (FCGX_HasSeenEOF then says
 * so), else the error FCGX_GetError reports (an errno or a libfcgi code),
 * which also makes FCGX_Finish_r close the connection. */
int enr_fcgi_reader_take(FCGX_Stream *in, const unsigned char **raw, size_t *len);
int enr_fcgi_reader_give(FCGX_Stream *in, const unsigned char *hdr, const unsigned char *rest,
                         size_t n);
void enr_fcgi_reader_end(FCGX_Stream *in, int e);
/* The read buffer (ENR_FCGI_READ_BUF bytes, allocated once), or NULL. */
unsigned char *enr_fcgi_read_buf(void);

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
