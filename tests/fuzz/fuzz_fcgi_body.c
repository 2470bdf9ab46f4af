/*
 * fuzz_fcgi_body.c: the worker's direct FCGI_STDIN reader
 * (src/fcgi/fcgi_body.c: records laid out by readv, content read in
 * place, a re-parse after a wrong prediction) against a plain
 * record-by-record reading of the same bytes by libfcgi's rules
 * (ProcessHeader: a version-1 FCGI_STDIN record of the request's id is
 * the body's, an empty one ends it, any other record is libfcgi's).
 *
 * The input's first bytes choose max, CONTENT_LENGTH (exact, off, or
 * absent), how many bytes were "buffered by libfcgi" before the reader
 * took the stream, the stage's size, and how the stream is cut into
 * reads; the rest is the stream itself, raw or (most inputs) built from
 * a script of records (lengths, padding, foreign records, the end).
 * Same outcome, same body bytes, and the bytes handed back to libfcgi
 * are exactly the stream's from the foreign header on.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <fastcgi.h>

#include "fcgi/fcgi_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RID 1
#define STREAM_MAX (1u << 20)

typedef struct src {
    const unsigned char *p;
    size_t len, off;
    uint32_t rng;
    int eintr; /* one EINTR now and then */
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
    size_t want = 0, got = 0, chunk;
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
    /* short reads of every size, and whole ones */
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
    if (chunk > want)
        chunk = want;
    if (chunk > s->len - s->off)
        chunk = s->len - s->off;
    for (int i = 0; i < n && got < chunk; i++) {
        size_t k = iov[i].iov_len < chunk - got ? iov[i].iov_len : chunk - got;
        memcpy(iov[i].iov_base, s->p + s->off + got, k);
        got += k;
    }
    s->off += got;
    return (ssize_t)got;
}

static void put_header(unsigned char *h, int type, unsigned id, size_t len, unsigned pad)
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

