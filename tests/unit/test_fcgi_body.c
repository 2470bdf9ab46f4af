/*
 * test_fcgi_body.c: enrichd's FastCGI record reader (src/fcgi/fcgi_body.c)
 * and the guard's rules (src/fcgi/fcgi_guard.c) on streams built here,
 * read through a fake readv: the body bytes, the outcome, the replies,
 * and what it costs (reads, bytes moved in user space), for nginx's
 * record layout, for records of lengths other than the predicted ones
 * (a generator over lengths, paddings, foreign records and read splits,
 * against a plain reading of the same records), for the records libfcgi
 * got wrong, and the hand-over of a checked request to libfcgi itself.
 */
#include <errno.h>
#include <fastcgi.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_guard.h"
#include "t.h"
#include "t_fcgi.h"

#define RID 1
#define STAGE (256u * 1024)
#define HEAD_READ 8192

typedef struct fake {
    const unsigned char *p;
    size_t len, off;
    size_t first; /* at most this much in the first read */
    size_t chunk; /* then at most this much per read (the socket's fill) */
    int eintr;    /* EINTR before the next read, this many times */
    uint32_t rng; /* 0: fixed chunks; else each read 1..chunk bytes */
    unsigned char out[4096];
    size_t out_len; /* the replies written */
} fake;

