/*
 * fuzz_fcgi_body.c: a FastCGI connection's input through enrichd's record
 * reader (src/fcgi/fcgi_body.c, the rules of src/fcgi/fcgi_guard.c) and
 * then libfcgi itself: the checked parameters handed to FCGX_Accept_r
 * through the pipe, as a worker does.  Against a plain record-by-record
 * reading of the same bytes by the same rules, written here apart.
 *
 * The input's first bytes choose max, CONTENT_LENGTH (exact, off, or
 * absent), the header phase's first read, the stage's size, how the
 * stream is cut into reads, and whether the stream is raw or built from
 * a script: parameters (well-formed pairs with 1- and 4-byte lengths, or
 * raw bytes whose lengths lie), then body records of every length (the
 * predicted 32 KB, one more, 65535, tiny ones) with any padding, other
 * ids' records of any length (zero too), management records (good and
 * lying pairs), aborts, bad versions.  Same outcome and reason, same
 * body bytes, same replies; and libfcgi, given what the reader let
 * through, never fails and finds each parameter as the reader saw it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fastcgi.h>
#include <fcgiapp.h>

#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_guard.h"
#include "../unit/t_fcgi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RID 1
#define STREAM_MAX (1u << 20)
#define OUT_MAX (2u << 20)

typedef struct src {
    const unsigned char *p;
    size_t len, off, first;
    uint32_t rng;
    int eintr; /* one EINTR now and then */
    unsigned char *out;
    size_t out_len;
} src;

