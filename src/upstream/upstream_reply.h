/*
 * upstream_reply.h: the pure part of the upstream client: the bytes of
 * one 200 reply plus the ids that call asked for, to the poster and
 * duration each id gets (docs/upstream.md, "Wire protocol").  No I/O, no libcurl,
 * so a fuzzer and unit tests can drive it directly.
 */
#ifndef ENR_UPSTREAM_REPLY_H
#define ENR_UPSTREAM_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "upstream/reply_id.h"

/* What one item of a reply can legitimately take, besides its id: the
 * poster with every byte escaped as JSON encoders do (\/ or \uXXXX for
 * a multi-byte character: 3 bytes per byte at most), the duration, the
 * keys and punctuation, and room for the extra fields docs/upstream.md allows
 * (on average over the reply).  The envelope and white space get
 * ENR_REPLY_SLACK once per reply. */
#define ENR_REPLY_ITEM_BYTES (3 * ENR_REPLY_POSTER_MAX + 1024)
#define ENR_REPLY_SLACK 16384
/* No reply is larger, whatever its call asked: what one call may hold in
 * memory.  The providers' APIs share it among their ids (api.h,
 * enr_api_item_cap). */
#define ENR_REPLY_BODY_MAX (4u << 20)

/* What the item of one id of id_len bytes can legitimately take in a
 * reply: the id counted at 6 bytes a byte (\uXXXX) besides the rest. */
static inline size_t enr_upstream_reply_item_cap(size_t id_len)
{
    return ENR_REPLY_ITEM_BYTES + 6 * id_len;
}

/* The largest reply a call for ids[0..n) can legitimately need (the
 * slack and each id's item cap); a larger one is refused unread. */
size_t enr_upstream_reply_cap(const enr_reply_id *ids, size_t n);

/* 1 when a JSON answer can carry the id's bytes unchanged whatever the
 * provider's encoder: strict UTF-8.  An id holding a lone surrogate
 * (WTF-8 ED A0..BF xx, from a "\ud800" escape in a request) is not: many
 * encoders write U+FFFD for it, and that item would answer an id holding
 * U+FFFD.  Such an id is never asked, and an answer's id whose decoding
 * replaced a lone surrogate names no id (reply_scan.h). */
int enr_reply_id_askable(const char *id, size_t len);

/* Parse body (len bytes, need not end in a NUL) in one pass, in memory
 * O(n + posters accepted).  ids[0..n) must be distinct; the first item naming an id
 * decides it, later ones are ignored, as are items naming ids not asked
 * for and extra fields.  Accepted posters are appended to arena (an
 * append that cannot grow leaves that poster unset).  seed keys the id
 * table so a hostile reply cannot choose collisions.
 * Returns 0 with every ids[i] resolved, or -1: a bad body (not one JSON
 * object with an "items" array, trailing bytes, nested deeper than
 * ENR_REPLY_MAX_DEPTH, out of memory); on -1 the outputs of ids[] are all
 * ENR_REPLY_ABSENT and meaningless and the arena is as it was. */
int enr_upstream_reply_parse(const char *body, size_t len, enr_reply_id *ids, size_t n,
                             uint64_t seed, enr_buf *arena);

#endif
