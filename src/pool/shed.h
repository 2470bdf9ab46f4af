/*
 * shed.h: how long a request waited for a worker, and whether it waited
 * too long to be worth serving (queue_timeout_ms).
 *
 * A prefork pool cannot refuse what it has not accepted: past capacity,
 * connections wait in the listen queue, and a worker that takes one
 * after seconds spends its time on an answer the caller may no longer
 * want, while everything behind waits longer still.  nginx passes the
 * time it handed the request over (ENRICHD_QUEUED_AT, its $msec: seconds
 * since the epoch with milliseconds); a worker compares it with its own
 * clock when it takes the request, and answers one that waited past
 * queue_timeout_ms at once, before its body is read, with 503 and
 * Retry-After.  The wait is also what the caller lived before any work
 * began, so it is added to the latency health judges.
 *
 * On a TCP listener the kernel knows this host's own wait better: the
 * front sends the whole request right after it connects, so the time
 * since the connection last received data (TCP_INFO) is how long the
 * request sat in this host's listen queue.  It is preferred to the
 * parameter there: a front that retries another host after a 503 sends
 * the same parameters again (nginx evaluates them once), and the second
 * host must judge its own queue, not the first host's.  It also covers a
 * front that passes no parameter.
 */
#ifndef ENR_SHED_H
#define ENR_SHED_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/* The FastCGI parameter nginx sets (nginx/snippets/enrichd-fastcgi.conf). */
#define ENR_SHED_PARAM "ENRICHD_QUEUED_AT"

/* A wait longer than this is no wait but two clocks that disagree (the
 * front's and this host's, or a step of either): it is taken as unknown,
 * so a bad clock neither sheds every request nor inflates the latency. */
#define ENR_SHED_WAIT_SANE_MS 600000u

/* Parses nginx's $msec ("1700000000.123", the fraction optional, at
 * most 3 digits) into milliseconds.  Returns 0, or -1 for anything else
 * (empty, signs, spaces, too long, out of range). */
int enr_shed_parse_msec(const char *text, uint64_t *ms);

/* The wait of a request whose ENR_SHED_PARAM is text (NULL: absent)
 * taken at now_wall_ms (CLOCK_REALTIME): 0 when unknown, a clock
 * behind nginx's, or past ENR_SHED_WAIT_SANE_MS; *known (unless known
 * is NULL) says which. */
uint64_t enr_shed_wait_ms(const char *text, uint64_t now_wall_ms, int *known);

/* The request's wait in this host's listen queue as the kernel saw it:
 * the time since the TCP connection fd last received data.  Returns 0,
 * or -1 when fd is not TCP (a unix socket: only the parameter says). */
int enr_shed_tcp_wait_ms(int fd, uint64_t *ms);

/* The request waited too long: queue_timeout_ms is on and wait_ms is past it. */
int enr_shed_due(const enr_config *c, uint64_t wait_ms);

/* The Retry-After the shed answer gives, in whole seconds: the queue's
 * bound rounded up, at least 1, so a client that honours it comes back
 * when what made it wait has had time to drain. */
unsigned enr_shed_retry_after_s(const enr_config *c);

#endif
