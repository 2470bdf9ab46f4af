/*
 * reply_id.h: one id a call asks for and what the answer gave it, and the
 * bounds every reader of an answer holds its posters and durations to
 * (docs/upstream.md).  Types only: the aggregator protocol's reader
 * (upstream_reply.h), the scanner every reader shares (reply_scan.h) and
 * the providers' APIs (api.h) all speak of them.
 */
#ifndef ENR_REPLY_ID_H
#define ENR_REPLY_ID_H

#include <stddef.h>
#include <stdint.h>

#define ENR_REPLY_POSTER_MAX 2048    /* docs/upstream.md: bytes of a poster URL */
#define ENR_REPLY_DURATION_LIMIT 1e7 /* docs/upstream.md: 0 <= duration < 10^7 */
#define ENR_REPLY_MAX_DEPTH 32       /* nested objects/arrays, the root counting as 1 */

enum enr_reply_state {
    ENR_REPLY_ABSENT = 0, /* no item with this id: the upstream does not know it */
    ENR_REPLY_EMPTY,      /* an item, but neither field was usable */
    ENR_REPLY_FOUND       /* an item with a usable poster and/or duration */
};

typedef struct enr_reply_id {
    /* in: one requested id (original case, not NUL-terminated) */
    const char *id;
    size_t id_len;
    /* out */
    uint8_t state; /* enum enr_reply_state */
    uint8_t has_poster, has_duration;
    uint8_t live; /* a live or upcoming broadcast: its answer changes when it ends */
    size_t poster_off, poster_len; /* into the arena, when has_poster */
    double duration;               /* when has_duration; never -0 */
} enr_reply_id;

#endif
