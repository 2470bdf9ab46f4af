/*
 * fcgi_stream.c: the answer's writer (fcgi_stream.h).
 *
 * The writer frames the answer in FCGI_STDOUT records itself (8-byte
 * headers, padding only on the last record) and hands the kernel the
 * caller's bytes through iovecs: no copy into a stream buffer, and one
 * writev(2) for up to WRITE_GROUP records.  The closing records (the
 * empty FCGI_STDOUT, FCGI_END_REQUEST) are libfcgi's for
 * enr_fcgi_write_stdout(); enr_fcgi_write_answer() writes them as
 * WriteCloseRecords would (the err stream, never written to, adds none)
 * and marks both streams closed, as FCGX_FClose would.
 *
 * Invariants: every write of the process to a peer goes through
 * enr_fcgi_send() (the answer, and the record reader's replies), so none
 * outlasts its deadline; only the public request (ipcFd, requestId, the
 * streams' public fields) is used.
 */
#include "fcgi/fcgi_stream.h"

#include <errno.h>
#include <fastcgi.h>
#include <stdint.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/clock.h"
#include "fcgi/fcgi_guard.h"

/* Records per writev(2): 4 iovecs each at most (header, head, body,
 * padding), well under IOV_MAX; 64 records carry 4 MB. */
#define WRITE_GROUP 64

/* Each sendmsg is non-blocking and each wait for room a poll(2) with the
 * time left, so a peer that drains a byte now and then cannot stretch a
 * write past its deadline, nor one that drains nothing hold it at all. */
int enr_fcgi_send(int fd, struct iovec *iov, int n, uint64_t deadline_ms)
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

    memset(out, 0, 8);
    h->version = FCGI_VERSION_1;
    h->type = FCGI_STDOUT;
    h->requestIdB1 = (unsigned char)((req->requestId >> 8) & 0xff);
    h->requestIdB0 = (unsigned char)(req->requestId & 0xff);
    enr_fcgi_end_request(out + 8, (unsigned)req->requestId, (uint32_t)req->appStatus,
                         FCGI_REQUEST_COMPLETE);
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
        if (enr_fcgi_send(req->ipcFd, iov, n, deadline) != 0)
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
