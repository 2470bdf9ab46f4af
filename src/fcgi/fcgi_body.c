/*
 * fcgi_body.c: enrichd's FastCGI record reader (fcgi_body.h).
 *
 * The rules each record is checked by, in order of the connection:
 *  - version 1 only; a record of request id 0 is a management record:
 *    FCGI_GET_VALUES (at most ENR_FCGI_MGMT_MAX, its pairs checked) is
 *    answered with enrichd's values, any other type FCGI_UNKNOWN_TYPE;
 *  - first a BEGIN_REQUEST (8 bytes of content, a non-zero id); any
 *    other record before it cuts the peer off;
 *  - then that id's FCGI_PARAMS, at most ENR_FCGI_PARAMS_MAX in all,
 *    whose pairs must tile their content exactly (fcgi_guard.c), ended
 *    by the empty one; the parser stops there (HEAD);
 *  - then that id's FCGI_STDIN, ended by the empty one, or its
 *    FCGI_ABORT_REQUEST; a record of another type for the id cuts the
 *    peer off;
 *  - at any time, another BEGIN_REQUEST is answered
 *    END_REQUEST{FCGI_CANT_MPX_CONN} and another id's records are
 *    skipped whole, whatever their length (zero included).
 *
 * The body's fast path trades a prediction for the copy: each readv(2)
 * places the records it expects (content in the body, headers and
 * padding in scratch).  A record that differs from the prediction costs
 * a move of the rest of that read to its place (memmove, ~40 KB of a 400
 * KB body behind nginx, whose body buffers end in a short record), or
 * when the move cannot be done in place, a re-parse through the stage
 * (two copies of the rest of that read); the next read is laid out from
 * the true state again.  A record that is not the body's ends the fast
 * path for the rest of that read: it goes through the byte parser.
 *
 * Invariants:
 *  - A readv never asks for more than the stage holds, so whatever one
 *    read brought fits there for a re-parse; content is never read into
 *    the body past max, nor the parameters past their bound.
 *  - Bytes are read only when none read before are left unparsed.
 *  - The whole run is bounded by the caller's deadline, checked before
 *    each read (a peer dripping a byte per read), and each read by the
 *    caller's read function.
 */
#include "fcgi/fcgi_body.h"

#include <errno.h>
#include <fastcgi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/clock.h"

/* Records planned per readv: 32 of nginx's 32 KB ones fill the stage. */
#define PLAN_UNITS 32
/* A record's end: up to 255 bytes of padding, then the next header. */
#define SCRATCH_MAX (255 + FCGI_HEADER_LEN)

/* What the content of the record in hand is for. */
enum { REC_SKIP, REC_BODY, REC_PARAMS, REC_BEGIN, REC_VALUES };

static unsigned char *read_buf; /* ENR_FCGI_READ_BUF, kept across requests */

unsigned char *enr_fcgi_read_buf(void)
{
    if (read_buf == NULL)
        read_buf = aligned_alloc(64, ENR_FCGI_READ_BUF);
    return read_buf;
}

void enr_fcgi_in_init(enr_fcgi_in *s, enr_buf *params, unsigned max_conns)
{
    s->phase = ENR_FCGI_PH_BEGIN;
    s->state = ENR_FCGI_IN_RUN;
    s->reason = 0;
    s->request_id = s->role = s->flags = 0;
    s->max_conns = max_conns;
    s->params = params;
    enr_buf_reset(params);
    s->max = 0;
    s->content = 0;
    s->pad = 0;
    s->rec = REC_SKIP;
    s->hdr_len = 0;
    s->spec = ENR_FCGI_BODY_SPEC;
    s->hold_len = 0;
    s->reply_len = 0;
}

