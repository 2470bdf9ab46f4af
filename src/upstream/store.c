/*
 * store.c: the connection to the fleet's shared store (store.h).
 *
 * hiredis does the protocol: a non-blocking context (redisConnectNonBlock,
 * redisConnectUnixNonBlock) for the socket and its output buffer
 * (redisAppendCommandArgv, redisBufferWrite), and its reader for the
 * replies (redisReaderFeed, redisGetReplyFromReader).  The reading is
 * this file's own, so that it can bound the bytes a connection may
 * receive by what its commands asked for: hiredis 0.14 has no bound of
 * its own on a reply (its maxbuf only frees an idle buffer).
 *
 * The states: DOWN (retry_at set by the backoff), CONNECTING (the
 * kernel's connect in progress, at most ENR_STORE_CONNECT_MS), HELLO
 * (AUTH, SELECT and a PING sent, their replies awaited), READY.  A
 * connection is lost on any error: a write or read failing, the peer
 * closing, a reply refused by the reader or over its cap, AUTH or
 * SELECT refused; every command waiting gets NULL, once.
 */
#include "upstream/store.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/storeaddr.h"

#define READ_CHUNK 16384

enum { S_DOWN = 0, S_CONNECTING, S_HELLO, S_READY };

typedef struct pending {
    enr_store_reply_fn *fn;
    void *ud;
    uint64_t arg;
    uint64_t sent_ms;
    int awaited; /* enr_store_call's: the reply is handed over, not dispatched */
} pending;

struct enr_store {
    enr_store_addr addr;
    char user[ENR_SECRET_CRED_NAME_MAX];
    char *password; /* NULL: no AUTH; wiped on free */
    size_t password_len;
    char prefix[ENR_STORE_PREFIX_MAX + 1];
    unsigned timeout_ms;

    redisContext *ctx;
    int state;
    uint64_t state_ms, retry_at, slow_until, last_probe;
    unsigned failures;
    int probing; /* a PING probe is waiting */
    pending q[ENR_STORE_PENDING_MAX];
    unsigned qhead, qlen;
    enr_store_bound bound; /* since the queue was last empty; the reader's privdata */
    redisReply *handed;    /* the awaited reply, once read */
    uint64_t rtt[ENR_STORE_RTT_SAMPLES];
    unsigned nrtt;
    enr_store_stats st;
};

/* ---- the pure parts ---- */

unsigned enr_store_backoff_ms(unsigned failures, uint32_t rnd)
{
    unsigned ms = ENR_STORE_BACKOFF_MIN_MS;

    for (unsigned i = 1; i < failures && ms < ENR_STORE_BACKOFF_MAX_MS; i++)
        ms *= 2;
    if (ms > ENR_STORE_BACKOFF_MAX_MS)
        ms = ENR_STORE_BACKOFF_MAX_MS;
    return ms - (unsigned)((uint64_t)(ms / 2) * (rnd % 1024) / 1024);
}

int enr_store_worth_asking(uint64_t rtt_us, unsigned timeout_ms)
{
    return rtt_us > 0 && rtt_us * 2 < (uint64_t)timeout_ms * 1000;
}

/* ---- the reader's bound ---- */

static void *(*library_array)(const redisReadTask *, int);

static void *bounded_array(const redisReadTask *t, int elements)
{
    enr_store_bound *b = t->privdata;
    size_t room = b->allowed / ENR_STORE_WIRE_PER_ELEMENT;

    if (elements < 0 || elements > ENR_STORE_ARRAY_MAX || b->declared > room ||
        (size_t)elements > room - b->declared)
        return NULL;
    b->declared += (size_t)elements;
    return library_array(t, elements);
}

void enr_store_reader_bound(redisReader *r, enr_store_bound *b)
{
    /* The library's own functions but one: its replies stay its own
     * (freeReplyObject frees them). */
    static redisReplyObjectFunctions fns;

    if (library_array == NULL) {
        fns = *r->fn;
        library_array = fns.createArray;
        fns.createArray = bounded_array;
    }
    r->fn = &fns;
    r->privdata = b;
}

int enr_store_bound_feed(enr_store_bound *b, size_t n)
{
    b->fed += n;
    return b->fed > b->allowed ? -1 : 0;
}

/* ---- the connection ---- */

static uint32_t rnd32(void)
{
    uint32_t r;

    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)enr_mono_us();
    return r;
}

static void rtt_note(enr_store *s, uint64_t us)
{
    uint64_t least = us ? us : 1;

    s->rtt[s->nrtt++ % ENR_STORE_RTT_SAMPLES] = least;
    for (unsigned i = 0; i < ENR_STORE_RTT_SAMPLES && i < s->nrtt; i++)
        if (s->rtt[i] < least)
            least = s->rtt[i];
    s->st.rtt_us = least;
}

