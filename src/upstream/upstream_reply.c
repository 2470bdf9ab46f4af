/*
 * upstream_reply.c: one upstream reply to the poster/duration of each id
 * the call asked for (upstream_reply.h, docs/upstream.md, "Wire protocol").
 *
 * The reply is hostile input: it is read in one pass by a purpose-built
 * streaming reader that keeps only what the call can use, never a tree.
 * Its memory is O(ids asked + posters accepted): the id table, one
 * candidate id (no longer than the longest id asked), one candidate
 * poster (ENR_REPLY_POSTER_MAX bytes) and a duration per item, whatever
 * the reply holds; nesting is bounded (ENR_REPLY_MAX_DEPTH), so is the
 * recursion.  A 4 MiB reply of {} items once cost a json-c tree of a
 * gigabyte; here it costs nothing but the scan.
 *
 * The scanner, the checks, the id decoding and the id table are
 * reply_scan.c's, shared with the readers of the providers' own APIs.
 * Syntax is RFC 8259 (no comments, trailing commas, NaN or leading
 * zeros).  Within the document the reading is json-c's: the last
 * "items" member of the root object counts, within an item the last
 * occurrence of a key counts, and a key is compared up to its first NUL.
 * An id is decoded as the engine decodes the request's
 * (enr_reply_string: a lone surrogate keeps its WTF-8 bytes, never
 * U+FFFD, which is another id) and compared with the bytes asked.
 *
 * Invariants: an accepted poster is an absolute https:// URL with a host,
 * at most ENR_REPLY_POSTER_MAX bytes, strict UTF-8 with no control
 * character and no white space (ASCII or Unicode); an accepted duration
 * is finite, 0 <= d < ENR_REPLY_DURATION_LIMIT, and never -0.  A reply
 * either resolves every id or is rejected whole.  An item answers only
 * the id whose bytes equal its decoded id.  Ids are matched through
 * a seeded table, so the work is linear in the reply whatever ids a
 * hostile upstream sends.  The reader never reads past body + len.
 */
#include "upstream/upstream_reply.h"
#include "upstream/reply_scan.h"

#include <stdint.h>
#include <stdlib.h>

size_t enr_upstream_reply_cap(const enr_reply_id *ids, size_t n)
{
    size_t cap = ENR_REPLY_SLACK;

    for (size_t i = 0; i < n; i++) {
        size_t item = enr_upstream_reply_item_cap(ids[i].id_len);
        if (cap > SIZE_MAX - item)
            return SIZE_MAX;
        cap += item;
    }
    return cap;
}

enum { K_ID, K_POSTER, K_DURATION };

/* One item being read: its last "id", "poster" and "duration". */
typedef struct item {
    enr_rscan *r;
    size_t idlen, plen;
    int has_id, has_poster;
    const unsigned char *num; /* the last duration, when a number */
} item;

static int item_member(void *ctx, int key, int depth)
{
    item *it = ctx;
    enr_jscan *j = &it->r->j;

    if (key == K_ID && enr_jscan_at(j, '"')) {
        it->has_id = 1;
        return enr_jscan_string(j, it->r->idbuf, it->r->idmax, &it->idlen);
    }
    if (key == K_POSTER && enr_jscan_at(j, '"')) {
        it->has_poster = 1;
        return enr_jscan_string(j, it->r->poster, sizeof it->r->poster, &it->plen);
    }
    if (key == K_DURATION)
        return enr_jscan_number_at(j, depth, &it->num);
    it->has_id &= key != K_ID;
    it->has_poster &= key != K_POSTER;
    return enr_jscan_skip(j, depth);
}

/* One element of "items" that is an object: its last "id", "poster" and
 * "duration" decide, once its closing brace is read. */
static int read_item(enr_rscan *r, int depth)
{
    static const char *const names[] = {"id", "poster", "duration"};
    item it = {.r = r};
    enr_reply_id *id;
    double d;

    if (enr_jscan_object(&r->j, depth, names, 3, item_member, &it) != 0)
        return -1;
    if (!it.has_id || (id = enr_rscan_claim(r, r->idbuf, it.idlen)) == NULL)
        return 0;
    if (it.has_poster && it.plen <= sizeof r->poster)
        enr_rscan_poster(r, id, r->poster, it.plen);
    /* The number is followed by a delimiter the reader has checked, so
     * strtod stops at its end inside the body; 0 is a duration here. */
    if (it.num != NULL && enr_reply_duration_ok(strtod((const char *)it.num, NULL), &d)) {
        id->duration = d;
        id->has_duration = 1;
    }
    enr_rscan_settle(id);
    return 0;
}

int enr_upstream_reply_parse(const char *body, size_t len, enr_reply_id *ids, size_t n,
                             uint64_t seed, enr_buf *arena)
{
    static const enr_rscan_spec spec = {"items", 0, 0, NULL, read_item};

    return enr_rscan_parse(body, len, ids, n, seed, arena, &spec);
}
