/*
 * test_fcgi_body.c: the direct FCGI_STDIN reader (src/fcgi/fcgi_body.c)
 * on streams built here, read through a fake readv: the body bytes, the
 * outcome, and what it costs (reads, bytes moved in user space), for
 * nginx's record layout and for the cases libfcgi must get back.
 */
#include <errno.h>
#include <fastcgi.h>
#include <stdint.h>
#include <stdlib.h>

#include "fcgi/fcgi_body.h"
#include "t.h"

#define RID 1
#define STAGE (256u * 1024 - 8)

typedef struct fake {
    const unsigned char *p;
    size_t len, off;
    size_t chunk; /* at most this much per read (the socket's fill) */
    int eintr;    /* EINTR before the next read, this many times */
} fake;

static ssize_t fake_readv(void *ctx, const struct iovec *iov, int n)
{
    fake *f = ctx;
    size_t got = 0, lim = f->chunk;

    if (f->eintr > 0) {
        f->eintr--;
        errno = EINTR;
        return -1;
    }
    if (f->off == f->len)
        return 0;
    if (lim > f->len - f->off)
        lim = f->len - f->off;
    for (int i = 0; i < n && got < lim; i++) {
        size_t k = iov[i].iov_len < lim - got ? iov[i].iov_len : lim - got;
        memcpy(iov[i].iov_base, f->p + f->off + got, k);
        got += k;
    }
    f->off += got;
    return (ssize_t)got;
}

static size_t record(unsigned char *out, int type, unsigned id, const unsigned char *c, size_t len,
                     unsigned pad)
{
    out[0] = FCGI_VERSION_1;
    out[1] = (unsigned char)type;
    out[2] = (unsigned char)(id >> 8);
    out[3] = (unsigned char)id;
    out[4] = (unsigned char)(len >> 8);
    out[5] = (unsigned char)len;
    out[6] = (unsigned char)pad;
    out[7] = 0;
    if (len)
        memcpy(out + 8, c, len);
    memset(out + 8 + len, 0, pad);
    return 8 + len + pad;
}

/* body cut into records of the given lengths (repeating the last), then
 * the empty record. */
static size_t stream_of(unsigned char *out, const unsigned char *body, size_t n, const size_t *lens,
                        int nlens)
{
    size_t o = 0, i = 0;

    for (int r = 0; i < n; r++) {
        size_t k = lens[r < nlens ? r : nlens - 1];
        if (k > n - i)
            k = n - i;
        o += record(out + o, FCGI_STDIN, RID, body + i, k, (unsigned)((8 - k % 8) % 8));
        i += k;
    }
    return o + record(out + o, FCGI_STDIN, RID, NULL, 0, 0);
}

typedef struct outcome {
    int rc;
    enr_buf body;
    enr_fcgi_run r;
    enr_fcgi_in s;
} outcome;

/* As enr_fcgi_body_read: `buffered` bytes fed first, then the reads. */
static void run(outcome *o, const unsigned char *st, size_t len, size_t buffered, size_t chunk,
                size_t expect, size_t max, unsigned char *stage)
{
    static fake f;
    size_t c;

    memset(o, 0, sizeof *o);
    if (expect != SIZE_MAX)
        enr_buf_reserve(&o->body, expect + 1);
    f = (fake){st + buffered, len - buffered, 0, chunk, 1};
    enr_fcgi_in_init(&o->s, RID, max);
    c = enr_fcgi_in_feed(&o->s, st, buffered, &o->body);
    if (o->s.state == ENR_FCGI_IN_FOREIGN) {
        o->rc = ENR_FCGI_BODY_LIBFCGI;
        o->r.rest = st + c;
        o->r.rest_len = buffered - c;
        return;
    }
    o->r.rd = fake_readv;
    o->r.ctx = &f;
    o->r.expect = expect;
    o->r.stage = stage;
    o->r.stage_len = STAGE;
    o->rc = enr_fcgi_in_run(&o->s, &o->body, &o->r);
}