/* A stream from a script: 3 bytes per record. */
static size_t build(const uint8_t *d, size_t n, unsigned char *out)
{
    size_t o = 0;

    for (size_t i = 0; i + 3 <= n && o + 8 + 65535 + 255 + 8 <= STREAM_MAX; i += 3) {
        unsigned kind = d[i] & 7, pad;
        size_t len;
        int type = FCGI_STDIN;
        unsigned id = RID;

        switch (d[i] >> 3 & 3) {
        case 0:
            len = 32768; /* nginx's */
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
        pad = (d[i] >> 5) == 7 ? d[i + 2] : (unsigned)((8 - len % 8) % 8);
        if (kind == 6) {
            type = (d[i + 2] & 1) ? FCGI_ABORT_REQUEST : FCGI_GET_VALUES; /* foreign */
            id = (d[i + 2] & 2) ? 0 : RID;
            len = d[i + 1] & 15;
        } else if (kind == 7) {
            id = 2; /* another request's stdin */
        } else if (kind == 5 && (d[i + 1] & 3) == 0) {
            len = 0; /* the end (maybe followed by more) */
        }
        put_header(out + o, type, id, len, pad);
        o += 8;
        for (size_t k = 0; k < len; k++)
            out[o + k] = (unsigned char)(k * 31 + i);
        o += len;
        memset(out + o, 0xee, pad);
        o += pad;
    }
    return o;
}

enum { R_DONE, R_FOREIGN, R_EOF, R_TOO_LARGE };

/* The reference: returns the outcome; *body_len, and *foreign (offset
 * of the foreign header). */
static int reference(const unsigned char *p, size_t n, size_t max, unsigned char *body,
                     size_t *body_len, size_t *foreign)
{
    size_t o = 0, bl = 0;
    int out;

    for (;;) {
        size_t len, k;
        unsigned pad;

        if (n - o < 8) {
            out = R_EOF;
            break;
        }
        if (p[o] != FCGI_VERSION_1 || p[o + 1] != FCGI_STDIN ||
            ((unsigned)p[o + 2] << 8 | p[o + 3]) != RID) {
            *foreign = o;
            out = R_FOREIGN;
            break;
        }
        len = (size_t)p[o + 4] << 8 | p[o + 5];
        pad = p[o + 6];
        if (len == 0) {
            out = R_DONE;
            break;
        }
        if (bl == max) {
            out = R_TOO_LARGE; /* content due, no room left */
            break;
        }
        o += 8;
        k = len < n - o ? len : n - o;
        if (k > max - bl) {
            memcpy(body + bl, p + o, max - bl);
            bl = max;
            out = R_TOO_LARGE;
            break;
        }
        memcpy(body + bl, p + o, k);
        bl += k;
        o += k;
        if (k < len) {
            /* the stream ends inside the record: at max, the content
             * still due is already too much */
            out = bl == max ? R_TOO_LARGE : R_EOF;
            break;
        }
        if (n - o < pad) {
            out = R_EOF;
            break;
        }
        o += pad;
    }
    *body_len = bl;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char stream[STREAM_MAX], refbody[STREAM_MAX];
    static const size_t stages[4] = {512, 4096, 65536, 256 * 1024 - 8};
    size_t n, max, expect, buffered, stage_len, ref_len = 0, foreign = 0, c;
    enr_fcgi_in s;
    enr_fcgi_run r;
    enr_buf body = {0};
    unsigned char *stage;
    src in;
    int ref, rc;

    if (size < 8)
        return 0;
    if (data[7] & 1)
        n = build(data + 8, size - 8, stream);
    else {
        n = size - 8 < STREAM_MAX ? size - 8 : STREAM_MAX;
        memcpy(stream, data + 8, n);
    }
    max = ((size_t)data[0] << 8 | data[1]) * 64 + (data[2] & 63);
    ref = reference(stream, n, max, refbody, &ref_len, &foreign);
    switch (data[2] >> 6) {
    case 0:
        expect = SIZE_MAX;
        break;
    case 1:
        expect = ref_len;
        break;
    case 2:
        expect = ref_len + data[3];
        break;
    default:
        expect = ref_len > data[3] ? ref_len - data[3] : 0;
        break;
    }
    buffered = n ? ((size_t)data[4] << 8 | data[5]) % (n + 1) : 0;
    stage_len = stages[data[6] & 3];
    stage = malloc(stage_len);
    if (stage == NULL)
        return 0;
    in =
        (src){stream + buffered, n - buffered, 0, (uint32_t)data[3] * 2654435761u | 1, data[6] & 4};

    /* As enr_fcgi_body_read: what libfcgi buffered, then the reads. */
    enr_fcgi_in_init(&s, RID, max);
    c = enr_fcgi_in_feed(&s, stream, buffered, &body);
    memset(&r, 0, sizeof r);
    if (s.state == ENR_FCGI_IN_FOREIGN) {
        rc = ENR_FCGI_BODY_LIBFCGI;
        r.rest = stream + c;
        r.rest_len = buffered - c;
    } else {
        r.rd = rd;
        r.ctx = &in;
        r.expect = expect;
        r.stage = stage;
        r.stage_len = stage_len;
        rc = enr_fcgi_in_run(&s, &body, &r);
    }
    switch (rc) {
    case ENR_FCGI_BODY_DONE:
        if (ref != R_DONE)
            abort();
        break;
    case ENR_FCGI_BODY_TOO_LARGE:
        if (ref != R_TOO_LARGE)
            abort();
        break;
    case ENR_FCGI_BODY_LIBFCGI:
        /* the header, then exactly the bytes that followed it */
        if (ref != R_FOREIGN || memcmp(s.hdr, stream + foreign, 8) != 0 ||
            foreign + 8 + r.rest_len > n ||
            (r.rest_len && memcmp(r.rest, stream + foreign + 8, r.rest_len) != 0))
            abort();
        /* and nothing was read past them */
        if ((r.rd != NULL ? buffered + in.off : buffered) != foreign + 8 + r.rest_len)
            abort();
        break;
    default:
        if (ref != R_EOF || r.err != FCGX_PROTOCOL_ERROR)
            abort();
        break;
    }
    if (rc != ENR_FCGI_BODY_TOO_LARGE &&
        (body.len != ref_len || (ref_len && memcmp(body.data, refbody, ref_len) != 0)))
        abort();
    if (rc == ENR_FCGI_BODY_TOO_LARGE &&
        (body.len > max || (body.len && memcmp(body.data, refbody, body.len) != 0)))
        abort();
    enr_buf_free(&body);
    free(stage);
    return 0;
}