void enr_fcgi_in_body(enr_fcgi_in *s, size_t max)
{
    s->max = max;
    if (s->state == ENR_FCGI_IN_HEAD)
        s->state = ENR_FCGI_IN_RUN;
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

static void bad(enr_fcgi_in *s, int reason)
{
    s->state = ENR_FCGI_IN_BAD;
    s->reason = reason;
}

/* The content of the record in hand is all in (or there was none). */
static void record_done(enr_fcgi_in *s)
{
    if (s->rec == REC_BEGIN) {
        s->role = (unsigned)s->hold[0] << 8 | s->hold[1];
        s->flags = s->hold[2];
        s->phase = ENR_FCGI_PH_PARAMS;
    } else if (s->rec == REC_VALUES) {
        if (enr_fcgi_pairs_check(s->hold, s->hold_len) < 0)
            bad(s, ENR_FCGI_REJECT_PAIRS);
        else
            s->reply_len = enr_fcgi_get_values_result(s->hold, s->hold_len, s->max_conns, s->reply);
    }
    s->rec = REC_SKIP;
}

/* A management record's header (request id 0). */
static void management(enr_fcgi_in *s, int type, size_t len)
{
    if (type == FCGI_GET_VALUES) {
        if (len > ENR_FCGI_MGMT_MAX) {
            bad(s, ENR_FCGI_REJECT_TOO_LARGE);
            return;
        }
        s->rec = REC_VALUES;
        s->hold_len = 0;
    } else if (type == FCGI_BEGIN_REQUEST) {
        bad(s, ENR_FCGI_REJECT_RECORD); /* a request needs an id */
    } else {
        enr_fcgi_unknown_type(s->reply, type);
        s->reply_len = 16;
    }
}

/* A record of the request in hand (after BEGIN_REQUEST). */
static void own(enr_fcgi_in *s, int type, size_t len)
{
    if (s->phase == ENR_FCGI_PH_PARAMS) {
        if (type != FCGI_PARAMS) {
            bad(s, ENR_FCGI_REJECT_RECORD);
        } else if (len == 0) {
            if (enr_fcgi_pairs_check((const unsigned char *)s->params->data, s->params->len) < 0)
                bad(s, ENR_FCGI_REJECT_PAIRS);
            else {
                s->phase = ENR_FCGI_PH_BODY;
                s->state = ENR_FCGI_IN_HEAD; /* its padding is skipped with the body */
            }
        } else if (len > ENR_FCGI_PARAMS_MAX - s->params->len) {
            bad(s, ENR_FCGI_REJECT_TOO_LARGE);
        } else {
            s->rec = REC_PARAMS;
        }
        return;
    }
    if (type == FCGI_ABORT_REQUEST) {
        s->state = ENR_FCGI_IN_ABORTED;
    } else if (type != FCGI_STDIN) {
        bad(s, ENR_FCGI_REJECT_RECORD);
    } else if (len == 0) {
        s->state = ENR_FCGI_IN_END;
    } else {
        s->rec = REC_BODY;
        if (len > s->spec)
            s->spec = len;
    }
}

/* A whole header in s->hdr: the record it starts, by the rules above. */
static void header(enr_fcgi_in *s)
{
    const unsigned char *h = s->hdr;
    int type = h[1];
    unsigned id = (unsigned)h[2] << 8 | h[3];
    size_t len = (size_t)h[4] << 8 | h[5];

    s->hdr_len = 0;
    s->content = len;
    s->pad = h[6];
    s->rec = REC_SKIP;
    if (h[0] != FCGI_VERSION_1) {
        bad(s, ENR_FCGI_REJECT_RECORD);
        return;
    }
    if (id == FCGI_NULL_REQUEST_ID) {
        management(s, type, len);
    } else if (type == FCGI_BEGIN_REQUEST) {
        if (len != 8) {
            bad(s, ENR_FCGI_REJECT_RECORD);
        } else if (s->phase == ENR_FCGI_PH_BEGIN) {
            s->rec = REC_BEGIN;
            s->request_id = id;
            s->hold_len = 0;
        } else {
            enr_fcgi_end_request(s->reply, id, 0, FCGI_CANT_MPX_CONN);
            s->reply_len = 16;
        }
    } else if (s->phase == ENR_FCGI_PH_BEGIN) {
        bad(s, ENR_FCGI_REJECT_RECORD);
    } else if (id == s->request_id) {
        own(s, type, len);
    } /* else another request's record: skipped, content and padding */
    if (s->state != ENR_FCGI_IN_RUN && s->state != ENR_FCGI_IN_HEAD)
        return;
    if (s->state == ENR_FCGI_IN_RUN && s->content == 0)
        record_done(s);
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

/* Content raw[0..k) of the record in hand, for what it is. */
static int take_content(enr_fcgi_in *s, enr_buf *body, const unsigned char *raw, size_t k)
{
    switch (s->rec) {
    case REC_BODY:
        return put(s, body, raw, k);
    case REC_PARAMS:
        enr_buf_append(s->params, raw, k);
        if (s->params->oom) {
            s->state = ENR_FCGI_IN_OOM;
            return -1;
        }
        return 0;
    case REC_BEGIN:
    case REC_VALUES:
        memcpy(s->hold + s->hold_len, raw, k); /* bounded by the header's checks */
        s->hold_len += k;
        return 0;
    default:
        return 0;
    }
}

static int running(const enr_fcgi_in *s)
{
    return s->state == ENR_FCGI_IN_RUN && s->reply_len == 0;
}

/* Padding and header bytes from raw[0..n), while no content is due.
 * Returns the bytes consumed. */
static size_t frame(enr_fcgi_in *s, const unsigned char *raw, size_t n)
{
    size_t i = 0;

    while (i < n && running(s) && s->content == 0) {
        size_t k;
        if (s->pad > 0) {
            k = min_sz(s->pad, n - i);
            s->pad -= (unsigned)k;
        } else {
            k = min_sz(FCGI_HEADER_LEN - s->hdr_len, n - i);
            memcpy(s->hdr + s->hdr_len, raw + i, k);
            s->hdr_len += (unsigned)k;
            if (s->hdr_len == FCGI_HEADER_LEN) {
                i += k;
                header(s);
                continue;
            }
        }
        i += k;
    }
    return i;
}

size_t enr_fcgi_in_feed(enr_fcgi_in *s, const unsigned char *raw, size_t n, enr_buf *body)
{
    size_t i = 0;

    while (i < n && running(s)) {
        if (s->content > 0) {
            size_t k = min_sz(s->content, n - i);
            if (take_content(s, body, raw + i, k) != 0)
                break;
            s->content -= k;
            i += k;
            if (s->content == 0)
                record_done(s);
        } else
            i += frame(s, raw + i, n - i);
    }
    return i;
}

/* The fast path's state: in a body record, or between records of the
 * body phase with nothing else due. */
static int in_body(const enr_fcgi_in *s)
{
    return running(s) && s->phase == ENR_FCGI_PH_BODY && (s->content == 0 || s->rec == REC_BODY);
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
 * again from the stage: what cannot be moved into place, or is not the
 * body's.  What the parser does not take stays pending there. */
static void restage(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r, plan *pl, int i, size_t off,
                    size_t count)
{
    size_t m = gather(pl->sg + i, pl->n - i, off, count, r->stage), c;

    c = enr_fcgi_in_feed(s, r->stage, m, body);
    r->copied += m + m;
    r->pend = r->stage + c;
    r->pend_len = m - c;
}

/* Takes got bytes that the readv of pl brought into the state.  Where
 * the prediction held, each content byte is where it belongs and nothing
 * moves.  Where it did not, the rest of the read is parsed where it lies:
 * content found in the body region moves down to its place (memmove: its
 * place is never above it while the stream's headers come no later than
 * the predicted ones, the common case of a record shorter than
 * predicted); content found in scratch is copied in when that does not
 * reach body bytes not parsed yet.  Anything else, and everything from a
 * record that is not the body's on, goes through the stage. */
static void take_read(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r, plan *pl, size_t got)
{
    /* (a body never reserved gets no content in place: make_plan) */
    unsigned char *end = body->data != NULL ? (unsigned char *)body->data + body->cap - 1 : NULL;

    for (int i = 0; i < pl->n && got > 0; i++) {
        seg *g = &pl->sg[i];
        size_t take = min_sz(got, g->len), off = 0;
        int in_place = g->kind != SEG_SCRATCH;
        const unsigned char *limit = end;

        if (!in_place && got > take && i + 1 < pl->n)
            limit = pl->sg[i + 1].p; /* the next body bytes, not parsed yet */
        if (g->kind == SEG_SPEC && (!running(s) || s->hdr_len != 0 || s->content != g->want ||
                                    s->pad != g->pad || s->rec != REC_BODY))
            r->mispredicted++;
        while (off < take && in_body(s)) {
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
            dst = body->data != NULL ? (unsigned char *)body->data + body->len : NULL;
            if (dst == NULL || (in_place ? dst > src : dst + k > limit)) {
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
        if (!in_body(s)) {
            /* END, HEAD cannot come here; TOO_LARGE, BAD, ABORTED end the
             * run; a reply or a record that is not the body's: the rest
             * of the read goes through the byte parser. */
            if (s->state == ENR_FCGI_IN_RUN)
                restage(s, body, r, pl, i, off, got - off);
            return;
        }
        got -= take;
    }
}

static int flush_reply(enr_fcgi_in *s, enr_fcgi_run *r)
{
    int rc = r->wr(r->ctx, s->reply, s->reply_len);

    s->reply_len = 0;
    if (rc != 0)
        r->err = errno != 0 ? errno : EIO;
    return rc;
}

int enr_fcgi_in_run(enr_fcgi_in *s, enr_buf *body, enr_fcgi_run *r)
{
    plan pl;

    for (;;) {
        ssize_t got;
        int fast;

        if (s->reply_len > 0 && flush_reply(s, r) != 0)
            return ENR_FCGI_BODY_ERROR;
        if (r->pend_len > 0 && running(s)) {
            size_t c = enr_fcgi_in_feed(s, r->pend, r->pend_len, body);
            r->pend += c;
            r->pend_len -= c;
            continue;
        }
        switch (s->state) {
        case ENR_FCGI_IN_END:
            return ENR_FCGI_BODY_DONE;
        case ENR_FCGI_IN_HEAD:
            return ENR_FCGI_BODY_HEAD;
        case ENR_FCGI_IN_TOO_LARGE:
            return ENR_FCGI_BODY_TOO_LARGE;
        case ENR_FCGI_IN_BAD:
            return ENR_FCGI_BODY_REJECT;
        case ENR_FCGI_IN_ABORTED:
            return ENR_FCGI_BODY_ABORTED;
        case ENR_FCGI_IN_OOM:
            r->err = ENOMEM;
            return ENR_FCGI_BODY_ERROR;
        default:
            break;
        }
        if (s->rec == REC_BODY && s->content > 0 && body->len >= s->max) {
            s->state = ENR_FCGI_IN_TOO_LARGE; /* a content byte is due */
            continue;
        }
        if (r->deadline_ms != 0 && enr_mono_ms() >= r->deadline_ms) {
            r->err = ETIMEDOUT;
            return ENR_FCGI_BODY_ERROR;
        }
        fast = in_body(s);
        if (fast) {
            size_t want = min_sz(s->content > 0 ? s->content : expect_left(r, body), r->stage_len);
            want = min_sz(want, s->max - body->len); /* never reserved past max */
            if (want > 0 && enr_buf_reserve(body, want + 1) != 0) {
                s->state = ENR_FCGI_IN_OOM;
                continue;
            }
            make_plan(s, body, r, &pl);
            got = r->rd(r->ctx, pl.iov, pl.n);
        } else {
            struct iovec one = {r->stage, r->stage_len};
            got = r->rd(r->ctx, &one, 1);
        }
        r->reads++;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            r->err = errno != 0 ? errno : EIO;
            return ENR_FCGI_BODY_ERROR;
        }
        if (got == 0) {
            r->err = 0; /* EOF inside the stream */
            return ENR_FCGI_BODY_ERROR;
        }
        if (fast)
            take_read(s, body, r, &pl, (size_t)got);
        else {
            r->pend = r->stage;
            r->pend_len = (size_t)got;
        }
    }
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
