/*
 * t_fcgi.h: a fake FastCGI peer for the record reader's unit tests and
 * its fuzz target: a record's header as the specification lays it out,
 * and a readv handing bytes out over the caller's buffers in order, as
 * the kernel does.
 */
#ifndef ENR_T_FCGI_H
#define ENR_T_FCGI_H

#include <fastcgi.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The 8-byte header of a record of type for request id, with len bytes
 * of content and pad of padding. */
static inline void t_fcgi_header(unsigned char *h, int type, unsigned id, size_t len, unsigned pad)
{
    h[0] = FCGI_VERSION_1;
    h[1] = (unsigned char)type;
    h[2] = (unsigned char)(id >> 8);
    h[3] = (unsigned char)id;
    h[4] = (unsigned char)(len >> 8);
    h[5] = (unsigned char)len;
    h[6] = (unsigned char)pad;
    h[7] = 0;
}

/* Hands out at most lim bytes of data[*off..len) into iov[0..n), filling
 * each buffer before the next; *off moves past them.  Returns how many. */
static inline ssize_t t_iov_give(const struct iovec *iov, int n, const unsigned char *data,
                                 size_t len, size_t *off, size_t lim)
{
    size_t got = 0;

    if (lim > len - *off)
        lim = len - *off;
    for (int i = 0; i < n && got < lim; i++) {
        size_t k = iov[i].iov_len < lim - got ? iov[i].iov_len : lim - got;
        memcpy(iov[i].iov_base, data + *off + got, k);
        got += k;
    }
    *off += got;
    return (ssize_t)got;
}

#endif
