/*
 * fcgi_stream.h: a wider libfcgi stdin stream for the bulk of a request.
 *
 * libfcgi (2.4) reads through a fixed 8 KB stream buffer: a 400 KB body
 * costs ~50 read(2).  This gives a request's stdin stream a larger buffer
 * while libfcgi keeps doing the protocol (records, padding, EOF).
 *
 * The answer keeps libfcgi's 8 KB records on purpose: libfcgi takes a
 * short write(2) as complete (EmptyBuffProc checks only for -1), and a
 * write cut by SO_SNDTIMEO (write_timeout_ms) after some progress is
 * short.  With 8 KB records that needs a reader stalling inside one
 * record; with 64 KB records a slow reader makes every write wait the
 * whole timeout and drop its tail (the slow-reader test saw the worker
 * killed as stuck).
 *
 * This reaches into libfcgi's private stream state, checked against its
 * known layout first: when anything does not match, it changes nothing
 * and the stream keeps its 8 KB buffer (correct, only slower).
 */
#ifndef ENR_FCGI_STREAM_H
#define ENR_FCGI_STREAM_H

#include <fcgiapp.h>

/* The read buffer the process keeps for the request in hand (resident
 * once a big body went through): what one read(2) of the body may bring. */
#define ENR_FCGI_READ_BUF (256u * 1024)

/* Moves the stdin stream of the request just accepted (the bytes it has
 * buffered with it) to the process's read buffer.  0 when moved, -1 when
 * the stream was left alone (unknown layout, closed stream, no memory). */
int enr_fcgi_reader_widen(FCGX_Stream *in);

#endif
