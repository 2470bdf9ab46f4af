/*
 * buf.c: growth policy of enr_buf (doubling, with a floor so small
 * buffers do not realloc on every append, and a ceiling at max).
 */
#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>

#define ENR_BUF_MIN_CAP 256

int enr_buf_grow(enr_buf *b, size_t extra)
{
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : ENR_BUF_MIN_CAP;
    char *p;

    if (need < b->len) { /* size_t overflow */
        b->oom = 1;
        return -1;
    }
    if (b->max && need > b->max) {
        b->oom = b->over = 1;
        return -1;
    }
    while (cap < need) {
        if (cap > ((size_t)-1) / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    if (b->max && cap > b->max)
        cap = b->max; /* need <= max: the doubling would only reserve the unusable */
    p = realloc(b->data, cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void enr_buf_free(enr_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = b->over = 0;
}

void enr_buf_shrink(enr_buf *b, size_t keep)
{
    if (b->cap > keep)
        enr_buf_free(b);
}

void enr_buf_printf(enr_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || enr_buf_reserve(b, (size_t)n + 1) != 0) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