static uint32_t next(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static ssize_t fake_readv(void *ctx, const struct iovec *iov, int n)
{
    fake *f = ctx;
    size_t lim = f->chunk;

    if (f->eintr > 0) {
        f->eintr--;
        errno = EINTR;
        return -1;
    }
    if (f->off == f->len)
        return 0;
    if (f->first) {
        lim = f->first;
        f->first = 0;
    } else if (f->rng)
        lim = 1 + next(&f->rng) % f->chunk;
    return t_iov_give(iov, n, f->p, f->len, &f->off, lim);
}

static int fake_write(void *ctx, const unsigned char *p, size_t n)
{
    fake *f = ctx;

    if (n > sizeof f->out - f->out_len) {
        errno = ENOSPC;
        return -1;
    }
    memcpy(f->out + f->out_len, p, n);
    f->out_len += n;
    return 0;
}

static size_t record(unsigned char *out, int type, unsigned id, const unsigned char *c, size_t len,
                     unsigned pad)
{
    t_fcgi_header(out, type, id, len, pad);
    if (len)
        memcpy(out + 8, c, len);
    memset(out + 8 + len, 0, pad);
    return 8 + len + pad;
}

static const unsigned char PAIRS[] = "\x0e\x04REQUEST_METHODPOST\x0e\x06"
                                     "CONTENT_LENGTH123456";

/* BEGIN_REQUEST, the parameters, the empty FCGI_PARAMS. */
static size_t head_of(unsigned char *out)
{
    static const unsigned char begin[8] = {0, FCGI_RESPONDER, 0, 0, 0, 0, 0, 0};
    size_t o = record(out, FCGI_BEGIN_REQUEST, RID, begin, 8, 0);

    o += record(out + o, FCGI_PARAMS, RID, PAIRS, sizeof PAIRS - 1, 0);
    return o + record(out + o, FCGI_PARAMS, RID, NULL, 0, 0);
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
    int head_rc, rc;
    enr_buf body, params;
    enr_fcgi_run r;
    enr_fcgi_in s;
    fake f;
} outcome;

/* As fcgi_conn.c: the header phase (its first read `first` bytes, then
 * HEAD_READ at most), then the body with reads of `chunk`. */
static void run(outcome *o, const unsigned char *st, size_t len, size_t first, size_t chunk,
                size_t expect, size_t max, unsigned char *stage, uint32_t rng)
{
    o->body = (enr_buf){0};
    o->params = (enr_buf){0};
    o->f = (fake){.p = st, .len = len, .first = first, .chunk = HEAD_READ, .eintr = 1};
    enr_fcgi_in_init(&o->s, &o->params, 6);
    o->r = (enr_fcgi_run){.rd = fake_readv,
                          .wr = fake_write,
                          .ctx = &o->f,
                          .expect = SIZE_MAX,
                          .stage = stage,
                          .stage_len = HEAD_READ};
    o->head_rc = enr_fcgi_in_run(&o->s, &o->body, &o->r);
    o->rc = o->head_rc;
    if (o->head_rc != ENR_FCGI_BODY_HEAD)
        return;
    if (expect != SIZE_MAX)
        enr_buf_reserve(&o->body, expect + 1);
    o->f.chunk = chunk;
    o->f.rng = rng;
    o->f.eintr = 1;
    enr_fcgi_in_body(&o->s, max);
    o->r.expect = expect;
    o->r.stage_len = STAGE;
    o->r.reads = 0;
    o->rc = enr_fcgi_in_run(&o->s, &o->body, &o->r);
}

static void done(outcome *o)
{
    enr_buf_free(&o->body);
    enr_buf_free(&o->params);
}

static void test_layouts(const unsigned char *body, size_t N, unsigned char *st,
                         unsigned char *stage)
{
    static const size_t exact[] = {32768};
    static const size_t nginx[] = {922,   32768, 32768, 32768, 28774, 32768, 32768,
                                   32768, 32768, 32768, 32768, 32768, 32768, 23382};
    size_t h = head_of(st), len;
    outcome o;

    /* 32 KB records, the socket holding 200 KB a read: in place, no move */
    len = h + stream_of(st + h, body, N, exact, 1);
    run(&o, st, len, h + 8000, 200 * 1024, N, 4 << 20, stage, 0);
    T_CHECK(o.head_rc == ENR_FCGI_BODY_HEAD && o.params.len == sizeof PAIRS - 1,
            "the header phase ends at the empty FCGI_PARAMS with the pairs (%d)", o.head_rc);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE, "32 KB records: done (%d)", o.rc);
    T_CHECK(o.body.len == N && memcmp(o.body.data, body, N) == 0, "32 KB records: the body");
    T_CHECK(o.r.mispredicted == 0 && o.r.copied == 0,
            "32 KB records: every record where predicted, nothing moved (%u, %zu)",
            o.r.mispredicted, o.r.copied);
    T_CHECK(o.r.reads == 3, "32 KB records: 2 reads of 200 KB and one EINTR retried (%u)",
            o.r.reads);
    done(&o);

    /* nginx's layout for the 400 KB batch: each body buffer ends short */
    len = h + stream_of(st + h, body, N, nginx, sizeof nginx / sizeof nginx[0]);
    run(&o, st, len, h + 8192, 211072, N, 4 << 20, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == N && memcmp(o.body.data, body, N) == 0,
            "nginx's layout: the body (%d, %zu)", o.rc, o.body.len);
    T_CHECK(o.r.mispredicted > 0 && o.r.copied > 0 && o.r.copied < N / 4,
            "nginx's layout: the rest of one read moved, under a quarter of the body (%zu)",
            o.r.copied);
    done(&o);

    /* records longer than predicted: 32768, 32769, 32768... (one content
     * byte past a guard would land on the next header) */
    {
        static const size_t longer[] = {32768, 32769, 32768, 32769, 65535, 32768, 32770};
        len = h + stream_of(st + h, body, 300000, longer, sizeof longer / sizeof longer[0]);
        for (size_t chunk = 65536; chunk <= 256 * 1024; chunk *= 2) {
            run(&o, st, len, h, chunk, 300000, 4 << 20, stage, 0);
            T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 300000 &&
                        memcmp(o.body.data, body, 300000) == 0,
                    "records of 32768, 32769, ... in reads of %zu: the body whole (%d, %zu)", chunk,
                    o.rc, o.body.len);
            done(&o);
        }
    }

    /* odd lengths and padding: moves, and the stage when content lands
     * in scratch ahead of body bytes not parsed yet */
    {
        static const size_t odd[] = {3, 65535, 1, 40000, 7, 32769, 20000};
        len = h + stream_of(st + h, body, 200000, odd, sizeof odd / sizeof odd[0]);
        run(&o, st, len, h, 1 << 20, SIZE_MAX, 4 << 20, stage, 0);
        T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 200000 &&
                    memcmp(o.body.data, body, 200000) == 0,
                "odd records, no CONTENT_LENGTH: the body (%d, %zu)", o.rc, o.body.len);
        done(&o);
    }
}

