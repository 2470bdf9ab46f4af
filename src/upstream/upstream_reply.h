/*
 * upstream_reply.h: the pure part of the upstream client: the bytes of
 * one 200 reply plus the ids that call asked for, to the poster and
 * duration each id gets (docs/upstream.md, "Wire protocol").  No I/O, no libcurl,
 * so a fuzzer and unit tests can drive it directly.
 *
 * It is also the one place where an answer's id is decoded and matched
 * to the ids asked, for the aggregator's reader and every provider's
 * (api.h): enr_reply_string, enr_reply_match_*, enr_reply_id_askable.
 * A reader that decoded or compared ids its own way could let one id's
 * item answer another's, and poison the host's shared cache.
 */
#ifndef ENR_UPSTREAM_REPLY_H
#define ENR_UPSTREAM_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ENR_REPLY_POSTER_MAX 2048    /* docs/upstream.md: bytes of a poster URL */
#define ENR_REPLY_DURATION_LIMIT 1e7 /* docs/upstream.md: 0 <= duration < 10^7 */
#define ENR_REPLY_MAX_DEPTH 32       /* nested objects/arrays, the root counting as 1 */

/* What one item of a reply can legitimately take, besides its id: the
 * poster with every byte escaped as JSON encoders do (\/ or \uXXXX for
 * a multi-byte character: 3 bytes per byte at most), the duration, the
 * keys and punctuation, and room for the extra fields docs/upstream.md allows
 * (on average over the reply).  The envelope and white space get
 * ENR_REPLY_SLACK once per reply. */
#define ENR_REPLY_ITEM_BYTES (3 * ENR_REPLY_POSTER_MAX + 1024)
#define ENR_REPLY_SLACK 16384

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

/* The JSON string at s (on its opening quote; avail bytes readable),
 * decoded into out[0..cap) (out may be NULL: validated only); *len gets
 * the decoded length even past cap.  Escapes decode to the bytes the
 * engine makes of the same escapes in a request (engine/jstring.c): a
 * pair to one 4-byte sequence, a lone surrogate to its 3-byte WTF-8 form
 * (never U+FFFD); other bytes are taken as they are (a raw NUL ends the
 * input, as json-c's did).  Returns the bytes read through the closing
 * quote, or 0 on a syntax error. */
size_t enr_reply_string(const char *s, size_t avail, char *out, size_t cap, size_t *len);

/* 1 when a JSON answer can carry the id's bytes unchanged whatever the
 * provider's encoder: strict UTF-8.  An id holding a lone surrogate
 * (WTF-8 ED A0..BF xx, from a "\ud800" escape in a request) is not: many
 * encoders write U+FFFD for it, and that item would answer an id holding
 * U+FFFD.  Such an id is never asked. */
int enr_reply_id_askable(const char *id, size_t len);

/* The ids of one call, for matching an answer's decoded ids: exact bytes,
 * through a table seeded by seed (a hostile reply cannot choose
 * collisions).  find returns the asked id whose bytes are id[0..len)
 * (the first of duplicates), or NULL. */
typedef struct enr_reply_match {
    enr_reply_id *ids;
    size_t n, mask, idmax;
    uint32_t *table;
    uint64_t seed;
} enr_reply_match;

int enr_reply_match_init(enr_reply_match *m, enr_reply_id *ids, size_t n, uint64_t seed);
enr_reply_id *enr_reply_match_find(const enr_reply_match *m, const char *id, size_t len);
void enr_reply_match_free(enr_reply_match *m);

/* What the item of one id of id_len bytes can legitimately take in a
 * reply: the id counted at 6 bytes a byte (\uXXXX) besides the rest. */
static inline size_t enr_upstream_reply_item_cap(size_t id_len)
{
    return ENR_REPLY_ITEM_BYTES + 6 * id_len;
}

/* The largest reply a call for ids[0..n) can legitimately need (the
 * slack and each id's item cap); a larger one is refused unread. */
size_t enr_upstream_reply_cap(const enr_reply_id *ids, size_t n);

/* Parse body (len bytes, need not end in a NUL) in one pass, in memory
 * O(n + posters accepted).  An item answers the id whose bytes equal
 * its "id" decoded by enr_reply_string.  ids[0..n) must be distinct; the first item naming an id
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
