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
 * Syntax is RFC 8259 (no comments, trailing commas, NaN or leading
 * zeros).  Within the document the reading is json-c's: the last
 * "items" member of the root object counts, within an item the last
 * occurrence of a key counts, and a key is compared up to its first NUL.
 *
 * This file is also the one home of how an answer's id is decoded and
 * matched to the ids asked, for every reader (api.h): enr_reply_string()
 * decodes a JSON string the way the engine decodes the request's
 * (engine/jstring.c): escapes to the very bytes the engine made, a lone
 * surrogate escape to its WTF-8 form (never U+FFFD, which is another
 * id), a pair to one 4-byte sequence; raw bytes are taken as they are,
 * so an answer never turns one id's bytes into another's.
 * enr_reply_match_*() compare the decoded bytes with the bytes asked,
 * exactly; enr_reply_id_askable() says which ids a JSON answer can echo
 * unchanged at all (strict UTF-8), the others are never asked.
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
#include "base/hash.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KEY_MAX 8 /* the longest key read: "duration" */

static int poster_ok(const char *s, size_t n)
{
    size_t i = 8, host = 0;

    if (n > ENR_REPLY_POSTER_MAX || n < 9 || strncasecmp(s, "https://", 8) != 0)
        return 0;
    for (; i < n && s[i] != '/' && s[i] != '?' && s[i] != '#'; i++)
        host++;
    if (host == 0)
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f)
            return 0;
        if (ch >= 0x80) {
            /* Strict UTF-8 (no surrogates, no overlongs), and no C1
             * control or Unicode white space either. */
            uint32_t cp;
            size_t k, need = ch >= 0xf0 ? 3 : ch >= 0xe0 ? 2 : ch >= 0xc2 ? 1 : 0;
            if (need == 0 || ch > 0xf4 || i + need >= n)
                return 0;
            cp = ch & (0x3f >> need);
            for (k = 1; k <= need; k++) {
                unsigned char cc = (unsigned char)s[i + k];
                if ((cc & 0xc0) != 0x80)
                    return 0;
                cp = (cp << 6) | (cc & 0x3f);
            }
            if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0xa0) || cp == 0x1680 ||
                (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                cp == 0x205f || cp == 0x3000 || cp == 0xfeff)
                return 0;
            i += need;
        }
    }
    return 1;
}

static int duration_ok(double v, double *out)
{
    if (!isfinite(v) || v < 0 || v >= ENR_REPLY_DURATION_LIMIT)
        return 0;
    *out = v == 0 ? 0 : v; /* -0 becomes 0 */
    return 1;
}

/* Slot of id in the open-addressing table (index + 1, 0 empty). */
static uint32_t *id_slot(const enr_reply_match *m, const char *s, size_t len)
{
    for (size_t i = enr_hash_key(m->seed, 0, s, len) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t *slot = &m->table[i];
        if (*slot == 0)
            return slot;
        if (m->ids[*slot - 1].id_len == len && memcmp(m->ids[*slot - 1].id, s, len) == 0)
            return slot;
    }
}

int enr_reply_match_init(enr_reply_match *m, enr_reply_id *ids, size_t n, uint64_t seed)
{
    size_t tcap = 16;

    memset(m, 0, sizeof *m);
    if (n > UINT32_MAX / 4)
        return -1;
    while (tcap < 2 * n)
        tcap <<= 1;
    m->table = calloc(tcap, sizeof(*m->table));
    if (m->table == NULL)
        return -1;
    m->ids = ids;
    m->n = n;
    m->mask = tcap - 1;
    m->seed = seed;
    for (size_t i = 0; i < n; i++) {
        uint32_t *slot = id_slot(m, ids[i].id, ids[i].id_len);
        if (*slot == 0)
            *slot = (uint32_t)(i + 1); /* a duplicate id keeps its first index */
        if (ids[i].id_len > m->idmax)
            m->idmax = ids[i].id_len;
    }
    return 0;
}