static void lose(enr_store *s, const char *why, uint64_t now)
{
    char q[200];
    pending *p;

    if (s->state == S_READY)
        enr_log(ENR_LOG_WARN, "shared store lost: each host on its own until it is back", "why=%s",
                enr_log_quote(q, sizeof q, why));
    else
        enr_log(ENR_LOG_DEBUG, "shared store connection failed", "why=%s",
                enr_log_quote(q, sizeof q, why));
    s->st.errors++;
    s->st.up = 0;
    if (s->ctx != NULL)
        redisFree(s->ctx);
    s->ctx = NULL;
    s->state = S_DOWN;
    s->failures++;
    s->retry_at = now + enr_store_backoff_ms(s->failures, rnd32());
    s->probing = 0;
    s->nrtt = 0;
    s->st.rtt_us = 0;
    /* Every command waiting hears of it, once, in order. */
    while (s->qlen > 0) {
        p = &s->q[s->qhead];
        s->qhead = (s->qhead + 1) % ENR_STORE_PENDING_MAX;
        s->qlen--;
        if (p->fn != NULL && !p->awaited)
            p->fn(p->ud, NULL, p->arg);
    }
    s->bound = (enr_store_bound){0};
}

/* Queue one command, its reply's bound counted in. */
static int append(enr_store *s, int argc, const char **argv, const size_t *lens, size_t cap,
                  enr_store_reply_fn *fn, void *ud, uint64_t arg, int awaited)
{
    pending *p;

    if (s->qlen >= ENR_STORE_PENDING_MAX || s->ctx == NULL ||
        sdslen(s->ctx->obuf) > ENR_STORE_OBUF_MAX)
        return -1;
    if (redisAppendCommandArgv(s->ctx, argc, argv, lens) != REDIS_OK)
        return -1;
    p = &s->q[(s->qhead + s->qlen++) % ENR_STORE_PENDING_MAX];
    p->fn = fn;
    p->ud = ud;
    p->arg = arg;
    p->sent_ms = enr_mono_us();
    p->awaited = awaited;
    s->bound.allowed += cap;
    return 0;
}

static void hello_reply(void *ud, const redisReply *r, uint64_t arg)
{
    enr_store *s = ud;
    uint64_t now = enr_mono_ms();

    if (r == NULL)
        return; /* lost already */
    if (arg == 0 && (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)) {
        /* Redis's words only: they never quote the password. */
        char q[200];
        enr_log(ENR_LOG_ERROR, "shared store refused the login or the database", "reply=%s",
                enr_log_quote(q, sizeof q, r->type == REDIS_REPLY_ERROR ? r->str : "?"));
        lose(s, "AUTH or SELECT refused", now);
        return;
    }
    if (arg == 1) {
        if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0) {
            lose(s, "PING not answered PONG", now);
            return;
        }
        enr_log(ENR_LOG_INFO, "shared store connected", "after_failures=%u", s->failures);
        s->state = S_READY;
        s->state_ms = now;
        s->failures = 0;
        s->st.connects++;
        s->st.up = 1;
    }
}

static void hello(enr_store *s, uint64_t now)
{
    char db[8];
    const char *argv[3];
    size_t lens[3];

    s->state = S_HELLO;
    s->state_ms = now;
    if (s->password != NULL) {
        argv[0] = "AUTH";
        argv[1] = s->user;
        argv[2] = s->password;
        lens[0] = 4;
        lens[1] = strlen(s->user);
        lens[2] = s->password_len;
        if (append(s, 3, argv, lens, ENR_STORE_REPLY_SMALL, hello_reply, s, 0, 0) != 0)
            goto fail;
    }
    if (s->addr.db != 0) {
        snprintf(db, sizeof db, "%d", s->addr.db);
        argv[0] = "SELECT";
        argv[1] = db;
        lens[0] = 6;
        lens[1] = strlen(db);
        if (append(s, 2, argv, lens, ENR_STORE_REPLY_SMALL, hello_reply, s, 0, 0) != 0)
            goto fail;
    }
    argv[0] = "PING";
    lens[0] = 4;
    if (append(s, 1, argv, lens, ENR_STORE_REPLY_SMALL, hello_reply, s, 1, 0) != 0)
        goto fail;
    return;
fail:
    lose(s, "cannot queue the login", now);
}

static void connect_start(enr_store *s, uint64_t now)
{
    const char *why = NULL;

    s->ctx = s->addr.is_unix ? redisConnectUnixNonBlock(s->addr.path)
                             : redisConnectNonBlock(s->addr.host, s->addr.port);
    if (s->ctx == NULL)
        why = "no memory";
    else if (s->ctx->err)
        why = s->ctx->errstr;
    if (why != NULL) {
        lose(s, why, now);
        return;
    }
    enr_store_reader_bound(s->ctx->reader, &s->bound);
    s->state = S_CONNECTING;
    s->state_ms = now;
    s->bound = (enr_store_bound){0};
}

