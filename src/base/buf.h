/*
 * buf.h: the growable byte buffer every module appends output to.
 *
 * Invariants: data is NULL only while cap == 0; len <= cap; the buffer
 * never shrinks until enr_buf_free() or enr_buf_shrink(), so a worker
 * reuses one allocation across requests.  Appends that cannot grow set
 * oom and become no-ops, so a caller checks once at the end instead of
 * after every append.  A buffer with a max never holds more than max
 * bytes: growing past it fails the same way and also sets over, which
 * tells a limit from a failed allocation.
 */
#ifndef ENR_BUF_H
#define ENR_BUF_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct enr_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* 0: unbounded; else len never exceeds it */
    int oom;    /* an append failed to grow: contents are incomplete */
    int over;   /* ... because it would have passed max */
} enr_buf;

int enr_buf_grow(enr_buf *b, size_t extra); /* 0, or -1 and oom set */
/* printf-style append (status documents, metrics; not the hot path). */
void enr_buf_printf(enr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void enr_buf_free(enr_buf *b); /* keeps max */
/* Frees the allocation when it grew past keep bytes (one huge request must
 * not pin its memory for the worker's life); contents are dropped. */
void enr_buf_shrink(enr_buf *b, size_t keep);

static inline void enr_buf_reset(enr_buf *b)
{
    b->len = 0;
    b->oom = 0;
    b->over = 0;
}

static inline int enr_buf_reserve(enr_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    return enr_buf_grow(b, extra);
}

static inline void enr_buf_append(enr_buf *b, const void *p, size_t n)
{
    if (n == 0 || enr_buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static inline void enr_buf_putc(enr_buf *b, char c)
{
    if (enr_buf_reserve(b, 1) != 0)
        return;
    b->data[b->len++] = c;
}

#define enr_buf_lit(b, s) enr_buf_append((b), (s), sizeof(s) - 1)

#endif