enr_reply_id *enr_reply_match_find(const enr_reply_match *m, const char *id, size_t len)
{
    uint32_t *slot;

    if (len > m->idmax || m->table == NULL)
        return NULL;
    slot = id_slot(m, id, len);
    return *slot == 0 ? NULL : &m->ids[*slot - 1];
}

void enr_reply_match_free(enr_reply_match *m)
{
    free(m->table);
    m->table = NULL;
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

static void reset_ids(enr_reply_id *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ids[i].state = ENR_REPLY_ABSENT;
        ids[i].has_poster = ids[i].has_duration = 0;
        ids[i].poster_off = ids[i].poster_len = 0;
        ids[i].duration = 0;
    }
}

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

/* ---- the reader ---- */

typedef struct rd {
    const unsigned char *p, *end;
    enr_reply_id *ids;
    size_t n;
    enr_reply_match match;
    enr_buf *arena;
    size_t arena_start;
    char *idbuf; /* one candidate id: idmax bytes */
    size_t idmax;
    char poster[ENR_REPLY_POSTER_MAX];
} rd;

static void skip_ws(rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int hexval(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    return -1;
}

/* The code unit of "\\uXXXX" at p (6 bytes available), or -1. */
static long unit_at(const unsigned char *p, const unsigned char *end)
{
    long v = 0;

    if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
        return -1;
    for (int i = 2; i < 6; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Decoded bytes go to out[0..cap); *len counts them all, so a string
 * longer than cap is seen to be longer without being kept. */
static void put(char *out, size_t cap, size_t *len, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++, (*len)++)
        if (out != NULL && *len < cap)
            out[*len] = b[i];
}

static void put_cp(char *out, size_t cap, size_t *len, unsigned long cp)
{
    char b[4];

    if (cp < 0x80) {
        b[0] = (char)cp;
        put(out, cap, len, b, 1);
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        put(out, cap, len, b, 2);
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        put(out, cap, len, b, 3);
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        put(out, cap, len, b, 4);
    }
}

/* The character a one-letter JSON escape stands for, 0 if none. */
static char simple_escape(unsigned char e)
{
    switch (e) {
    case '"':
    case '\\':
    case '/':
        return (char)e;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return 0;
    }
}

size_t enr_reply_string(const char *s, size_t avail, char *out, size_t cap, size_t *len)
{
    const unsigned char *p, *end = (const unsigned char *)s + avail;

    *len = 0;
    if (avail < 2 || *s != '"')
        return 0;
    p = (const unsigned char *)s + 1;
    for (;;) {
        const unsigned char *q = p;
        long u;
        while (q < end && *q != '"' && *q != '\\' && *q != '\0')
            q++;
        put(out, cap, len, (const char *)p, (size_t)(q - p));
        if (q >= end || *q == '\0') /* json-c ends its input at a NUL byte */
            return 0;
        if (*q == '"')
            return (size_t)(q + 1 - (const unsigned char *)s);
        if (q + 1 >= end)
            return 0;
        if (q[1] != 'u') {
            char c = simple_escape(q[1]);
            if (c == 0)
                return 0;
            put(out, cap, len, &c, 1);
            p = q + 2;
            continue;
        }
        u = unit_at(q, end);
        if (u < 0)
            return 0;
        p = q + 6;
        if (u >= 0xd800 && u <= 0xdbff) {
            long lo = unit_at(p, end);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                put_cp(out, cap, len,
                       0x10000 + (((unsigned long)u - 0xd800) << 10) +
                           ((unsigned long)lo - 0xdc00));
                p += 6;
                continue;
            }
        }
        /* A lone surrogate keeps its own 3 bytes (WTF-8), as the engine
         * keeps it in a request's id: U+FFFD would be another id. */
        put_cp(out, cap, len, (unsigned long)u);
    }
}

/* A string at r->p (on its opening quote), decoded by enr_reply_string;
 * 0, or -1 on a syntax error. */
static int read_string(rd *r, char *out, size_t cap, size_t *len)
{
    size_t used = enr_reply_string((const char *)r->p, (size_t)(r->end - r->p), out, cap, len);

    if (used == 0)
        return -1;
    r->p += used;
    return 0;
}

/* A key, compared up to its first NUL (json-c keeps keys as C strings):
 * the index of the key among the names read, or -1 for any other key. */
enum { K_OTHER = -1, K_ITEMS, K_ID, K_POSTER, K_DURATION };

static int read_key(rd *r, int *key)
{
    static const char *const names[] = {"items", "id", "poster", "duration"};
    char k[KEY_MAX + 1];
    size_t len, klen;

    if (r->p >= r->end || *r->p != '"' || read_string(r, k, sizeof k, &len) != 0)
        return -1;
    klen = len < sizeof k ? len : sizeof k;
    for (size_t i = 0; i < klen; i++)
        if (k[i] == '\0') {
            klen = len = i;
            break;
        }
    *key = K_OTHER;
    for (int i = 0; i < 4 && len <= KEY_MAX; i++)
        if (strlen(names[i]) == len && memcmp(names[i], k, len) == 0)
            *key = i;
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':')
        return -1;
    r->p++;
    skip_ws(r);
    return 0;
}

