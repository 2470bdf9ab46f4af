/*
 * fcgi_stream.h: wider libfcgi streams for the bulk bytes of a request.
 *
 * libfcgi (2.4) reads and writes through fixed 8 KB stream buffers: a
 * 400 KB body costs ~50 read(2) and an 80 KB answer 10 write(2).  These
 * calls give a request's streams larger buffers while libfcgi keeps
 * doing the protocol (records, padding, EOF, END_REQUEST).  They reach
 * into libfcgi's private stream state, checked against its known layout
 * first: when anything does not match, they change nothing and the
 * streams keep their 8 KB buffers (correct, only slower).
 */
#ifndef ENR_FCGI_STREAM_H
#define ENR_FCGI_STREAM_H

#include <fcgiapp.h>

/* The stdin buffer lent for a body: what one read(2) may bring.  Kept
 * by the process across requests (its pages stay resident once used). */
#define ENR_FCGI_READ_BUF (256u * 1024)
/* The stdout buffer: a record carries at most 65535 bytes, so 64 KB
 * (header and padding included) is the most one write can be made of. */
#define ENR_FCGI_WRITE_BUF (64u * 1024)

/* Lends the process's read buffer to the stdin stream of the request in
 * hand.  0 when lent, -1 when the stream was left alone (unknown layout,
 * closed stream, no memory).  Every lend is followed by
 * enr_fcgi_reader_restore before the request is finished. */
int enr_fcgi_reader_widen(FCGX_Stream *in);

/* Gives the stdin stream its own buffer back, with the bytes still
 * buffered in it; when they do not fit there, the stream keeps the lent
 * buffer (libfcgi frees it with the stream) and the next request lends a
 * new one.  No-op when nothing was lent. */
void enr_fcgi_reader_restore(FCGX_Stream *in);

/* Gives the stdout stream of the request in hand, when nothing has been
 * written to it yet, an ENR_FCGI_WRITE_BUF buffer (freed by libfcgi with
 * the stream).  0 when widened, -1 when left alone. */
int enr_fcgi_writer_widen(FCGX_Stream *out);

#endif
