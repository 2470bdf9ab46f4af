/*
 * upstream_reply.h: the pure part of the upstream client: the bytes of
 * one 200 reply plus the ids that call asked for, to the poster and
 * duration each id gets (UPSTREAM.md "Response").  No I/O, no libcurl,
 * so a fuzzer and unit tests can drive it directly.
 */
#ifndef ENR_UPSTREAM_REPLY_H
#define ENR_UPSTREAM_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define ENR_REPLY_POSTER_MAX 2048    /* UPSTREAM.md: bytes of a poster URL */
#define ENR_REPLY_DURATION_LIMIT 1e7 /* UPSTREAM.md: 0 <= duration < 10^7 */

struct json_tokener;

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
    size_t poster_off, poster_len; /* into the arena, when has_poster */
    double duration;               /* when has_duration; never -0 */
} enr_reply_id;

/* Parse body (len bytes, need not end in a NUL) with tok (reset here,
 * reusable).  ids[0..n) must be distinct; the first item naming an id
 * decides it, later ones are ignored, as are items naming ids not asked
 * for and extra fields.  Accepted posters are appended to arena (an
 * append that cannot grow leaves that poster unset).  seed keys the id
 * table so a hostile reply cannot choose collisions.
 * Returns 0 with every ids[i] resolved, or -1: a bad body (not one JSON
 * object with an "items" array, trailing bytes, out of memory); on -1 the
 * outputs of ids[] are all ENR_REPLY_ABSENT and meaningless. */
int enr_upstream_reply_parse(struct json_tokener *tok, const char *body, size_t len,
                             enr_reply_id *ids, size_t n, uint64_t seed, enr_buf *arena);

#endif