static uint32_t next(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static ssize_t rd(void *ctx, const struct iovec *iov, int n)
{
    src *s = ctx;
    size_t want = 0, chunk;
    uint32_t r = next(&s->rng);

    for (int i = 0; i < n; i++)
        want += iov[i].iov_len;
    if (want == 0)
        abort(); /* a readv of nothing would read as EOF */
    if (s->eintr && (r & 15) == 0) {
        errno = EINTR;
        return -1;
    }
    if (s->off == s->len)
        return 0;
    switch (r >> 4 & 3) {
    case 0:
        chunk = 1 + (r >> 8) % 16;
        break;
    case 1:
        chunk = 1 + (r >> 8) % 4096;
        break;
    default:
        chunk = want;
        break;
    }
    if (s->first) {
        chunk = s->first;
        s->first = 0;
    }
    if (chunk > want)
        chunk = want;
    return t_iov_give(iov, n, s->p, s->len, &s->off, chunk);
}

static int wr(void *ctx, const unsigned char *p, size_t n)
{
    src *s = ctx;

    if (n > OUT_MAX - s->out_len)
        abort(); /* more replies than records */
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

static size_t put_record(unsigned char *out, int type, unsigned id, const unsigned char *c,
                         size_t len, unsigned pad)
{
    t_fcgi_header(out, type, id, len, pad);
    if (len)
        memcpy(out + 8, c, len);
    memset(out + 8 + len, 0xee, pad);
    return 8 + len + pad;
}

/* Well-formed pairs from d[0..n): 2 bytes choose the lengths of each. */
static size_t make_pairs(const uint8_t *d, size_t n, unsigned char *out, size_t cap)
{
    size_t o = 0, i = 0;

    while (i + 2 <= n && o + 8 + 512 <= cap) {
        size_t nl = d[i] & 31, vl = d[i + 1];
        int wide = d[i] >> 7;
        i += 2;
        if (wide) {
            out[o++] = 0x80;
            out[o++] = 0;
            out[o++] = (unsigned char)(nl >> 8);
            out[o++] = (unsigned char)nl;
        } else
            out[o++] = (unsigned char)nl;
        out[o++] = (unsigned char)vl;
        for (size_t k = 0; k < nl + vl; k++) {
            unsigned char c = (unsigned char)('A' + (i + k * 7) % 26);
            out[o++] = c;
        }
        /* the names libfcgi answers for, now and then */
        if ((d[i - 2] & 96) == 96 && nl >= 14)
            memcpy(out + o - nl - vl, "CONTENT_LENGTH", 14);
    }
    return o;
}

/* A stream from a script: the head, then 3 bytes per body record. */
static size_t build(const uint8_t *d, size_t n, unsigned char *out)
{
    static const unsigned char begin[8] = {0, FCGI_RESPONDER};
    static unsigned char pairs[ENR_FCGI_PARAMS_MAX + 4096];
    size_t o = 0, i, plen, pn, off;

    if (n < 3)
        return 0;
    o += put_record(out, FCGI_BEGIN_REQUEST, RID, begin, 8, 0);
    plen = (size_t)d[1] << 4 | (d[2] & 15);
    if (plen > n - 3)
        plen = n - 3;
    if (d[0] & 1)
        pn = make_pairs(d + 3, plen, pairs, sizeof pairs);
    else {
        pn = plen; /* raw: lengths that lie */
        memcpy(pairs, d + 3, pn);
    }
    for (off = 0; off < pn;) {
        size_t k = 1 + (size_t)(d[2] >> 4) * 700;
        if (k > pn - off)
            k = pn - off;
        o += put_record(out + o, FCGI_PARAMS, RID, pairs + off, k, d[0] >> 5);
        off += k;
    }
    o += put_record(out + o, FCGI_PARAMS, RID, NULL, 0, (d[0] >> 1 & 1) ? 5 : 0);
    for (i = 3 + plen; i + 3 <= n && o + 8 + 65535 + 255 + 8 <= STREAM_MAX; i += 3) {
        unsigned kind = d[i] & 15, pad, id = RID;
        size_t len;
        int type = FCGI_STDIN;
        unsigned char *h = out + o;

        switch (d[i] >> 4 & 3) {
        case 0:
            len = 32768 + (d[i + 1] & 1); /* nginx's, or one more */
            break;
        case 1:
            len = (size_t)d[i + 1] << 8 | d[i + 2];
            break;
        case 2:
            len = d[i + 1];
            break;
        default:
            len = 65535 - d[i + 1];
            break;
        }
        pad = (d[i] >> 6) == 3 ? d[i + 2] : (unsigned)((8 - len % 8) % 8);
        switch (kind) {
        case 8: /* another id, any length */
            id = 2 + (d[i + 2] & 7);
            len = (d[i + 1] & 3) == 0 ? 0 : len;
            type = (d[i + 2] & 8) ? FCGI_PARAMS : FCGI_STDIN;
            break;
        case 9: { /* FCGI_GET_VALUES: good pairs, or raw */
            size_t k = (d[i + 2] & 1) ? make_pairs(d + i, 6 < n - i ? 6 : n - i, out + o + 8, 512)
                                      : (d[i + 1] & 15);
            if (!(d[i + 2] & 1))
                memcpy(out + o + 8, d + i, k < n - i ? k : n - i);
            t_fcgi_header(h, FCGI_GET_VALUES, 0, k, 0);
            o += 8 + k;
            continue;
        }
        case 10:
            type = 11 + (d[i + 1] & 3); /* an unknown management type */
            id = 0;
            len = d[i + 2] & 7;
            break;
        case 11:
            if ((d[i + 1] & 7) != 0)
                break;
            type = FCGI_ABORT_REQUEST;
            len = 0;
            break;
        case 12:
            type = FCGI_BEGIN_REQUEST;
            id = (d[i + 1] & 1) ? RID : 3;
            len = (d[i + 2] & 3) ? 8 : 7;
            break;
        case 13:
            if ((d[i + 1] & 7) == 0)
                type = FCGI_DATA; /* not the body's: rejected */
            break;
        case 14:
            if ((d[i + 1] & 3) == 0)
                len = 0; /* the end (maybe followed by more) */
            break;
        default:
            break;
        }
        t_fcgi_header(h, type, id, len, pad);
        if (kind == 13 && (d[i + 1] & 7) == 1)
            h[0] = 2; /* a bad version */
        o += 8;
        for (size_t k = 0; k < len; k++)
            out[o + k] = (unsigned char)(k * 31 + i);
        o += len;
        memset(out + o, 0xee, pad);
        o += pad;
    }
    return o;
}

/* ---- the reference: the rules, record by record ---- */

enum { R_HEAD_DONE, R_TOO_LARGE, R_EOF, R_REJECT, R_ABORTED };

typedef struct ref {
    int out, reason, head; /* head: the parameters were whole */
    unsigned char *body, *replies, *params;
    size_t body_len, replies_len, params_len;
    unsigned role;
} ref;

static long ref_pairs(const unsigned char *p, size_t n)
{
    size_t i = 0;
    long c = 0;

    while (i < n) {
        size_t len[2];
        for (int k = 0; k < 2; k++) {
            if (i >= n)
                return -1;
            if (p[i] < 128)
                len[k] = p[i++];
            else {
                if (n - i < 4)
                    return -1;
                len[k] = ((size_t)(p[i] & 127) << 24) + ((size_t)p[i + 1] << 16) +
                         ((size_t)p[i + 2] << 8) + p[i + 3];
                i += 4;
            }
        }
        if (len[0] > n - i || len[1] > n - i - len[0])
            return -1;
        for (size_t k = 0; k < len[0] + len[1]; k++)
            if (p[i + k] == 0 || (k < len[0] && p[i + k] == '='))
                return -1;
        i += len[0] + len[1];
        c++;
    }
    return c;
}

static void reply(ref *r, const unsigned char *p, size_t n)
{
    memcpy(r->replies + r->replies_len, p, n);
    r->replies_len += n;
}

/* A management record (id 0) at p, avail bytes of it read; 1 when it ends
 * the reading (r->out set), 0 to go on. */
static int ref_mgmt(const unsigned char *p, size_t avail, int type, size_t len, ref *r)
{
    unsigned char rec[ENR_FCGI_REPLY_MAX];

    if (type == FCGI_GET_VALUES) {
        if (len > ENR_FCGI_MGMT_MAX) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_TOO_LARGE;
            return 1;
        }
        if (avail < len) {
            r->out = R_EOF;
            return 1;
        }
        if (ref_pairs(p, len) < 0) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_PAIRS;
            return 1;
        }
        reply(r, rec, enr_fcgi_get_values_result(p, len, 3, rec));
    } else if (type == FCGI_BEGIN_REQUEST) {
        r->out = R_REJECT;
        r->reason = ENR_FCGI_REJECT_RECORD;
        return 1;
    } else {
        enr_fcgi_unknown_type(rec, type);
        reply(r, rec, 16);
    }
    return 0;
}

