/*
 * fcgi_stream.c: a larger buffer under libfcgi's stdin stream (see
 * fcgi_stream.h for why).
 *
 * libfcgi keeps a stream's buffer in a private struct; stream_data below
 * mirrors the one of libfcgi 2.4 (fcgiapp.c, unchanged since 2.2).  A
 * stream is only touched when everything observable agrees with that
 * layout: the 8 KB length libfcgi gives every request stream, the buffer
 * 8-aligned inside its allocation, the record type, and every public
 * pointer of the stream inside the buffer.  A mismatch leaves it alone.
 *
 * Invariants: the process serves one request at a time, so one read
 * buffer serves every request's stdin stream in turn: the stream's buff
 * points to it while libfcgi's own allocation (mBuff) stays in place,
 * and FCGX_Finish_r frees only that, with the stream, before the next
 * request is accepted.  Nothing is allocated per request.  libfcgi's
 * read path is unchanged: FillBuffProc reads up to bufflen bytes and
 * parses records out of them whatever the buffer's size.
 */
#include "fcgi_stream.h"

#include <fastcgi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIBFCGI_STREAM_BUF 8192 /* libfcgi 2.4: every request stream */

typedef struct stream_data {
    unsigned char *buff;     /* 8-aligned start of the buffer */
    int bufflen;             /* bytes buff holds */
    unsigned char *mBuff;    /* what malloc returned (freed by libfcgi) */
    unsigned char *buffStop; /* reader: end of the bytes read */
    int type;                /* FCGI_STDIN, FCGI_STDOUT, ... */
    int eorStop, skip, contentLen, paddingLen, isAnythingWritten, rawWrite;
    void *reqDataPtr;
} stream_data;

static unsigned char *read_buf; /* ENR_FCGI_READ_BUF, kept across requests */

static int inside(const unsigned char *p, const unsigned char *lo, const unsigned char *hi)
{
    return p >= lo && p <= hi;
}

/* The layout checks common to both directions. */
static stream_data *known(FCGX_Stream *s, int reader, int type)
{
    stream_data *d;

    if (s == NULL || s->data == NULL || s->isReader != reader || s->isClosed || s->FCGI_errno != 0)
        return NULL;
    d = (stream_data *)s->data;
    if (d->bufflen != LIBFCGI_STREAM_BUF && d->bufflen != LIBFCGI_STREAM_BUF - 8)
        return NULL;
    if (d->type != type || d->mBuff == NULL || d->buff < d->mBuff || d->buff >= d->mBuff + 8 ||
        ((uintptr_t)d->buff & 7) != 0 || d->rawWrite != 0)
        return NULL;
    return d;
}

int enr_fcgi_reader_widen(FCGX_Stream *in)
{
    stream_data *d = known(in, 1, FCGI_STDIN);
    unsigned char *b, *nb;

    if (d == NULL)
        return -1;
    b = d->buff;
    if (!inside(d->buffStop, b, b + d->bufflen) || !inside(in->rdNext, b, d->buffStop) ||
        !inside(in->stop, in->rdNext, d->buffStop) || !inside(in->wrNext, b, d->buffStop) ||
        !inside(in->stopUnget, b, in->rdNext))
        return -1;
    if (read_buf == NULL && (read_buf = aligned_alloc(64, ENR_FCGI_READ_BUF)) == NULL)
        return -1;
    nb = read_buf;
    memcpy(nb, b, (size_t)(d->buffStop - b));
    in->rdNext = nb + (in->rdNext - b);
    in->stop = nb + (in->stop - b);
    in->wrNext = nb + (in->wrNext - b);
    in->stopUnget = nb + (in->stopUnget - b);
    d->buffStop = nb + (d->buffStop - b);
    d->buff = nb;
    d->bufflen = (int)ENR_FCGI_READ_BUF;
    return 0;
}
