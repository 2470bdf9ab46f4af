/*
 * fcgi_body.c: the request body read past libfcgi's stream (fcgi_body.h).
 *
 * What it trades.  One copy of the body less (libfcgi's buffer to the
 * body buffer: ~40 us of a 400 KB request) and reads as large as the
 * socket holds, for a second FCGI_STDIN record parser next to libfcgi's,
 * a hold on libfcgi's private stream state (fcgi_stream.c, checked
 * against its known layout; an unknown one leaves the whole body to
 * libfcgi), and a prediction: each readv(2) places the records it
 * expects (content in the body, headers and padding in scratch).  A
 * record that differs from the prediction costs a move of the rest of
 * that read to its place (memmove, ~40 KB of a 400 KB body behind nginx,
 * whose body buffers end in a short record), or when the move cannot be
 * done in place, a re-parse through the read buffer (two copies of the
 * rest of that read, where libfcgi's path copies every byte once); the
 * next read is laid out from the true state again.
 *
 * Invariants:
 *  - Only version-1 FCGI_STDIN records of the request's own id are
 *    parsed here; the first other record (a management record, another
 *    id, a BEGIN_REQUEST, FCGI_ABORT_REQUEST, a bad version) goes back to
 *    libfcgi at its header with every byte read after it, so libfcgi
 *    treats it exactly as it did before this file existed.
 *  - A readv never asks for more than the read buffer holds (the stage),
 *    so whatever one read brought fits there for a re-parse or a hand
 *    back; content is never read into the body past max.
 *  - Each read is bounded by the connection's SO_RCVTIMEO, the whole
 *    body by the caller's deadline (a peer dripping a byte per read).
 */
#include "fcgi/fcgi_body.h"

#include <errno.h>
#include <fastcgi.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "fcgi/fcgi_stream.h"

/* Records planned per readv: 32 of nginx's 32 KB ones fill the stage. */
#define PLAN_UNITS 32
/* A record's end: up to 255 bytes of padding, then the next header. */
#define SCRATCH_MAX (255 + FCGI_HEADER_LEN)

