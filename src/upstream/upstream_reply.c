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
 * The scanner, the checks and the id table are reply_scan.c's, shared
 * with the readers of the providers' own APIs.  Syntax is RFC 8259;
 * inside strings, raw control (but NUL) and non-UTF-8 bytes are taken as
 * they are and an unpaired surrogate escape decodes to U+FFFD, as the
 * json-c parser this replaces did (posters are checked); ids compare as
 * bytes, and an item's id that held such an escape names no id, nor is an
 * id that is not strict UTF-8 ever matched (enr_reply_id_askable): a
 * decoding that merges two ids must not let one's answer serve the other.
 * Within the document the reading is json-c's: the last "items" member of
 * the root object counts, within an item the last occurrence of a key
 * counts, and a key is compared up to its first NUL.
 *
 * Invariants: an accepted poster is an absolute https:// URL with a host,
 * at most ENR_REPLY_POSTER_MAX bytes, strict UTF-8 with no control
 * character and no white space (ASCII or Unicode); an accepted duration
 * is finite, 0 <= d < ENR_REPLY_DURATION_LIMIT, and never -0.  A reply
 * either resolves every id or is rejected whole.  Ids are matched through
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
    unsigned lone;            /* unpaired surrogates in the last id: it names no asked id */
    const unsigned char *num; /* the last duration, when a number */
} item;

static int item_member(void *ctx, int key, int depth)
{
    item *it = ctx;
    enr_jscan *j = &it->r->j;

    if (key == K_ID && enr_jscan_at(j, '"')) {
        unsigned before = j->lone;
        int rc = enr_jscan_string(j, it->r->idbuf, it->r->idmax, &it->idlen);
        it->has_id = 1;
        it->lone = j->lone - before;
        return rc;
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
    if (!it.has_id || it.lone > 0 || (id = enr_rscan_claim(r, r->idbuf, it.idlen)) == NULL)
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

int enr_reply_id_askable(const char *id, size_t len)
{
    const unsigned char *s = (const unsigned char *)id;

    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xbf;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf; /* ED A0..BF: a surrogate (WTF-8) */
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        } else {
            return 0;
        }
        if (len - i <= need || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

int enr_upstream_reply_parse(const char *body, size_t len, enr_reply_id *ids, size_t n,
                             uint64_t seed, enr_buf *arena)
{
    static const enr_rscan_spec spec = {"items", 0, 0, enr_reply_id_askable, read_item};

    return enr_rscan_parse(body, len, ids, n, seed, arena, &spec);
}
