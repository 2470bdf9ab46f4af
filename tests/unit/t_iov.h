/*
 * t_iov.h: a fake peer's readv for the record reader's tests and its
 * fuzz target: bytes handed out over the caller's buffers in order, as
 * the kernel does.
 */
#ifndef ENR_T_IOV_H
#define ENR_T_IOV_H

#include <string.h>
#include <sys/uio.h>

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
