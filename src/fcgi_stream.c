/*
 * fcgi_stream.c: larger buffers under libfcgi's request streams (see
 * fcgi_stream.h for why).
 *
 * libfcgi keeps a stream's buffer in a private struct; stream_data below
 * mirrors the one of libfcgi 2.4 (fcgiapp.c, unchanged since 2.2).  A
 * stream is only touched when everything observable agrees with that
 * layout: the 8 KB length libfcgi gives every request stream, the buffer
 * 8-aligned inside its allocation, the record type, and every public
 * pointer of the stream inside the buffer.  A mismatch leaves it alone.
 *
 * Invariants: one request at a time per process, so one lent read buffer
 * (`lent`); a lent buffer is always restored (or handed over to libfcgi)
 * before FCGX_Finish_r frees the stream; libfcgi's read path is
 * untouched: FillBuffProc reads up to bufflen bytes and parses records
 * out of them whatever the buffer's size (only a writer's buffer is
 * bounded, by the 16-bit record length).
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

static struct {
    unsigned char *buf;                  /* ENR_FCGI_READ_BUF, kept across requests */
    FCGX_Stream *in;                     /* the stream it is lent to, or NULL */
    unsigned char *own_buff, *own_mbuff; /* that stream's own buffer */
    int own_len;
} lent;

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

    if (d == NULL || lent.in != NULL)
        return -1;
    b = d->buff;
    if (!inside(d->buffStop, b, b + d->bufflen) || !inside(in->rdNext, b, d->buffStop) ||
        !inside(in->stop, in->rdNext, d->buffStop) || !inside(in->wrNext, b, d->buffStop) ||
        !inside(in->stopUnget, b, in->rdNext))
        return -1;
    if (lent.buf == NULL) {
        lent.buf = aligned_alloc(64, ENR_FCGI_READ_BUF);
        if (lent.buf == NULL)
            return -1;
    }
    nb = lent.buf;
    memcpy(nb, b, (size_t)(d->buffStop - b));
    in->rdNext = nb + (in->rdNext - b);
    in->stop = nb + (in->stop - b);
    in->wrNext = nb + (in->wrNext - b);
    in->stopUnget = nb + (in->stopUnget - b);
    d->buffStop = nb + (d->buffStop - b);
    lent.in = in;
    lent.own_buff = b;
    lent.own_mbuff = d->mBuff;
    lent.own_len = d->bufflen;
    d->buff = d->mBuff = nb;
    d->bufflen = (int)ENR_FCGI_READ_BUF;
    return 0;
}

void enr_fcgi_reader_restore(FCGX_Stream *in)
{
    stream_data *d;
    size_t left;
    unsigned char *ob;

    if (lent.in == NULL || lent.in != in)
        return;
    d = (stream_data *)in->data;
    lent.in = NULL;
    left = (size_t)(d->buffStop - in->rdNext);
    if (left > (size_t)lent.own_len) {
        /* A body left unread (a 413): the stream keeps the big buffer and
         * frees it; its own is freed here, a new one lent next time. */
        free(lent.own_mbuff);
        lent.buf = NULL;
        return;
    }
    ob = lent.own_buff;
    memmove(ob, in->rdNext, left);
    in->stop = ob + (in->stop - in->rdNext);
    in->wrNext = in->wrNext >= in->rdNext ? ob + (in->wrNext - in->rdNext) : ob;
    in->stopUnget = ob;
    in->rdNext = ob;
    d->buffStop = ob + left;
    d->buff = ob;
    d->mBuff = lent.own_mbuff;
    d->bufflen = lent.own_len;
}

int enr_fcgi_writer_widen(FCGX_Stream *out)
{
    stream_data *d = known(out, 0, FCGI_STDOUT);
    unsigned char *nb;

    /* Nothing written yet: wrNext just past the reserved record header. */
    if (d == NULL || d->isAnythingWritten || out->wrNext != d->buff + sizeof(FCGI_Header) ||
        out->stop != d->buff + d->bufflen || d->buffStop != out->stop)
        return -1;
    nb = aligned_alloc(64, ENR_FCGI_WRITE_BUF);
    if (nb == NULL)
        return -1;
    free(d->mBuff);
    d->buff = d->mBuff = nb;
    d->bufflen = (int)ENR_FCGI_WRITE_BUF;
    d->buffStop = nb + ENR_FCGI_WRITE_BUF;
    out->wrNext = nb + sizeof(FCGI_Header);
    out->stop = d->buffStop;
    out->rdNext = out->stop;
    return 0;
}