/* Records that are not the body's, mid-body. */
static void test_foreign(const unsigned char *body, unsigned char *st, unsigned char *stage)
{
    static const size_t exact[] = {32768};
    size_t h = head_of(st), o1;
    outcome o;
    unsigned char want[ENR_FCGI_REPLY_MAX];
    size_t wl;
    static const unsigned char ask[] = "\x0e\x00"
                                       "FCGI_MAX_CONNS\x0f\x00"
                                       "FCGI_MPXS_CONNS";

    /* FCGI_GET_VALUES: answered with enrichd's values, the body goes on */
    o1 = h + stream_of(st + h, body, 50000, exact, 1) - 8;
    o1 += record(st + o1, FCGI_GET_VALUES, 0, ask, sizeof ask - 1, 3);
    o1 += stream_of(st + o1, body + 50000, 10000, exact, 1);
    run(&o, st, o1, h + 100, 1 << 20, 60000, 4 << 20, stage, 0);
    wl = enr_fcgi_get_values_result(ask, sizeof ask - 1, 6, want);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 60000 &&
                memcmp(o.body.data, body, 60000) == 0,
            "GET_VALUES mid-body: the whole body (%d, %zu, %s)", o.rc, o.body.len,
            enr_fcgi_reject_name(o.s.reason));
    T_CHECK(o.f.out_len == wl && memcmp(o.f.out, want, wl) == 0 &&
                want[1] == FCGI_GET_VALUES_RESULT &&
                memcmp(want + 8,
                       "\x0e\x01"
                       "FCGI_MAX_CONNS6\x0f\x01"
                       "FCGI_MPXS_CONNS0",
                       35) == 0,
            "GET_VALUES mid-body: FCGI_GET_VALUES_RESULT written (%zu bytes)", o.f.out_len);
    done(&o);

    /* FCGI_ABORT_REQUEST: the run ends there */
    o1 = h + stream_of(st + h, body, 1000, exact, 1) - 8;
    record(st + o1, FCGI_ABORT_REQUEST, RID, NULL, 0, 0);
    run(&o, st, o1 + 8, h, 1 << 20, 2000, 4 << 20, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_ABORTED, "ABORT_REQUEST mid-body: aborted (%d)", o.rc);
    done(&o);

    /* other ids' records, of every length, zero included (libfcgi then
     * skipped the next record of ours), a second BEGIN_REQUEST, an
     * unknown management type */
    {
        static const unsigned char begin[8] = {0, 1};
        size_t a = 0;
        o1 = h;
        for (int k = 0; k < 4; k++) {
            o1 += record(st + o1, FCGI_STDIN, RID, body + a, 20000, 0);
            a += 20000;
            switch (k) {
            case 0:
                o1 += record(st + o1, FCGI_STDIN, 7, NULL, 0, 0);
                break;
            case 1:
                o1 += record(st + o1, FCGI_PARAMS, 2, body, 300, 5);
                o1 += record(st + o1, FCGI_BEGIN_REQUEST, 3, begin, 8, 0);
                break;
            case 2:
                o1 += record(st + o1, 11, 0, NULL, 0, 0);
                break;
            default:
                o1 += record(st + o1, FCGI_DATA, 9, NULL, 0, 255);
                break;
            }
        }
        o1 += record(st + o1, FCGI_STDIN, RID, NULL, 0, 0);
        run(&o, st, o1, h, 1 << 20, a, 4 << 20, stage, 0);
        T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == a && memcmp(o.body.data, body, a) == 0,
                "other ids' records (a zero-length one too) between ours: the whole body (%d, "
                "%zu)",
                o.rc, o.body.len);
        T_CHECK(o.f.out_len == 32 && o.f.out[1] == FCGI_END_REQUEST && o.f.out[3] == 3 &&
                    o.f.out[12] == FCGI_CANT_MPX_CONN && o.f.out[17] == FCGI_UNKNOWN_TYPE &&
                    o.f.out[24] == 11,
                "a second BEGIN_REQUEST: CANT_MPX_CONN; type 11: UNKNOWN_TYPE (%zu)", o.f.out_len);
        done(&o);
    }
}