static int read_number(rd *r)
{
    const unsigned char *p = r->p, *end = r->end;

    if (p < end && *p == '-')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return -1;
    if (*p == '0')
        p++;
    else
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    if (p < end && *p == '.') {
        const unsigned char *d = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return -1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        const unsigned char *d;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return -1;
    }
    r->p = p;
    return 0;
}

static int skip_value(rd *r, int depth);

/* After a member or element: ',' (1: another follows) or close (0). */
static int next_or_close(rd *r, unsigned char close)
{
    skip_ws(r);
    if (r->p >= r->end)
        return -1;
    if (*r->p == ',') {
        r->p++;
        skip_ws(r);
        return r->p < r->end ? 1 : -1; /* 1: r->p is on the next one */
    }
    if (*r->p == close) {
        r->p++;
        return 0;
    }
    return -1;
}

/* r->p on '{' or '[' opening the depth-th container. Returns 1 when it
 * has members/elements (r->p on the first), 0 when empty, -1 on error. */
static int open_container(rd *r, int depth)
{
    unsigned char close = *r->p == '{' ? '}' : ']';

    if (depth > ENR_REPLY_MAX_DEPTH)
        return -1;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    return r->p < r->end ? 1 : -1;
}

static int skip_value(rd *r, int depth)
{
    size_t len;
    int more, key;

    if (r->p >= r->end)
        return -1;
    switch (*r->p) {
    case '"':
        return read_string(r, NULL, 0, &len);
    case '{':
        for (more = open_container(r, depth); more == 1; more = next_or_close(r, '}'))
            if (read_key(r, &key) != 0 || skip_value(r, depth + 1) != 0)
                return -1;
        return more;
    case '[':
        for (more = open_container(r, depth); more == 1; more = next_or_close(r, ']'))
            if (skip_value(r, depth + 1) != 0)
                return -1;
        return more;
    case 't':
        if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
            r->p += 4;
            return 0;
        }
        return -1;
    case 'f':
        if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
            r->p += 5;
            return 0;
        }
        return -1;
    case 'n':
        if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
            r->p += 4;
            return 0;
        }
        return -1;
    default:
        return read_number(r);
    }
}

/* One element of "items" that is an object: its last "id", "poster" and
 * "duration" decide, once its closing brace is read. */