void enr_fcgi_in_init(enr_fcgi_in *s, unsigned request_id, size_t max)
{
    memset(s, 0, sizeof *s);
    s->request_id = request_id;
    s->max = max;
    s->spec = ENR_FCGI_BODY_SPEC;
    s->state = ENR_FCGI_IN_BODY;
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* A whole header in s->hdr. */
static void header(enr_fcgi_in *s)
{
    const unsigned char *h = s->hdr;
    unsigned id = (unsigned)h[2] << 8 | h[3];
    size_t len = (size_t)h[4] << 8 | h[5];

    /* libfcgi's ProcessHeader takes such a record as the stream's; all
     * else is its business (file comment). */
    if (h[0] != FCGI_VERSION_1 || h[1] != FCGI_STDIN || id != s->request_id ||
        id == FCGI_NULL_REQUEST_ID) {
        s->state = ENR_FCGI_IN_FOREIGN;
        return;
    }
    s->hdr_len = 0;
    if (len == 0) {
        s->state = ENR_FCGI_IN_END; /* libfcgi ignores this record's padding too */
        return;
    }
    s->content = len;
    s->pad = h[6];
    if (len > s->spec)
        s->spec = len;
}

/* Content raw[0..k) appended to body, within max. */
static int put(enr_fcgi_in *s, enr_buf *body, const unsigned char *raw, size_t k)
{
    if (k > s->max - body->len) {
        s->state = ENR_FCGI_IN_TOO_LARGE;
        return -1;
    }
    if (enr_buf_reserve(body, k + 1) != 0) {
        s->state = ENR_FCGI_IN_OOM;
        return -1;
    }
    memcpy(body->data + body->len, raw, k);
    body->len += k;
    return 0;
}

/* Padding and header bytes from raw[0..n), while no content is due.
 * Returns the bytes consumed. */
static size_t frame(enr_fcgi_in *s, const unsigned char *raw, size_t n)
{
    size_t i = 0;

    while (i < n && s->state == ENR_FCGI_IN_BODY && s->content == 0) {
        size_t k;
        if (s->pad > 0) {
            k = min_sz(s->pad, n - i);
            s->pad -= (unsigned)k;
        } else {
            k = min_sz(FCGI_HEADER_LEN - s->hdr_len, n - i);
            memcpy(s->hdr + s->hdr_len, raw + i, k);
            s->hdr_len += (unsigned)k;
            if (s->hdr_len == FCGI_HEADER_LEN)
                header(s);
        }
        i += k;
    }
    return i;
}

size_t enr_fcgi_in_feed(enr_fcgi_in *s, const unsigned char *raw, size_t n, enr_buf *body)
{
    size_t i = 0;

    while (i < n && s->state == ENR_FCGI_IN_BODY) {
        if (s->content > 0) {
            size_t k = min_sz(s->content, n - i);
            if (put(s, body, raw + i, k) != 0)
                break;
            s->content -= k;
            i += k;
        } else
            i += frame(s, raw + i, n - i);
    }
    return i;
}

/* One planned part of a readv. */
enum { SEG_HAND, SEG_SPEC, SEG_SCRATCH };
typedef struct seg {
    unsigned char *p;
    size_t len;
    int kind;    /* SEG_HAND: content of the record in hand, in place
                  * SEG_SPEC: content of a predicted record, in place
                  * SEG_SCRATCH: padding, then the next header */
    size_t want; /* SEG_SPEC: the content length and padding predicted */
    unsigned pad;
} seg;

typedef struct plan {
    seg sg[2 * PLAN_UNITS + 1];
    struct iovec iov[2 * PLAN_UNITS + 1];
    unsigned char scratch[PLAN_UNITS + 1][SCRATCH_MAX];
    int n;
} plan;

static size_t expect_left(const enr_fcgi_run *r, const enr_buf *body)
{
    if (r->expect == SIZE_MAX)
        return SIZE_MAX;
    return r->expect > body->len ? r->expect - body->len : 0;
}

static void add(plan *pl, unsigned char *p, size_t len, int kind, size_t want, unsigned pad)
{
    pl->sg[pl->n] = (seg){p, len, kind, want, pad};
    pl->iov[pl->n] = (struct iovec){p, len};
    pl->n++;
}

/* Lays out the next readv from the state: the record in hand, then the
 * records predicted (ENR_FCGI_BODY_SPEC, or the largest seen; the last
 * one as long as the announced length leaves), up to the stage's size.
 * The caller made room for at least one content byte when one is due. */
static void make_plan(const enr_fcgi_in *s, const enr_buf *body, const enr_fcgi_run *r, plan *pl)
{
    size_t rem = expect_left(r, body);
    size_t avail = body->cap > body->len ? body->cap - body->len - 1 : 0;
    size_t lim = r->stage_len - SCRATCH_MAX, total = 0;
    /* no content due and nothing announced: a body never reserved */
    unsigned char *w = body->data != NULL ? (unsigned char *)body->data + body->len : NULL;
    int u = 0;

    avail = min_sz(avail, s->max - body->len);
    pl->n = 0;
    if (s->content > 0) {
        size_t k = min_sz(min_sz(s->content, avail), lim);
        add(pl, w, k, SEG_HAND, 0, 0);
        w += k;
        avail -= k;
        total += k;
        rem = rem > k ? rem - k : 0;
        if (k < s->content)
            return;
    }
    add(pl, pl->scratch[u++], s->pad + FCGI_HEADER_LEN - s->hdr_len, SEG_SCRATCH, 0, 0);
    total += s->pad + FCGI_HEADER_LEN;
    while (rem > 0 && avail > 0 && total < lim && u <= PLAN_UNITS - 1) {
        size_t len = min_sz(s->spec, rem), k = min_sz(min_sz(len, avail), lim - total);
        unsigned pad = (unsigned)((8 - len % 8) % 8);

        add(pl, w, k, SEG_SPEC, len, pad);
        w += k;
        avail -= k;
        total += k;
        if (k < len)
            return;
        if (rem != SIZE_MAX)
            rem -= len;
        add(pl, pl->scratch[u++], pad + FCGI_HEADER_LEN, SEG_SCRATCH, 0, 0);
        total += pad + FCGI_HEADER_LEN;
    }
}

/* Copies count bytes read into sg[0..n), from offset off of sg[0] on. */
static size_t gather(const seg *sg, int n, size_t off, size_t count, unsigned char *dst)
{
    size_t done = 0;

    for (int i = 0; i < n && done < count; i++, off = 0) {
        size_t k = min_sz(sg[i].len - off, count - done);
        memmove(dst + done, sg[i].p + off, k);
        done += k;
    }
    return done;
}

/* The bytes read from offset off of sg[i] on (count of them), parsed
 * again from the stage: what cannot be moved into place. */
static void restage(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r, plan *pl, int i, size_t off,
                    size_t count)
{
    size_t m = gather(pl->sg + i, pl->n - i, off, count, r->stage), c;

    c = enr_fcgi_in_feed(s, r->stage, m, body);
    r->copied += m + m;
    r->rest = r->stage + c;
    r->rest_len = m - c;
}

/* Takes got bytes that the readv of pl brought into the state.  Where
 * the prediction held, each content byte is where it belongs and nothing
 * moves.  Where it did not, the rest of the read is parsed where it lies:
 * content found in the body region moves down to its place (memmove: its
 * place is never above it while the stream's headers come no later than
 * the predicted ones, the common case of a record shorter than
 * predicted); content found in scratch is copied in when that does not
 * reach body bytes not parsed yet.  Anything else goes through the stage. */
static void take_read(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r, plan *pl, size_t got)
{
    /* (a body never reserved gets no content in place: make_plan) */
    unsigned char *end = body->data != NULL ? (unsigned char *)body->data + body->cap - 1 : NULL;

    for (int i = 0; i < pl->n && got > 0; i++) {
        seg *g = &pl->sg[i];
        size_t take = min_sz(got, g->len), off = 0;
        int in_body = g->kind != SEG_SCRATCH;
        const unsigned char *limit = end;

        if (!in_body && got > take && i + 1 < pl->n)
            limit = pl->sg[i + 1].p; /* the next body bytes, not parsed yet */
        if (g->kind == SEG_SPEC && (s->state != ENR_FCGI_IN_BODY || s->hdr_len != 0 ||
                                    s->content != g->want || s->pad != g->pad))
            r->mispredicted++;
        while (off < take && s->state == ENR_FCGI_IN_BODY) {
            unsigned char *src = g->p + off, *dst;
            size_t k;

            if (s->content == 0) {
                off += frame(s, src, take - off);
                continue;
            }
            k = min_sz(s->content, take - off);
            if (k > s->max - body->len) {
                s->state = ENR_FCGI_IN_TOO_LARGE;
                return;
            }
            if (body->data == NULL) {
                restage(s, body, r, pl, i, off, got - off);
                return;
            }
            dst = (unsigned char *)body->data + body->len;
            if (in_body ? dst > src : dst + k > limit) {
                restage(s, body, r, pl, i, off, got - off);
                return;
            }
            if (dst != src) {
                memmove(dst, src, k);
                r->copied += k;
            }
            body->len += k;
            s->content -= k;
            off += k;
        }
        if (s->state != ENR_FCGI_IN_BODY) {
            /* END (what follows is not the body's), FOREIGN (it goes back
             * to libfcgi after the header), TOO_LARGE */
            size_t m = gather(pl->sg + i, pl->n - i, off, got - off, r->stage);
            r->rest = r->stage;
            r->rest_len = m;
            return;
        }
        got -= take;
    }
}

int enr_fcgi_in_run(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r)
{
    plan pl;

    r->rest = NULL;
    r->rest_len = 0;
    for (;;) {
        size_t want;
        ssize_t got;

        switch (s->state) {
        case ENR_FCGI_IN_END:
            return ENR_FCGI_BODY_DONE;
        case ENR_FCGI_IN_FOREIGN:
            return ENR_FCGI_BODY_LIBFCGI;
        case ENR_FCGI_IN_TOO_LARGE:
            return ENR_FCGI_BODY_TOO_LARGE;
        case ENR_FCGI_IN_OOM:
            r->err = ENOMEM;
            return ENR_FCGI_BODY_ERROR;
        default:
            break;
        }
        if (s->content > 0 && body->len >= s->max) {
            s->state = ENR_FCGI_IN_TOO_LARGE; /* a content byte is due */
            continue;
        }
        want = min_sz(s->content > 0 ? s->content : expect_left(r, body), r->stage_len);
        want = min_sz(want, s->max - body->len); /* never reserved past max */
        if (want > 0 && enr_buf_reserve(body, want + 1) != 0) {
            s->state = ENR_FCGI_IN_OOM;
            continue;
        }
        if (r->deadline_ms != 0 && enr_mono_ms() >= r->deadline_ms) {
            r->err = ETIMEDOUT;
            return ENR_FCGI_BODY_ERROR;
        }
        make_plan(s, body, r, &pl);
        got = r->rd(r->ctx, pl.iov, pl.n);
        r->reads++;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            r->err = errno != 0 ? errno : EIO;
            return ENR_FCGI_BODY_ERROR;
        }
        if (got == 0) {
            r->err = FCGX_PROTOCOL_ERROR; /* as libfcgi: EOF inside the stream */
            return ENR_FCGI_BODY_ERROR;
        }
        take_read(s, body, r, &pl, (size_t)got);
    }
}