int main(void)
{
    enum { N = 413526 };
    static unsigned char body[N], st[N + 4096], stage[STAGE];
    static const size_t exact[] = {32768};
    static const size_t nginx[] = {922,   32768, 32768, 32768, 28774, 32768, 32768,
                                   32768, 32768, 32768, 32768, 32768, 32768, 23382};
    outcome o;
    size_t len;

    for (size_t i = 0; i < N; i++)
        body[i] = (unsigned char)(i * 2654435761u >> 13);

    /* 32 KB records, the socket holding 200 KB a read: in place, no move */
    len = stream_of(st, body, N, exact, 1);
    run(&o, st, len, 8000, 200 * 1024, N, 4 << 20, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE, "32 KB records: done (%d)", o.rc);
    T_CHECK(o.body.len == N && memcmp(o.body.data, body, N) == 0, "32 KB records: the body");
    T_CHECK(o.r.mispredicted == 0 && o.r.copied == 0,
            "32 KB records: every record where predicted, nothing moved (%u, %zu)",
            o.r.mispredicted, o.r.copied);
    T_CHECK(o.r.reads == 3, "32 KB records: 2 reads of 200 KB and one EINTR retried (%u)",
            o.r.reads);
    enr_buf_free(&o.body);

    /* nginx's layout for the 400 KB batch: each body buffer ends short */
    len = stream_of(st, body, N, nginx, sizeof nginx / sizeof nginx[0]);
    run(&o, st, len, 8192, 211072, N, 4 << 20, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == N && memcmp(o.body.data, body, N) == 0,
            "nginx's layout: the body (%d, %zu)", o.rc, o.body.len);
    T_CHECK(o.r.mispredicted > 0 && o.r.copied > 0 && o.r.copied < N / 4,
            "nginx's layout: the rest of one read moved, under a quarter of the body (%zu)",
            o.r.copied);
    enr_buf_free(&o.body);

    /* odd lengths and padding: moves, and the stage when content lands
     * in scratch ahead of body bytes not parsed yet */
    {
        static const size_t odd[] = {3, 65535, 1, 40000, 7, 32769, 20000};
        len = stream_of(st, body, 200000, odd, sizeof odd / sizeof odd[0]);
        run(&o, st, len, 0, 1 << 20, SIZE_MAX, 4 << 20, stage);
        T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 200000 &&
                    memcmp(o.body.data, body, 200000) == 0,
                "odd records, no CONTENT_LENGTH: the body (%d, %zu)", o.rc, o.body.len);
        enr_buf_free(&o.body);
    }

    /* a management record mid-body: back to libfcgi at its header */
    {
        size_t o1 = stream_of(st, body, 50000, exact, 1) - 8, mid;
        mid = o1;
        o1 += record(st + o1, FCGI_GET_VALUES, 0,
                     (const unsigned char *)"\x0e"
                                            "\x00"
                                            "FCGI_MAX_CONNS",
                     16, 0);
        o1 += stream_of(st + o1, body + 50000, 10000, exact, 1);
        run(&o, st, o1, 100, 1 << 20, 60000, 4 << 20, stage);
        T_CHECK(o.rc == ENR_FCGI_BODY_LIBFCGI && o.body.len == 50000 &&
                    memcmp(o.body.data, body, 50000) == 0,
                "GET_VALUES mid-body: libfcgi's from there, the body so far (%d, %zu)", o.rc,
                o.body.len);
        T_CHECK(memcmp(o.s.hdr, st + mid, 8) == 0 && o.r.rest_len <= o1 - mid - 8 &&
                    memcmp(o.r.rest, st + mid + 8, o.r.rest_len) == 0,
                "GET_VALUES mid-body: its header and the bytes after it handed back (%zu)",
                o.r.rest_len);
        enr_buf_free(&o.body);
    }

    /* FCGI_ABORT_REQUEST, another id: libfcgi's too */
    {
        size_t o1 = stream_of(st, body, 1000, exact, 1) - 8;
        record(st + o1, FCGI_ABORT_REQUEST, RID, NULL, 0, 0);
        run(&o, st, o1 + 8, 0, 1 << 20, 2000, 4 << 20, stage);
        T_CHECK(o.rc == ENR_FCGI_BODY_LIBFCGI && o.s.hdr[1] == FCGI_ABORT_REQUEST,
                "ABORT_REQUEST mid-body: libfcgi's (%d)", o.rc);
        enr_buf_free(&o.body);
        record(st + o1, FCGI_STDIN, 2, body, 10, 6);
        run(&o, st, o1 + 24, 0, 1 << 20, 2000, 4 << 20, stage);
        T_CHECK(o.rc == ENR_FCGI_BODY_LIBFCGI && o.r.rest_len == 16,
                "another id's stdin: libfcgi's, with its content (%d, %zu)", o.rc, o.r.rest_len);
        enr_buf_free(&o.body);
    }

    /* bounds: max, early EOF, a header split over 1-byte reads */
    len = stream_of(st, body, 100000, exact, 1);
    run(&o, st, len, 0, 1 << 20, SIZE_MAX, 99999, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_TOO_LARGE && o.body.len <= 99999,
            "100000 bytes, max 99999: too large (%d, %zu)", o.rc, o.body.len);
    enr_buf_free(&o.body);
    run(&o, st, len, 0, 1 << 20, 100000, 100000, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 100000, "exactly max: done (%d)", o.rc);
    enr_buf_free(&o.body);
    run(&o, st, len - 9, 0, 1 << 20, 100000, 1 << 20, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_ERROR && o.r.err == FCGX_PROTOCOL_ERROR && o.body.len == 99999,
            "EOF before the end: libfcgi's protocol error, the bytes that came (%d, %zu)", o.rc,
            o.body.len);
    enr_buf_free(&o.body);
    run(&o, st, 3000, 0, 1, 100000, 1 << 20, stage);
    T_CHECK(o.rc == ENR_FCGI_BODY_ERROR && o.body.len == 3000 - 8 &&
                memcmp(o.body.data, body, o.body.len) == 0 && o.r.reads >= 2992,
            "1-byte reads: every byte one read, the body so far (%zu, %u reads)", o.body.len,
            o.r.reads);
    enr_buf_free(&o.body);

    T_DONE();
}