static int read_item(rd *r, int depth)
{
    const unsigned char *num = NULL; /* the last duration, when a number */
    size_t idlen = 0, plen = 0;
    int has_id = 0, has_poster = 0, more, key;

    for (more = open_container(r, depth); more == 1; more = next_or_close(r, '}')) {
        if (read_key(r, &key) != 0)
            return -1;
        if (key == K_ID || key == K_POSTER || key == K_DURATION) {
            int is_str = r->p < r->end && *r->p == '"';
            int is_num = r->p < r->end && (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'));
            const unsigned char *at = r->p;
            if (key == K_ID) {
                has_id = is_str;
                if (is_str ? read_string(r, r->idbuf, r->idmax, &idlen) : skip_value(r, depth + 1))
                    return -1;
            } else if (key == K_POSTER) {
                has_poster = is_str;
                if (is_str ? read_string(r, r->poster, sizeof r->poster, &plen)
                           : skip_value(r, depth + 1))
                    return -1;
            } else {
                num = is_num ? at : NULL;
                if (skip_value(r, depth + 1) != 0)
                    return -1;
            }
        } else if (skip_value(r, depth + 1) != 0) {
            return -1;
        }
    }
    if (more != 0)
        return -1;
    if (has_id && idlen <= r->idmax) {
        enr_reply_id *id = enr_reply_match_find(&r->match, r->idbuf, idlen);
        double d;
        if (id == NULL || id->state != ENR_REPLY_ABSENT)
            return 0; /* an id we did not ask for, or a duplicate */
        if (has_poster && plen <= sizeof r->poster && poster_ok(r->poster, plen)) {
            size_t off = r->arena->len;
            if (!r->arena->oom && enr_buf_reserve(r->arena, plen) == 0) {
                enr_buf_append(r->arena, r->poster, plen);
                id->poster_off = off;
                id->poster_len = plen;
                id->has_poster = 1;
            }
        }
        /* The number is followed by a delimiter the reader has checked, so
         * strtod stops at its end inside the body. */
        if (num != NULL && duration_ok(strtod((const char *)num, NULL), &d)) {
            id->duration = d;
            id->has_duration = 1;
        }
        /* An item with nothing usable tells no more than absence, but it
         * still decides the id: a later duplicate is ignored. */
        id->state = (id->has_poster || id->has_duration) ? ENR_REPLY_FOUND : ENR_REPLY_EMPTY;
    }
    return 0;
}

static int read_items(rd *r, int depth)
{
    int more;

    for (more = open_container(r, depth); more == 1; more = next_or_close(r, ']')) {
        int rc = *r->p == '{' ? read_item(r, depth + 1) : skip_value(r, depth + 1);
        if (rc != 0)
            return -1;
    }
    return more;
}

/* The root object; 0 when its last "items" member is an array. */
static int read_root(rd *r)
{
    int more, key, items_ok = 0;

    skip_ws(r);
    if (r->p >= r->end || *r->p != '{')
        return -1;
    for (more = open_container(r, 1); more == 1; more = next_or_close(r, '}')) {
        if (read_key(r, &key) != 0)
            return -1;
        if (key != K_ITEMS) {
            if (skip_value(r, 2) != 0)
                return -1;
            continue;
        }
        /* A later "items" replaces an earlier one. */
        reset_ids(r->ids, r->n);
        r->arena->len = r->arena_start;
        items_ok = r->p < r->end && *r->p == '[';
        if ((items_ok ? read_items(r, 2) : skip_value(r, 2)) != 0)
            return -1;
    }
    if (more != 0)
        return -1;
    skip_ws(r);
    return r->p == r->end && items_ok ? 0 : -1;
}

int enr_upstream_reply_parse(const char *body, size_t len, enr_reply_id *ids, size_t n,
                             uint64_t seed, enr_buf *arena)
{
    rd *r;
    int rc = -1;

    reset_ids(ids, n);
    if (len == 0 || len > INT_MAX || n > UINT32_MAX / 4)
        return -1;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -1;
    r->arena_start = arena->len;
    if (enr_reply_match_init(&r->match, ids, n, seed) != 0)
        goto out;
    r->idmax = r->match.idmax;
    r->idbuf = malloc(r->idmax + 1);
    if (r->idbuf == NULL)
        goto out;
    r->p = (const unsigned char *)body;
    r->end = r->p + len;
    r->ids = ids;
    r->n = n;
    r->arena = arena;
    rc = read_root(r);
out:
    if (rc != 0) {
        reset_ids(ids, n);
        arena->len = r->arena_start;
    }
    enr_reply_match_free(&r->match);
    free(r->idbuf);
    free(r);
    return rc;
}