/* The records the rules refuse, at each point of a request. */
static void test_rules(const unsigned char *body, unsigned char *st, unsigned char *stage)
{
    static const unsigned char huge[] = "\xff\xff\xff\xf0\xff\xff\xff\xf0";
    static const unsigned char begin[8] = {0, 1};
    size_t h = head_of(st), o1;
    outcome o;
    struct {
        const char *what;
        int at_start; /* the record replaces the head; else mid-body */
        int type;
        unsigned id;
        const unsigned char *c;
        size_t len;
        int reason;
    } cases[] = {
        {"GET_VALUES of 0x7ffffff0-byte lengths", 1, FCGI_GET_VALUES, 0, huge, 8,
         ENR_FCGI_REJECT_PAIRS},
        {"the same mid-body", 0, FCGI_GET_VALUES, 0, huge, 8, ENR_FCGI_REJECT_PAIRS},
        {"GET_VALUES past ENR_FCGI_MGMT_MAX", 1, FCGI_GET_VALUES, 0, body, 2000,
         ENR_FCGI_REJECT_TOO_LARGE},
        {"PARAMS before BEGIN_REQUEST", 1, FCGI_PARAMS, RID, PAIRS, 10, ENR_FCGI_REJECT_RECORD},
        {"BEGIN_REQUEST of 7 bytes", 1, FCGI_BEGIN_REQUEST, RID, begin, 7, ENR_FCGI_REJECT_RECORD},
        {"BEGIN_REQUEST of id 0", 1, FCGI_BEGIN_REQUEST, 0, begin, 8, ENR_FCGI_REJECT_RECORD},
        {"FCGI_DATA of the request mid-body", 0, FCGI_DATA, RID, body, 10, ENR_FCGI_REJECT_RECORD},
        {"FCGI_PARAMS of the request mid-body", 0, FCGI_PARAMS, RID, PAIRS, 10,
         ENR_FCGI_REJECT_RECORD},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        head_of(st);
        o1 = cases[i].at_start ? 0 : h + record(st + h, FCGI_STDIN, RID, body, 500, 4);
        o1 += record(st + o1, cases[i].type, cases[i].id, cases[i].c, cases[i].len, 0);
        o1 += record(st + o1, FCGI_STDIN, RID, NULL, 0, 0);
        run(&o, st, o1, 0, 1 << 20, SIZE_MAX, 4 << 20, stage, 0);
        T_CHECK(o.rc == ENR_FCGI_BODY_REJECT && o.s.reason == cases[i].reason,
                "%s: rejected, %s (%d, %s)", cases[i].what, enr_fcgi_reject_name(cases[i].reason),
                o.rc, enr_fcgi_reject_name(o.s.reason));
        done(&o);
    }
    /* a bad version, at the start and mid-body */
    for (int mid = 0; mid < 2; mid++) {
        head_of(st);
        o1 = mid ? h : 0;
        o1 += record(st + o1, FCGI_STDIN, RID, body, 100, 4);
        st[mid ? h : 0] = 2;
        run(&o, st, o1, 0, 1 << 20, SIZE_MAX, 4 << 20, stage, 0);
        T_CHECK(o.rc == ENR_FCGI_BODY_REJECT && o.s.reason == ENR_FCGI_REJECT_RECORD,
                "version 2 %s: rejected (%d)", mid ? "mid-body" : "first", o.rc);
        done(&o);
    }
    /* parameters: pairs that do not fit their content, a set past its bound */
    {
        static const struct {
            const char *what, *p;
            size_t n;
        } bad[] = {{"a value past the content", "\x04\x7fHOSTxx", 8},
                   {"a 4-byte length cut", "\x01\x80\x00", 3},
                   {"'=' in a name",
                    "\x03\x01"
                    "A=Bx",
                    6},
                   {"NUL in a name",
                    "\x03\x01"
                    "A\0Bx",
                    6},
                   {"NUL in a value",
                    "\x01\x03"
                    "Ax\0y",
                    6},
                   {"0x7ffffff0 lengths", "\xff\xff\xff\xf0\xff\xff\xff\xf0", 8}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            T_CHECK(enr_fcgi_pairs_check((const unsigned char *)bad[i].p, bad[i].n) < 0,
                    "pairs with %s: refused", bad[i].what);
            o1 = record(st, FCGI_BEGIN_REQUEST, RID, begin, 8, 0);
            o1 += record(st + o1, FCGI_PARAMS, RID, (const unsigned char *)bad[i].p, bad[i].n, 0);
            o1 += record(st + o1, FCGI_PARAMS, RID, NULL, 0, 0);
            run(&o, st, o1, 0, 1 << 20, SIZE_MAX, 4 << 20, stage, 0);
            T_CHECK(o.rc == ENR_FCGI_BODY_REJECT && o.s.reason == ENR_FCGI_REJECT_PAIRS,
                    "PARAMS with %s: rejected at the empty FCGI_PARAMS (%d)", bad[i].what, o.rc);
            done(&o);
        }
        T_CHECK(enr_fcgi_pairs_check(PAIRS, sizeof PAIRS - 1) == 2 &&
                    enr_fcgi_pairs_check((const unsigned char *)"\x80\x00\x00\x01\x00X", 6) == 1,
                "good pairs (a 4-byte length too): counted");
        o1 = record(st, FCGI_BEGIN_REQUEST, RID, begin, 8, 0);
        for (int k = 0; k < 3; k++)
            o1 += record(st + o1, FCGI_PARAMS, RID, body, 30000, 0);
        run(&o, st, o1, 0, 1 << 20, SIZE_MAX, 4 << 20, stage, 0);
        T_CHECK(o.rc == ENR_FCGI_BODY_REJECT && o.s.reason == ENR_FCGI_REJECT_TOO_LARGE &&
                    o.params.len <= ENR_FCGI_PARAMS_MAX,
                "90 KB of parameters: too large, never gathered past the bound (%d, %zu)", o.rc,
                o.params.len);
        done(&o);
    }
}

