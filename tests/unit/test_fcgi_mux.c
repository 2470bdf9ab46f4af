/*
 * test_fcgi_mux.c: when the status process's multiplexer takes a
 * connection's request as whole (enr_fcgi_mux_whole, src/fcgi/fcgi_mux.c):
 * at its empty FCGI_STDIN (RESPONDER) or its empty FCGI_PARAMS (another
 * role), never at another request's records, at once for a stream of
 * another FastCGI version, and the same verdict at the same byte however
 * the stream is cut into reads.
 */
#include <fastcgi.h>
#include <stdint.h>
#include <string.h>

#include "fcgi/fcgi_mux.h"
#include "t.h"

typedef struct stream {
    unsigned char b[4096];
    size_t n;
} stream;

static void rec(stream *s, unsigned type, unsigned id, const void *content, size_t clen,
                unsigned pad)
{
    unsigned char h[8] = {FCGI_VERSION_1,
                          (unsigned char)type,
                          (unsigned char)(id >> 8),
                          (unsigned char)id,
                          (unsigned char)(clen >> 8),
                          (unsigned char)clen,
                          (unsigned char)pad,
                          0};
    memcpy(s->b + s->n, h, 8);
    memcpy(s->b + s->n + 8, content, clen);
    memset(s->b + s->n + 8 + clen, 0, pad);
    s->n += 8 + clen + pad;
}

static void begin(stream *s, unsigned id, unsigned role)
{
    unsigned char c[8] = {(unsigned char)(role >> 8), (unsigned char)role, 0, 0, 0, 0, 0, 0};
    rec(s, FCGI_BEGIN_REQUEST, id, c, sizeof c, 0);
}

/* The length of the shortest prefix taken as whole, fed whole; 0: never. */
static size_t whole_at(const stream *s)
{
    for (size_t n = 0; n <= s->n; n++) {
        enr_fcgi_mux_peer p;
        memset(&p, 0, sizeof p);
        if (enr_fcgi_mux_whole(&p, s->b, n))
            return n;
    }
    return 0;
}

/* The same, fed one more byte at a time to one peer (the scan resumes). */
static size_t whole_at_drip(const stream *s)
{
    enr_fcgi_mux_peer p;

    memset(&p, 0, sizeof p);
    for (size_t n = 0; n <= s->n; n++)
        if (enr_fcgi_mux_whole(&p, s->b, n))
            return n;
    return 0;
}

static void test_responder(void)
{
    stream s = {0};
    size_t end;

    begin(&s, 1, FCGI_RESPONDER);
    rec(&s, FCGI_PARAMS, 1, "\x04\x03PATH/hz", 9, 7);
    rec(&s, FCGI_PARAMS, 1, "", 0, 0);
    T_CHECK(whole_at(&s) == 0, "parameters alone are not whole for a RESPONDER");
    rec(&s, FCGI_STDIN, 1, "ab", 2, 6);
    T_CHECK(whole_at(&s) == 0, "a body record is not the end");
    rec(&s, FCGI_STDIN, 1, "", 0, 3);
    end = s.n;
    T_CHECK(whole_at(&s) == end,
            "whole at the end of its empty FCGI_STDIN, padding included "
            "(%zu, want %zu)",
            whole_at(&s), end);
    T_CHECK(whole_at_drip(&s) == end, "the same a byte at a time (%zu)", whole_at_drip(&s));
}

static void test_other_request(void)
{
    stream s = {0};

    begin(&s, 1, FCGI_RESPONDER);
    rec(&s, FCGI_PARAMS, 1, "", 0, 0);
    rec(&s, FCGI_STDIN, 2, "", 0, 0);      /* another request's */
    rec(&s, FCGI_GET_VALUES, 0, "", 0, 0); /* a management record */
    T_CHECK(whole_at(&s) == 0, "another request's empty FCGI_STDIN is not ours");
    rec(&s, FCGI_STDIN, 1, "", 0, 0);
    T_CHECK(whole_at(&s) == s.n && whole_at_drip(&s) == s.n, "ours is");

    s.n = 0;
    rec(&s, FCGI_STDIN, 1, "", 0, 0); /* before any BEGIN_REQUEST */
    T_CHECK(whole_at(&s) == 0, "an empty FCGI_STDIN before BEGIN_REQUEST is not whole");
}

static void test_other_roles(void)
{
    for (unsigned role = FCGI_AUTHORIZER; role <= FCGI_FILTER; role++) {
        stream s = {0};
        begin(&s, 3, role);
        rec(&s, FCGI_PARAMS, 3,
            "\x01\x01"
            "ab",
            4, 4);
        rec(&s, FCGI_PARAMS, 3, "", 0, 0);
        T_CHECK(whole_at(&s) == s.n, "role %u: whole at its empty FCGI_PARAMS", role);
    }
}

static void test_other_version(void)
{
    stream s = {0};

    begin(&s, 1, FCGI_RESPONDER);
    s.b[s.n] = 2; /* a record of version 2: the policy refuses it at once */
    memset(s.b + s.n + 1, 0, 7);
    s.n += 8;
    T_CHECK(whole_at(&s) == s.n, "handed over at the foreign record's header (%zu)", whole_at(&s));
}

int main(void)
{
    test_responder();
    test_other_request();
    test_other_roles();
    test_other_version();
    T_DONE();
}
