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
 *
 * Take and give use the same checks: a stream is taken only as
 * FCGX_Accept_r leaves it (no FCGI_STDIN record begun), and given back
 * at a record boundary, in the read buffer, with the state a fresh
 * FCGI_STDIN stream has, so libfcgi's parsing goes on unchanged.
 *
 * The writer frames the answer in FCGI_STDOUT records itself (8-byte
 * headers, padding only on the last record) and hands the kernel the
 * caller's bytes through iovecs: no copy into a stream buffer, and one
 * writev(2) for up to WRITE_GROUP records.  The closing records (the
 * empty FCGI_STDOUT, FCGI_END_REQUEST) are libfcgi's for
 * enr_fcgi_write_stdout(); enr_fcgi_write_answer() writes them as
 * WriteCloseRecords would (the err stream, never written to, adds none)
 * and marks both streams closed, as FCGX_FClose would.
 */
#include "fcgi/fcgi_stream.h"

#include <errno.h>
#include <fastcgi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/clock.h"

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

unsigned char *enr_fcgi_read_buf(void)
{
    if (read_buf == NULL)
        read_buf = aligned_alloc(64, ENR_FCGI_READ_BUF);
    return read_buf;
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
    if ((nb = enr_fcgi_read_buf()) == NULL)
        return -1;
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

int enr_fcgi_reader_take(FCGX_Stream *in, const unsigned char **raw, size_t *len)
{
    stream_data *d = known(in, 1, FCGI_STDIN);
    unsigned char *b;

    /* FCGX_Accept_r left it just so (SetReaderType): no record begun,
     * nothing delivered; anything else is not ours to take. */
    if (d == NULL || d->contentLen != 0 || d->paddingLen != 0 || d->skip || d->eorStop)
        return -1;
    b = d->buff;
    if (!inside(d->buffStop, b, b + d->bufflen) || !inside(in->rdNext, b, d->buffStop) ||
        in->stop != in->rdNext || in->wrNext != in->rdNext)
        return -1;
    *raw = in->rdNext;
    *len = (size_t)(d->buffStop - in->rdNext);
    in->rdNext = in->stop = in->wrNext = in->stopUnget = d->buffStop;
    return 0;
}

int enr_fcgi_reader_give(FCGX_Stream *in, const unsigned char *hdr, const unsigned char *rest,
                         size_t n)
{
    stream_data *d = (stream_data *)in->data;
    unsigned char *nb = enr_fcgi_read_buf();

    if (nb == NULL || n > ENR_FCGI_READ_BUF - FCGI_HEADER_LEN)
        return -1;
    memmove(nb + FCGI_HEADER_LEN, rest, n);
    memcpy(nb, hdr, FCGI_HEADER_LEN);
    d->buff = nb;
    d->bufflen = (int)ENR_FCGI_READ_BUF;
    d->buffStop = nb + FCGI_HEADER_LEN + n;
    d->contentLen = d->paddingLen = d->skip = d->eorStop = 0;
    in->rdNext = in->stop = in->wrNext = in->stopUnget = nb;
    in->isClosed = 0;
    return 0;
}

void enr_fcgi_reader_end(FCGX_Stream *in, int e)
{
    if (e != 0 && in->FCGI_errno == 0)
        in->FCGI_errno = e;
    in->isClosed = 1;
    in->wrNext = in->stop = in->rdNext;
}

/* Records per writev(2): 4 iovecs each at most (header, head, body,
 * padding), well under IOV_MAX; 64 records carry 4 MB. */
#define WRITE_GROUP 64

/* Writes iov[0..n) whole by deadline_ms, progress or not: each writev is
 * non-blocking and each wait for room is a poll(2) with the time left, so
 * a peer that drains a byte now and then cannot stretch the answer past
 * the deadline, nor one that drains nothing hold it at all. */
static int write_whole(int fd, struct iovec *iov, int n, uint64_t deadline_ms)
{
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        size_t left;

        if (w < 0) {
            uint64_t now;
            struct pollfd p = {.fd = fd, .events = POLLOUT};

            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            now = enr_mono_ms();
            if (now >= deadline_ms) {
                errno = ETIMEDOUT;
                return -1;
            }
            if (poll(&p, 1, (int)(deadline_ms - now)) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n == 0)
            return 0;
        iov->iov_base = (char *)iov->iov_base + left;
        iov->iov_len -= left;
    }
    return 0;
}

/* The empty FCGI_STDOUT and the FCGI_END_REQUEST of req, as libfcgi's
 * WriteCloseRecords writes them. */
static void close_records(const FCGX_Request *req, unsigned char out[24])
{
    FCGI_Header *h = (FCGI_Header *)out;
    FCGI_EndRequestRecord *e = (FCGI_EndRequestRecord *)(out + 8);

    memset(out, 0, 24);
    h->version = e->header.version = FCGI_VERSION_1;
    h->type = FCGI_STDOUT;
    e->header.type = FCGI_END_REQUEST;
    h->requestIdB1 = e->header.requestIdB1 = (unsigned char)((req->requestId >> 8) & 0xff);
    h->requestIdB0 = e->header.requestIdB0 = (unsigned char)(req->requestId & 0xff);
    e->header.contentLengthB0 = sizeof e->body;
    e->body.appStatusB3 = (unsigned char)((req->appStatus >> 24) & 0xff);
    e->body.appStatusB2 = (unsigned char)((req->appStatus >> 16) & 0xff);
    e->body.appStatusB1 = (unsigned char)((req->appStatus >> 8) & 0xff);
    e->body.appStatusB0 = (unsigned char)(req->appStatus & 0xff);
    e->body.protocolStatus = FCGI_REQUEST_COMPLETE;
}

/* What FCGX_FClose does to a stream, without its write: FCGX_Finish_r
 * then writes nothing for it. */
static void mark_closed(FCGX_Stream *s)
{
    s->wasFCloseCalled = 1;
    s->isClosed = 1;
    s->rdNext = s->stop = s->wrNext;
}

static int write_records(FCGX_Request *req, const char *head, size_t hlen, const char *body,
                         size_t blen, unsigned timeout_ms, int closing)
{
    static const unsigned char zeros[8];
    unsigned char tail[24];
    FCGI_Header hdr[WRITE_GROUP];
    struct iovec iov[WRITE_GROUP * 4 + 1];
    uint64_t deadline = enr_mono_ms() + timeout_ms;
    size_t off = 0, total = hlen + blen;

    /* Anything libfcgi holds goes first; nothing is expected there. */
    if (FCGX_FFlush(req->out) != 0 || (closing && FCGX_FFlush(req->err) != 0))
        return -1;
    if (closing)
        close_records(req, tail);
    /* closing: at least one pass, so an empty answer still ends. */
    for (int first = 1; off < total || (first && closing); first = 0) {
        int n = 0;
        for (int r = 0; r < WRITE_GROUP && off < total; r++) {
            size_t k = total - off > ENR_FCGI_RECORD_MAX ? ENR_FCGI_RECORD_MAX : total - off;
            unsigned pad = (unsigned)((8 - k % 8) % 8);

            hdr[r].version = FCGI_VERSION_1;
            hdr[r].type = FCGI_STDOUT;
            hdr[r].requestIdB1 = (unsigned char)((req->requestId >> 8) & 0xff);
            hdr[r].requestIdB0 = (unsigned char)(req->requestId & 0xff);
            hdr[r].contentLengthB1 = (unsigned char)(k >> 8);
            hdr[r].contentLengthB0 = (unsigned char)(k & 0xff);
            hdr[r].paddingLength = (unsigned char)pad;
            hdr[r].reserved = 0;
            iov[n++] = (struct iovec){&hdr[r], sizeof hdr[r]};
            if (off < hlen) {
                size_t a = hlen - off < k ? hlen - off : k;
                iov[n++] = (struct iovec){(char *)head + off, a};
                if (k > a)
                    iov[n++] = (struct iovec){(char *)body, k - a};
            } else
                iov[n++] = (struct iovec){(char *)body + (off - hlen), k};
            if (pad)
                iov[n++] = (struct iovec){(void *)zeros, pad};
            off += k;
        }
        if (closing && off == total)
            iov[n++] = (struct iovec){tail, sizeof tail};
        if (write_whole(req->ipcFd, iov, n, deadline) != 0)
            return -1;
    }
    if (closing) {
        mark_closed(req->err);
        mark_closed(req->out);
    }
    return 0;
}

int enr_fcgi_write_stdout(FCGX_Request *req, const char *head, size_t hlen, const char *body,
                          size_t blen, unsigned timeout_ms)
{
    return write_records(req, head, hlen, body, blen, timeout_ms, 0);
}

int enr_fcgi_write_answer(FCGX_Request *req, const char *head, size_t hlen, const char *body,
                          size_t blen, unsigned timeout_ms)
{
    return write_records(req, head, hlen, body, blen, timeout_ms, 1);
}