/* A BEGIN_REQUEST of request id: the one request taken, or another refused;
 * 1 when it ends the reading, 0 to go on. */
static int ref_begin(const unsigned char *p, size_t avail, unsigned id, size_t len, ref *r,
                     unsigned *rid, int *phase)
{
    unsigned char rec[ENR_FCGI_REPLY_MAX];

    if (len != 8) {
        r->out = R_REJECT;
        r->reason = ENR_FCGI_REJECT_RECORD;
        return 1;
    }
    if (*phase == 0) {
        if (avail < 8) {
            r->out = R_EOF;
            return 1;
        }
        *rid = id;
        r->role = (unsigned)p[0] << 8 | p[1];
        *phase = 1;
    } else {
        enr_fcgi_end_request(rec, id, 0, FCGI_CANT_MPX_CONN);
        reply(r, rec, 16);
    }
    return 0;
}

/* The request's record while its parameters come; 1 when it ends the
 * reading, 0 to go on (*phase 2 once they are whole). */
static int ref_params(const unsigned char *p, size_t avail, int type, size_t len, ref *r,
                      int *phase)
{
    if (type != FCGI_PARAMS) {
        r->out = R_REJECT;
        r->reason = ENR_FCGI_REJECT_RECORD;
        return 1;
    }
    if (len == 0) {
        if (ref_pairs(r->params, r->params_len) < 0) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_PAIRS;
            return 1;
        }
        r->head = 1;
        *phase = 2;
    } else if (len > ENR_FCGI_PARAMS_MAX - r->params_len) {
        r->out = R_REJECT;
        r->reason = ENR_FCGI_REJECT_TOO_LARGE;
        return 1;
    } else {
        if (avail < len) {
            r->out = R_EOF;
            return 1;
        }
        memcpy(r->params + r->params_len, p, len);
        r->params_len += len;
    }
    return 0;
}

/* A body record of len > 0 bytes, avail of them read, into at most max;
 * 1 when it ends the reading, 0 to go on. */
static int ref_stdin(const unsigned char *p, size_t avail, size_t len, size_t max, ref *r)
{
    size_t k;

    if (r->body_len == max) {
        r->out = R_TOO_LARGE; /* content due, no room left */
        return 1;
    }
    k = len < avail ? len : avail;
    if (k > max - r->body_len) {
        memcpy(r->body + r->body_len, p, max - r->body_len);
        r->body_len = max;
        r->out = R_TOO_LARGE;
        return 1;
    }
    memcpy(r->body + r->body_len, p, k);
    r->body_len += k;
    if (k < len) {
        r->out = r->body_len == max ? R_TOO_LARGE : R_EOF;
        return 1;
    }
    return 0;
}

