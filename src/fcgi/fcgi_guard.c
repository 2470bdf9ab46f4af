/*
 * fcgi_guard.c: the record rules enrichd checks before libfcgi sees a
 * byte, its own answers to management records, and the hand-over of a
 * checked request to libfcgi (fcgi_guard.h).
 *
 * Invariants: a pair is let through only when both its lengths, and its
 * name and value, lie inside the content that carries it; names hold no
 * '=' and no NUL and values no NUL (libfcgi joins them as "name=value"
 * C strings: either would make FCGX_GetParam answer for another name or
 * a cut value).  libfcgi reads only what was written to its pipe in one
 * writev, the pipe never blocks, and nothing is allocated here.
 */
#include "fcgi/fcgi_guard.h"

#include <errno.h>
#include <fastcgi.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/scoreboard.h"

_Static_assert(ENR_FCGI_REJECT_REASONS == ENR_SB_FCGI_REASONS,
               "one scoreboard counter per rejection reason");

/* The FCGI_PARAMS records of the hand-over: ENR_FCGI_PARAMS_MAX in
 * 32 KB records, no padding but on the last. */
#define HANDOVER_RECORD 32768u
#define HANDOVER_RECORDS (ENR_FCGI_PARAMS_MAX / HANDOVER_RECORD + 1)

const char *enr_fcgi_reject_name(int reason)
{
    static const char *const names[ENR_FCGI_REJECT_REASONS] = {
        "timeout", "eof", "bad_record", "bad_pairs", "too_large", "unknown_role"};

    return reason >= 0 && reason < ENR_FCGI_REJECT_REASONS ? names[reason] : "unknown";
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

/* One length of a pair at p[*i]: 1 byte, or 4 with the high bit set. */
static int pair_len(const unsigned char *p, size_t n, size_t *i, size_t *len)
{
    if (*i >= n)
        return -1;
    if ((p[*i] & 0x80) == 0) {
        *len = p[(*i)++];
        return 0;
    }
    if (n - *i < 4)
        return -1;
    *len =
        (size_t)(p[*i] & 0x7f) << 24 | (size_t)p[*i + 1] << 16 | (size_t)p[*i + 2] << 8 | p[*i + 3];
    *i += 4;
    return 0;
}

/* The next pair of p[0..n) from *i: name and value, or -1. */
static int next_pair(const unsigned char *p, size_t n, size_t *i, const unsigned char **name,
                     size_t *nl, const unsigned char **value, size_t *vl)
{
    if (pair_len(p, n, i, nl) != 0 || pair_len(p, n, i, vl) != 0)
        return -1;
    if (*nl > n - *i || *vl > n - *i - *nl)
        return -1;
    *name = p + *i;
    *value = p + *i + *nl;
    *i += *nl + *vl;
    return 0;
}

long enr_fcgi_pairs_check(const unsigned char *p, size_t n)
{
    size_t i = 0;
    long count = 0;

    while (i < n) {
        const unsigned char *name, *value;
        size_t nl, vl;

        if (next_pair(p, n, &i, &name, &nl, &value, &vl) != 0)
            return -1;
        if (memchr(name, '=', nl) != NULL || memchr(name, '\0', nl) != NULL ||
            memchr(value, '\0', vl) != NULL)
            return -1;
        count++;
    }
    return count;
}

size_t enr_fcgi_get_values_result(const unsigned char *p, size_t n, unsigned max_conns,
                                  unsigned char *out)
{
    static const char *const known[] = {FCGI_MAX_CONNS, FCGI_MAX_REQS, FCGI_MPXS_CONNS};
    char conns[16];
    size_t i = 0, o = FCGI_HEADER_LEN, len;
    unsigned seen = 0, pad;
    int k = 0;

    /* max_conns in decimal, without printf: at most 10 digits */
    do {
        conns[k++] = (char)('0' + max_conns % 10);
        max_conns /= 10;
    } while (max_conns > 0);
    while (i < n) {
        const unsigned char *name, *value;
        size_t nl, vl;

        if (next_pair(p, n, &i, &name, &nl, &value, &vl) != 0)
            break; /* checked by the caller: cannot happen */
        for (unsigned q = 0; q < 3; q++) {
            size_t kl = strlen(known[q]);
            if (nl != kl || memcmp(name, known[q], kl) != 0 || (seen & 1u << q))
                continue;
            seen |= 1u << q;
            out[o++] = (unsigned char)kl;
            out[o++] = (unsigned char)(q == 2 ? 1 : k);
            memcpy(out + o, known[q], kl);
            o += kl;
            if (q == 2)
                out[o++] = '0';
            else
                for (int d = k - 1; d >= 0; d--)
                    out[o++] = (unsigned char)conns[d];
        }
    }
    len = o - FCGI_HEADER_LEN;
    pad = (unsigned)((8 - len % 8) % 8);
    memset(out + o, 0, pad);
    put_header(out, FCGI_GET_VALUES_RESULT, FCGI_NULL_REQUEST_ID, len, pad);
    return o + pad;
}

void enr_fcgi_unknown_type(unsigned char out[16], int type)
{
    memset(out, 0, 16);
    put_header(out, FCGI_UNKNOWN_TYPE, FCGI_NULL_REQUEST_ID, 8, 0);
    out[8] = (unsigned char)type;
}

void enr_fcgi_end_request(unsigned char out[16], unsigned id, uint32_t app_status, int protocol)
{
    memset(out, 0, 16);
    put_header(out, FCGI_END_REQUEST, id, 8, 0);
    out[8] = (unsigned char)(app_status >> 24);
    out[9] = (unsigned char)(app_status >> 16);
    out[10] = (unsigned char)(app_status >> 8);
    out[11] = (unsigned char)app_status;
    out[12] = (unsigned char)protocol;
}

int enr_fcgi_pipe_open(int pipe_fds[2])
{
    if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        pipe_fds[0] = pipe_fds[1] = -1;
        return -1;
    }
    /* Room for the largest hand-over (64 KB is the default already; a
     * refusal leaves it, and a write that does not fit fails). */
    (void)fcntl(pipe_fds[1], F_SETPIPE_SZ, (int)(2 * ENR_FCGI_PARAMS_MAX));
    return 0;
}

