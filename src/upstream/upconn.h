/*
 * upconn.h: the connections of one worker to the upstream
 * (docs/upstream.md): the libcurl multi handle they live in, the TLS
 * settings every transfer shares, the descriptors they hold, and the
 * connections kept warm ahead of batches.
 *
 * The module owns one epoll descriptor (enr_upconn_fd) that is readable
 * whenever a transfer needs attention (a socket curl watches, or curl's
 * timer, through a timerfd in the same set), so a worker can drive its
 * transfers while it waits for a request: a call a batch could not wait
 * for, or a handshake, goes on between batches.
 *
 * Transfers are the caller's easy handles, set up by enr_upconn_easy();
 * the caller adds and removes them, and is told of each that ended
 * through the done callback given to enr_upconn_drive().  Warm-up
 * transfers are the module's own and never reach the callback.
 *
 * Invariants: every socket curl opens goes through this module (counted,
 * SOCK_CLOEXEC, per origin: the aggregator and each API); per origin, at
 * most its warm connections' worth of warm-ups run, and none while the
 * connections open reach their target; a failed wave backs off before
 * the next.  An API's warm-up writes no request over HTTP/2; over
 * HTTP/1.1 it is a HEAD of the origin's root carrying no header of ours
 * (no key, no token: docs/upstream.md).
 */
#ifndef ENR_UPCONN_H
#define ENR_UPCONN_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/upfail.h"
#include "upstream/curlapi.h"

typedef struct enr_upconn enr_upconn;

typedef void enr_upconn_done_fn(void *ud, CURL *easy, CURLcode rc);

/* NULL with the reason in err.  headers: sent on every transfer (kept by
 * the caller for the life of the object); warm_url: what a warm-up asks
 * for (upstream_url with the query every call carries, which may hold
 * the secret: copied, and wiped when freed). */
enr_upconn *enr_upconn_new(const enr_config *c, struct curl_slist *headers, const char *warm_url,
                           char *err, size_t errlen);
void enr_upconn_free(enr_upconn *p);

/* Sets the options every transfer has (sockets, TLS, bounds) on e. */
int enr_upconn_easy(enr_upconn *p, CURL *e);

/* Sets what depends on e's source (api.h's numbering): the origin its
 * sockets are counted for, and the HTTP version (an API's: HTTP/2 where
 * offered, multiplexed). */
int enr_upconn_source(enr_upconn *p, CURL *e, int src);

/* Before e's transfer starts: *began is 0 until curl is about to write
 * its request (its connection set up), then 1 (e's pre-request callback). */
int enr_upconn_track_request(CURL *e, int *began);
/* After: did the request leave (its callback ran, some of it was
 * written)?  A request that never left reached no provider. */
int enr_upconn_request_left(CURL *e, int began);

int enr_upconn_add(enr_upconn *p, CURL *e);
void enr_upconn_remove(enr_upconn *p, CURL *e);

/* Waits up to wait_ms (0: only what is ready) for transfer activity, runs
 * it, and reports each caller transfer that ended through done. */
void enr_upconn_drive(enr_upconn *p, int wait_ms, enr_upconn_done_fn *done, void *ud);

/* Starts the warm-ups the connections need now; returns how long the
 * caller may wait before calling again (-1: only when enr_upconn_fd is
 * readable). */
int enr_upconn_maintain(enr_upconn *p, uint64_t now_ms);

/* Before the first transfer of the caller's: starts the warm-ups and
 * waits up to bound_ms for the APIs' (the aggregator's are not waited
 * for: its warm-up is a request, as it always was). */
void enr_upconn_warm(enr_upconn *p, unsigned bound_ms);

/* The warm connections an API's origin keeps: none when warm_cfg
 * (upstream_warm_connections) is 0; over HTTP/2 at most 2 (the calls
 * share one); over HTTP/1.1 (h1), one a call of a batch (max_calls,
 * max_calls_per_batch) and a spare, at most max_conns
 * (upstream_max_connections). */
unsigned enr_upconn_warm_target(unsigned warm_cfg, int h1, unsigned max_calls, unsigned max_conns);

/* A transfer of source src that ended with an answer: the HTTP version
 * it came in sets how that API's connections are warmed. */
void enr_upconn_answered(enr_upconn *p, CURL *e, int src);

/* The descriptor to poll for readability between batches. */
int enr_upconn_fd(const enr_upconn *p);

/* Descriptors (connections) held now, and warm-ups made so far for the
 * source src (api.h's numbering). */
unsigned enr_upconn_fds(const enr_upconn *p);
uint64_t enr_upconn_warmups(const enr_upconn *p, int src);

/* The kind of a failed transfer (enum enr_up_fail: timeout, body, tls,
 * else connect), and, for a TLS failure, the reason in an operator's
 * words (logged at most once per UPCONN_LOG_GAP_MS per kind by
 * enr_upconn_explain). */
int enr_upconn_fail_kind(CURLcode rc);
void enr_upconn_explain(enr_upconn *p, CURL *e, CURLcode rc, const char *errbuf);

#endif