static void reference(const unsigned char *p, size_t n, size_t max, ref *r)
{
    size_t o = 0;
    unsigned rid = 0;
    int phase = 0; /* 0 BEGIN, 1 PARAMS, 2 BODY */

    for (;;) {
        const unsigned char *h = p + o;
        size_t len;
        unsigned pad, id;
        int type;

        if (n - o < 8) {
            r->out = R_EOF;
            return;
        }
        type = h[1];
        id = (unsigned)h[2] << 8 | h[3];
        len = (size_t)h[4] << 8 | h[5];
        pad = h[6];
        if (h[0] != 1) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_RECORD;
            return;
        }
        o += 8;
        if (id == 0) {
            if (ref_mgmt(p + o, n - o, type, len, r))
                return;
        } else if (type == FCGI_BEGIN_REQUEST) {
            if (ref_begin(p + o, n - o, id, len, r, &rid, &phase))
                return;
        } else if (phase == 0) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_RECORD;
            return;
        } else if (id != rid) {
            /* another request's: skipped */
        } else if (phase == 1) {
            if (ref_params(p + o, n - o, type, len, r, &phase))
                return;
        } else if (type == FCGI_ABORT_REQUEST) {
            r->out = R_ABORTED;
            return;
        } else if (type != FCGI_STDIN) {
            r->out = R_REJECT;
            r->reason = ENR_FCGI_REJECT_RECORD;
            return;
        } else if (len == 0) {
            r->out = R_HEAD_DONE;
            return;
        } else if (ref_stdin(p + o, n - o, len, max, r)) {
            return;
        }
        if (n - o < len) {
            r->out = R_EOF;
            return;
        }
        o += len;
        if (n - o < pad) {
            r->out = R_EOF;
            return;
        }
        o += pad;
    }
}