static ssize_t fd_readv(void *ctx, const struct iovec *iov, int n)
{
    return readv(*(const int *)ctx, iov, n);
}

int enr_fcgi_body_read(FCGX_Request *req, enr_buf *body, size_t max, size_t expect,
                       uint64_t deadline_ms)
{
    enr_fcgi_in s;
    enr_fcgi_run r;
    const unsigned char *raw, *rest;
    size_t len, c, rest_len;
    int fd = req->ipcFd, rc;
    unsigned char *stage = enr_fcgi_read_buf();

    if (stage == NULL || body->len > max || enr_fcgi_reader_take(req->in, &raw, &len) != 0)
        return ENR_FCGI_BODY_LIBFCGI;
    enr_fcgi_in_init(&s, (unsigned)req->requestId, max);
    /* What libfcgi read past the parameters: the body's first bytes. */
    c = enr_fcgi_in_feed(&s, raw, len, body);
    rest = raw + c;
    rest_len = len - c;
    memset(&r, 0, sizeof r);
    if (s.state == ENR_FCGI_IN_FOREIGN) {
        rc = ENR_FCGI_BODY_LIBFCGI;
    } else {
        r.rd = fd_readv;
        r.ctx = &fd;
        r.expect = expect;
        r.deadline_ms = deadline_ms;
        r.stage = stage;
        r.stage_len = ENR_FCGI_READ_BUF - FCGI_HEADER_LEN; /* the hand back's header fits */
        rc = enr_fcgi_in_run(&s, body, &r);
        rest = r.rest;
        rest_len = r.rest_len;
    }
    switch (rc) {
    case ENR_FCGI_BODY_DONE:
        enr_fcgi_reader_end(req->in, 0);
        break;
    case ENR_FCGI_BODY_ERROR:
        enr_fcgi_reader_end(req->in, r.err);
        break;
    case ENR_FCGI_BODY_LIBFCGI:
        if (enr_fcgi_reader_give(req->in, s.hdr, rest, rest_len) != 0) {
            enr_fcgi_reader_end(req->in, ENOMEM);
            return ENR_FCGI_BODY_ERROR;
        }
        break;
    default: /* TOO_LARGE: the rest stays unread, as libfcgi leaves it */
        break;
    }
    return rc;
}

size_t enr_fcgi_content_length(const char *cl)
{
    size_t n = 0;

    if (cl == NULL || *cl == '\0')
        return SIZE_MAX;
    for (const char *p = cl; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return SIZE_MAX;
        if (n > (SIZE_MAX - 1 - 9) / 10)
            n = SIZE_MAX - 1;
        else
            n = n * 10 + (size_t)(*p - '0');
    }
    return n;
}
