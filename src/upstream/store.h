/*
 * store.h: one process's connection to the fleet's shared store, a Redis
 * (docs/fleet.md), through hiredis's reader and writer, with every wait
 * bounded by this module, never by the library.
 *
 * The connection is made, AUTHed and checked (PING) in the process's idle
 * time only (enr_store_idle), never on a batch's path; it is lost on any
 * error, and made again after a backoff that doubles up to
 * ENR_STORE_BACKOFF_MAX_MS.  Commands are pipelined: enr_store_send
 * queues one and returns at once (its reply, read later by whoever reads
 * next, goes to its callback), enr_store_call waits for its reply until a
 * deadline and abandons it after (the reply is read and dropped when it
 * comes: the connection stays in step).  A batch asks only a store that
 * answers well inside its timeout (enr_store_usable: its round trip,
 * measured on every reply waited for and by an idle PING each
 * ENR_STORE_PROBE_MS, under half of shared_store_timeout_ms, and no
 * timeout in the last ENR_STORE_SLOW_MS): a far, slow or stopped store
 * costs a batch nothing.
 *
 * Invariants: no call blocks (the socket is non-blocking, every poll has
 * the caller's deadline or 0); the bytes a connection may receive are
 * bounded by what its commands asked for (each command's cap: a larger
 * reply loses the connection, unread); replies go to commands in order,
 * each exactly once (a lost connection gives NULL to every command
 * waiting); the password goes to AUTH and nowhere else (no log, no key).
 */
#ifndef ENR_STORE_H
#define ENR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/storestats.h"

#define ENR_STORE_CONNECT_MS 2000      /* making a connection, in idle time */
#define ENR_STORE_BACKOFF_MIN_MS 100   /* the first retry's delay */
#define ENR_STORE_BACKOFF_MAX_MS 10000 /* ... doubling up to this */
#define ENR_STORE_PENDING_MAX 4096     /* commands awaiting their replies */
#define ENR_STORE_OBUF_MAX (1u << 20)  /* bytes written and not yet taken by the kernel */
#define ENR_STORE_PROBE_MS 1000        /* an idle PING, for the round trip */
#define ENR_STORE_RTT_SAMPLES 8        /* the round trip is the least of these */
#define ENR_STORE_SLOW_MS 2000         /* after a timeout, batches do not ask for this long */
#define ENR_STORE_REPLY_SMALL 4096     /* the cap of a reply with no value in it */
#define ENR_STORE_ARRAY_MAX 4096       /* elements in one array of a reply (an MGET's ids) */
#define ENR_STORE_WIRE_PER_ELEMENT 3   /* the fewest bytes an element takes ("+\r\n") */

struct redisReply;
struct redisReader;
typedef struct enr_store enr_store;

/* What a connection may receive since its queue was last empty: the
 * bytes its commands asked for (allowed), those fed to the reader, and
 * the array elements the replies declared.  An array header of a few
 * bytes ("*2000000000\r\n") makes hiredis 0.14 allocate a pointer per
 * element at once, so elements are bounded by the bytes too: each takes
 * ENR_STORE_WIRE_PER_ELEMENT bytes at least, and no array has more than
 * ENR_STORE_ARRAY_MAX. */
typedef struct enr_store_bound {
    size_t allowed, fed, declared;
} enr_store_bound;

/* A command's reply: r NULL when the connection was lost first (or the
 * reply was refused); r is freed after the call. */
typedef void enr_store_reply_fn(void *ud, const struct redisReply *r, uint64_t arg);

/* The pure parts, for the unit tests. */
/* The delay before retry number failures (1, 2, ...): doubling from
 * ENR_STORE_BACKOFF_MIN_MS up to ENR_STORE_BACKOFF_MAX_MS, then cut by
 * up to a half by rnd (any value), so hosts that lost one store do not
 * come back in step. */
unsigned enr_store_backoff_ms(unsigned failures, uint32_t rnd);
/* 1 when a store of this round trip (µs; 0: none measured yet) can
 * answer well inside timeout_ms: under half of it. */
int enr_store_worth_asking(uint64_t rtt_us, unsigned timeout_ms);

/* Binds hiredis's reader r to b: an array over b's bound is refused
 * (the reader fails with an out-of-memory error, the connection is lost)
 * before hiredis allocates it.  b outlives r's use. */
void enr_store_reader_bound(struct redisReader *r, enr_store_bound *b);
/* n more bytes received: 0, or -1 when they pass what was asked for. */
int enr_store_bound_feed(enr_store_bound *b, size_t n);

/* NULL with err empty when c has no shared_store; NULL with err set when
 * it cannot be (no memory).  Connects later, in enr_store_idle. */
enr_store *enr_store_new(const enr_config *c, char *err, size_t errlen);
void enr_store_free(enr_store *s);

/* Idle time: makes the connection (after its backoff), writes what is
 * queued, reads what came, sends the PING probe.  Returns how soon it
 * wants to be called again (ms), -1 when it waits for nothing. */
int enr_store_idle(enr_store *s, uint64_t now_ms);

/* Connected and logged in. */
int enr_store_ready(const enr_store *s);
/* Ready, fast enough and not backing off: a batch may ask. */
int enr_store_usable(const enr_store *s, uint64_t now_ms);

/* Queues a command (argv[0..argc), binary-safe) whose reply may take up
 * to cap bytes on the wire; fn gets it (fn NULL: checked, then dropped).
 * 0, or -1 when not ready or the queue is full (counted as skipped). */
int enr_store_send(enr_store *s, int argc, const char **argv, const size_t *lens, size_t cap,
                   enr_store_reply_fn *fn, void *ud, uint64_t arg);
/* Writes what the kernel takes now; never waits. */
void enr_store_flush(enr_store *s);
/* Sends a command and waits for its reply until deadline_ms (monotonic):
 * the reply (free it with enr_store_reply_free) or NULL (not ready, lost,
 * or the deadline: counted, and the reply dropped when it comes). */
struct redisReply *enr_store_call(enr_store *s, int argc, const char **argv, const size_t *lens,
                                  size_t cap, uint64_t deadline_ms);
void enr_store_reply_free(struct redisReply *r);

const char *enr_store_prefix(const enr_store *s);
unsigned enr_store_timeout_ms(const enr_store *s);
enr_store_stats *enr_store_stats_of(enr_store *s);

#endif