/* libfcgi's view of the checked parameters: the first value of each name. */
static void check_libfcgi(const unsigned char *p, size_t n, unsigned id)
{
    static int pipe_fds[2] = {-1, -1}, null_fd = -1, ready;
    static char name[ENR_FCGI_PARAMS_MAX + 1];
    FCGX_Request req;
    size_t i = 0;

    if (!ready) {
        if (FCGX_Init() != 0 || (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
            abort();
        ready = 1;
    }
    if (FCGX_InitRequest(&req, -1, 0) != 0)
        abort();
    if (enr_fcgi_libfcgi_accept(&req, pipe_fds, null_fd, id, FCGI_RESPONDER, 0, p, n) != 0)
        abort(); /* what the reader let through, libfcgi must take */
    while (i < n) {
        size_t len[2];
        const char *v;
        for (int k = 0; k < 2; k++) {
            if (p[i] < 128)
                len[k] = p[i++];
            else {
                len[k] = ((size_t)(p[i] & 127) << 24) + ((size_t)p[i + 1] << 16) +
                         ((size_t)p[i + 2] << 8) + p[i + 3];
                i += 4;
            }
        }
        memcpy(name, p + i, len[0]);
        name[len[0]] = '\0';
        v = len[0] ? FCGX_GetParam(name, req.envp) : NULL;
        /* FCGX_GetParam answers with the first pair of a name (FCGI_ROLE
         * is libfcgi's own, first of all): this value, unless an earlier
         * pair has the name */
        if (len[0] && strcmp(name, "FCGI_ROLE") != 0) {
            if (v == NULL)
                abort();
            if (strlen(v) != len[1] || memcmp(v, p + i + len[0], len[1]) != 0) {
                size_t j = 0;
                int earlier = 0;
                while (j < i && !earlier) {
                    size_t l2[2];
                    for (int k = 0; k < 2; k++) {
                        if (p[j] < 128)
                            l2[k] = p[j++];
                        else {
                            l2[k] = ((size_t)(p[j] & 127) << 24) + ((size_t)p[j + 1] << 16) +
                                    ((size_t)p[j + 2] << 8) + p[j + 3];
                            j += 4;
                        }
                    }
                    earlier = j < i && l2[0] == len[0] && memcmp(p + j, name, len[0]) == 0;
                    j += l2[0] + l2[1];
                }
                if (!earlier)
                    abort();
            }
        }
        i += len[0] + len[1];
    }
    FCGX_Finish_r(&req);
}

/* The CONTENT_LENGTH the input chose for a body of body_len bytes:
 * absent (SIZE_MAX), exact, more or less. */
static size_t content_length(const uint8_t *data, size_t body_len)
{
    switch (data[2] >> 6) {
    case 0:
        return SIZE_MAX;
    case 1:
        return body_len;
    case 2:
        return body_len + data[3];
    default:
        return body_len > data[3] ? body_len - data[3] : 0;
    }
}

/* The reader's end (rc, s's reason, r's error) is the reference's. */
static void check_outcome(int rc, const enr_fcgi_in *s, const enr_fcgi_run *r, const ref *rf)
{
    switch (rc) {
    case ENR_FCGI_BODY_DONE:
        if (rf->out != R_HEAD_DONE)
            abort();
        break;
    case ENR_FCGI_BODY_TOO_LARGE:
        if (rf->out != R_TOO_LARGE)
            abort();
        break;
    case ENR_FCGI_BODY_REJECT:
        if (rf->out != R_REJECT || s->reason != rf->reason)
            abort();
        break;
    case ENR_FCGI_BODY_ABORTED:
        if (rf->out != R_ABORTED)
            abort();
        break;
    case ENR_FCGI_BODY_HEAD:
        abort(); /* a body phase never ends at the head */
    default:
        if (rf->out != R_EOF || r->err != 0)
            abort();
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char stream[STREAM_MAX], refbody[STREAM_MAX], replies[OUT_MAX],
        refreplies[OUT_MAX], refparams[ENR_FCGI_PARAMS_MAX];
    static const size_t stages[4] = {512, 4096, 65536, 256 * 1024};
    size_t n, max, expect;
    enr_fcgi_in s;
    enr_fcgi_run r;
    enr_buf body = {0}, params = {0}, none = {0};
    unsigned char *stage;
    ref rf;
    src in;
    int rc;

    if (size < 8)
        return 0;
    if (data[7] & 1)
        n = build(data + 8, size - 8, stream);
    else {
        n = size - 8 < STREAM_MAX ? size - 8 : STREAM_MAX;
        memcpy(stream, data + 8, n);
    }
    max = ((size_t)data[0] << 8 | data[1]) * 64 + (data[2] & 63);
    memset(&rf, 0, sizeof rf);
    rf.body = refbody;
    rf.replies = refreplies;
    rf.params = refparams;
    reference(stream, n, max, &rf);
    expect = content_length(data, rf.body_len);
    stage = malloc(256 * 1024);
    if (stage == NULL)
        return 0;
    in = (src){.p = stream,
               .len = n,
               .first = ((size_t)data[4] << 8 | data[5]) % 9000,
               .rng = (uint32_t)data[3] * 2654435761u | 1,
               .eintr = data[6] & 4,
               .out = replies};

    /* As fcgi_conn.c: the header phase, then the body. */
    enr_fcgi_in_init(&s, &params, 3);
    r = (enr_fcgi_run){
        .rd = rd, .wr = wr, .ctx = &in, .expect = SIZE_MAX, .stage = stage, .stage_len = 8192};
    rc = enr_fcgi_in_run(&s, &none, &r);
    if ((rc == ENR_FCGI_BODY_HEAD) != rf.head)
        abort();
    if (rc == ENR_FCGI_BODY_HEAD) {
        if (params.len != rf.params_len ||
            (params.len && memcmp(params.data, refparams, params.len) != 0))
            abort();
        /* only a RESPONDER reaches libfcgi (fcgi_conn.c) */
        if (s.role == FCGI_RESPONDER)
            check_libfcgi((const unsigned char *)params.data, params.len, s.request_id);
        enr_fcgi_in_body(&s, max);
        r.expect = expect;
        r.stage_len = stages[data[6] & 3];
        rc = enr_fcgi_in_run(&s, &body, &r);
    }
    check_outcome(rc, &s, &r, &rf);
    if (in.out_len != rf.replies_len || memcmp(replies, refreplies, in.out_len) != 0)
        abort();
    if (rc != ENR_FCGI_BODY_TOO_LARGE &&
        (body.len != rf.body_len || (body.len && memcmp(body.data, refbody, body.len) != 0)))
        abort();
    if (rc == ENR_FCGI_BODY_TOO_LARGE &&
        (body.len > max || (body.len && memcmp(body.data, refbody, body.len) != 0)))
        abort();
    enr_buf_free(&body);
    enr_buf_free(&params);
    free(stage);
    return 0;
}
