/*
 * answer.h: the one check every answer for an id passes before it is
 * served, whatever it comes from: a provider's reply (every reader's,
 * once the reply is read: reply_scan.c), the host's cache read back from
 * its file (upstale.c, at every lookup), or a store shared by hosts.
 * What is read back is held to what first arrived: a record written into
 * the state directory by someone else is dropped and counted
 * (cache_dropped), never served (docs/limits.md).
 *
 * Defined in reply_scan.c beside the field checks it is made of
 * (enr_reply_poster_ok, enr_reply_duration_ok), so the rules have one
 * home.
 */
#ifndef ENR_ANSWER_H
#define ENR_ANSWER_H

#include "upstream/cache.h"

/* NULL when v may be served; else why not (a short phrase for a log).
 * A poster: an absolute https:// URL with a host, at most
 * ENR_REPLY_POSTER_MAX bytes, strict UTF-8, no control character nor
 * white space.  A duration: finite, 0 <= d < ENR_REPLY_DURATION_LIMIT,
 * never -0.  A negative answer ("unknown id") carries neither. */
const char *enr_answer_check(const enr_cache_val *v);

#endif