/* The body against a plain reading of the same records, over a
 * generator of record lengths (the predicted 32768, one more, one less,
 * 65535, small ones), paddings, foreign records and read splits. */
static void test_generated(const unsigned char *body, unsigned char *st, unsigned char *stage)
{
    static unsigned char ref[1 << 20];
    size_t h = head_of(st);
    int bad = 0, runs = 0;
    uint32_t x = 12345;

    for (int it = 0; it < 600; it++) {
        size_t o1 = h, rl = 0, max = 1 << 20;
        int nrec = 1 + (int)(next(&x) % 24);
        outcome o;

        for (int k = 0; k < nrec && rl < 700000; k++) {
            static const size_t lens[] = {32768, 32769, 32767, 65535, 1, 7, 8, 4096, 32768};
            uint32_t v = next(&x);
            size_t len = (v & 1) ? lens[v >> 1 & 7] : 1 + (v >> 4) % 65535;
            unsigned pad = (v >> 24 & 3) == 0 ? (v >> 8) & 255 : (unsigned)((8 - len % 8) % 8);

            o1 += record(st + o1, FCGI_STDIN, RID, body + rl, len, pad);
            memcpy(ref + rl, body + rl, len);
            rl += len;
            if ((v >> 28) == 0)
                o1 += record(st + o1, FCGI_STDIN, 2 + (v & 3), body, (v >> 12) % 3 * 100, 0);
            else if ((v >> 28) == 1)
                o1 += record(st + o1, FCGI_GET_VALUES, 0, NULL, 0, 0);
        }
        o1 += record(st + o1, FCGI_STDIN, RID, NULL, 0, 0);
        {
            uint32_t v = next(&x);
            size_t expect = (v & 3) == 0 ? SIZE_MAX : (v & 3) == 1 ? rl + (v >> 8) % 100 : rl;
            size_t chunk = (v >> 4 & 1) ? 1 + (v >> 8) % 300 : 4096 + (v >> 8) % (256 * 1024);
            run(&o, st, o1, h + (v >> 12) % 9000, chunk, expect, max, stage, v | 1);
        }
        runs++;
        if (o.rc != ENR_FCGI_BODY_DONE || o.body.len != rl || memcmp(o.body.data, ref, rl) != 0) {
            if (bad++ < 3)
                T_CHECK(0, "generated stream %d (%d records, %zu bytes): %d, %zu bytes", it, nrec,
                        rl, o.rc, o.body.len);
        }
        done(&o);
    }
    T_CHECK(bad == 0,
            "%d generated streams of records of every length, split every way: the "
            "body as a plain reading has it (%d differ)",
            runs, bad);
}