static void pipe_close(int pipe_fds[2])
{
    for (int i = 0; i < 2; i++)
        if (pipe_fds[i] >= 0)
            close(pipe_fds[i]);
    pipe_fds[0] = pipe_fds[1] = -1;
}

int enr_fcgi_libfcgi_accept(FCGX_Request *req, int pipe_fds[2], int sock, unsigned id, int role,
                            int flags, const unsigned char *params, size_t n)
{
    static const unsigned char zeros[8];
    unsigned char begin[16], hdr[HANDOVER_RECORDS + 1][FCGI_HEADER_LEN];
    struct iovec iov[3 * HANDOVER_RECORDS + 2];
    size_t total = sizeof begin, off = 0;
    ssize_t w;
    int k = 0, h = 0, rc;

    if (n > ENR_FCGI_PARAMS_MAX || (pipe_fds[0] < 0 && enr_fcgi_pipe_open(pipe_fds) != 0))
        return -1;
    memset(begin, 0, sizeof begin);
    put_header(begin, FCGI_BEGIN_REQUEST, id, 8, 0);
    begin[8] = (unsigned char)(role >> 8);
    begin[9] = (unsigned char)role;
    begin[10] = (unsigned char)flags;
    iov[k++] = (struct iovec){begin, sizeof begin};
    while (off < n) {
        size_t len = n - off < HANDOVER_RECORD ? n - off : HANDOVER_RECORD;
        unsigned pad = (unsigned)((8 - len % 8) % 8);

        put_header(hdr[h], FCGI_PARAMS, id, len, pad);
        iov[k++] = (struct iovec){hdr[h++], FCGI_HEADER_LEN};
        iov[k++] = (struct iovec){(void *)(params + off), len};
        if (pad)
            iov[k++] = (struct iovec){(void *)zeros, pad};
        total += FCGI_HEADER_LEN + len + pad;
        off += len;
    }
    put_header(hdr[h], FCGI_PARAMS, id, 0, 0);
    iov[k++] = (struct iovec){hdr[h], FCGI_HEADER_LEN};
    total += FCGI_HEADER_LEN;
    w = writev(pipe_fds[1], iov, k);
    if (w < 0 || (size_t)w != total) {
        pipe_close(pipe_fds); /* a part in it would be read by the next request */
        return -1;
    }
    /* keepConnection makes FCGX_Accept_r read ipcFd instead of calling
     * accept(); detached makes any close it does a plain close(). */
    req->ipcFd = pipe_fds[0];
    req->keepConnection = 1;
    req->detached = 1;
    rc = FCGX_Accept_r(req);
    if (rc < 0) {
        /* libfcgi closed its end (FCGX_Free) and could not accept another. */
        pipe_fds[0] = -1;
        pipe_close(pipe_fds);
        req->ipcFd = -1;
        return -1;
    }
    req->ipcFd = sock;
    /* One request per connection, closed by us (fcgi_conn.h): FCGX_Finish_r
     * must not close it, whatever the BEGIN_REQUEST flags said. */
    req->keepConnection = 1;
    /* The pipe is empty now, with no read to prove it: the empty
     * FCGI_PARAMS record ends what one writev put in it, and libfcgi's
     * accept succeeds only once it has read that record. */
    return 0;
}