static void connect_check(enr_store *s, uint64_t now)
{
    struct pollfd p = {.fd = s->ctx->fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;

    if (poll(&p, 1, 0) == 1) {
        if (getsockopt(s->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            lose(s, strerror(err ? err : errno), now);
            return;
        }
        hello(s, now);
        return;
    }
    if (now - s->state_ms > ENR_STORE_CONNECT_MS)
        lose(s, "connect timed out", now);
}

/* ---- replies ---- */

/* The reply at the queue's head, dispatched (or handed over). */
static void dispatch(enr_store *s, redisReply *r)
{
    pending p = s->q[s->qhead];

    s->qhead = (s->qhead + 1) % ENR_STORE_PENDING_MAX;
    s->qlen--;
    if (s->qlen == 0)
        s->bound = (enr_store_bound){0};
    if (p.fn == hello_reply || p.awaited)
        rtt_note(s, enr_mono_us() - p.sent_ms);
    if (r->type == REDIS_REPLY_ERROR)
        s->st.errors++;
    if (p.awaited) {
        s->handed = r;
        return;
    }
    if (p.fn != NULL)
        p.fn(p.ud, r, p.arg);
    freeReplyObject(r);
}

/* Writes what it can, reads what came; 0, or -1 when the connection was
 * lost. */
static int pump(enr_store *s, uint64_t now)
{
    char buf[READ_CHUNK];
    int done = 0;
    void *r;

    if (s->ctx == NULL || s->state < S_HELLO)
        return -1;
    if (sdslen(s->ctx->obuf) > 0 && redisBufferWrite(s->ctx, &done) != REDIS_OK) {
        lose(s, s->ctx->errstr, now);
        return -1;
    }
    for (;;) {
        ssize_t n = read(s->ctx->fd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0) {
            lose(s, n == 0 ? "closed by the store" : strerror(errno), now);
            return -1;
        }
        if (s->qlen == 0 || enr_store_bound_feed(&s->bound, (size_t)n) != 0) {
            lose(s, "more bytes than the commands asked for", now);
            return -1;
        }
        if (redisReaderFeed(s->ctx->reader, buf, (size_t)n) != REDIS_OK) {
            lose(s, "reader refused the reply", now);
            return -1;
        }
        for (;;) {
            r = NULL;
            if (redisGetReplyFromReader(s->ctx, &r) != REDIS_OK) {
                lose(s, "malformed reply", now);
                return -1;
            }
            if (r == NULL)
                break;
            if (s->qlen == 0) {
                freeReplyObject(r);
                lose(s, "a reply no command asked for", now);
                return -1;
            }
            dispatch(s, r);
            if (s->ctx == NULL)
                return -1; /* a callback lost it */
        }
        if ((size_t)n < sizeof buf)
            break;
    }
    return 0;
}

/* ---- the interface ---- */

static void probe_reply(void *ud, const redisReply *r, uint64_t arg)
{
    enr_store *s = ud;

    s->probing = 0;
    if (r != NULL)
        rtt_note(s, enr_mono_us() - arg);
}

int enr_store_idle(enr_store *s, uint64_t now)
{
    if (s == NULL)
        return -1;
    switch (s->state) {
    case S_DOWN:
        if (now < s->retry_at)
            return (int)(s->retry_at - now);
        connect_start(s, now);
        /* Failed at once (refused, no socket): the next try's delay. */
        return s->state == S_CONNECTING ? 2 : (int)(s->retry_at - now);
    case S_CONNECTING:
        connect_check(s, now);
        if (s->state == S_CONNECTING)
            return 2;
        if (s->state == S_DOWN)
            return (int)(s->retry_at - now);
        break;
    default:
        break;
    }
    if (s->state == S_HELLO && now - s->state_ms > ENR_STORE_CONNECT_MS)
        lose(s, "login not answered", now);
    if (s->state == S_DOWN || pump(s, now) != 0)
        return (int)(s->retry_at - now); /* lost: the next try's delay */
    if (s->state == S_READY && !s->probing && now - s->last_probe >= ENR_STORE_PROBE_MS) {
        const char *argv[1] = {"PING"};
        size_t lens[1] = {4};
        if (append(s, 1, argv, lens, ENR_STORE_REPLY_SMALL, probe_reply, s, enr_mono_us(), 0) ==
            0) {
            s->probing = 1;
            s->last_probe = now;
            (void)pump(s, now);
        }
    }
    /* Replies awaited are read on the next pass: soon, not in a spin. */
    return s->ctx != NULL && s->qlen > 0 ? 2 : ENR_STORE_PROBE_MS;
}

int enr_store_ready(const enr_store *s)
{
    return s != NULL && s->state == S_READY;
}

int enr_store_usable(const enr_store *s, uint64_t now)
{
    /* The oldest reply still awaited says how the store is now: one
     * older than half the timeout (a store stopped, or far behind its
     * writes) would keep a batch's MGET waiting behind it. */
    uint64_t oldest_us = s != NULL && s->qlen > 0 ? enr_mono_us() - s->q[s->qhead].sent_ms : 0;

    return enr_store_ready(s) && now >= s->slow_until &&
           enr_store_worth_asking(s->st.rtt_us, s->timeout_ms) &&
           enr_store_worth_asking(oldest_us + 1, s->timeout_ms) &&
           s->qlen < ENR_STORE_PENDING_MAX / 2;
}

int enr_store_send(enr_store *s, int argc, const char **argv, const size_t *lens, size_t cap,
                   enr_store_reply_fn *fn, void *ud, uint64_t arg)
{
    if (!enr_store_ready(s) || append(s, argc, argv, lens, cap, fn, ud, arg, 0) != 0) {
        if (s != NULL)
            s->st.skipped++;
        return -1;
    }
    return 0;
}

void enr_store_flush(enr_store *s)
{
    int done = 0;

    if (s != NULL && s->ctx != NULL && s->state >= S_HELLO && sdslen(s->ctx->obuf) > 0 &&
        redisBufferWrite(s->ctx, &done) != REDIS_OK)
        lose(s, s->ctx->errstr, enr_mono_ms());
}

redisReply *enr_store_call(enr_store *s, int argc, const char **argv, const size_t *lens,
                           size_t cap, uint64_t deadline_ms)
{
    unsigned slot;
    uint64_t now = enr_mono_ms();

    if (!enr_store_ready(s) || append(s, argc, argv, lens, cap, NULL, NULL, 0, 1) != 0)
        return NULL;
    slot = (s->qhead + s->qlen - 1) % ENR_STORE_PENDING_MAX;
    s->handed = NULL;
    while (pump(s, now) == 0 && s->handed == NULL) {
        struct pollfd p = {.fd = s->ctx->fd, .events = POLLIN};
        if (sdslen(s->ctx->obuf) > 0)
            p.events |= POLLOUT;
        now = enr_mono_ms();
        if (now >= deadline_ms) {
            /* Abandoned: its reply is read and dropped when it comes. */
            s->q[slot].awaited = 0;
            s->q[slot].fn = NULL;
            s->st.timeouts++;
            s->slow_until = now + ENR_STORE_SLOW_MS;
            return NULL;
        }
        if (poll(&p, 1, (int)(deadline_ms - now)) < 0 && errno != EINTR) {
            lose(s, strerror(errno), now);
            return NULL;
        }
        now = enr_mono_ms();
    }
    return s->handed;
}

void enr_store_reply_free(redisReply *r)
{
    if (r != NULL)
        freeReplyObject(r);
}

enr_store *enr_store_new(const enr_config *c, char *err, size_t errlen)
{
    enr_store *s;
    char why[200];

    if (errlen)
        err[0] = '\0';
    if (c->shared_store[0] == '\0')
        return NULL;
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "shared store: no memory");
        return NULL;
    }
    if (enr_store_addr_parse(c->shared_store, &s->addr, why, sizeof why) != 0) {
        snprintf(err, errlen, "shared_store: %s", why);
        free(s);
        return NULL;
    }
    snprintf(s->user, sizeof s->user, "%s", c->shared_store_user);
    snprintf(s->prefix, sizeof s->prefix, "%s", c->shared_store_prefix);
    s->timeout_ms = c->shared_store_timeout_ms;
    if (c->shared_store_password.len > 0) {
        s->password = malloc(c->shared_store_password.len);
        if (s->password == NULL) {
            snprintf(err, errlen, "shared store: no memory");
            free(s);
            return NULL;
        }
        memcpy(s->password, c->shared_store_password.bytes, c->shared_store_password.len);
        s->password_len = c->shared_store_password.len;
    }
    return s;
}

void enr_store_free(enr_store *s)
{
    if (s == NULL)
        return;
    if (s->ctx != NULL)
        redisFree(s->ctx);
    if (s->password != NULL) {
        enr_secret_wipe(s->password, s->password_len);
        free(s->password);
    }
    free(s);
}

const char *enr_store_prefix(const enr_store *s)
{
    return s->prefix;
}

unsigned enr_store_timeout_ms(const enr_store *s)
{
    return s->timeout_ms;
}

enr_store_stats *enr_store_stats_of(enr_store *s)
{
    return &s->st;
}