static void test_bounds(const unsigned char *body, unsigned char *st, unsigned char *stage)
{
    static const size_t exact[] = {32768};
    size_t h = head_of(st), len = h + stream_of(st + h, body, 100000, exact, 1);
    outcome o;

    run(&o, st, len, h, 1 << 20, SIZE_MAX, 99999, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_TOO_LARGE && o.body.len <= 99999,
            "100000 bytes, max 99999: too large (%d, %zu)", o.rc, o.body.len);
    done(&o);
    run(&o, st, len, h, 1 << 20, 100000, 100000, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_DONE && o.body.len == 100000, "exactly max: done (%d)", o.rc);
    done(&o);
    run(&o, st, len - 9, h, 1 << 20, 100000, 1 << 20, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_ERROR && o.r.err == 0 && o.body.len == 99999,
            "EOF before the end: an error, the bytes that came (%d, %zu)", o.rc, o.body.len);
    done(&o);
    run(&o, st, h + 3000, h, 1, 100000, 1 << 20, stage, 0);
    T_CHECK(o.rc == ENR_FCGI_BODY_ERROR && o.body.len == 3000 - 8 &&
                memcmp(o.body.data, body, o.body.len) == 0 && o.r.reads >= 2992,
            "1-byte reads: every byte one read, the body so far (%zu, %u reads)", o.body.len,
            o.r.reads);
    done(&o);
    T_CHECK(enr_fcgi_content_length("123") == 123 && enr_fcgi_content_length("0") == 0 &&
                enr_fcgi_content_length("-1") == SIZE_MAX &&
                enr_fcgi_content_length("") == SIZE_MAX &&
                enr_fcgi_content_length(NULL) == SIZE_MAX &&
                enr_fcgi_content_length("12a") == SIZE_MAX &&
                enr_fcgi_content_length("99999999999999999999999") == SIZE_MAX - 1,
            "CONTENT_LENGTH: digits, or unknown");
}

/* libfcgi itself reads the checked request from the pipe. */
static void test_handover(void)
{
    static const unsigned char big_name[] = "HTTP_X";
    static unsigned char params[40000];
    size_t n = 0;
    int pipe_fds[2] = {-1, -1}, rc;
    FCGX_Request req;
    const char *v;

    memcpy(params, PAIRS, sizeof PAIRS - 1);
    n = sizeof PAIRS - 1;
    /* a 30000-byte value: more than one of libfcgi's 8 KB reads */
    params[n++] = sizeof big_name - 1;
    params[n++] = 0x80;
    params[n++] = 0;
    params[n++] = 30000 >> 8;
    params[n++] = 30000 & 0xff;
    memcpy(params + n, big_name, sizeof big_name - 1);
    n += sizeof big_name - 1;
    memset(params + n, 'v', 30000);
    n += 30000;
    T_CHECK(FCGX_Init() == 0 && FCGX_InitRequest(&req, -1, 0) == 0, "libfcgi set up");
    for (int round = 0; round < 2; round++) {
        rc = enr_fcgi_libfcgi_accept(&req, pipe_fds, 99, 5, FCGI_RESPONDER, 0, params, n);
        v = rc == 0 ? FCGX_GetParam("CONTENT_LENGTH", req.envp) : NULL;
        T_CHECK(rc == 0 && req.ipcFd == 99 && req.requestId == 5 && v != NULL &&
                    strcmp(v, "123456") == 0 &&
                    strlen(FCGX_GetParam("HTTP_X", req.envp)) == 30000 &&
                    strcmp(FCGX_GetParam("REQUEST_METHOD", req.envp), "POST") == 0,
                "hand-over %d: libfcgi's parameters are the checked ones (%d, %s)", round, rc,
                v ? v : "-");
        req.ipcFd = -1;
        FCGX_Finish_r(&req);
    }
    T_CHECK(pipe_fds[0] >= 0, "the pipe is kept for the next request");
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

int main(void)
{
    enum { N = 413526 };
    static unsigned char body[1 << 20], st[(1 << 20) + 65536], stage[STAGE];

    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (unsigned char)(i * 2654435761u >> 13);
    test_layouts(body, N, st, stage);
    test_foreign(body, st, stage);
    test_rules(body, st, stage);
    test_generated(body, st, stage);
    test_bounds(body, st, stage);
    test_handover();
    T_DONE();
}
